/**
 * The Runpod client's errors, and the rules that keep the account's API key
 * out of every text a caller may show, log or save.
 */
import { Redactor } from '../redact';
import { describeError, HintedError } from '../errors';

/** The environment variable holding the account's API key. */
export const API_KEY_VARIABLE = 'OVERBRAINER_RUNPOD__API_KEY';
/** The environment variable that overrides the API's base URL (the emulator's test hook). */
export const BASE_URL_VARIABLE = 'OVERBRAINER_RUNPOD__BASE_URL';

/**
 * What went wrong with a Runpod API call, as the lifecycle decides on it:
 * - `capacity`: a create's 400 in Runpod's problem form: this GPU type could not be placed
 *   (no capacity, or a rule of the request; try the next GPU type);
 * - `forbidden`: 403, the key or the GPU type is not allowed (try the next type);
 * - `unauthorized`: 401, the key is refused (stop: the user must set another key);
 * - `no_credits`: 402, balance too low (stop);
 * - `rejected`: any other 4xx, 400 and 422 included: our own request is wrong (stop, report);
 * - `rate_limited`: 429 after every retry;
 * - `server`: 5xx after every retry, or an answer that breaks the API's own rules
 *   (a repeated page cursor, endless pages);
 * - `ambiguous`: a pod create got no clear answer (transport error, timeout, 408, 5xx,
 *   unreadable 2xx): the pod may exist and bill; reconcile by run marker, never re-send;
 * - `transport`: no answer at all (connection refused or reset, timeout, 408);
 * - `not_found`: a 404 that is not Runpod's (a proxy page, a wrong base URL);
 * - `decode`: a 2xx whose body cannot be read (only category and position are reported);
 * - `redirect`: a 3xx: redirects are never followed (the bearer key must not travel elsewhere);
 * - `cluster_member`: 409 from a pod call on a member of an Instant Cluster: the pod calls cannot
 *   delete or change it; delete its cluster (`DELETE /clusters/{id}`).
 */
export type ApiErrorKind =
  | 'capacity'
  | 'forbidden'
  | 'unauthorized'
  | 'no_credits'
  | 'rejected'
  | 'rate_limited'
  | 'server'
  | 'ambiguous'
  | 'transport'
  | 'not_found'
  | 'decode'
  | 'redirect'
  | 'cluster_member';

export interface ApiErrorOptions {
  /** The HTTP status of Runpod's answer; absent when there was no answer. */
  status?: number;
  /** The wait Runpod asked for (`Retry-After`), capped. */
  retryAfterMs?: number;
  /** Set on an `ambiguous` create cut short by the caller's AbortSignal. */
  aborted?: boolean;
}

const BASE_URL_HINT = `Check ${BASE_URL_VARIABLE} (unset: Runpod's public API)`;

/** What a user can do about each kind of failed call. */
const API_HINTS: Record<ApiErrorKind, string> = {
  capacity:
    'Try other GPU types or data centers (`overbrainer pod gpus --in-stock` lists what is in stock).',
  forbidden:
    'Check what the API key may do (Runpod console, Settings → API Keys), or try other GPU types.',
  unauthorized: `Set a valid key: run "Overbrainer: Set Runpod API Key", or set ${API_KEY_VARIABLE}.`,
  no_credits:
    'Add credit to the Runpod account (Runpod console, Billing), then run the command again.',
  rejected:
    "Check the target in overbrainer.toml against Runpod's answer; if it looks right, report the message.",
  rate_limited:
    'Wait a minute, then run the command again; running pods are not affected: their watchdogs keep their own deadlines.',
  server:
    'Run the command again in a few minutes; running pods are not affected: their watchdogs keep their own deadlines.',
  ambiguous:
    'A pod may exist and bill: check `overbrainer pod ls`, and remove what you do not keep with `overbrainer pod rm`.',
  transport: `Check the network and ${BASE_URL_VARIABLE} (unset: Runpod's public API), then run the command again.`,
  not_found: `${BASE_URL_HINT}: what answers there is not the Runpod API.`,
  decode: `Run the command again; if it fails the same way, ${BASE_URL_HINT.replace('Check', 'check')}.`,
  redirect: `${BASE_URL_HINT}: a redirect is never followed, so the key goes nowhere else.`,
  cluster_member:
    'Delete the cluster the pod belongs to with `overbrainer pod rm CLUSTER_ID` (or in the Runpod console): Runpod deletes its nodes only together.',
};

/**
 * An error of the Runpod API client. Its message never holds the API key (nor
 * a secret value being stored): non-create errors keep Runpod's own text,
 * redacted and capped; create errors use fixed messages chosen from the
 * status only. Enumerable fields are `kind`, `status`, `retryAfterMs`, `aborted`.
 */
export class ApiError extends HintedError<ApiErrorKind> {
  readonly status: number | undefined;
  readonly retryAfterMs: number | undefined;
  readonly aborted: boolean;

  constructor(kind: ApiErrorKind, message: string, options: ApiErrorOptions = {}) {
    super(kind, message, API_HINTS[kind]);
    this.status = options.status;
    this.retryAfterMs = options.retryAfterMs;
    this.aborted = options.aborted ?? false;
  }
}

// On the prototype, so an error's own enumerable fields are only its data.
Object.defineProperty(ApiError.prototype, 'name', { value: 'ApiError', configurable: true });

export function isApiError(error: unknown, kind?: ApiErrorKind): error is ApiError {
  return error instanceof ApiError && (kind === undefined || error.kind === kind);
}

/**
 * The API key or base URL given to the client cannot be used. Names the
 * variable to fix; never quotes the key.
 */
export class RunpodConfigError extends HintedError<'api_key' | 'base_url'> {
  constructor(
    readonly variable: typeof API_KEY_VARIABLE | typeof BASE_URL_VARIABLE,
    message: string,
  ) {
    super(
      variable === API_KEY_VARIABLE ? 'api_key' : 'base_url',
      message,
      variable === API_KEY_VARIABLE
        ? `Set ${API_KEY_VARIABLE} (or run "Overbrainer: Set Runpod API Key") to a key from the Runpod console (Settings → API Keys).`
        : `Fix ${BASE_URL_VARIABLE}, or unset it to use Runpod's public API.`,
    );
    this.name = 'RunpodConfigError';
  }
}

/**
 * The reason a failed run keeps in `run.json`: an
 * answer of the Runpod API is reduced to its status, since a non-create error
 * carries Runpod's own text, which the log shows but `run.json` never keeps.
 */
export function runMessage(error: unknown): string {
  if (error instanceof ApiError && error.status !== undefined) {
    return `Runpod answered ${error.status}`;
  }
  return describeError(error);
}

/** The fixed hint for a refused key (401), for every call. */
export const UNAUTHORIZED_HINT =
  `Runpod refused the API key (401): set ${API_KEY_VARIABLE}, ` +
  'or run the "Set Runpod API Key" command, with a valid key';

/**
 * The fixed messages of a pod create, chosen from the status only: Runpod's
 * text is never shown for a create, whose answer may echo the request's env.
 */
export const CREATE_MESSAGES = {
  capacity: 'no capacity for this GPU type',
  forbidden: 'Runpod refused the request (403): the API key or this GPU type is not allowed',
  noCredits: 'Runpod refused the request (402): the account balance is too low',
  rejected: 'Runpod rejected the create request as invalid: invalid request, please report',
  rateLimited: 'Runpod answered 429 (rate limited) to the create request',
  timeout408: 'the create request timed out at Runpod (408): the pod may exist',
  server: 'Runpod failed to answer the create request (server error): the pod may exist',
  transport: 'the create request got no answer: the pod may exist',
  unreadable: "Runpod's answer to the create request could not be read: the pod may exist",
  aborted: 'the create request was interrupted in flight: the pod may exist',
  redirect: `Runpod answered the create request with a redirect, which is never followed: check ${BASE_URL_VARIABLE}`,
} as const;

/** A create's fixed messages, for one kind of thing created (a pod, a cluster). */
export type CreateMessages = { readonly [K in keyof typeof CREATE_MESSAGES]: string };

/** The fixed messages of a cluster create: as a pod's, for the cluster and all of its members. */
export const CLUSTER_CREATE_MESSAGES: CreateMessages = {
  capacity: 'no capacity for this many pods of this GPU type in one data center',
  forbidden:
    'Runpod refused the cluster (403): the API key, this GPU type or this many nodes is not allowed (self-serve accounts get at most 8 nodes)',
  noCredits: 'Runpod refused the cluster (402): the account balance is too low',
  rejected: 'Runpod rejected the cluster create request as invalid: invalid request, please report',
  rateLimited: 'Runpod answered 429 (rate limited) to the cluster create request',
  timeout408: 'the cluster create request timed out at Runpod (408): the cluster may exist',
  server:
    'Runpod failed to answer the cluster create request (server error): the cluster may exist',
  transport: 'the cluster create request got no answer: the cluster may exist',
  unreadable:
    "Runpod's answer to the cluster create request could not be read: the cluster may exist",
  aborted: 'the cluster create request was interrupted in flight: the cluster may exist',
  redirect: `Runpod answered the cluster create request with a redirect, which is never followed: check ${BASE_URL_VARIABLE}`,
};

/** Longest Runpod text kept in an error message. */
export const MAX_MESSAGE_CHARS = 300;

export { Redactor };

/**
 * Makes a server text fit for one line: control characters become spaces,
 * whitespace runs collapse, and the result is capped to `maxChars` characters.
 */
export function oneLine(text: string, maxChars = MAX_MESSAGE_CHARS): string {
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is removed
  const flat = text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ');
  const collapsed = flat.replace(/\s+/g, ' ').trim();
  const chars = Array.from(collapsed);
  if (chars.length <= maxChars) return collapsed;
  return chars.slice(0, maxChars - 1).join('') + '…';
}

/** Bytes of an error body looked at to build a message (a proxy page may be large). */
const MAX_ERROR_TEXT_CHARS = 64 * 1024;

/**
 * Runpod's text of an error answer, ready for a message: the RFC 9457 fields
 * `title`, `detail` and `errors[]` when the body is such a document, else the
 * body itself. Secrets are redacted in the raw body and again in every decoded
 * string (a JSON escape such as `\u0041` could hide them from the first pass);
 * the result is one line of at most {@link MAX_MESSAGE_CHARS} characters.
 */
export function runpodText(body: string, redactor: Redactor): string {
  const raw = redactor.redact(body.slice(0, MAX_ERROR_TEXT_CHARS));
  const problem = problemFields(raw);
  let text: string;
  if (problem) {
    const parts: string[] = [];
    if (problem.title) parts.push(redactor.redact(problem.title));
    if (problem.detail) parts.push(redactor.redact(problem.detail));
    let joined = parts.join(': ');
    if (problem.errors.length > 0) {
      const errors = problem.errors.map((e) => redactor.redact(e)).join('; ');
      joined = joined ? `${joined} (${errors})` : errors;
    }
    text = joined;
  } else {
    text = raw;
  }
  // Capping could not rebuild a key, but the redaction is cheap: run it once more.
  return redactor.redact(oneLine(text));
}

/** The fields of an RFC 9457 problem document, or null when `body` is not one. */
export function problemFields(
  body: string,
): { title: string | null; detail: string | null; status: number | null; errors: string[] } | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
  const record = parsed as Record<string, unknown>;
  const title = typeof record.title === 'string' ? record.title : null;
  const detail = typeof record.detail === 'string' ? record.detail : null;
  const status = typeof record.status === 'number' ? record.status : null;
  const errors = Array.isArray(record.errors)
    ? record.errors.filter((e): e is string => typeof e === 'string')
    : [];
  if (title === null && detail === null && status === null && errors.length === 0) return null;
  return { title, detail, status, errors };
}

/**
 * Whether a 404's body is Runpod's own "not found": a JSON object whose
 * numeric `status` is 404, or that has a `title` or `detail` key. Any other 404
 * (a proxy page, a wrong base URL) proves nothing about the resource.
 */
export function isRunpod404(body: string): boolean {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return false;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return false;
  const record = parsed as Record<string, unknown>;
  return record.status === 404 || 'title' in record || 'detail' in record;
}

/**
 * Whether a create's 400 is Runpod's "this GPU and data center could not be placed": Runpod's API
 * document says a 400 to a create covers both a broken cross-field rule and no capacity, that
 * capacity has no machine-readable code (only a human-readable `detail`, whose words may change),
 * and that the caller should try its next candidate. So any 400 that is Runpod's own problem
 * document (`title`, `status` or `detail`) moves the walk on; a 400 that is not (a proxy's page)
 * proves nothing about capacity and stays `rejected`. A rule our request breaks fails the same way
 * on every type, so the walk then ends having tried them all, never with a pod.
 */
export function isPlacement400(body: string): boolean {
  return problemFields(body) !== null;
}
