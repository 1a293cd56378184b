/**
 * Looking pods up: a pod is gone only once Runpod
 * answered 404 `goneLooks` times in a row and its list no longer shows it. Nothing here deletes.
 */
import type { Pod } from '../runpod/api';
import type { PodCtx } from './context';
import { describeError } from '../errors';

/** What a look found of one pod. */
export type Look =
  | { kind: 'found'; pod: Pod }
  /** Confirmed gone: `goneLooks` 404s in a row and absent from the list. */
  | { kind: 'gone' }
  /** A look failed: the pod is undetermined. */
  | { kind: 'failed'; message: string };

/**
 * The pod `id` as the API shows it, or null when it is really gone: a 404 that
 * {@link lookAgain} confirms. Throws the ApiError when a look fails (the pod
 * is then undetermined and nothing is recorded).
 */
export async function lookUp(
  ctx: PodCtx,
  id: string,
  signal?: AbortSignal,
  seen?: GoneSeen,
): Promise<Pod | null> {
  const look = await ctx.client.lookPod(id, { signal });
  if (look.pod) {
    if (look.pod.status === 'TERMINATED' && seen !== undefined) seen.terminatedMs ??= look.seenByMs;
    return look.pod;
  }
  const again = await lookAgain(ctx, id, signal);
  if (again === null && seen !== undefined) seen.atMs ??= look.seenByMs;
  return again;
}

/**
 * Filled in by a look that finds a pod gone: when the API saw the first 404 of the looks that
 * confirmed it, at the latest (its answer's Date, not when this client read it: see
 * Answer.seenByMs), or before it the first look that read it TERMINATED (deleted: it bills no
 * more). Runpod stopped billing the pod before then: the spend estimate ends there.
 */
export interface GoneSeen {
  atMs: number | null;
  /** When a look read it TERMINATED, first (counted once a 404 confirms it gone). */
  terminatedMs?: number;
}

/**
 * {@link lookUp}, waiting out a pod that reads TERMINATED: Runpod is deleting it (it bills no
 * more and never runs again) and answers 404 shortly after. Looks every `deletePollMs` for up to
 * `deleteConfirmMs`; a pod still TERMINATED then is returned as such. Nothing is deleted here.
 */
export async function lookUpSettled(
  ctx: PodCtx,
  id: string,
  signal?: AbortSignal,
  seen?: GoneSeen,
): Promise<Pod | null> {
  const untilMs = ctx.clock.nowMs() + ctx.timing.deleteConfirmMs;
  const looks: GoneSeen = { atMs: null };
  let pod = await lookUp(ctx, id, signal, looks);
  while (pod?.status === 'TERMINATED' && ctx.clock.nowMs() < untilMs) {
    await ctx.clock.sleep(ctx.timing.deletePollMs, signal);
    pod = await lookUp(ctx, id, signal, looks);
  }
  // Read TERMINATED, it billed no more (`cost` 0): that look is when it was seen gone, once
  // the 404 that follows confirms it; an earlier look the caller had counts too.
  if (pod === null && seen !== undefined) {
    const ends = [seen.atMs, looks.atMs, looks.terminatedMs ?? null];
    seen.atMs = Math.min(...ends.filter((ms): ms is number => ms !== null));
  }
  return pod;
}

/**
 * Looks again at the pod `id`, whose first look answered Runpod's 404: null when
 * `goneLooks` looks in a row answer that 404, `goneIntervalMs` apart, and the
 * pod list no longer shows it; otherwise the pod as last seen.
 */
export async function lookAgain(
  ctx: PodCtx,
  id: string,
  signal?: AbortSignal,
): Promise<Pod | null> {
  for (let look = 1; look < ctx.timing.goneLooks; look++) {
    await ctx.clock.sleep(ctx.timing.goneIntervalMs, signal);
    const pod = await ctx.client.getPod(id, { signal });
    if (pod) return pod;
  }
  const listed = await ctx.client.listPods({ signal });
  return listed.find((pod) => pod.id === id) ?? null;
}

/**
 * {@link lookUp} for several pods with one wait for all; no wait at all when
 * every pod answers. Looks are in the order of `ids`.
 */
export async function lookUpAll(
  ctx: PodCtx,
  ids: readonly string[],
  signal?: AbortSignal,
): Promise<Look[]> {
  const looks: (Look | null)[] = ids.map(() => null);
  let pending = ids.map((_, index) => index);
  for (let round = 0; round < ctx.timing.goneLooks && pending.length > 0; round++) {
    if (round > 0) await ctx.clock.sleep(ctx.timing.goneIntervalMs, signal);
    const missing: number[] = [];
    for (const index of pending) {
      try {
        const pod = await ctx.client.getPod(ids[index]!, { signal });
        if (pod) looks[index] = { kind: 'found', pod };
        else missing.push(index);
      } catch (error) {
        looks[index] = { kind: 'failed', message: describeError(error) };
      }
    }
    pending = missing;
  }
  if (pending.length > 0) {
    try {
      const listed = await ctx.client.listPods({ signal });
      for (const index of pending) {
        const pod = listed.find((p) => p.id === ids[index]);
        looks[index] = pod ? { kind: 'found', pod } : { kind: 'gone' };
      }
    } catch (error) {
      for (const index of pending) looks[index] = { kind: 'failed', message: describeError(error) };
    }
  }
  // Every pod got a look above; one without is undetermined, never gone.
  return looks.map((look) => look ?? { kind: 'failed', message: 'the pod was not looked at' });
}
