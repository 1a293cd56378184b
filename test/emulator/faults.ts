/**
 * Fault injection: what can go wrong with Runpod, on demand. A fault is plain JSON, so a test can
 * install it in code (`emulator.faults.add(...)`) or over HTTP (`POST /_emulator/faults`).
 *
 * Request faults match calls by route (the document's operationId: `createPod`, `getPod`, ...),
 * and optionally by pod id, GPU type, key kind and action. `nth` counts matching calls from the
 * moment the fault is installed (1 = the next one); `times` is how many calls in a row it hits
 * (`'always'` for every one after). With `applied: true` the call takes effect first (the pod is
 * created or deleted) and only the answer fails: the "create that succeeded but answered 500".
 *
 * Other faults act on pods and on the server itself (stock, slow boot, sshd never starting, a pod
 * that dies or vanishes, the API unreachable for a while); the emulator carries them out.
 */
import { z } from 'zod';

/** Operations of the API a request fault can target (`*`: any). */
export const ROUTES = [
  'createPod',
  'listPods',
  'getPod',
  'deletePod',
  'podAction',
  'listGpuTypes',
  'listDataCenters',
  'listNetworkVolumes',
  'getNetworkVolume',
  'updateNetworkVolume',
  'listTemplates',
  'listSecrets',
  'createSecret',
  'updateSecret',
  'deleteSecret',
  'getPodLogs',
  'createCluster',
  'listClusters',
  'getCluster',
  'updateCluster',
  'deleteCluster',
  'listClusterPods',
  '*',
] as const;
export type RouteName = (typeof ROUTES)[number];

const positiveInt = z.number().int().positive();
const durationMs = z.number().int().nonnegative();

const effectSchema = z.discriminatedUnion('type', [
  z
    .object({
      /** Answer with this status and a problem+json body (429 carries Retry-After). */
      type: z.literal('status'),
      status: z.number().int().min(400).max(599),
      detail: z.string().optional(),
      /** Seconds, for 429 (default 1). */
      retryAfterS: z.number().int().nonnegative().optional(),
    })
    .strict(),
  z
    .object({
      /**
       * The call takes effect and answers as usual (a 2xx), but its `RateLimit` header says the
       * account's `window` is spent (`r=0`) until `resetS` seconds from now, as Runpod's headers on
       * every answer do; every call of the account key that arrives before the reset is answered
       * 429 (with `Retry-After` and the same headers), as Runpod's quota would.
       */
      type: z.literal('quotaSpent'),
      resetS: z.number().int().positive(),
      window: z.enum(['minute', 'hour', 'day']).optional(),
    })
    .strict(),
  /** Destroy the connection without an answer. */
  z.object({ type: z.literal('drop') }).strict(),
  /**
   * For `getPodLogs`: answer the stream as usual, then destroy the connection after
   * `afterEvents` log events (a stream dropped mid-way).
   */
  z.object({ type: z.literal('dropStream'), afterEvents: z.number().int().positive() }).strict(),
  /** Never answer (until the client gives up or the emulator closes). */
  z.object({ type: z.literal('hang') }).strict(),
]);
export type FaultEffect = z.infer<typeof effectSchema>;

export const faultSchema = z.discriminatedUnion('kind', [
  z
    .object({
      kind: z.literal('request'),
      route: z.enum(ROUTES),
      podId: z.string().optional(),
      gpuId: z.string().optional(),
      key: z.enum(['account', 'pod']).optional(),
      /** For `podAction`: only this action. */
      action: z.enum(['start', 'stop', 'restart', 'terminate']).optional(),
      nth: positiveInt.optional(),
      times: z.union([positiveInt, z.literal('always')]).optional(),
      applied: z.boolean().optional(),
      /**
       * With `applied` on `createPod`: the pod it made is left out of the next N pod lists (the
       * first page of each), as Runpod may list a new pod late.
       */
      unlistedFor: positiveInt.optional(),
      effect: effectSchema,
    })
    .strict(),
  z
    .object({
      /** Free GPUs of a type: in one data center, or in every one that offers it. */
      kind: z.literal('stock'),
      gpuId: z.string(),
      dataCenterId: z.string().optional(),
      stock: z.number().int().nonnegative(),
    })
    .strict(),
  z
    .object({
      /** The next `pods` creates (default 1) boot this slowly. */
      kind: z.literal('slowBoot'),
      provisioningMs: durationMs.optional(),
      startingMs: durationMs.optional(),
      pods: positiveInt.optional(),
    })
    .strict(),
  z
    .object({
      /**
       * sshd never becomes reachable: `unpublished` (ssh.direct stays null), `closed` (a port is
       * published but nothing listens: connection refused), `silent` (the published port accepts
       * TCP and never sends an SSH banner). For `podId` (from its next container start on), else
       * for the next `pods` creates (default 1).
       */
      kind: z.literal('sshd'),
      mode: z.enum(['unpublished', 'closed', 'silent']),
      podId: z.string().optional(),
      pods: positiveInt.optional(),
    })
    .strict(),
  /** The pod stops by itself: processes killed, EXITED, no restart, disks still billed. */
  z.object({ kind: z.literal('podDies'), podId: z.string() }).strict(),
  /** The pod's main process is killed: the restart policy applies (restarted by default). */
  z.object({ kind: z.literal('podCrash'), podId: z.string() }).strict(),
  /**
   * The pod's host stops answering: every process of the pod is frozen (SSH accepts TCP and never
   * answers, the job makes no progress) while the API still lists it RUNNING; after `exitAfterMs`
   * (through the clock) the pod is EXITED, as Runpod shows a lost host's pod. Without
   * `exitAfterMs` it stays listed RUNNING.
   */
  z
    .object({ kind: z.literal('hostLost'), podId: z.string(), exitAfterMs: durationMs.optional() })
    .strict(),
  /**
   * Whether a cluster member's own key (its `RUNPOD_API_KEY`) may delete its cluster, from now
   * on: Runpod's documents do not say; the emulator plays either answer (default: refused, 403).
   */
  z.object({ kind: z.literal('memberKey'), deletesCluster: z.boolean() }).strict(),
  /** The pod disappears: processes killed, 404 from now on, ledger `deletedBy: provider`. */
  z.object({ kind: z.literal('podVanishes'), podId: z.string() }).strict(),
  /** The whole cluster disappears (every member as podVanishes), 404 from now on. */
  z.object({ kind: z.literal('clusterVanishes'), clusterId: z.string() }).strict(),
  z
    .object({
      /** The API cannot be reached for `forMs`: connections `refuse`d or `reset`. */
      kind: z.literal('unreachable'),
      forMs: positiveInt,
      mode: z.enum(['refuse', 'reset']),
    })
    .strict(),
]);
export type Fault = z.infer<typeof faultSchema>;
export type RequestFault = Extract<Fault, { kind: 'request' }>;
export type SshdFaultMode = Extract<Fault, { kind: 'sshd' }>['mode'];

/** Parses a fault given as JSON; throws an Error listing every problem. */
export function parseFault(input: unknown): Fault {
  const parsed = faultSchema.safeParse(input);
  if (!parsed.success) throw new Error(z.prettifyError(parsed.error));
  return parsed.data;
}

/** What a request fault sees of a call. */
export interface CallContext {
  route: string;
  key: 'account' | 'pod';
  podId?: string;
  gpuId?: string;
  action?: string;
}

export interface FaultHit {
  faultId: string;
  effect: FaultEffect;
  applied: boolean;
  unlistedFor?: number;
}

interface RuleState {
  id: string;
  fault: RequestFault;
  seen: number;
  hits: number;
}

interface Queued<T> {
  id: string;
  value: T;
  remaining: number;
}

export interface BootOverride {
  provisioningMs?: number;
  startingMs?: number;
}

/** A pending fault as `GET /_emulator/faults` lists it. */
export interface PendingFault {
  id: string;
  fault: Fault;
  /** Request faults: matching calls seen and hit so far. */
  seen?: number;
  hits?: number;
  /** Queued pod faults: creates still to be affected. */
  remaining?: number;
}

/** The request rules and per-create queues; the emulator asks it on every call and create. */
export class FaultBook {
  private nextId = 1;
  private rules: RuleState[] = [];
  private slowBoots: Queued<BootOverride>[] = [];
  private sshdQueue: Queued<SshdFaultMode>[] = [];
  private readonly sshdByPod = new Map<string, { id: string; mode: SshdFaultMode }>();

  newId(): string {
    return `f${this.nextId++}`;
  }

  addRequestFault(fault: RequestFault): string {
    const id = this.newId();
    this.rules.push({ id, fault, seen: 0, hits: 0 });
    return id;
  }

  addSlowBoot(override: BootOverride, pods: number): string {
    const id = this.newId();
    this.slowBoots.push({ id, value: override, remaining: pods });
    return id;
  }

  addSshd(mode: SshdFaultMode, podId: string | undefined, pods: number): string {
    const id = this.newId();
    if (podId !== undefined) this.sshdByPod.set(podId, { id, mode });
    else this.sshdQueue.push({ id, value: mode, remaining: pods });
    return id;
  }

  /** Counts the call against every matching rule; returns the first rule that hits it. */
  onCall(call: CallContext): FaultHit | undefined {
    let hit: FaultHit | undefined;
    for (const rule of this.rules) {
      const f = rule.fault;
      if (f.route !== '*' && f.route !== call.route) continue;
      if (f.podId !== undefined && f.podId !== call.podId) continue;
      if (f.gpuId !== undefined && f.gpuId !== call.gpuId) continue;
      if (f.key !== undefined && f.key !== call.key) continue;
      if (f.action !== undefined && f.action !== call.action) continue;
      rule.seen++;
      const nth = f.nth ?? 1;
      const times = f.times ?? 1;
      const inWindow = rule.seen >= nth && (times === 'always' || rule.seen < nth + times);
      if (inWindow && !hit) {
        rule.hits++;
        hit = { faultId: rule.id, effect: f.effect, applied: f.applied === true };
        if (f.unlistedFor !== undefined) hit.unlistedFor = f.unlistedFor;
      }
    }
    this.rules = this.rules.filter((r) => {
      const times = r.fault.times ?? 1;
      return times === 'always' || r.seen < (r.fault.nth ?? 1) + times - 1;
    });
    return hit;
  }

  /** The boot delays the next create uses (consumes one slow-boot fault), if any. */
  takeSlowBoot(): BootOverride | undefined {
    const next = this.slowBoots[0];
    if (!next) return undefined;
    next.remaining--;
    if (next.remaining <= 0) this.slowBoots.shift();
    return next.value;
  }

  /** The sshd fault for a new pod (consumes one queued fault), if any. */
  takeSshdForCreate(): SshdFaultMode | undefined {
    const next = this.sshdQueue[0];
    if (!next) return undefined;
    next.remaining--;
    if (next.remaining <= 0) this.sshdQueue.shift();
    return next.value;
  }

  /** The sshd fault pinned to a pod, if any (it stays until cleared). */
  sshdForPod(podId: string): SshdFaultMode | undefined {
    return this.sshdByPod.get(podId)?.mode;
  }

  pinSshd(podId: string, mode: SshdFaultMode): void {
    this.sshdByPod.set(podId, { id: this.newId(), mode });
  }

  clear(): void {
    this.rules = [];
    this.slowBoots = [];
    this.sshdQueue = [];
    this.sshdByPod.clear();
  }

  pending(): PendingFault[] {
    return [
      ...this.rules.map((r) => ({ id: r.id, fault: r.fault, seen: r.seen, hits: r.hits })),
      ...this.slowBoots.map((q) => ({
        id: q.id,
        fault: { kind: 'slowBoot' as const, ...q.value },
        remaining: q.remaining,
      })),
      ...this.sshdQueue.map((q) => ({
        id: q.id,
        fault: { kind: 'sshd' as const, mode: q.value },
        remaining: q.remaining,
      })),
      ...[...this.sshdByPod.entries()].map(([podId, s]) => ({
        id: s.id,
        fault: { kind: 'sshd' as const, mode: s.mode, podId },
      })),
    ];
  }
}
