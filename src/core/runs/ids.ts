/**
 * Run IDs. Newer format `<project-slug>_<YYYYMMDD-HHMMSS>` (UTC; `_2`, `_3`…
 * on a same-second collision); the early `YYYYMMDD-HHMMSS-xxxx` format is
 * still accepted. An ID is validated on every path that uses it, so no ID
 * ever names a directory outside runs/.
 */
import { RunsError } from './runsError';

/** Longest run ID (`RUN_ID_MAX`). */
export const RUN_ID_MAX = 64;

/** Longest project slug in an ID. */
export const SLUG_MAX = 40;

// No leading `-`: an ID is an argument of commands (the CLI's, the pod's shell's), never an option.
const VALID = /^[A-Za-z0-9_][A-Za-z0-9_-]*$/;

export function isValidRunId(id: string): boolean {
  return id.length > 0 && id.length <= RUN_ID_MAX && VALID.test(id);
}

/** `id` itself, or a {@link RunsError} `invalid_id` (an absolute path, `..`, `/`, too long…). */
export function validateRunId(id: string): string {
  if (typeof id === 'string' && isValidRunId(id)) return id;
  const shown = JSON.stringify(String(id).slice(0, 80));
  throw new RunsError(
    'invalid_id',
    `${shown} is not a valid run ID`,
    `Run IDs hold only letters, digits, - and _ (at most ${RUN_ID_MAX}, not starting with -); copy one from "runs ls" or the Runs view.`,
  );
}

/**
 * The project's part of a run ID: lower case, each run of characters other
 * than ASCII letters and digits becomes one `_`, cut to 40 characters, `run`
 * when nothing is left.
 */
export function projectSlug(projectName: string): string {
  const slug = projectName
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .slice(0, SLUG_MAX);
  return slug === '' ? 'run' : slug;
}

/** `YYYYMMDD-HHMMSS` of `ms`, UTC. */
export function idTimestamp(ms: number): string {
  const iso = new Date(Math.floor(ms / 1000) * 1000).toISOString(); // 2026-09-29T12:00:00.000Z
  return `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}-${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}`;
}

/** The ID for attempt `n` (1-based) of a run created at `ms`: `<slug>_<stamp>`, then `_2`, `_3`… */
export function runIdCandidate(projectName: string, ms: number, n: number): string {
  const base = `${projectSlug(projectName)}_${idTimestamp(ms)}`;
  return n <= 1 ? base : `${base}_${n}`;
}
