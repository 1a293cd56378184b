import * as assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { encodePodRecord } from '../../src/core/runs/podJson';
import { newPodRecord } from '../../src/core/runs/podRecord';
import { encodeRunRecord, type RunRecord } from '../../src/core/runs/runRecord';
import { RunStore } from '../../src/core/runs/store';
import {
  MAX_LISTED_ENTRIES,
  readDirChildren,
  readRunChildren,
} from '../../src/ui/runs/runChildren';
import {
  createdFromId,
  METRICS_TAIL_BYTES,
  parseJsonObject,
  readMetricsSummary,
  readRuns,
  summarizeMetrics,
} from '../../src/ui/runs/runsSource';
import { FakeClock } from '../helpers/fakeClock';

const HOST_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl';

function runRecord(id: string, overrides: Partial<RunRecord> = {}): string {
  return encodeRunRecord({
    id,
    target: 'runpod',
    created: '2026-12-02T10:00:00Z',
    remoteDir: `/workspace/${id}`,
    job: null,
    state: 'running',
    message: null,
    ...overrides,
  });
}

function podRecord(id: string, edit: (pod: ReturnType<typeof newPodRecord>) => void = () => {}) {
  const pod = newPodRecord(id, false, 1, HOST_KEY);
  const t = Date.parse('2026-12-02T10:00:10Z');
  pod.beginAttempt('NVIDIA A40', t, 12);
  pod.created({ id: 'abc123', costPerHourUsd: 0.44 }, 'created', t);
  pod.state = 'running';
  edit(pod);
  return encodePodRecord(pod);
}

describe('ui runs source (runs/*/run.json through the core codecs)', function () {
  let root: string;
  let runsDir: string;

  beforeEach(function () {
    root = mkdtempSync(path.join(tmpdir(), 'overbrainer-ui-runs-'));
    runsDir = path.join(root, 'runs');
  });

  afterEach(function () {
    rmSync(root, { recursive: true, force: true });
  });

  function write(id: string, file: string, content: string | Buffer): void {
    mkdirSync(path.dirname(path.join(runsDir, id, file)), { recursive: true });
    writeFileSync(path.join(runsDir, id, file), content);
  }

  const folder = (): { dir: string; workspaceName: string } => ({
    dir: runsDir,
    workspaceName: 'ws',
  });

  it('reads nothing and fails nothing when the runs folder does not exist', async function () {
    assert.deepEqual(await readRuns([folder()]), []);
  });

  it('summarizes run.json and pod.json as the run store writes them', async function () {
    const clock = new FakeClock(Date.parse('2026-12-02T10:00:00Z'));
    const store = new RunStore(runsDir, clock);
    const created = store.create({ project: 'tiny', target: 'runpod', remoteDir: (id) => id });
    const id = created.id;
    write(
      id,
      'pod.json',
      podRecord(id, (pod) => pod.setStrayPods(['stray1'])),
    );
    const [run, ...rest] = await readRuns([folder()]);
    assert.equal(rest.length, 0);
    assert.deepEqual(run, {
      id,
      dir: path.join(runsDir, id),
      workspaceName: 'ws',
      target: 'runpod',
      createdUnixS: Date.parse('2026-12-02T10:00:00Z') / 1000,
      state: 'preparing',
      message: null,
      problem: null,
      problemHint: null,
      problemFile: null,
      snapshot: null,
      resumedFrom: null,
      pod: {
        podId: 'abc123',
        state: 'running',
        gpuType: 'NVIDIA A40',
        costPerHourUsd: 0.44,
        deadlineUnixS: Date.parse('2026-12-02T10:00:10Z') / 1000 + 12 * 3600,
        estimatedSpendUsd: null,
        keep: false,
        strayPodIds: ['stray1'],
        createdUnixS: Date.parse('2026-12-02T10:00:10Z') / 1000,
        // Billing from the create call's sending: this store's create had no attempt record.
        billedFromMs: Date.parse('2026-12-02T10:00:10Z'),
        deletedBy: null,
      },
    });
  });

  it('skips directories without run.json and names that are not run ids', async function () {
    mkdirSync(path.join(runsDir, 'being-created'), { recursive: true });
    write('has space', 'run.json', runRecord('has space'));
    write('ok', 'run.json', runRecord('ok', { state: 'failed', message: 'exit 1' }));
    writeFileSync(path.join(runsDir, 'stray-file'), 'x');
    const runs = await readRuns([folder()]);
    assert.deepEqual(
      runs.map((r) => [r.id, r.state, r.message]),
      [['ok', 'failed', 'exit 1']],
    );
  });

  it('turns a damaged record into a problem with its place and next action, never its content', async function () {
    write('bad', 'run.json', '{\n  "state": "running",\n  "secret": rpa_LEAKED\n}');
    write('unknown', 'run.json', runRecord('unknown').replace('"running"', '"exploded"'));
    write('missing', 'run.json', JSON.stringify({ id: 'missing', state: 'running' }));
    write('array', 'run.json', '[1]');
    write('copied', 'run.json', runRecord('original'));
    write('badpod', 'run.json', runRecord('badpod'));
    write('badpod', 'pod.json', '{"pod_id": "rpa_LEAKED",');
    write('podschema', 'run.json', runRecord('podschema'));
    write('podschema', 'pod.json', podRecord('podschema').replace('"abc123"', '"no\\u0007id"'));
    const runs = new Map((await readRuns([folder()])).map((r) => [r.id, r]));
    assert.equal(runs.size, 7, 'every damaged run is an item; none hides the others');

    const bad = runs.get('bad');
    assert.equal(bad?.state, null);
    assert.equal(
      bad?.problem,
      'run.json is not a valid run record (line 3, column 13): it is not valid JSON',
    );
    assert.equal(bad?.problemFile, 'run.json');
    assert.match(bad?.problemHint ?? '', /Repair or restore/);
    assert.match(runs.get('unknown')?.problem ?? '', /^run\.json .*line 7.*"state" has a value/);
    assert.match(runs.get('missing')?.problem ?? '', /"target" is missing/);
    assert.match(runs.get('array')?.problem ?? '', /^run\.json is not a valid run record/);
    assert.match(runs.get('copied')?.problem ?? '', /record of another run/);
    assert.equal(runs.get('copied')?.state, null);

    const badPod = runs.get('badpod');
    assert.equal(badPod?.state, 'running', 'the run state stays known when only pod.json is bad');
    assert.equal(badPod?.problemFile, 'pod.json');
    assert.match(badPod?.problem ?? '', /^pod\.json is not a valid pod record \(line 1, column/);
    assert.match(badPod?.problemHint ?? '', /pod ls/);
    assert.match(runs.get('podschema')?.problem ?? '', /pod_id" has a value that is not valid/);
    for (const run of runs.values()) {
      assert.ok(!(run.problem ?? '').includes('LEAKED'), run.problem ?? '');
      assert.ok(!(run.problem ?? '').includes(runsDir), 'the file is named, not its whole path');
    }
  });

  it('reports an unreadable file or a non-file without hiding the other runs', async function () {
    if (process.getuid?.() === 0) {
      // Root reads mode-000 files; a directory in the record's place is unreadable as a file.
      mkdirSync(path.join(runsDir, 'locked', 'run.json'), { recursive: true });
    } else {
      write('locked', 'run.json', '{}');
      chmodSync(path.join(runsDir, 'locked', 'run.json'), 0);
    }
    write('linked', 'placeholder', '');
    symlinkSync(root, path.join(runsDir, 'linked', 'run.json'));
    write('fine', 'run.json', runRecord('fine', { state: 'succeeded' }));
    const runs = new Map((await readRuns([folder()])).map((r) => [r.id, r]));
    assert.equal(runs.get('fine')?.state, 'succeeded');
    assert.match(
      runs.get('locked')?.problem ?? '',
      /^run\.json (could not be read \(E[A-Z]+\)|is not a valid run record .*not a small regular file)$/,
    );
    assert.match(runs.get('linked')?.problem ?? '', /not a small regular file/);
  });

  it('keeps a damaged run in its place: its creation time from its ID', async function () {
    write('tiny_20261202-100000', 'run.json', runRecord('tiny_20261202-100000'));
    write('tiny_20261202-110000_2', 'run.json', '{');
    const runs = await readRuns([folder()]);
    const damaged = runs.find((r) => r.id === 'tiny_20261202-110000_2');
    assert.equal(damaged?.createdUnixS, Date.parse('2026-12-02T11:00:00Z') / 1000);
    assert.equal(createdFromId('not-a-run-id'), null);
  });

  it('locates a JSON syntax error by line and column', function () {
    assert.deepEqual(parseJsonObject('{"a": 1,\n "b": }', 'x.json'), {
      ok: false,
      problem: 'x.json is not valid JSON at line 2 column 7',
    });
  });

  describe('children (read on expand)', function () {
    async function oneRun(): Promise<Awaited<ReturnType<typeof readRuns>>[number]> {
      const [run] = await readRuns([folder()]);
      assert.ok(run);
      return run;
    }

    it('lists the pod, the metrics summary and the files, never the local-only ones', async function () {
      const id = 'tiny_20261202-100000';
      write(id, 'run.json', runRecord(id, { state: 'succeeded' }));
      write(id, 'pod.json', podRecord(id));
      write(id, 'ssh/id_ed25519', 'PRIVATE');
      write(id, '.lock', '');
      write(id, '.pod/watchdog.log', '');
      write(id, '.run.json.0123456789abcdef.tmp', '');
      write(id, 'output/model.bin', 'm');
      write(id, 'job.log', 'log');
      write(
        id,
        'metrics.jsonl',
        [
          '{"event":"begin","time":1,"max_steps":100}',
          '{"event":"log","time":2,"step":10,"epoch":0.1,"max_steps":100,"loss":2.5,"learning_rate":0.001}',
          'garbage',
          '{"event":"log","time":3,"step":20,"epoch":0.2,"max_steps":100,"eval_loss":2.2}',
          '{"event":"end","time":4}',
          '',
        ].join('\n'),
      );
      const run = await oneRun();
      const children = await readRunChildren(run);
      assert.deepEqual(
        children.map((c) => (c.kind === 'file' ? `${c.kind}:${c.name}` : c.kind)),
        ['pod', 'metrics', 'file:output', 'file:job.log'],
      );
      const metrics = children.find((c) => c.kind === 'metrics');
      assert.ok(metrics?.kind === 'metrics');
      assert.deepEqual(metrics.metrics, {
        step: 20,
        maxSteps: 100,
        epoch: 0.2,
        loss: 2.5,
        evalLoss: 2.2,
        learningRate: 0.001,
        ended: true,
        skippedLines: 1,
        partial: false,
      });
      const output = children.find((c) => c.kind === 'file' && c.name === 'output');
      assert.ok(output?.kind === 'file' && output.isDir);
      const inside = await readDirChildren(run, output.path);
      assert.deepEqual(
        inside.map((c) => (c.kind === 'file' ? [c.name, c.isDir] : c.kind)),
        [['model.bin', false]],
      );
      for (const child of children) assert.equal(child.runDir, run.dir);
    });

    it('puts a damaged record first, with the file to open', async function () {
      write('badpod', 'run.json', runRecord('badpod'));
      write('badpod', 'pod.json', '{');
      const run = await oneRun();
      const [first] = await readRunChildren(run);
      assert.ok(first?.kind === 'problem');
      assert.equal(first.path, path.join(runsDir, 'badpod', 'pod.json'));
      assert.match(first.hint ?? '', /Repair or restore/);
    });

    it('caps a large folder with a "more" row', async function () {
      write('big', 'run.json', runRecord('big'));
      for (let i = 0; i < MAX_LISTED_ENTRIES + 5; i++) write('big', `output/f${i}`, '');
      const run = await oneRun();
      const inside = await readDirChildren(run, path.join(run.dir, 'output'));
      assert.equal(inside.length, MAX_LISTED_ENTRIES + 1);
      const last = inside[inside.length - 1];
      assert.ok(last?.kind === 'more');
      assert.equal(last.count, 5);
    });

    it('reads only the tail of a large metrics.jsonl, skipping the cut first line', async function () {
      const line = (step: number): string =>
        `{"event":"log","time":${step},"step":${step},"max_steps":100000,"loss":${1 / (step + 1)}}\n`;
      let text = '';
      for (let step = 0; text.length < METRICS_TAIL_BYTES * 2; step++) text += line(step);
      const lastStep = text.trim().split('\n').length - 1;
      // A last line still being written does not count.
      write('m', 'metrics.jsonl', `${text}{"event":"log","time":1e9,"st`);
      const summary = await readMetricsSummary(path.join(runsDir, 'm', 'metrics.jsonl'));
      assert.equal(summary?.partial, true);
      assert.equal(summary?.step, lastStep);
      assert.equal(summary?.skippedLines, 0, 'the cut first line of the tail is not "malformed"');
      assert.equal(await readMetricsSummary(path.join(runsDir, 'none.jsonl')), null);
    });

    it('summarizes CRLF lines and NaN losses without throwing', function () {
      const bytes = Buffer.from(
        '{"event":"log","time":1,"step":1,"loss":NaN}\r\n{"event":"log","time":2,"step":2,"loss":0.5}\r\n',
      );
      const summary = summarizeMetrics(bytes, false);
      assert.equal(summary.step, 2);
      assert.equal(summary.loss, 0.5);
      assert.equal(summary.skippedLines, 0);
    });
  });
});
