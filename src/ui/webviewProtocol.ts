/**
 * The one message contract between the run webview page (media/main.ts) and its host. Both
 * sides import this file; it must stay free of `vscode`, Node and DOM types. The page says
 * `ready` first; the host answers with a full snapshot and may resend one at any time (after a
 * reload the page keeps nothing it cannot rebuild from a snapshot).
 */

/** Messages the page sends to the host. */
export type PageMessage = { type: 'ready' };

/** Messages the host sends to the page. */
export type HostMessage = {
  type: 'snapshot';
  /** The run id the panel shows. */
  runId: string;
  /** One line for the header (state, target). */
  summary: string;
};

/** Narrows an unknown `postMessage` payload to a host message (the page trusts nothing). */
export function isHostMessage(value: unknown): value is HostMessage {
  if (typeof value !== 'object' || value === null) return false;
  const message = value as Record<string, unknown>;
  return (
    message.type === 'snapshot' &&
    typeof message.runId === 'string' &&
    typeof message.summary === 'string'
  );
}
