/**
 * SSH into a run's pod as the front ends offer it (`runs ssh`, `runs show`, VS Code's terminal):
 * the access prepared from the run's records, the user's ssh client or the built-in shell.
 */
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
} from '../pod/sshAccess';
export type { ShellSession, ShellSize } from '../exec/sshShell';
