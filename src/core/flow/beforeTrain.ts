/**
 * What happens before each train, whichever front end starts it: on a Runpod target the pods
 * nothing will delete are warned about (one list of the account, never a delete) and the
 * host-key secrets and client keys of ended runs are swept; on any target the runs a dead client
 * left `preparing` are settled (without a Runpod client, those that have no pod: a run on the
 * user's machine or this one). Each finding is an event on the bus (a `warning`, or a `log` line)
 * that the CLI prints on stderr and the extension shows as a notification or in its log. Never
 * throws: a failed look is itself a warning, and the train goes on.
 */
import type { OverbrainerConfig } from '../config/types';
import { sweepHostKeySecrets } from '../pod/hostKeySweep';
import { listPods, orphanWarnings, type PodRow } from '../pod/podList';
import { describeError } from '../errors';
import { recoverAbandoned } from './attach';
import { podCtx, type FlowDeps } from './deps';

/** The pre-train work (see the file's comment); `deps.client` null for a target without pods. */
export async function beforeTrain(deps: FlowDeps, config: OverbrainerConfig): Promise<void> {
  if (deps.client !== null) await warnOrphans(deps);
  await settleAbandoned(deps, config);
}

function log(deps: FlowDeps, level: 'info' | 'warn', message: string): void {
  deps.bus.publish({ type: 'log', level, message });
}

/** Warns about the pods nothing will delete, from one list of the account; then sweeps. */
async function warnOrphans(deps: FlowDeps): Promise<void> {
  try {
    const rows = await listPods(podCtx(deps), { lookUpUnlisted: false });
    const warnings = orphanWarnings(rows);
    if (warnings.length > 0) {
      deps.bus.publish({
        type: 'warning',
        runId: null,
        code: 'strays',
        message: warnings.join('\n'),
      });
    }
    await sweepSecrets(deps, rows);
  } catch (error) {
    log(deps, 'warn', `cannot look for leftover pods: ${describeError(error)}`);
  }
}

/** Deletes the host-key secrets (and client keys) that ended runs left behind. */
async function sweepSecrets(deps: FlowDeps, rows: readonly PodRow[]): Promise<void> {
  try {
    const swept = await sweepHostKeySecrets(podCtx(deps), rows);
    if (swept.length > 0)
      log(
        deps,
        'info',
        `train: deleted the host-key secrets left by ended runs ${swept.join(', ')}`,
      );
  } catch (error) {
    log(deps, 'warn', `cannot sweep the host-key secrets of ended runs: ${describeError(error)}`);
  }
}

/** Settles the runs left `preparing` by a client that died before their job started. */
async function settleAbandoned(deps: FlowDeps, config: OverbrainerConfig): Promise<void> {
  for (const left of await recoverAbandoned(deps, config)) {
    if (left.error === null) {
      log(
        deps,
        'info',
        `train: run ${left.runId} was left starting by a client that stopped; ${left.result?.summary ?? ''}`,
      );
    } else {
      deps.bus.publish({
        type: 'warning',
        runId: left.runId,
        code: 'abandoned',
        message: `run ${left.runId} was left starting by a client that stopped and cannot be cleaned up: ${describeError(left.error)}; retry with \`overbrainer train attach ${left.runId}\``,
      });
    }
  }
}
