/**
 * One Chromium per mocha worker. `scripts/test.sh` runs the e2e files after the first window
 * with `mocha --parallel` (a worker process per job, each running its files one after another):
 * there a file borrows the worker's browser instead of launching its own, and opens its windows
 * in browser contexts of its own as before (each context its own storage: localStorage holds
 * the secrets, IndexedDB the extension's state), so nothing a file did is seen by the next.
 * A launch and close was 1.0–1.5 CPU-s on 2026-12-07 (three each, load 40).
 *
 * The browser ends with its worker: Playwright kills the browsers it launched when the process
 * exits (mocha ends its workers once the files are done), and Chromium, which Playwright drives
 * through a pipe, exits when that pipe closes. A file run alone (no worker) launches and closes
 * its own browser, as before, so that its mocha exits.
 */
import type { Browser } from 'playwright-core';
import { launchChromium } from './harness';

/** Set by mocha in each of `--parallel`'s worker processes. */
const IN_WORKER = process.env.MOCHA_WORKER_ID !== undefined;

let shared: Promise<Browser> | undefined;

/** A browser for one file: the worker's (launched by its first file), or a new one. */
export async function borrowChromium(): Promise<Browser> {
  if (!IN_WORKER) return launchChromium();
  const held = await shared?.catch(() => undefined);
  if (held?.isConnected()) return held;
  // The first file of the worker, or the browser crashed or failed to launch: a new one.
  shared = launchChromium();
  return shared;
}

/**
 * A file is done with `browser`: its contexts are closed (the worker's browser stays for the next
 * file), or the browser itself when it was the file's own.
 */
export async function returnChromium(browser: Browser): Promise<void> {
  if (!IN_WORKER) {
    await browser.close();
    return;
  }
  await Promise.all(browser.contexts().map((context) => context.close().catch(() => undefined)));
}
