import * as assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { parseJsonObject, readRuns } from '../../src/ui/runsSource';

describe('ui runs source (runs/*/run.json on disk)', function () {
  let root: string;
  let runsDir: string;

  beforeEach(function () {
    root = mkdtempSync(path.join(tmpdir(), 'overbrainer-ui-runs-'));
    runsDir = path.join(root, 'runs');
  });

  afterEach(function () {
    rmSync(root, { recursive: true, force: true });
  });

  function write(id: string, file: string, content: string): void {
    mkdirSync(path.join(runsDir, id), { recursive: true });
    writeFileSync(path.join(runsDir, id, file), content);
  }

  const folder = (): { dir: string; workspaceName: string } => ({
    dir: runsDir,
    workspaceName: 'ws',
  });

  it('reads nothing and fails nothing when the runs folder does not exist', async function () {
    assert.deepEqual(await readRuns([folder()]), []);
  });

  it('summarizes run.json and pod.json', async function () {
    write(
      'tiny_20261202-100000',
      'run.json',
      JSON.stringify({
        id: 'tiny_20261202-100000',
        target: 'runpod',
        created: '2026-12-02T10:00:00Z',
        state: 'running',
        message: null,
        job: null,
      }),
    );
    write(
      'tiny_20261202-100000',
      'pod.json',
      JSON.stringify({
        version: 1,
        state: 'running',
        pod_id: 'abc123',
        gpu_type: 'NVIDIA A40',
        cost_per_hour: 0.44,
        deadline: '2026-12-02T22:00:00Z',
        deadline_unix: 1796299200,
        keep: false,
        stray_pods: ['stray1', 7],
      }),
    );
    const [run, ...rest] = await readRuns([folder()]);
    assert.equal(rest.length, 0);
    assert.deepEqual(run, {
      id: 'tiny_20261202-100000',
      dir: path.join(runsDir, 'tiny_20261202-100000'),
      workspaceName: 'ws',
      target: 'runpod',
      createdUnixS: Date.parse('2026-12-02T10:00:00Z') / 1000,
      state: 'running',
      message: null,
      problem: null,
      pod: {
        podId: 'abc123',
        state: 'running',
        gpuType: 'NVIDIA A40',
        costPerHourUsd: 0.44,
        deadlineUnixS: 1796299200,
        estimatedSpendUsd: null,
        keep: false,
        strayPodIds: ['stray1'],
      },
    });
  });

  it('skips directories without run.json and names that are not run ids', async function () {
    mkdirSync(path.join(runsDir, 'being-created'), { recursive: true });
    write('has space', 'run.json', JSON.stringify({ state: 'running' }));
    write('ok', 'run.json', JSON.stringify({ state: 'failed', message: 'exit 1' }));
    writeFileSync(path.join(runsDir, 'stray-file'), 'x');
    const runs = await readRuns([folder()]);
    assert.deepEqual(
      runs.map((r) => [r.id, r.state, r.message]),
      [['ok', 'failed', 'exit 1']],
    );
  });

  it('marks a malformed record by position, never quoting its content', async function () {
    write('bad', 'run.json', '{\n  "state": "running",\n  "secret": rpa_LEAKED\n}');
    write('unknown', 'run.json', JSON.stringify({ state: 'exploded' }));
    write('array', 'run.json', '[1]');
    write('badpod', 'run.json', JSON.stringify({ state: 'running' }));
    write('badpod', 'pod.json', '{"pod_id": "x",');
    const runs = new Map((await readRuns([folder()])).map((r) => [r.id, r]));
    const bad = runs.get('bad');
    assert.equal(bad?.state, null);
    assert.equal(bad?.problem, 'run.json is not valid JSON at line 3 column 13');
    assert.ok(!(bad?.problem ?? '').includes('LEAKED'));
    assert.equal(runs.get('unknown')?.problem, 'run.json has no known state');
    assert.equal(runs.get('array')?.problem, 'run.json is not a JSON object');
    assert.equal(runs.get('badpod')?.state, 'running');
    assert.match(runs.get('badpod')?.problem ?? '', /^pod\.json is not valid JSON/);
  });

  it('reports an unreadable file without hiding the other runs', async function () {
    if (process.getuid?.() === 0) {
      // Root reads mode-000 files; a dangling-to-directory link gives the same kind of error.
      write('locked', 'placeholder', '');
      symlinkSync(path.join(root), path.join(runsDir, 'locked', 'run.json'));
    } else {
      write('locked', 'run.json', '{}');
      chmodSync(path.join(runsDir, 'locked', 'run.json'), 0);
    }
    write('fine', 'run.json', JSON.stringify({ state: 'succeeded' }));
    const runs = new Map((await readRuns([folder()])).map((r) => [r.id, r]));
    assert.equal(runs.get('fine')?.state, 'succeeded');
    assert.match(runs.get('locked')?.problem ?? '', /^run\.json could not be read \(E[A-Z]+\)$/);
  });

  it('locates a JSON syntax error by line and column', function () {
    assert.deepEqual(parseJsonObject('{"a": 1,\n "b": }', 'x.json'), {
      ok: false,
      problem: 'x.json is not valid JSON at line 2 column 7',
    });
    assert.deepEqual(parseJsonObject('', 'x.json'), {
      ok: false,
      problem: 'x.json is not valid JSON at line 1 column 1',
    });
  });
});
