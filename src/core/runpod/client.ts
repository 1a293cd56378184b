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
import type { Disposable } from '../disposable';
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
  type Pod,
  type PodAction,
  type PodBilling,
  type Secret,
  type Template,
} from './api';
import { ApiError, CREATE_MESSAGES, isPlacement400, oneLine, UNAUTHORIZED_HINT } from './errors';
import type { CallLimits } from './callLimits';

/** This extension's version, sent in `User-Agent` unless the caller passes its own. */
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

import {
  ApiTransport,
  readBody,
  TransportFailure,
  type Answer,
  type RunpodClientOptions,
} from './transport';
export { rateLimitResetMs, retryAfterMs } from './retryHeaders';

export {
  API_V2_ROOT,
  CLIENT_VERSION,
  DEFAULT_BASE_URL,
  MAX_BODY_BYTES,
  MAX_PAGES,
  userAgentFor,
  validateBaseUrl,
  type RunpodClientOptions,
  type RunpodLog,
  type RunpodLogLevel,
} from './transport';

/**
 * The Runpod API v2 client. Every method accepts an AbortSignal and rejects
 * with an {@link ApiError} (or an AbortError when aborted). Dispose it to
 * close its connections.
 */
export class RunpodClient implements Disposable {
  readonly baseUrl: string;
  // A private field: never enumerable, never printed with the client.
  readonly #http: ApiTransport;

  constructor(options: RunpodClientOptions | ApiTransport) {
    this.#http = options instanceof ApiTransport ? options : new ApiTransport(options);
    this.baseUrl = this.#http.baseUrl;
  }

  /**
   * This client (its connections, the account's quota, its key) for a read-only command's calls:
   * they keep `limits` (./callLimits.ts). Disposing it leaves this client open.
   */
  withLimits(limits: CallLimits): RunpodClient {
    return new RunpodClient(this.#http.withLimits(limits));
  }

  /** The limits of a read-only command's client ({@link withLimits}); null for any other. */
  get limits(): CallLimits | null {
    return this.#http.callLimits;
  }

  /** Closes the client's own connections at once (an injected dispatcher is left alone). */
  dispose(): void {
    this.#http.dispose();
  }

  /** Closes the client's own connections once in-flight calls are done. */
  async close(): Promise<void> {
    await this.#http.close();
  }

  /**
   * Aborted once the client is disposed or closed: long-lived work on it (a pod's log capture)
   * ends then instead of reconnecting to an API nobody will call again.
   */
  get closing(): AbortSignal {
    return this.#http.closing;
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
    const outcome = await this.#http.call({
      method: 'POST',
      path: '/pods',
      body: checked.data,
      idempotent: false,
      create: true,
      signal: options.signal,
      redactor: this.#http.redactor,
    });
    if (outcome instanceof TransportFailure) {
      throw new ApiError('ambiguous', `${CREATE_MESSAGES.transport} (${outcome.reason})`);
    }
    if (outcome.status >= 200 && outcome.status < 300) {
      const pod = outcome.unreadable ? null : decodeJson(outcome.body, PodSchema);
      if (!pod?.ok) throw new ApiError('ambiguous', CREATE_MESSAGES.unreadable);
      return pod.value;
    }
    throw createError(outcome, this.#http.answerRetryAfterMs(outcome));
  }

  /**
   * The pod `id`, or null when Runpod answers its own 404 (a JSON body with
   * `status: 404`, a `title` or a `detail`). Any other 404 — a proxy page, a
   * wrong base URL — is a `not_found` error: it proves nothing about the pod.
   */
  async getPod(id: string, options: CallOptions = {}): Promise<Pod | null> {
    checkPodId(id);
    const answer = await this.#http.okOr404(
      'GET',
      `/pods/${encodeURIComponent(id)}`,
      options.signal,
    );
    if (answer === null) return null;
    return this.#http.decode(answer, PodSchema, `GET /pods/${id}`);
  }

  /** `text` with the API key (and any part of it) masked. */
  redact(text: string): string {
    return this.#http.redactor.redact(text);
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
      accept: 'text/event-stream, application/problem+json',
    };
    if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
    // A stream is a call like any other: never opened into a spent quota.
    const response = await this.#http.openStream(
      `/pods/${encodeURIComponent(id)}/logs`,
      query,
      headers,
      signal,
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
      text: this.#http.redactor.redact(read.text).slice(0, 500),
    };
  }

  /**
   * The account's pods, every page followed (at most {@link MAX_PAGES}; a
   * repeated cursor is an error). With `runMarker`, only the pods whose env
   * carries it (the API has no such filter: it is applied here).
   */
  async listPods(options: CallOptions & { runMarker?: string } = {}): Promise<Pod[]> {
    const pods = await this.#http.listPaged(
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
    const answer = await this.#http.okOr404(
      'DELETE',
      `/pods/${encodeURIComponent(id)}`,
      options.signal,
    );
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
    const outcome = await this.#http.call({
      method: 'POST',
      path: `/pods/${encodeURIComponent(id)}/action`,
      body: { action },
      idempotent: false,
      signal: options.signal,
      redactor: this.#http.redactor,
    });
    const answer = this.#http.expectOk(outcome, this.#http.redactor);
    if (answer.status === 204 || answer.body.trim() === '') return null;
    return this.#http.decode(answer, PodSchema, `POST /pods/${id}/action`);
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
    const answer = await this.#http.getOk('/catalog/gpus', query, options.signal);
    return this.#http.decode(answer, ListGpuTypesSchema, 'GET /catalog/gpus').gpus;
  }

  /** Data centers, with GPU stock per data center unless `includeGpuAvailability` is false. */
  async listDataCenters(options: ListDataCentersOptions = {}): Promise<DataCenter[]> {
    const query: Record<string, string> =
      (options.includeGpuAvailability ?? true) ? { include: 'GPU_AVAILABILITY' } : {};
    const answer = await this.#http.getOk('/catalog/datacenters', query, options.signal);
    return this.#http.decode(answer, ListDataCentersSchema, 'GET /catalog/datacenters').dataCenters;
  }

  async listNetworkVolumes(options: CallOptions = {}): Promise<NetworkVolume[]> {
    return this.#http.listPaged(
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
    const answer = await this.#http.getOk('/billing/pods', query, options.signal);
    return this.#http.decode(answer, ListPodBillingSchema, 'GET /billing/pods');
  }

  /** The network volume `id`, or null when Runpod answers its own 404. */
  async getNetworkVolume(id: string, options: CallOptions = {}): Promise<NetworkVolume | null> {
    const path = `/network-volumes/${encodeURIComponent(id)}`;
    const answer = await this.#http.okOr404('GET', path, options.signal);
    if (answer === null) return null;
    return this.#http.decode(answer, NetworkVolumeSchema, `GET ${path}`);
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
    const outcome = await this.#http.call({
      method: 'PATCH',
      path,
      body,
      idempotent: false,
      signal: options.signal,
      redactor: this.#http.redactor,
    });
    return this.#http.decode(
      this.#http.expectOk(outcome, this.#http.redactor),
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
    const wire = await this.#http.listPaged(
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
    return this.#http.listPaged(
      '/account/secrets',
      {},
      ListSecretsSchema,
      (page) => page.secrets,
      options.signal,
    );
  }

  /** The secret named exactly `name`, or null. */
  async findSecret(name: string, options: CallOptions = {}): Promise<Secret | null> {
    const secrets = await this.#http.listPaged(
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
    const redactor = this.#http.redactor.with([value]);
    const outcome = await this.#http.call({
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
      this.#http.log('info', `secret ${name} exists: replacing its value`);
      return this.updateSecret(existing.id, value, options);
    }
    return this.#http.decode(
      this.#http.expectOk(outcome, redactor),
      SecretSchema,
      'POST /account/secrets',
    );
  }

  /** Replaces the value of the secret `id`. */
  async updateSecret(id: string, value: string, options: CallOptions = {}): Promise<Secret> {
    if (value.length === 0) throw new ApiError('rejected', 'a Runpod secret cannot be empty');
    const redactor = this.#http.redactor.with([value]);
    const path = `/account/secrets/${encodeURIComponent(id)}`;
    const outcome = await this.#http.call({
      method: 'PATCH',
      path,
      body: { value },
      // The whole value is replaced: sending it twice leaves the same secret.
      idempotent: true,
      signal: options.signal,
      redactor,
    });
    return this.#http.decode(this.#http.expectOk(outcome, redactor), SecretSchema, `PATCH ${path}`);
  }

  /** Deletes the secret `id`: true when deleted, false when Runpod answers its own 404. */
  async deleteSecret(id: string, options: CallOptions = {}): Promise<boolean> {
    const path = `/account/secrets/${encodeURIComponent(id)}`;
    return (await this.#http.okOr404('DELETE', path, options.signal)) !== null;
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

function checkPodId(id: string): void {
  // Pod IDs go into the URL path, encoded; these could not be a segment of their own.
  if (!isPodId(id)) {
    throw new ApiError(
      'rejected',
      'not a Runpod pod ID (empty, a dot segment, or control characters)',
    );
  }
}
