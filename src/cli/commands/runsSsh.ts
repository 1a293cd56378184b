/**
 * `runs ssh RUN_ID`: a shell on a run's pod with the target's `ssh_client`. `openssh` runs the
 * system `ssh` with every option on its command line and no configuration file (the command
 * `runs show` prints); `builtin` drives a shell over Overbrainer's own SSH client, this process's
 * stdin and stdout its terminal. The run folder is checked first and known_hosts written afresh
 * (core/pod/sshAccess.ts). A run of an ssh target opens in its directory on the user's machine:
 * their ssh with their SSH config, agent and known_hosts, or the builtin client trusting those.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { type OverbrainerConfig } from '../../core/flow/config';
import { runShell, type OpenShellOptions, type ShellSession } from '../../core/flow/ssh';
import { EXIT_FAILED, type CliTerminal, type Session } from '../session';

/** The command; its exit code is the shell's (ssh's own 255 when it could not connect). */
export async function runsSsh(s: Session, runId: string): Promise<number> {
  const dir = s.store.runDir(runId); // an ID that would leave runs/ is refused first
  if (!fs.existsSync(dir)) {
    s.io.stderr(`runs ssh: no run ${runId} in ${s.store.runsDir} (overbrainer runs ls lists them)`);
    return EXIT_FAILED;
  }
  const terminal = s.io.terminal;
  if (terminal === undefined) {
    s.io.stderr('runs ssh: this CLI has no terminal to hand to a shell');
    return EXIT_FAILED;
  }
  let config: OverbrainerConfig | null = null;
  try {
    config = s.config(false);
  } catch {
    // A broken overbrainer.toml does not keep a shell from a kept pod: OVERBRAINER_SSH_CLIENT or openssh.
  }
  // On the user's own machine for a run of an ssh target (their ssh, config, agent, known_hosts,
  // in its directory), else on the run's pod.
  const shell = runShell(s.workspace, runId, config, s.timingOf().connectTimeoutMs);
  return shell.client === 'openssh'
    ? systemSsh(s, shell.sshArgs)
    : builtinShell(s, terminal, shell.open);
}

/** The system ssh with `args` on this process's terminal; Ctrl-C is ssh's to handle. */
async function systemSsh(s: Session, args: string[]): Promise<number> {
  const removeInterrupt = s.io.onInterrupt(() => undefined);
  try {
    return await new Promise<number>((resolve) => {
      const child = spawn('ssh', args, { cwd: s.dir, stdio: 'inherit' });
      child.once('error', (error: NodeJS.ErrnoException) => {
        s.io.stderr(
          error.code === 'ENOENT'
            ? 'runs ssh: no ssh command on this machine: install OpenSSH, or set ssh_client = "builtin" on the target to use Overbrainer\'s own client'
            : `runs ssh: cannot start ssh (${error.code ?? error.message})`,
        );
        resolve(EXIT_FAILED);
      });
      child.once('close', (code) => resolve(code ?? EXIT_FAILED));
    });
  } finally {
    removeInterrupt();
  }
}

/** A shell over Overbrainer's SSH client: a pseudo-terminal when this process has one. */
async function builtinShell(
  s: Session,
  terminal: CliTerminal,
  open: (options: Pick<OpenShellOptions, 'pty' | 'onOutput'>) => Promise<ShellSession>,
): Promise<number> {
  const { stdin, stdout } = terminal;
  const tty = stdin.isTTY === true && stdout.isTTY === true;
  const size = (): { columns: number; rows: number } => ({
    columns: stdout.columns || 80,
    rows: stdout.rows || 24,
  });
  const shell: ShellSession = await open({
    pty: tty ? { ...size(), term: s.env.TERM?.trim() || 'xterm-256color' } : null,
    onOutput: (data) => stdout.write(data),
  });
  const onData = (data: Buffer): void => shell.write(data);
  const onEnd = (): void => shell.end();
  const onResize = (): void => shell.resize(size());
  // Without a terminal, Ctrl-C reaches this process: it ends the shell (with one, it is a key).
  const removeInterrupt = s.io.onInterrupt(() => shell.close());
  if (tty) stdin.setRawMode(true);
  stdin.on('data', onData);
  stdin.once('end', onEnd);
  stdout.on('resize', onResize);
  try {
    return (await shell.done) ?? EXIT_FAILED;
  } finally {
    if (tty) stdin.setRawMode(false);
    stdin.off('data', onData);
    stdin.off('end', onEnd);
    stdin.pause();
    stdout.off('resize', onResize);
    removeInterrupt();
  }
}
