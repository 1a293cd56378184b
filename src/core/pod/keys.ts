/**
 * Per-run SSH keys and the pinned host key: `runs/<run-id>/ssh/`.
 *
 * Both keys are ed25519, generated in-process (ssh2's generator writes the
 * OpenSSH formats; no ssh-keygen needed). The pod's host key is sent in the
 * create call's env (base64 of its OpenSSH private key file) and never
 * written to disk here; its public half is pinned in `known_hosts` under a
 * `HostKeyAlias`, so a new public port after a pod reset never changes the
 * pinned key. No ssh config file is written: the user's own `ssh` gets every
 * option on its command line (./sshAccess.ts).
 */
import { HintedError } from '../errors';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { generateEd25519KeyPair } from '../exec/sshKeys';

export const CLIENT_KEY = 'id_ed25519';
export const CLIENT_PUBLIC_KEY = 'id_ed25519.pub';
/** What older versions wrote for `ssh -F`; removed wherever found (see {@link writeKnownHosts}). */
export const SSH_CONFIG = 'config';
export const KNOWN_HOSTS = 'known_hosts';

export type KeysErrorKind = 'invalid_alias' | 'invalid_endpoint' | 'io';

export class KeysError extends HintedError<KeysErrorKind> {
  declare readonly hint: string;

  constructor(
    kind: KeysErrorKind,
    message: string,
    /** What the user can do about it. */
    hint: string,
  ) {
    super(kind, message, hint);
    this.name = 'KeysError';
  }
}

export interface RunKeys {
  /** The client public key, one `ssh-ed25519 AAAA… overbrainer-<run-id>` line (for authorized_keys). */
  clientPublic: string;
  /** The pod's public host key, `ssh-ed25519 AAAA…` (pinned in known_hosts and pod.json). */
  hostPublic: string;
  /** Base64 of the pod's OpenSSH private host key file: only in memory, for the create call's env. */
  hostPrivateB64: string;
  /** The client private key file, absolute. */
  clientKeyPath: string;
}

/** Where Runpod says the pod answers SSH. */
export interface SshEndpoint {
  host: string;
  port: number;
  user: string;
}

const RUN_ID = /^[A-Za-z0-9_-]{1,64}$/;
const ALIAS = /^overbrainer-[A-Za-z0-9_-]{1,64}$/;

/** The SSH host alias of a run's pod, also its `HostKeyAlias`: `overbrainer-<run-id>`. */
export function alias(runId: string): string {
  if (!RUN_ID.test(runId)) {
    throw new KeysError(
      'invalid_alias',
      `${JSON.stringify(runId.slice(0, 80))} is not a run ID`,
      'Use a run ID from "runs ls".',
    );
  }
  return `overbrainer-${runId}`;
}

/**
 * The command opening a shell on a kept pod: `overbrainer runs ssh <id>`, which checks the run
 * folder and uses the target's `ssh_client` (./sshAccess.ts); never a command naming a file of
 * the run folder that a cloned repository could have put there.
 */
export function sshCommand(runId: string): string {
  alias(runId); // a run ID, or a KeysError
  return `overbrainer runs ssh ${runId}`;
}

function checkAlias(name: string): void {
  if (!ALIAS.test(name)) {
    throw new KeysError(
      'invalid_alias',
      `${JSON.stringify(name.slice(0, 80))} is not a run's SSH alias`,
      'Build it with alias(runId).',
    );
  }
}

function io(file: string, error: unknown, doing: string): KeysError {
  const code = (error as NodeJS.ErrnoException | undefined)?.code ?? 'unknown error';
  return new KeysError(
    'io',
    `cannot ${doing} ${file} (${code})`,
    'Check that the runs/ folder is writable, then retry.',
  );
}

/** `ssh-ed25519 AAAA… comment` → `ssh-ed25519 AAAA…`. */
export function keyFields(line: string): string {
  return line.trim().split(/\s+/).slice(0, 2).join(' ');
}

/** Creates `dir` with mode 700 (set again if it existed: mkdir's mode is masked by the umask). */
function ensurePrivateDir(dir: string): void {
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    fs.chmodSync(dir, 0o700);
  } catch (error) {
    throw io(dir, error, 'create');
  }
}

/** Replaces `file` with `content` at `mode` (removed first, so an old file's mode never survives). */
function writeFresh(file: string, content: string, mode: number): void {
  try {
    fs.rmSync(file, { force: true });
    fs.writeFileSync(file, content, { mode, flag: 'wx' });
    fs.chmodSync(file, mode);
  } catch (error) {
    throw io(file, error, 'write');
  }
}

/**
 * Generates the run's keys: the client key into `sshDir` (`id_ed25519`, mode
 * 0600, and `id_ed25519.pub`), the pod's host key only in memory. `sshDir` is
 * created with mode 700. Both keys carry `aliasName` as their comment.
 */
export function generateRunKeys(sshDir: string, aliasName: string): RunKeys {
  checkAlias(aliasName);
  ensurePrivateDir(sshDir);
  const dir = path.resolve(sshDir);
  // Not ssh2's generator: it drops a leading zero byte in ~1/256 keys, which sshd refuses.
  const clientPair = generateEd25519KeyPair(aliasName);
  const hostPair = generateEd25519KeyPair(aliasName);
  const client = { private: clientPair.privateKey, public: clientPair.publicKey };
  const host = { private: hostPair.privateKey, public: hostPair.publicKey };
  const clientKeyPath = path.join(dir, CLIENT_KEY);
  // OpenSSH wants the armored file to end with a line break.
  writeFresh(clientKeyPath, withNewline(client.private), 0o600);
  writeFresh(path.join(dir, CLIENT_PUBLIC_KEY), withNewline(client.public), 0o644);
  return {
    clientPublic: client.public.trim(),
    hostPublic: keyFields(host.public),
    hostPrivateB64: Buffer.from(withNewline(host.private), 'utf8').toString('base64'),
    clientKeyPath,
  };
}

function withNewline(text: string): string {
  return text.endsWith('\n') ? text : `${text}\n`;
}

/**
 * Refuses what Runpod (or a damaged pod.json) could give that no host or user name holds: a
 * space or a line break, and a leading `-`, which the system ssh would read as an option
 * (`-Fconfig` names a configuration file).
 */
export function checkEndpoint(endpoint: SshEndpoint): void {
  const hostOk = /^[A-Za-z0-9.:][A-Za-z0-9.:-]{0,252}$/.test(endpoint.host);
  const userOk = /^[A-Za-z0-9._][A-Za-z0-9._-]{0,63}$/.test(endpoint.user);
  const portOk = Number.isInteger(endpoint.port) && endpoint.port >= 1 && endpoint.port <= 65535;
  if (!hostOk || !userOk || !portOk) {
    const shown = JSON.stringify(
      `${String(endpoint.user).slice(0, 64)}@${String(endpoint.host).slice(0, 100)}:${String(endpoint.port)}`,
    );
    throw new KeysError(
      'invalid_endpoint',
      `Runpod gave an SSH endpoint no pod has: ${shown}`,
      'Nothing was connected; retry later, and report it if it persists.',
    );
  }
}

/**
 * Writes `known_hosts` into `sshDir` afresh: one line, `<alias> ssh-ed25519 AAAA…`, the pod's
 * pinned host key under its `HostKeyAlias` (a new public port after a pod reset changes nothing
 * here). A `config` left in `sshDir` (by an older version, or shipped in a cloned repository) is
 * removed: nothing of the product reads one, and no command it hands out names one. Returns the
 * file's absolute path.
 */
export function writeKnownHosts(sshDir: string, aliasName: string, hostPublic: string): string {
  checkAlias(aliasName);
  // One line, one ed25519 key (a comment allowed): anything else could pin more than the pod.
  const pinned = keyFields(hostPublic);
  if (!/^ssh-ed25519 [A-Za-z0-9+/]+={0,2}( [^\r\n]*)?$/.test(hostPublic.trim())) {
    throw new KeysError(
      'invalid_endpoint',
      'the pod host key to pin is not one ssh-ed25519 key',
      "Nothing was connected; the run's pod.json may be damaged.",
    );
  }
  ensurePrivateDir(sshDir);
  const dir = path.resolve(sshDir);
  const knownHosts = path.join(dir, KNOWN_HOSTS);
  writeFresh(knownHosts, `${aliasName} ${pinned}\n`, 0o600);
  try {
    fs.rmSync(path.join(dir, SSH_CONFIG), { force: true });
  } catch (error) {
    throw io(path.join(dir, SSH_CONFIG), error, 'remove');
  }
  return knownHosts;
}

/**
 * Removes the run's private client key once no pod of the run may exist, best
 * effort: true when it is gone (removed, or already absent), false when it
 * could not be removed (the caller warns).
 */
export function forgetClientKey(sshDir: string): boolean {
  try {
    fs.unlinkSync(path.join(sshDir, CLIENT_KEY));
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT';
  }
}
