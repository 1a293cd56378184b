/**
 * The user's own shell on a run's pod ("Open SSH Terminal", `runs ssh`, the command `runs show`
 * prints), never through a file a later command would trust for more than a host key.
 *
 * The command is `ssh -F none` with every option on its command line: `-F none` reads no
 * configuration file at all (not the run's, not ~/.ssh/config, not /etc/ssh/ssh_config), so a
 * `runs/<id>/ssh/config` shipped by a cloned repository, with a `ProxyCommand` or a `Match exec`,
 * runs nothing. The only files it names are the run's private key and its `known_hosts`, which is
 * written afresh from pod.json's pinned host key just before the command is made.
 *
 * A run folder Overbrainer did not write is refused first: its `ssh/` folder, private key and
 * pod.json must be this user's and private (a folder checked out by git has modes 755/644).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ENV_SSH_CLIENT } from '../config/env';
import type { OverbrainerConfig } from '../config/types';
import { HintedError } from '../errors';
import { shQuote } from '../exec/shell';
import { openShell, type OpenShellOptions, type ShellSession } from '../exec/sshShell';
import type { PodRecord } from '../runs/podRecord';
import { POD_FILE } from '../runs/podRecord';
import { SSH_DIR, type RunStore } from '../runs/store';
import { alias, checkEndpoint, CLIENT_KEY, writeKnownHosts, type SshEndpoint } from './keys';

export type SshAccessErrorKind =
  /** The run has no pod a shell can reach (none, deleted, never reachable). */
  | 'no_pod'
  /** The run's key is gone (forgotten once its pod was deleted, or never there). */
  | 'no_key'
  /** The run folder was not written by Overbrainer as this user (a cloned one, another user's). */
  | 'foreign_run';

export class SshAccessError extends HintedError<SshAccessErrorKind> {
  constructor(kind: SshAccessErrorKind, message: string, hint: string) {
    super(kind, message, hint);
    this.name = 'SshAccessError';
  }
}

/** Everything a shell on the run's pod needs, checked and with known_hosts written. */
export interface SshAccess {
  runId: string;
  /** `overbrainer-<run-id>`: the HostKeyAlias the host key is pinned under. */
  alias: string;
  endpoint: SshEndpoint;
  /** The run's private client key, absolute. */
  keyFile: string;
  /** The run's known_hosts, absolute, written just now. */
  knownHostsFile: string;
  /** The pinned host key, `ssh-ed25519 AAAA…`. */
  hostPublicKey: string;
}

/**
 * Which client opens the user's shells on a run's pod (`ssh_client` of its target): `openssh`,
 * the system `ssh` with the options below; `builtin`, Overbrainer's own SSH client (the one its
 * uploads and retrievals use), which needs no `ssh` on this machine.
 */
export type SshClientKind = 'openssh' | 'builtin';

/**
 * The `ssh_client` for a run of target `targetName`: its target's (OVERBRAINER_SSH_CLIENT
 * overrides, as the config parser applies it), else OVERBRAINER_SSH_CLIENT alone (no readable
 * overbrainer.toml, a target since removed), else `openssh`.
 */
export function sshClientFor(
  config: OverbrainerConfig | null,
  targetName: string,
  env: Readonly<Record<string, string | undefined>>,
): SshClientKind {
  const target = config === null ? undefined : config.targets[targetName];
  if (target?.kind === 'runpod') return target.sshClient;
  const fromEnv = env[ENV_SSH_CLIENT]?.trim();
  return fromEnv === 'builtin' ? 'builtin' : 'openssh';
}

/** Pod states with a pod a shell can reach. */
const REACHABLE: ReadonlySet<string> = new Set(['ready', 'running', 'kept', 'awaiting_retrieval']);

/** Whether `pod` is one a shell can be opened on (it exists and was reached). */
export function hasShell(pod: PodRecord | null): pod is PodRecord {
  return pod !== null && pod.podId !== null && REACHABLE.has(pod.state) && pod.ssh !== null;
}

/** The owner and mode rules, on systems that have them (not Windows). */
function checkPrivate(runDir: string, file: string, what: 'folder' | 'file', runId: string): void {
  let stat: fs.Stats;
  try {
    stat = fs.lstatSync(file);
  } catch {
    return; // a missing file is reported by its own check
  }
  const shown = ['runs', runId, ...path.relative(runDir, file).split(path.sep)].join('/');
  const foreign = (why: string): SshAccessError =>
    new SshAccessError(
      'foreign_run',
      `run ${runId} was not written by Overbrainer as you: ${shown} ${why}; nothing was run and nothing connected`,
      `If you did not start run ${runId} here (a cloned repository can hold a runs/ folder), delete runs/${runId}; Overbrainer writes its run folders private to you.`,
    );
  if (stat.isSymbolicLink()) throw foreign('is a symbolic link');
  if (what === 'folder' ? !stat.isDirectory() : !stat.isFile()) {
    throw foreign(`is not a ${what}`);
  }
  const uid = process.getuid?.();
  if (uid === undefined) return; // Windows: no POSIX owner or modes to check
  if (stat.uid !== uid) throw foreign(`belongs to user ${stat.uid}, not to you (${uid})`);
  if ((stat.mode & 0o077) !== 0) {
    throw foreign(
      `has mode ${(stat.mode & 0o777).toString(8)}, readable by others (Overbrainer writes ${what === 'folder' ? '700' : '600'})`,
    );
  }
}

/**
 * Checks that the run folder of `pod` is Overbrainer's and its pod reachable, writes its
 * known_hosts afresh from pod.json's pinned key and returns what a shell needs. Throws an
 * {@link SshAccessError} saying why not and what to do.
 */
export function prepareSshAccess(store: RunStore, pod: PodRecord): SshAccess {
  const runId = pod.runId;
  const runDir = store.runDir(runId);
  if (!hasShell(pod) || pod.ssh === null) {
    throw new SshAccessError(
      'no_pod',
      `run ${runId} has no pod to open a shell on (its pod is ${pod.podId === null ? 'not created' : pod.state.replace('_', ' ')}${pod.ssh === null && pod.podId !== null ? ', never reached' : ''})`,
      'A shell opens on a kept pod, or on the pod of a run still running.',
    );
  }
  const sshDir = path.join(runDir, SSH_DIR);
  const keyFile = path.join(sshDir, CLIENT_KEY);
  checkPrivate(runDir, path.join(runDir, POD_FILE), 'file', runId);
  checkPrivate(runDir, sshDir, 'folder', runId);
  if (!fs.existsSync(keyFile)) {
    throw new SshAccessError(
      'no_key',
      `the private key of run ${runId} is gone (runs/${runId}/ssh/${CLIENT_KEY}), so no shell can reach its pod`,
      `Remove the pod with "overbrainer pod rm ${runId}".`,
    );
  }
  checkPrivate(runDir, keyFile, 'file', runId);
  checkEndpoint(pod.ssh);
  const aliasName = alias(runId);
  const knownHostsFile = writeKnownHosts(sshDir, aliasName, pod.hostKey);
  return {
    runId,
    alias: aliasName,
    endpoint: { ...pod.ssh },
    keyFile: path.resolve(keyFile),
    knownHostsFile,
    hostPublicKey: pod.hostKey,
  };
}

/**
 * The arguments of the system `ssh` for `access` (after `ssh`, before a remote command): no
 * configuration file, the run's key only, its known_hosts only, the host key checked strictly.
 * `rel` maps the two file paths (e.g. relative to the folder the command is printed for).
 */
export function opensshArgs(access: SshAccess, rel: (file: string) => string = (f) => f): string[] {
  const { endpoint } = access;
  return [
    '-F',
    'none',
    '-i',
    tokens(rel(access.keyFile)),
    '-p',
    String(endpoint.port),
    '-o',
    'IdentitiesOnly=yes',
    '-o',
    'IdentityAgent=none',
    '-o',
    `UserKnownHostsFile=${tokens(rel(access.knownHostsFile))}`,
    '-o',
    'GlobalKnownHostsFile=none',
    '-o',
    `HostKeyAlias=${access.alias}`,
    '-o',
    'CheckHostIP=no',
    '-o',
    'StrictHostKeyChecking=yes',
    '-o',
    'UpdateHostKeys=no',
    '-o',
    'PasswordAuthentication=no',
    '-o',
    'KbdInteractiveAuthentication=no',
    `${endpoint.user}@${endpoint.host}`,
  ];
}

/** A path as ssh reads these options: `%` starts a token there, `%%` is one `%`. */
function tokens(file: string): string {
  return file.replace(/%/g, '%%');
}

/** A word as a POSIX shell reads it: bare when it holds nothing the shell would act on. */
function word(value: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(value) ? value : shQuote(value);
}

/**
 * The `ssh …` command line for `access`, to be typed in `cwd`: paths inside `cwd` relative to
 * it, others absolute. It names files, never a key's content.
 */
export function opensshCommandLine(access: SshAccess, cwd: string): string {
  const rel = (file: string): string => {
    const relative = path.relative(cwd, file);
    return relative.startsWith('..') || path.isAbsolute(relative)
      ? file
      : relative.split(path.sep).join('/');
  };
  return ['ssh', ...opensshArgs(access, rel)].map(word).join(' ');
}

/**
 * A shell on the pod of `access` over Overbrainer's own SSH client (`ssh_client = "builtin"`):
 * the pinned host key, the run's key, nothing else.
 */
export function openBuiltinShell(
  access: SshAccess,
  options: Pick<OpenShellOptions, 'connectTimeoutMs' | 'pty' | 'onOutput' | 'onLog'>,
): Promise<ShellSession> {
  let privateKey: Buffer;
  try {
    privateKey = fs.readFileSync(access.keyFile);
  } catch {
    return Promise.reject(
      new SshAccessError(
        'no_key',
        `the private key of run ${access.runId} could not be read, so no shell can reach its pod`,
        `Remove the pod with "overbrainer pod rm ${access.runId}".`,
      ),
    );
  }
  return openShell({
    ...options,
    host: access.endpoint.host,
    port: access.endpoint.port,
    username: access.endpoint.user,
    privateKey,
    hostPublicKey: access.hostPublicKey,
  });
}
