import { readdirSync, readFileSync, type Dirent } from 'node:fs';
import * as path from 'node:path';

/**
 * The Overbrainer log channel as VS Code writes it to disk: one `Overbrainer.log` per extension
 * host that loaded the extension, under code-server's `user-data/logs`. Reading the files is
 * a wait on a state that needs no UI: Show Logs through the palette before activation finds no
 * command (an error to dismiss), and its pick of a run's log waited 3 s when there was none.
 */

/** Every file under `logsDir` (code-server's user-data/logs) whose name matches, in path order. */
export function logFiles(logsDir: string, name: RegExp): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(file);
      else if (name.test(entry.name)) found.push(file);
    }
  };
  walk(logsDir);
  return found.sort();
}

/** Every `Overbrainer.log` under `logsDir`, in path order (one per extension host). */
export function overbrainerLogFiles(logsDir: string): string[] {
  return logFiles(logsDir, /^Overbrainer\.log$/);
}

/** The text of every Overbrainer.log under `logsDir`, each after a `--- <file>` line. */
export function overbrainerLogs(logsDir: string): string {
  const files = overbrainerLogFiles(logsDir);
  if (files.length === 0) return '(no Overbrainer.log yet)';
  return files
    .map((file) => `--- ${path.relative(logsDir, file)}\n${readFileSync(file, 'utf8').trim()}`)
    .join('\n');
}

/** The activation lines logged so far ("Overbrainer <version> activated in N ms."), oldest first. */
export function loggedActivations(logsDir: string): string[] {
  return overbrainerLogFiles(logsDir).flatMap((file) =>
    [...readFileSync(file, 'utf8').matchAll(/Overbrainer \S+ activated in [\d.]+ ms\./g)].map(
      (match) => match[0],
    ),
  );
}

/**
 * Waits until the extension has activated `count` times in this code-server (once per extension
 * host: 2 after a restarted host); returns the last activation line.
 */
export async function untilActivated(
  logsDir: string,
  timeoutMs: number,
  count = 1,
): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const line = loggedActivations(logsDir)[count - 1];
    if (line !== undefined) return line;
    if (Date.now() > deadline) {
      throw new Error(`the extension did not log activation ${count} within ${timeoutMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
