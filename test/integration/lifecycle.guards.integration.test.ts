/**
 * The run lifecycle core (src/core/runs/flow.ts: train, attach, cancel, keepPod) end to end
 * against the Runpod emulator, whose pods run the real bootstrap, watchdog and sshd in their own
 * namespaces. Each scenario has its own lab (emulator + workspace, test/helpers/lifecycle.ts), so
 * independent scenarios run side by side inside one test, and asserts on run.json, pod.json, the
 * files on disk and the emulator's ledger (what Runpod bills). Timings: production / 60.
 *
 * This file: scenarios 6–11 (the max_cost and max_hours guards, a pod lost mid-job, cancel,
 * attach after SIGKILL, keep, the stray sweep); the shared labs and asserts are in
 * test/helpers/lifecycleSuite.ts.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { MAX_COST_REACHED, MAX_HOURS_REACHED } from '../../src/core/pod/limitEnd';
import { PodError } from '../../src/core/pod/podError';
import { attach, cancel, FlowError, keepPod, train } from '../../src/core/flow';
import { GPU, Lab, type LabOptions, runIdHolder, spawnLifecycleChild } from '../helpers/lifecycle';
import { lifecycleSuite } from '../helpers/lifecycleSuite';

describe('lifecycle core against the Runpod emulator', function () {
  this.timeout(150_000);
  const { lab, assertNothingBills, together, assertKeysForgotten, requestsFor } = lifecycleSuite();

  /** Once the pod is ready, every API call made with the pod's key answers 500. */
  const cutWatchdogOffOnceReady = (l: Lab): void => {
    l.bus.on((event) => {
      if (event.type === 'pod' && event.status.kind === 'ready') {
        void l.emulator.faults.add({
          kind: 'request',
          route: '*',
          key: 'pod',
          times: 'always',
          effect: { type: 'status', status: 500 },
        });
      }
    });
  };

  /** A job that stalls (no metric ever) on a pod whose max_hours ends 18 s after its create. */
  const SHORT_DEADLINE: LabOptions = {
    command: 'sleep 100',
    maxHours: 0.005,
    timing: {
      stallMs: 1_000,
      leaseTtlMs: 3_000,
      deadlineMarginMs: 2_000,
      leaseRenewMs: 1_000,
      leaseTickMs: 500,
      // `sleep` never honours the watchdog's deadline snapshot request: no wait for it here.
      snapshotWaitS: 0,
    },
  };

  it("6b. max_cost_usd: the client's guard deletes the pod once its cap is spent, whatever the lease, when its watchdog could not", async () => {
    // $0.004 at $0.69/h buys about 21 s; the job would take 100 s; max_hours is far.
    const l = await lab({
      command: 'sleep 100',
      maxHours: 1,
      targetExtra: 'max_cost_usd = 0.004\n',
      timing: { leaseTickMs: 500, leaseRenewMs: 1_000 },
    });
    // Once the pod is ready its watchdog can no longer reach the API: only the client's guard is left.
    cutWatchdogOffOnceReady(l);
    const run = runIdHolder();
    await assert.rejects(
      train(l.deps, l.config, l.workspace, { onRun: run.onRun }),
      (error: unknown) => {
        assert.ok(error instanceof PodError && error.kind === 'cost_cap_reached', String(error));
        assert.equal(error.message, MAX_COST_REACHED);
        return true;
      },
    );
    const id = run.id!;
    const runJson = l.runJson(id);
    assert.equal(runJson.state, 'failed');
    assert.equal(runJson.message, MAX_COST_REACHED);
    assert.deepEqual(runJson.end, { cause: 'cost_cap', message: MAX_COST_REACHED });
    const podJson = l.podJson(id);
    const podId = String(podJson.pod_id);
    assert.equal(podJson.state, 'deleted');
    assert.equal(podJson.deleted_by, 'client');
    const capAtS = Number(podJson.created_unix) + Math.floor((0.004 / 0.69) * 3600);
    const entry = l.ledgerOf(podId);
    assert.equal(entry.deletedBy, 'account');
    // Not before the cap; after it, by the guard's first tick past it and one delete request
    // within the product's request limit (the bound the timing gives, not a guess of the load).
    const latestMs = capAtS * 1000 + 1_000 + l.timing.leaseTickMs + l.timing.requestTimeoutMs;
    assert.ok(
      entry.deletedAtMs !== null &&
        entry.deletedAtMs >= capAtS * 1000 - 1_000 &&
        entry.deletedAtMs <= latestMs,
      `deleted ${entry.deletedAtMs}, cap ${capAtS * 1000}, latest ${latestMs}`,
    );
    assert.ok(
      Number(podJson.deadline_unix) * 1000 > entry.deletedAtMs + 60_000,
      'long before max_hours',
    );
    assert.ok(l.podEvents(id).some((s) => s.kind === 'deleting' && s.reason === 'cost_cap'));
    await assertKeysForgotten(l, id);
    assertNothingBills(l);
  });

  it("6. max_hours: the client's guard deletes a stalled job's pod its watchdog failed to; the watchdog deletes it when no client follows", async () => {
    const clientGuard = async (): Promise<void> => {
      const l = await lab(SHORT_DEADLINE);
      // Once the pod is ready its watchdog can no longer reach the API: only the client's guard is left.
      cutWatchdogOffOnceReady(l);
      const run = runIdHolder();
      await assert.rejects(
        train(l.deps, l.config, l.workspace, { onRun: run.onRun }),
        (error: unknown) => {
          assert.ok(error instanceof PodError && error.kind === 'deadline_reached', String(error));
          return true;
        },
      );
      const id = run.id!;
      const runJson = l.runJson(id);
      assert.equal(runJson.state, 'failed');
      assert.equal(runJson.message, MAX_HOURS_REACHED);
      assert.deepEqual(runJson.end, { cause: 'deadline', message: MAX_HOURS_REACHED });
      const podJson = l.podJson(id);
      const podId = String(podJson.pod_id);
      assert.equal(podJson.state, 'deleted');
      assert.equal(podJson.deleted_by, 'client');
      const entry = l.ledgerOf(podId);
      assert.equal(entry.deletedBy, 'account');
      const guardAtMs = (Number(podJson.deadline_unix) + 2) * 1000;
      assert.ok(
        entry.deletedAtMs !== null && entry.deletedAtMs >= guardAtMs - 1_000,
        `deleted ${entry.deletedAtMs}, guard ${guardAtMs}`,
      );
      const watchdogDeletes = l.emulator
        .requests()
        .filter((r) => r.key === `pod:${podId}` && r.route === 'deletePod');
      assert.ok(
        watchdogDeletes.length > 0 && watchdogDeletes.every((r) => r.status === 500),
        'the watchdog tried first and failed',
      );
      assert.ok(l.podEvents(id).some((s) => s.kind === 'deleting' && s.reason === 'deadline'));
      await assertKeysForgotten(l, id);
      assertNothingBills(l);
    };
    const watchdogDeadline = async (): Promise<void> => {
      const l = await lab(SHORT_DEADLINE);
      const run = runIdHolder();
      const stop = new AbortController();
      l.bus.on((event) => {
        if (event.type === 'runState' && event.state === 'running') stop.abort();
      });
      await assert.rejects(
        train(l.deps, l.config, l.workspace, { onRun: run.onRun, signal: stop.signal }),
        (error: unknown) => {
          assert.ok(
            error instanceof FlowError &&
              error.message.startsWith(`stopped following run ${run.id}`),
            String(error),
          );
          return true;
        },
      );
      const id = run.id!;
      assert.equal(l.runJson(id).state, 'running', 'stopping to follow deletes nothing');
      const podId = String(l.podJson(id).pod_id);
      await l.waitFor(
        'the watchdog to delete the pod',
        () => l.ledgerOf(podId).billing === false,
        40_000,
      );
      const entry = l.ledgerOf(podId);
      assert.equal(entry.deletedBy, 'pod', 'deleted by its own watchdog');
      assert.ok(
        entry.deletedAtMs !== null &&
          entry.deletedAtMs >= Number(l.podJson(id).deadline_unix) * 1000 - 1_000,
      );
      assert.match(l.emulator.podLog(podId), /delete reason=deadline/);
      const attached = await attach(l.deps, l.config, id);
      assert.equal(attached.ending, 'deleted');
      const runJson = l.runJson(id);
      assert.equal(runJson.state, 'failed');
      assert.equal(runJson.message, MAX_HOURS_REACHED);
      assert.deepEqual(runJson.end, { cause: 'deadline', message: MAX_HOURS_REACHED });
      const podJson = l.podJson(id);
      assert.equal(podJson.state, 'deleted');
      assert.equal(podJson.deleted_by, 'watchdog');
      assert.equal(
        requestsFor(l, podId, 'deletePod').filter((r) => r.key === 'account').length,
        0,
        'the client deleted nothing',
      );
      await assertKeysForgotten(l, id);
      assertNothingBills(l);
    };
    await together([clientGuard(), watchdogDeadline()]);
  });

  it('7. a pod lost mid-job fails the run without a delete; transient 404s delete nothing and the run goes on', async () => {
    const lost = async (): Promise<void> => {
      // Without recovery (max_recoveries = 0): a lost pod fails the run; with it, see reliability.recovery.
      const l = await lab({ steps: 400, stepSeconds: 0.05, targetExtra: 'max_recoveries = 0' });
      const run = runIdHolder();
      const training = l.track(train(l.deps, l.config, l.workspace, { onRun: run.onRun }));
      const id = await l.jobRunning(() => run.id);
      const podId = String(l.podJson(id).pod_id);
      await l.emulator.faults.podVanishes(podId);
      await assert.rejects(training, (error: unknown) => {
        assert.ok(error instanceof PodError && error.kind === 'pod_gone', String(error));
        return true;
      });
      const runJson = l.runJson(id);
      assert.equal(runJson.state, 'failed');
      assert.equal(
        runJson.message,
        `pod ${podId} no longer exists; not recovered: max_recoveries = 0 turns recovery on a new pod off`,
      );
      assert.equal((runJson.end as { cause: string }).cause, 'pod_gone');
      const podJson = l.podJson(id);
      assert.equal(podJson.state, 'deleted');
      assert.equal(podJson.deleted_by, 'unknown');
      assert.equal(l.ledgerOf(podId).deletedBy, 'provider');
      assert.equal(requestsFor(l, podId, 'deletePod').length, 0, 'nothing was deleted');
      await assertKeysForgotten(l, id);
      assertNothingBills(l);
    };
    const transient = async (): Promise<void> => {
      const l = await lab({ steps: 60, stepSeconds: 0.05 });
      const run = runIdHolder();
      const stop = new AbortController();
      const training = l.track(
        train(l.deps, l.config, l.workspace, { onRun: run.onRun, signal: stop.signal }),
      );
      const id = await l.jobRunning(() => run.id);
      stop.abort();
      await assert.rejects(training, FlowError);
      const podId = String(l.podJson(id).pod_id);
      await l.emulator.faults.add({
        kind: 'request',
        route: 'getPod',
        podId,
        key: 'account',
        times: 2,
        effect: { type: 'status', status: 404 },
      });
      const result = await attach(l.deps, l.config, id);
      assert.equal(result.run.state, 'succeeded', l.transcript());
      assert.equal(result.ending, 'deleted');
      const gets = requestsFor(l, podId, 'getPod').filter((r) => r.key === 'account');
      const notFound = gets.filter((r) => r.status === 404 && r.faultId !== undefined);
      assert.equal(notFound.length, 2, 'two transient 404s were seen');
      // The client's one delete, after the job (its watchdog's on the retrieved marker may come
      // first: see assertDeletedAfterRetrieval).
      const deletes = requestsFor(l, podId, 'deletePod').filter((r) => r.key === 'account');
      assert.equal(deletes.length, 1);
      assert.ok(deletes[0]!.seq > notFound[1]!.seq);
      assert.equal(l.runJson(id).state, 'succeeded');
      l.assertDeletedAfterRetrieval(podId, l.podJson(id).deleted_by);
      assert.ok(fs.existsSync(path.join(l.runDir(id), 'output', 'model.json')));
      assertNothingBills(l);
    };
    await together([lost(), transient()]);
  });

  it('8. cancel mid-job from another client: cancelled, artifacts retrieved and verified, pod deleted', async () => {
    const l = await lab({ steps: 400, stepSeconds: 0.05 });
    const run = runIdHolder();
    const onPod = l.capturePodFilesOnDelete(() => run.id, '');
    const training = l.track(train(l.deps, l.config, l.workspace, { onRun: run.onRun }));
    const id = await l.jobRunning(() => run.id);
    const cancelled = await cancel(l.otherDeps(), l.config, id);
    assert.equal(cancelled.ending, null, 'the follower collects, not the canceller');
    const result = await training;
    assert.equal(result.run.state, 'cancelled', l.transcript());
    assert.equal(result.ending, 'deleted');
    const runJson = l.runJson(id);
    assert.equal(runJson.state, 'cancelled');
    assert.equal(runJson.message, null);
    const podJson = l.podJson(id);
    const podId = String(podJson.pod_id);
    assert.equal(podJson.state, 'deleted');
    l.assertDeletedAfterRetrieval(podId);
    const files = onPod.get(podId);
    assert.ok(files, 'the pod was captured before its delete');
    for (const name of ['metrics.jsonl', 'job.log']) {
      const local = fs.readFileSync(path.join(l.runDir(id), name));
      assert.ok(files.get(name)?.equals(local), `${name} equals the pod's`);
    }
    assert.ok(files.has('cancelled'), 'the job was cancelled on the pod');
    assert.ok(
      l.events.some((e) => e.event.type === 'jobStatus' && e.event.status.kind === 'cancelled'),
    );
    await assertKeysForgotten(l, id);
    assertNothingBills(l);
  });

  it('9. attach after the client was killed with SIGKILL mid-job finishes the run and deletes the pod', async () => {
    const l = await lab({ steps: 120, stepSeconds: 0.05 });
    const child = spawnLifecycleChild(l);
    const childEvents = child.events;
    try {
      await l.waitFor(
        `the child's job to run (stderr: ${child.stderr()})`,
        () =>
          childEvents.some((e) => e.type === 'runState' && e.state === 'running') &&
          childEvents.filter((e) => e.type === 'metric').length >= 3,
        90_000,
      );
      const args = fs.readFileSync(`/proc/${child.pid}/cmdline`, 'utf8');
      assert.ok(!args.includes(l.emulator.apiKey), 'the API key is in no process argument');
    } finally {
      await child.kill();
    }
    assert.equal(await child.exited, 'SIGKILL');
    const id = l.onlyRunId();
    assert.equal(l.runJson(id).state, 'running');
    const podId = String(l.podJson(id).pod_id);
    assert.equal(l.ledgerOf(podId).billing, true, 'the pod outlived its client');
    const result = await attach(l.deps, l.config, id);
    assert.equal(result.run.state, 'succeeded', l.transcript());
    assert.equal(result.ending, 'deleted');
    assert.ok(l.events.some((e) => e.event.type === 'runWatched' && e.event.runId === id));
    const podJson = l.podJson(id);
    assert.equal(podJson.state, 'deleted');
    assert.ok(
      ['client', 'watchdog'].includes(String(podJson.deleted_by)),
      String(podJson.deleted_by),
    );
    l.assertDeletedAfterRetrieval(podId);
    const metrics = fs
      .readFileSync(path.join(l.runDir(id), 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n');
    assert.ok(metrics.length >= 120, `${metrics.length} metric lines`);
    assert.ok(fs.existsSync(path.join(l.runDir(id), 'output', 'model.json')));
    await assertKeysForgotten(l, id);
    assertNothingBills(l);
  });

  it('10. keep: at create time the pod stays after the job, released it is deleted; kept at runtime it stays, released after the retrieval it is deleted', async () => {
    const atCreate = async (): Promise<void> => {
      const l = await lab({ steps: 5 });
      const result = await train(l.deps, l.config, l.workspace, { keepPod: true });
      const id = result.run.id;
      assert.equal(result.ending, 'kept');
      assert.equal(l.runJson(id).state, 'succeeded');
      const podJson = l.podJson(id);
      const podId = String(podJson.pod_id);
      assert.equal(podJson.state, 'kept');
      assert.equal(podJson.keep, true);
      assert.equal(podJson.deadline, null);
      assert.equal(podJson.deadline_unix, null);
      assert.equal(l.ledgerOf(podId).billing, true, 'a kept pod stays');
      assert.ok(l.clientKeyExists(id), 'its key stays to reach it');
      assert.ok(l.podEvents(id).some((s) => s.kind === 'kept'));
      assert.ok(l.warnings().some((w) => w.code === 'kept'));
      assert.ok(fs.existsSync(path.join(l.runDir(id), 'output', 'model.json')));
      // Its watchdog leaves it alone (kept with a job), well past a few of its ticks.
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      assert.equal(l.ledgerOf(podId).billing, true);
      // Released, it gets a deadline its watchdog reads; its results were retrieved (the marker
      // is on the pod), so the release deletes it at once, as after any retrieval.
      const released = await keepPod(l.deps, id, false, l.config);
      assert.equal(released.keep, false);
      assert.equal(released.state, 'deleted');
      assert.equal(l.podJson(id).deadline_unix, Number(podJson.created_unix) + 3600);
      assert.equal(l.ledgerOf(podId).billing, false);
      l.assertDeletedAfterRetrieval(podId, l.podJson(id).deleted_by);
      await assertKeysForgotten(l, id);
      assertNothingBills(l);
    };
    const atRuntime = async (): Promise<void> => {
      const l = await lab({ steps: 100, stepSeconds: 0.05 });
      const run = runIdHolder();
      const training = l.track(train(l.deps, l.config, l.workspace, { onRun: run.onRun }));
      const id = await l.jobRunning(() => run.id);
      const kept = await keepPod(l.otherDeps(), id, true);
      assert.equal(kept.keep, true);
      const result = await training;
      assert.equal(result.run.state, 'succeeded', l.transcript());
      assert.equal(result.ending, 'kept');
      const podJson = l.podJson(id);
      const podId = String(podJson.pod_id);
      assert.equal(podJson.state, 'kept');
      assert.equal(podJson.keep, true);
      assert.ok(fs.existsSync(path.join(l.runDir(id), 'output', 'model.json')));
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      assert.equal(l.ledgerOf(podId).billing, true, 'the kept pod stays after its job');
      assert.ok(l.clientKeyExists(id));
      const released = await keepPod(l.deps, id, false);
      assert.equal(released.keep, false);
      // Its results were retrieved (the marker is on the pod): the release deletes it at once.
      assert.equal(released.state, 'deleted');
      assert.equal(l.ledgerOf(podId).billing, false);
      l.assertDeletedAfterRetrieval(podId, l.podJson(id).deleted_by);
      // The next look at the run changes nothing; the run keeps its result.
      const attached = await attach(l.deps, l.config, id);
      assert.equal(attached.ending, 'deleted');
      assert.equal(l.runJson(id).state, 'succeeded');
      assert.equal(l.podJson(id).state, 'deleted');
      await assertKeysForgotten(l, id);
      assertNothingBills(l);
    };
    await together([atCreate(), atRuntime()]);
  });

  it('11. a stray pod carrying the run marker is swept once the run ends', async () => {
    const l = await lab({ steps: 80, stepSeconds: 0.05 });
    const run = runIdHolder();
    const training = l.track(train(l.deps, l.config, l.workspace, { onRun: run.onRun }));
    const id = await l.jobRunning(() => run.id);
    const created = await l.api.post<{ id: string }>('/pods', {
      name: `overbrainer-${id}-stray`,
      image: 'runpod/pytorch:latest',
      cloud: 'SECURE',
      gpu: { id: GPU.a5000, count: 1 },
      env: { OVERBRAINER_RUN_ID: id },
      cmd: ['sleep', 'infinity'],
    });
    assert.equal(created.status, 201);
    const strayId = created.body.id;
    assert.equal(l.ledgerOf(strayId).billing, true);
    const result = await training;
    assert.equal(result.run.state, 'succeeded', l.transcript());
    const stray = l.ledgerOf(strayId);
    assert.equal(stray.billing, false, 'the stray was deleted');
    assert.equal(stray.deletedBy, 'account');
    assert.ok(
      l
        .podEvents(id)
        .some((s) => s.kind === 'deleting' && s.podId === strayId && s.reason === 'duplicate'),
    );
    const podJson = l.podJson(id);
    assert.equal(podJson.state, 'deleted');
    assert.deepEqual(podJson.stray_pods, []);
    await assertKeysForgotten(l, id);
    assertNothingBills(l);
  });
});
