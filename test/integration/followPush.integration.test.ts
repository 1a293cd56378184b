/**
 * Following at almost no cost: the pod's watcher (the stream command) pushes the job's end and
 * signs of life on the one long-lived channel, so the follower asks nothing while it speaks.
 * Real OpenSSH sshd, the real SshExecutor, the real job wrapper and examples/tiny/train.py.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { SshExecutor } from '../../src/core/exec/ssh';
import { scaleTiming } from '../../src/core/timing';
import { PUSH_ALIVE, silenceLimitMs } from '../../src/core/train/follow';
import { jobScript, startJob } from '../../src/core/train/job';
import { executorOptions, killAll, startSshd, type Sshd } from '../helpers/sshd';
import { followed } from '../helpers/followed';
import { metricsOf } from '../helpers/jobShells';

const EXAMPLE = path.resolve(__dirname, '..', '..', 'examples', 'tiny');

/** The executor with its calls counted: what following costs in SSH requests. */
function counted(inner: SshExecutor): { executor: SshExecutor; calls: Record<string, number> } {
  const calls: Record<string, number> = { exec: 0, stream: 0, readRange: 0 };
  const executor = Object.create(inner) as SshExecutor;
  for (const name of Object.keys(calls) as ('exec' | 'stream' | 'readRange')[]) {
    const original = inner[name].bind(inner) as (...args: unknown[]) => unknown;
    (executor as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
      calls[name]!++;
      return original(...args);
    };
  }
  return { executor, calls };
}

/** Local pids whose command line holds `text` (the pod here is this machine). */
function pidsWith(text: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(text)) pids.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

/** A process's parent and group from /proc/PID/stat, or null once it is gone. */
function parentAndGroup(pid: number): { ppid: number; pgid: number } | null {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return { ppid: Number(fields[1]), pgid: Number(fields[2]) };
  } catch {
    return null;
  }
}

/**
 * The watchers (stream commands) running for `runDir`. A fork of the watcher's shell (a command
 * substitution, or `sleep` before its exec) has the same command line for a moment, so only a
 * shell whose parent is not one of them counts: each watcher once, whatever it is forking.
 */
function watchersOf(runDir: string): number[] {
  const shells = pidsWith(PUSH_ALIVE).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(runDir);
    } catch {
      return false; // Gone meanwhile (a fork that ended).
    }
  });
  return shells.filter((pid) => {
    const parent = parentAndGroup(pid);
    return parent !== null && !shells.includes(parent.ppid);
  });
}

describe('following with the job status pushed on the stream (real sshd)', function () {
  let sshd: Sshd | undefined;
  let ssh: SshExecutor | undefined;
  let python: string;
  /** Job groups and frozen watchers started here, killed at the end whatever happened. */
  const groups: number[] = [];
  const frozen: number[] = [];

  before(async function () {
    const probe = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], {
      encoding: 'utf8',
    });
    if (probe.status !== 0) this.skip();
    python = probe.stdout.trim();
    sshd = await startSshd();
    ssh = await SshExecutor.connect(executorOptions(sshd));
  });

  after(async () => {
    killAll(frozen, true);
    killAll(groups, true);
    ssh?.dispose();
    await sshd?.stop();
  });

  async function startTiny(name: string, steps: number): Promise<string> {
    const runDir = path.join(realpathSync((sshd as Sshd).root), name);
    mkdirSync(runDir);
    cpSync(path.join(EXAMPLE, 'train.py'), path.join(runDir, 'train.py'));
    cpSync(path.join(EXAMPLE, 'data'), path.join(runDir, 'data'), { recursive: true });
    const { pid } = await startJob(ssh as SshExecutor, {
      runDir,
      script: jobScript(
        { trainer: 'command', command: `'${python}' train.py --steps ${steps} --step-seconds 0.1` },
        { runDir, jobEnvFile: null },
      ),
    });
    groups.push(pid);
    return runDir;
  }

  it("asks the status once, not every poll, and sees the job's end pushed", async function () {
    const runDir = await startTiny('pushed-end', 40);
    const { executor, calls } = counted(ssh as SshExecutor);
    const { published, follower } = followed(executor);
    // A status poll every 200 ms before the pod pushed it.
    const result = await follower(runDir, scaleTiming(10)).follow();
    assert.deepEqual(result.status, { kind: 'exited', code: 0 });
    assert.ok(published.length >= 40, `${published.length} metrics`);
    assert.deepEqual(published, metricsOf(path.join(runDir, 'metrics.jsonl')));
    // The job ran ~4 s: twenty polls' worth. One look at the start, none after: the end came
    // down the one stream (a follower that polled, or asked once the stream ended, looks again).
    assert.equal(calls.exec, 1, `status looks: ${calls.exec}`);
    assert.equal(calls.stream, 1, `streams: ${calls.stream}`);
  });

  it('drops a push channel gone silent and resumes at the exact byte: no line lost or doubled', async function () {
    const runDir = await startTiny('silent', 120);
    const timing = scaleTiming(10); // signs of life every 2 s, silence limit 6 s
    assert.equal(silenceLimitMs(timing), 6_000);
    // The first metrics may come from the catch-up read before the stream starts (a slow first
    // status under load): the freeze waits for the stream to have delivered, then looks once.
    /** What the one look saw: the watchers of the run dir at the metric it came with. */
    let seen: { metric: number; watchers: number[]; groups: (number | null)[] } | null = null;
    const f = followed(ssh as SshExecutor, () => {
      const { published } = f;
      if (seen !== null || published.length < 15 || !f.tap.delivered) return;
      const watchers = watchersOf(runDir);
      seen = {
        metric: published.length,
        watchers,
        groups: watchers.map((pid) => parentAndGroup(pid)?.pgid ?? null),
      };
      // The watcher leads its own process group (sshd's session): stopping the group freezes
      // it, its tail and any fork of it at once (the channel stays open, nothing comes down it).
      if (watchers.length === 1 && seen.groups[0] === watchers[0]) {
        process.kill(-watchers[0]!, 'SIGSTOP');
        frozen.push(watchers[0]!);
      }
    });
    const { published, warnings } = f;
    const result = await f.follower(runDir, timing).follow();
    assert.deepEqual(result.status, { kind: 'exited', code: 0 });
    assert.equal(frozen.length, 1, `one watcher, its own group, frozen: ${JSON.stringify(seen)}`);
    assert.match(
      warnings.join('\n'),
      /metrics stream ended \(silent for 6 s\); resuming from byte/,
    );
    const onDisk = metricsOf(path.join(runDir, 'metrics.jsonl'));
    assert.ok(onDisk.length >= 120);
    assert.deepEqual(published, onDisk, 'none lost, none duplicated, same order');
  });
});
