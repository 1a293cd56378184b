/**
 * What a watchdog tick costs the pod: the processes it starts. Every tick of every pod's
 * watchdog runs for the pod's whole life (60 s apart in production, 1 s in the tests), so
 * under bash, the shell the bootstrap execs it with, a tick with a running job starts only the
 * `df` of its disk rule: no `date`, `sleep`, `stat` or `tail`. Under dash and busybox sh it
 * starts `date` and `sleep` too, and still no `stat` or `tail` (the lease is looked at only when
 * a rule needs it). The commands are found through PATH, where each is a stand-in that notes its
 * name and execs the real one; the API is a closed loopback port (the verdict is
 * `failed unreachable`, and the watchdog ticks on).
 */
import * as assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { closedPort } from '../helpers/apiStub';
import { SHELLS, WATCHDOG, sleep } from '../helpers/watchdog';

const COUNTED = ['date', 'sleep', 'stat', 'tail', 'df', 'cat', 'mkfifo'] as const;

interface Counts {
  byName: Map<string, number>;
  logLines: number;
}

/** A PATH dir whose COUNTED commands note their name in `log`, then exec the real one. */
function countingPath(dir: string, log: string, busybox: boolean): string {
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin);
  for (const name of COUNTED) {
    const real = busybox
      ? `/usr/bin/busybox ${name}`
      : spawnSync('sh', ['-c', `command -v ${name}`])
          .stdout.toString()
          .trim();
    assert.ok(real !== '', `${name} is installed`);
    fs.writeFileSync(
      path.join(bin, name),
      `#!/bin/sh\necho ${name} >> '${log}'\nexec ${real} "$@"\n`,
      { mode: 0o755 },
    );
  }
  if (!busybox) return `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`;
  // As in the watchdog's own busybox runs: busybox's applets and curl only.
  const applets = path.join(dir, 'applets');
  fs.mkdirSync(applets);
  assert.equal(spawnSync('busybox', ['--install', '-s', applets]).status, 0);
  fs.symlinkSync('/usr/bin/curl', path.join(applets, 'curl'));
  return `${bin}:${applets}`;
}

const TICKS = 4;

async function countTicks(argv: string[], busybox: boolean): Promise<Counts> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-wdticks-'));
  let job: ChildProcess | undefined;
  let watchdog: ChildProcess | undefined;
  try {
    const run = path.join(dir, 'run');
    fs.mkdirSync(path.join(run, '.pod'), { recursive: true });
    const log = path.join(dir, 'started');
    const PATH = countingPath(dir, log, busybox);
    job = spawn('sleep', ['120'], { detached: true, stdio: 'ignore' });
    fs.writeFileSync(path.join(run, 'job.pid'), `${job.pid}\n`);
    fs.writeFileSync(path.join(run, '.pod', 'lease'), '');
    const port = await closedPort();
    watchdog = spawn(argv[0]!, [...argv.slice(1), WATCHDOG], {
      env: {
        PATH,
        RUNPOD_POD_ID: 'podticks',
        RUNPOD_API_KEY: 'key-not-used',
        OVERBRAINER_RUN_DIR: run,
        OVERBRAINER_INTERVAL: '1',
        OVERBRAINER_DEADLINE: String(Math.floor(Date.now() / 1000) + 3600),
        OVERBRAINER_PROBE_TRIES: '1',
        OVERBRAINER_API_URL: `http://127.0.0.1:${port}/v2`,
      },
      stdio: 'ignore',
    });
    const watchdogLog = path.join(run, '.pod', 'watchdog.log');
    // Counted from the job's start being logged: the ticks from then on are what is measured.
    const t0 = Date.now();
    while (!(
      fs.existsSync(watchdogLog) && fs.readFileSync(watchdogLog, 'utf8').includes('job started')
    )) {
      assert.ok(Date.now() - t0 < 30_000, 'the watchdog logged the job within 30 s');
      await sleep(50);
    }
    const before = fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).length;
    const linesBefore = fs.readFileSync(watchdogLog, 'utf8').split('\n').filter(Boolean).length;
    // df runs every tick while a job runs: TICKS of them are TICKS ticks.
    const startedSince = (): string[] =>
      fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).slice(before);
    while (startedSince().filter((name) => name === 'df').length < TICKS) {
      assert.ok(Date.now() - t0 < 45_000, `${TICKS} ticks within 45 s`);
      await sleep(50);
    }
    const started = startedSince();
    const byName = new Map<string, number>();
    for (const name of started) byName.set(name, (byName.get(name) ?? 0) + 1);
    const logLines =
      fs.readFileSync(watchdogLog, 'utf8').split('\n').filter(Boolean).length - linesBefore;
    return { byName, logLines };
  } finally {
    watchdog?.kill('SIGTERM');
    if (job?.pid !== undefined) {
      try {
        process.kill(-job.pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    if (watchdog && watchdog.exitCode === null) {
      await new Promise((resolve) => watchdog!.once('exit', resolve));
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('watchdog.sh: the processes a tick starts (integration)', function () {
  this.timeout(60_000);
  for (const shell of SHELLS) {
    it(`under ${shell.name}: a tick with a running job starts ${shell.name === 'bash' ? 'only df' : 'date, sleep and df'}; no stat, tail or cat`, async function () {
      const { byName, logLines } = await countTicks(shell.argv, shell.busybox);
      const n = (name: string): number => byName.get(name) ?? 0;
      const seen = JSON.stringify(Object.fromEntries(byName));
      assert.equal(n('stat') + n('tail') + n('cat') + n('mkfifo'), 0, seen);
      if (shell.name === 'bash') {
        assert.equal(n('sleep'), 0, seen);
        // Not even for a log line's stamp.
        assert.equal(n('date'), 0, `${seen}, ${logLines} log lines`);
      } else {
        // The tick the count ended in may not have reached its sleep yet, and the count may have
        // begun between a tick's date and its df (CI: {"df":4,"sleep":4,"date":3} under busybox).
        assert.ok(n('sleep') >= TICKS - 1, seen);
        assert.ok(n('date') >= TICKS - 1, seen);
      }
    });
  }
});
