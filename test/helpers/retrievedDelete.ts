import * as assert from 'node:assert/strict';
import type { Emulator } from '../emulator/emulator';

/**
 * Asserts pod `podId` was deleted once its results were verified: by the client, or by its
 * watchdog on the retrieved marker the client writes on the pod just before its own delete (so
 * the pod goes even if that delete fails). Both are the client's decision; which request lands
 * first is a race: the watchdog's tick (1 s at 1/60 timing) can fall between the marker and
 * the client's DELETE, as it did twice in CI with four integration files beside the e2e windows.
 * Any other deleter (a lease, a cap, a grace) fails. With `recordedBy` (pod.json's
 * `deleted_by`): `client` for the client's delete. For the watchdog's, `watchdog` when the
 * client's look before its delete already found the pod gone, and `client` when the watchdog's
 * delete fell between that look and the client's delete (the client records `watchdog` only when
 * both say gone, since one 404 may be transient: it cannot tell that case from its own).
 */
export function assertDeletedAfterRetrieval(
  emulator: Emulator,
  podId: string,
  recordedBy?: unknown,
): void {
  const entry = emulator.ledger().pods.find((p) => p.id === podId);
  assert.ok(entry, `pod ${podId} is not in the ledger`);
  if (entry.deletedBy === 'account') {
    if (recordedBy !== undefined) assert.equal(recordedBy, 'client', 'pod.json deleted_by');
    return;
  }
  const podLog = emulator.podLog(podId);
  assert.equal(entry.deletedBy, 'pod', `pod ${podId} deleted by ${String(entry.deletedBy)}`);
  assert.match(podLog, /retrieved marker seen/, podLog);
  if (recordedBy !== undefined) {
    assert.ok(
      recordedBy === 'watchdog' || recordedBy === 'client',
      `pod.json deleted_by ${String(recordedBy)}`,
    );
  }
}
