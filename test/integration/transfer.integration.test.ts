/**
 * A transfer's `transfer` events against a real sshd: the run directory's upload and the
 * results' retrieval each publish their first event with the totals known up front (the files
 * to send; the pod's listing of sizes) and their last with what was moved.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../../src/core/clock';
import { SshExecutor } from '../../src/core/exec/ssh';
import { EventBus, type CoreEvent } from '../../src/core/events';
import type { FlowDeps } from '../../src/core/flow/deps';
import { uploadRunDir } from '../../src/core/follow/startJob';
import type { RunRecord } from '../../src/core/runs/runRecord';
import { RunStore } from '../../src/core/runs/store';
import { scaleTiming } from '../../src/core/timing';
import { retrieveReported } from '../../src/core/train/retrievalTransfer';
import { ENTRIES, EXCLUDES, makeRun } from '../helpers/retrievalRun';
import { executorOptions, startSshd, type Sshd } from '../helpers/sshd';

type TransferEvent = CoreEvent & { type: 'transfer' };

describe('transfer progress events over SSH', function () {
  this.timeout(120_000);
  let sshd: Sshd;
  let executor: SshExecutor;
  let local: string;
  let remote: string;
  const bus = new EventBus();
  let events: TransferEvent[] = [];
  bus.on((e) => {
    if (e.type === 'transfer') events.push(e);
  });

  before(async () => {
    sshd = await startSshd();
    executor = await SshExecutor.connect(
      executorOptions(sshd, { timing: scaleTiming(1, { connectTimeoutMs: 10_000 }) }),
    );
  });
  after(async () => {
    executor?.dispose();
    await sshd?.stop();
  });
  beforeEach(() => {
    events = [];
    local = mkdtempSync(join(tmpdir(), 'ob-transfer-'));
    remote = join(sshd.root, `run-${Date.now()}-${Math.random().toString(36).slice(2)}`);
  });
  afterEach(() => {
    rmSync(local, { recursive: true, force: true });
    rmSync(remote, { recursive: true, force: true });
  });

  it('the upload: its first event with the bytes and files to send, its last with all sent', async () => {
    const store = new RunStore(join(local, 'runs'), systemClock);
    const dir = store.runDir('r1');
    mkdirSync(join(dir, 'data'), { recursive: true });
    writeFileSync(join(dir, 'train.py'), 'print("hi")\n');
    writeFileSync(join(dir, 'data', 'model.bin'), randomBytes(5 * 1024 * 1024 + 3));
    // Stays local (LOCAL_ONLY): neither sent nor counted.
    mkdirSync(join(dir, 'ssh'));
    writeFileSync(join(dir, 'ssh', 'id_ed25519'), 'secret');
    const total = 12 + 5 * 1024 * 1024 + 3;
    const deps = { bus, clock: systemClock, store } as unknown as FlowDeps;
    const run = { id: 'r1', remoteDir: remote } as RunRecord;

    await uploadRunDir(deps, executor, run);
    const first = events[0]!;
    assert.deepEqual(
      [
        first.phase,
        first.direction,
        first.runId,
        first.bytesDone,
        first.bytesTotal,
        first.filesTotal,
      ],
      ['start', 'upload', 'r1', 0, total, 2],
    );
    const last = events.at(-1)!;
    assert.deepEqual(
      [last.phase, last.bytesDone, last.bytesTotal, last.filesDone, last.filesTotal],
      ['done', total, total, 2, 2],
    );
    assert.ok(last.rateBytesPerS !== null && last.rateBytesPerS > 0, String(last.rateBytesPerS));
    // Then every byte sent: the pod's check, once, just before the end.
    const checking = events.at(-2)!;
    assert.deepEqual([checking.phase, checking.bytesDone], ['checking', total]);
    const between = events.slice(1, -2);
    assert.ok(between.every((e) => e.phase === 'progress' && e.bytesTotal === total));

    // Again: the pod has every file already; nothing to send, and the events say so.
    events = [];
    await uploadRunDir(deps, executor, run);
    assert.deepEqual(
      events.map((e) => [e.phase, e.bytesTotal, e.filesTotal]),
      [
        ['start', 0, 0],
        ['done', 0, 0],
      ],
    );
  });

  it('the retrieval: its first event with the total the pod listed, its last with all verified', async () => {
    const files = makeRun(remote);
    const total = [...files.values()].reduce((sum, data) => sum + data.length, 0);
    const result = await retrieveReported({ bus, clock: systemClock }, 'r1', 'retrieve', {
      executor,
      remoteRunDir: remote,
      localRunDir: join(local, 'runs', 'r1'),
      entries: ENTRIES,
      excludes: EXCLUDES,
    });
    assert.equal(result.verified, true);
    const first = events[0]!;
    assert.deepEqual(
      [first.phase, first.direction, first.bytesDone, first.bytesTotal, first.filesTotal],
      ['start', 'retrieve', 0, total, files.size],
    );
    assert.deepEqual(
      events.filter((e) => e.phase === 'checking').map((e) => [e.bytesDone, e.filesDone]),
      [[total, files.size]],
      'every file here, the pod hashes awaited: once',
    );
    const last = events.at(-1)!;
    assert.deepEqual(
      [last.phase, last.bytesDone, last.bytesTotal, last.filesDone, last.filesTotal],
      ['done', total, total, files.size, files.size],
    );
  });
});
