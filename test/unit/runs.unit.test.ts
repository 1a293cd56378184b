import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import {
  isAtomicTemp,
  isRunsError,
  isValidRunId,
  newPodRecord,
  projectSlug,
  RUN_FILE,
  RunStore,
  validateRunId,
  writeFileAtomicSync,
  type RunRecord,
} from '../../src/core/runs';
import { FakeClock } from '../helpers/fakeClock';
import { assertNotInError } from '../helpers/secretAsserts';

const REPO = path.resolve(__dirname, '../..');

function record(id: string, overrides: Partial<RunRecord> = {}): RunRecord {
  return {
    id,
    target: 'pod',
    created: '2026-09-22T14:30:05Z',
    remoteDir: `/workspace/overbrainer/${id}`,
    job: null,
    state: 'preparing',
    message: null,
    ...overrides,
  };
}

/** Temporary files an atomic write left behind in `dir`. */
function leftovers(dir: string): string[] {
  return fs.readdirSync(dir).filter((name) => name.endsWith('.tmp'));
}

describe('runs: IDs', () => {
  it('slugs the project name: lowercased, each run of other characters one _', () => {
    assert.equal(projectSlug('My Model'), 'my_model');
    assert.equal(projectSlug('llama--3.1 (fine) tune!'), 'llama_3_1_fine_tune_');
    assert.equal(projectSlug('Ünïcode'), '_n_code');
    assert.equal(projectSlug(''), 'run');
    assert.equal(projectSlug('a'.repeat(50)), 'a'.repeat(40));
  });

  it('accepts the early and the newer format, up to 64 characters', () => {
    for (const id of [
      '20260922-143005-a1b2',
      'my_model_20260922-143005',
      'my_model_20260922-143005_2',
      'x'.repeat(64),
    ]) {
      assert.equal(validateRunId(id), id);
      assert.ok(isValidRunId(id));
    }
  });

  it('refuses every ID that could leave runs/', () => {
    for (const id of [
      '',
      '.',
      '..',
      '../x',
      '../../etc',
      '/tmp/x',
      'a/b',
      'a\\b',
      'a b',
      'a\0b',
      'ä',
      'x'.repeat(65),
      'a\nb',
      '-rf', // an argument, never an option
      '--help',
    ]) {
      assert.equal(isValidRunId(id), false, JSON.stringify(id));
      assert.throws(
        () => validateRunId(id),
        (error: unknown) =>
          isRunsError(error, 'invalid_id') &&
          /is not a valid run ID/.test(error.message) &&
          /runs ls/.test(error.hint),
      );
    }
  });
});

describe('runs: RunStore', () => {
  let dir: string;
  let runsDir: string;
  let clock: FakeClock;
  let store: RunStore;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-runs-'));
    runsDir = path.join(dir, 'runs');
    clock = new FakeClock(Date.UTC(2026, 8, 29, 12, 0, 0, 750));
    store = new RunStore(runsDir, clock);
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('creates runs with <slug>_<UTC stamp>, then _2, _3 in the same second', () => {
    const options = {
      project: 'My Model',
      target: 'pod',
      remoteDir: (id: string) => `/workspace/overbrainer/${id}`,
    };
    const first = store.create(options);
    assert.deepEqual(first, {
      id: 'my_model_20260929-120000',
      target: 'pod',
      created: '2026-09-29T12:00:00Z',
      remoteDir: '/workspace/overbrainer/my_model_20260929-120000',
      job: null,
      state: 'preparing',
      message: null,
    });
    assert.equal(store.create(options).id, 'my_model_20260929-120000_2');
    assert.equal(store.create(options).id, 'my_model_20260929-120000_3');
    assert.deepEqual(store.loadRun(first.id), first);
  });

  it('an existing folder (another process, another checkout) makes the next ID', () => {
    fs.mkdirSync(path.join(runsDir, 'p_20260929-120000'), { recursive: true });
    assert.equal(
      store.create({ project: 'p', target: 't', remoteDir: (id) => id }).id,
      'p_20260929-120000_2',
    );
  });

  it('saves run.json atomically with the spec names, mode 0600, and loads it back', () => {
    const run = record('r1', {
      job: { dir: '/workspace/overbrainer/r1', pid: 4242, container: null },
      state: 'running',
      snapshot: { checkpoint: 'checkpoint-40', step: 40, reason: 'deadline' },
      resumedFrom: 'r0',
    });
    store.saveRun(run);
    const file = path.join(runsDir, 'r1', RUN_FILE);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.deepEqual(JSON.parse(fs.readFileSync(file, 'utf8')), {
      id: 'r1',
      target: 'pod',
      created: '2026-09-22T14:30:05Z',
      remote_dir: '/workspace/overbrainer/r1',
      job: { dir: '/workspace/overbrainer/r1', pid: 4242, container: null },
      state: 'running',
      message: null,
      snapshot: { checkpoint: 'checkpoint-40', step: 40, reason: 'deadline' },
      resumed_from: 'r0',
    });
    assert.deepEqual(store.loadRun('r1'), run);
    assert.deepEqual(leftovers(path.join(runsDir, 'r1')), []);
  });

  /** Run r1's run.json as an older or newer version wrote it: `fields` beside the known ones. */
  function writeR1(fields: Record<string, unknown>): void {
    fs.mkdirSync(path.join(runsDir, 'r1'), { recursive: true });
    const json = { id: 'r1', target: 't', created: 'c', remote_dir: '/r', job: null, ...fields };
    fs.writeFileSync(path.join(runsDir, 'r1', RUN_FILE), JSON.stringify(json));
  }

  /** Run r1's run.json as the store saved it back with another message. */
  function savedR1(loaded: ReturnType<RunStore['loadRun']>): Record<string, unknown> {
    store.saveRun({ ...loaded, message: 'changed' });
    return JSON.parse(fs.readFileSync(path.join(runsDir, 'r1', RUN_FILE), 'utf8')) as Record<
      string,
      unknown
    >;
  }

  it('keeps fields it does not know', () => {
    writeR1({ state: 'failed', message: 'm', later: { x: 1 } });
    const saved = savedR1(store.loadRun('r1'));
    assert.deepEqual(saved.later, { x: 1 });
    assert.equal(saved.message, 'changed');
  });

  it('run.json holds only fields something writes: an older record\'s "snapshots" is kept as unknown, never read', () => {
    writeR1({ state: 'succeeded', message: null, snapshots: true });
    const loaded = store.loadRun('r1');
    assert.equal('snapshots' in loaded, false, 'nothing writes or reads "snapshots"');
    assert.deepEqual(loaded.extraFields, { snapshots: true });
    const saved = savedR1(loaded);
    assert.equal(saved.snapshots, true, 'written back unchanged, as any unknown field');
    // A new run writes neither.
    const fresh = store.create({ project: 'p', target: 't', remoteDir: (id) => `/w/${id}` });
    const text = fs.readFileSync(path.join(runsDir, fresh.id, RUN_FILE), 'utf8');
    assert.doesNotMatch(text, /snapshots/);
  });

  it("refuses a job in a container (an older version's docker runtime), which this version cannot follow or stop", () => {
    fs.mkdirSync(path.join(runsDir, 'c1'), { recursive: true });
    const text = `{\n  "id": "c1",\n  "target": "t",\n  "created": "c",\n  "remote_dir": "/w",\n  "job": {"dir": "/w/run", "pid": 42, "container": "ob-c1"},\n  "state": "running",\n  "message": null\n}\n`;
    fs.writeFileSync(path.join(runsDir, 'c1', RUN_FILE), text);
    assert.throws(
      () => store.loadRun('c1'),
      (error: unknown) =>
        isRunsError(error, 'invalid') &&
        error.line === 6 &&
        /job runs in a container \("job\.container"\), which this version can neither follow nor stop/.test(
          error.message,
        ) &&
        !error.message.includes('ob-c1') &&
        /docker ps/.test(error.hint ?? ''),
    );
  });

  it('refuses a job pid of 0 or 1, on load and on save', () => {
    for (const pid of [0, 1]) {
      fs.mkdirSync(path.join(runsDir, `p${pid}`), { recursive: true });
      const text = `{\n  "id": "p${pid}",\n  "target": "t",\n  "created": "c",\n  "remote_dir": "/w",\n  "job": {"dir": "/w/run", "pid": ${pid}, "container": null},\n  "state": "running",\n  "message": null\n}\n`;
      fs.writeFileSync(path.join(runsDir, `p${pid}`, RUN_FILE), text);
      assert.throws(
        () => store.loadRun(`p${pid}`),
        (error: unknown) =>
          isRunsError(error, 'invalid') &&
          error.line === 6 &&
          error.column === 35 &&
          /"job\.pid"/.test(error.message),
      );
      assert.throws(
        () => store.saveRun(record('ok', { job: { dir: '/w', pid, container: null } })),
        RangeError,
      );
    }
  });

  it('a malformed run.json is reported by line and column only', () => {
    const MARKER = 'MARKER-0d4a8e52-never-printed';
    fs.mkdirSync(path.join(runsDir, 'r1'), { recursive: true });
    const file = path.join(runsDir, 'r1', RUN_FILE);
    const cases: [string, number, number, RegExp][] = [
      [`{\n  "id": "r1",\n  "state": "${MARKER}"\n}\n`, 1, 1, /"target" is missing/],
      [`{\n  "id": "r1",\n  "target": ${MARKER}\n}\n`, 3, 13, /not valid JSON/],
      ['', 1, 1, /not valid JSON/],
      [
        `{"id": "r1", "target": "t", "created": "c", "remote_dir": "/w", "job": null, "state": "${MARKER}", "message": null}`,
        1,
        87,
        /"state" has a value/,
      ],
    ];
    for (const [content, line, column, what] of cases) {
      fs.writeFileSync(file, content);
      let caught: unknown;
      try {
        store.loadRun('r1');
      } catch (error) {
        caught = error;
      }
      assert.ok(isRunsError(caught, 'invalid'));
      assert.deepEqual([caught.line, caught.column], [line, column], caught.message);
      assert.match(caught.message, what);
      assert.match(caught.message, /is not a valid run record/);
      assertNotInError(caught, MARKER);
    }
  });

  it('refuses a record too big to be one, or a folder in its place', () => {
    fs.mkdirSync(path.join(runsDir, 'big'), { recursive: true });
    fs.writeFileSync(path.join(runsDir, 'big', RUN_FILE), ' '.repeat(5 * 1024 * 1024));
    assert.throws(
      () => store.loadRun('big'),
      (error: unknown) => isRunsError(error, 'invalid'),
    );
    fs.mkdirSync(path.join(runsDir, 'dir', RUN_FILE), { recursive: true });
    assert.throws(
      () => store.loadRun('dir'),
      (error: unknown) => isRunsError(error, 'invalid'),
    );
  });

  it('a copied run folder is refused rather than saved under the other name', () => {
    store.saveRun(record('a'));
    fs.cpSync(path.join(runsDir, 'a'), path.join(runsDir, 'b'), { recursive: true });
    assert.throws(
      () => store.loadRun('b'),
      (error: unknown) => isRunsError(error, 'invalid') && /another run/.test(error.message),
    );
  });

  it('an unknown run is not found', () => {
    assert.throws(
      () => store.loadRun('nope'),
      (error: unknown) => isRunsError(error, 'not_found') && /runs ls/.test(error.hint),
    );
    assert.throws(
      () => store.lock('nope', 'me'),
      (error: unknown) => isRunsError(error, 'not_found'),
    );
  });

  it('validates the ID on every path, and creates nothing outside runs/', () => {
    const before = fs.readdirSync(dir);
    for (const id of ['../escape', '/tmp/abs', 'a/b', '..', '']) {
      const refused = (fn: () => unknown): void =>
        assert.throws(fn, (error: unknown) => isRunsError(error, 'invalid_id'), id);
      refused(() => store.runDir(id));
      refused(() => store.loadRun(id));
      refused(() => store.saveRun(record(id)));
      refused(() => store.loadPod(id));
      refused(() => store.savePod(newPodRecord(id, false, 1, 'ssh-ed25519 AAAAhost')));
      refused(() => store.sshDir(id));
      refused(() => store.lock(id, 'me'));
      refused(() => store.lockHolder(id));
    }
    assert.deepEqual(fs.readdirSync(dir), before);
    assert.equal(fs.existsSync(runsDir), false);
  });

  it('creates ssh/ with mode 700 whatever the umask, and tightens an existing one', () => {
    const old = process.umask(0o022);
    try {
      const ssh = store.sshDir('r1');
      assert.equal(fs.statSync(ssh).mode & 0o777, 0o700);
      fs.chmodSync(ssh, 0o755);
      assert.equal(store.sshDir('r1'), ssh);
      assert.equal(fs.statSync(ssh).mode & 0o777, 0o700);
    } finally {
      process.umask(old);
    }
  });

  it('lists runs newest first, skips damaged records with a warning and changes nothing', () => {
    store.saveRun(record('20260921-000000-aaaa', { created: '2026-09-21T00:00:00Z' }));
    store.saveRun(record('p_20260922-143005', { created: '2026-09-22T14:30:05Z' }));
    store.saveRun(record('p_20260922-143005_2', { created: '2026-09-22T14:30:05Z' }));
    store.saveRun(record('p_20260922-143005_10', { created: '2026-09-22T14:30:05Z' }));
    store.saveRun(record('p_20260923-000000', { created: '2026-09-23T00:00:00Z' }));
    fs.mkdirSync(path.join(runsDir, 'being-created'));
    fs.mkdirSync(path.join(runsDir, '.hf-cache'));
    fs.writeFileSync(path.join(runsDir, 'stray-file'), 'x');
    fs.mkdirSync(path.join(runsDir, 'broken'));
    const damaged = '{"id": "broken", "SECRET": ';
    fs.writeFileSync(path.join(runsDir, 'broken', RUN_FILE), damaged);
    const { runs, warnings } = store.list();
    assert.deepEqual(
      runs.map((run) => run.id),
      [
        'p_20260923-000000',
        'p_20260922-143005_10',
        'p_20260922-143005_2',
        'p_20260922-143005',
        '20260921-000000-aaaa',
      ],
    );
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0]?.runId, 'broken');
    assert.match(warnings[0]?.message ?? '', /skipping run broken: .* \(line 1, column 28\)/);
    assert.doesNotMatch(warnings[0]?.message ?? '', /SECRET/);
    assert.equal(fs.readFileSync(path.join(runsDir, 'broken', RUN_FILE), 'utf8'), damaged);
  });

  it('lists nothing, without creating runs/, before the first run', () => {
    assert.deepEqual(store.list(), { runs: [], warnings: [] });
    assert.equal(fs.existsSync(runsDir), false);
  });
});

describe('runs: atomic writes', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-atomic-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('replaces the file with a private unique temp file, then renames it', () => {
    fs.writeFileSync(path.join(dir, 'f.json'), 'old', { mode: 0o644 });
    writeFileAtomicSync(dir, 'f.json', 'new');
    assert.equal(fs.readFileSync(path.join(dir, 'f.json'), 'utf8'), 'new');
    assert.equal(fs.statSync(path.join(dir, 'f.json')).mode & 0o777, 0o600);
    assert.deepEqual(fs.readdirSync(dir), ['f.json']);
    assert.ok(isAtomicTemp('.run.json.0123456789abcdef.tmp'));
    assert.ok(!isAtomicTemp('run.json'));
  });

  it('a failed save leaves the old record and no temporary file', () => {
    const store = new RunStore(path.join(dir, 'runs'), new FakeClock());
    store.saveRun(record('r1', { message: 'kept' }));
    const runDir = path.join(dir, 'runs', 'r1');
    // The rename cannot replace a non-empty directory: the write fails after the temp file exists.
    fs.renameSync(path.join(runDir, RUN_FILE), path.join(dir, 'saved.json'));
    fs.mkdirSync(path.join(runDir, RUN_FILE, 'inner'), { recursive: true });
    assert.throws(
      () => store.saveRun(record('r1', { message: 'lost' })),
      (error: unknown) => isRunsError(error, 'io') && /EISDIR|ENOTEMPTY|EEXIST/.test(error.message),
    );
    assert.deepEqual(leftovers(runDir), []);
  });

  it('a temporary file left by a crash does not disturb the record', () => {
    const store = new RunStore(path.join(dir, 'runs'), new FakeClock());
    store.saveRun(record('r1', { message: 'good' }));
    fs.writeFileSync(
      path.join(dir, 'runs', 'r1', '.run.json.00000000deadbeef.tmp'),
      '{"id": "r1", "tar',
    );
    assert.equal(store.loadRun('r1').message, 'good');
    store.saveRun(record('r1', { message: 'better' }));
    assert.equal(store.loadRun('r1').message, 'better');
  });

  it('survives a writer killed mid-save, while another process reads', async function () {
    this.timeout(20_000);
    const runsDir = path.join(dir, 'runs');
    const store = new RunStore(runsDir, new FakeClock());
    store.saveRun(record('r1'));
    const script = path.join(dir, 'writer.ts');
    fs.writeFileSync(
      script,
      `import { RunStore } from ${JSON.stringify(path.join(REPO, 'src/core/runs/index.ts'))};
import { systemClock } from ${JSON.stringify(path.join(REPO, 'src/core/clock.ts'))};
const store = new RunStore(process.argv[2] as string, systemClock);
const run = store.loadRun('r1');
process.stdout.write('ready\\n');
for (let i = 0; ; i++) store.saveRun({ ...run, message: String(i % 10).repeat((i * 7919) % 200_000) });
`,
    );
    const child = spawn(process.execPath, ['--import', 'tsx', script, runsDir], {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      await new Promise<void>((resolve, reject) => {
        createInterface({ input: child.stdout }).once('line', () => resolve());
        child.once('exit', (code) => reject(new Error(`writer exited ${code}: ${stderr}`)));
      });
      // Read while it writes: every read sees one whole record.
      const messages = new Set<string>();
      // Until many different saves were seen (a loaded machine may need longer).
      const endAt = Date.now() + 10_000;
      let reads = 0;
      while (Date.now() < endAt && (reads < 50 || messages.size < 5)) {
        const message = store.loadRun('r1').message ?? '';
        assert.ok(/^(\d)\1*$|^$/.test(message), 'a read saw a mixed record');
        messages.add(message.slice(0, 1) + message.length);
        reads++;
      }
      assert.ok(reads >= 50 && messages.size >= 5, `reads ${reads}, distinct ${messages.size}`);
    } finally {
      child.kill('SIGKILL');
      await new Promise((resolve) =>
        child.exitCode !== null || child.signalCode !== null
          ? resolve(null)
          : child.once('exit', resolve),
      );
    }
    // Killed at any point of a save: the record is still whole.
    const after = store.loadRun('r1');
    assert.equal(after.id, 'r1');
    assert.ok(/^(\d)\1*$|^$/.test(after.message ?? ''));
    assert.ok(leftovers(path.join(runsDir, 'r1')).every(isAtomicTemp));
  });
});
