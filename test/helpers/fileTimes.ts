/**
 * A mocha root-hook plugin for the integration tier: with OVERBRAINER_FILE_TIMES set, each test
 * file's wall time (its first hook to its last) is appended to that file as `<seconds> <file>`,
 * so `scripts/test.sh` can print the files slowest first — the tier runs three files at a time,
 * so its length is set by how the long ones are spread.
 */
import { appendFileSync } from 'node:fs';
import { basename } from 'node:path';

let startedMs = 0;

export const mochaHooks = {
  beforeAll(): void {
    startedMs = Date.now();
  },
  afterAll(this: Mocha.Context): void {
    const out = process.env.OVERBRAINER_FILE_TIMES;
    const file = this.test?.parent?.suites[0]?.file;
    if (!out || file === undefined) return;
    appendFileSync(out, `${((Date.now() - startedMs) / 1000).toFixed(1)} ${basename(file)}\n`);
  },
};
