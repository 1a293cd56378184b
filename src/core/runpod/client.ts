/**
 * The Runpod REST API v2 client (undici). One rule above all: a pod create is
 * never sent twice blindly — a create without a clear answer is `ambiguous`
 * and the caller reconciles by run marker. Only idempotent calls (GET, DELETE,
 * and the account-secret writes, which a 409 makes safe to re-send) are retried
 * on transport errors, 408, 429 and 5xx; other POSTs and PATCHes only on 429,
 * which Runpod answers before doing anything. Redirects are never
 * followed (the bearer key must not travel to another host), and the API key
 * never appears in an error, a log line or an enumerable field.
 */
import type { Agent, Dispatcher } from 'undici';

/**
 * undici, loaded on the first request: activating the extension (which makes no API call) does
 * not pay for evaluating it (~60 ms of the extension's load time). A plain require, so esbuild
 * still bundles it.
 */
function undici(): typeof import('undici') {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('undici') as typeof import('undici');
}
import type { z } from 'zod';
import { abortError, type Clock } from '../clock';
import type { Disposable } from '../disposable';
import type { Timing } from '../timing';
import {
  CreatePodBodySchema,
  decodeJson,
  isPodId,
  isSecretName,
  ListDataCentersSchema,
  ListGpuTypesSchema,
  ListNetworkVolumesSchema,
  ListPodBillingSchema,
  ListPodsSchema,
  ListSecretsSchema,
  ListTemplatesSchema,
  MIN_CUDA_VERSION,
  NetworkVolumeSchema,
  POD_ACTIONS,
  POD_CLOUD,
  PodSchema,
  podTemplates,
  SecretSchema,
  type BillingBucketSize,
  type CreatePodBody,
  type DataCenter,
  type GpuType,
  type NetworkVolume,
  type Pagination,
  type Pod,
  type PodAction,
  type PodBilling,
  type Secret,
  type Template,
} from './api';
import {
  API_KEY_VARIABLE,
  ApiError,
  BASE_URL_VARIABLE,
  CREATE_MESSAGES,
  isPlacement400,
  isRunpod404,
  oneLine,
  Redactor,
  RunpodConfigError,
  runpodText,
  UNAUTHORIZED_HINT,
} from './errors';

/** This extension's version, sent in `User-Agent` unless the caller passes its own. */
export const CLIENT_VERSION = '0.1.0';
/** Runpod's production API. */
export const DEFAULT_BASE_URL = 'https://api.runpod.io/v2';
/** Most pages a list is followed for. */
export const MAX_PAGES = 100;
/** Largest answer body read; a larger one is unreadable (a pod list of 1000 pods is far below). */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;

/** `User-Agent` of this product: Cloudflare refuses generic agents (403 "error code: 1010"). */
export function userAgentFor(version: string): string {
  return `overbrainer-vscode/${version}`;
}

export type RunpodLogLevel = 'debug' | 'info' | 'warn';
/** Where the client tells what it does (never a key, a body or an env). */
export type RunpodLog = (level: RunpodLogLevel, message: string) => void;

export interface RunpodClientOptions {
  /** `https://…/v2`, or `http://` on a loopback host only (the emulator). */
  baseUrl: string;
  apiKey: string;
  clock: Clock;
  /** connect/request/create timeouts and the retry rules. */
  timing: Timing;
  /** The version in `User-Agent: overbrainer-vscode/<version>` (default {@link CLIENT_VERSION}). */
  version?: string;
  /** A whole `User-Agent` value, replacing the one built from `version`. */
  userAgent?: string;
  /** For tests; the client then leaves the dispatcher's life to the caller. */
  dispatcher?: Dispatcher;
  log?: RunpodLog;
  /** Jitter source in [0, 1) (default Math.random). */
  random?: () => number;
}

export interface CallOptions {
  /** Aborts the call and any retry wait: rejects with an AbortError. */
  signal?: AbortSignal;
}

export interface ListGpuTypesOptions extends CallOptions {
  /** GPUs per pod for stock and price (default 1). */
  count?: number;
  /** Default SECURE. */
  cloud?: 'SECURE' | 'COMMUNITY';
  /** CUDA floor for stock, `major` or `major.minor` (default {@link MIN_CUDA_VERSION}). */
  minCudaVersion?: string;
  /** Ask for stock (`include=AVAILABILITY&product=POD`); count/cloud/CUDA only apply with it. */
  includeAvailability?: boolean;
}

export interface ListDataCentersOptions extends CallOptions {
  /** Ask for GPU stock per data center (default true). */
  includeGpuAvailability?: boolean;
}

/**
 * Checks the API base URL: https, or http only on a loopback host (127.0.0.0/8,
 * ::1, localhost) — the emulator's test hook. Returns it without a trailing
 * slash.
 *
 * @throws RunpodConfigError naming OVERBRAINER_RUNPOD__BASE_URL.
 */
export function validateBaseUrl(raw: string): string {
  const bad = (why: string): RunpodConfigError =>
    new RunpodConfigError(
      BASE_URL_VARIABLE,
      `${BASE_URL_VARIABLE} ${why}: use https://…, or http:// only on 127.0.0.1, ::1 or localhost (default ${DEFAULT_BASE_URL})`,
    );
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw bad('is not a URL');
  }
  if (url.username || url.password) throw bad('must not hold credentials');
  if (url.search || url.hash) throw bad('must not have a query or fragment');
  if (!API_V2_ROOT.test(url.pathname)) {
    throw bad(
      `is not an API v2 root (its path is ${url.pathname}; it must end in /v2, as ${DEFAULT_BASE_URL} does)`,
    );
  }
  if (url.protocol === 'http:') {
    if (!isLoopbackHost(url.hostname)) throw bad('uses http on a host that is not loopback');
  } else if (url.protocol !== 'https:') {
    throw bad(`uses ${url.protocol.replace(/:$/, '')}, not https`);
  }
  return url.href.replace(/\/+$/, '');
}

/**
 * The path of an API v2 root: it ends in `/v2` (a proxy may put a prefix before it). Any other
 * base would answer 404 to every route, and a 404 would then read as "pod gone".
 */
export const API_V2_ROOT = /^(\/[^/]+)*\/v2\/*$/;

function isLoopbackHost(hostname: string): boolean {
  if (hostname === 'localhost' || hostname === '[::1]') return true;
  // WHATWG URL parsing already normalised IPv4 forms such as 127.1.
  const octets = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(hostname);
  return octets !== null && octets.slice(1).every((o) => Number(o) <= 255);
}

/** An answer of the API, whatever its status. */
interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** Set when the body could not be read whole (too large); `body` is then empty. */
  unreadable?: string;
}

/** No answer: the connection failed, was reset, or the attempt timed out. */
class TransportFailure {
  constructor(readonly reason: string) {}
}

type Outcome = Answer | TransportFailure;

interface CallSpec {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  query?: Record<string, string>;
  body?: unknown;
  /**
   * GET and DELETE: retried on transport errors, 408, 429, 5xx. Others: on 429 only, except the
   * create (never retried: its caller reconciles first).
   */
  idempotent: boolean;
  /** The pod create: its failures are ambiguous and its messages fixed. */
  create?: boolean;
  signal?: AbortSignal | undefined;
  /** Redacts the key, plus any secret value the call carries. */
  redactor: Redactor;
}

/**
 * The Runpod API v2 client. Every method accepts an AbortSignal and rejects
 * with an {@link ApiError} (or an AbortError when aborted). Dispose it to
 * close its connections.
 */
export class RunpodClient implements Disposable {
  readonly baseUrl: string;
  // A private field: never enumerable, never printed with the client.
  readonly #apiKey: string;
  readonly #closing = new AbortController();
  readonly #redactor: Redactor;
  private readonly clock: Clock;
  private readonly timing: Timing;
  private readonly userAgent: string;
  private readonly dispatcher: Dispatcher;
  private readonly ownAgent: Agent | null;
  private readonly log: RunpodLog;
  private readonly random: () => number;
  /** When the spent window of the account's quota resets (clock ms); 0 while quota is left. */
  private quotaResetAtMs = 0;

  constructor(options: RunpodClientOptions) {
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
    if (options.dispatcher) {
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

  /** Closes the client's own connections at once (an injected dispatcher is left alone). */
  dispose(): void {
    this.#closing.abort();
    void this.ownAgent?.destroy().catch(() => undefined);
  }

  /** Closes the client's own connections once in-flight calls are done. */
  async close(): Promise<void> {
    this.#closing.abort();
    await this.ownAgent?.close();
  }

  /**
   * Aborted once the client is disposed or closed: long-lived work on it (a pod's log capture)
   * ends then instead of reconnecting to an API nobody will call again.
   */
  get closing(): AbortSignal {
    return this.#closing.signal;
  }

  // -------------------------------------------------------------------------
  // Pods
  // -------------------------------------------------------------------------

  /**
   * Creates a pod (`POST /pods` → 201 Pod). Sent once, never retried here: a 429 is the
   * `rate_limited` ApiError with the wait Runpod asked for, and the caller reconciles by run
   * marker and attempt name after that wait before it creates again (a gateway may answer 429
   * for a create it carried out). Anything that leaves it open whether the pod exists — a transport error,
   * a timeout, a 408, a 5xx, an unreadable 2xx, an abort in flight — is an
   * `ambiguous` ApiError: look for the attempt's name and run marker in the
   * pod list before anything else. Other failures carry fixed messages chosen
   * from the status (`capacity`, `forbidden`, `no_credits`, `rejected`, …).
   */
  async createPod(body: CreatePodBody, options: CallOptions = {}): Promise<Pod> {
    const checked = CreatePodBodySchema.safeParse(body);
    if (!checked.success) {
      const path = checked.error.issues[0]?.path.map(String).join('.') ?? '';
      throw new ApiError('rejected', `invalid pod create body (${path || 'root'}): please report`);
    }
    const outcome = await this.call({
      method: 'POST',
      path: '/pods',
      body: checked.data,
      idempotent: false,
      create: true,
      signal: options.signal,
      redactor: this.#redactor,
    });
    if (outcome instanceof TransportFailure) {
      throw new ApiError('ambiguous', `${CREATE_MESSAGES.transport} (${outcome.reason})`);
    }
    if (outcome.status >= 200 && outcome.status < 300) {
      const pod = outcome.unreadable ? null : decodeJson(outcome.body, PodSchema);
      if (!pod?.ok) throw new ApiError('ambiguous', CREATE_MESSAGES.unreadable);
      return pod.value;
    }
    throw createError(outcome, this.answerRetryAfterMs(outcome));
  }

  /**
   * The pod `id`, or null when Runpod answers its own 404 (a JSON body with
   * `status: 404`, a `title` or a `detail`). Any other 404 — a proxy page, a
   * wrong base URL — is a `not_found` error: it proves nothing about the pod.
   */
  async getPod(id: string, options: CallOptions = {}): Promise<Pod | null> {
    checkPodId(id);
    const answer = await this.okOr404('GET', `/pods/${encodeURIComponent(id)}`, options.signal);
    if (answer === null) return null;
    return this.decode(answer, PodSchema, `GET /pods/${id}`);
  }

  /** `text` with the API key (and any part of it) masked. */
  redact(text: string): string {
    return this.#redactor.redact(text);
  }

  /**
   * Opens `GET /pods/{id}/logs` (Server-Sent Events) once, without retries: the caller
   * (./podLogs.ts) reads the stream and reconnects. Answers the status, the `Retry-After` asked
   * (ms) and, for a 200, the body's chunks; otherwise the body's text, redacted.
   */
  async openPodLogs(
    id: string,
    query: Record<string, string>,
    lastEventId: string | undefined,
    signal: AbortSignal,
  ): Promise<{
    status: number;
    retryAfterMs: number | undefined;
    body: AsyncIterable<Buffer> | null;
    text: string;
  }> {
    checkPodId(id);
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.#apiKey}`,
      'user-agent': this.userAgent,
      accept: 'text/event-stream, application/problem+json',
    };
    if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
    // A stream is a call like any other: never opened into a spent quota.
    await this.waitForQuota({ method: 'GET', path: `/pods/${id}/logs`, signal });
    const response = await undici().request(
      this.url(`/pods/${encodeURIComponent(id)}/logs`, query),
      {
        method: 'GET',
        headers,
        dispatcher: this.dispatcher,
        signal,
      },
    );
    const raw = response.headers['retry-after'];
    const seconds = Number(Array.isArray(raw) ? raw[0] : raw);
    const retryAfterMs = Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
    if (response.statusCode === 200)
      return { status: 200, retryAfterMs, body: response.body, text: '' };
    const read = await readBody(response.body);
    return {
      status: response.statusCode,
      retryAfterMs,
      body: null,
      text: this.#redactor.redact(read.text).slice(0, 500),
    };
  }

  /**
   * The account's pods, every page followed (at most {@link MAX_PAGES}; a
   * repeated cursor is an error). With `runMarker`, only the pods whose env
   * carries it (the API has no such filter: it is applied here).
   */
  async listPods(options: CallOptions & { runMarker?: string } = {}): Promise<Pod[]> {
    const pods = await this.listPaged(
      '/pods',
      {},
      ListPodsSchema,
      (page) => page.pods,
      options.signal,
    );
    if (options.runMarker === undefined) return pods;
    return pods.filter((pod) => pod.runMarker === options.runMarker);
  }

  /**
   * Deletes (terminates) the pod `id`: true when Runpod accepted it (2xx),
   * false when Runpod answers its own 404 (already gone). Retried like every
   * DELETE; a non-Runpod 404 is an error.
   */
  async deletePod(id: string, options: CallOptions = {}): Promise<boolean> {
    checkPodId(id);
    const answer = await this.okOr404('DELETE', `/pods/${encodeURIComponent(id)}`, options.signal);
    return answer !== null;
  }

  /**
   * `POST /pods/{id}/action`: the pod after `start`/`stop`/`restart` (200), or
   * null when Runpod answers without a body (204, e.g. `terminate`). Only a
   * 429 is retried.
   */
  async podAction(id: string, action: PodAction, options: CallOptions = {}): Promise<Pod | null> {
    checkPodId(id);
    if (!(POD_ACTIONS as readonly string[]).includes(action)) {
      throw new ApiError('rejected', `unknown pod action: please report`);
    }
    const outcome = await this.call({
      method: 'POST',
      path: `/pods/${encodeURIComponent(id)}/action`,
      body: { action },
      idempotent: false,
      signal: options.signal,
      redactor: this.#redactor,
    });
    const answer = this.expectOk(outcome, this.#redactor);
    if (answer.status === 204 || answer.body.trim() === '') return null;
    return this.decode(answer, PodSchema, `POST /pods/${id}/action`);
  }

  // -------------------------------------------------------------------------
  // Catalog, volumes, templates
  // -------------------------------------------------------------------------

  /**
   * GPU types with list prices; with `includeAvailability`, stock for
   * `count` GPUs on `cloud` with CUDA ≥ `minCudaVersion`, overall and per data
   * center (`GET /catalog/gpus?include=AVAILABILITY&product=POD&…`).
   */
  async listGpuTypes(options: ListGpuTypesOptions = {}): Promise<GpuType[]> {
    const query: Record<string, string> = {};
    // count, cloud and minCudaVersion are valid only with include=AVAILABILITY
    // (the document: 400 otherwise), and product is required with it.
    if (options.includeAvailability ?? true) {
      query.include = 'AVAILABILITY';
      query.product = 'POD';
      query.cloud = options.cloud ?? POD_CLOUD;
      query.count = String(options.count ?? 1);
      query.minCudaVersion = options.minCudaVersion ?? MIN_CUDA_VERSION;
    }
    const answer = await this.getOk('/catalog/gpus', query, options.signal);
    return this.decode(answer, ListGpuTypesSchema, 'GET /catalog/gpus').gpus;
  }

  /** Data centers, with GPU stock per data center unless `includeGpuAvailability` is false. */
  async listDataCenters(options: ListDataCentersOptions = {}): Promise<DataCenter[]> {
    const query: Record<string, string> =
      (options.includeGpuAvailability ?? true) ? { include: 'GPU_AVAILABILITY' } : {};
    const answer = await this.getOk('/catalog/datacenters', query, options.signal);
    return this.decode(answer, ListDataCentersSchema, 'GET /catalog/datacenters').dataCenters;
  }

  async listNetworkVolumes(options: CallOptions = {}): Promise<NetworkVolume[]> {
    return this.listPaged(
      '/network-volumes',
      {},
      ListNetworkVolumesSchema,
      (page) => page.networkVolumes,
      options.signal,
    );
  }

  /**
   * What Runpod billed pod `podId` (`GET /billing/pods?podId=…`), bucketed by `bucketSize`
   * (default `day`) over [startTime, endTime) (Runpod snaps the window to bucket boundaries;
   * default the last 30 days). Read-only, retried like any GET.
   */
  async podBilling(
    podId: string,
    window: { startTime?: Date; endTime?: Date; bucketSize?: BillingBucketSize } = {},
    options: CallOptions = {},
  ): Promise<PodBilling> {
    const query: Record<string, string> = { podId, bucketSize: window.bucketSize ?? 'day' };
    if (window.startTime) query.startTime = window.startTime.toISOString();
    if (window.endTime) query.endTime = window.endTime.toISOString();
    const answer = await this.getOk('/billing/pods', query, options.signal);
    return this.decode(answer, ListPodBillingSchema, 'GET /billing/pods');
  }

  /** The network volume `id`, or null when Runpod answers its own 404. */
  async getNetworkVolume(id: string, options: CallOptions = {}): Promise<NetworkVolume | null> {
    const path = `/network-volumes/${encodeURIComponent(id)}`;
    const answer = await this.okOr404('GET', path, options.signal);
    if (answer === null) return null;
    return this.decode(answer, NetworkVolumeSchema, `GET ${path}`);
  }

  /**
   * Changes the network volume `id` (`PATCH /network-volumes/{id}`, Runpod's
   * `UpdateNetworkVolumeRequest`: only the fields given; `size` in GB, 10 to 4096, may only grow,
   * a smaller size is refused with 400). Returns the volume as Runpod answers it. Never retried
   * (a lost answer may have changed it: look it up with {@link getNetworkVolume}).
   */
  async updateNetworkVolume(
    id: string,
    update: { size?: number; name?: string },
    options: CallOptions = {},
  ): Promise<NetworkVolume> {
    const body: { size?: number; name?: string } = {};
    if (update.size !== undefined) {
      if (!Number.isInteger(update.size) || update.size < 10 || update.size > 4096) {
        throw new ApiError('rejected', `a network volume is 10 to 4096 GB, not ${update.size}`);
      }
      body.size = update.size;
    }
    if (update.name !== undefined) {
      if (update.name === '') throw new ApiError('rejected', 'a network volume needs a name');
      body.name = update.name;
    }
    if (Object.keys(body).length === 0) {
      throw new ApiError('rejected', 'a network volume update needs a size or a name');
    }
    const path = `/network-volumes/${encodeURIComponent(id)}`;
    const outcome = await this.call({
      method: 'PATCH',
      path,
      body,
      idempotent: false,
      signal: options.signal,
      redactor: this.#redactor,
    });
    return this.decode(
      this.expectOk(outcome, this.#redactor),
      NetworkVolumeSchema,
      `PATCH ${path}`,
    );
  }

  /** Grows the network volume `id` to `sizeGb` (`PATCH {size}`; Runpod refuses to shrink). */
  resizeNetworkVolume(
    id: string,
    sizeGb: number,
    options: CallOptions = {},
  ): Promise<NetworkVolume> {
    return this.updateNetworkVolume(id, { size: sizeGb }, options);
  }

  /** The account's pod templates: serverless ones dropped, each ID once. */
  async listTemplates(options: CallOptions = {}): Promise<Template[]> {
    const wire = await this.listPaged(
      '/templates',
      {},
      ListTemplatesSchema,
      (page) => page.templates,
      options.signal,
    );
    return podTemplates(wire);
  }

  // -------------------------------------------------------------------------
  // Account secrets (an extension of the live API: see api.ts)
  // -------------------------------------------------------------------------

  /** The account's secrets (names only: values are write-only). */
  async listSecrets(options: CallOptions = {}): Promise<Secret[]> {
    return this.listPaged(
      '/account/secrets',
      {},
      ListSecretsSchema,
      (page) => page.secrets,
      options.signal,
    );
  }

  /** The secret named exactly `name`, or null. */
  async findSecret(name: string, options: CallOptions = {}): Promise<Secret | null> {
    const secrets = await this.listPaged(
      '/account/secrets',
      { name },
      ListSecretsSchema,
      (page) => page.secrets,
      options.signal,
    );
    return secrets.find((secret) => secret.name === name) ?? null;
  }

  /**
   * Stores `value` as the account secret `name`. When the name exists (409)
   * the existing secret is found by name and its value replaced. The value
   * never appears in an error or a log line.
   */
  async createSecret(name: string, value: string, options: CallOptions = {}): Promise<Secret> {
    if (!isSecretName(name)) {
      throw new ApiError(
        'rejected',
        `"${oneLine(name, 80)}" cannot name a Runpod secret: please report`,
      );
    }
    if (value.length === 0) throw new ApiError('rejected', 'a Runpod secret cannot be empty');
    const redactor = this.#redactor.with([value]);
    const outcome = await this.call({
      method: 'POST',
      path: '/account/secrets',
      body: { name, value },
      // Safe to re-send after a 5xx or a dropped answer: a secret created meanwhile answers 409,
      // and the same value is then written over it.
      idempotent: true,
      signal: options.signal,
      redactor,
    });
    if (!(outcome instanceof TransportFailure) && outcome.status === 409) {
      const existing = await this.findSecret(name, options);
      if (!existing) {
        throw new ApiError(
          'rejected',
          `Runpod answered 409 for the secret ${name} but does not list it: please report`,
          { status: 409 },
        );
      }
      this.log('info', `secret ${name} exists: replacing its value`);
      return this.updateSecret(existing.id, value, options);
    }
    return this.decode(this.expectOk(outcome, redactor), SecretSchema, 'POST /account/secrets');
  }

  /** Replaces the value of the secret `id`. */
  async updateSecret(id: string, value: string, options: CallOptions = {}): Promise<Secret> {
    if (value.length === 0) throw new ApiError('rejected', 'a Runpod secret cannot be empty');
    const redactor = this.#redactor.with([value]);
    const path = `/account/secrets/${encodeURIComponent(id)}`;
    const outcome = await this.call({
      method: 'PATCH',
      path,
      body: { value },
      // The whole value is replaced: sending it twice leaves the same secret.
      idempotent: true,
      signal: options.signal,
      redactor,
    });
    return this.decode(this.expectOk(outcome, redactor), SecretSchema, `PATCH ${path}`);
  }

  /** Deletes the secret `id`: true when deleted, false when Runpod answers its own 404. */
  async deleteSecret(id: string, options: CallOptions = {}): Promise<boolean> {
    const path = `/account/secrets/${encodeURIComponent(id)}`;
    return (await this.okOr404('DELETE', path, options.signal)) !== null;
  }

  // -------------------------------------------------------------------------
  // Plumbing
  // -------------------------------------------------------------------------

  private async getOk(
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

  /** A 2xx answer, or null for Runpod's own 404; anything else throws. */
  private async okOr404(
    method: 'GET' | 'DELETE',
    path: string,
    signal: AbortSignal | undefined,
  ): Promise<Answer | null> {
    const outcome = await this.call({
      method,
      path,
      idempotent: true,
      signal,
      redactor: this.#redactor,
    });
    if (!(outcome instanceof TransportFailure) && outcome.status === 404) {
      if (isRunpod404(outcome.body)) return null;
    }
    return this.expectOk(outcome, this.#redactor);
  }

  /** The answer when it is a 2xx; otherwise the classified error of a non-create call. */
  private expectOk(outcome: Outcome, redactor: Redactor): Answer {
    if (outcome instanceof TransportFailure) {
      throw new ApiError(
        'transport',
        `could not reach the Runpod API at ${this.baseUrl}: ${outcome.reason}`,
      );
    }
    if (outcome.status >= 200 && outcome.status < 300) return outcome;
    throw this.callError(outcome, redactor);
  }

  private decode<T>(answer: Answer, schema: z.ZodType<T>, what: string): T {
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
  private async listPaged<P extends { pagination?: Pagination }, T>(
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
  private async call(spec: CallSpec): Promise<Outcome> {
    for (let attempt = 0; ; attempt++) {
      await this.waitForQuota(spec);
      const outcome = await this.send(spec);
      this.noteQuota(outcome);
      if (attempt >= this.timing.retries || spec.create === true) return outcome;
      if (!retryable(outcome, spec.idempotent)) return outcome;
      const waitMs = this.retryWaitMs(attempt, outcome);
      const what =
        outcome instanceof TransportFailure ? outcome.reason : `answered ${outcome.status}`;
      this.log(
        'warn',
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
  private async waitForQuota(spec: Pick<CallSpec, 'method' | 'path' | 'signal'>): Promise<void> {
    const waitMs = this.quotaResetAtMs - this.clock.nowMs();
    if (waitMs <= 0) return;
    this.log(
      'info',
      `Runpod's rate limit is spent: ${spec.method} ${spec.path} waits ${(waitMs / 1000).toFixed(1)} s for the reset`,
    );
    await this.clock.sleep(waitMs, spec.signal);
  }

  /** Keeps when the quota resets, if an answer (of any status, 2xx too) says a window is spent. */
  private noteQuota(outcome: Outcome): void {
    if (outcome instanceof TransportFailure) return;
    const resetMs = rateLimitResetMs(outcome.headers);
    if (resetMs === undefined) return;
    const atMs = this.clock.nowMs() + Math.min(resetMs, this.timing.retryAfterCapMs);
    this.quotaResetAtMs = Math.max(this.quotaResetAtMs, atMs);
  }

  /** Backoff: Runpod's `Retry-After` wins (capped); else base × 2^attempt up to the max, jittered ×0.5–1. */
  private retryWaitMs(attempt: number, outcome: Outcome): number {
    if (!(outcome instanceof TransportFailure)) {
      const asked = this.answerRetryAfterMs(outcome);
      if (asked !== undefined) return asked;
    }
    const exponential = Math.min(this.timing.retryMaxMs, this.timing.retryBaseMs * 2 ** attempt);
    return Math.round(exponential * (0.5 + 0.5 * this.random()));
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
        dispatcher: this.dispatcher,
        signal: attempt.signal,
      });
      const read = await readBody(response.body);
      const answer: Answer = {
        status: response.statusCode,
        headers: response.headers,
        body: read.text,
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
        if (spec.create)
          throw new ApiError('ambiguous', CREATE_MESSAGES.aborted, { aborted: true });
        throw abortError(signal);
      }
      if (timedOut) return new TransportFailure(`no answer within ${timeoutMs} ms`);
      return new TransportFailure(spec.redactor.redact(describeTransportError(error)));
    } finally {
      timer.abort();
      signal?.removeEventListener('abort', onAbort);
    }
  }

  private url(path: string, query: Record<string, string> | undefined): string {
    const search = query && Object.keys(query).length > 0 ? `?${new URLSearchParams(query)}` : '';
    return `${this.baseUrl}${path}${search}`;
  }

  /** The error of a non-create call's answer: Runpod's text kept, redacted and capped. */
  private callError(answer: Answer, redactor: Redactor): ApiError {
    const { status } = answer;
    const options = { status, retryAfterMs: this.answerRetryAfterMs(answer) };
    const text = runpodText(answer.body, redactor);
    const said = text ? `Runpod answered ${status}: ${text}` : `Runpod answered ${status}`;
    if (status >= 300 && status < 400) {
      return new ApiError(
        'redirect',
        `Runpod answered ${status} (a redirect, never followed): check ${BASE_URL_VARIABLE}`,
        options,
      );
    }
    if (status === 401) return new ApiError('unauthorized', UNAUTHORIZED_HINT, options);
    if (status === 402) return new ApiError('no_credits', said, options);
    if (status === 403) return new ApiError('forbidden', said, options);
    if (status === 404 && !isRunpod404(answer.body)) {
      return new ApiError(
        'not_found',
        `Runpod answered 404 with a page that is not Runpod's (a proxy, or a wrong ${BASE_URL_VARIABLE}?)`,
        options,
      );
    }
    if (status === 408) return new ApiError('transport', said, options);
    if (status === 429) return new ApiError('rate_limited', said, options);
    if (status >= 400 && status < 500) {
      return new ApiError('rejected', `${said} (invalid request, please report)`, options);
    }
    return new ApiError('server', said, options);
  }

  /** The wait an answer asks for: `Retry-After`, else (on a 429) its RateLimit headers; capped. */
  private answerRetryAfterMs(answer: Answer): number | undefined {
    const asked =
      retryAfterMs(answer.headers['retry-after'], this.clock.nowMs()) ??
      (answer.status === 429 ? rateLimitResetMs(answer.headers) : undefined);
    return asked === undefined ? undefined : Math.min(asked, this.timing.retryAfterCapMs);
  }
}

/**
 * The error of a create's answer: a fixed message chosen from the status
 * only, never Runpod's text. 408 and 5xx leave the pod's existence open.
 */
function createError(answer: Answer, retryAfterMs: number | undefined): ApiError {
  const { status } = answer;
  const options = { status, retryAfterMs };
  if (status >= 300 && status < 400)
    return new ApiError('redirect', CREATE_MESSAGES.redirect, options);
  if (status === 400 && isPlacement400(answer.body)) {
    return new ApiError('capacity', CREATE_MESSAGES.capacity, options);
  }
  if (status === 401) return new ApiError('unauthorized', UNAUTHORIZED_HINT, options);
  if (status === 402) return new ApiError('no_credits', CREATE_MESSAGES.noCredits, options);
  if (status === 403) return new ApiError('forbidden', CREATE_MESSAGES.forbidden, options);
  if (status === 408) return new ApiError('ambiguous', CREATE_MESSAGES.timeout408, options);
  if (status === 429) return new ApiError('rate_limited', CREATE_MESSAGES.rateLimited, options);
  if (status >= 400 && status < 500)
    return new ApiError('rejected', CREATE_MESSAGES.rejected, options);
  return new ApiError('ambiguous', CREATE_MESSAGES.server, options);
}

function retryable(outcome: Outcome, idempotent: boolean): boolean {
  if (outcome instanceof TransportFailure) return idempotent;
  const { status } = outcome;
  if (status === 429) return true;
  return idempotent && (status === 408 || status >= 500);
}

/**
 * `Retry-After` in ms: delta-seconds or an HTTP-date (relative to `nowMs`);
 * undefined when absent or unreadable. Not capped here.
 */
export function retryAfterMs(
  header: string | string[] | undefined,
  nowMs: number,
): number | undefined {
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  // HTTP-date (IMF-fixdate and the obsolete forms Date.parse reads); a bare
  // number with a fraction or sign is not a valid Retry-After.
  if (!/[A-Za-z]/.test(value)) return undefined;
  const atMs = Date.parse(value);
  if (Number.isNaN(atMs)) return undefined;
  return Math.max(0, atMs - nowMs);
}

/**
 * The wait until a spent quota resets, from the IETF RateLimit headers in either draft form:
 * `RateLimit: "policy";r=0;t=7` (with `RateLimit-Policy`), `RateLimit: limit=100, remaining=0,
 * reset=4`, or `RateLimit-Remaining: 0` with `RateLimit-Reset: 5` (delta-seconds). Undefined while
 * quota is left, or when absent or unreadable. Not capped here.
 */
export function rateLimitResetMs(
  headers: Record<string, string | string[] | undefined>,
): number | undefined {
  const one = (name: string): string | undefined => {
    const value = headers[name];
    return (Array.isArray(value) ? value.join(', ') : value)?.trim() || undefined;
  };
  const seconds = (raw: string | undefined): number | undefined =>
    raw !== undefined && /^\d+$/.test(raw) ? Number(raw) * 1000 : undefined;
  const combined = one('ratelimit');
  if (combined !== undefined) {
    // Structured-field items, one per policy: the longest wait among those with none left.
    const spent = combined
      .split(',')
      .map((item) => Object.fromEntries(item.split(';').map((p) => p.trim().split('=', 2))))
      .filter((params: Record<string, string>) => params.r === '0' && params.t !== undefined)
      .map((params: Record<string, string>) => seconds(params.t))
      .filter((ms): ms is number => ms !== undefined);
    if (spent.length > 0) return Math.max(...spent);
    const fields = Object.fromEntries(
      combined.split(',').map((part) => part.trim().split('=', 2) as [string, string]),
    );
    if (fields.remaining === '0') return seconds(fields.reset);
    return undefined;
  }
  if (one('ratelimit-remaining') === '0') return seconds(one('ratelimit-reset'));
  return undefined;
}

function nextCursor(pagination: Pagination, path: string): string | null {
  if (!pagination || pagination.hasNextPage === false) return null;
  const cursor = pagination.nextCursor;
  if (cursor) return cursor;
  if (pagination.hasNextPage === true) {
    throw new ApiError('server', `Runpod's list ${path} announces another page without a cursor`);
  }
  return null;
}

function checkPodId(id: string): void {
  // Pod IDs go into the URL path, encoded; these could not be a segment of their own.
  if (!isPodId(id)) {
    throw new ApiError(
      'rejected',
      'not a Runpod pod ID (empty, a dot segment, or control characters)',
    );
  }
}

async function readBody(
  body: AsyncIterable<Buffer | Uint8Array> & { destroy?: (error?: Error) => unknown },
): Promise<{ text: string; tooLarge: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) {
      body.destroy?.();
      return { text: '', tooLarge: true };
    }
    chunks.push(Buffer.from(chunk));
  }
  return { text: Buffer.concat(chunks).toString('utf8'), tooLarge: false };
}

/** A transport error in a few words and its code: never headers or bodies. */
function describeTransportError(error: unknown): string {
  const code =
    typeof error === 'object' && error !== null && 'code' in error
      ? String((error as { code: unknown }).code)
      : '';
  const known: Record<string, string> = {
    ECONNREFUSED: 'connection refused',
    ECONNRESET: 'connection reset',
    EPIPE: 'connection closed',
    ENOTFOUND: 'host not found',
    EAI_AGAIN: 'name resolution failed',
    ETIMEDOUT: 'connection timed out',
    EHOSTUNREACH: 'host unreachable',
    ENETUNREACH: 'network unreachable',
    UND_ERR_SOCKET: 'connection closed by the other side',
    UND_ERR_CONNECT_TIMEOUT: 'connect timed out',
    UND_ERR_HEADERS_TIMEOUT: 'no answer in time',
    UND_ERR_BODY_TIMEOUT: 'answer stalled',
    UND_ERR_CLOSED: 'client closed',
    UND_ERR_DESTROYED: 'client closed',
  };
  const words = known[code];
  if (words) return `${words} (${code})`;
  if (code.startsWith('ERR_TLS') || code.includes('CERT')) return `TLS failed (${code})`;
  const message = error instanceof Error ? oneLine(error.message, 160) : '';
  return code ? `${message || 'transport error'} (${code})` : message || 'transport error';
}
