/**
 * Reliability matrix (issue #7), concurrency: two clients on one run. Exactly one follows it and
 * holds its lock (runs/<id>/.lock, src/core/runs/lock.ts) and with it the lease; the other is
 * told who follows, and changes nothing. `pod rm` while another client follows is
 * refused without --force (the training pod is kept, the run goes on); with
 * --force the pod is deleted, the run failed, and the follower reports the pod rm.
 *
 * Clients are real processes: the CLI (the built bundle, OVERBRAINER_TIMING_SCALE=8) and the
 * lifecycle child (test/helpers/lifecycleChild.ts). Each case has its own lab (emulator with real
 * pods + workspace) and asserts on run.json, pod.json, the lock file and the emulator's ledger.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { train } from '../../src/core/flow';
import { FAILED_BY_POD_RM, removeRunOrPod } from '../../src/core/pod/podAdmin';
import { LOCK_FILE } from '../../src/core/runs/lock';
import {
  Lab,
  matrixLabs,
  runCli,
  runIdHolder,
  spawnLifecycleChild,
  startCli,
  type CliProcess,
} from '../helpers/lifecycle';
import { gatedCommand, openGate } from '../helpers/gatedJob';
import { recordFault, recordLedger, recordResult, sleep, until } from '../helpers/reliability';

/** A gated job (helpers/gatedJob.ts): the second client acts while it surely runs. */
const GATED = { command: gatedCommand() };

/** Lets the gated job of run `id` end. */
function letEnd(lab: Lab, id: string): void {
  openGate(lab.emulator, String(lab.podJson(id).pod_id), id);
}

/** The pid in the run's lock file, or null when nobody holds it. */
function lockPid(lab: Lab, runId: string): number | null {
  try {
    const text = fs.readFileSync(path.join(lab.runDir(runId), LOCK_FILE), 'utf8');
    return (JSON.parse(text) as { pid: number }).pid;
  } catch {
    return null;
  }
}

async function jobRunning(lab: Lab, cli: CliProcess): Promise<string> {
  await until(`the job to run (${cli.out.stderr})`, () =>
    cli.out.stderr.includes('train: job running'),
  );
  return lab.onlyRunId();
}

function assertAllDeleted(lab: Lab, runId: string): void {
  assert.deepEqual(
    lab.billing().map((p) => p.id),
    [],
    'a pod is still billing',
  );
  assert.equal(lab.podsOfRun(runId).length, 1, 'one pod for the run');
  assert.equal(lab.podJson(runId).state, 'deleted');
}

type Scenario = (lab: Lab, name: string) => Promise<void>;

const CASES: [string, Scenario][] = [
  [
    'a second client attaching while the CLI follows is refused with who follows; the follower finishes alone',
    async (lab, name) => {
      const training = startCli(lab, ['train']);
      const id = await jobRunning(lab, training);
      assert.equal(lockPid(lab, id), training.pid, 'the follower holds the lock');
      const second = await runCli(lab, ['train', 'attach', id]);
      recordFault(name, 'client.second_attach');
      assert.equal(second.code, 1, JSON.stringify(second));
      assert.ok(
        second.stderr.includes(
          `run ${id} is followed by another client (overbrainer CLI, pid ${training.pid})`,
        ),
        second.stderr,
      );
      assert.ok(second.stderr.includes('Watch it there, or close that client and attach here.'));
      assert.match(second.stdout.trim(), new RegExp(`^train: run ${id} running`), 'and no end');
      assert.equal(lab.runJson(id).state, 'running', 'the refused client changed nothing');
      assert.equal(lockPid(lab, id), training.pid, 'the lock stays with the follower');
      letEnd(lab, id);
      const done = await training.done;
      assert.equal(done.code, 0, done.stderr);
      assert.equal(lab.runJson(id).state, 'succeeded');
      assert.equal(lockPid(lab, id), null, 'the lock is released at the end');
      assertAllDeleted(lab, id);
      recordResult(name, { verified: 1, lost: 0 });
    },
  ],
  [
    'the follower killed, two attaches at once: exactly one follows and holds the lock, the other is told',
    async (lab, name) => {
      const child = spawnLifecycleChild(lab);
      await until(
        'the job to run',
        () =>
          child.events.some((e) => e.type === 'runState' && e.state === 'running') &&
          child.events.filter((e) => e.type === 'metric').length >= 3,
      );
      await child.kill();
      recordFault(name, 'client.sigkill');
      const id = lab.onlyRunId();
      assert.equal(lockPid(lab, id), child.pid, "the dead client's lock is left behind");
      const a = startCli(lab, ['train', 'attach', id]);
      const b = startCli(lab, ['train', 'attach', id]);
      recordFault(name, 'client.concurrent_attach');
      const holders = new Set<number>();
      let finished = false;
      const watch = (async () => {
        while (!finished) {
          const pid = lockPid(lab, id);
          if (pid !== null && pid !== child.pid) holders.add(pid);
          await sleep(20);
        }
      })();
      // One of them follows (holds the lock) and the other gave up: then the job may end.
      let exited = 0;
      void a.done.then(() => exited++);
      void b.done.then(() => exited++);
      await until(
        'one attach to follow and the other to give up',
        () => exited >= 1 && [a.pid, b.pid].includes(lockPid(lab, id) ?? -1),
      );
      letEnd(lab, id);
      const [ra, rb] = await Promise.all([a.done, b.done]);
      finished = true;
      await watch;
      const winners = [ra, rb].filter((r) => r.code === 0);
      const losers = [ra, rb].filter((r) => r.code !== 0);
      assert.equal(
        winners.length,
        1,
        `exit codes ${ra.code}, ${rb.code}\n${ra.stderr}\n${rb.stderr}`,
      );
      assert.match(
        winners[0]!.stdout.trim(),
        new RegExp(`^train: run ${id} succeeded; pod deleted`),
      );
      assert.match(losers[0]!.stderr, new RegExp(`run ${id} is followed by another client`));
      const winnerPid = ra.code === 0 ? a.pid : b.pid;
      assert.deepEqual([...holders], [winnerPid], 'only the follower ever held the lock');
      assert.equal(lab.runJson(id).state, 'succeeded');
      assert.ok(fs.existsSync(path.join(lab.runDir(id), 'output', 'model.json')));
      assertAllDeleted(lab, id);
      lab.assertDeletedAfterRetrieval(String(lab.podJson(id).pod_id), lab.podJson(id).deleted_by);
      recordResult(name, { verified: 1, lost: 0 });
    },
  ],
  [
    'pod rm while the CLI follows: refused without --force (the run goes on); --force deletes the pod and the follower reports it',
    async (lab, name) => {
      const training = startCli(lab, ['train']);
      const id = await jobRunning(lab, training);
      const podId = String(lab.podJson(id).pod_id);
      const refused = await runCli(lab, ['pod', 'rm', id]);
      recordFault(name, 'client.pod_rm');
      assert.equal(refused.code, 1, JSON.stringify(refused));
      assert.ok(
        refused.stderr.includes(
          `error: run ${id} is still running: its training pod ${podId} was kept`,
        ),
        refused.stderr,
      );
      assert.equal(lab.ledgerOf(podId).billing, true, 'the training pod is kept');
      assert.equal(lab.runJson(id).state, 'running');
      assert.equal(lockPid(lab, id), training.pid, 'the follower still holds the run');

      const forced = await runCli(lab, ['pod', 'rm', id, '--force']);
      recordFault(name, 'client.pod_rm_force');
      assert.equal(forced.code, 0, forced.stderr);
      assert.match(
        forced.stdout.trim(),
        new RegExp(`^pod: ${podId} deleted after (\\d+h)?(\\d+m)?\\d+s`),
      );
      assert.equal(lab.ledgerOf(podId).billing, false);
      assert.equal(lab.ledgerOf(podId).deletedBy, 'account');
      const followed = await training.done;
      assert.equal(followed.code, 1, followed.stderr);
      assert.ok(
        followed.stderr.includes(`pod ${podId} was deleted by \`overbrainer pod rm\``),
        followed.stderr,
      );
      const run = lab.runJson(id);
      assert.equal(run.state, 'failed');
      assert.equal(run.message, FAILED_BY_POD_RM);
      assert.equal(lab.podJson(id).deleted_by, 'pod_rm', 'the follower keeps what pod rm recorded');
      assert.equal(lockPid(lab, id), null);
      assertAllDeleted(lab, id);
      assert.ok(!lab.clientKeyExists(id), 'the client key is forgotten');
      // Forced before the retrieval: the user chose to lose the pod's results; none was verified.
      recordResult(name, { verified: 0, lost: 0 });
    },
  ],
];

describe('reliability: two clients on one run', function () {
  this.timeout(400_000);
  const results = new Map<string, Promise<void>>();

  before(function () {
    const suite = this.test?.parent?.fullTitle() ?? 'reliability';
    for (const [title, scenario] of CASES) {
      const work = (async () => {
        const lab = await Lab.start(GATED);
        try {
          await scenario(lab, `${suite} ${title}`);
          recordLedger(`${suite} ${title}`, lab.emulator.ledger());
        } catch (error) {
          await lab.close().catch(() => undefined);
          throw new Error(`${String(error)}\n${lab.transcript()}`, { cause: error });
        }
        const billing = await lab.close();
        assert.deepEqual(
          billing.map((p) => p.id),
          [],
          'pods left billing at close',
        );
      })();
      work.catch(() => undefined); // reported by its `it`
      results.set(title, work);
    }
  });

  after(async () => {
    await Promise.allSettled(results.values());
  });

  for (const [title] of CASES) {
    it(title, async () => {
      await results.get(title);
    });
  }
});

describe('reliability: pod rm --force racing the follower', function () {
  this.timeout(180_000);
  const lab = matrixLabs();

  it("the follower finds the pod gone while pod rm --force still waits for its delete's answer: no recovery, the run fails as removed by pod rm", async () => {
    const l = await lab(GATED);
    const run = runIdHolder();
    const training = l.track(train(l.deps, l.config, l.workspace, { onRun: run.onRun }));
    const id = await l.jobRunning(() => run.id);
    const podId = String(l.podJson(id).pod_id);
    // Runpod carries the delete out and its answer never comes: pod rm is still waiting (its
    // records unwritten) when the follower's connection drops and it finds the pod gone.
    await l.emulator.faults.add({
      kind: 'request',
      route: 'deletePod',
      podId,
      applied: true,
      times: 1,
      effect: { type: 'hang' },
    });
    const removing = removeRunOrPod({ ...l.otherDeps('pod rm'), client: l.deps.client! }, id, {
      force: true,
    });
    let followed = false;
    void training.finally(() => (followed = true)).catch(() => undefined);
    await l.waitFor(
      'the follower to end, or a pod after the removed one',
      () => followed || l.emulator.ledger().pods.length > 1,
      120_000,
    );
    assert.deepEqual(
      l.emulator.ledger().pods.map((p) => p.id),
      [podId],
      `no pod after the removed one: ${l.transcript()}`,
    );
    assert.equal(l.runJson(id).state, 'failed');
    // Recorded by the follower itself: pod rm records it only once its delete is answered.
    assert.equal(l.runJson(id).message, FAILED_BY_POD_RM);
    await Promise.allSettled([training, removing]);
    assert.equal(l.podJson(id).deleted_by, 'pod_rm');
  });
});
