/**
 * The Runpod REST API v2 client (undici). One rule above all: a pod create is
 * never sent twice blindly — a create without a clear answer is `ambiguous`
 * and the caller reconciles by run marker. Only idempotent calls (GET, DELETE,
 * and the account-secret writes, which a 409 makes safe to re-send) are retried
 * on transport errors, 408, 429 and 5xx; other POSTs and PATCHes only on 429,
 * which Runpod answers before doing anything. Redirects are never
 * followed (the bearer key must not travel to another host), and the API key
 * never appears in an error, a log line or an enumerable field. The calls go through
 * ./transport.ts; the pods' are here, the catalog's and the account's in ./catalog.ts and
 * ./account.ts.
 */
import type { Disposable } from '../disposable';
import {
  CreatePodBodySchema,
  decodeJson,
  isPodId,
  ListPodsSchema,
  POD_ACTIONS,
  PodSchema,
  type CreatePodBody,
  type Pod,
  type PodAction,
} from './api';
import * as account from './account';
import * as clusters from './clusters';
import type { Cluster, ClusterBilling, CreateClusterBody, CreateClusterOptions } from './clusters';
import type { BillingBucketSize, PodBilling, Secret } from './account';
import * as catalog from './catalog';
import type {
  DataCenter,
  GpuType,
  ListDataCentersOptions,
  ListGpuTypesOptions,
  NetworkVolume,
  Template,
} from './catalog';
import { ApiError, CREATE_MESSAGES } from './apiErrors';
import type { CallLimits } from './callLimits';
import { ApiTransport } from './transport';
import { createError, readBody, TransportFailure } from './answers';
import type { RunpodClientOptions } from './clientOptions';
import type { CallOptions } from './wire';

export type { CallOptions } from './wire';

/** A look at a pod: as the API showed it (null: gone), and when the API saw it so at the latest. */
export interface PodLook {
  pod: Pod | null;
  seenByMs: number;
}
export type { ListDataCentersOptions, ListGpuTypesOptions } from './catalog';
export { rateLimitResetMs, retryAfterMs } from './retryHeaders';
export { MAX_PAGES } from './transport';
export { MAX_BODY_BYTES } from './answers';
export {
  API_V2_ROOT,
  CLIENT_VERSION,
  DEFAULT_BASE_URL,
  userAgentFor,
  validateBaseUrl,
  type RunpodClientOptions,
  type RunpodLog,
  type RunpodLogLevel,
} from './clientOptions';

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
    return (await this.lookPod(id, options)).pod;
  }

  /**
   * {@link getPod}, with when the API saw the pod so at the latest (`seenByMs`, by this client's
   * clock: see Answer.seenByMs): a pod it found gone billed no later than that.
   */
  async lookPod(id: string, options: CallOptions = {}): Promise<PodLook> {
    checkPodId(id);
    let goneSeenMs = 0;
    const answer = await this.#http.okOr404(
      'GET',
      `/pods/${encodeURIComponent(id)}`,
      options.signal,
      (seenMs) => (goneSeenMs = seenMs),
    );
    if (answer === null) return { pod: null, seenByMs: goneSeenMs };
    const pod = this.#http.decode(answer, PodSchema, `GET /pods/${id}`);
    return { pod, seenByMs: answer.seenByMs };
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
   * carries it (the API has no such filter: it is applied here). Members of a cluster are
   * listed only with `includeClusterPods` (Runpod hides them otherwise).
   */
  async listPods(
    options: CallOptions & { runMarker?: string; includeClusterPods?: boolean } = {},
  ): Promise<Pod[]> {
    const pods = await this.#http.listPaged(
      '/pods',
      options.includeClusterPods === true ? { includeClusterPods: 'true' } : {},
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
    try {
      const answer = await this.#http.okOr404(
        'DELETE',
        `/pods/${encodeURIComponent(id)}`,
        options.signal,
      );
      return answer !== null;
    } catch (error) {
      throw memberRefusal(error, id);
    }
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
  // Instant Clusters (./clusters.ts)
  // -------------------------------------------------------------------------

  /** {@link clusters.createCluster} */
  createCluster(body: CreateClusterBody, options: CreateClusterOptions = {}): Promise<Cluster> {
    return clusters.createCluster(this.#http, body, options);
  }

  /** {@link clusters.getCluster} */
  getCluster(id: string, options: CallOptions = {}): Promise<Cluster | null> {
    return clusters.getCluster(this.#http, id, options);
  }

  /** {@link clusters.listClusters} */
  listClusters(options: CallOptions & { name?: string } = {}): Promise<Cluster[]> {
    return clusters.listClusters(this.#http, options);
  }

  /** {@link clusters.listClusterPods} */
  listClusterPods(id: string, options: CallOptions = {}): Promise<Pod[] | null> {
    return clusters.listClusterPods(this.#http, id, options);
  }

  /** {@link clusters.deleteCluster} */
  deleteCluster(id: string, options: CallOptions = {}): Promise<boolean> {
    return clusters.deleteCluster(this.#http, id, options);
  }

  /** {@link clusters.clusterBilling} */
  clusterBilling(
    clusterId: string,
    window: { startTime?: Date; endTime?: Date; bucketSize?: BillingBucketSize } = {},
    options: CallOptions = {},
  ): Promise<ClusterBilling> {
    return clusters.clusterBilling(this.#http, clusterId, window, options);
  }

  // -------------------------------------------------------------------------
  // Catalog, volumes, templates (./catalog.ts); the account's billing and secrets (./account.ts)
  // -------------------------------------------------------------------------

  /** {@link catalog.listGpuTypes} */
  listGpuTypes(options: ListGpuTypesOptions = {}): Promise<GpuType[]> {
    return catalog.listGpuTypes(this.#http, options);
  }

  /** {@link catalog.listDataCenters} */
  listDataCenters(options: ListDataCentersOptions = {}): Promise<DataCenter[]> {
    return catalog.listDataCenters(this.#http, options);
  }

  listNetworkVolumes(options: CallOptions = {}): Promise<NetworkVolume[]> {
    return catalog.listNetworkVolumes(this.#http, options);
  }

  /** {@link catalog.getNetworkVolume} */
  getNetworkVolume(id: string, options: CallOptions = {}): Promise<NetworkVolume | null> {
    return catalog.getNetworkVolume(this.#http, id, options);
  }

  /** {@link catalog.updateNetworkVolume} */
  updateNetworkVolume(
    id: string,
    update: { size?: number; name?: string },
    options: CallOptions = {},
  ): Promise<NetworkVolume> {
    return catalog.updateNetworkVolume(this.#http, id, update, options);
  }

  /** Grows the network volume `id` to `sizeGb` (`PATCH {size}`; Runpod refuses to shrink). */
  resizeNetworkVolume(
    id: string,
    sizeGb: number,
    options: CallOptions = {},
  ): Promise<NetworkVolume> {
    return this.updateNetworkVolume(id, { size: sizeGb }, options);
  }

  /** {@link catalog.listTemplates} */
  listTemplates(options: CallOptions = {}): Promise<Template[]> {
    return catalog.listTemplates(this.#http, options);
  }

  /** {@link account.podBilling} */
  podBilling(
    podId: string,
    window: { startTime?: Date; endTime?: Date; bucketSize?: BillingBucketSize } = {},
    options: CallOptions = {},
  ): Promise<PodBilling> {
    return account.podBilling(this.#http, podId, window, options);
  }

  /** {@link account.listSecrets} */
  listSecrets(options: CallOptions = {}): Promise<Secret[]> {
    return account.listSecrets(this.#http, options);
  }

  /** {@link account.findSecret} */
  findSecret(name: string, options: CallOptions = {}): Promise<Secret | null> {
    return account.findSecret(this.#http, name, options);
  }

  /** {@link account.createSecret} */
  createSecret(name: string, value: string, options: CallOptions = {}): Promise<Secret> {
    return account.createSecret(this.#http, name, value, options);
  }

  /** {@link account.updateSecret} */
  updateSecret(id: string, value: string, options: CallOptions = {}): Promise<Secret> {
    return account.updateSecret(this.#http, id, value, options);
  }

  /** {@link account.deleteSecret} */
  deleteSecret(id: string, options: CallOptions = {}): Promise<boolean> {
    return account.deleteSecret(this.#http, id, options);
  }
}

/**
 * A pod delete's 409 is the document's "Pod belongs to a cluster and cannot be terminated via the
 * pod endpoints": the `cluster_member` error naming the next action. Any other error as it was.
 */
function memberRefusal(error: unknown, podId: string): unknown {
  if (!(error instanceof ApiError) || error.status !== 409) return error;
  return new ApiError(
    'cluster_member',
    `pod ${podId} is a member of an Instant Cluster, which Runpod deletes only as a whole: delete its cluster (overbrainer pod rm CLUSTER_ID)`,
    { status: 409 },
  );
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
