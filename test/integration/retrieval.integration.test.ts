/**
 * Verified retrieval against a real sshd (and the local executor): a whole retrieval with odd
 * names, excludes and planted symlinks; a hostile pod whose `find` lies; a
 * local symlink in the way; a file changing during the download; a dropped
 * connection resumed without downloading everything again.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../../src/core/clock';
import { ExecError } from '../../src/core/exec/executor';
import { LocalExecutor } from '../../src/core/exec/local';
import { SshExecutor } from '../../src/core/exec/ssh';
import { scaleTiming } from '../../src/core/timing';
import {
  ManifestError,
  retrieve,
  RetrieveSpaceError,
  RetrievalError,
  STAGING_DIR,
  describeMismatches,
  type RetrieveOptions,
  type RetrieveResult,
} from '../../src/core/train/retrieval';
import { podWithTools } from '../helpers/podTools';
import { startSshd, startTcpProxy, type Sshd } from '../helpers/sshd';

import { assertRetrieved, ENTRIES, EXCLUDES, makeRun } from '../helpers/retrievalRun';

describe('retrieve over SSH', function () {
  this.timeout(120_000);
  let sshd: Sshd;
  let executor: SshExecutor;
  let local: string;
  let remote: string;

  const connect = (port = sshd.port): Promise<SshExecutor> =>
    SshExecutor.connect({
      host: sshd.host,
      port,
      username: sshd.user,
      privateKey: sshd.clientPrivateKey,
      hostPublicKey: sshd.hostPublicKey,
      clock: systemClock,
      timing: scaleTiming(1, { connectTimeoutMs: 10_000 }),
    });
  const base = (overrides: Partial<RetrieveOptions> = {}): RetrieveOptions => ({
    executor,
    remoteRunDir: remote,
    localRunDir: join(local, 'runs', 'r1'),
    entries: ENTRIES,
    excludes: EXCLUDES,
    retryDelayMs: 50,
    ...overrides,
  });

  before(async () => {
    sshd = await startSshd();
    executor = await connect();
  });
  after(async () => {
    executor?.dispose();
    await sshd?.stop();
  });
  beforeEach(() => {
    local = mkdtempSync(join(tmpdir(), 'ob-retrieve-'));
    remote = join(sshd.root, `run-${Date.now()}-${Math.random().toString(36).slice(2)}`);
  });
  afterEach(() => {
    rmSync(local, { recursive: true, force: true });
    rmSync(remote, { recursive: true, force: true });
  });

  it('downloads, verifies and moves every result into place', async () => {
    const files = makeRun(remote);
    const phases = new Set<string>();
    const result = await retrieve(base({ onProgress: (p) => phases.add(p.phase) }));
    assert.equal(result.verified, true);
    assert.deepEqual(result.mismatches, []);
    assert.equal(result.files, files.size);
    assert.equal(
      result.bytes,
      [...files.values()].reduce((sum, data) => sum + data.length, 0),
    );
    assert.equal(result.transferredBytes, result.bytes);
    assertRetrieved(base().localRunDir, files);
    assert.deepEqual([...phases], ['listing', 'downloading', 'verifying', 'moving']);
  });

  it('merges into existing local folders and replaces older copies', async () => {
    const files = makeRun(remote);
    const localRunDir = base().localRunDir;
    mkdirSync(join(localRunDir, 'output'), { recursive: true });
    writeFileSync(join(localRunDir, 'output', 'big.bin'), 'an older copy');
    writeFileSync(join(localRunDir, 'output', 'local-only.txt'), 'kept');
    writeFileSync(join(localRunDir, 'run.json'), '{}');
    const result = await retrieve(base());
    assert.equal(result.verified, true);
    assertRetrieved(localRunDir, files);
    assert.equal(readFileSync(join(localRunDir, 'output', 'local-only.txt'), 'utf8'), 'kept');
    assert.equal(readFileSync(join(localRunDir, 'run.json'), 'utf8'), '{}');
  });

  it('says the run directory is missing', async () => {
    await assert.rejects(
      retrieve(base()),
      (error: unknown) => error instanceof RetrievalError && error.kind === 'run_dir_missing',
    );
  });

  it('verifies an empty result (no entry exists)', async () => {
    mkdirSync(remote);
    const result = await retrieve(base());
    assert.equal(result.verified, true);
    assert.equal(result.files, 0);
  });

  it('refuses a hostile pod whose find lies: nothing written outside the run dir, nothing kept', async () => {
    makeRun(remote);
    const escape = `./output/../../../${Date.now()}-escaped`;
    // Lists a traversal name, as a compromised pod could.
    const pod = await podWithTools(
      {
        find:
          `#!/bin/sh\nfor a do [ "$a" = -print0 ] && { printf '%s\\0' '${escape}'; exit 0; }; done\n` +
          `printf '%s  %s\\0' ${'0'.repeat(64)} '${escape}'\n`,
      },
      sshd.root,
    );
    try {
      const localRunDir = join(local, 'runs', 'r1');
      mkdirSync(localRunDir, { recursive: true });
      writeFileSync(join(localRunDir, 'run.json'), '{}');
      const error = await retrieve(base({ executor: pod.executor, localRunDir })).then(
        () => assert.fail('a hostile list must be refused'),
        (caught: unknown) => caught,
      );
      assert.ok(error instanceof ManifestError, String(error));
      assert.equal(error.kind, 'traversal');
      assert.equal(error.file, escape);
      assert.match(error.message, /nothing was written outside the run directory/);
      // Nothing anywhere but what the run dir held before.
      assert.deepEqual(readdirSync(local), ['runs']);
      assert.deepEqual(readdirSync(join(local, 'runs')), ['r1']);
      assert.deepEqual(readdirSync(localRunDir), ['run.json']);
    } finally {
      await pod.close();
    }
  });

  it('refuses to write through a local symlink, keeps the verified files staged, resumes after', async () => {
    const files = makeRun(remote);
    const localRunDir = base().localRunDir;
    const elsewhere = join(local, 'elsewhere');
    mkdirSync(elsewhere);
    mkdirSync(localRunDir, { recursive: true });
    symlinkSync(elsewhere, join(localRunDir, 'output'));
    await assert.rejects(
      retrieve(base()),
      (error: unknown) => error instanceof RetrievalError && error.kind === 'local_conflict',
    );
    assert.deepEqual(readdirSync(elsewhere), [], 'nothing written through the link');
    assert.equal(existsSync(join(localRunDir, 'metrics.jsonl')), false, 'nothing moved at all');
    rmSync(join(localRunDir, 'output'));
    const again = await retrieve(base());
    assert.equal(again.verified, true);
    assert.equal(again.transferredBytes, 0, 'everything came from the staging directory');
    assert.equal(again.reusedBytes, again.bytes);
    assertRetrieved(localRunDir, files);
  });

  it('reports a file that changed during the download as a mismatch and moves nothing', async () => {
    makeRun(remote);
    const path = join(remote, 'output', 'big.bin');
    writeFileSync(path, randomBytes(8 * 1024 * 1024));
    // The pod hashes only once the test says so: after the file changed, while its
    // first bytes are already downloaded (a slow pod: the download runs meanwhile).
    const go = join(local, 'hash-now');
    const pod = await podWithTools(
      {
        sha256sum: `#!/bin/sh\nwhile [ ! -e '${go}' ]; do sleep 0.05; done\nexec /usr/bin/sha256sum "$@"\n`,
      },
      sshd.root,
    );
    try {
      let changed = false;
      const result = await retrieve(
        base({
          executor: pod.executor,
          progressIntervalMs: 0,
          onProgress: (p) => {
            if (
              !changed &&
              p.phase === 'downloading' &&
              p.file === 'output/big.bin' &&
              p.bytesDone > 0
            ) {
              changed = true;
              const handle = openSync(path, 'r+');
              writeSync(handle, Buffer.from('CHANGED'), 0, 7, 0);
              closeSync(handle);
              writeFileSync(go, '');
            }
          },
        }),
      );
      assert.ok(changed);
      assert.equal(result.verified, false);
      assert.deepEqual(
        result.mismatches.map((m) => [m.file, m.reason]),
        [['output/big.bin', 'changed']],
      );
      const localRunDir = base().localRunDir;
      assert.equal(existsSync(join(localRunDir, 'output')), false, 'nothing moved into place');
      assert.equal(existsSync(join(localRunDir, STAGING_DIR, 'files', 'output', 'big.bin')), false);
      assert.ok(
        existsSync(join(localRunDir, STAGING_DIR, 'files', 'metrics.jsonl')),
        'verified files stay staged',
      );
      // The next retrieval fetches only that file again, and verifies.
      const again = await retrieve(base({ executor: pod.executor }));
      assert.equal(again.verified, true);
      assert.equal(again.transferredBytes, 8 * 1024 * 1024);
      assert.ok(
        readFileSync(join(localRunDir, 'output', 'big.bin'))
          .subarray(0, 7)
          .equals(Buffer.from('CHANGED')),
      );
    } finally {
      await pod.close();
    }
  });

  it('a file rewritten while it is retrieved is not taken even when the hash and the download read the same bytes', async () => {
    makeRun(remote);
    const path = join(remote, 'output', 'big.bin');
    writeFileSync(path, randomBytes(4 * 1024 * 1024));
    // Before it hashes anything, the pod's job writes big.bin again with the very same bytes:
    // the download and the hash agree, but the file was written during the retrieval (a
    // writer still at work can be read identically, torn, by both).
    const once = join(local, 'rewritten');
    const pod = await podWithTools(
      {
        sha256sum:
          `#!/bin/sh\nif [ ! -e '${once}' ]; then : >'${once}'; ` +
          `cp '${path}' '${once}.copy' && cat '${once}.copy' >'${path}'; fi\n` +
          `exec /usr/bin/sha256sum "$@"\n`,
      },
      sshd.root,
    );
    try {
      const result = await retrieve(base({ executor: pod.executor }));
      assert.equal(result.verified, false);
      assert.deepEqual(
        result.mismatches.map((m) => [m.file, m.reason]),
        [['output/big.bin', 'changed']],
      );
      assert.match(
        describeMismatches(result.mismatches),
        /1 file\(s\) were still being written on the pod while they were retrieved \(output\/big\.bin\): none was taken/,
      );
      const localRunDir = base().localRunDir;
      assert.equal(existsSync(join(localRunDir, 'output')), false, 'nothing moved into place');
      assert.equal(existsSync(join(remote, STAGING_DIR)), false, 'the change marker is cleaned up');
      // Once nothing writes it any more, it is taken.
      const again = await retrieve(base({ executor: pod.executor }));
      assert.equal(again.verified, true, JSON.stringify(again.mismatches));
      assert.ok(readFileSync(join(localRunDir, 'output', 'big.bin')).equals(readFileSync(path)));
      assert.equal(existsSync(join(remote, STAGING_DIR)), false);
    } finally {
      await pod.close();
    }
  });

  /**
   * Retrieves a fresh run through a pod whose `tools` are replaced: verified, every file home;
   * `check` then looks at what else the case is about, before the pod is closed.
   */
  async function retrievedThrough(
    tools: Record<string, string>,
    check: () => void = () => undefined,
  ): Promise<void> {
    const files = makeRun(remote);
    const pod = await podWithTools(tools, sshd.root);
    try {
      const result = await retrieve(base({ executor: pod.executor }));
      assert.equal(result.verified, true, JSON.stringify(result.mismatches));
      assertRetrieved(base().localRunDir, files);
      check();
    } finally {
      await pod.close();
    }
  }

  for (const tool of ['GNU tar', 'busybox tar']) {
    it(`brings every result in one tar stream (${tool} on the pod), verified, odd names and all`, async () => {
      const log = join(local, 'tar.log');
      const tar = tool === 'GNU tar' ? '/usr/bin/tar' : 'busybox tar';
      await retrievedThrough(
        {
          tar: `#!/bin/sh\necho called >>'${log}'\nexec ${tar} "$@"\n`,
          tail: `#!/bin/sh\necho tail >>'${log}'\nexec /usr/bin/tail "$@"\n`,
        },
        // One tar command for all of them; nothing read file by file.
        () => assert.deepEqual(readFileSync(log, 'utf8').trim().split('\n'), ['called']),
      );
    });
  }

  it('a pod without tar still gets its results fetched one by one, verified', async () => {
    await retrievedThrough({ tar: '#!/bin/sh\necho "tar: not found" >&2\nexit 127\n' });
  });

  it('a hostile tar stream (a name not asked for, a file swapped for a link) writes nothing of it; the rest is fetched one by one', async () => {
    // A tar that sends a link and a file nobody asked for before the results.
    try {
      await retrievedThrough(
        {
          tar: `#!/bin/sh\ncd '${remote}' && echo planted >planted && ln -sf /etc/hostname planted-link && exec /usr/bin/tar -cf - planted-link planted "$@"\n`,
        },
        () => {
          assert.equal(existsSync(join(base().localRunDir, 'planted')), false);
          assert.equal(existsSync(join(base().localRunDir, 'planted-link')), false);
        },
      );
    } finally {
      rmSync(join(remote, 'planted'), { force: true });
      rmSync(join(remote, 'planted-link'), { force: true });
    }
  });

  it('a pod that cannot make the change marker (a full disk) still has its results verified by hash', async () => {
    await retrievedThrough({ touch: '#!/bin/sh\necho "No space left on device" >&2\nexit 1\n' });
  });

  /**
   * Retrieves a run whose output holds one random file of `size` bytes through a relay in front
   * of the pod, dropping every session once `dropAt` of the file has come down.
   */
  async function retrieveDropping(
    size: number,
    dropAt: number,
    relay: { oneWayDelayMs?: number } = {},
  ): Promise<{ result: RetrieveResult; data: Buffer; dropped: boolean; bytesDown: number }> {
    makeRun(remote);
    const data = randomBytes(size);
    writeFileSync(join(remote, 'output', 'big.bin'), data);
    const proxy = await startTcpProxy(sshd.port, relay);
    const viaProxy = await connect(proxy.port);
    try {
      let dropped = false;
      const result = await retrieve(
        base({
          executor: viaProxy,
          progressIntervalMs: 0,
          onProgress: (p) => {
            if (!dropped && p.phase === 'downloading' && p.bytesDone > size * dropAt) {
              dropped = true;
              void sshd.dropSessions();
            }
          },
        }),
      );
      return { result, data, dropped, bytesDown: proxy.bytesDown() };
    } finally {
      viaProxy.dispose();
      await proxy.close();
    }
  }

  it('resumes after the connection drops mid-download without fetching everything again', async () => {
    const size = 48 * 1024 * 1024;
    const { result, data, dropped, bytesDown } = await retrieveDropping(size, 1 / 3);
    assert.ok(dropped, 'the connection was dropped');
    assert.equal(result.verified, true);
    assert.ok(result.reusedBytes > size / 4, `resumed from ${result.reusedBytes} bytes`);
    assert.ok(readFileSync(join(base().localRunDir, 'output', 'big.bin')).equals(data));
    assert.ok(bytesDown < size * 1.4, `${bytesDown} bytes on the wire for ${size}`);
  });

  it('over a distant link (50 ms of round trip: the wide receive window), a drop midway still resumes and verifies', async () => {
    const size = 64 * 1024 * 1024;
    // Every channel takes two round trips (100 ms) to open here: the streams keep 16 MiB in
    // flight, written behind by the file sink, instead of ssh2's 2 MiB.
    const { result, data, dropped, bytesDown } = await retrieveDropping(size, 1 / 2, {
      oneWayDelayMs: 25,
    });
    assert.ok(dropped, 'the connection was dropped');
    assert.equal(result.verified, true);
    assert.deepEqual(result.mismatches, []);
    assert.ok(readFileSync(join(base().localRunDir, 'output', 'big.bin')).equals(data));
    // Half the file, what was in flight (at most the 16 MiB window), then the other half: a
    // download started over would be 1.5 times the file or more.
    assert.ok(bytesDown < size * 1.4, `${bytesDown} bytes on the wire`);
  });

  it('resumes in a later call when this one gave up', async () => {
    const files = makeRun(remote);
    const size = 32 * 1024 * 1024;
    const data = randomBytes(size);
    files.set('output/big.bin', data);
    writeFileSync(join(remote, 'output', 'big.bin'), data);
    const dropping = await connect();
    try {
      let dropped = false;
      const error = await retrieve(
        base({
          executor: dropping,
          attempts: 1,
          progressIntervalMs: 0,
          onProgress: (p) => {
            if (
              !dropped &&
              p.phase === 'downloading' &&
              p.file === 'output/big.bin' &&
              p.bytesDone > size / 3
            ) {
              dropped = true;
              void sshd.dropSessions();
            }
          },
        }),
      ).then(
        () => assert.fail('expected the drop to end this call'),
        (caught: unknown) => caught,
      );
      assert.ok(error instanceof ExecError && error.kind === 'connection', String(error));
      const partial = join(base().localRunDir, STAGING_DIR, 'partial', 'output', 'big.bin');
      assert.ok(existsSync(partial), 'the partial file is kept');
      // The pod's other files are untouched; a later call (attach) resumes.
      appendFileSync(join(remote, 'metrics.jsonl'), '{"event":"end"}\n');
      files.set('metrics.jsonl', readFileSync(join(remote, 'metrics.jsonl')));
      const result = await retrieve(base({ executor: dropping }));
      assert.equal(result.verified, true);
      assert.ok(result.reusedBytes > size / 4, `resumed from ${result.reusedBytes} bytes`);
      assert.ok(result.transferredBytes < result.bytes);
      assertRetrieved(base().localRunDir, files);
    } finally {
      dropping.dispose();
    }
  });
});

describe('retrieve with the local executor', function () {
  this.timeout(30_000);
  // Each case: a fresh folder holding the run on the "pod" (remote/) and its home (local/).
  let dir: string;
  let remote: string;
  let local: string;
  let executor: LocalExecutor;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ob-retrieve-local-'));
    remote = join(dir, 'remote');
    local = join(dir, 'local');
    executor = new LocalExecutor();
  });
  afterEach(() => {
    executor.dispose();
    rmSync(dir, { recursive: true, force: true });
  });
  /** Retrieves remote/ into local/: the usual entries and excludes, unless `options` say else. */
  const retrieveHere = (options: Partial<RetrieveOptions> = {}): Promise<RetrieveResult> =>
    retrieve({
      executor,
      remoteRunDir: remote,
      localRunDir: local,
      entries: ENTRIES,
      excludes: EXCLUDES,
      ...options,
    });

  it('gives the same verified result for the local target', async () => {
    const files = makeRun(remote);
    const result = await retrieveHere();
    assert.equal(result.verified, true);
    assertRetrieved(local, files);
  });

  it("never takes another retrieval's staging directory (a checkpoint copy of output/ in flight on the pod)", async () => {
    const files = makeRun(remote);
    // What the checkpoint stream's retrieval of output/checkpoint-N leaves while it runs.
    mkdirSync(join(remote, 'output', STAGING_DIR), { recursive: true });
    writeFileSync(join(remote, 'output', STAGING_DIR, 'changes.0123abcd'), '');
    const result = await retrieveHere();
    assert.equal(result.verified, true);
    assertRetrieved(local, files);
    assert.equal(existsSync(join(local, 'output', STAGING_DIR)), false);
  });

  it("brings a stopped run's snapshot checkpoint home (`!output/checkpoint-20`) and still leaves out the other checkpoints", async () => {
    const files = makeRun(remote);
    const result = await retrieveHere({ excludes: [...EXCLUDES, '!output/checkpoint-20'] });
    assert.equal(result.verified, true);
    assert.equal(
      readFileSync(join(local, 'output', 'checkpoint-20', 'optimizer.pt'), 'utf8'),
      'skip me',
    );
    assert.equal(existsSync(join(local, 'output', 'sub', 'checkpoint-5')), false);
    for (const [name, content] of files) {
      assert.deepEqual(readFileSync(join(local, name)), content, name);
    }
  });

  it('a disk without room for the listed total: refused before anything is downloaded, nothing on disk', async () => {
    makeRun(remote);
    let asked = '';
    const error = await retrieveHere({
      // 1 GB and 1 MB free: the 3 MB of results would leave less than the 1 GB kept free.
      statfs: (path) => {
        asked = path;
        return Promise.resolve({ bavail: 1_001_000_000 / 1000, bsize: 1000 });
      },
    }).then(
      () => assert.fail('expected a refusal'),
      (caught: unknown) => caught,
    );
    assert.ok(error instanceof RetrieveSpaceError, String(error));
    assert.equal(error.kind, 'disk_full');
    assert.match(error.message, /GB to download, but the disk holding .* has 1\.00 GB free/);
    assert.equal(asked, local);
    assert.deepEqual(readdirSync(local), [], 'nothing downloaded, no staging left');
  });

  it('a file that grows past max_retrieve_gb after it was listed: the download stops, nothing partial is kept', async () => {
    // The job goes on writing between the listing and the download: the listed 1 KB file is a
    // 64 MiB sparse one by the time its bytes are read.
    mkdirSync(join(remote, 'output'), { recursive: true });
    writeFileSync(join(remote, 'output', 'model.bin'), Buffer.alloc(1024, 1));
    const growing: LocalExecutor = Object.create(executor) as LocalExecutor;
    growing.exec = async (command, options) => {
      const result = await executor.exec(command, options);
      if (command.includes('stat -c')) truncateSync(join(remote, 'output', 'model.bin'), 64 << 20);
      return result;
    };
    const error = await retrieveHere({
      executor: growing,
      excludes: undefined,
      maxRetrieveGb: 0.01,
    }).then(
      () => assert.fail('expected a refusal'),
      (caught: unknown) => caught,
    );
    assert.ok(error instanceof RetrieveSpaceError, String(error));
    assert.equal(error.kind, 'over_limit');
    assert.match(error.message, /grew past max_retrieve_gb = 0\.01 while they downloaded/);
    assert.deepEqual(readdirSync(local), [], 'no partial file, no staging left');
  });
});
