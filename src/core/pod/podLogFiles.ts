/**
 * The pod's own logs copied home before it is deleted (`runs/<id>/.pod/watchdog.log` and
 * `bootstrap.log`), treated like the results:
 * - on the pod, only a regular file of the run's `.pod/` with no other name is read: a symlink,
 *   or a hard link (which may be a name of any file of the pod, its host key's among them), is
 *   never followed, and is said so; at most {@link POD_LOG_COPY_MAX_BYTES} of it, its end (a
 *   first line says what was left out);
 * - every line goes through the one redactor (../redact.ts): the API key, what is shaped like a
 *   key or a token, the pod's host key (its private block, or its base64 as the create's env
 *   carried it);
 * - at home, into a real `.pod` directory of the run (a link there is refused, as the
 *   retrieval's own directories are) by a temporary file renamed into place, so a link planted
 *   at the log's name is replaced, never written through.
 */
import * as path from 'node:path';
import type { Executor } from '../exec/executor';
import { ensureRealDir } from '../exec/localFiles';
import { shQuote } from '../exec/shell';
import { LineRedactor } from '../redact';
import { writeFileAtomicSync } from '../runs/atomic';
import type { RunRecord } from '../runs/runRecord';
import { log, type PodCtx } from './context';
import { BOOTSTRAP_LOG, WATCHDOG_LOG } from './podScripts';
import { describeError } from '../errors';

/** The most of each pod log copied home: its last bytes (the watchdog's log grows all run long). */
export const POD_LOG_COPY_MAX_BYTES = 4 * 1024 * 1024;

/** Exit codes of {@link copyScript} that refuse the file. */
const NOT_REGULAR = 4;
const LINKED = 5;

/**
 * The script that prints `<size>\n`, then the last `maxBytes` of `file`: only when it is a
 * regular file (not a symlink) with one name. Exit 3: no such file.
 */
export function copyScript(file: string, maxBytes: number): string {
  const f = shQuote(file);
  return [
    `[ -e ${f} ] || [ -h ${f} ] || exit 3`,
    `{ [ -f ${f} ] && [ ! -h ${f} ]; } || exit ${NOT_REGULAR}`,
    `set -- $(stat -c '%h %s' -- ${f}) || exit 1`,
    `[ "$1" = 1 ] || exit ${LINKED}`,
    `printf '%s\\n' "$2"`,
    `exec tail -c ${maxBytes} -- ${f}`,
    '',
  ].join('\n');
}

/** Copies the watchdog's and bootstrap's logs into runs/<id>/.pod/, best effort. */
export async function copyPodLogs(ctx: PodCtx, executor: Executor, run: RunRecord): Promise<void> {
  const local = path.join(ctx.store.runDir(run.id), '.pod');
  for (const name of [WATCHDOG_LOG, BOOTSTRAP_LOG]) {
    const remote = `${run.remoteDir}/${name}`;
    try {
      const result = await executor.exec(copyScript(remote, POD_LOG_COPY_MAX_BYTES), {
        maxOutputBytes: POD_LOG_COPY_MAX_BYTES + 64,
      });
      if (result.code === 3) continue;
      if (result.code === NOT_REGULAR || result.code === LINKED) {
        log(
          ctx,
          'warn',
          `${name} of run ${run.id} was not copied: on the pod it is ${result.code === LINKED ? 'a hard link (another name of a file that may lie outside the run folder)' : 'a symlink or not a regular file'}, which is never followed`,
        );
        continue;
      }
      if (result.code !== 0) throw new Error(`exit ${result.code ?? result.signal}`);
      const text = result.stdout.toString('utf8');
      const newline = text.indexOf('\n');
      const sizeBytes = Number(text.slice(0, newline));
      let body = text.slice(newline + 1);
      const cut = sizeBytes > POD_LOG_COPY_MAX_BYTES;
      // A cut starts mid-line: that part line goes.
      if (cut) body = body.slice(body.indexOf('\n') + 1);
      const redactor = new LineRedactor((line) => ctx.client.redact(line));
      const lines = body.split('\n').map((line) => redactor.redact(line));
      if (cut) {
        lines.unshift(
          `overbrainer: the first ${sizeBytes - Buffer.byteLength(body)} bytes of this ${sizeBytes}-byte log were left on the pod (at most ${POD_LOG_COPY_MAX_BYTES} are copied)`,
        );
      }
      await ensureRealDir(local);
      writeFileAtomicSync(local, path.basename(name), lines.join('\n'), 0o600);
    } catch (error) {
      log(ctx, 'debug', `cannot copy ${name} of run ${run.id}: ${describeError(error)}`);
    }
  }
}
