/**
 * Reliability matrix: the pod's record cannot be written after a create was answered. The client
 * still knows the pod's ID in memory: it deletes the pod (a write that failed never makes it
 * forget a pod that bills), keeps the run's keys until that delete is confirmed, and its message
 * names the pod. The fault is real: pod.json's path becomes a directory at the moment the record
 * first holds a pod ID, so every later write of it fails in the store's own atomic rename.
 * Timings: production / 60.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PodError } from '../../src/core/pod/podError';
import type { PodRecord } from '../../src/core/runs/podRecord';
import { Lab, matrixLabs } from '../helpers/lifecycle';
import { recordFault } from '../helpers/reliability';

describe('reliability: pod.json cannot be saved after a create was answered', function () {
  this.timeout(180_000);
  const lab = matrixLabs();

  /** From the first save of a record that holds a pod ID on, pod.json cannot be written. */
  function breakPodJsonOnceCreated(l: Lab): { brokenFor: () => string | null } {
    const store = l.store;
    const save = store.savePod.bind(store);
    let brokenFor: string | null = null;
    store.savePod = (record: PodRecord): void => {
      if (brokenFor === null && record.podId !== null) {
        const file = path.join(store.runDir(record.runId), 'pod.json');
        fs.rmSync(file, { force: true });
        fs.mkdirSync(file);
        brokenFor = record.runId;
      }
      save(record);
    };
    return { brokenFor: () => brokenFor };
  }

  /** Trains on `l` with pod.json broken by `fault`: the run's one pod, as the ledger has it. */
  async function trainOnePod(l: Lab, fault: { brokenFor: () => string | null }) {
    const { runId, error } = await l.trainOutcome();
    assert.ok(runId !== null);
    assert.equal(fault.brokenFor(), runId, 'the fault was applied');
    const made = l.podsOfRun(runId);
    assert.equal(made.length, 1, 'one pod was made');
    return { runId, error, made, podId: made[0]!.id };
  }

  it('pod.json cannot be written once the create is answered: the pod is deleted before train returns, the error names it, the keys go only after the delete is confirmed', async function () {
    const l = await lab({ steps: 3 });
    const fault = breakPodJsonOnceCreated(l);
    recordFault(this, 'disk.pod-json.unwritable-after-create');
    const { runId, error, made, podId } = await trainOnePod(l, fault);
    assert.deepEqual(
      l.billing().map((p) => p.id),
      [],
      `no pod is left billing when train returns\n${l.transcript()}`,
    );
    assert.ok(error instanceof PodError, `train failed with a PodError: ${String(error)}`);
    assert.match(error.message, new RegExp(`pod ${podId}`), 'the message names the pod');
    assert.equal(made[0]!.deletedBy, 'account', 'deleted by the client');
    assert.equal(l.runJson(runId).state, 'failed');
    assert.equal(l.clientKeyExists(runId), false, 'keys forgotten once the delete was confirmed');
  });

  it('pod.json cannot be written once the create is answered and the delete is not confirmed: the keys stay, the warning and the error name the pod', async function () {
    // max_hours 18 s: the client keeps trying a failing delete until the pod's deadline.
    const l = await lab({ steps: 3, maxHours: 0.005 });
    const fault = breakPodJsonOnceCreated(l);
    // Every delete call of the client fails: the pod still shows.
    await l.emulator.faults.add({
      kind: 'request',
      route: 'deletePod',
      key: 'account',
      times: 'always',
      effect: { type: 'status', status: 500 },
    });
    recordFault(this, 'disk.pod-json.unwritable-after-create');
    recordFault(this, 'api.deletePod.500-always');
    const { runId, error, podId } = await trainOnePod(l, fault);
    assert.ok(error instanceof PodError, `train failed with a PodError: ${String(error)}`);
    assert.match(error.message, new RegExp(`pod ${podId}`), 'the message names the pod');
    assert.equal(l.runJson(runId).state, 'failed');
    assert.ok(
      l.logs().some((line) => line.startsWith('warn: ') && line.includes(`(pod ${podId})`)),
      `a warning names the pod that may be left\n${l.logs().join('\n')}`,
    );
    assert.equal(l.clientKeyExists(runId), true, 'the client key stays: the pod may exist');
    assert.equal(await l.hostKeySecretExists(runId), true, 'the host-key secret stays');
    // The user removes it in Runpod's console (the record cannot name it).
    l.emulator.faults.clear();
    const deleted = await l.api.delete(`/pods/${podId}`);
    // 404: its watchdog deleted it at the deadline, while the client still tried.
    assert.ok(
      deleted.status < 300 || deleted.status === 404,
      `console delete answered ${deleted.status}`,
    );
  });
});
