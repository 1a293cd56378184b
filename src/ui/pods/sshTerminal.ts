/**
 * Open SSH Terminal: a shell on a run's pod in a VS Code terminal, with the client the run's
 * target names (`ssh_client`): `openssh`, the system `ssh` with every option on its command line
 * and no configuration file (`-F none`: a `runs/<id>/ssh/config` a cloned repository shipped
 * runs nothing); `builtin`, a pseudo-terminal over Overbrainer's own SSH client. Either way the
 * run folder is checked first (core/pod/sshAccess.ts) and known_hosts written afresh. A run on
 * the user's own machine (`kind = "ssh"`) opens their ssh with their SSH config, agent and
 * known_hosts in the run's directory there (`builtin`: Overbrainer's client trusting the same).
 */
import { StringDecoder } from 'node:string_decoder';
import type * as vscode from 'vscode';
import {
  builtinPodShell,
  runShell,
  type RunShell,
  type ShellSession,
  type ShellSize,
  type SshAccess,
} from '../../core/flow/ssh';
import { Emitter } from '../emitter';
import type { UiContext } from '../uiContext';
import { describeError } from '../../core/errors';

const REACHABLE = new Set(['ready', 'running', 'kept', 'awaiting_retrieval']);

export async function openSshTerminal(ctx: UiContext, arg: unknown): Promise<void> {
  if (!(await ctx.requireTrust('open an SSH connection'))) return;
  const run = await ctx.pickRun(
    arg,
    // A pod a shell reaches, or a run on the user's machine whose job runs.
    (r) => (r.pod !== null ? REACHABLE.has(r.pod.state) : r.state === 'running'),
    'open a terminal on',
  );
  if (!run) return;
  const folder = ctx.folderOfRun(run);
  if (!folder) return;
  const session = await ctx.session(folder);
  try {
    const name = `Overbrainer ${run.id}`;
    const timeoutMs = session.workspace.timing.connectTimeoutMs;
    const shell = runShell(session.workspace, run.id, session.configOrNull(), timeoutMs);
    // The system ssh with its arguments, or a pseudo-terminal over Overbrainer's own client.
    const terminal =
      shell.client === 'openssh'
        ? ctx.window.createTerminal({
            name,
            cwd: folder.uri,
            shellPath: 'ssh',
            shellArgs: shell.sshArgs,
          })
        : ctx.window.createTerminal({ name, pty: shellTerminal(shell) });
    terminal.show();
  } catch (error) {
    await ctx.showError('Cannot open a terminal', error);
  } finally {
    await session.close();
  }
}

/**
 * A pseudo-terminal over Overbrainer's SSH client: connects when VS Code opens it, forwards
 * keys and size, closes with the shell. A connection that fails is said in the terminal, which
 * stays until a key is pressed.
 */
export function builtinTerminal(
  access: SshAccess,
  connectTimeoutMs: number,
): vscode.Pseudoterminal {
  return shellTerminal(builtinPodShell(access, connectTimeoutMs));
}

/** A pseudo-terminal over the builtin client's `shell` (as {@link builtinTerminal}). */
function shellTerminal({
  where,
  open,
}: Extract<RunShell, { client: 'builtin' }>): vscode.Pseudoterminal {
  const written = new Emitter<string>();
  const closed = new Emitter<number | void>();
  const decoder = new StringDecoder('utf8');
  let shell: ShellSession | null = null;
  let size: ShellSize = { columns: 80, rows: 24 };
  const typedEarly: string[] = [];
  let state: 'connecting' | 'open' | 'failed' | 'closed' = 'connecting';
  const finish = (code: number | void): void => {
    if (state === 'closed') return;
    state = 'closed';
    closed.fire(code);
  };
  return {
    onDidWrite: written.event,
    onDidClose: closed.event,
    open: (dimensions) => {
      if (dimensions) size = { columns: dimensions.columns, rows: dimensions.rows };
      written.fire(`Connecting to ${where} with Overbrainer's SSH client…\r\n`);
      open({
        pty: { ...size, term: 'xterm-256color' },
        onOutput: (data) => written.fire(decoder.write(data)),
      }).then(
        (opened) => {
          if (state !== 'connecting') {
            opened.close();
            return;
          }
          shell = opened;
          state = 'open';
          opened.resize(size);
          for (const data of typedEarly.splice(0)) opened.write(data);
          void opened.done.then((code) => finish(code ?? undefined));
        },
        (error: unknown) => {
          if (state !== 'connecting') return;
          state = 'failed';
          written.fire(
            `\r\n${describeError(error)}\r\n\r\nPress any key to close this terminal.\r\n`,
          );
        },
      );
    },
    handleInput: (data) => {
      if (state === 'failed') finish(1);
      else if (shell !== null) shell.write(data);
      else if (state === 'connecting') typedEarly.push(data);
    },
    setDimensions: (dimensions) => {
      size = { columns: dimensions.columns, rows: dimensions.rows };
      shell?.resize(size);
    },
    close: () => {
      state = 'closed';
      shell?.close();
    },
  };
}
