/**
 * Keeping the workspace's secrets out of git: `runs/` holds each run's private SSH key (and its
 * results), `.env` may hold the Runpod API key. `overbrainer init` and "Create overbrainer.toml"
 * add both to the workspace's `.gitignore`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** What {@link protectWithGitignore} did to the workspace's `.gitignore`. */
export interface GitignoreChange {
  file: string;
  /** The lines added (`runs/`, `.env`), in that order. */
  added: string[];
  /** Whether the file was created. */
  created: boolean;
}

/** Whether `dir` or a folder above it holds `.git` (a repository's folder or a worktree's file). */
function inGitRepository(dir: string): boolean {
  for (let at = path.resolve(dir); ; at = path.dirname(at)) {
    if (fs.existsSync(path.join(at, '.git'))) return true;
    if (path.dirname(at) === at) return false;
  }
}

/** Whether a `.gitignore` line already ignores `name` (a folder when it ends in `/`) at the root. */
function covers(lines: readonly string[], name: string): boolean {
  const bare = name.replace(/\/$/, '');
  const forms = new Set([bare, `/${bare}`, `${bare}/`, `/${bare}/`, `${bare}/*`, `/${bare}/*`]);
  return lines.some((line) => forms.has(line.trim()));
}

/**
 * Adds `<runsFolder>/` and `.env` to `<workspaceDir>/.gitignore` where it lacks them: appended
 * to an existing file (its lines kept), or a new file when the workspace is in a git repository.
 * Null when nothing was written (both ignored already, or no `.gitignore` outside git).
 */
export function protectWithGitignore(
  workspaceDir: string,
  runsFolder = 'runs',
): GitignoreChange | null {
  const file = path.join(workspaceDir, '.gitignore');
  let text: string | null = null;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    if (!inGitRepository(workspaceDir)) return null;
  }
  const lines = text === null ? [] : text.split(/\r?\n/);
  const entries: { line: string; why: string }[] = [
    { line: `${runsFolder.replace(/\/+$/, '')}/`, why: "each run's private SSH key and results" },
    { line: '.env', why: 'may hold the Runpod API key' },
  ];
  const missing = entries.filter((entry) => !covers(lines, entry.line));
  if (missing.length === 0) return null;
  const block = [
    `# Overbrainer: ${missing.map((entry) => `${entry.line} ${missing.length > 1 ? `(${entry.why})` : entry.why}`).join(', ')}`,
    ...missing.map((entry) => entry.line),
  ].join('\n');
  const before =
    text === null || text === '' ? '' : text.endsWith('\n') ? `${text}\n` : `${text}\n\n`;
  fs.writeFileSync(file, `${before}${block}\n`);
  return { file, added: missing.map((entry) => entry.line), created: text === null };
}

/** What was done, for the user: `created .gitignore with runs/ and .env (…)`. */
export function gitignoreWords(change: GitignoreChange): string {
  const names = change.added.join(' and ');
  const why = change.added
    .map((line) =>
      line === '.env'
        ? '.env may hold your API key'
        : `${line} holds each run's private SSH key and results`,
    )
    .join('; ');
  return change.created
    ? `created .gitignore with ${names} (${why})`
    : `added ${names} to .gitignore (${why})`;
}
