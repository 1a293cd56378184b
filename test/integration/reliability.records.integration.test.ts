/**
 * Reliability matrix: damaged records never block removal. With run.json or pod.json damaged
 * (hand-edited, truncated by a full disk), `pod rm RUN_ID --force` finds the run's pods through
 * the API by their run marker and deletes them; without --force it refuses and deletes nothing.
 * Each scenario has its own lab (the emulator's real pods run the real bootstrap and watchdog).
 * Timings: production / 60.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { hostKeySecretName } from '../../src/core/pod/context';
import {
  listPods,
  removePods,
  removeRunOrPod,
  sweepHostKeySecrets,
} from '../../src/core/pod/podAdmin';
import { FlowError, recoverAbandoned, train } from '../../src/core/flow';
import { GPU, Lab, spawnLifecycleChild, matrixLabs } from '../helpers/lifecycle';
import { recordFault } from '../helpers/reliability';

describe('reliability: records left behind (damaged, abandoned, secrets)', function () {
  this.timeout(180_000);
  const lab = matrixLabs();

  /** A run whose job runs on its pod with nobody following it; returns its ID and pod ID. */
  async function leftRunning(l: Lab): Promise<{ id: string; podId: string }> {
    let runId: string | null = null;
    const stop = new AbortController();
    const training = l.track(
      train(l.deps, l.config, l.workspace, {
        onRun: (r) => {
          runId = r.id;
        },
        signal: stop.signal,
      }),
    );
    const id = await l.jobRunning(() => runId);
    stop.abort();
    await assert.rejects(training, (error: unknown) => error instanceof FlowError);
    return { id, podId: String(l.podJson(id).pod_id) };
  }

  for (const file of ['pod.json', 'run.json'] as const) {
    it(`a damaged ${file}: pod rm refuses without --force and deletes nothing; with --force it finds the run's pod by its marker and deletes it`, async function () {
      const l = await lab({ steps: 2_000, stepSeconds: 0.05 });
      const { id, podId } = await leftRunning(l);
      fs.writeFileSync(path.join(l.runDir(id), file), '{"version": 1, "run_id": ');
      recordFault(this, `disk.${file}.damaged`);
      const ctx = { ...l.deps, client: l.client };
      const refused = await removePods(ctx, id);
      assert.ok(refused.error instanceof Error, String(refused.error));
      assert.match(refused.error.message, new RegExp(file.replace('.', '\\.')));
      assert.deepEqual(refused.removed, []);
      assert.equal(l.ledgerOf(podId).billing, true, 'nothing deleted without --force');
      const removal = await removePods(ctx, id, { force: true });
      assert.equal(removal.error, null, String(removal.error));
      assert.deepEqual(
        removal.removed.map((p) => p.podId),
        [podId],
      );
      assert.equal(l.ledgerOf(podId).billing, false);
      assert.equal(l.ledgerOf(podId).deletedBy, 'account');
    });
  }

  it("host-key secrets left by ended runs are swept at train's start, with their client keys; a running run's and another checkout's stay", async function () {
    const l = await lab({ steps: 200, stepSeconds: 0.05 });
    const ctx = { ...l.deps, client: l.client };
    // A run that ended with its pod deleted, whose client died before it forgot its keys.
    const ended = await train(l.deps, l.config, l.workspace, {});
    const endedId = ended.run.id;
    assert.equal(await l.hostKeySecretExists(endedId), false);
    await l.client.createSecret(hostKeySecretName(endedId), 'bGVmdG92ZXI=');
    const clientKey = path.join(l.runDir(endedId), 'ssh', 'id_ed25519');
    fs.mkdirSync(path.dirname(clientKey), { recursive: true });
    fs.writeFileSync(clientKey, 'leftover private key\n', { mode: 0o600 });
    // A run left running on its pod (nobody follows), and a run of another checkout.
    const { id: runningId } = await leftRunning(l);
    const foreignId = 'other_20260101-000000';
    await l.client.createSecret(hostKeySecretName(foreignId), 'Zm9yZWlnbg==');
    recordFault(this, 'keys.host-key-secret-left-behind');
    const rows = await listPods(ctx, { lookUpUnlisted: false });
    const swept = await sweepHostKeySecrets(ctx, rows);
    assert.deepEqual(swept, [endedId]);
    assert.equal(await l.hostKeySecretExists(endedId), false, "the ended run's secret is gone");
    assert.equal(fs.existsSync(clientKey), false, 'its client key too');
    assert.equal(await l.hostKeySecretExists(runningId), true, "a running run's secret stays");
    assert.ok(l.clientKeyExists(runningId));
    assert.equal(await l.hostKeySecretExists(foreignId), true, "another checkout's secret stays");
    // The running run goes on untouched: remove its pod to end the case.
    const removal = await removePods(ctx, runningId, { force: true });
    assert.equal(removal.error, null, String(removal.error));
  });

  it('a run left preparing by a client killed while its pod booted is found at the next start: its pod deleted, the run failed with the reason, its keys forgotten; a run another live client starts is left alone', async function () {
    const l = await lab({ steps: 3 });
    const child = spawnLifecycleChild(l);
    await l.waitFor(
      'the pod to be created',
      () => child.events.some((e) => e.type === 'pod' && e.status.kind === 'created'),
      90_000,
    );
    await child.kill();
    recordFault(this, 'client.sigkill-while-preparing');
    const id = l.onlyRunId();
    const podId = String(l.podJson(id).pod_id);
    assert.equal(l.runJson(id).state, 'preparing');
    assert.equal(l.ledgerOf(podId).billing, true);
    // A second run that a live client (this process: its lock is held) is starting.
    const live = l.store.create({ project: 'tiny', target: 'pod', remoteDir: (i) => `/w/${i}` });
    const lock = l.store.lock(live.id, 'a live client')!;
    try {
      const recovered = await recoverAbandoned(l.deps, l.config);
      assert.deepEqual(
        recovered.map((r) => [r.runId, r.error]),
        [[id, null]],
      );
    } finally {
      lock.dispose();
    }
    const run = l.runJson(id);
    assert.equal(run.state, 'failed');
    assert.equal(run.message, 'interrupted before the job started');
    assert.deepEqual(run.end, { cause: 'interrupted', message: run.message });
    assert.equal(l.podJson(id).state, 'deleted');
    assert.equal(l.ledgerOf(podId).billing, false);
    assert.equal(l.ledgerOf(podId).deletedBy, 'account');
    assert.equal(l.clientKeyExists(id), false);
    assert.equal(await l.hostKeySecretExists(id), false);
    assert.equal(l.runJson(live.id).state, 'preparing', "a live client's run is not touched");
  });

  it('pod rm POD_ID removes a pod pod ls lists that no run owns; the pod a run trains on is refused without --force, naming the run', async function () {
    const l = await lab({ steps: 2_000, stepSeconds: 0.05 });
    const ctx = { ...l.deps, client: l.client };
    const orphan = await l.api.post<{ id: string }>('/pods', {
      name: 'overbrainer-leftover',
      image: 'runpod/pytorch:latest',
      cloud: 'SECURE',
      gpu: { id: GPU.a5000, count: 1 },
      cmd: ['sleep', 'infinity'],
    });
    assert.equal(orphan.status, 201);
    const orphanId = orphan.body.id;
    recordFault(this, 'pod.orphan-without-marker');
    const removed = await removeRunOrPod(ctx, orphanId);
    assert.equal(removed.error, null, String(removed.error));
    assert.deepEqual(
      removed.removed.map((p) => p.podId),
      [orphanId],
    );
    assert.equal(l.ledgerOf(orphanId).billing, false);
    const { id, podId } = await leftRunning(l);
    const refused = await removeRunOrPod(ctx, podId);
    assert.ok(refused.error instanceof Error, String(refused.error));
    // The refusal of `pod rm RUN_ID`, word for word.
    assert.match(
      refused.error.message,
      new RegExp(`^run ${id} is still running: its training pod ${podId} was kept;`),
    );
    assert.deepEqual(refused.removed, []);
    assert.equal(l.ledgerOf(podId).billing, true, 'nothing deleted without --force');
    const forced = await removeRunOrPod(ctx, podId, { force: true });
    assert.equal(forced.error, null, String(forced.error));
    assert.deepEqual(
      forced.removed.map((p) => p.podId),
      [podId],
    );
    assert.equal(l.ledgerOf(podId).billing, false);
    assert.equal(l.runJson(id).state, 'failed', 'the run records that pod rm deleted its pod');
    const none = await removeRunOrPod(ctx, 'nosuchpod0000');
    assert.ok(none.error instanceof Error && /not in this project's runs/.test(none.error.message));
  });
});
