/**
 * Reliability matrix: Runpod's API answering as its own document allows. A create's 400 in
 * Runpod's problem form means "this GPU type could not be placed" whatever its words, so the walk
 * moves to the next type; a spent quota in the RateLimit headers of a 2xx answer is waited out
 * before the next call, and a 429 with Retry-After is honoured on the create and the delete
 * without a second pod. Each scenario has its own lab (the emulator's real pods run the real
 * bootstrap and watchdog). Timings: production / 60 (Runpod's Retry-After and reset seconds are
 * Runpod's own, never scaled).
 */
import assert from 'node:assert/strict';
import { removeRunOrPod } from '../../src/core/pod/podAdmin';
import { PodError } from '../../src/core/pod/podError';
import { train } from '../../src/core/flow';
import { FollowError } from '../../src/core/train/follow';
import { GPU, Lab, matrixLabs, type TrainOutcome } from '../helpers/lifecycle';
import { recordFault } from '../helpers/reliability';
import { startTcpProxy, type TcpProxy } from '../helpers/sshd';

/** The example of Runpod's document for a 400: no word of capacity in it. */
const DOCUMENT_400_DETAIL = 'request could not be processed';

describe('reliability: Runpod API limits and answers as its document describes', function () {
  this.timeout(180_000);
  const lab = matrixLabs();

  const run = (l: Lab): Promise<TrainOutcome> => l.trainOutcome();

  const calls = (l: Lab, route: string) => l.emulator.requests().filter((r) => r.route === route);
  const attempts = (l: Lab, id: string): string[] =>
    (l.podJson(id).attempts as { result: string }[]).map((a) => a.result);

  it("a create answered 400 with the document's own example (no word of capacity) moves the walk to the next GPU type; the run succeeds there", async function () {
    const l = await lab({ steps: 3, gpuTypes: [GPU.rtx4090, GPU.a100] });
    await l.emulator.faults.add({
      kind: 'request',
      route: 'createPod',
      gpuId: GPU.rtx4090,
      times: 'always',
      effect: { type: 'status', status: 400, detail: DOCUMENT_400_DETAIL },
    });
    recordFault(this, 'api.createPod.400-problem');
    const o = await run(l);
    assert.equal(o.error, null, `${String(o.error)}\n${l.transcript()}`);
    const id = o.runId!;
    assert.equal(o.result?.run.state, 'succeeded', l.transcript());
    assert.deepEqual(attempts(l, id), ['unavailable', 'created']);
    assert.equal(calls(l, 'createPod').length, 2, 'one create per GPU type');
    const made = l.podsOfRun(id);
    assert.equal(made.length, 1);
    assert.deepEqual(
      l.billing().map((p) => p.id),
      [],
    );
  });

  it('every GPU type answered 400 in problem form: each is tried once, no pod is made, the run ends no_capacity', async function () {
    const l = await lab({ steps: 3, gpuTypes: [GPU.rtx4090, GPU.a100] });
    await l.emulator.faults.add({
      kind: 'request',
      route: 'createPod',
      times: 'always',
      effect: { type: 'status', status: 400, detail: DOCUMENT_400_DETAIL },
    });
    recordFault(this, 'api.createPod.400-problem', 2);
    const o = await run(l);
    assert.ok(o.error instanceof PodError && o.error.kind === 'no_capacity', String(o.error));
    const id = o.runId!;
    assert.deepEqual(attempts(l, id), ['unavailable', 'unavailable']);
    assert.equal(calls(l, 'createPod').length, 2);
    assert.equal(l.podsOfRun(id).length, 0);
    assert.equal(l.runJson(id).state, 'failed');
  });

  it("a create whose 201 says the quota is spent: the run's next calls wait for the reset and never draw a 429; one pod, the run succeeds", async function () {
    const l = await lab({ steps: 3 });
    await l.emulator.faults.add({
      kind: 'request',
      route: 'createPod',
      effect: { type: 'quotaSpent', resetS: 2 },
    });
    recordFault(this, 'api.quota-spent');
    const o = await run(l);
    assert.equal(o.error, null, `${String(o.error)}\n${l.transcript()}`);
    const id = o.runId!;
    assert.equal(o.result?.run.state, 'succeeded', l.transcript());
    const refused = l.emulator
      .requests()
      .filter((r) => r.key === 'account' && r.status === 429)
      .map((r) => `${r.method} ${r.path}`);
    assert.deepEqual(refused, [], 'no call was sent into the spent quota');
    assert.equal(calls(l, 'createPod').length, 1);
    assert.equal(l.podsOfRun(id).length, 1);
  });

  it('429 with Retry-After on the create and on the delete: each is honoured, one pod is made and it is deleted', async function () {
    const l = await lab({ steps: 3 });
    await l.emulator.faults.rateLimit('createPod', 1);
    // The client's delete (the account key), not the watchdog's own.
    await l.emulator.faults.add({
      kind: 'request',
      route: 'deletePod',
      key: 'account',
      effect: { type: 'status', status: 429, retryAfterS: 1 },
    });
    recordFault(this, 'api.createPod.429');
    recordFault(this, 'api.deletePod.429');
    const o = await run(l);
    assert.equal(o.error, null, `${String(o.error)}\n${l.transcript()}`);
    const id = o.runId!;
    assert.equal(o.result?.run.state, 'succeeded', l.transcript());
    const creates = calls(l, 'createPod');
    assert.deepEqual(
      creates.map((r) => r.status),
      [429, 201],
      'the refused create was sent again only after Runpod refused it unprocessed',
    );
    // Between the 429 and the second create, after Retry-After, the run's pods were listed by
    // its marker (the reconcile of an ambiguous create), and none of the attempt was found.
    const looked = calls(l, 'listPods').filter(
      (r) => r.key === 'account' && r.seq > creates[0]!.seq && r.seq < creates[1]!.seq,
    );
    assert.ok(
      looked.length > 0,
      'the pods of the run were listed before the create was sent again',
    );
    assert.ok(looked[0]!.atMs - creates[0]!.atMs >= 900, 'the list waited for Retry-After');
    // The client's delete is refused once and sent again after Retry-After; the watchdog, told the
    // results are retrieved, may delete the pod in between (the second delete then answers 404).
    const deletes = calls(l, 'deletePod').filter((r) => r.key === 'account');
    assert.equal(deletes[0]?.status, 429);
    assert.equal(deletes.length, 2, JSON.stringify(deletes));
    const made = l.podsOfRun(id);
    assert.equal(made.length, 1, 'one pod was ever made');
    assert.ok(['account', 'pod'].includes(String(made[0]?.deletedBy)), String(made[0]?.deletedBy));
    assert.deepEqual(
      l.billing().map((p) => p.id),
      [],
    );
    assert.equal(l.podJson(id).state, 'deleted');
  });

  it('a create Runpod carried out but answered 429: after Retry-After the attempt is looked for by run marker and name and adopted; the create is never sent again, one pod is ever made', async function () {
    const l = await lab({ steps: 3 });
    // The gateway refused the answer, not the work: the pod exists although the create said 429.
    await l.emulator.faults.add({
      kind: 'request',
      route: 'createPod',
      applied: true,
      effect: { type: 'status', status: 429, retryAfterS: 1 },
    });
    recordFault(this, 'api.createPod.429-applied');
    const o = await run(l);
    assert.equal(o.error, null, `${String(o.error)}\n${l.transcript()}`);
    const id = o.runId!;
    assert.equal(o.result?.run.state, 'succeeded', l.transcript());
    assert.deepEqual(
      calls(l, 'createPod').map((r) => r.status),
      [429],
      'a create answered 429 is reconciled before it is sent again',
    );
    assert.deepEqual(attempts(l, id), ['adopted']);
    const made = l.podsOfRun(id);
    assert.equal(made.length, 1, 'one pod was ever made');
    assert.deepEqual(
      l.billing().map((p) => p.id),
      [],
    );
    assert.equal(l.podJson(id).state, 'deleted');
  });

  it('the API unreachable for the delete after retrieval: the delete keeps being tried with a countdown warning that names the API and what the watchdog does meanwhile; no pod is left billing, pod.json says deleted once the API answers', async function () {
    const l = await lab({ steps: 3 });
    // Two whole delete calls (each with all its retries) lose their connection, as when the API
    // cannot be reached; the third answers.
    const lost = await l.failWholeCalls('deletePod', 2, { type: 'drop' });
    recordFault(this, 'api.deletePod.unreachable', lost);
    const o = await run(l);
    assert.equal(o.error, null, `${String(o.error)}\n${l.transcript()}`);
    const id = o.runId!;
    assert.equal(o.result?.run.state, 'succeeded', l.transcript());
    const made = l.podsOfRun(id);
    assert.equal(made.length, 1);
    // The results are retrieved: the watchdog may delete the pod first, as the warning says.
    assert.ok(['account', 'pod'].includes(String(made[0]?.deletedBy)), String(made[0]?.deletedBy));
    assert.deepEqual(
      l.billing().map((p) => p.id),
      [],
    );
    assert.equal(l.podJson(id).state, 'deleted');
    const countdown = l.events
      .map((e) => e.event)
      .filter(
        (e): e is Extract<typeof e, { type: 'warning' }> =>
          e.type === 'warning' && e.code === 'api_unreachable',
      );
    assert.equal(countdown.length, 2, 'one warning per failed delete');
    for (const warning of countdown) {
      assert.equal(warning.runId, id);
      assert.ok(warning.message.includes(l.deps.client!.baseUrl), warning.message);
      assert.match(warning.message, /trying again in \d+ s/);
      assert.match(
        warning.message,
        /the results are retrieved: the pod's watchdog deletes it by itself within \d+ s/,
      );
    }
  });

  it("the API unreachable while a follow lost its pod's SSH: a countdown warning names the API, how long the client keeps looking and that the job keeps running until the watchdog deletes the pod; once the API answers the pod is found running, nothing is deleted and the run stays running", async function () {
    const relays: TcpProxy[] = [];
    try {
      const l = await lab({
        steps: 2000,
        stepSeconds: 0.05,
        emulator: {
          // The pod's SSH goes through a relay the test closes, as when its host drops off.
          sshRelay: async (_podId, sshPort) => {
            const relay = await startTcpProxy(sshPort);
            relays.push(relay);
            return relay.port;
          },
        },
      });
      let runId: string | null = null;
      const flow = l.track(
        train(l.deps, l.config, l.workspace, {
          onRun: (r) => {
            runId = r.id;
          },
        }),
      );
      const settled = flow.then(
        () => null,
        (error: unknown) => error,
      );
      const id = await l.jobRunning(() => runId);
      const podId = String(l.podJson(id).pod_id);
      const deadline = String(l.podJson(id).deadline);
      await l.emulator.faults.unreachable(600_000, 'refuse');
      for (const relay of relays) await relay.close();
      recordFault(this, 'api.unreachable-while-following');
      recordFault(this, 'ssh.lost-mid-follow');
      const countdown = (): Extract<(typeof l.events)[number]['event'], { type: 'warning' }>[] =>
        l.warnings().filter((w) => w.code === 'api_unreachable');
      // Two warnings: the client keeps looking, and says so each time, until the API answers.
      await l.waitFor('the countdown to repeat', () => countdown().length >= 2);
      await l.emulator.faults.reachable();
      const error = await settled;
      assert.ok(error instanceof FollowError, `${String(error)}\n${l.transcript()}`);
      for (const warning of countdown()) {
        assert.equal(warning.runId, id);
        assert.ok(warning.message.includes(l.deps.client!.baseUrl), warning.message);
        assert.ok(warning.message.includes(podId), warning.message);
        assert.match(warning.message, /trying again in \d+ s \(until \d{4}-\d\d-\d\dT/);
        assert.ok(
          warning.message.includes(
            `the job keeps running; if nobody follows, the pod's watchdog deletes it at its deadline, ${deadline}`,
          ),
          warning.message,
        );
        assert.match(warning.message, /unless a client renews its lease/);
      }
      // Lost, not failed: the job goes on and its pod was not deleted.
      assert.equal(l.runJson(id).state, 'running');
      assert.equal(l.ledgerOf(podId).deletedAtMs, null, 'the pod was not deleted');
      assert.notEqual(l.podJson(id).state, 'deleted');
      // The test's own cleanup: the run's pod removed as a user would.
      await removeRunOrPod({ ...l.deps, client: l.deps.client! }, id, { force: true });
      assert.deepEqual(
        l.billing().map((p) => p.id),
        [],
      );
    } finally {
      for (const relay of relays) await relay.close();
    }
  });
});
