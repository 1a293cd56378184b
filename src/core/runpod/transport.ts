/**
 * The HTTP side of the Runpod API v2 client: one request at a time with its timeout on the
 * injected clock, the retry rules (only idempotent calls are retried on transport errors, 408 and
 * 5xx; any call on 429, except the create: ./answers.ts), the account's rate-limit quota, paging,
 * decoding with zod. Redirects are never followed (the bearer key must
 * not travel to another host), and the API key never appears in an error, a log line or an
 * enumerable field.
 */
import type { Agent, Dispatcher } from 'undici';
import { tellingWrite, undici } from './undiciLoad';
import type { z } from 'zod';
import { abortError, type Clock } from '../clock';
import type { Timing } from '../timing';
import { decodeJson, nextCursor, type Pagination } from './wire';
import {
  API_KEY_VARIABLE,
  ApiError,
  CREATE_MESSAGES,
  type CreateMessages,
  isRunpod404,
  Redactor,
  RunpodConfigError,
} from './apiErrors';
import { nothingThere, type CallLimits } from './callLimits';
import { AccountQuota, answerRetryAfterMs, backoffMs, retryable } from './retryPolicy';
import {
  callError,
  describeTransportError,
  errorCode,
  readBody,
  seenByMs,
  TransportFailure,
  MAX_BODY_BYTES,
  type Answer,
  type Outcome,
} from './answers';
import {
  validateBaseUrl,
  userAgentFor,
  CLIENT_VERSION,
  type RunpodClientOptions,
  type RunpodLog,
} from './clientOptions';

/** Most pages a list is followed for. */
export const MAX_PAGES = 100;

export interface CallSpec {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  query?: Record<string, string>;
  body?: unknown;
  /**
   * GET and DELETE: retried on transport errors, 408, 429, 5xx. Others: on 429 only, except the
   * create (never retried: its caller reconciles first).
   */
  idempotent: boolean;
  /** A create (a pod's, a cluster's): failures ambiguous, messages fixed (default: a pod's). */
  create?: boolean;
  createMessages?: CreateMessages;
  signal?: AbortSignal | undefined;
  /** Redacts the key, plus any secret value the call carries. */
  redactor: Redactor;
  /**
   * Told (this clock, ms) once, as the request is about to be written to its connection: the API
   * cannot have seen it before. Never when it was not sent (no connection, aborted before).
   */
  onSending?: (atMs: number) => void;
}

/** Sends the client's calls (see the module's rules). Holds the key; never enumerable. */
export class ApiTransport {
  readonly baseUrl: string;
  readonly #apiKey: string;
  readonly #closing: AbortController;
  readonly #redactor: Redactor;
  /** Kept for a view with limits (see {@link withLimits}); never enumerable (it holds the key). */
  readonly #options: RunpodClientOptions;
  /** A view's limits (a read-only command's calls); null for the client's own calls. */
  private readonly limits: CallLimits | null;
  private readonly clock: Clock;
  private readonly timing: Timing;
  private readonly userAgent: string;
  private readonly dispatcher: Dispatcher;
  private readonly ownAgent: Agent | null;
  readonly log: RunpodLog;
  private readonly random: () => number;
  /** The account's quota, shared with the views: they call the same account. */
  private readonly quota: AccountQuota;

  /** `view`: a view of that transport with limits (see {@link withLimits}). */
  constructor(options: RunpodClientOptions, view?: { of: ApiTransport; limits: CallLimits }) {
    this.#options = options;
    this.limits = view?.limits ?? null;
    this.quota = view?.of.quota ?? new AccountQuota();
    this.#closing = view === undefined ? new AbortController() : view.of.#closing;
    this.baseUrl = validateBaseUrl(options.baseUrl);
    if (!/^[\x21-\x7e]+$/.test(options.apiKey)) {
      throw new RunpodConfigError(
        API_KEY_VARIABLE,
        `the Runpod API key is empty or holds characters a key cannot have: set ${API_KEY_VARIABLE}, or run the "Set Runpod API Key" command`,
      );
    }
    this.#apiKey = options.apiKey;
    this.#redactor = new Redactor([options.apiKey]);
    this.clock = options.clock;
    this.timing = options.timing;
    const userAgent = options.userAgent ?? userAgentFor(options.version ?? CLIENT_VERSION);
    if (!/^[\x20-\x7e]+$/.test(userAgent))
      throw new TypeError('User-Agent must be printable ASCII');
    this.userAgent = userAgent;
    if (view) {
      // The view's calls go through the same connections; their life stays the transport's.
      this.dispatcher = view.of.dispatcher;
      this.ownAgent = null;
    } else if (options.dispatcher) {
      this.dispatcher = options.dispatcher;
      this.ownAgent = null;
    } else {
      this.ownAgent = new (undici().Agent)({
        connect: { timeout: options.timing.connectTimeoutMs },
      });
      this.dispatcher = this.ownAgent;
    }
    this.log = options.log ?? (() => undefined);
    this.random = options.random ?? Math.random;
  }

  /** A view's limits (see {@link withLimits}), or null. */
  get callLimits(): CallLimits | null {
    return this.limits;
  }

  /** Redacts the API key (and what a call adds) from a text. */
  get redactor(): Redactor {
    return this.#redactor;
  }

  /**
   * The same transport (connections, quota, key) whose calls keep `limits`: a read-only
   * command's (see ./callLimits.ts). Disposing the view leaves the transport open.
   */
  withLimits(limits: CallLimits): ApiTransport {
    return new ApiTransport(this.#options, { of: this, limits });
  }

  /** Closes the own connections at once (an injected dispatcher is left alone). */
  dispose(): void {
    if (this.limits !== null) return;
    this.#closing.abort();
    void this.ownAgent?.destroy().catch(() => undefined);
  }

  /** Closes the own connections once in-flight calls are done. */
  async close(): Promise<void> {
    if (this.limits !== null) return;
    this.#closing.abort();
    await this.ownAgent?.close();
  }

  /** Aborted once disposed or closed. */
  get closing(): AbortSignal {
    return this.#closing.signal;
  }

  /**
   * Opens a GET once, without retries and without reading the body (a stream's reader does):
   * after any wait for a spent quota, with the key and `accept`.
   */
  async openStream(
    path: string,
    query: Record<string, string>,
    headers: Record<string, string>,
    signal: AbortSignal,
  ): Promise<Dispatcher.ResponseData> {
    await this.waitForQuota({ method: 'GET', path, signal });
    try {
      return await undici().request(this.url(path, query), {
        method: 'GET',
        headers: {
          ...headers,
          authorization: `Bearer ${this.#apiKey}`,
          'user-agent': this.userAgent,
        },
        dispatcher: this.dispatcher,
        signal,
      });
    } catch (error) {
      // Under limits, nothing there is not worth reconnecting to: said once, naming the API.
      const code = errorCode(error);
      if (this.limits === null || signal.aborted || !nothingThere(code)) throw error;
      throw new ApiError(
        'transport',
        `could not reach the Runpod API at ${this.baseUrl}: ${this.#redactor.redact(describeTransportError(error))}`,
      );
    }
  }

  async getOk(
    path: string,
    query: Record<string, string>,
    signal: AbortSignal | undefined,
  ): Promise<Answer> {
    const outcome = await this.call({
      method: 'GET',
      path,
      query,
      idempotent: true,
      signal,
      redactor: this.#redactor,
    });
    return this.expectOk(outcome, this.#redactor);
  }

  /**
   * A 2xx answer, or null for Runpod's own 404 (`onGone` told when the API saw that, see
   * {@link Answer.seenByMs}); anything else throws.
   */
  async okOr404(
    method: 'GET' | 'DELETE',
    path: string,
    signal: AbortSignal | undefined,
    onGone?: (seenByMs: number) => void,
  ): Promise<Answer | null> {
    const outcome = await this.call({
      method,
      path,
      idempotent: true,
      signal,
      redactor: this.#redactor,
    });
    if (!(outcome instanceof TransportFailure) && outcome.status === 404) {
      if (isRunpod404(outcome.body)) {
        onGone?.(outcome.seenByMs);
        return null;
      }
    }
    return this.expectOk(outcome, this.#redactor);
  }

  /** The answer when it is a 2xx; otherwise the classified error of a non-create call. */
  expectOk(outcome: Outcome, redactor: Redactor): Answer {
    if (outcome instanceof TransportFailure) {
      throw new ApiError(
        'transport',
        `could not reach the Runpod API at ${this.baseUrl}: ${outcome.reason}`,
      );
    }
    if (outcome.status >= 200 && outcome.status < 300) return outcome;
    throw callError(outcome, redactor, this.answerRetryAfterMs(outcome));
  }

  decode<T>(answer: Answer, schema: z.ZodType<T>, what: string): T {
    const decoded = answer.unreadable
      ? { ok: false as const, reason: answer.unreadable }
      : decodeJson(answer.body, schema);
    if (!decoded.ok) {
      throw new ApiError(
        'decode',
        `Runpod's answer to ${what} could not be read: ${decoded.reason}`,
      );
    }
    return decoded.value;
  }

  /** Follows a list's pages: at most {@link MAX_PAGES}, never the same cursor twice. */
  async listPaged<P extends { pagination?: Pagination }, T>(
    path: string,
    query: Record<string, string>,
    schema: z.ZodType<P>,
    items: (page: P) => T[],
    signal: AbortSignal | undefined,
  ): Promise<T[]> {
    const all: T[] = [];
    const seen = new Set<string>();
    let cursor: string | null = null;
    for (let page = 0; page < MAX_PAGES; page++) {
      // The stored document defines no paging parameters; a cursor is only
      // sent back when Runpod handed one out.
      const pageQuery: Record<string, string> = cursor === null ? query : { ...query, cursor };
      const answer = await this.getOk(path, pageQuery, signal);
      const decoded = this.decode(answer, schema, `GET ${path}`);
      all.push(...items(decoded));
      const next = nextCursor(decoded.pagination, path);
      if (next === null) return all;
      if (seen.has(next)) {
        throw new ApiError(
          'server',
          `Runpod's list ${path} repeated a page cursor: listing stopped`,
        );
      }
      seen.add(next);
      cursor = next;
    }
    throw new ApiError(
      'server',
      `Runpod's list ${path} has more than ${MAX_PAGES} pages: listing stopped`,
    );
  }

  /**
   * Sends the call, retrying as the rules allow, and returns the last outcome
   * (an answer of any status, or a transport failure). Rejects only with an
   * AbortError (or an `ambiguous` ApiError when a create is aborted in flight).
   */
  async call(spec: CallSpec): Promise<Outcome> {
    for (let attempt = 0; ; attempt++) {
      await this.waitForQuota(spec);
      const outcome = await this.send(spec);
      this.quota.note(outcome, this.clock.nowMs(), this.timing.retryAfterCapMs);
      if (attempt >= this.timing.retries || spec.create === true) return outcome;
      if (!retryable(outcome, spec.idempotent)) return outcome;
      const waitMs = backoffMs(attempt, outcome, this.clock.nowMs(), this.timing, this.random);
      const what =
        outcome instanceof TransportFailure ? outcome.reason : `answered ${outcome.status}`;
      const told =
        this.limits !== null && !(outcome instanceof TransportFailure) && outcome.status === 429;
      if (this.limits !== null) {
        if (outcome instanceof TransportFailure) {
          if (nothingThere(outcome.code)) return outcome;
        } else if (
          outcome.status === 429 &&
          !this.limits.takeWait(`${spec.method} ${spec.path}`, what, waitMs, this.clock.nowMs())
        ) {
          return outcome;
        }
      }
      this.log(
        // A wait the limits told about is not told twice.
        told ? 'debug' : 'warn',
        spec.redactor.redact(
          `Runpod ${spec.method} ${spec.path} ${what}: retry ${attempt + 1}/${this.timing.retries} in ${(waitMs / 1000).toFixed(1)} s`,
        ),
      );
      await this.clock.sleep(waitMs, spec.signal);
    }
  }

  /**
   * Before any call (every call goes through {@link call}, the create too): while a window of the
   * account's quota is spent, as the last answer's RateLimit headers said, wait for its reset
   * rather than draw a 429. Nothing has been sent yet, so an abort here is a plain AbortError.
   */
  async waitForQuota(spec: Pick<CallSpec, 'method' | 'path' | 'signal'>): Promise<void> {
    const waitMs = this.quota.waitMs(this.clock.nowMs());
    if (waitMs <= 0) return;
    const what = `${spec.method} ${spec.path}`;
    if (this.limits !== null) {
      if (!this.limits.takeWait(what, 'the quota is spent', waitMs, this.clock.nowMs())) {
        throw new ApiError(
          'rate_limited',
          `Runpod's rate limit is spent for ${Math.ceil(waitMs / 1000)} s more: ${what} was not sent`,
          { retryAfterMs: waitMs },
        );
      }
      await this.clock.sleep(waitMs, spec.signal);
      return;
    }
    this.log(
      'info',
      `Runpod's rate limit is spent: ${spec.method} ${spec.path} waits ${(waitMs / 1000).toFixed(1)} s for the reset`,
    );
    await this.clock.sleep(waitMs, spec.signal);
  }

  /** One attempt, bounded by the request (or create) timeout on the injected clock. */
  private async send(spec: CallSpec): Promise<Outcome> {
    const { signal } = spec;
    if (signal?.aborted) throw abortError(signal);
    const timeoutMs = spec.create ? this.timing.createTimeoutMs : this.timing.requestTimeoutMs;
    const attempt = new AbortController();
    const timer = new AbortController();
    let timedOut = false;
    const onAbort = (): void => attempt.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    this.clock.sleep(timeoutMs, timer.signal).then(
      () => {
        timedOut = true;
        attempt.abort(new Error('timeout'));
      },
      () => undefined,
    );
    const url = this.url(spec.path, spec.query);
    const startedMs = this.clock.nowMs();
    try {
      const headers: Record<string, string> = {
        authorization: `Bearer ${this.#apiKey}`,
        'user-agent': this.userAgent,
        accept: 'application/json, application/problem+json',
      };
      let body: string | undefined;
      if (spec.body !== undefined) {
        headers['content-type'] = 'application/json';
        body = JSON.stringify(spec.body);
      }
      const response = await undici().request(url, {
        method: spec.method,
        headers,
        body,
        dispatcher:
          spec.onSending === undefined
            ? this.dispatcher
            : tellingWrite(this.dispatcher, () => spec.onSending?.(this.clock.nowMs())),
        signal: attempt.signal,
      });
      const read = await readBody(response.body);
      const answer: Answer = {
        status: response.statusCode,
        headers: response.headers,
        body: read.text,
        seenByMs: seenByMs(response.headers.date, startedMs, this.clock.nowMs()),
        ...(read.tooLarge
          ? { unreadable: `the answer is larger than ${MAX_BODY_BYTES} bytes` }
          : {}),
      };
      this.log(
        'debug',
        `Runpod ${spec.method} ${spec.path} → ${answer.status} (${this.clock.nowMs() - startedMs} ms)`,
      );
      return answer;
    } catch (error) {
      if (signal?.aborted) {
        // A create cut short in flight may still have created the pod.
        const aborted = (spec.createMessages ?? CREATE_MESSAGES).aborted;
        if (spec.create) throw new ApiError('ambiguous', aborted, { aborted: true });
        throw abortError(signal);
      }
      if (timedOut) return new TransportFailure(`no answer within ${timeoutMs} ms`);
      return new TransportFailure(
        spec.redactor.redact(describeTransportError(error)),
        errorCode(error),
      );
    } finally {
      timer.abort();
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** The wait an answer asks for: `Retry-After`, else (on a 429) its RateLimit headers; capped. */
  answerRetryAfterMs(answer: Answer): number | undefined {
    return answerRetryAfterMs(answer, this.clock.nowMs(), this.timing.retryAfterCapMs);
  }

  private url(path: string, query: Record<string, string> | undefined): string {
    const search = query && Object.keys(query).length > 0 ? `?${new URLSearchParams(query)}` : '';
    return `${this.baseUrl}${path}${search}`;
  }
}
