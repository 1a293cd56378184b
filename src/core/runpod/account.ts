/**
 * The account's side of Runpod: its secrets (an extension of the live API) and what it was billed
 * for each pod — their shapes, parsed with zod as ./api.ts says, and their calls.
 */
import { z } from 'zod';
import { ApiError, oneLine } from './apiErrors';
import { TransportFailure } from './answers';
import type { ApiTransport } from './transport';
import { PaginationWire, type CallOptions } from './wire';

// ---------------------------------------------------------------------------
// Secrets: the live API's account secrets (absent from openapi-v2.json)
// ---------------------------------------------------------------------------
//
// `/v2/account/secrets` is newer than the stored document (Runpod's API
// reference has it). Shapes as Runpod's reference documents them:
//   GET    /account/secrets[?name=N]  → {secrets: [Secret]}
//   POST   /account/secrets {name, value[, description]} → 201 Secret; 409 when the name exists
//   PATCH  /account/secrets/{id} {value[, description]} → 200 Secret
//   DELETE /account/secrets/{id}      → 204; 404 when gone
// Secret = {id, name, description?, createdAt?}; the value is write-only and
// never returned. Names: 1..191 chars, `^[a-zA-Z_][a-zA-Z0-9_.\-/]*$`, not
// starting with RUNPOD (any case). Env values reference a secret as
// `{{ RUNPOD_SECRET_<name> }}`.

export interface Secret {
  id: string;
  name: string;
  description: string | null;
  createdAt: string | null;
}

export const SECRET_NAME = /^[a-zA-Z_][a-zA-Z0-9_.\-/]{0,190}$/;

/** Whether Runpod accepts `name` for a new secret. */
export function isSecretName(name: string): boolean {
  return SECRET_NAME.test(name) && !name.toUpperCase().startsWith('RUNPOD');
}

/** The env value that makes Runpod substitute the secret `name` when the pod boots. */
export function secretReference(name: string): string {
  return `{{ RUNPOD_SECRET_${name} }}`;
}

export const SecretSchema = z
  .object({
    id: z.string().min(1),
    name: z.string(),
    description: z.string().nullish(),
    createdAt: z.string().nullish(),
  })
  .transform((wire): Secret => ({
    id: wire.id,
    name: wire.name,
    description: wire.description ?? null,
    createdAt: wire.createdAt ?? null,
  }));
export const ListSecretsSchema = z.object({
  secrets: z.array(SecretSchema),
  pagination: PaginationWire,
});

// ---------------------------------------------------------------------------
// Billing (`GET /billing/pods`: ListPodBillingResponse)
// ---------------------------------------------------------------------------

export const BILLING_BUCKET_SIZES = ['hour', 'day', 'week', 'month', 'year'] as const;
export type BillingBucketSize = (typeof BILLING_BUCKET_SIZES)[number];

/** One bucket of one pod: USD amounts (PodBillingRecord). */
export interface PodBillingRecord {
  startTime: string;
  endTime: string;
  podId: string;
  totalAmount: number;
  gpuAmount: number;
  cpuAmount: number;
  diskAmount: number;
}

export interface PodBilling {
  records: PodBillingRecord[];
  /** The resolved window (snapped to bucket boundaries). */
  startTime: string;
  endTime: string;
  bucketSize: string;
  /** Totals across the records (PodBillingMetadata.totals), USD. */
  totalAmount: number;
  gpuAmount: number;
  cpuAmount: number;
  diskAmount: number;
}

const PodBillingAmountsWire = z.object({
  totalAmount: z.number(),
  gpuAmount: z.number(),
  cpuAmount: z.number(),
  diskAmount: z.number(),
});

export const ListPodBillingSchema = z
  .object({
    records: z.array(
      PodBillingAmountsWire.extend({
        startTime: z.string(),
        endTime: z.string(),
        podId: z.string(),
      }),
    ),
    metadata: z.object({
      query: z.object({ startTime: z.string(), endTime: z.string(), bucketSize: z.string() }),
      recordCount: z.number().int(),
      uniquePodCount: z.number().int(),
      totals: PodBillingAmountsWire,
    }),
  })
  .transform((wire): PodBilling => ({
    records: wire.records.map((r) => ({
      startTime: r.startTime,
      endTime: r.endTime,
      podId: r.podId,
      totalAmount: r.totalAmount,
      gpuAmount: r.gpuAmount,
      cpuAmount: r.cpuAmount,
      diskAmount: r.diskAmount,
    })),
    startTime: wire.metadata.query.startTime,
    endTime: wire.metadata.query.endTime,
    bucketSize: wire.metadata.query.bucketSize,
    ...wire.metadata.totals,
  }));

// ---------------------------------------------------------------------------
// The calls
// ---------------------------------------------------------------------------

/** The account's secrets (names only: values are write-only). */
export async function listSecrets(
  http: ApiTransport,
  options: CallOptions = {},
): Promise<Secret[]> {
  return http.listPaged(
    '/account/secrets',
    {},
    ListSecretsSchema,
    (page) => page.secrets,
    options.signal,
  );
}

/** The secret named exactly `name`, or null. */
export async function findSecret(
  http: ApiTransport,
  name: string,
  options: CallOptions = {},
): Promise<Secret | null> {
  const secrets = await http.listPaged(
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
export async function createSecret(
  http: ApiTransport,
  name: string,
  value: string,
  options: CallOptions = {},
): Promise<Secret> {
  if (!isSecretName(name)) {
    throw new ApiError(
      'rejected',
      `"${oneLine(name, 80)}" cannot name a Runpod secret: please report`,
    );
  }
  if (value.length === 0) throw new ApiError('rejected', 'a Runpod secret cannot be empty');
  const redactor = http.redactor.with([value]);
  const outcome = await http.call({
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
    const existing = await findSecret(http, name, options);
    if (!existing) {
      throw new ApiError(
        'rejected',
        `Runpod answered 409 for the secret ${name} but does not list it: please report`,
        { status: 409 },
      );
    }
    http.log('info', `secret ${name} exists: replacing its value`);
    return updateSecret(http, existing.id, value, options);
  }
  return http.decode(http.expectOk(outcome, redactor), SecretSchema, 'POST /account/secrets');
}

/** Replaces the value of the secret `id`. */
export async function updateSecret(
  http: ApiTransport,
  id: string,
  value: string,
  options: CallOptions = {},
): Promise<Secret> {
  if (value.length === 0) throw new ApiError('rejected', 'a Runpod secret cannot be empty');
  const redactor = http.redactor.with([value]);
  const path = `/account/secrets/${encodeURIComponent(id)}`;
  const outcome = await http.call({
    method: 'PATCH',
    path,
    body: { value },
    // The whole value is replaced: sending it twice leaves the same secret.
    idempotent: true,
    signal: options.signal,
    redactor,
  });
  return http.decode(http.expectOk(outcome, redactor), SecretSchema, `PATCH ${path}`);
}

/** Deletes the secret `id`: true when deleted, false when Runpod answers its own 404. */
export async function deleteSecret(
  http: ApiTransport,
  id: string,
  options: CallOptions = {},
): Promise<boolean> {
  const path = `/account/secrets/${encodeURIComponent(id)}`;
  return (await http.okOr404('DELETE', path, options.signal)) !== null;
}

/**
 * What Runpod billed pod `podId` (`GET /billing/pods?podId=…`), bucketed by `bucketSize`
 * (default `day`) over [startTime, endTime) (Runpod snaps the window to bucket boundaries;
 * default the last 30 days). Read-only, retried like any GET.
 */
export async function podBilling(
  http: ApiTransport,
  podId: string,
  window: { startTime?: Date; endTime?: Date; bucketSize?: BillingBucketSize } = {},
  options: CallOptions = {},
): Promise<PodBilling> {
  const query: Record<string, string> = { podId, bucketSize: window.bucketSize ?? 'day' };
  if (window.startTime) query.startTime = window.startTime.toISOString();
  if (window.endTime) query.endTime = window.endTime.toISOString();
  const answer = await http.getOk('/billing/pods', query, options.signal);
  return http.decode(answer, ListPodBillingSchema, 'GET /billing/pods');
}
