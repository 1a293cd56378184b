/**
 * The trainer protocol: a job appends JSON lines to `$OVERBRAINER_METRICS`
 * (`<runDir>/metrics.jsonl`), and the client reads them back as typed values.
 *
 * Lines:
 *   {"event":"begin","time":T,"max_steps":N}
 *   {"event":"log","time":T,"step":S,"epoch":E,"max_steps":N,
 *    "loss"?,"eval_loss"?,"learning_rate"?,"grad_norm"?}        (non-finite → null)
 *   {"event":"end","time":T}
 * and the newer, optional `{"event":"stage",...}` / `{"event":"eval",...}`
 * (evaluation progress) and `{"event":"snapshot","time","step","checkpoint","reason"}` (the job
 * saved a snapshot and stops; `snapshot.json` is the record of it). A line written by a trainer is untrusted input: the
 * parser never throws and never lets a malformed line take the follower down;
 * it says why a line was skipped so the follower can warn once.
 */
import type { TrainMetric } from '../events';

/** A metric line longer than this is skipped (the plugin writes a few hundred bytes). */
export const MAX_METRIC_LINE_BYTES = 64 * 1024;

/**
 * The framer's buffer bound and the size of each bounded read (`head -c LIMIT`), 1 MiB.
 */
export const READ_LIMIT_BYTES = 1024 * 1024;

export type SkipReason =
  /** An empty line (e.g. the `\n` of a `\r\n` pair); skipped silently. */
  | 'blank'
  | 'too_long'
  | 'not_utf8'
  | 'not_json'
  | 'not_object'
  | 'unknown_event'
  /** A known event whose required fields are missing or out of range. */
  | 'invalid';

export type ParsedLine =
  | { kind: 'metric'; metric: TrainMetric }
  | { kind: 'begin'; time: number | null; maxSteps: number | null }
  | { kind: 'end'; time: number | null }
  | { kind: 'stage'; time: number | null; stage: string | null }
  | { kind: 'snapshot'; time: number | null; step: number | null }
  | {
      kind: 'eval';
      time: number | null;
      step: number | null;
      /** Evaluation batches done so far and in all, when the trainer says. */
      done: number | null;
      total: number | null;
    }
  | { kind: 'skip'; reason: SkipReason; detail: string };

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Parses one line (without its terminator). Never throws: anything that is
 * not a usable protocol line comes back as `skip` with a reason.
 */
export function parseMetricLine(bytes: Uint8Array): ParsedLine {
  if (bytes.length > MAX_METRIC_LINE_BYTES) {
    return skip('too_long', `a line of ${bytes.length} bytes (limit ${MAX_METRIC_LINE_BYTES})`);
  }
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return skip('not_utf8', 'a line that is not UTF-8');
  }
  // A BOM at the start of the file is an editor's doing, not part of the JSON.
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (text.trim() === '') return skip('blank', 'an empty line');

  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // Python's json.dumps writes NaN/Infinity by default; a hand-written loop
    // that forgets `allow_nan=False` should still be charted, with nulls.
    const repaired = nullNonFiniteTokens(text);
    try {
      if (repaired === null) throw new Error('nothing to repair');
      value = JSON.parse(repaired);
    } catch {
      return skip('not_json', 'a line that is not valid JSON (truncated?)');
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return skip('not_object', 'a JSON line that is not an object');
  }
  const line = value as Record<string, unknown>;
  const event = line.event;
  switch (event) {
    case 'log':
      return parseLog(line);
    case 'begin':
      return { kind: 'begin', time: time(line.time), maxSteps: positiveInt(line.max_steps) };
    case 'end':
      return { kind: 'end', time: time(line.time) };
    case 'stage':
      return {
        kind: 'stage',
        time: time(line.time),
        stage: typeof line.stage === 'string' ? line.stage.slice(0, 200) : null,
      };
    case 'snapshot':
      return { kind: 'snapshot', time: time(line.time), step: nonNegativeInt(line.step) };
    case 'eval':
      return {
        kind: 'eval',
        time: time(line.time),
        step: nonNegativeInt(line.step),
        done: nonNegativeInt(line.done),
        total: positiveInt(line.total),
      };
    default: {
      const name =
        typeof event === 'string' ? JSON.stringify(event.slice(0, 40)) : 'without an event name';
      return skip('unknown_event', `a line with event ${name}`);
    }
  }
}

function parseLog(line: Record<string, unknown>): ParsedLine {
  const step = nonNegativeInt(line.step);
  if (step === null) {
    return skip('invalid', 'a log line whose step is missing, negative or not a whole number');
  }
  const t = time(line.time);
  if (t === null) {
    return skip('invalid', 'a log line whose time is missing or not a number of seconds');
  }
  const metric: TrainMetric = {
    time: t,
    step,
    epoch: nonNegative(line.epoch),
    maxSteps: positiveInt(line.max_steps),
    loss: finite(line.loss),
    evalLoss: finite(line.eval_loss),
    learningRate: nonNegative(line.learning_rate),
    gradNorm: nonNegative(line.grad_norm),
  };
  const afterS = nonNegative(line.after_s);
  if (afterS !== null) metric.afterS = afterS;
  const values = otherValues(line);
  if (values !== null) metric.values = values;
  return { kind: 'metric', metric };
}

/** The protocol's own keys of a log line; any other finite number goes to `values`. */
const LOG_KEYS = new Set([
  'event',
  'time',
  'step',
  'epoch',
  'max_steps',
  'loss',
  'eval_loss',
  'learning_rate',
  'grad_norm',
  'after_s',
]);
/** A bound on what one line may add (a trainer that logs a whole tensor is cut short). */
const MAX_VALUES = 64;
const MAX_KEY_CHARS = 100;

function otherValues(line: Record<string, unknown>): Record<string, number> | null {
  let values: Record<string, number> | null = null;
  let count = 0;
  for (const [key, value] of Object.entries(line)) {
    if (LOG_KEYS.has(key) || key === '__proto__' || key.length > MAX_KEY_CHARS) continue;
    if (typeof value !== 'number' || !Number.isFinite(value)) continue;
    values ??= {};
    values[key] = value;
    if (++count >= MAX_VALUES) break;
  }
  return values;
}

function skip(reason: SkipReason, detail: string): ParsedLine {
  return { kind: 'skip', reason, detail };
}

function finite(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** Losses may be negative (some objectives are); rates, norms, epochs may not. */
function nonNegative(value: unknown): number | null {
  const n = finite(value);
  return n !== null && n >= 0 ? n : null;
}

function nonNegativeInt(value: unknown): number | null {
  const n = finite(value);
  return n !== null && n >= 0 && Number.isSafeInteger(n) ? n : null;
}

function positiveInt(value: unknown): number | null {
  const n = nonNegativeInt(value);
  return n !== null && n > 0 ? n : null;
}

/** Unix seconds from the trainer's clock. */
function time(value: unknown): number | null {
  return nonNegative(value);
}

/**
 * Replaces the bare tokens `NaN`, `Infinity` and `-Infinity` outside strings
 * by `null`; null when there was none (so the caller does not parse twice for nothing).
 */
function nullNonFiniteTokens(text: string): string | null {
  let out = '';
  let changed = false;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      out += c;
      if (c === '\\') {
        out += text[i + 1] ?? '';
        i++;
      } else if (c === '"') {
        inString = false;
      }
      continue;
    }
    if (c === '"') {
      inString = true;
      out += c;
      continue;
    }
    const rest = text.slice(i, i + 9);
    if (rest.startsWith('NaN')) {
      out += 'null';
      i += 2;
      changed = true;
    } else if (rest.startsWith('-Infinity')) {
      out += 'null';
      i += 8;
      changed = true;
    } else if (rest.startsWith('Infinity')) {
      out += 'null';
      i += 7;
      changed = true;
    } else {
      out += c;
    }
  }
  return changed ? out : null;
}

/**
 * Says each kind of skipped line once (per follower), so a trainer writing a
 * thousand bad lines yields one warning, not a thousand. Blank lines are never
 * reported.
 */
export class SkipWarnings {
  private seen = new Set<string>();

  /** The warning to show for `parsed`, or null when it was said already (or is not worth saying). */
  note(parsed: ParsedLine, where: string): string | null {
    if (parsed.kind !== 'skip' || parsed.reason === 'blank') return null;
    const key =
      parsed.reason === 'unknown_event' ? `${parsed.reason}:${parsed.detail}` : parsed.reason;
    if (this.seen.has(key)) return null;
    this.seen.add(key);
    return `skipped ${parsed.detail} in ${where}; further lines like it are skipped silently`;
  }
}

/** One line cut out of the byte stream, with where it sits in the file. */
export interface FramedLine {
  bytes: Buffer;
  /** Byte offset of the line's first byte in the file. */
  startOffset: number;
  /** Byte offset just after its terminator (or after the cut). */
  endOffset: number;
  /**
   * The line had no terminator within {@link READ_LIMIT_BYTES}: `bytes` is its
   * head, cut at a UTF-8 boundary; the rest up to the next terminator is dropped.
   */
  cut: boolean;
  /** The last line of a finished file, which never got its terminator. */
  unterminated: boolean;
}

const LF = 0x0a;
const CR = 0x0d;

/**
 * Splits a byte stream into complete lines (`\n` and `\r` both terminate; a
 * `\r\n` pair yields an extra empty line, which the parser skips silently) and
 * keeps the incomplete tail for the next chunk. The buffer is bounded: a tail
 * of `maxBufferBytes` or more without a terminator (a full bounded read) is cut at a UTF-8 boundary,
 * reported as a `cut` line, and the rest of that line is dropped.
 *
 * `offset` is the file position just after the last complete line (or cut):
 * a follower that loses its stream resumes reading exactly there after
 * {@link LineFramer.dropPending}, so no line is lost and none is seen twice.
 */
export class LineFramer {
  private parts: Buffer[] = [];
  private partsBytes = 0;
  private consumed: number;
  /** Inside an overlong line whose head was already reported: drop until the terminator. */
  private discarding = false;

  constructor(
    startOffset = 0,
    private readonly maxBufferBytes = READ_LIMIT_BYTES,
  ) {
    if (!Number.isSafeInteger(startOffset) || startOffset < 0) {
      throw new RangeError(`start offset must be a non-negative integer, got ${startOffset}`);
    }
    if (!(maxBufferBytes >= 4)) throw new RangeError('the line buffer must hold at least 4 bytes');
    this.consumed = startOffset;
  }

  /** File offset just after the last complete line: where a new read resumes. */
  get offset(): number {
    return this.consumed;
  }

  /** Bytes held for an incomplete line. */
  get pendingBytes(): number {
    return this.partsBytes;
  }

  /** Feeds the next bytes of the file (those right after `offset + pendingBytes`). */
  push(chunk: Buffer): FramedLine[] {
    const lines: FramedLine[] = [];
    let start = 0;
    // Native searches for both terminators, rather than a byte loop in JS.
    let nextLf = chunk.indexOf(LF);
    let nextCr = chunk.indexOf(CR);
    while (nextLf !== -1 || nextCr !== -1) {
      const i = nextCr === -1 || (nextLf !== -1 && nextLf < nextCr) ? nextLf : nextCr;
      if (i === nextLf) nextLf = chunk.indexOf(LF, i + 1);
      else nextCr = chunk.indexOf(CR, i + 1);
      const piece = chunk.subarray(start, i);
      const lineBytes = this.partsBytes === 0 ? piece : Buffer.concat([...this.parts, piece]);
      const startOffset = this.consumed;
      this.consumed += lineBytes.length + 1;
      this.parts = [];
      this.partsBytes = 0;
      start = i + 1;
      if (this.discarding) {
        this.discarding = false;
        continue;
      }
      lines.push({
        bytes: Buffer.from(lineBytes),
        startOffset,
        endOffset: this.consumed,
        cut: false,
        unterminated: false,
      });
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.parts.push(Buffer.from(rest));
      this.partsBytes += rest.length;
    }
    while (this.partsBytes >= this.maxBufferBytes) lines.push(...this.cutOverlong());
    return lines;
  }

  /**
   * Forgets the incomplete tail: the next bytes pushed must be those from
   * `offset` (the stream reconnected there, or a read restarts there).
   */
  dropPending(): void {
    this.parts = [];
    this.partsBytes = 0;
  }

  /**
   * The file is complete (the job ended and it was read to its end): hands
   * over the tail that never got a terminator as a last line.
   */
  finish(): FramedLine[] {
    if (this.partsBytes === 0) return [];
    const bytes = Buffer.concat(this.parts);
    const startOffset = this.consumed;
    this.consumed += bytes.length;
    this.parts = [];
    this.partsBytes = 0;
    if (this.discarding) {
      this.discarding = false;
      return [];
    }
    return [{ bytes, startOffset, endOffset: this.consumed, cut: false, unterminated: true }];
  }

  private cutOverlong(): FramedLine[] {
    const all = Buffer.concat(this.parts);
    let cut = this.maxBufferBytes;
    // Back up to the start of a UTF-8 sequence (never more than 3 bytes).
    while (cut > this.maxBufferBytes - 4 && cut > 0 && ((all[cut] ?? 0) & 0xc0) === 0x80) cut--;
    if (((all[cut] ?? 0) & 0xc0) === 0x80) cut = this.maxBufferBytes;
    const head = all.subarray(0, cut);
    const rest = all.subarray(cut);
    const startOffset = this.consumed;
    this.consumed += head.length;
    this.parts = rest.length > 0 ? [Buffer.from(rest)] : [];
    this.partsBytes = rest.length;
    if (this.discarding) return [];
    this.discarding = true;
    return [
      {
        bytes: Buffer.from(head),
        startOffset,
        endOffset: this.consumed,
        cut: true,
        unterminated: false,
      },
    ];
  }
}

/** What a framed line means, with a cut line always a `too_long` skip. */
export function parseFramedLine(line: FramedLine): ParsedLine {
  if (line.cut) {
    return skip('too_long', `a line longer than ${READ_LIMIT_BYTES} bytes without a line break`);
  }
  return parseMetricLine(line.bytes);
}
