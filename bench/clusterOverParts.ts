/**
 * Where a cluster attempt's estimate is over the emulator's ledger, member by member, for the
 * clusterDeaths benchmark (section 9): at the start, the part a client could have known (its
 * create still in this process, before its bytes left) and the part no client can know (the create
 * on its way and in Runpod's hands after its bytes left, inside the whole second of the member's
 * `createdAt`); at the end, a dead member counted to the look that found it (how much of that
 * waited for the next look to be sent) and the live members to the delete's answer.
 *
 * When a request's bytes left is undici's `undici:client:sendHeaders` (published just before the
 * request is written to its socket: the API cannot have seen the request before it), measured here
 * by the benchmark; the product counts from its request's onConnect, in the same tick just before.
 */
import * as diagnostics from 'node:diagnostics_channel';
import type { RunCluster } from '../src/core/runs/clusterRecord';
import { memberStartMs, memberUsd } from '../src/core/runs/clusterSpend';
import type { LedgerEntry } from '../test/emulator/ledger';

/** When this process's API calls of a cluster's life left it (this process's clock, ms). */
export class ClusterCalls {
  /** Cluster name → when its create's bytes left (the last create of that name). */
  readonly createsSent = new Map<string, number>();
  /** Cluster ID → when each look at its pods (`GET /clusters/{id}/pods`) left, in order. */
  readonly looksSent = new Map<string, number[]>();
  private readonly onHeaders = (message: unknown): void => {
    const request = (message as { request?: { method?: string; path?: string; body?: unknown } })
      .request;
    const atMs = Date.now();
    const route = request?.path?.split('?')[0] ?? '';
    if (request?.method === 'POST' && /\/clusters$/.test(route)) {
      try {
        const body = JSON.parse(String(request.body)) as { name?: unknown };
        if (typeof body.name === 'string') this.createsSent.set(body.name, atMs);
      } catch {
        // not a create this benchmark made
      }
      return;
    }
    const look = /\/clusters\/([^/]+)\/pods$/.exec(route);
    if (request?.method === 'GET' && look) {
      const id = decodeURIComponent(look[1]!);
      this.looksSent.set(id, [...(this.looksSent.get(id) ?? []), atMs]);
    }
  };

  constructor() {
    diagnostics.subscribe('undici:client:sendHeaders', this.onHeaders);
  }

  dispose(): void {
    diagnostics.unsubscribe('undici:client:sendHeaders', this.onHeaders);
  }
}

/**
 * An attempt's estimate over its ledger, in seconds of one member's rate summed over its members.
 * `startS` = `startBeforeBytesS` + `startInFlightS`; `endS` is the rest of the raw estimate's over
 * (the members' ends, the disk after a member's GPU stopped), of which `foundS` and `deleteS`.
 */
export interface OverParts {
  /** Each member counted from before the ledger opened it. */
  startS: number;
  /** Of which: before the create's bytes left this client (known to a client that stamps it). */
  startBeforeBytesS: number;
  /**
   * Of which: after the bytes left, within the second of the member's createdAt: no client can
   * know when in it Runpod made the member (its createdAt is whole seconds).
   */
  startInFlightS: number;
  /** Counted after the ledger closed a member or stopped its GPU. */
  endS: number;
  /** Of `endS`: dead members' GPU, from the ledger's stop to the look that found them. */
  foundS: number;
  /**
   * Of `foundS`: from the ledger's stop until the look that found it was sent (the look loop's
   * cadence); the rest is that look's way to the API and back.
   */
  waitLookS: number;
  /** Of `endS`: live members' GPU, from the ledger's close to the delete's answer. */
  deleteS: number;
  /** The attempt's cost rounded up (to the micro-dollar). */
  roundS: number;
}

const ms = (iso: string | null | undefined): number => Date.parse(iso ?? '');

/** The parts of `cluster`'s over (its attempt's estimate `estimatedUsd`) against `ledger`. */
export function overParts(
  cluster: RunCluster,
  ledger: readonly LedgerEntry[],
  calls: ClusterCalls,
  estimatedUsd: number | null,
): OverParts {
  const rate = cluster.costPerHourUsd ?? 0;
  const untilMs = ms(cluster.deletedAt) || Date.now();
  const bytesMs = calls.createsSent.get(cluster.name);
  const looks = calls.looksSent.get(cluster.id) ?? [];
  const parts: OverParts = {
    startS: 0,
    startBeforeBytesS: 0,
    startInFlightS: 0,
    endS: 0,
    foundS: 0,
    waitLookS: 0,
    deleteS: 0,
    roundS: 0,
  };
  let rawUsd = 0;
  let ledgerUsd = 0;
  for (const node of cluster.nodes) {
    const entry = ledger.find((p) => p.id === node.podId);
    if (!entry) continue;
    const fromMs = memberStartMs(cluster, node);
    const createdMs = entry.createdAtMs;
    // The most a client knows: the member's createdAt second, and when the create left it.
    const knownMs = Math.min(
      createdMs,
      Math.max(fromMs, Math.floor(createdMs / 1000) * 1000, bytesMs ?? fromMs),
    );
    parts.startS += (createdMs - fromMs) / 1000;
    parts.startBeforeBytesS += (knownMs - fromMs) / 1000;
    parts.startInFlightS += (createdMs - knownMs) / 1000;
    // The ledger bills the GPU from the creation, one stretch, until EXITED or the delete.
    const gpuStopMs = createdMs + entry.gpuBilledSeconds * 1000;
    const foundMs = ms(node.gpuStoppedAt ?? node.endedAt);
    if (Number.isFinite(foundMs)) {
      parts.foundS += (foundMs - gpuStopMs) / 1000;
      // The look that found it: the last one sent before its answer was handled.
      const lookMs = looks.filter((t) => t <= foundMs).at(-1) ?? gpuStopMs;
      parts.waitLookS += Math.max(0, lookMs - gpuStopMs) / 1000;
    } else {
      parts.deleteS += ((ms(cluster.deletedAt) || untilMs) - gpuStopMs) / 1000;
    }
    rawUsd += memberUsd(cluster, node, untilMs) ?? 0;
    ledgerUsd += entry.costUsd;
  }
  const perS = rate / 3600;
  if (perS === 0) return parts;
  parts.endS = (rawUsd - ledgerUsd) / perS - parts.startS;
  parts.roundS = estimatedUsd === null ? 0 : (estimatedUsd - rawUsd) / perS;
  return parts;
}

/** An attempt's over, where it comes from, in member-seconds. */
export function describeOver(o: OverParts): string {
  const f = (x: number): string => x.toFixed(2);
  return (
    `start ${f(o.startS)} s (${f(o.startBeforeBytesS)} before the create's bytes left, ${f(o.startInFlightS)} after them inside createdAt's second), ` +
    `end ${f(o.endS)} s (dead found ${f(o.foundS)} s after their stop, ${f(o.waitLookS)} of it before the finding look was sent; the others to the delete's answer ${f(o.deleteS)} s), ` +
    `rounding ${f(o.roundS)} s`
  );
}
