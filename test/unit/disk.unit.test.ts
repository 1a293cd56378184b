/**
 * The disk policy (src/core/train/disk.ts): warnings at 85 % and every 5 % above, once per step;
 * at 92 % or when the next checkpoint would not fit, a growth of the network volume (half its
 * size, at least 50 GB, never past max_volume_gb, confirmed in the API within two samples) or a
 * snapshot with reason `disk`; a volume measured against 94 % of its size. Also the sampler's sh
 * under dash, bash and busybox sh.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  DiskPolicy,
  growthTarget,
  parseSample,
  sampleScript,
  type DiskAction,
  type DiskSample,
} from '../../src/core/train/disk';

const GB = 1_000_000_000;

/** A plain disk (no volume) of 100 units at `percent` % used. */
function disk(percent: number, checkpointBytes = 0): DiskSample {
  return { usedBytes: percent, availBytes: 100 - percent, checkpointBytes };
}

/** A volume sample: `percent` % of the usable 94 % of `sizeGb`. */
function vol(sizeGb: number, percent: number, checkpointBytes = 0): DiskSample {
  return { usedBytes: (sizeGb * GB * 0.94 * percent) / 100, availBytes: null, checkpointBytes };
}

const kinds = (actions: DiskAction[]): string[] =>
  actions.map((a) => (a.kind === 'warn' ? `warn ${a.percent}` : a.kind));

describe('disk policy', () => {
  it('warns at 85 % and once per 5 % step above, not again for the same step', () => {
    const policy = new DiskPolicy(null);
    assert.deepEqual(kinds(policy.decide(disk(84))), []);
    assert.deepEqual(kinds(policy.decide(disk(85))), ['warn 85']);
    assert.deepEqual(kinds(policy.decide(disk(87))), []);
    assert.deepEqual(kinds(policy.decide(disk(85))), []);
    assert.deepEqual(kinds(policy.decide(disk(90.5))), ['warn 90']);
    assert.deepEqual(kinds(policy.decide(disk(91))), []);
  });

  it('a jump past several steps warns once, at the highest step reached', () => {
    const policy = new DiskPolicy(null);
    const actions = policy.decide(disk(91));
    assert.deepEqual(kinds(actions), ['warn 90']);
    assert.match((actions[0] as { text: string }).text, /disk is 90 % full/);
  });

  it('after the use falls a whole step below, the step warns again', () => {
    const policy = new DiskPolicy({ sizeGb: 100, maxGb: 400 });
    assert.deepEqual(kinds(policy.decide(vol(100, 86))), ['warn 85']);
    assert.deepEqual(kinds(policy.decide(vol(100, 79))), []);
    assert.deepEqual(kinds(policy.decide(vol(100, 86))), ['warn 85']);
  });

  it('without a volume, 92 % asks for a snapshot once (reason disk), warnings go on', () => {
    const policy = new DiskPolicy(null);
    const actions = policy.decide(disk(92));
    assert.deepEqual(kinds(actions), ['warn 90', 'snapshot']);
    assert.match(
      (actions[1] as { text: string }).text,
      /92 % full.*save a snapshot and stop \(reason disk\)/,
    );
    assert.equal(policy.snapshotRequested, true);
    assert.deepEqual(kinds(policy.decide(disk(93))), []);
    assert.deepEqual(kinds(policy.decide(disk(96))), ['warn 95']);
  });

  it('a checkpoint that would not fit asks for the snapshot below 92 %', () => {
    const policy = new DiskPolicy(null);
    // 20 free, the last checkpoint 14: 1.5 × 14 = 21 > 20.
    assert.deepEqual(kinds(policy.decide(disk(80, 14))), ['snapshot']);
    // 20 free, 13: 19.5 fits.
    assert.deepEqual(kinds(new DiskPolicy(null).decide(disk(80, 13))), []);
  });

  it('a failed snapshot request is asked for again at the next sample that calls for it', () => {
    const policy = new DiskPolicy(null);
    assert.deepEqual(kinds(policy.decide(disk(93))), ['warn 90', 'snapshot']);
    policy.snapshotFailed();
    assert.deepEqual(kinds(policy.decide(disk(93))), ['snapshot']);
  });

  it('grows by half the size and at least 50 GB, never past max_volume_gb nor 4096 GB', () => {
    assert.equal(growthTarget(50, 1000), 100);
    assert.equal(growthTarget(100, 1000), 150);
    assert.equal(growthTarget(300, 1000), 450);
    assert.equal(growthTarget(301, 1000), 452);
    assert.equal(growthTarget(100, 120), 120);
    assert.equal(growthTarget(120, 120), null);
    assert.equal(growthTarget(200, 120), null);
    assert.equal(growthTarget(100, null), null);
    assert.equal(growthTarget(4000, 10_000), 4096);
    assert.equal(growthTarget(4096, 10_000), null);
  });

  it('a volume is measured against 94 % of its size', () => {
    const policy = new DiskPolicy({ sizeGb: 100, maxGb: null });
    // 85 GB used of 100: 90.4 % of the 94 usable.
    const actions = policy.decide({ usedBytes: 85 * GB, availBytes: null, checkpointBytes: 0 });
    assert.deepEqual(kinds(actions), ['warn 90']);
    assert.match((actions[0] as { text: string }).text, /94 % of 100 GB/);
  });

  it('a full volume with room grows, waits for the API, and acts again only once it is seen', () => {
    const policy = new DiskPolicy({ sizeGb: 50, maxGb: 200 });
    const grow = policy.decide(vol(50, 92.5));
    assert.deepEqual(kinds(grow), ['warn 90', 'grow']);
    assert.deepEqual(grow[1], {
      kind: 'grow',
      fromGb: 50,
      toGb: 100,
      text: grow[1]!.text,
    });
    assert.equal(policy.awaitedGb, 100);
    // The next sample: the API still shows 50 GB, nothing new is asked.
    assert.deepEqual(kinds(policy.decide(vol(50, 93), 50)), []);
    // The second: there it is.
    const seen = policy.decide(vol(50, 94), 100);
    assert.deepEqual(kinds(seen), ['grown']);
    assert.equal(policy.volumeGb, 100);
    assert.equal(policy.awaitedGb, null);
    // 47 GB of 94 usable: 50 %, no warning; then it fills again and grows to the cap.
    assert.deepEqual(kinds(policy.decide(vol(100, 50))), []);
    assert.deepEqual(kinds(policy.decide(vol(100, 92))), ['warn 90', 'grow']);
    assert.equal(policy.awaitedGb, 150);
    assert.deepEqual(kinds(policy.decide(vol(100, 92), 150)), ['grown']);
    assert.deepEqual(kinds(policy.decide(vol(150, 93))), ['warn 90', 'grow']);
    assert.equal(policy.awaitedGb, 200);
    assert.deepEqual(kinds(policy.decide(vol(150, 93), 200)), ['grown']);
    // At max_volume_gb: the snapshot.
    const last = policy.decide(vol(200, 92));
    assert.deepEqual(kinds(last), ['warn 90', 'snapshot']);
    assert.match((last[1] as { text: string }).text, /at max_volume_gb \(200 GB\)/);
  });

  it('a growth not seen in the API within two samples counts as failed: snapshot', () => {
    const policy = new DiskPolicy({ sizeGb: 50, maxGb: 500 });
    assert.deepEqual(kinds(policy.decide(vol(50, 92))), ['warn 90', 'grow']);
    assert.deepEqual(kinds(policy.decide(vol(50, 92), 50)), []);
    const failed = policy.decide(vol(50, 92), null);
    assert.deepEqual(kinds(failed), ['snapshot']);
    assert.match((failed[0] as { text: string }).text, /growth to 100 GB was not seen in the API/);
    assert.equal(policy.awaitedGb, null);
    assert.deepEqual(kinds(policy.decide(vol(50, 93), 50)), []);
  });

  it('a growth seen in the API right after its PATCH is confirmed at once', () => {
    const policy = new DiskPolicy({ sizeGb: 50, maxGb: 500 });
    assert.deepEqual(kinds(policy.decide(vol(50, 92))), ['warn 90', 'grow']);
    assert.deepEqual(policy.seen(50), []);
    assert.equal(policy.awaitedGb, 100);
    assert.deepEqual(policy.seen(100), [
      { kind: 'grown', sizeGb: 100, text: 'the network volume is 100 GB now' },
    ]);
    assert.equal(policy.awaitedGb, null);
    assert.deepEqual(policy.seen(100), []);
    // 46 GB of the 94 usable: nothing to do, and no failure two samples later.
    assert.deepEqual(kinds(policy.decide(vol(100, 49))), []);
    assert.deepEqual(kinds(policy.decide(vol(100, 49))), []);
    assert.equal(new DiskPolicy(null).seen(100).length, 0);
  });

  it('a growth Runpod refuses asks for the snapshot at once', () => {
    const policy = new DiskPolicy({ sizeGb: 50, maxGb: 500 });
    policy.decide(vol(50, 95));
    const refused = policy.growthRefused('HTTP 400');
    assert.deepEqual(kinds(refused), ['snapshot']);
    assert.match((refused[0] as { text: string }).text, /growth to 100 GB was refused: HTTP 400/);
    assert.deepEqual(policy.growthRefused('again'), []);
  });

  it('a volume without max_volume_gb never grows: snapshot', () => {
    const policy = new DiskPolicy({ sizeGb: 50, maxGb: null });
    const actions = policy.decide(vol(50, 92));
    assert.deepEqual(kinds(actions), ['warn 90', 'snapshot']);
    assert.match((actions[1] as { text: string }).text, /max_volume_gb is not set/);
  });

  it('a volume grown by someone else is taken up (and its size handed on)', () => {
    const policy = new DiskPolicy({ sizeGb: 50, maxGb: null });
    assert.deepEqual(kinds(policy.decide(vol(80, 50), 80)), ['grown']);
    assert.equal(policy.volumeGb, 80);
  });

  it('a disk whose size is unknown decides nothing', () => {
    const policy = new DiskPolicy(null);
    assert.deepEqual(policy.decide({ usedBytes: 10, availBytes: null, checkpointBytes: 0 }), []);
    assert.deepEqual(policy.decide({ usedBytes: 0, availBytes: 0, checkpointBytes: 0 }), []);
  });
});

describe('disk sampler', () => {
  let tmp: string;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'disk-sampler-'));
    const run = path.join(tmp, 'vol', 'run');
    fs.mkdirSync(path.join(run, 'output', 'checkpoint-1'), { recursive: true });
    fs.mkdirSync(path.join(run, 'output', 'checkpoint-2 b'), { recursive: true });
    fs.writeFileSync(path.join(run, 'output', 'checkpoint-1', 'w'), Buffer.alloc(64 * 1024, 1));
    fs.writeFileSync(path.join(run, 'output', 'checkpoint-2 b', 'w'), Buffer.alloc(200 * 1024, 1));
    fs.writeFileSync(path.join(tmp, 'vol', 'other'), Buffer.alloc(512 * 1024, 1));
    const old = new Date(Date.now() - 60_000);
    fs.utimesSync(path.join(run, 'output', 'checkpoint-1'), old, old);
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  for (const shell of [['dash'], ['bash'], ['busybox', 'sh']]) {
    it(`${shell.join(' ')}: df of the run directory, du of a volume, the newest checkpoint`, () => {
      const run = path.join(tmp, 'vol', 'run');
      const sh = (script: string): string =>
        execFileSync(shell[0]!, [...shell.slice(1), '-c', script]).toString();
      const plain = parseSample(sh(sampleScript(run, null)));
      assert.ok(plain !== null);
      assert.ok(plain.availBytes !== null && plain.availBytes > 0);
      assert.ok(plain.usedBytes > 0);
      // The newest checkpoint (its name holds a space) is 200 KiB (+ its directory block).
      assert.ok(
        plain.checkpointBytes >= 200 * 1024 && plain.checkpointBytes < 240 * 1024,
        String(plain.checkpointBytes),
      );
      const volume = parseSample(sh(sampleScript(run, path.join(tmp, 'vol'))));
      assert.ok(volume !== null);
      assert.equal(volume.availBytes, null);
      assert.ok(volume.usedBytes >= (512 + 200 + 64) * 1024, String(volume.usedBytes));
      assert.equal(volume.checkpointBytes, plain.checkpointBytes);
      // No checkpoint: 0.
      const none = parseSample(
        sh(sampleScript(path.join(tmp, 'vol', 'run', 'output', 'checkpoint-1'), null)),
      );
      assert.equal(none?.checkpointBytes, 0);
    });
  }

  it('a missing run directory fails the script, and other output is no sample', () => {
    const result = (() => {
      try {
        execFileSync('sh', ['-c', sampleScript('/nonexistent/run', null)], { stdio: 'pipe' });
        return 0;
      } catch (error) {
        return (error as { status: number }).status;
      }
    })();
    assert.equal(result, 93);
    assert.equal(parseSample('used 1 avail 2'), null);
    assert.deepEqual(parseSample('used 1 avail - checkpoint 0\n'), {
      usedBytes: 1024,
      availBytes: null,
      checkpointBytes: 0,
    });
  });
});
