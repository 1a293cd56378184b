/**
 * The attempts of a run whose pod died mid-job and that went on on a new pod (`attempts` in
 * run.json): one row each under the run in the Runs tree, and the lines the run page shows.
 * Free of `vscode`.
 */
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { decodeRunRecord, RUN_FILE, type RunAttempt } from '../../core/flow/records';

/** The run's attempts from its run.json; empty when it has none (or the file cannot be read). */
export async function readAttempts(runDir: string): Promise<RunAttempt[]> {
  try {
    const file = path.join(runDir, RUN_FILE);
    return decodeRunRecord(await fs.readFile(file, 'utf8'), file).attempts ?? [];
  } catch {
    return [];
  }
}

const REASON_WORDS: Record<NonNullable<RunAttempt['reason']>, string> = {
  pod_deleted: 'pod deleted by Runpod',
  pod_exited: 'pod died (EXITED)',
  host_lost: 'host stopped answering (pod deleted)',
  node_failed: 'a node of the cluster failed',
};

/** `Attempt 2: pod abc · from step 20 · pod died (EXITED) · about $0.0123`. */
export function attemptLine(
  attempt: RunAttempt,
  index: number,
): {
  label: string;
  description: string;
} {
  const parts: string[] = [];
  parts.push(
    attempt.resumedFromStep === null
      ? index === 0
        ? 'from the start'
        : 'from step 0'
      : `from step ${attempt.resumedFromStep}`,
  );
  if (attempt.reason !== null) parts.push(REASON_WORDS[attempt.reason]);
  else if (attempt.endedAt === null) parts.push('running');
  else parts.push('the run ended on it');
  if (attempt.costUsd !== null) parts.push(`about $${attempt.costUsd.toFixed(4)}`);
  return {
    label: `Attempt ${index + 1}: pod ${attempt.podId ?? '(none yet)'}`,
    description: parts.join(' · '),
  };
}

/** The run page's line: every attempt, `Attempt 1: pod abc (from the start · …) · Attempt 2: …`. */
export function attemptsText(attempts: readonly RunAttempt[] | undefined): string | null {
  if (attempts === undefined || attempts.length === 0) return null;
  return attempts
    .map((attempt, index) => {
      const line = attemptLine(attempt, index);
      return `${line.label} (${line.description})`;
    })
    .join(' · ');
}
