/**
 * The real watchdog (src/core/pod/scripts/watchdog.sh) under bash, dash and busybox sh
 * (busybox with only its own applets and curl on PATH), against a local Runpod API stand-in,
 * with a 1 s tick and short graces: its verdicts, each delete rule and their order, the delete
 * fallbacks, and the key kept out of every argv, child env, output and log.
 *
 * Per shell, all scenarios start at once (each in its own temp run dir with its own stub) and
 * each `it` awaits its own: the file takes about the longest scenario per shell.
 */
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { closedPort } from '../helpers/apiStub';
import {
  ProcScanner,
  SHELLS,
  VERSION,
  cleanupWatchdogRuns,
  liveKeys,
  nowS,
  setupWatchdogRuns,
  startScenarios,
  sleep,
  withRuns,
  type RunOptions,
  type Shell,
} from '../helpers/watchdog';

/** A live job on a pod kept at its creation (OVERBRAINER_KEEP_POD=1), with `env` and `files`. */
function keptAtCreation(env: RunOptions['env'], files?: RunOptions['files']): RunOptions {
  return { job: 'live', env: { OVERBRAINER_KEEP_POD: '1', ...env }, ...(files ? { files } : {}) };
}

interface Scenario {
  title: string;
  run(shell: Shell): Promise<void>;
}

const SCENARIOS: Scenario[] = [
  {
    title:
      'proves it can reach the API (verdict ready), then deletes at once on the retrieved marker',
    run: (shell) =>
      withRuns(shell, [{ job: 'live' }], async ([r]) => {
        await r!.waitFor(/job started pid=\d+/);
        assert.equal(r!.verdict(), 'ready\n');
        assert.deepEqual(r!.methods(), ['GET']);
        const markedMs = Date.now();
        r!.write('.pod/retrieved');
        await r!.waitExit();
        // Deleted because of the marker, in the tick that saw it (the messages below): no wall
        // time bound, a loaded machine's tick runs late.
        assert.ok(r!.deleteAtMs()! >= markedMs, 'not deleted before the marker');
        r!.checkDeletedOnce('retrieved');
        assert.deepEqual(r!.messages().slice(-4), [
          'retrieved marker seen',
          'delete reason=retrieved',
          'DELETE 204',
          'deleted',
        ]);
        assert.match(r!.messages()[0]!, new RegExp(`^start overbrainer-watchdog/${VERSION} pod=`));
        assert.deepEqual(r!.methods(), ['GET', 'DELETE']);
      }),
  },
  {
    title:
      'without key or pod id: verdict failed missing_key, no request; TERM stops its sleep with exit 0',
    run: (shell) =>
      withRuns(
        shell,
        [
          { env: { RUNPOD_API_KEY: undefined, OVERBRAINER_INTERVAL: '300' } },
          { env: { RUNPOD_POD_ID: undefined, OVERBRAINER_INTERVAL: '300' } },
        ],
        async (runs) => {
          for (const r of runs) {
            await r.waitFor(/verdict failed missing_key/);
            assert.equal(r.verdict(), 'failed missing_key\n');
          }
          await sleep(300);
          for (const r of runs) {
            r.term();
            // A watchdog that waited for its 300 s sleep would still run a minute later.
            assert.equal(await r.waitExit(60_000), 0);
            assert.equal(r.messages().at(-1), 'stopping');
            assert.deepEqual(r.methods(), []);
          }
        },
      ),
  },
  {
    title: 'a refused key: failed http_401 after one try',
    run: (shell) =>
      withRuns(shell, [{ stub: { get: [401] } }], async ([r]) => {
        await r!.waitFor(/verdict /);
        assert.equal(r!.verdict(), 'failed http_401\n');
        assert.deepEqual(r!.methods(), ['GET']);
      }),
  },
  {
    title: 'no answer: failed unreachable after OVERBRAINER_PROBE_TRIES tries',
    run: async (shell) =>
      withRuns(shell, [{ apiUrl: `http://127.0.0.1:${await closedPort()}/v2` }], async ([r]) => {
        await r!.waitFor(/verdict /);
        assert.equal(r!.verdict(), 'failed unreachable\n');
        assert.deepEqual(
          r!.messages().filter((m) => m.startsWith('probe ')),
          [1, 2, 3].map((n) => `probe GET /pods/${r!.podId} 000 (try ${n}/3)`),
        );
      }),
  },
  {
    title:
      'a busy API (5xx, 429) is tried again: ready once it answers, failed http_503 if it never does',
    run: (shell) =>
      withRuns(
        shell,
        [{ stub: { get: [503, 429, 200] } }, { stub: { get: [503] } }],
        async ([ok, busy]) => {
          await ok!.waitFor(/verdict /);
          await busy!.waitFor(/verdict /);
          assert.equal(ok!.verdict(), 'ready\n');
          assert.deepEqual(ok!.methods(), ['GET', 'GET', 'GET']);
          assert.equal(busy!.verdict(), 'failed http_503\n');
          assert.deepEqual(busy!.methods(), ['GET', 'GET', 'GET']);
        },
      ),
  },
  {
    title: 'a failed bootstrap: verdict names its reason, and the pod is deleted even kept',
    run: (shell) =>
      withRuns(
        shell,
        [
          {
            job: 'live',
            env: {
              OVERBRAINER_BOOT_FAILED: '1',
              OVERBRAINER_KEEP_POD: '1',
              OVERBRAINER_DEADLINE: undefined,
            },
            files: {
              '.pod/bootstrap_failed': `cannot start\tsshd (exit 1) ${'x'.repeat(300)}\nsecond line\n`,
            },
          },
          {
            job: 'live',
            env: { OVERBRAINER_BOOT_FAILED: '1' },
            files: { '.pod/bootstrap_failed': 'run dir claimed by another pod\n', '.pod/keep': '' },
          },
        ],
        async (runs) => {
          for (const r of runs) await r.waitExit();
          // Only printable ASCII of its first line, cut at 200 characters.
          const reason = `cannot startsshd (exit 1) ${'x'.repeat(300)}`.slice(0, 200);
          assert.equal(runs[0]!.verdict(), `failed bootstrap: ${reason}\n`);
          assert.equal(runs[1]!.verdict(), 'failed bootstrap: run dir claimed by another pod\n');
          for (const r of runs) {
            r.checkDeletedOnce('bootstrap_failed');
            assert.deepEqual(r.methods(), ['DELETE'], 'a failed bootstrap needs no probe');
          }
        },
      ),
  },
  {
    title: 'kept with a job: never deleted (retrieved, ended, boot grace, cost cap all ignored)',
    run: (shell) =>
      withRuns(
        shell,
        [
          keptAtCreation(
            {
              OVERBRAINER_DEADLINE: undefined,
              OVERBRAINER_BOOT_GRACE: '1',
              OVERBRAINER_RETRIEVE_GRACE: '0',
            },
            {
              exit_code: '0\n',
              '.pod/retrieved': '',
              '.pod/cost_cap_at': `${nowS() - 60}\n`,
            },
          ),
        ],
        async ([r]) => {
          await r!.waitFor(/job ended/);
          await sleep(3000);
          assert.deepEqual(r!.methods(), ['GET'], r!.describe());
          r!.term();
          assert.equal(await r!.waitExit(5000), 0);
          assert.equal(r!.messages().at(-1), 'stopping');
        },
      ),
  },
  {
    title:
      'max_hours: a fresh lease holds the deadline off, each renewal extends it, then it deletes',
    run: (shell) =>
      withRuns(
        shell,
        [
          {
            job: 'live',
            env: {
              OVERBRAINER_DEADLINE: String(nowS() - 5),
              OVERBRAINER_LEASE_TTL: '3',
              OVERBRAINER_BOOT_GRACE: '1',
              // No wait for the deadline's snapshot (watchdog.snapshot.integration.test.ts).
              OVERBRAINER_SNAPSHOT_WAIT: '0',
            },
            files: { '.pod/lease': '' },
          },
        ],
        async ([r]) => {
          // The client renews every 0.5 s (as the real one does every 5 min of a 15 min TTL).
          let renewedMs = Date.now();
          let renewing = true;
          const renewer = (async () => {
            while (renewing) {
              r!.write('.pod/lease');
              renewedMs = Date.now();
              await sleep(500);
            }
          })();
          await r!.waitFor(/deadline passed, lease held by the client/);
          await sleep(2500);
          renewing = false;
          await renewer;
          assert.deepEqual(r!.methods(), ['GET'], `deleted while renewed\n${r!.describe()}`);
          await r!.waitExit();
          r!.checkDeletedOnce('deadline');
          // The pod clock counts whole seconds: a lease of 3 s holds at least 2 s.
          assert.ok(
            r!.deleteAtMs()! - renewedMs >= 2000,
            `deleted ${r!.deleteAtMs()! - renewedMs} ms after the last renewal\n${r!.describe()}`,
          );
          assert.equal(
            r!.messages().filter((m) => m === 'deadline passed, lease held by the client').length,
            1,
          );
        },
      ),
  },
  {
    title: 'rule order: cost cap before the deadline before the retrieved marker',
    run: (shell) =>
      withRuns(
        shell,
        [
          {
            job: 'live',
            env: { OVERBRAINER_DEADLINE: String(nowS() - 1) },
            files: { '.pod/cost_cap_at': `${nowS() - 1}\n`, '.pod/retrieved': '' },
          },
          {
            job: 'live',
            env: {
              OVERBRAINER_DEADLINE: String(nowS() - 1),
              OVERBRAINER_LEASE_TTL: '5',
              OVERBRAINER_SNAPSHOT_WAIT: '0',
            },
            files: { '.pod/retrieved': '', '.pod/lease': '' },
          },
        ],
        async ([cap, deadline]) => {
          // A lease last renewed 10 s ago is stale (TTL 5 s): its mtime counts, not its presence.
          const old = new Date(Date.now() - 10_000);
          fs.utimesSync(path.join(deadline!.runDir, '.pod/lease'), old, old);
          await cap!.waitExit();
          await deadline!.waitExit();
          cap!.checkDeletedOnce('cost_cap');
          deadline!.checkDeletedOnce('deadline');
        },
      ),
  },
  {
    title:
      "a cluster member: its delete is its whole cluster's (allowed: once; refused: said once, tried each tick)",
    run: (shell) =>
      withRuns(
        shell,
        [
          {
            job: 'live',
            stub: { cluster: 'clu_1' },
            files: { '.pod/cost_cap_at': `${nowS() - 1}\n` },
          },
          {
            job: 'live',
            stub: { cluster: 'clu_2', clusterDelete: [403] },
            files: { '.pod/cost_cap_at': `${nowS() - 1}\n` },
          },
        ],
        async ([allowed, refused]) => {
          assert.equal(await allowed!.waitExit(), 0);
          assert.deepEqual(
            allowed!.stub.requests.map((r) => `${r.method} ${r.path}`),
            [`GET /v2/pods/${allowed!.podId}`, 'DELETE /v2/clusters/clu_1'],
            allowed!.describe(),
          );
          assert.ok(
            allowed!
              .messages()
              .includes('member of cluster clu_1: its delete is DELETE /clusters/clu_1'),
          );
          // Refused: no pod call (Runpod refuses them on a member), the cluster delete each tick.
          await refused!.waitFor(/DELETE \/clusters\/clu_2 403[\s\S]*DELETE \/clusters\/clu_2 403/);
          assert.ok(
            refused!.stub.requests
              .slice(1)
              .every((r) => `${r.method} ${r.path}` === 'DELETE /v2/clusters/clu_2'),
            refused!.describe(),
          );
          assert.equal(
            fs.readFileSync(path.join(refused!.runDir, '.pod/cluster_delete'), 'utf8'),
            'refused http_403\n',
          );
          assert.equal(
            refused!
              .messages()
              .filter((m) =>
                m.startsWith("this member's key may not delete its cluster (http_403)"),
              ).length,
            1,
          );
          refused!.term();
          await refused!.waitExit();
          await refused!.waitLogged();
        },
      ),
  },
  {
    title: 'abandoned: the retrieve grace after the job ended (exit code, cancelled, group gone)',
    run: (shell) =>
      withRuns(
        shell,
        [
          { job: 'live', env: { OVERBRAINER_RETRIEVE_GRACE: '2' }, files: { exit_code: '0\n' } },
          { job: 'live', env: { OVERBRAINER_RETRIEVE_GRACE: '2' }, files: { cancelled: '' } },
          { job: 'dead', env: { OVERBRAINER_RETRIEVE_GRACE: '2' } },
        ],
        async (runs) => {
          for (const r of runs) {
            await r.waitExit();
            r.checkDeletedOnce('abandoned');
            const m = r.messages();
            assert.ok(m.indexOf('job ended') > m.findIndex((x) => x.startsWith('job started')));
            // Whole seconds on the pod clock: a 2 s grace lasts at least 1 s.
            assert.ok(r.deleteAtMs()! - r.startMs >= 1000, r.describe());
          }
        },
      ),
  },
  {
    title: 'never_started: no job within the boot grace',
    run: (shell) =>
      withRuns(shell, [{ env: { OVERBRAINER_BOOT_GRACE: '2' } }], async ([r]) => {
        await r!.waitExit();
        r!.checkDeletedOnce('never_started');
        assert.ok(r!.deleteAtMs()! - r!.startMs >= 1000);
      }),
  },
  {
    title: 'the runtime keep marker holds a pod past its deadline; removing it releases the pod',
    run: (shell) =>
      withRuns(
        shell,
        [
          {
            job: 'live',
            env: { OVERBRAINER_DEADLINE: String(nowS() - 1), OVERBRAINER_SNAPSHOT_WAIT: '0' },
            files: { '.pod/keep': '' },
          },
        ],
        async ([r]) => {
          await r!.waitFor(/keep marker seen: the pod is kept/);
          await sleep(2500);
          assert.deepEqual(r!.methods(), ['GET'], r!.describe());
          r!.remove('.pod/keep');
          await r!.waitExit();
          r!.checkDeletedOnce('deadline');
          assert.ok(r!.messages().includes('keep marker removed: the pod is released'));
        },
      ),
  },
  {
    title:
      'a pod kept at its creation is released by .pod/deadline: the env keep lifts, a job ended long before gets its retrieve grace from the release, a passed deadline deletes',
    run: (shell) =>
      withRuns(
        shell,
        [
          keptAtCreation(
            { OVERBRAINER_RETRIEVE_GRACE: '3', OVERBRAINER_SNAPSHOT_WAIT: '0' },
            { exit_code: '0\n' },
          ),
          keptAtCreation({ OVERBRAINER_SNAPSHOT_WAIT: '0' }),
        ],
        async ([ended, running]) => {
          // The job ended 100 s ago, far past its retrieve grace: kept, nothing deletes it.
          const old = new Date(Date.now() - 100_000);
          fs.utimesSync(path.join(ended!.runDir, 'exit_code'), old, old);
          await ended!.waitFor(/job ended/);
          await running!.waitFor(/job started/);
          await sleep(2500);
          assert.deepEqual(ended!.methods(), ['GET'], ended!.describe());
          assert.deepEqual(running!.methods(), ['GET'], running!.describe());
          const releasedMs = Date.now();
          ended!.write('.pod/deadline', `${nowS() + 60}\n`);
          running!.write('.pod/deadline', `${nowS() - 1}\n`);
          await running!.waitExit();
          running!.checkDeletedOnce('deadline');
          assert.ok(running!.messages().some((m) => /^released: deadline=\d+/.test(m)));
          await ended!.waitExit();
          // Abandoned the retrieve grace (3 s) after the release, not at the next tick.
          ended!.checkDeletedOnce('abandoned');
          assert.ok(ended!.deleteAtMs()! - releasedMs >= 2000, ended!.describe());
        },
      ),
  },
  {
    title: 'delete fallbacks: terminate, then stop (still billing), the next tick, runpodctl',
    run: (shell) =>
      withRuns(
        shell,
        [
          { files: { '.pod/retrieved': '' }, stub: { delete: [500] } },
          { files: { '.pod/retrieved': '' }, stub: { delete: [500], terminate: [500] } },
          {
            files: { '.pod/retrieved': '' },
            stub: { delete: [500, 204], terminate: [500], stop: [500] },
          },
          {
            files: { '.pod/retrieved': '' },
            stub: { delete: [500], terminate: [500], stop: [500] },
            runpodctl: true,
          },
        ],
        async ([terminate, stop, retry, ctl]) => {
          for (const r of [terminate, stop, retry, ctl]) assert.equal(await r!.waitExit(), 0);

          assert.deepEqual(terminate!.methods(), ['GET', 'DELETE', 'POST terminate']);
          assert.deepEqual(terminate!.messages().slice(-3), [
            'DELETE 500',
            'terminate 200',
            'deleted',
          ]);
          const post = terminate!.stub.requests[2]!;
          assert.equal(post.path, `/v2/pods/${terminate!.podId}/action`);
          assert.equal(post.headers['content-type'], 'application/json');

          assert.deepEqual(stop!.methods(), ['GET', 'DELETE', 'POST terminate', 'POST stop']);
          assert.deepEqual(stop!.messages().slice(-2), [
            'stop 200',
            'stopped, volume keeps billing',
          ]);

          assert.deepEqual(retry!.methods(), [
            'GET',
            'DELETE',
            'POST terminate',
            'POST stop',
            'DELETE',
          ]);
          assert.ok(retry!.messages().includes('delete failed, retrying in 1s'));
          assert.equal(retry!.messages().filter((m) => m === 'delete reason=retrieved').length, 2);
          assert.equal(retry!.messages().at(-1), 'deleted');

          assert.deepEqual(ctl!.messages().slice(-2), ['runpodctl pod delete exit 0', 'deleted']);
          const args = fs.readFileSync(path.join(ctl!.root, 'runpodctl.args'), 'utf8');
          assert.equal(args, `pod delete ${ctl!.podId}\n`);
          const keyHash = fs.readFileSync(path.join(ctl!.root, 'runpodctl.key'), 'utf8');
          assert.equal(keyHash.split(' ')[0], createHash('sha256').update(ctl!.key).digest('hex'));
        },
      ),
  },
];

describe('watchdog.sh (integration)', function () {
  this.timeout(60_000);
  const scanner = new ProcScanner(() => liveKeys);

  before(function () {
    setupWatchdogRuns(scanner);
  });

  after(function () {
    cleanupWatchdogRuns(scanner);
  });

  it('the process scanner sees a key in an argv and in an env (so its silence means something)', async function () {
    const argvKey = `rpa_${randomBytes(8).toString('hex')}`;
    const envKey = `rpa_${randomBytes(8).toString('hex')}`;
    const probe = new ProcScanner(() => [argvKey, envKey]);
    const child = spawn('/bin/sh', ['-c', 'sleep 5', 'sh', argvKey], {
      env: { PATH: '/usr/bin:/bin', X: envKey },
      stdio: 'ignore',
    });
    try {
      await sleep(200);
      probe.scan();
      assert.ok(probe.hits.some((h) => h.startsWith('argv of')));
      assert.ok(probe.hits.some((h) => h.startsWith('env of')));
    } finally {
      child.kill('SIGKILL');
    }
  });

  for (const shell of SHELLS) {
    describe(`under ${shell.name}`, function () {
      // Every scenario at once; each `it` waits for its own.
      const results = startScenarios(shell, SCENARIOS);

      for (const scenario of SCENARIOS) {
        it(scenario.title, async function () {
          const result = await results.get(scenario.title)!;
          if (!result.ok) throw result.error;
        });
      }

      it('never put the key in a process argv or a child process env', async function () {
        await Promise.all(results.values());
        assert.ok(scanner.scans > 20, `only ${scanner.scans} scans`);
        assert.deepEqual(scanner.hits, []);
      });
    });
  }
});
