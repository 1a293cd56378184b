/**
 * The user's own machine (`kind = "ssh"`) reached as their ssh would reach it: the address
 * resolved through their SSH config (`ssh -G`, which reads `~/.ssh/config`), their agent and
 * unencrypted identity files for the login, and the host key checked against their known_hosts.
 * A machine their known_hosts does not list is refused before anything is sent, never accepted.
 */
import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { SshHostAddress } from '../config/types';
import { ExecError } from './executor';
import { SshExecutor, type SshExecutorOptions } from './ssh';
import { knownHostsName, type SshTarget } from './sshConnection';

/** What `ssh -G` (or its defaults without an ssh command) says about a destination. */
export interface ResolvedHost {
  hostname: string;
  port: number;
  user: string;
  /** The name known_hosts is searched under (`HostKeyAlias`, else the host name). */
  keyAlias: string;
  identityFiles: string[];
  knownHostsFiles: string[];
}

type Env = Readonly<Record<string, string | undefined>>;

/** The home the user's SSH files are under: HOME, as their shell has it. */
function homeOf(env: Env): string {
  return env.HOME ?? os.homedir();
}

function expandHome(file: string, env: Env): string {
  return file.startsWith('~/') ? path.join(homeOf(env), file.slice(2)) : file;
}

/**
 * Resolves `address` through the user's SSH config (`ssh -G -F ~/.ssh/config`); without an ssh
 * command, OpenSSH's defaults.
 */
export async function resolveHost(address: SshHostAddress, env: Env): Promise<ResolvedHost> {
  const home = homeOf(env);
  const config = path.join(home, '.ssh', 'config');
  const args = ['-G', '-F', fs.existsSync(config) ? config : '/dev/null'];
  if (address.port !== null) args.push('-p', String(address.port));
  args.push('-l', address.user, '--', address.host);
  const out = await new Promise<string | null>((resolve) => {
    execFile('ssh', args, { timeout: 10_000, env: { ...process.env, HOME: home } }, (e, stdout) =>
      resolve(e === null ? stdout : null),
    );
  });
  const defaults: ResolvedHost = {
    hostname: address.host,
    port: address.port ?? 22,
    user: address.user,
    keyAlias: address.host,
    identityFiles: ['id_rsa', 'id_ecdsa', 'id_ed25519'].map((f) => path.join(home, '.ssh', f)),
    knownHostsFiles: [path.join(home, '.ssh', 'known_hosts')],
  };
  if (out === null) return defaults;
  const values = new Map<string, string[]>();
  for (const line of out.split('\n')) {
    const at = line.indexOf(' ');
    if (at <= 0) continue;
    const key = line.slice(0, at);
    values.set(key, [...(values.get(key) ?? []), line.slice(at + 1).trim()]);
  }
  const one = (key: string): string | undefined => values.get(key)?.[0];
  const hostname = one('hostname') ?? address.host;
  return {
    hostname,
    port: Number(one('port') ?? address.port ?? 22),
    user: one('user') ?? address.user,
    keyAlias: one('hostkeyalias') ?? hostname,
    identityFiles: (values.get('identityfile') ?? []).map((f) => expandHome(f, env)),
    knownHostsFiles: (one('userknownhostsfile') ?? '')
      .split(/\s+/)
      .filter((f) => f !== '')
      .map((f) => expandHome(f, env)),
  };
}

/** One `known_hosts` host pattern (`*`, `?`) matched against a name. */
function patternMatches(pattern: string, name: string): boolean {
  const escaped = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${escaped}$`, 'i').test(name);
}

/** Whether a known_hosts line's host field (patterns, `!negations`, or `|1|salt|hash`) names `name`. */
function hostFieldMatches(field: string, name: string): boolean {
  if (field.startsWith('|1|')) {
    const [, , salt, hash] = field.split('|');
    if (salt === undefined || hash === undefined) return false;
    const mac = createHmac('sha1', Buffer.from(salt, 'base64')).update(name).digest('base64');
    return mac === hash;
  }
  let matched = false;
  for (const pattern of field.split(',')) {
    if (pattern.startsWith('!')) {
      if (patternMatches(pattern.slice(1), name)) return false;
    } else if (patternMatches(pattern, name)) {
      matched = true;
    }
  }
  return matched;
}

/** The host keys `files` list for `name` (`@revoked` keys left out; CA lines are not read). */
export function knownHostKeys(files: string[], name: string): { type: string; blob: Buffer }[] {
  const keys: { type: string; blob: Buffer }[] = [];
  const revoked: Buffer[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const raw of text.split('\n')) {
      const line = raw.trim();
      if (line === '' || line.startsWith('#')) continue;
      const fields = line.split(/\s+/);
      const marker = fields[0]!.startsWith('@') ? fields.shift()! : null;
      if (marker === '@cert-authority') continue;
      const [hosts, type, base64] = fields;
      if (hosts === undefined || type === undefined || base64 === undefined) continue;
      if (!hostFieldMatches(hosts, name)) continue;
      const blob = Buffer.from(base64, 'base64');
      if (marker === '@revoked') revoked.push(blob);
      else keys.push({ type, blob });
    }
  }
  return keys.filter((key) => !revoked.some((r) => r.equals(key.blob)));
}

/** The first identity file that exists and is not passphrase-protected (the agent holds those). */
function usableIdentity(files: string[]): Buffer | undefined {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { utils } = require('ssh2') as typeof import('ssh2');
  for (const file of files) {
    let key: Buffer;
    try {
      key = fs.readFileSync(file);
    } catch {
      continue;
    }
    if (!(utils.parseKey(key) instanceof Error)) return key;
  }
  return undefined;
}

export type UserHostOptions = Omit<SshExecutorOptions, 'host' | 'port' | 'username'> & {
  /** HOME and SSH_AUTH_SOCK are read from it. */
  env: Env;
};

/**
 * How to reach the user's own machine at `address` (its resolved endpoint, their known_hosts'
 * keys for it, their agent or identity file). Refuses with `host_key` when their known_hosts
 * lists no key for it (nothing sent; they accept it once with their own ssh); with `auth` when
 * neither their agent nor an identity file is there. A key it presents that is not listed is
 * refused at the connection.
 */
export async function userHostTarget(address: SshHostAddress, env: Env): Promise<SshTarget> {
  const host = await resolveHost(address, env);
  const name = knownHostsName(host.keyAlias, host.port);
  const hostKeys = knownHostKeys(host.knownHostsFiles, name);
  const dest = `${host.user}@${host.hostname}`;
  const sshCommand = `ssh${host.port === 22 ? '' : ` -p ${host.port}`} ${dest}`;
  if (hostKeys.length === 0) {
    throw new ExecError(
      'host_key',
      `the host key of ${dest}:${host.port} is unknown: your known_hosts (${host.knownHostsFiles.join(', ') || 'none'}) ` +
        `has no entry for ${name}, and Overbrainer never accepts a host key on its own: refused before anything was sent`,
      {
        hint: `Connect once with \`${sshCommand}\`, check the fingerprint it shows against the machine's own, accept it, then run the command again.`,
      },
    );
  }
  const agent =
    env.SSH_AUTH_SOCK === undefined || env.SSH_AUTH_SOCK === '' ? undefined : env.SSH_AUTH_SOCK;
  const privateKey = usableIdentity(host.identityFiles);
  if (agent === undefined && privateKey === undefined) {
    throw new ExecError(
      'auth',
      `no SSH key to log in to ${dest}: no agent (SSH_AUTH_SOCK is not set) and no unencrypted identity file (${host.identityFiles.join(', ')})`,
      {
        hint: `Start your SSH agent and add your key (\`ssh-add\`), check that \`${sshCommand} true\` works, then run the command again.`,
      },
    );
  }
  return {
    host: host.hostname,
    port: host.port,
    username: host.user,
    ...(privateKey === undefined ? {} : { privateKey }),
    userHost: {
      hostKeys,
      knownHostsFiles: host.knownHostsFiles,
      ...(agent === undefined ? {} : { agent }),
    },
  };
}

/** Connects to the user's own machine at `address`, as {@link userHostTarget} says. */
export async function connectUserHost(
  address: SshHostAddress,
  options: UserHostOptions,
): Promise<SshExecutor> {
  const { env, ...rest } = options;
  return SshExecutor.connect({ ...rest, ...(await userHostTarget(address, env)) });
}
