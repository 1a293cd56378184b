/**
 * The host-key secrets of ended runs, swept at `train`'s start: a client killed before it could
 * forget a run's secrets leaves them on the account.
 */
import * as path from 'node:path';
import { noPodLeft, SSH_DIR } from '../runs/store';
import { isValidRunId } from '../runs/ids';
import type { RunRecord } from '../runs/runRecord';
import { HOST_KEY_SECRET_PREFIX, log, type PodCtx } from './context';
import { forgetClientKey } from './keys';
import type { PodRow } from './podList';
import { describeError } from '../errors';

/**
 * At `train`'s start (after the orphan warning): deletes the host-key secret (a pod's private
 * host key, kept as an account secret) of every run of runs/ that ended and has no pod left,
 * with its private client key: a client killed before it could forget them leaves them behind.
 * A run is left alone while it is preparing or running, while a client holds its lock, while its
 * records say a pod may exist, while `rows` (the pods Runpod lists) show a pod carrying its
 * marker, and when it is not in runs/ (another checkout may own it). Returns the runs swept.
 */
export async function sweepHostKeySecrets(ctx: PodCtx, rows: readonly PodRow[]): Promise<string[]> {
  const listed = new Set(rows.map((row) => row.runId));
  const swept: string[] = [];
  for (const secret of await ctx.client.listSecrets()) {
    if (!secret.name.startsWith(HOST_KEY_SECRET_PREFIX)) continue;
    const runId = secret.name.slice(HOST_KEY_SECRET_PREFIX.length);
    if (!isValidRunId(runId) || listed.has(runId)) continue;
    let run: RunRecord;
    try {
      run = ctx.store.loadRun(runId);
    } catch {
      continue; // not in runs/, or unreadable: not ours to judge
    }
    if (run.state === 'preparing' || run.state === 'running') continue;
    if (ctx.store.lockHolder(runId) !== null || !noPodLeft(ctx.store, runId)) continue;
    try {
      await ctx.client.deleteSecret(secret.id);
    } catch (error) {
      log(
        ctx,
        'warn',
        `cannot delete the host-key secret of ended run ${runId}: ${describeError(error)}`,
      );
      continue;
    }
    forgetClientKey(path.join(ctx.store.runDir(runId), SSH_DIR));
    swept.push(runId);
  }
  return swept;
}
