/**
 * Reliability matrix: creates whose answer never came. A create that got no usable answer may
 * have made a pod that Runpod lists late, so the run's pods are looked up by their run marker
 * (never by a second create) until the list answers, and once more on every way out of the GPU
 * walk: no pod of the run is left billing and pod.json never says `deleted` while one may exist.
 * Each scenario has its own lab (the emulator's real pods run the real bootstrap and watchdog).
 * Timings: production / 60.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { removePods } from '../../src/core/pod/podAdmin';
import { PodError } from '../../src/core/pod/podError';
import { train } from '../../src/core/flow';
import { GPU, Lab, matrixLabs, type TrainOutcome } from '../helpers/lifecycle';
import { recordFault } from '../helpers/reliability';

describe('reliability: creates that went unanswered', function () {
  this.timeout(180_000);
  const lab = matrixLabs();

  const run = (l: Lab): Promise<TrainOutcome> => l.trainOutcome();

  const creates = (l: Lab) => l.emulator.requests().filter((r) => r.route === 'createPod');
  const attempts = (l: Lab, id: string): string[] =>
    (l.podJson(id).attempts as { result: string }[]).map((a) => a.result);

  /** Trains on `l`: the run succeeds on the one pod its only create made, adopted. Its ID. */
  async function adoptedOnce(l: Lab): Promise<string> {
    const o = await run(l);
    assert.equal(o.error, null, `${String(o.error)}\n${l.transcript()}`);
    const id = o.runId!;
    assert.equal(o.result?.run.state, 'succeeded', l.transcript());
    assert.equal(creates(l).length, 1, 'the create was never sent again');
    assert.deepEqual(attempts(l, id), ['adopted']);
    assert.equal(l.podsOfRun(id).length, 1, 'one pod was ever made');
    return id;
  }

  it('a create answered 500 while the pod lists fail too: the list is retried until it answers, the create is never sent again, the pod is adopted', async function () {
    const l = await lab({ steps: 3 });
    await l.emulator.faults.createThenFail(500);
    // Two whole list calls (each with its retries) fail: the two looks a reconcile takes.
    const failed = await l.failWholeCalls('listPods', 2, { type: 'status', status: 500 }, 1);
    recordFault(this, 'api.createPod.created-500');
    recordFault(this, 'api.listPods.500', failed);
    await adoptedOnce(l);
    assert.deepEqual(
      l.billing().map((p) => p.id),
      [],
    );
  });

  it("the pod lists cannot be reached while an unanswered create is reconciled: a countdown warning names the API, says the create is not sent again, how long the client keeps listing and what the pod's watchdog does meanwhile; the pod is adopted once Runpod lists", async function () {
    const l = await lab({ steps: 3 });
    await l.emulator.faults.createThenFail(500);
    // Two whole list calls (each with all its retries) lose their connection.
    const lost = await l.failWholeCalls('listPods', 2, { type: 'drop' });
    recordFault(this, 'api.createPod.created-500');
    recordFault(this, 'api.listPods.unreachable', lost);
    const id = await adoptedOnce(l);
    const countdown = l.warnings().filter((w) => w.code === 'api_unreachable');
    assert.equal(countdown.length, 2, `one warning per failed list\n${l.transcript()}`);
    for (const warning of countdown) {
      assert.equal(warning.runId, id);
      assert.ok(warning.message.includes(l.deps.client!.baseUrl), warning.message);
      assert.match(
        warning.message,
        /the create of \S+ got no clear answer .* so it is not sent again/,
      );
      assert.match(warning.message, /trying again in \d+ s \(until \d{4}-\d\d-\d\dT/);
      assert.match(
        warning.message,
        /meanwhile a pod that create may have made is deleted by its own watchdog after boot_grace_minutes \(\d+ (s|min)\) without a job/,
      );
    }
    assert.deepEqual(
      l.billing().map((p) => p.id),
      [],
    );
  });

  it('creates that went unanswered and are listed late, then no capacity anywhere: the walk looks again before it gives up and deletes them; pod.json says deleted only then', async function () {
    const l = await lab({ steps: 3, gpuTypes: [GPU.rtx4090, GPU.a5000] });
    await l.emulator.faults.setStock(GPU.a5000, 0);
    // Both creates of the first type make a pod, answer 500, and the pod stays off the next two
    // lists: the reconcile of each (two looks) cannot see it.
    await l.emulator.faults.add({
      kind: 'request',
      route: 'createPod',
      gpuId: GPU.rtx4090,
      applied: true,
      unlistedFor: 2,
      times: 2,
      effect: { type: 'status', status: 500 },
    });
    recordFault(this, 'api.createPod.created-500-listed-late', 2);
    recordFault(this, 'pod.no-capacity');
    const o = await run(l);
    assert.ok(o.error instanceof PodError && o.error.kind === 'no_capacity', String(o.error));
    const id = o.runId!;
    assert.deepEqual(attempts(l, id), ['ambiguous', 'ambiguous', 'unavailable']);
    const made = l.podsOfRun(id);
    assert.equal(made.length, 2, 'both unanswered creates made a pod');
    assert.deepEqual(
      l.billing().map((p) => p.id),
      [],
      'no pod of the run is left billing when train returns',
    );
    for (const pod of made) assert.equal(pod.deletedBy, 'account', 'deleted by the client');
    const podJson = l.podJson(id);
    assert.equal(podJson.state, 'deleted');
    assert.deepEqual(podJson.stray_pods, []);
    assert.equal(l.runJson(id).state, 'failed');
    assert.equal(l.clientKeyExists(id), false, 'the client key is forgotten');
  });

  it('a create that went unanswered while the pod lists keep failing: no second create, pod.json says a pod may exist (never deleted), the keys stay; pod rm finds and deletes it once Runpod lists', async function () {
    const l = await lab({ steps: 3, timing: { reconcileListLimitMs: 1_500 } });
    // The first create makes a pod, answers 500, and the pod stays off the next two lists; the
    // second create answers 503 and makes nothing; from the third list on, every list fails.
    await l.emulator.faults.add({
      kind: 'request',
      route: 'createPod',
      applied: true,
      unlistedFor: 2,
      effect: { type: 'status', status: 500 },
    });
    await l.emulator.faults.add({
      kind: 'request',
      route: 'createPod',
      nth: 2,
      effect: { type: 'status', status: 503 },
    });
    await l.emulator.faults.add({
      kind: 'request',
      route: 'listPods',
      key: 'account',
      nth: 3,
      times: 'always',
      effect: { type: 'status', status: 500 },
    });
    recordFault(this, 'api.createPod.created-500-listed-late');
    recordFault(this, 'api.createPod.503');
    recordFault(this, 'api.listPods.500-always');
    const o = await run(l);
    assert.ok(o.error instanceof PodError && o.error.kind === 'unanswered', String(o.error));
    assert.match(o.error.message, /could not be listed/);
    const id = o.runId!;
    assert.equal(creates(l).length, 2, 'two creates, none while the lists failed');
    assert.deepEqual(attempts(l, id), ['ambiguous', 'ambiguous']);
    const [made] = l.podsOfRun(id);
    assert.ok(made?.billing, 'the first create made a pod that bills');
    const podJson = l.podJson(id);
    assert.notEqual(podJson.state, 'deleted', 'pod.json never says deleted while a pod may exist');
    assert.equal(podJson.unconfirmed_create, true);
    assert.equal(l.runJson(id).state, 'failed');
    assert.ok(l.clientKeyExists(id), 'the keys stay while a pod may exist');
    assert.ok(
      l.warnings().some((w) => w.code === 'strays' && w.message.includes('pod rm')),
      l.transcript(),
    );
    // Runpod answers again: pod rm finds the pod by its run marker and deletes it.
    l.emulator.faults.clear();
    const removal = await removePods({ ...l.deps, client: l.client }, id);
    assert.equal(removal.error, null, String(removal.error));
    assert.deepEqual(
      removal.removed.map((p) => p.podId),
      [made.id],
    );
    assert.equal(l.ledgerOf(made.id).billing, false);
    const after = l.podJson(id);
    assert.equal(after.state, 'deleted');
    assert.equal(after.unconfirmed_create, undefined);
    assert.equal(l.clientKeyExists(id), false, 'the keys go with the last pod');
  });
});

describe('reliability: Ctrl-C while the job is being started', function () {
  this.timeout(180_000);
  const lab = matrixLabs();

  it('Ctrl-C during the upload: the job is never started, the pod is deleted, the run failed "interrupted before the job started" (one outcome, no unfollowed job)', async function () {
    const l = await lab({ steps: 3 });
    // A large upload keeps the upload running long enough to be interrupted in the middle.
    writeFileSync(path.join(l.workspace, 'data', 'big.bin'), randomBytes(48 * 1024 * 1024));
    recordFault(this, 'client.interrupt.upload');
    let runId: string | null = null;
    let podId: string | null = null;
    const stop = new AbortController();
    l.bus.on((event) => {
      if (event.type === 'pod' && event.status.kind === 'ready') podId = event.status.podId;
    });
    const training = l.track(
      train(l.deps, l.config, l.workspace, {
        onRun: (r) => {
          runId = r.id;
        },
        signal: stop.signal,
      }),
    );
    // The upload is under way once the pod has begun writing the large file (its own channel).
    await l.waitFor('the upload to begin', () => {
      if (podId === null || runId === null) return false;
      const pod = l.emulator.pod(podId);
      if (pod === undefined) return false;
      return existsSync(path.join(pod.dirs.workspace, 'overbrainer', runId, 'data', 'big.bin'));
    });
    stop.abort();
    const error = await training.then(
      () => null,
      (caught: unknown) => caught,
    );
    const id = runId!;
    assert.ok(error instanceof PodError && error.kind === 'interrupted', `${String(error)}`);
    const run = l.runJson(id);
    assert.equal(run.state, 'failed', l.transcript());
    assert.equal(run.message, 'interrupted before the job started');
    assert.equal(run.job ?? null, null, 'no job was started');
    assert.equal(l.metrics(id), 0, 'no job ran');
    assert.equal(l.podJson(id).state, 'deleted');
    assert.equal(l.ledgerOf(podId!).deletedBy, 'account', 'the client deleted the pod');
    assert.deepEqual(
      l.billing().map((p) => p.id),
      [],
    );
  });
});
