/**
 * A created pod becoming ready: it answers SSH with the pinned host key, its
 * watchdog gives its verdict, and `max_cost_usd` is armed on it before any job starts. A pod that
 * fails any of these is deleted before the next GPU type is tried.
 */
import * as fs from 'node:fs';
import { rfc3339 } from '../clock';
import { describeError, HintedError } from '../errors';
import type { RunpodTargetConfig } from '../config/types';
import type { DeleteReason } from '../events';
import { ExecError } from '../exec/executor';
import { SshExecutor } from '../exec/ssh';
import { type PodRecord, type SshEndpoint } from '../runs/podRecord';
import type { RunRecord } from '../runs/runRecord';
import { drainPodLog, lastPodLogLines } from './podLogCapture';
import { isDead, type Pod } from '../runpod/api';
import { log, warn, type PodCtx } from './context';
import { alias, checkEndpoint, writeKnownHosts, type RunKeys } from './keys';
import { costCapAtUnixS, snapshotAtUnixS } from './lease';
import { PodError } from './podError';
import {
  COST_CAP_FILE,
  SNAPSHOT_AT_FILE,
  parseWatchdogVerdict,
  VERDICT_READ_MAX_BYTES,
  WATCHDOG_VERDICT,
} from './podScripts';
import { lookUp, noteStrays, remove, sweep } from './remove';

/** A pod that answers SSH with the pinned key and has a working watchdog. */
export interface Provisioned {
  executor: SshExecutor;
  endpoint: SshEndpoint;
}

/**
 * What bounds a run's pod, handed down as its own values (never written into the target): the
 * cost cap its watchdog enforces (null: none; a kept pod has none) and the hours until its
 * deadline. A new run's are its target's (the cost cap fitted to `[budget]`); a recovered run's
 * are what is left of them.
 */
export interface PodLimits {
  costCapUsd: number | null;
  maxHours: number;
}

export interface PodPlan {
  run: RunRecord;
  /** The target as the config has it: the GPU types, the image, the disks, the graces. */
  target: RunpodTargetConfig;
  limits: PodLimits;
  keys: RunKeys;
  /** The `{{ RUNPOD_SECRET_… }}` reference to the host key. */
  hostKeyRef: string;
  workdir: string;
  /** Told as soon as a pod answers SSH, before its preflight (see {@link OnReachable}). */
  onReachable?: OnReachable;
}

/**
 * A pod answered SSH with its pinned host key; its watchdog's verdict and the cost cap are still
 * to come, so nothing may start on it yet. What the client sends ahead (the run's files) is lost
 * with the pod if it is refused: the executor is disposed then, and a later pod of the walk is
 * told again with its own.
 */
export type OnReachable = (executor: SshExecutor) => void;

/** A pod that did not become ready: deleted, then the next GPU type (never shown as is). */
export class NotReady extends HintedError<'not_ready'> {
  constructor(message: string) {
    super(
      'not_ready',
      message,
      'The next GPU type of the target is tried; add more to gpu_types if none comes up.',
    );
  }
}

/** Reach then preflight (the watchdog's verdict), then `ready` saved, published, strays swept. */
export async function becomeReady(
  ctx: PodCtx,
  plan: PodPlan,
  record: PodRecord,
  pod: Pod,
  signal?: AbortSignal,
): Promise<Provisioned> {
  const createdMs = ctx.clock.nowMs();
  let reached: Provisioned | null = null;
  try {
    reached = await reach(ctx, plan, record, pod.id, signal);
    plan.onReachable?.(reached.executor);
    await preflight(ctx, plan, reached.executor, pod.id, signal);
    await armCostCap(ctx, plan, record, reached.executor, signal);
  } catch (error) {
    reached?.executor.dispose();
    if (error instanceof PodError) {
      // Shielded from the abort: a refused pod goes whatever the user pressed.
      await remove(ctx, record, deleteReasonFor(error), 'client');
      record.endAttempt('refused', error.message);
      ctx.store.savePod(record);
    }
    throw error;
  }
  const nowMs = ctx.clock.nowMs();
  record.ready(reached.endpoint, nowMs);
  ctx.store.savePod(record);
  ctx.bus.publish({
    type: 'pod',
    runId: record.runId,
    status: { kind: 'ready', podId: pod.id, afterMs: nowMs - createdMs, deadline: record.deadline },
  });
  noteStrays(ctx, record, await sweep(ctx, record.runId, pod.id, signal, record));
  return reached;
}

function deleteReasonFor(error: PodError): DeleteReason {
  switch (error.kind) {
    case 'bootstrap_failed':
      return 'bootstrap_failed';
    case 'cost_cap_unset':
      return 'cost_cap_unset';
    default:
      return 'refused';
  }
}

/** The cost cap's delete time leaves less than this: the user is warned. */
const COST_CAP_SHORT_MS = 30 * 60_000;

/**
 * Arms `max_cost_usd` on the pod before any job starts: the watchdog deletes the pod
 * once its clock passes `.pod/cost_cap_at` = creation + max_cost_usd / rate hours. A pod whose
 * rate is unknown, or whose cap cannot be written, is refused (`cost_cap_unset`: the caller
 * deletes it): a run with a cap never runs uncapped. Kept pods and runs without a cap skip this.
 */
async function armCostCap(
  ctx: PodCtx,
  plan: PodPlan,
  record: PodRecord,
  executor: SshExecutor,
  signal?: AbortSignal,
): Promise<void> {
  const maxCostUsd = record.costCapUsd;
  if (record.keep || maxCostUsd === null) return;
  if (record.costPerHourUsd === null) {
    const pod = await ctx.client.getPod(record.podId ?? '', { signal }).catch(() => null);
    record.noteRate(pod?.costPerHourUsd);
  }
  const rate = record.costPerHourUsd;
  const capAtUnixS = costCapAtUnixS(record);
  const unset = (why: string, cause?: unknown): PodError =>
    new PodError(
      'cost_cap_unset',
      `max_cost_usd could not be armed on the pod (${why}): the run is refused and the pod deleted`,
      'Train again; to run without a cost cap, remove max_cost_usd from the target.',
      { cause },
    );
  const snapshotAt = snapshotAtUnixS(record, ctx.timing.snapshotLeadS);
  if (rate === null || capAtUnixS === null || snapshotAt === null) {
    throw unset('Runpod reported no hourly rate');
  }
  // The snapshot moment first: a watchdog that sees the cap sees when to ask for the snapshot.
  for (const [file, unixS] of [
    [SNAPSHOT_AT_FILE, snapshotAt],
    [COST_CAP_FILE, capAtUnixS],
  ] as const) {
    try {
      await executor.writeFileAtomic(`${plan.run.remoteDir}/${file}`, `${unixS}\n`);
    } catch (error) {
      if (signal?.aborted) throw error;
      throw unset(`writing ${file} failed: ${describeError(error)}`, error);
    }
  }
  log(
    ctx,
    'info',
    `max_cost_usd armed: the job is asked for a snapshot at ${rfc3339(snapshotAt * 1000)} and the watchdog deletes the pod at ${rfc3339(capAtUnixS * 1000)}`,
  );
  const leftMs = capAtUnixS * 1000 - ctx.clock.nowMs();
  if (leftMs < COST_CAP_SHORT_MS) {
    warn(
      ctx,
      record.runId,
      'cost_cap_short',
      `max_cost_usd $${maxCostUsd} buys ${Math.max(0, Math.round(leftMs / 60_000))} min at $${rate.toFixed(2)}/h: the pod is deleted at ${rfc3339(capAtUnixS * 1000)}`,
    );
  }
}

/**
 * Polls the pod until it publishes its SSH endpoint and answers SSH with the
 * pinned host key (within `readyTimeoutMs`). A dead or vanished pod is not
 * ready at once. Nothing is sent to a host presenting another key.
 */
async function reach(
  ctx: PodCtx,
  plan: PodPlan,
  record: PodRecord,
  podId: string,
  signal?: AbortSignal,
): Promise<Provisioned> {
  const untilMs = ctx.clock.nowMs() + ctx.timing.readyTimeoutMs;
  let why = 'it published no SSH endpoint';
  const privateKey = fs.readFileSync(plan.keys.clientKeyPath);
  for (;;) {
    let pod: Pod | null = null;
    try {
      // A 404 counts only once confirmed (lookUp): a transient one must not end a live pod.
      pod = await lookUp(ctx, podId, signal);
      if (pod === null) throw await deletedWhileStarting(ctx, record.runId, podId, 'is gone');
    } catch (error) {
      if (error instanceof PodError || signal?.aborted) throw error;
      why = `looking it up failed: ${describeError(error)}`;
    }
    if (pod !== null) {
      if (pod.status === 'TERMINATED')
        throw await deletedWhileStarting(ctx, record.runId, podId, 'reads TERMINATED');
      if (isDead(pod)) throw new NotReady(`it is ${pod.status}`);
      record.noteRate(pod.costPerHourUsd);
      if (pod.sshDirect !== null) {
        const endpoint: SshEndpoint = {
          host: pod.sshDirect.host,
          port: pod.sshDirect.port,
          user: pod.sshDirect.username,
        };
        try {
          checkEndpoint(endpoint);
          writeKnownHosts(ctx.store.sshDir(plan.run.id), alias(plan.run.id), plan.keys.hostPublic);
          const executor = await SshExecutor.connect({
            host: endpoint.host,
            port: endpoint.port,
            username: endpoint.user,
            privateKey,
            hostPublicKey: plan.keys.hostPublic,
            clock: ctx.clock,
            timing: ctx.timing,
            signal,
            onLog: (line) => log(ctx, 'debug', line),
          });
          record.ssh = endpoint;
          ctx.store.savePod(record);
          return { executor, endpoint };
        } catch (error) {
          if (signal?.aborted) throw error;
          const was = why;
          why =
            error instanceof ExecError && error.kind === 'host_key'
              ? `${endpoint.host}:${endpoint.port} presented another host key (nothing was sent to it)`
              : `SSH to ${endpoint.host}:${endpoint.port} failed: ${describeError(error)}`;
          // Said once per new reason: a pod that never answers shows why in the run's log.
          if (why !== was) log(ctx, 'debug', `the pod does not answer SSH yet: ${why}`);
        }
      }
    }
    if (ctx.clock.nowMs() >= untilMs) {
      throw new NotReady(
        `it did not answer SSH with its pinned host key within ${minutes(ctx.timing.readyTimeoutMs)}: ${why}`,
      );
    }
    await ctx.clock.sleep(ctx.timing.podPollMs, signal);
  }
}

/**
 * Waits for the watchdog's verdict (within `preflightTimeoutMs`): `ready` goes
 * on; a failed bootstrap or a watchdog that cannot delete its pod refuses the
 * run (the caller deletes the pod). The pod's liveness is checked each poll.
 */
async function preflight(
  ctx: PodCtx,
  plan: PodPlan,
  executor: SshExecutor,
  podId: string,
  signal?: AbortSignal,
): Promise<void> {
  const verdictPath = `${plan.run.remoteDir}/${WATCHDOG_VERDICT}`;
  const untilMs = ctx.clock.nowMs() + ctx.timing.preflightTimeoutMs;
  for (;;) {
    let text = '';
    try {
      text = (await executor.readRange(verdictPath, 0, VERDICT_READ_MAX_BYTES)).toString('utf8');
    } catch (error) {
      if (!(error instanceof ExecError && error.kind === 'not_found')) {
        if (signal?.aborted) throw error;
        log(ctx, 'debug', `cannot read the watchdog's verdict yet: ${describeError(error)}`);
      }
    }
    const verdict = parseWatchdogVerdict(text);
    if (verdict?.kind === 'ready') return;
    if (verdict?.kind === 'bootstrap_failed') {
      throw new PodError(
        'bootstrap_failed',
        `the pod's bootstrap failed: ${verdict.reason}`,
        'See runs/<id>/.pod/bootstrap.log once copied, or the pod logs in the Runpod console; the pod was deleted.',
      );
    }
    if (verdict?.kind === 'failed') {
      throw new PodError(
        'watchdog_refused',
        `the pod's watchdog cannot delete its pod (${verdict.reason}): the run is refused and the pod deleted`,
        'Check that Runpod gives pods a working RUNPOD_API_KEY, then train again.',
      );
    }
    const pod = await lookUp(ctx, podId, signal).catch((error: unknown) => {
      if (signal?.aborted) throw error;
      return undefined;
    });
    if (pod === null) throw await deletedWhileStarting(ctx, plan.run.id, podId, 'is gone');
    if (pod?.status === 'TERMINATED')
      throw await deletedWhileStarting(ctx, plan.run.id, podId, 'reads TERMINATED');
    if (pod && isDead(pod)) throw new NotReady(`it is ${pod.status}`);
    if (ctx.clock.nowMs() >= untilMs) {
      throw new PodError(
        'watchdog_refused',
        `the pod's watchdog gave no verdict within ${minutes(ctx.timing.preflightTimeoutMs)}: the run is refused and the pod deleted`,
        'Try again; if it repeats, check the image runs bash and curl.',
      );
    }
    await ctx.clock.sleep(ctx.timing.podPollMs, signal);
  }
}

/**
 * The pod was deleted before it was ready, and not by this client: its watchdog does that at
 * once when the bootstrap failed in a way that leaves no SSH to read the verdict by (a bad host
 * key or client key, a run dir claimed by another pod, sshd not starting). Such a failure comes
 * from the run's env or image, the same on every GPU type: the run is refused, no other type is
 * tried (a pod deleted from the console ends the same way).
 */
export async function deletedWhileStarting(
  ctx: PodCtx,
  runId: string,
  podId: string,
  how: string,
): Promise<PodError> {
  // The pod's log says why: what the stream still holds is drained first (at most a few seconds).
  await drainPodLog(ctx, runId, podId);
  return new PodError(
    'bootstrap_failed',
    `the pod's bootstrap failed: the pod ${how} before it answered SSH (its watchdog deletes a pod whose bootstrap failed)${bootLogWhy(podId)}`,
    `See runs/${runId}/.pod/pod.log (the pod's log, kept) or "overbrainer runs logs ${runId} --pod", then train again.`,
  );
}

/**
 * Why the boot failed, from the pod's captured log: the bootstrap's reason ("bootstrap failed: …",
 * "sshd did not start: …"), the watchdog's verdict, and the last lines; '' with no log.
 */
function bootLogWhy(podId: string): string {
  const lines = lastPodLogLines(podId, 40).map((l) =>
    l.replace(/^(container|system): (\d{4}-\d\d-\d\dT[\d:]+Z )?/, ''),
  );
  if (lines.length === 0) return '';
  const last = (re: RegExp): string | undefined => [...lines].reverse().find((l) => re.test(l));
  const parts: string[] = [];
  const reason = last(/^(bootstrap failed: |sshd did not start)/);
  if (reason) parts.push(reason);
  const verdict = last(/^verdict /);
  if (verdict) parts.push(`the watchdog's verdict: ${verdict.slice('verdict '.length)}`);
  const tail = lines.slice(-5).map((l) => (l.length > 200 ? `${l.slice(0, 200)}…` : l));
  parts.push(`the pod's log ends: ${tail.join(' | ')}`);
  return `: ${parts.join('; ')}`;
}

export function minutes(ms: number): string {
  return ms >= 60_000 ? `${Math.round(ms / 60_000)} min` : `${Math.round(ms / 1000)} s`;
}
