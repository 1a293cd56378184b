/**
 * The space a retrieval may take: the total the pod listed against `max_retrieve_gb` and the
 * local disk's free space (an injected statfs), before anything is downloaded and while it is.
 */
import assert from 'node:assert/strict';
import {
  BYTES_PER_GB,
  formatGb,
  freeBytesAt,
  RETRIEVE_FREE_RESERVE_BYTES,
  RetrieveSpaceError,
  SpaceGuard,
  type DiskSpace,
} from '../../src/core/train/retrievalSpace';

const GB = BYTES_PER_GB;

/** A disk with `freeBytes` free, in 4 KiB blocks (as numbers, or bigints as `bigint: true` gives). */
function disk(freeBytes: number, big = false): (path: string) => Promise<DiskSpace> {
  return (path) => {
    assert.equal(path, '/runs/r1');
    const blocks = Math.floor(freeBytes / 4096); // bavail × bsize: what statfs can say
    return Promise.resolve(
      big ? { bavail: BigInt(blocks), bsize: 4096n } : { bavail: blocks, bsize: 4096 },
    );
  };
}

async function refusal(work: Promise<unknown>): Promise<RetrieveSpaceError> {
  try {
    await work;
  } catch (error) {
    assert.ok(error instanceof RetrieveSpaceError, String(error));
    return error;
  }
  assert.fail('expected a RetrieveSpaceError');
}

describe('retrieval space: the listed total against max_retrieve_gb and the free space', () => {
  it('lets through results under the limit that fit the disk with 1 GB to spare', async () => {
    const guard = new SpaceGuard(200, disk(500 * GB));
    await guard.before('/runs/r1', 150 * GB, 12, 0);
    assert.equal(guard.during(150 * GB), null);
  });

  it('refuses results over the limit before anything is downloaded, naming the size and the limit', async () => {
    const guard = new SpaceGuard(200, disk(50_000 * GB));
    const error = await refusal(guard.before('/runs/r1', 2_000 * GB, 3, 0));
    assert.equal(error.kind, 'over_limit');
    assert.match(error.message, /2000 GB in 3 file\(s\), over max_retrieve_gb = 200/);
    assert.match(error.message, /nothing was downloaded/);
    assert.equal(error.bytes, 2_000 * GB);
    assert.equal(error.maxRetrieveGb, 200);
  });

  it('refuses results the disk cannot hold with 1 GB left, naming the free space', async () => {
    // 10 GB free: a little under 9 GB may be written. 9.5 GB listed is refused; 8.99 GB is not.
    const guard = new SpaceGuard(200, disk(10 * GB));
    const error = await refusal(guard.before('/runs/r1', 9.5 * GB, 4, 0));
    assert.equal(error.kind, 'disk_full');
    assert.match(
      error.message,
      /9\.50 GB to download, but the disk holding \/runs\/r1 has 10\.00? GB free/,
    );
    assert.match(error.message, /leaves 1\.00 GB/);
    assert.equal(error.freeBytes, Math.floor((10 * GB) / 4096) * 4096);
    await new SpaceGuard(200, disk(10 * GB)).before('/runs/r1', 8.99 * GB, 4, 0);
    assert.equal(RETRIEVE_FREE_RESERVE_BYTES, GB);
  });

  it('counts only what is still to come: files staged by an earlier call are on disk already', async () => {
    const guard = new SpaceGuard(200, disk(10 * GB, true));
    await guard.before('/runs/r1', 15 * GB, 4, 7 * GB);
    // 8 GB new so far (15 on disk): at the edge of the 9 GB room, not past it.
    assert.equal(guard.during(15 * GB), null);
    const grown = guard.during(16.5 * GB);
    assert.ok(grown instanceof RetrieveSpaceError);
    assert.equal(grown.kind, 'disk_full');
    assert.match(grown.message, /download was stopped and nothing of it kept/);
  });

  it('stops a download whose bytes pass the limit (the files grew after the listing, or its sizes lied)', async () => {
    const guard = new SpaceGuard(0.01, disk(100 * GB));
    await guard.before('/runs/r1', 1_000, 1, 0);
    assert.equal(guard.during(10_000_000), null);
    const error = guard.during(10_000_001);
    assert.ok(error instanceof RetrieveSpaceError);
    assert.equal(error.kind, 'over_limit');
    assert.match(error.message, /grew past max_retrieve_gb = 0\.01/);
  });

  it('without a total from the pod or a statfs, still holds the limit while downloading', async () => {
    const guard = new SpaceGuard(1, () => Promise.reject(new Error('ENOSYS')));
    await guard.before('/runs/r1', null, 2, 0);
    assert.equal(await freeBytesAt('/x', () => Promise.reject(new Error('ENOSYS'))), null);
    assert.equal(guard.during(GB), null);
    assert.equal(guard.during(GB + 1)?.kind, 'over_limit');
  });

  it('says sizes in GB as precisely as they need', () => {
    assert.equal(formatGb(67_108_864), '0.07');
    assert.equal(formatGb(12.34 * GB), '12.3');
    assert.equal(formatGb(2_199_023_255_552), '2199');
  });
});
