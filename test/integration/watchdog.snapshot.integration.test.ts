/**
 * The watchdog's snapshot requests and the delete rules around them (issue 18), with the real
 * watchdog under bash, dash and busybox sh against the local API stand-in, a 1 s tick and short
 * graces: `cost` at .pod/snapshot_at, `deadline` at the deadline minus the lead while nobody
 * renews the lease, `disk` on a run dir filled on a tmpfs of its own (df) or a network volume
 * dir measured with du against 94 % of .pod/volume_gb; the request written once and never
 * replaced; the deadline delete held while the job saves, and after a snapshot until the deadline
 * plus the retrieve grace. The test plays the client and the trainer by writing the run dir's
 * files, and asserts on files, log lines and the stand-in's DELETE.
 *
 * Per shell, all scenarios start at once and each `it` awaits its own (as in
 * watchdog.integration.test.ts). The tmpfs disks need root.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import {
  SHELLS,
  cleanupWatchdogRuns,
  nowS,
  setupWatchdogRuns,
  startScenarios,
  withRuns,
  type Run,
  type Shell,
} from '../helpers/watchdog';

/** The run dir's file `name`, or null. */
function read(r: Run, name: string): string | null {
  try {
    return fs.readFileSync(path.join(r.runDir, name), 'utf8');
  } catch {
    return null;
  }
}

/** Log messages (without timestamps) that start with `prefix`. */
function said(r: Run, prefix: string): string[] {
  return r.messages().filter((m) => m.startsWith(prefix));
}

/** Makes the client's lease stale: last renewed `ageS` seconds ago. */
function staleLease(r: Run, ageS = 3600): void {
  const file = path.join(r.runDir, '.pod/lease');
  if (!fs.existsSync(file)) r.write('.pod/lease');
  const old = new Date(Date.now() - ageS * 1000);
  fs.utimesSync(file, old, old);
}

/** The trainer honours the request: a checkpoint, snapshot.json, then the job's exit code. */
function trainerSaves(r: Run, reason: string): void {
  r.write('output/checkpoint-12/model.bin', 'weights');
  r.write(
    'snapshot.json',
    JSON.stringify({ checkpoint: 'output/checkpoint-12', step: 12, time: nowS(), reason }),
  );
  r.write('exit_code', '0\n');
}

/** When the request was written (its mtime: the moment of the `ln`, not when a test saw it). */
function requestMtimeMs(r: Run): number {
  return fs.statSync(path.join(r.runDir, 'snapshot.request')).mtimeMs;
}

/** No temp file of a request is left in the run dir. */
function noRequestTemp(r: Run): void {
  const left = fs.readdirSync(r.runDir).filter((n) => n.includes('snapshot.request.'));
  assert.deepEqual(left, [], r.describe());
}

const TMPFS_KIB = 4096;

interface Scenario {
  title: string;
  /** Mounts a tmpfs: needs root (skipped otherwise). */
  tmpfs?: boolean;
  run(shell: Shell): Promise<void>;
}

const IS_ROOT = process.getuid?.() === 0;

const SCENARIOS: Scenario[] = [
  {
    title:
      'a. past .pod/snapshot_at: one `cost` request (temp + ln), and the cost cap still deletes at cost_cap_at while the job runs',
    run: (shell) => {
      const capAt = nowS() + 3;
      return withRuns(
        shell,
        [
          {
            job: 'live',
            files: { '.pod/snapshot_at': `${nowS() - 1}\n`, '.pod/cost_cap_at': `${capAt}\n` },
          },
        ],
        async ([r]) => {
          await r!.waitFor(/snapshot requested reason=cost/);
          assert.equal(read(r!, 'snapshot.request'), 'cost\n');
          noRequestTemp(r!);
          await r!.waitExit();
          r!.checkDeletedOnce('cost_cap');
          assert.ok(r!.deleteAtMs()! >= capAt * 1000, r!.describe());
          assert.deepEqual(said(r!, 'snapshot '), ['snapshot requested reason=cost']);
          assert.equal(read(r!, 'snapshot.request'), 'cost\n');
        },
      );
    },
  },
  {
    title:
      'b. `deadline` at the deadline minus OVERBRAINER_SNAPSHOT_LEAD while the lease is stale, never while it is fresh',
    run: (shell) => {
      // The request is due 5 s after the start (deadline - lead) and must come before the
      // deadline: 25 s of room, as a loaded machine can hold the watchdog's first probe for 8 s.
      const deadline = nowS() + 30;
      const fresh = nowS() + 2;
      return withRuns(
        shell,
        [
          {
            job: 'live',
            env: { OVERBRAINER_DEADLINE: String(deadline), OVERBRAINER_SNAPSHOT_LEAD: '25' },
          },
          {
            job: 'live',
            env: { OVERBRAINER_DEADLINE: String(fresh), OVERBRAINER_SNAPSHOT_WAIT: '2' },
            files: { '.pod/lease': '' },
          },
        ],
        async ([lead, leased]) => {
          await lead!.waitFor(/snapshot requested reason=deadline/);
          const requestedMs = requestMtimeMs(lead!);
          assert.equal(read(lead!, 'snapshot.request'), 'deadline\n');
          // Whole seconds on the pod clock: not before deadline - lead, and ahead of the deadline.
          // A file's mtime comes from the kernel's coarse clock, up to a tick (10 ms at HZ=100)
          // behind the `date +%s` the watchdog read: CI20 saw a request written in the second of
          // deadline - lead whose mtime read just before it.
          const COARSE_MTIME_MS = 20;
          assert.ok(requestedMs >= (deadline - 25) * 1000 - COARSE_MTIME_MS, lead!.describe());
          assert.ok(
            requestedMs < deadline * 1000,
            `requested after the deadline\n${lead!.describe()}`,
          );
          assert.deepEqual(lead!.methods(), ['GET']);
          await lead!.waitLogged();
          lead!.term();
          assert.equal(await lead!.waitExit(), 0);

          // A fresh lease: the deadline passes with no request (checked in the same tick).
          await leased!.waitFor(/deadline passed, lease held by the client/);
          assert.equal(read(leased!, 'snapshot.request'), null, leased!.describe());
          staleLease(leased!);
          await leased!.waitFor(/snapshot requested reason=deadline/);
          await leased!.waitExit();
          leased!.checkDeletedOnce('deadline');
          const m = leased!.messages();
          assert.ok(
            m.indexOf('snapshot requested reason=deadline') <
              m.findIndex((x) => x.startsWith('deadline passed, waiting for the snapshot until')),
            leased!.describe(),
          );
        },
      );
    },
  },
  {
    title:
      'the deadline delete waits OVERBRAINER_SNAPSHOT_WAIT for the snapshot it requested, then deletes a job that ignored it',
    run: (shell) =>
      withRuns(
        shell,
        [
          {
            job: 'live',
            env: { OVERBRAINER_DEADLINE: String(nowS() - 1), OVERBRAINER_SNAPSHOT_WAIT: '4' },
          },
        ],
        async ([r]) => {
          await r!.waitFor(/snapshot requested reason=deadline/);
          const requestedMs = requestMtimeMs(r!);
          await r!.waitExit();
          r!.checkDeletedOnce('deadline');
          // A 4 s wait on the pod's whole-second clock lasts at least 3 s from the tick that
          // wrote the request (less what a loaded machine took between that tick and the write).
          assert.ok(r!.deleteAtMs()! - requestedMs >= 2000, r!.describe());
          const m = r!.messages();
          const waiting = m.filter((x) =>
            x.startsWith('deadline passed, waiting for the snapshot'),
          );
          assert.equal(waiting.length, 1, r!.describe());
          assert.deepEqual(
            m.filter((x) => /^(snapshot|deadline|delete)/.test(x)),
            ['snapshot requested reason=deadline', waiting[0], 'delete reason=deadline', 'deleted'],
          );
        },
      ),
  },
  {
    title:
      'a snapshot that ended the job holds the deadline delete until deadline + retrieve grace; the retrieved marker deletes at once',
    run: (shell) => {
      // A deadline and a grace well past the first ticks, even when a loaded machine holds the
      // watchdog's first probe for 8 s (CI): the hold must be seen before deadline + grace. At a
      // load of 30-56 the first probe came 17 s after the start, and the job's end (the test
      // ends it once the deadline is seen passed) came after deadline + 8 s: the delete was due.
      const deadline = nowS() + 10;
      const grace = 25;
      const env = (retrieveGrace: number): Record<string, string> => ({
        OVERBRAINER_DEADLINE: String(deadline),
        OVERBRAINER_RETRIEVE_GRACE: String(retrieveGrace),
        OVERBRAINER_SNAPSHOT_WAIT: '600',
      });
      return withRuns(
        shell,
        [
          { job: 'live', env: env(grace) },
          { job: 'live', env: env(600) },
        ],
        async ([held, retrieved]) => {
          for (const r of [held, retrieved]) {
            await r!.waitFor(/snapshot requested reason=deadline/);
            // The trainer is still saving when the deadline passes: held by the wait.
            await r!.waitFor(/deadline passed, waiting for the snapshot until/);
            trainerSaves(r!, 'deadline');
          }
          await held!.waitFor(
            /deadline passed, the job ended with a snapshot: kept for its retrieval until/,
          );
          // Its delete is due at deadline + grace: the wait is bounded by that, not by 15 s.
          await held!.waitExit(Math.max(0, (deadline + grace) * 1000 - Date.now()) + 15_000);
          held!.checkDeletedOnce('deadline');
          assert.ok(held!.deleteAtMs()! >= (deadline + grace) * 1000, held!.describe());
          assert.ok(
            held!
              .messages()
              .includes(
                `deadline passed, the job ended with a snapshot: kept for its retrieval until ${deadline + grace}`,
              ),
          );

          await retrieved!.waitFor(/the job ended with a snapshot/);
          retrieved!.write('.pod/retrieved');
          await retrieved!.waitExit();
          retrieved!.checkDeletedOnce('retrieved');
          assert.ok(retrieved!.deleteAtMs()! < (deadline + 600) * 1000);
        },
      );
    },
  },
  {
    title:
      'an existing request is kept whatever its reason, and counts as the deadline snapshot the delete waits for',
    run: (shell) =>
      withRuns(
        shell,
        [
          {
            job: 'live',
            env: { OVERBRAINER_DEADLINE: String(nowS() - 1), OVERBRAINER_SNAPSHOT_WAIT: '2' },
            files: { 'snapshot.request': 'requested\n', '.pod/snapshot_at': `${nowS() - 1}\n` },
          },
          {
            job: 'live',
            files: { 'snapshot.request': 'later please\n', '.pod/snapshot_at': `${nowS() - 1}\n` },
          },
        ],
        async ([deadline, odd]) => {
          await deadline!.waitExit();
          deadline!.checkDeletedOnce('deadline');
          assert.equal(read(deadline!, 'snapshot.request'), 'requested\n');
          assert.deepEqual(said(deadline!, 'snapshot '), [
            'snapshot already requested reason=requested: kept',
          ]);
          assert.equal(
            said(deadline!, 'deadline passed, waiting for the snapshot until').length,
            1,
          );

          // An unknown reason reads as `requested`; the file stays as the client wrote it.
          await odd!.waitFor(/snapshot already requested reason=requested: kept/);
          assert.equal(read(odd!, 'snapshot.request'), 'later please\n');
          noRequestTemp(odd!);
        },
      ),
  },
  {
    title: 'no request once the job ended, once snapshot.json exists, or before any job started',
    run: (shell) => {
      const past = `${nowS() - 1}\n`;
      return withRuns(
        shell,
        [
          {
            job: 'live',
            env: { OVERBRAINER_DEADLINE: String(nowS() - 1) },
            files: { exit_code: '1\n', '.pod/snapshot_at': past },
          },
          {
            job: 'dead',
            env: { OVERBRAINER_RETRIEVE_GRACE: '1' },
            files: { '.pod/snapshot_at': past },
          },
          {
            job: 'live',
            files: {
              'snapshot.json': '{"checkpoint": "output/checkpoint-3", "step": 3}',
              '.pod/snapshot_at': past,
              '.pod/cost_cap_at': `${nowS() + 2}\n`,
            },
          },
          {
            env: { OVERBRAINER_BOOT_GRACE: '2', OVERBRAINER_DEADLINE: String(nowS() - 1) },
            files: { '.pod/snapshot_at': past },
          },
        ],
        async ([ended, gone, saved, never]) => {
          for (const r of [ended, gone, saved, never]) await r!.waitExit();
          ended!.checkDeletedOnce('deadline');
          gone!.checkDeletedOnce('abandoned');
          saved!.checkDeletedOnce('cost_cap');
          never!.checkDeletedOnce('deadline');
          for (const r of [ended, gone, saved, never]) {
            assert.equal(read(r!, 'snapshot.request'), null, r!.describe());
            assert.deepEqual(said(r!, 'snapshot'), [], r!.describe());
          }
        },
      );
    },
  },
  {
    title: 'a kept pod: no `cost` or `deadline` request, only `disk`; released, it asks for `cost`',
    tmpfs: true,
    run: (shell) =>
      withRuns(
        shell,
        [
          {
            job: 'live',
            tmpfsKiB: TMPFS_KIB,
            env: { OVERBRAINER_KEEP_POD: '1', OVERBRAINER_DEADLINE: undefined },
            files: { '.pod/snapshot_at': `${nowS() - 1}\n` },
          },
          {
            job: 'live',
            env: { OVERBRAINER_DEADLINE: String(nowS() - 1), OVERBRAINER_SNAPSHOT_WAIT: '2' },
            files: { '.pod/keep': '', '.pod/snapshot_at': `${nowS() - 1}\n` },
          },
        ],
        async ([kept, marker]) => {
          await kept!.waitFor(/no snapshot for reason=cost: the pod is kept/);
          assert.equal(read(kept!, 'snapshot.request'), null, kept!.describe());
          kept!.fill('output/big.bin', 4000);
          await kept!.waitFor(/snapshot requested reason=disk/);
          assert.equal(read(kept!, 'snapshot.request'), 'disk\n');
          assert.deepEqual(kept!.methods(), ['GET']);
          await kept!.waitLogged();
          kept!.term();
          assert.equal(await kept!.waitExit(), 0);

          // The runtime keep marker: both reasons noted in one tick, nothing requested or deleted.
          await marker!.waitFor(/no snapshot for reason=deadline: the pod is kept/);
          assert.ok(marker!.messages().includes('no snapshot for reason=cost: the pod is kept'));
          assert.equal(read(marker!, 'snapshot.request'), null, marker!.describe());
          assert.deepEqual(marker!.methods(), ['GET']);
          marker!.remove('.pod/keep');
          await marker!.waitExit();
          marker!.checkDeletedOnce('deadline');
          assert.equal(read(marker!, 'snapshot.request'), 'cost\n');
          const m = marker!.messages();
          assert.ok(
            m.indexOf('keep marker removed: the pod is released') <
              m.indexOf('snapshot requested reason=cost'),
          );
          assert.equal(said(marker!, 'deadline passed, waiting for the snapshot until').length, 1);
        },
      ),
  },
  {
    title:
      'c. disk (df of the run dir): >= 97 % requests `disk` whatever the lease, >= 92 % only once the lease is stale',
    tmpfs: true,
    run: (shell) =>
      withRuns(
        shell,
        [
          { job: 'live', tmpfsKiB: TMPFS_KIB, files: { '.pod/lease': '' } },
          { job: 'live', tmpfsKiB: TMPFS_KIB, files: { '.pod/lease': '' } },
        ],
        async ([full, filling]) => {
          full!.fill('output/big.bin', 4000);
          await full!.waitFor(/snapshot requested reason=disk/);
          assert.equal(read(full!, 'snapshot.request'), 'disk\n');
          const pct = Number(/disk (\d+)% used: /.exec(full!.out)?.[1]);
          assert.ok(pct >= 97 && pct <= full!.dfPercent(), full!.describe());
          assert.ok(full!.messages().includes(`disk ${pct}% used: ${full!.runDir} (df)`));

          filling!.fill('output/big.bin', 3850);
          await filling!.waitFor(/the following client acts on it \(backstop at 97%\)/);
          const at = Number(/disk (\d+)% used: /.exec(filling!.out)?.[1]);
          assert.ok(at >= 92 && at < 97, filling!.describe());
          assert.equal(read(filling!, 'snapshot.request'), null, filling!.describe());
          staleLease(filling!);
          await filling!.waitFor(/snapshot requested reason=disk/);
          assert.equal(read(filling!, 'snapshot.request'), 'disk\n');
          for (const r of [full, filling]) {
            noRequestTemp(r!);
            assert.deepEqual(r!.methods(), ['GET']);
            await r!.waitLogged();
            r!.term();
            assert.equal(await r!.waitExit(), 0);
          }
        },
      ),
  },
  {
    title:
      'c. disk (network volume): du of OVERBRAINER_VOLUME_DIR against 94 % of .pod/volume_gb, df without a size',
    run: (shell) => {
      const env = (volumeDir: string): Record<string, string> => ({
        OVERBRAINER_VOLUME_DIR: volumeDir,
        // 2 % and 3 % of 94 % of 1 GB (917968 KiB): 18360 KiB and 27539 KiB.
        OVERBRAINER_DISK_ACT: '2',
        OVERBRAINER_DISK_BACKSTOP: '3',
      });
      const volume = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-volume-'));
      const noSize = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-volume-'));
      return withRuns(
        shell,
        [
          { job: 'live', env: env(volume), files: { '.pod/lease': '', '.pod/volume_gb': '1\n' } },
          { job: 'live', env: env(noSize), files: { '.pod/lease': '' } },
        ],
        async ([measured, fallback]) => {
          try {
            // 27000 KiB: 2.9 % of 94 % of 1 GB (at least the act level, the lease is fresh).
            measured!.fill(path.join(volume, 'a.bin'), 27_000);
            await measured!.waitFor(/the following client acts on it \(backstop at 3%\)/);
            assert.ok(
              measured!
                .messages()
                .some((m) => m.startsWith(`disk 2% used: volume ${volume} (du, 94% of 1 GB);`)),
              measured!.describe(),
            );
            assert.equal(read(measured!, 'snapshot.request'), null, measured!.describe());
            // 28000 KiB: 3.05 % of 94 % of 1 GB (2.87 % of 1 GB: the 94 % counts).
            measured!.fill(path.join(volume, 'b.bin'), 1_000);
            await measured!.waitFor(/snapshot requested reason=disk/);
            assert.equal(read(measured!, 'snapshot.request'), 'disk\n');
            assert.ok(
              measured!.messages().includes(`disk 3% used: volume ${volume} (du, 94% of 1 GB)`),
            );

            // Without .pod/volume_gb: df of the run dir (this machine's disk is over 3 % used).
            await fallback!.waitFor(/snapshot requested reason=disk/);
            assert.ok(fallback!.messages().some((m) => m.endsWith(`: ${fallback!.runDir} (df)`)));
            for (const r of [measured, fallback]) {
              assert.deepEqual(r!.methods(), ['GET']);
              await r!.waitLogged();
              r!.term();
              assert.equal(await r!.waitExit(), 0);
            }
          } finally {
            fs.rmSync(volume, { recursive: true, force: true });
            fs.rmSync(noSize, { recursive: true, force: true });
          }
        },
      );
    },
  },
];

describe('watchdog.sh snapshot requests (integration)', function () {
  this.timeout(60_000);

  before(function () {
    setupWatchdogRuns();
  });

  after(function () {
    cleanupWatchdogRuns();
  });

  for (const shell of SHELLS) {
    describe(`under ${shell.name}`, function () {
      // Every scenario at once; each `it` waits for its own.
      const results = startScenarios(shell, SCENARIOS);

      for (const scenario of SCENARIOS) {
        it(scenario.title, async function () {
          // A tmpfs of its own is the only way to fill a disk without filling the machine's.
          if (scenario.tmpfs && !IS_ROOT)
            assert.fail('this case fills a tmpfs of its own and needs root: run the tests as root');
          const result = await results.get(scenario.title)!;
          if (!result.ok) throw result.error;
        });
      }
    });
  }
});
