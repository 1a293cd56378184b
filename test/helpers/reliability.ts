/**
 * Figures for the reliability matrix (issue #7): each test/integration/reliability.*.integration.test.ts
 * records what it did, and `npm run reliability` (scripts/reliability.ts) sums the records into
 * docs/RELIABILITY.md.
 *
 * Records are JSON lines appended to the file named by the env var OVERBRAINER_RELIABILITY_LOG.
 * When the variable is unset (a plain mocha run, CI's integration tier) every function here is a
 * no-op, so tests call them unconditionally.
 *
 * How to use it in a matrix file:
 *
 * ```ts
 * import { recordFault, recordLedger, recordResult } from './reliability';
 *
 * it('a 500 on the create is retried', async function () {
 *   emulator.faults.failCall(...);
 *   recordFault(this, 'api.create.500');          // once per fault injected (kind is free text)
 *   // ... run the case ...
 *   recordLedger(this, emulator.ledger());        // pods created / still billing at the case's end
 *   recordResult(this, { verified: 1, lost: 0 }); // verified results expected vs lost
 * });
 * ```
 *
 * `this` is mocha's Context (use `function () {}`, not an arrow) — it names the case by its full
 * title; pass a string instead where no Context is at hand. A "leaked" pod is one still billing
 * when recordLedger is called: call it after the case's cleanup has had its bound (the case's own
 * assertions must already fail on a leak; the figure only reports). Call recordLedger once per
 * case per emulator; with several emulators in one case, call it for each.
 */
import { appendFileSync } from 'node:fs';
import type { LedgerSnapshot } from '../emulator/ledger';

export const RELIABILITY_LOG_ENV = 'OVERBRAINER_RELIABILITY_LOG';

export type ReliabilityRecord =
  | { type: 'fault'; test: string; kind: string; count: number }
  | { type: 'ledger'; test: string; podsCreated: number; podsLeaked: number; gpuSeconds: number }
  | { type: 'result'; test: string; verified: number; lost: number }
  | { type: 'figure'; test: string; section: string; line: string };

/** A mocha Context (has `test.fullTitle()`), or a case name. */
export type CaseRef = string | { test?: { fullTitle(): string } | undefined };

function caseName(ref: CaseRef): string {
  if (typeof ref === 'string') return ref;
  return ref.test?.fullTitle() ?? '(unnamed)';
}

function append(record: ReliabilityRecord): void {
  const file = process.env[RELIABILITY_LOG_ENV];
  if (!file) return;
  appendFileSync(file, `${JSON.stringify(record)}\n`);
}

/** A fault was injected (`count` of them: e.g. 3 for `failCall(..., {times: 3})`). */
export function recordFault(ref: CaseRef, kind: string, count = 1): void {
  append({ type: 'fault', test: caseName(ref), kind, count });
}

/**
 * The emulator's ledger at the end of a case: pods created, and still billing (leaked). Pods that
 * bill on purpose (kept by the user) go in `keptPodIds` and are not counted as leaked.
 */
export function recordLedger(
  ref: CaseRef,
  ledger: LedgerSnapshot,
  keptPodIds: readonly string[] = [],
): void {
  append({
    type: 'ledger',
    test: caseName(ref),
    podsCreated: ledger.totals.podsCreated,
    podsLeaked: ledger.pods.filter((p) => p.billing && !keptPodIds.includes(p.id)).length,
    gpuSeconds: ledger.totals.gpuSeconds,
  });
}

/** Results a case checked: `verified` results that had to survive, `lost` ones that did not. */
export function recordResult(ref: CaseRef, figures: { verified: number; lost: number }): void {
  append({ type: 'result', test: caseName(ref), ...figures });
}

/**
 * A figure line a case printed, for docs/RELIABILITY.md's "Figures" (under `section`, in the order
 * recorded): the spend estimates against the ledger, the losses per pod death…
 */
export function recordFigure(ref: CaseRef, section: string, line: string): void {
  append({ type: 'figure', test: caseName(ref), section, line });
}

/** mulberry32: a small seeded PRNG (floats in [0, 1)), the same script on every machine. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `probe` every 20 ms until it holds; fails naming `what` after `timeoutMs`. */
export async function until(
  what: string,
  probe: () => boolean,
  timeoutMs = 180_000,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}
