/**
 * A pod (a real sshd on loopback) whose commands find `scripts` first on their PATH (via BASH_ENV,
 * read by the login shell of every session): a lying `find`, a `tar` that damages what it writes.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SshExecutor } from '../../src/core/exec/ssh';
import { executorOptions, startSshd, type Sshd } from './sshd';

export interface PodWithTools {
  sshd: Sshd;
  /** The folder holding bin/ (the scripts): a script may leave notes beside it. */
  tools: string;
  executor: SshExecutor;
  close: () => Promise<void>;
}

/** `scripts` by command name; `root` shares the remote side with another sshd. */
export async function podWithTools(
  scripts: Record<string, string>,
  root?: string,
): Promise<PodWithTools> {
  const tools = mkdtempSync(join(tmpdir(), 'ob-pod-tools-'));
  mkdirSync(join(tools, 'bin'));
  for (const [name, body] of Object.entries(scripts)) {
    writeFileSync(join(tools, 'bin', name), body);
    chmodSync(join(tools, 'bin', name), 0o755);
  }
  writeFileSync(join(tools, 'rc'), `PATH=${join(tools, 'bin')}:$PATH; export PATH\n`);
  const sshd = await startSshd({ env: { BASH_ENV: join(tools, 'rc') }, root });
  const executor = await SshExecutor.connect(executorOptions(sshd));
  return {
    sshd,
    tools,
    executor,
    close: async () => {
      executor.dispose();
      await sshd.stop();
      rmSync(tools, { recursive: true, force: true });
    },
  };
}
