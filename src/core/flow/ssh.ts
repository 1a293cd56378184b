/**
 * SSH into a run's pod as the front ends offer it (`runs ssh`, `runs show`, VS Code's terminal):
 * the access prepared from the run's records ({@link podShell}), then the user's ssh client or the
 * built-in shell.
 */
import type { OverbrainerConfig } from '../config/types';
import { prepareSshAccess, sshClientFor, SshAccessError } from '../pod/sshAccess';
import type { SshAccess, SshClientKind } from '../pod/sshAccess';
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
export type { ShellSession, ShellSize } from '../exec/sshShell';

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
