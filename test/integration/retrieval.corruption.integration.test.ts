/**
 * Retrieval still catches every wrong byte now that big files are hashed on the pod by
 * OpenSSL (where it has one) and streamed by `dd` (from further in, `head -c`): a byte changed in transit, and a
 * pod-side hash that does not match the data, each fail the retrieval with the file named
 * and move nothing into place.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeMismatches, retrieve } from '../../src/core/train/retrieval';
import { podWithTools } from '../helpers/podTools';

/** Every byte of what `tool` sends goes up by one: the stream's data is not the file's. */
const corrupting = (tool: string): string =>
  `#!/bin/sh\n/usr/bin/${tool} "$@" | tr '\\000-\\377' '\\001-\\377\\000'\n`;

/** OpenSSL that passes the self-test (3 bytes) but gives another hash for anything bigger. */
const LYING_OPENSSL =
  `#!/bin/sh\nt=$(mktemp); cat > "$t"\n` +
  `if [ "$(wc -c < "$t")" -gt 1000 ]; then /usr/bin/openssl "$@" < "$t" | tr '0-9a-f' '1-9a-f0'; ` +
  `else /usr/bin/openssl "$@" < "$t"; fi; s=$?; rm -f "$t"; exit $s\n`;

describe('retrieval catches a wrong byte of a big file', function () {
  this.timeout(120_000);
  let local: string;

  beforeEach(() => {
    local = mkdtempSync(join(tmpdir(), 'ob-retrieve-'));
  });
  afterEach(() => rmSync(local, { recursive: true, force: true }));

  const cases: [string, Record<string, string>][] = [
    ['changed in transit (the stream)', { dd: corrupting('dd'), head: corrupting('head') }],
    ["hashed wrong on the pod (the manifest's hasher)", { openssl: LYING_OPENSSL }],
  ];
  for (const [label, tools] of cases) {
    it(`a big file whose bytes were ${label} fails verification, named, and nothing is moved`, async () => {
      const pod = await podWithTools(tools);
      try {
        const remote = join(pod.sshd.root, 'run');
        mkdirSync(join(remote, 'output'), { recursive: true });
        // One big file alone: streamed through an exec channel (`dd`), hashed by OpenSSL.
        writeFileSync(join(remote, 'output', 'model.bin'), randomBytes(3 * 1024 * 1024));
        const localRunDir = join(local, 'runs', 'r1');
        const result = await retrieve({
          executor: pod.executor,
          remoteRunDir: remote,
          localRunDir,
          entries: ['output/'],
        });
        assert.equal(result.verified, false);
        assert.deepEqual(
          result.mismatches.map((m) => [m.file, m.reason]),
          [['output/model.bin', 'hash']],
        );
        assert.match(describeMismatches(result.mismatches), /output\/model\.bin/);
        assert.equal(existsSync(join(localRunDir, 'output', 'model.bin')), false);
      } finally {
        await pod.close();
      }
    });
  }
});
