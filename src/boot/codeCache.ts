import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import Module from 'node:module';
import * as path from 'node:path';
import { Script } from 'node:vm';

/** What the loader tells its caller (the log): a cache saved, or why one did not serve. */
export type CodeCacheNote = (message: string) => void;

export interface CachedModule<T> {
  exports: T;
  /** Whether V8 took its code from the cache (false: compiled, the first load of this build). */
  cached: boolean;
  /**
   * Writes V8's code for the module as it is now (the functions that ran so far are compiled:
   * call it once the first work is done) unless the cache already served; never throws.
   */
  saveCache(): void;
}

/**
 * Requires the CommonJS file `file` as Node's require would (its own require, module, exports,
 * __filename, __dirname), but compiled with V8's code cache kept in `cacheDir`: the extension
 * host keeps none for extensions, and compiling the core's bundle was most of its load time.
 * The cache is keyed by the source's SHA-256 and the Node version: V8 refuses a damaged cache or
 * one of another V8, but of the source it checks only the length, so a cache of other code of
 * the same length would run that other code. Reading or writing the cache can only cost time,
 * never the load: a refused cache is compiled past, one that cannot be written is left alone.
 */
export function requireWithCodeCache<T>(
  file: string,
  cacheDir: string,
  note: CodeCacheNote,
): CachedModule<T> {
  const source = readFileSync(file, 'utf8');
  const key = createHash('sha256').update(process.version).update(source).digest('hex');
  const cacheFile = path.join(cacheDir, `${path.basename(file)}.${key.slice(0, 16)}.v8cache`);
  let cachedData: Buffer | undefined;
  try {
    cachedData = readFileSync(cacheFile);
  } catch {
    // No cache yet (the first load of this build): compiled as usual, saved by saveCache.
  }
  const script = new Script(Module.wrap(source), {
    filename: file,
    ...(cachedData ? { cachedData } : {}),
  });
  const served = cachedData !== undefined && !script.cachedDataRejected;
  if (cachedData && !served) note(`the code cache ${cacheFile} was refused; compiled instead`);
  const module = { exports: {} as T };
  const wrapper = script.runInThisContext() as (
    exports: unknown,
    require: NodeJS.Require,
    module: unknown,
    filename: string,
    dirname: string,
  ) => void;
  wrapper.call(
    module.exports,
    module.exports,
    Module.createRequire(file),
    module,
    file,
    path.dirname(file),
  );
  let saved = served;
  return {
    exports: module.exports,
    cached: served,
    saveCache: () => {
      if (saved) return;
      saved = true;
      try {
        mkdirSync(cacheDir, { recursive: true });
        // The caches of earlier builds of this file serve no more.
        const prefix = `${path.basename(file)}.`;
        for (const name of readdirSync(cacheDir)) {
          if (name.startsWith(prefix) && name.endsWith('.v8cache')) {
            rmSync(path.join(cacheDir, name), { force: true });
          }
        }
        const temporary = `${cacheFile}.${process.pid}.tmp`;
        const data = script.createCachedData();
        writeFileSync(temporary, data);
        renameSync(temporary, cacheFile);
        note(`saved ${cacheFile} (${Math.round(data.length / 1024)} KiB)`);
      } catch (error) {
        note(
          `the code cache could not be written: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
    },
  };
}
