/**
 * Where a followed run's side tasks (the checkpoint stream, the disk watch) take what the pod's
 * watcher pushes on the metrics stream (train/podWatcher.ts), instead of asking over SSH on a
 * timer. While the channel is down they are told to look for themselves, at their slow interval.
 */
import { abortError, isAbortError, type Clock } from '../clock';
import type { PodPushSink } from '../train/podWatcher';

export interface Pushed {
  value: string;
  /** The value pushed just before it (null: none yet on this follow). */
  previous: string | null;
}

/** One kind of push: its newest value not yet taken, and whether pushes can come. */
export class PushedValue {
  private newest: string | null = null;
  private before: string | null = null;
  private last: string | null = null;
  private live = false;
  private wakeNap: (() => void) | null = null;

  constructor(private readonly clock: Clock) {}

  set(value: string): void {
    // The one pushed before the newest, taken or not: a repeat of it says "settled".
    this.before = this.last;
    this.last = value;
    this.newest = value;
    this.wakeNap?.();
  }

  setLive(live: boolean): void {
    this.live = live;
    this.wakeNap?.();
  }

  /**
   * The next value pushed (the newest, when several came meanwhile); `down` once the channel was
   * down for `fallbackMs` with nothing pushed (the caller then looks for itself); `waited` when
   * `atMostMs` passed with nothing pushed (a caller that wants to try again). Rejects with an
   * AbortError when `signal` aborts.
   */
  async next(
    fallbackMs: number,
    signal: AbortSignal,
    atMostMs = Infinity,
  ): Promise<Pushed | 'down' | 'waited'> {
    const startMs = this.clock.nowMs();
    let downSinceMs: number | null = null;
    for (;;) {
      if (signal.aborted) throw abortError(signal);
      if (this.newest !== null) {
        const pushed = { value: this.newest, previous: this.before };
        this.newest = null;
        return pushed;
      }
      const nowMs = this.clock.nowMs();
      let waitMs = fallbackMs;
      if (this.live) downSinceMs = null;
      else {
        downSinceMs ??= nowMs;
        waitMs = fallbackMs - (nowMs - downSinceMs);
        if (waitMs <= 0) return 'down';
      }
      const leftMs = atMostMs - (nowMs - startMs);
      if (leftMs <= 0) return 'waited';
      await this.nap(Math.min(waitMs, leftMs), signal);
    }
  }

  private async nap(ms: number, signal: AbortSignal): Promise<void> {
    const controller = new AbortController();
    const onAbort = (): void => controller.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    this.wakeNap = () => controller.abort();
    try {
      await this.clock.sleep(ms, controller.signal);
    } catch (error) {
      if (!isAbortError(error)) throw error;
    } finally {
      this.wakeNap = null;
      signal.removeEventListener('abort', onAbort);
    }
  }
}

/** The pushes of one followed run: checkpoint looks, disk samples and GPU samples. */
export class PodPushes {
  readonly look: PushedValue;
  readonly disk: PushedValue;
  readonly gpu: PushedValue;

  constructor(clock: Clock) {
    this.look = new PushedValue(clock);
    this.disk = new PushedValue(clock);
    this.gpu = new PushedValue(clock);
  }

  /** The sink the follower hands the watcher's pushes to. */
  sink(options: Pick<PodPushSink, 'lookMs' | 'diskMs' | 'volumeDir' | 'gpuMs'>): PodPushSink {
    return {
      ...options,
      look: (text) => this.look.set(text),
      disk: (line) => this.disk.set(line),
      gpu: (text) => this.gpu.set(text),
      live: (isLive) => {
        this.look.setLive(isLive);
        this.disk.setLive(isLive);
        this.gpu.setLive(isLive);
      },
    };
  }
}
