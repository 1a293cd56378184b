/**
 * SSH into a run's pod as the front ends offer it (`runs ssh`, `runs show`, VS Code's terminal):
 * the access prepared from the run's records ({@link podShell}), then the user's ssh client or the
 * built-in shell.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { sshHostEnvVar, type OverbrainerConfig, type SshHostAddress } from '../config/types';
import { shQuote } from '../exec/shell';
import { openShell, type OpenShellOptions, type ShellSession } from '../exec/sshShell';
import { userHostTarget } from '../exec/userHost';
import {
  openBuiltinShell,
  opensshArgs,
  prepareSshAccess,
  sshClientFor,
  SshAccessError,
} from '../pod/sshAccess';
import type { SshAccess, SshClientKind } from '../pod/sshAccess';
import { FlowError } from './deps';
import { untrustedError, type Workspace } from './workspace';

export { KeysError, sshCommand } from '../pod/keys';
export {
  hasShell,
  openBuiltinShell,
  opensshArgs,
  opensshCommandLine,
  prepareSshAccess,
  sshClientFor,
  SshAccessError,
  type SshAccess,
  type SshClientKind,
} from '../pod/sshAccess';
export type { OpenShellOptions, ShellSession, ShellSize } from '../exec/sshShell';

/** A shell on a run's pod, ready to open: its access checked and the client its target names. */
export interface PodShell {
  access: SshAccess;
  /** `ssh_client` of the run's target (OVERBRAINER_SSH_CLIENT overrides; else `openssh`). */
  client: SshClientKind;
}

/**
 * The shell `runs ssh` and Open SSH Terminal open on the pod of run `runId`: the run folder
 * checked to be Overbrainer's, its known_hosts written afresh from pod.json's pinned key, and
 * the client from `config` (null: no readable overbrainer.toml). Throws an SshAccessError saying
 * why not and what to do, a SetupError in a folder not trusted.
 */
export function podShell(ws: Workspace, runId: string, config: OverbrainerConfig | null): PodShell {
  if (!ws.trusted) throw untrustedError('open an SSH connection');
  const run = ws.store.loadRun(runId);
  const pod = ws.store.loadPod(runId);
  if (pod === null) {
    throw new SshAccessError(
      'no_pod',
      `run ${runId} has no pod record (runs/${runId}/pod.json)`,
      'A shell opens on a kept pod, or on the pod of a run still running.',
    );
  }
  return {
    access: prepareSshAccess(ws.store, pod),
    client: sshClientFor(config, run.target, ws.env),
  };
}

/**
 * A shell on the user's own machine (a run on an ssh target) in the run's directory there: the
 * user's own ssh with their SSH config, agent and known_hosts (`openssh`), or Overbrainer's client
 * trusting the same known_hosts (`builtin`). Nothing of the run folder is read for it.
 */
export interface HostShell {
  runId: string;
  address: SshHostAddress;
  /** The run's directory on the machine. */
  remoteDir: string;
  client: SshClientKind;
  /** HOME, SSH_AUTH_SOCK: whose SSH files and agent. */
  env: Readonly<Record<string, string | undefined>>;
}

/**
 * The shell on the machine of run `runId` when it ran on an ssh target of `config`, null when
 * not (a pod's run: then {@link podShell}). Throws saying what to do when the target has no
 * address, an SshAccessError for a run of this machine, a SetupError in a folder not trusted.
 */
export function hostShell(
  ws: Workspace,
  runId: string,
  config: OverbrainerConfig | null,
): HostShell | null {
  if (!ws.trusted) throw untrustedError('open an SSH connection');
  const run = ws.store.loadRun(runId);
  if (ws.store.loadPod(runId) !== null) return null;
  if (run.remoteDir === ws.store.runDir(runId)) {
    throw new SshAccessError(
      'no_pod',
      `run ${runId} ran on this machine: it has no pod or machine to open a shell on`,
      `Its files are in runs/${runId}.`,
    );
  }
  const target = config?.targets[run.target];
  // Not (or no longer) an ssh target: a run that lost its pod record, as podShell says.
  if (target?.kind !== 'ssh') return null;
  if (target.host === null) {
    const envVar = sshHostEnvVar(target.name);
    throw new FlowError(
      'bad_config',
      `target "${target.name}" has no address: ${envVar} is not set`,
      `Set ${envVar}=user@host[:port] (the environment only), then open the terminal again.`,
    );
  }
  return {
    runId,
    address: target.host,
    remoteDir: run.remoteDir,
    client: target.sshClient,
    env: ws.env,
  };
}

/** The shell command run on the machine: into the run's directory, then the user's login shell. */
function intoRunDir(shell: HostShell): string {
  return `cd ${shQuote(shell.remoteDir)}; exec "\${SHELL:-/bin/sh}" -l`;
}

/**
 * The system ssh's arguments for {@link HostShell}: the user's SSH config (`-F` their
 * `~/.ssh/config`, as Overbrainer's own connections read it), a terminal, the address as they
 * gave it; never a key, a secret or an option that weakens host key checking.
 */
export function hostSshArgs(shell: HostShell): string[] {
  const home = shell.env.HOME ?? os.homedir();
  const config = path.join(home, '.ssh', 'config');
  const { user, host, port } = shell.address;
  return [
    ...(fs.existsSync(config) ? ['-F', config] : []),
    '-t',
    ...(port === null ? [] : ['-p', String(port)]),
    '--',
    `${user}@${host}`,
    intoRunDir(shell),
  ];
}

/** `user@host[:port]` of a {@link HostShell}, as the terminal names it. */
export function hostShellWhere(shell: HostShell): string {
  const { user, host, port } = shell.address;
  return `${user}@${host}${port === null ? '' : `:${port}`}`;
}

/**
 * A shell on the machine over Overbrainer's SSH client (`ssh_client = "builtin"`): their
 * known_hosts, agent and identity files as for the runs; it starts in the run's directory.
 */
export async function openHostShell(
  shell: HostShell,
  options: Pick<OpenShellOptions, 'connectTimeoutMs' | 'pty' | 'onOutput' | 'onLog'>,
): Promise<ShellSession> {
  const opened = await openShell({
    ...options,
    ...(await userHostTarget(shell.address, shell.env)),
  });
  opened.write(`${intoRunDir(shell)}\n`);
  return opened;
}

/**
 * The shell `runs ssh` and Open SSH Terminal open for run `runId`, either client: the system ssh
 * with its arguments (`openssh`), or Overbrainer's own client on `where` (`builtin`), its shell
 * opened by `open`. On the user's machine for a run of an ssh target ({@link hostShell}), else on
 * the run's pod ({@link podShell}); throws as they do.
 */
export type RunShell =
  | { client: 'openssh'; sshArgs: string[] }
  | {
      client: 'builtin';
      where: string;
      open: (options: Pick<OpenShellOptions, 'pty' | 'onOutput'>) => Promise<ShellSession>;
    };

export function runShell(
  ws: Workspace,
  runId: string,
  config: OverbrainerConfig | null,
  connectTimeoutMs: number,
): RunShell {
  const onHost = hostShell(ws, runId, config);
  if (onHost !== null) {
    if (onHost.client === 'openssh') return { client: 'openssh', sshArgs: hostSshArgs(onHost) };
    return {
      client: 'builtin',
      where: hostShellWhere(onHost),
      open: (options) => openHostShell(onHost, { ...options, connectTimeoutMs }),
    };
  }
  const { access, client } = podShell(ws, runId, config);
  return client === 'openssh'
    ? { client: 'openssh', sshArgs: opensshArgs(access) }
    : builtinPodShell(access, connectTimeoutMs);
}

/** The builtin client's shell on a pod, as {@link runShell} gives it. */
export function builtinPodShell(
  access: SshAccess,
  connectTimeoutMs: number,
): Extract<RunShell, { client: 'builtin' }> {
  const { user, host, port } = access.endpoint;
  return {
    client: 'builtin',
    where: `${user}@${host}:${port}`,
    open: (options) => openBuiltinShell(access, { ...options, connectTimeoutMs }),
  };
}
