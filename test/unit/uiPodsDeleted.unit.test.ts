import * as assert from 'node:assert/strict';
import type { Pod } from '../../src/core/runpod/api';
import { newPodRecord } from '../../src/core/runs/podRecord';
import {
  ACCOUNT_LIST_INTERVAL_MS,
  classifyAccountPods,
  isPodsMessage,
  PodsModel,
  type PodEntry,
  type PodsSource,
} from '../../src/ui/pods/podsModel';
import { readRuns } from '../../src/ui/runs/runsSource';
import { accountPod, useTempStore } from './uiFakeHost';

const HOST_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl';

describe('ui pods model: a pod this window saw deleted', function () {
  const t = useTempStore('overbrainer-ui-pods-deleted-');

  function recordRun(podId: string): string {
    const run = t.store.create({ project: 'tiny', target: 'runpod', remoteDir: (id) => id });
    run.state = 'running';
    t.store.saveRun(run);
    const pod = newPodRecord(run.id, false, 1, HOST_KEY);
    pod.beginAttempt('NVIDIA A40', t.clock.nowMs(), 12);
    pod.created({ id: podId, costPerHourUsd: 0.44 }, 'created', t.clock.nowMs());
    pod.state = 'running';
    t.store.savePod(pod);
    return run.id;
  }

  const shown = (model: PodsModel): string[] =>
    model.all
      .filter((item): item is PodEntry => !isPodsMessage(item))
      .map((p) => p.podId)
      .sort();

  it('stays gone though an account listing taken while it was being deleted still names it', async function () {
    const run = recordRun('pa');
    let answer: (pods: readonly Pod[]) => void = () => undefined;
    let listing: Promise<readonly Pod[]> = Promise.resolve([
      accountPod('pa', run),
      accountPod('pdup', run),
    ]);
    const src: PodsSource = {
      fetchAccountPods: () => listing,
      classify: (pods) => classifyAccountPods(pods, [t.store]),
      localRuns: () => readRuns([{ dir: t.store.runsDir, workspaceName: 'w' }]),
    };
    const model = new PodsModel(src, { clock: t.clock, debounceMs: 0 });
    await model.refresh();
    assert.deepEqual(shown(model), ['pa', 'pdup']);
    // A minute later the account is listed again; while that call is out, this window's
    // Remove Pod deletes the stray and Runpod confirms it gone (its 404).
    await t.clock.advanceMs(ACCOUNT_LIST_INTERVAL_MS);
    listing = new Promise((resolve) => (answer = resolve));
    const refreshed = model.refresh();
    model.noteDeleted('pdup');
    answer([accountPod('pa', run), accountPod('pdup', run)]);
    await refreshed;
    assert.deepEqual(shown(model), ['pa'], 'the Pods view agrees with the delete it saw');
    // A listing without it ends the note; one that lists it again (another pod by that ID is
    // impossible on Runpod) would still not show it.
    await t.clock.advanceMs(ACCOUNT_LIST_INTERVAL_MS);
    listing = Promise.resolve([accountPod('pa', run)]);
    await model.refresh();
    assert.deepEqual(shown(model), ['pa']);
  });

  it('is not shown as deleting from its record when the account cannot be listed', async function () {
    const run = recordRun('pa');
    const pod = t.store.loadPod(run)!;
    pod.state = 'deleting';
    t.store.savePod(pod);
    const src: PodsSource = {
      fetchAccountPods: () => Promise.reject(new Error('Runpod unreachable')),
      classify: (pods) => classifyAccountPods(pods, [t.store]),
      localRuns: () => readRuns([{ dir: t.store.runsDir, workspaceName: 'w' }]),
    };
    const model = new PodsModel(src, { clock: t.clock, debounceMs: 0 });
    await model.refresh();
    assert.deepEqual(shown(model), ['pa']);
    model.noteDeleted('pa');
    await model.refresh();
    assert.deepEqual(shown(model), []);
  });
});
