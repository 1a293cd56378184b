/**
 * The run lifecycle core (src/core/runs/flow.ts: train, attach, cancel, keepPod) end to end
 * against the Runpod emulator, whose pods run the real bootstrap, watchdog and sshd in their own
 * namespaces. Each scenario has its own lab (emulator + workspace, test/helpers/lifecycle.ts), so
 * independent scenarios run side by side inside one test, and asserts on run.json, pod.json, the
 * files on disk and the emulator's ledger (what Runpod bills). Timings: production / 60.
 *
 * This file: scenarios 1–5 (a successful run, capacity fallback, an ambiguous create, pods
 * never ready, bootstrap failures); the shared labs and asserts are in
 * test/helpers/lifecycleSuite.ts.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PodError } from '../../src/core/pod/podError';
import { train } from '../../src/core/flow';
import { filesUnder, GPU, runIdHolder } from '../helpers/lifecycle';
import { lifecycleSuite } from '../helpers/lifecycleSuite';
import { podKeyCallsFail } from '../helpers/podKeyFaults';

describe('lifecycle core against the Runpod emulator', function () {
  this.timeout(150_000);
  const { lab, attemptsOf, assertNothingBills, together, assertKeysForgotten } = lifecycleSuite();

  it('1. a successful run: results verified on disk, pod deleted and confirmed, keys forgotten', async () => {
    const l = await lab();
    const run = runIdHolder();
    const podOutput = l.capturePodFilesOnDelete(() => run.id, 'output');
    let whileReady: string[] = [];
    l.bus.on((event) => {
      if (event.type === 'pod' && event.status.kind === 'ready') whileReady = l.podProcessesNow();
    });
    const result = await train(l.deps, l.config, l.workspace, { onRun: run.onRun });
    const returnedMs = Date.now();
    // The leftover check of Lab.close() sees a live pod's processes (sshd among them).
    const seen = whileReady;
    assert.ok(
      seen.some((p) => p.includes('(sshd)')),
      seen.join(', '),
    );
    const id = l.onlyRunId();
    assert.equal(result.run.id, id);
    assert.equal(result.ending, 'deleted');
    const runJson = l.runJson(id);
    assert.equal(runJson.state, 'succeeded', l.transcript());
    assert.equal(runJson.message, null);
    assert.deepEqual(runJson.end, { cause: 'completed', message: null });
    const pod = l.podJson(id);
    const podId = String(pod.pod_id);
    assert.equal(pod.state, 'deleted');
    l.assertDeletedAfterRetrieval(podId, pod.deleted_by);
    assert.deepEqual(
      attemptsOf(l, id).map((a) => a.result),
      ['created'],
    );
    assert.deepEqual(pod.stray_pods, []);
    // Results: what the pod had under output/ is exactly what is on disk.
    const onPod = podOutput.get(podId);
    assert.ok(onPod && onPod.size > 0, 'the pod had output files');
    const local = filesUnder(path.join(l.runDir(id), 'output'));
    assert.deepEqual([...local.keys()], [...onPod.keys()]);
    for (const [file, data] of onPod) assert.ok(local.get(file)?.equals(data), `${file} differs`);
    const metrics = fs.readFileSync(path.join(l.runDir(id), 'metrics.jsonl'), 'utf8');
    assert.ok(metrics.trim().split('\n').length >= 20);
    // The ledger: billed for about as long as pod.json says it lived, from when Runpod says it
    // began billing (created_at is when the create's answer came: later on a loaded machine)
    // to the confirmed delete, never less.
    const entry = l.ledgerOf(podId);
    assert.equal(entry.billing, false);
    assert.equal(entry.runId, id);
    const recordedS = (Date.parse(String(pod.deleted_at)) - Number(pod.billed_from_ms)) / 1000;
    assert.ok(
      recordedS >= entry.gpuBilledSeconds - 1 && recordedS - entry.gpuBilledSeconds <= 2.5,
      `billed ${entry.gpuBilledSeconds} s, pod.json says ${recordedS} s`,
    );
    // Billed, and no longer once train returned (an order of events, not a wall time bound).
    assert.ok(entry.gpuBilledSeconds > 1, `${entry.gpuBilledSeconds} s`);
    assert.ok(
      entry.deletedAtMs !== null && entry.deletedAtMs <= returnedMs,
      'the pod was deleted before train returned',
    );
    assert.equal(l.podsOfRun(id).length, 1);
    // Keys: the client key removed, the host-key secret deleted, the public parts stay.
    await assertKeysForgotten(l, id);
    assert.ok(fs.existsSync(path.join(l.runDir(id), 'ssh', 'known_hosts')));
    assert.equal(await l.hostKeySecretExists(id), false);
    // The watchdog's log was copied before the pod went.
    assert.match(
      fs.readFileSync(path.join(l.runDir(id), '.pod', 'watchdog.log'), 'utf8'),
      /start /,
    );
    // Events in order: creating → created → ready → metrics → deleting → deleted.
    assert.deepEqual(
      l.podEventKinds(id),
      ['creating', 'created', 'ready', 'deleting', 'deleted'],
      l.transcript(),
    );
    const order = l.events
      .map((e) => e.event)
      .filter((e) => e.type === 'pod' || e.type === 'metric')
      .map((e) => (e.type === 'pod' ? e.status.kind : 'metric'));
    assert.ok(order.indexOf('metric') > order.indexOf('ready'), order.join(','));
    assert.ok(order.lastIndexOf('metric') < order.indexOf('deleting'), order.join(','));
    assert.ok(
      result.summary.startsWith(`train: run ${id} succeeded; pod deleted about $`),
      result.summary,
    );
    assertNothingBills(l);
  });

  it('2. capacity fallback: an out-of-stock type is recorded unavailable, the next one is created', async () => {
    const l = await lab({ gpuTypes: [GPU.h100, GPU.rtx4090], steps: 5 });
    const result = await train(l.deps, l.config, l.workspace);
    const id = result.run.id;
    assert.equal(l.runJson(id).state, 'succeeded', l.transcript());
    const attempts = attemptsOf(l, id);
    assert.deepEqual(
      attempts.map((a) => [a.gpu_type, a.result]),
      [
        [GPU.h100, 'unavailable'],
        [GPU.rtx4090, 'created'],
      ],
    );
    assert.equal(attempts[0]?.detail, 'no capacity for this GPU type');
    assert.equal(attempts[0]?.pod_id, undefined);
    assert.deepEqual(l.podEventKinds(id), [
      'creating',
      'unavailable',
      'creating',
      'created',
      'ready',
      'deleting',
      'deleted',
    ]);
    const pods = l.podsOfRun(id);
    assert.equal(pods.length, 1, 'one pod was ever created');
    assert.equal(pods[0]?.gpuTypeId, GPU.rtx4090);
    l.assertDeletedAfterRetrieval(pods[0]!.id);
    assert.equal(l.podJson(id).gpu_type, GPU.rtx4090);
    await assertKeysForgotten(l, id);
    assertNothingBills(l);
  });

  it('3. an ambiguous create (500 after creating; no answer until the timeout): the pod is adopted, exactly one billed', async () => {
    const ambiguous = async (mode: 'fail' | 'hang'): Promise<void> => {
      const l = await lab({ steps: 5, timing: mode === 'hang' ? { createTimeoutMs: 2_000 } : {} });
      if (mode === 'fail') await l.emulator.faults.createThenFail(500);
      else await l.emulator.faults.createThenHang();
      const result = await train(l.deps, l.config, l.workspace);
      const id = result.run.id;
      assert.equal(l.runJson(id).state, 'succeeded', `${mode}: ${l.transcript()}`);
      const attempts = attemptsOf(l, id);
      assert.deepEqual(
        attempts.map((a) => a.result),
        ['adopted'],
        mode,
      );
      const pods = l.podsOfRun(id);
      assert.equal(pods.length, 1, `${mode}: exactly one pod was created`);
      assert.equal(attempts[0]?.pod_id, pods[0]?.id);
      l.assertDeletedAfterRetrieval(pods[0]!.id);
      const creates = l.emulator.requests().filter((r) => r.route === 'createPod');
      assert.equal(creates.length, 1, `${mode}: the create was never re-sent`);
      assert.equal(creates[0]?.status, mode === 'fail' ? 500 : 'hung');
      assert.ok(
        l.logs().some((line) => line.includes('went unanswered: looking for it by its run marker')),
      );
      await assertKeysForgotten(l, id);
      assertNothingBills(l);
    };
    await together([ambiguous('fail'), ambiguous('hang')]);
  });

  it('4. pods never ready: each deleted and confirmed before the next type; the run fails naming how many pods never became ready and why the last did not', async () => {
    await together([allNotReady(), thenReady()]);
  });

  /** The first type's pod never answers SSH; the second type's pod (same client key) runs the job. */
  async function thenReady(): Promise<void> {
    const l = await lab({
      gpuTypes: [GPU.rtx4090, GPU.a100],
      steps: 5,
      timing: { readyTimeoutMs: 8_000 },
    });
    await l.emulator.faults.add({ kind: 'sshd', mode: 'silent', pods: 1 });
    const result = await train(l.deps, l.config, l.workspace);
    const id = result.run.id;
    assert.equal(l.runJson(id).state, 'succeeded', l.transcript());
    assert.deepEqual(
      attemptsOf(l, id).map((a) => [a.gpu_type, a.result]),
      [
        [GPU.rtx4090, 'not_ready'],
        [GPU.a100, 'created'],
      ],
    );
    const [first, second] = l.podsOfRun(id);
    assert.ok(first && second);
    assert.ok(first.deletedAtMs !== null && first.deletedAtMs <= second.createdAtMs);
    assert.equal(l.podJson(id).pod_id, second.id);
    assert.equal(l.podJson(id).state, 'deleted');
    await assertKeysForgotten(l, id);
    assertNothingBills(l);
  }

  async function allNotReady(): Promise<void> {
    const l = await lab({ gpuTypes: [GPU.rtx4090, GPU.a100], timing: { readyTimeoutMs: 5_000 } });
    await l.emulator.faults.add({ kind: 'sshd', mode: 'closed', pods: 1 });
    await l.emulator.faults.add({ kind: 'sshd', mode: 'unpublished', pods: 1 });
    const { error, runId } = await l.trainOutcome();
    assert.ok(error instanceof PodError && error.kind === 'no_capacity', String(error));
    const id = runId!;
    const runJson = l.runJson(id);
    assert.equal(runJson.state, 'failed');
    assert.equal(
      runJson.message,
      'no gpu_types entry gave a ready pod: 2 pods were created but never became ready, the last one because it did not answer SSH with its pinned host key within 5 s: it published no SSH endpoint',
    );
    assert.equal((runJson.end as { cause: string }).cause, 'provision_failed');
    assert.equal(runJson.job, null);
    const attempts = attemptsOf(l, id);
    assert.deepEqual(
      attempts.map((a) => [a.gpu_type, a.result]),
      [
        [GPU.rtx4090, 'not_ready'],
        [GPU.a100, 'not_ready'],
      ],
    );
    assert.match(
      attempts[0]?.detail ?? '',
      /^it did not answer SSH with its pinned host key within 5 s: SSH to 127\.0\.0\.1:\d+ failed: /,
    );
    const [first, second] = l.podsOfRun(id);
    assert.ok(first && second, 'two pods were created');
    assert.equal(first.deletedBy, 'account');
    assert.equal(second.deletedBy, 'account');
    assert.ok(
      first.deletedAtMs !== null && first.deletedAtMs <= second.createdAtMs,
      'the first pod was gone before the second was created',
    );
    assert.deepEqual(l.podEventKinds(id), [
      'creating',
      'created',
      'deleting',
      'deleted',
      'creating',
      'created',
      'deleting',
      'deleted',
    ]);
    assert.ok(
      l
        .podEvents(id)
        .filter((s) => s.kind === 'deleting')
        .every((s) => s.kind === 'deleting' && s.reason === 'not_ready'),
    );
    await assertKeysForgotten(l, id);
    assertNothingBills(l);
  }

  it('5. bootstrap failures (bad host key secret, claimed run dir) and a watchdog that cannot delete: run refused, pod deleted', async () => {
    // A host key secret that is no key: the bootstrap fails before sshd, its watchdog deletes the pod.
    const badSecret = async (): Promise<void> => {
      const l = await lab();
      const { runId, error } = await l.trainWithBadHostKey();
      assert.notEqual(error, null, 'train failed');
      const id = runId!;
      const runJson = l.runJson(id);
      assert.equal(runJson.state, 'failed');
      // The client sees the pod its watchdog deletes as TERMINATED or gone (404 confirmed), by
      // timing: a failed bootstrap, reported as such; no other GPU type is tried.
      assert.match(
        String(runJson.message),
        /^the pod's bootstrap failed: the pod (is gone|reads TERMINATED) before it answered SSH/,
        l.transcript(),
      );
      const [pod] = l.podsOfRun(id);
      assert.ok(pod);
      assert.equal(pod.deletedBy, 'pod', 'its own watchdog deleted it');
      const log = l.emulator.podLog(pod.id);
      assert.match(log, /bootstrap failed: OVERBRAINER_HOST_KEY is not an OpenSSH private key/);
      assert.match(log, /delete reason=bootstrap_failed/);
      assert.deepEqual(
        attemptsOf(l, id).map((a) => a.result),
        ['refused'],
      );
      const podJson = l.podJson(id);
      assert.equal(podJson.state, 'deleted');
      await assertKeysForgotten(l, id);
      assertNothingBills(l);
    };
    // The run dir on the network volume is claimed by another pod: the bootstrap refuses it.
    const claimed = async (): Promise<void> => {
      const l = await lab({
        targetExtra: 'network_volume_id = "agv6w2qcg7"\ndata_center_ids = ["EU-RO-1"]\n',
      });
      const run = runIdHolder();
      let claimDir = '';
      const other =
        'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherPodOtherPodOtherPodOtherPodOtherPod0';
      const result = train(l.deps, l.config, l.workspace, {
        onRun: (r) => {
          run.onRun(r);
          claimDir = path.join(l.emulator.stateDir, 'volumes', 'agv6w2qcg7', 'overbrainer', r.id);
          fs.mkdirSync(claimDir, { recursive: true });
          fs.writeFileSync(path.join(claimDir, '.claim'), `${other}\n`);
        },
      });
      await assert.rejects(result);
      const id = run.id!;
      assert.equal(l.runJson(id).state, 'failed');
      const [pod] = l.podsOfRun(id);
      assert.ok(pod);
      assert.equal(pod.deletedBy, 'pod');
      assert.match(l.emulator.podLog(pod.id), /claimed by another pod: refusing it/);
      assert.match(l.emulator.podLog(pod.id), /delete reason=bootstrap_failed/);
      assert.deepEqual(
        fs.readdirSync(claimDir),
        ['.claim'],
        "nothing was written into the other pod's run dir",
      );
      assert.equal(fs.readFileSync(path.join(claimDir, '.claim'), 'utf8'), `${other}\n`);
      await assertKeysForgotten(l, id);
      assertNothingBills(l);
    };
    // The pod's own key cannot read its pod: the watchdog's proof fails, the client refuses the
    // run at its verdict, deletes the pod itself, and tries no other type.
    const refused = async (): Promise<void> => {
      const l = await lab({ gpuTypes: [GPU.rtx4090, GPU.a100] });
      await podKeyCallsFail(l.emulator.faults, 'getPod', { type: 'status', status: 403 });
      const { error, runId } = await l.trainOutcome();
      assert.ok(error instanceof PodError && error.kind === 'watchdog_refused', String(error));
      const id = runId!;
      const runJson = l.runJson(id);
      assert.equal(runJson.state, 'failed');
      assert.equal(
        runJson.message,
        "the pod's watchdog cannot delete its pod (http_403): the run is refused and the pod deleted",
      );
      assert.deepEqual(
        attemptsOf(l, id).map((a) => a.result),
        ['refused'],
      );
      const podJson = l.podJson(id);
      assert.equal(podJson.state, 'deleted');
      assert.equal(podJson.deleted_by, 'client');
      const pods = l.podsOfRun(id);
      assert.equal(pods.length, 1, 'no other GPU type was tried');
      assert.equal(pods[0]?.deletedBy, 'account');
      assert.ok(l.podEvents(id).some((s) => s.kind === 'deleting' && s.reason === 'refused'));
      await assertKeysForgotten(l, id);
      assertNothingBills(l);
    };
    await together([badSecret(), claimed(), refused()]);
  });
});
