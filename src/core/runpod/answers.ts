/**
 * What comes back from a Runpod call and what it means: an answer (read whole up to a bound) or a
 * transport failure; the error it is: a create's fixed messages chosen from the status only, any
 * other call's with Runpod's text kept, redacted and capped.
 */
import {
  ApiError,
  BASE_URL_VARIABLE,
  CREATE_MESSAGES,
  type CreateMessages,
  isPlacement400,
  isRunpod404,
  oneLine,
  type Redactor,
  runpodText,
  UNAUTHORIZED_HINT,
} from './apiErrors';

/** Largest answer body read; a larger one is unreadable (a pod list of 1000 pods is far below). */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;

/** An answer of the API, whatever its status. */
export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** Set when the body could not be read whole (too large); `body` is then empty. */
  unreadable?: string;
  /** The latest moment, by this client's clock, at which the API had seen what it answered. */
  seenByMs: number;
}

/**
 * When, at the latest, the API saw what it answered to a call sent at `sentMs` whose answer
 * arrived at `arrivedMs` (this client's clock): the answer's `Date` header plus the second it
 * rounds off, when that agrees with the call (no earlier than the second it was sent in, no later
 * than the answer's arrival; the same clock as `createdAt`, which the spend estimate starts
 * from), else the arrival. A busy client reads an answer seconds after it was made: a pod the
 * answer shows gone billed no later than its Date, not until this client read it.
 */
export function seenByMs(
  date: string | string[] | undefined,
  sentMs: number,
  arrivedMs: number,
): number {
  const dateMs = Date.parse((Array.isArray(date) ? date[0] : date) ?? '');
  if (Number.isNaN(dateMs) || dateMs < Math.floor(sentMs / 1000) * 1000 || dateMs > arrivedMs) {
    return arrivedMs;
  }
  return Math.min(arrivedMs, dateMs + 1000);
}

/** No answer: the connection failed, was reset, or the attempt timed out. */
export class TransportFailure {
  constructor(
    readonly reason: string,
    /** The error's code (`ECONNREFUSED`), when it had one. */
    readonly code?: string,
  ) {}
}

export type Outcome = Answer | TransportFailure;

/** The error of a non-create call's answer: Runpod's text kept, redacted and capped. */
/**
 * The error of a create's answer: a fixed message chosen from the status
 * only, never Runpod's text. 408 and 5xx leave the pod's existence open.
 */
export function createError(
  answer: Answer,
  retryAfterMs: number | undefined,
  messages: CreateMessages = CREATE_MESSAGES,
): ApiError {
  const { status } = answer;
  const options = { status, retryAfterMs };
  if (status >= 300 && status < 400) return new ApiError('redirect', messages.redirect, options);
  if (status === 400 && isPlacement400(answer.body)) {
    return new ApiError('capacity', messages.capacity, options);
  }
  if (status === 401) return new ApiError('unauthorized', UNAUTHORIZED_HINT, options);
  if (status === 402) return new ApiError('no_credits', messages.noCredits, options);
  if (status === 403) return new ApiError('forbidden', messages.forbidden, options);
  if (status === 408) return new ApiError('ambiguous', messages.timeout408, options);
  if (status === 429) return new ApiError('rate_limited', messages.rateLimited, options);
  if (status >= 400 && status < 500) return new ApiError('rejected', messages.rejected, options);
  return new ApiError('ambiguous', messages.server, options);
}

/** The error of a non-create call's answer: Runpod's text kept, redacted and capped. */
export function callError(
  answer: Answer,
  redactor: Redactor,
  retryAfterMs: number | undefined,
): ApiError {
  const { status } = answer;
  const options = { status, retryAfterMs };
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

export async function readBody(
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

/** The `code` of a transport error (`ECONNREFUSED`), if it has one. */
export function errorCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error
    ? String((error as { code: unknown }).code)
    : undefined;
}

/** A transport error in a few words and its code: never headers or bodies. */
export function describeTransportError(error: unknown): string {
  const code = errorCode(error) ?? '';
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
