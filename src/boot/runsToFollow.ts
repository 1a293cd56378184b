import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';

/**
 * Whether any run in the given runs folders is recorded `running` or `preparing`: the runs the
 * extension follows again when it starts (resumeFollowing in src/ui/runs/following.ts decides, per run, with
 * the core's codecs and locks). This is the cheap look the thin first bundle takes right after
 * activation so that it loads the core at once only when there is something to follow: a
 * directory listing and a text search in each run.json, no schema and no JSON parse. A false
 * positive (a damaged record, a `state` elsewhere in the text) only loads the core early; a
 * false negative cannot happen for a record the core wrote, whose `state` key holds the state.
 */

/** A run.json whose state a client must take up again. */
const LIVE_STATE = /"state"\s*:\s*"(?:running|preparing)"/;

/** How many run.json are read between two yields to the event loop. */
const BATCH = 50;

export async function anyRunToFollow(runsDirs: readonly string[]): Promise<boolean> {
  for (const dir of runsDirs) {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue; // No runs folder: nothing to follow in it.
    }
    for (let start = 0; start < names.length; start += BATCH) {
      if (start > 0) await new Promise((resolve) => setImmediate(resolve));
      for (const name of names.slice(start, start + BATCH)) {
        if (name.startsWith('.')) continue;
        let text: string;
        try {
          text = readFileSync(path.join(dir, name, 'run.json'), 'utf8');
        } catch {
          continue; // Not a run, or one being created: the core's reader says which.
        }
        if (LIVE_STATE.test(text)) return true;
      }
    }
  }
  return false;
}
