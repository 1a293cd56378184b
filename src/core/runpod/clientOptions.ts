/**
 * What a Runpod client is built from: the API base URL (checked: https, or http on a loopback host
 * only), the key, the `User-Agent`, the clock and timing, and where it logs.
 */
import type { Dispatcher } from 'undici';
import type { Clock } from '../clock';
import type { Timing } from '../timing';
import { BASE_URL_VARIABLE, RunpodConfigError } from './apiErrors';

export const CLIENT_VERSION = '0.1.0';
/** Runpod's production API. */
export const DEFAULT_BASE_URL = 'https://api.runpod.io/v2';

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
