/**
 * The waits an HTTP answer asks for: `Retry-After` (delta-seconds or an HTTP-date) and the IETF
 * RateLimit headers in either draft form. Both are read on every answer, 2xx too.
 */

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
