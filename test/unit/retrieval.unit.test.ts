import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  ManifestError,
  manifestScript,
  normalizeEntry,
  parseListing,
  parseManifest,
  RetrievalError,
  type ManifestErrorKind,
} from '../../src/core/train/retrieval';

const ENTRIES = ['output/', 'metrics.jsonl', 'job.log'];
const EXCLUDES = ['checkpoint-*'];

function sha(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** A manifest as the pod prints it: `<hex>  <name>\0` per record. */
function manifest(...records: (string | Buffer)[]): Buffer {
  return Buffer.concat(
    records.map((record) =>
      Buffer.concat([
        typeof record === 'string' ? Buffer.from(record, 'utf8') : record,
        Buffer.from([0]),
      ]),
    ),
  );
}

function rec(name: string | Buffer, hash = sha(String(name))): Buffer {
  return Buffer.concat([
    Buffer.from(`${hash}  `),
    typeof name === 'string' ? Buffer.from(name) : name,
  ]);
}

function refused(buffer: Buffer, kind: ManifestErrorKind, file?: string): ManifestError {
  let caught: unknown;
  try {
    parseManifest(buffer, { entries: ENTRIES, excludes: EXCLUDES });
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof ManifestError, `expected a ManifestError, got ${String(caught)}`);
  assert.equal(caught.kind, kind);
  if (file !== undefined) assert.equal(caught.file, file);
  assert.match(caught.message, /nothing was written outside the run directory/);
  assert.match(caught.message, /Nothing was downloaded/);
  return caught;
}

describe('parseManifest', () => {
  it('reads NUL-framed records with any name every platform reads the same', () => {
    const names = [
      './output/adapter_model.safetensors',
      './output/with space',
      "./output/quote'single",
      './output/ünïcødé/模型.bin',
      './output/-leading-dash',
      './metrics.jsonl',
    ];
    const entries = parseManifest(manifest(...names.map((name) => rec(name))), {
      entries: ENTRIES,
      excludes: EXCLUDES,
    });
    assert.deepEqual(
      entries,
      names.map((name) => ({ path: name.slice(2), sha256: sha(name) })),
    );
  });

  it('takes sha256sum binary-mode records (` *`) and an empty list', () => {
    const hash = sha('x');
    assert.deepEqual(parseManifest(manifest(`${hash} *./job.log`), { entries: ENTRIES }), [
      { path: 'job.log', sha256: hash },
    ]);
    assert.deepEqual(parseManifest(Buffer.alloc(0), { entries: ENTRIES }), []);
  });

  it('refuses `..` anywhere in a path', () => {
    refused(
      manifest(rec('./output/../../../etc/passwd')),
      'traversal',
      './output/../../../etc/passwd',
    );
    refused(manifest(rec('./output/..')), 'traversal');
    refused(manifest(rec('./../output/x')), 'traversal');
  });

  it('refuses, on every platform, a name another platform reads differently, naming it and why', () => {
    // On Windows `..\\..\\escape.txt` climbs out of output/; a colon names a drive or a stream.
    const cases: [string, RegExp][] = [
      ['./output/..\\..\\escape.txt', /backslash/],
      ['./output/C:evil', /colon/],
      ['./output/new\nline', /control character/],
      ['./output/tab\there', /control character/],
      ['./output/CON.txt', /device name on Windows/],
      ['./output/lpt1', /device name on Windows/],
      ['./output/dot.', /ends with a dot or a space/],
      ['./output/space ', /ends with a dot or a space/],
      ['./output/what?', /Windows does not allow/],
    ];
    for (const [name, why] of cases) {
      const error = refused(manifest(rec('./output/model.bin'), rec(name)), 'unportable', name);
      assert.match(error.message, why);
      assert.ok(error.message.includes(JSON.stringify(name)), error.message);
      assert.throws(
        () => parseListing(Buffer.from(`${name}\0`), { entries: ENTRIES }),
        (e: unknown) => e instanceof ManifestError && e.kind === 'unportable',
      );
    }
  });

  it('refuses two names that are one file where case is not told apart (Windows, macOS)', () => {
    refused(manifest(rec('./output/Model.bin'), rec('./output/model.bin')), 'conflict');
    refused(manifest(rec('./output/Sub'), rec('./output/sub/x')), 'conflict');
    refused(manifest(rec('./output/sub/x'), rec('./output/SUB')), 'conflict');
    // é composed and decomposed: one name on macOS.
    refused(manifest(rec('./output/caf\u00e9'), rec('./output/cafe\u0301')), 'conflict');
  });

  it('refuses absolute paths and names without ./', () => {
    refused(manifest(rec('/etc/passwd')), 'absolute', '/etc/passwd');
    refused(manifest(rec('output/x')), 'malformed', 'output/x');
  });

  it('refuses empty names and empty or `.` segments', () => {
    refused(manifest(rec('')), 'empty_name');
    refused(manifest(rec('./')), 'empty_name');
    refused(manifest(rec('./output//x')), 'malformed');
    refused(manifest(rec('./output/./x')), 'malformed');
    refused(manifest(rec('./output/')), 'malformed');
  });

  it('refuses NUL tricks: a name split by a NUL, a missing final NUL, a bare record', () => {
    // `./output/a\0../../x` would look like a safe name to a C-string reader.
    refused(
      Buffer.concat([rec('./output/a'), Buffer.from('\0../../evil\0')]),
      'malformed',
      '../../evil',
    );
    refused(Buffer.from(`${sha('a')}  ./output/a`), 'malformed');
    refused(manifest(rec('./output/a'), ''), 'malformed');
  });

  it('refuses malformed hashes', () => {
    refused(manifest(`${'A'.repeat(64)}  ./output/x`), 'malformed');
    refused(manifest(`${'a'.repeat(63)}  ./output/x`), 'malformed');
    refused(manifest(`${sha('x')} ./output/x`), 'malformed');
  });

  it('refuses the same name twice and a name that is both a file and a directory', () => {
    refused(manifest(rec('./output/a'), rec('./output/a')), 'duplicate', './output/a');
    refused(manifest(rec('./output/a'), rec('./output/a/b')), 'conflict', './output/a/b');
    refused(manifest(rec('./output/a/b'), rec('./output/a')), 'conflict', './output/a');
  });

  it('refuses names outside the requested entries, and excluded ones', () => {
    refused(manifest(rec('./ssh/id_ed25519')), 'outside_entries', './ssh/id_ed25519');
    refused(manifest(rec('./outputs/x')), 'outside_entries');
    refused(manifest(rec('./metrics.jsonl.bak')), 'outside_entries');
    refused(manifest(rec('./output/checkpoint-10/model.bin')), 'excluded');
  });

  it('refuses overly long names, too many entries and invalid UTF-8', () => {
    refused(manifest(rec(`./output/${'a'.repeat(256)}`)), 'too_long');
    refused(manifest(rec(`./output/${'abcdefgh/'.repeat(500)}x`)), 'too_long');
    const many = Array.from({ length: 4 }, (_, i) => rec(`./output/f${i}`));
    assert.throws(
      () => parseManifest(manifest(...many), { entries: ENTRIES, maxEntries: 3 }),
      (error: unknown) => error instanceof ManifestError && error.kind === 'too_many',
    );
    refused(
      manifest(rec(Buffer.from([0x2e, 0x2f, 0x6f, 0x75, 0x74, 0x70, 0x75, 0x74, 0x2f, 0xff]))),
      'not_utf8',
    );
  });

  it('names the file in the message with control characters escaped', () => {
    const error = refused(manifest(rec('./output/\u001b[31m/../x')), 'traversal');
    assert.ok(!error.message.includes('\u001b'), 'no raw escape sequence in the message');
    assert.match(error.message, /\\u001b\[31m/);
  });
});

describe('parseListing', () => {
  it('reads `./path\\0` records with the same checks', () => {
    assert.deepEqual(parseListing(Buffer.from('./output/a b\0./job.log\0'), { entries: ENTRIES }), [
      'output/a b',
      'job.log',
    ]);
    assert.throws(
      () => parseListing(Buffer.from('./output/../../x\0'), { entries: ENTRIES }),
      (error: unknown) => error instanceof ManifestError && error.kind === 'traversal',
    );
  });
});

describe('normalizeEntry and manifestScript', () => {
  it('normalizes entries and refuses unsafe or reserved ones', () => {
    assert.equal(normalizeEntry('./output/'), 'output');
    assert.equal(normalizeEntry('metrics.jsonl'), 'metrics.jsonl');
    for (const bad of ['../x', '/abs', '', 'a/../b', '.retrieving']) {
      assert.throws(() => normalizeEntry(bad), RetrievalError, bad);
    }
  });

  it('quotes every entry, glob and the run dir for sh', () => {
    const script = manifestScript("/work/it's here", ['output/', "we'ird"], ["check'point-*"]);
    assert.match(script, /cd -- '\/work\/it'\\''s here'/);
    assert.match(script, /'\.\/we'\\''ird'/);
    assert.match(script, /-name 'check'\\''point-\*'/);
    // `./output/` becomes `./output`: a trailing slash would make find follow a symlink.
    assert.match(script, /'\.\/output'/);
    assert.doesNotMatch(script, /'\.\/output\/'/);
  });
});
