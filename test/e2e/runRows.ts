/**
 * Reading a run as the journeys watch it: its row in the Runs view and the state the row says,
 * the status bar's countdown, the emulator's pods still billing, and the run's lock (for a
 * failure's message).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Locator } from 'playwright-core';
import type { Emulator } from '../emulator/emulator';
import { eventually, type Workbench } from './harness';

/** A run ID of examples/tiny's project. */
export const RUN_ID = /tiny_\d{8}-\d{6}(?:_\d+)?/;
// No leading \b: the row's text joins the label (ending in a digit) and the description.
const STATE = /(?<![a-z])(preparing|running|succeeded|failed|cancelled|stopped)\b/;

/** The IDs of the emulator's pods that still bill. */
export function billingPods(emulator: Emulator): string[] {
  return emulator
    .ledger()
    .pods.filter((p) => p.billing)
    .map((p) => p.id);
}

/** The followed run's countdown in the status bar. */
export function countdown(workbench: Workbench): Locator {
  return workbench.page.locator('.statusbar-item', { hasText: /\bleft\b|following/ }).first();
}

/** The run's row in the Runs view. */
export function runRow(workbench: Workbench, id: string): Locator {
  return workbench.viewPane('Runs').locator('.monaco-list-row', { hasText: id }).first();
}

/** Whether `pid` is gone or a zombie (dead, not yet reaped by its parent). */
export function dead(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/** The lock file of the run in `runDir` and whether its holder's process lives. */
export function lockState(runDir: string): string {
  const file = path.join(runDir, '.lock');
  if (!fs.existsSync(file)) return 'none';
  const text = fs.readFileSync(file, 'utf8');
  const ageS = (Date.now() - fs.statSync(file).mtimeMs) / 1000;
  let pid = -1;
  try {
    pid = (JSON.parse(text) as { pid: number }).pid;
  } catch {
    // Unreadable: its text says enough.
  }
  return `${text.trim()} (pid ${pid} ${dead(pid) ? 'dead' : 'alive'}, heartbeat ${ageS.toFixed(0)} s ago)`;
}

/**
 * Waits until the run's row in the Runs view says `state`; fails early on another end state,
 * with the row's words and `evidence()`.
 */
export async function untilState(
  workbench: Workbench,
  id: string,
  state: string,
  timeoutMs: number,
  evidence: () => string = () => '',
): Promise<string> {
  let last = '';
  return eventually(
    `run ${id} ${state} in the Runs view`,
    async () => {
      last = await runRow(workbench, id).innerText();
      const seen = STATE.exec(last)?.[1];
      if (seen === state) return last;
      if (seen !== undefined && !['preparing', 'running'].includes(seen)) {
        throw new Error(`run ${id} is ${seen}: ${last}`);
      }
      return undefined;
    },
    timeoutMs,
  ).catch((error: unknown) => {
    const more = evidence();
    throw new Error(
      `${String(error)}; its row said: ${JSON.stringify(last)}${more === '' ? '' : `\n${more}`}`,
    );
  });
}
