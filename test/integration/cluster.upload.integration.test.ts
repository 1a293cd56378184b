/**
 * A cluster run's files cross the user's link once (issue 37): the product's train on a 2-node
 * target uploads the run's files to rank 0 only, and rank 0 feeds the other member over the
 * cluster's private network (the emulator's: a network namespace per member on a bridge), each
 * member's copy verified by SHA-256 against the client's own hashes. The bytes are counted by a
 * relay in front of each member's SSH endpoint (what the client sent over the user's link). Rank 0
 * passes the files on while they arrive: node 1's copy is whole by the time rank 0's upload is
 * done, not after it. A member whose copy from rank 0 fails, or does not verify, fails the run
 * naming it, and the whole cluster is deleted.
 */
import assert from 'node:assert/strict';
import { createHash, randomFillSync } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadConfig } from '../../src/core/config';
import { train } from '../../src/core/flow';
import type { Lab } from '../helpers/lifecycle';
import { ddpLab, ddpToml, LinkMeter, recordOf } from '../helpers/clusterRun';
import { waitFor } from '../emulator/testing';

const DATASET_BYTES = 4 * 1024 * 1024;

describe("a cluster run's files over the user's link once", function () {
  this.timeout(600_000);
  let lab: Lab | null = null;
  let meter: LinkMeter | null = null;
  afterEach(async () => {
    await meter?.close();
    meter = null;
    await lab?.close();
    lab = null;
  });

  /** A 2-node lab whose upload holds data/dataset.bin (random), and the dataset's SHA-256. */
  async function datasetLab(steps: number) {
    const { l } = await ddpLab({ steps, stepSeconds: 0.2, saveEvery: 100, trainer: 'steps' });
    lab = l;
    const toml = ddpToml({ steps, stepSeconds: 0.2, saveEvery: 100 }).replace(
      'upload = ["train.py"]',
      'upload = ["train.py", "data"]',
    );
    fs.writeFileSync(path.join(l.workspace, 'overbrainer.toml'), toml);
    const dataset = randomFillSync(Buffer.alloc(DATASET_BYTES));
    fs.mkdirSync(path.join(l.workspace, 'data'), { recursive: true });
    fs.writeFileSync(path.join(l.workspace, 'data', 'dataset.bin'), dataset);
    const loaded = loadConfig(l.workspace, {});
    assert.ok(loaded.ok, JSON.stringify(!loaded.ok && loaded.errors));
    meter = new LinkMeter();
    const deps = { ...l.deps, client: meter.client(l.client) };
    return { l, deps, config: loaded.config, sha: createHash('sha256').update(dataset).digest() };
  }

  /** A member's copy of a file of the run (its pod's /workspace seen from the host). */
  function memberFile(l: Lab, podId: string, runId: string, file: string): string {
    const pod = l.emulator.pod(podId);
    assert.ok(pod, podId);
    return path.join(pod.dirs.workspace, 'overbrainer', runId, file);
  }

  /** The run failed at node 1's copy (`why`), the whole cluster deleted, no member billing. */
  async function failedAtNode1(
    l: Lab,
    training: Promise<unknown>,
    runId: () => string,
    why: RegExp,
  ) {
    const error = await training.then(
      () => assert.fail('the run started'),
      (caught: unknown) => caught,
    );
    assert.match(
      String(error),
      /node 1 \(pod \S+\) did not get the run's files from node 0 over the cluster network/,
    );
    const record = recordOf(l, runId());
    assert.equal(record.state, 'failed');
    assert.match(
      record.message ?? '',
      /node 1 \(pod \S+\) did not get the run's files from node 0 over the cluster network/,
    );
    assert.notEqual(record.cluster?.deletedAt, null);
    assert.deepEqual(l.emulator.clusters(), []);
    const members = l.emulator.ledger().pods.filter((p) => p.runId === runId());
    assert.equal(members.length, 2);
    assert.ok(
      members.every((p) => !p.billing),
      JSON.stringify(members),
    );
    assert.match(String(error), why);
  }

  it('sends the dataset over the link once, to rank 0; node 1 gets it over the cluster network, verified', async () => {
    const { l, deps, config, sha } = await datasetLab(20);
    let runId = '';
    /** Each member's copy of the dataset at rank 0's first step (the cluster is up then). */
    let copies: (Buffer | null)[] | null = null;
    let sent: number[] = [];
    /** Node 1's authorized_keys and home at that moment: the one-shot key and hashes gone. */
    let node1Keys = '';
    let node1Home: string[] = [];
    /** Node 1's copy when every byte of the upload had reached rank 0 (before rank 0's check). */
    let node1AtLastByte: Buffer | null | undefined;
    const sub = l.bus.on((event) => {
      if (
        event.type === 'transfer' &&
        event.direction === 'upload' &&
        event.phase === 'checking' &&
        node1AtLastByte === undefined
      ) {
        const file = memberFile(
          l,
          l.emulator.clusters()[0]!.memberIds[1]!,
          runId,
          'data/dataset.bin',
        );
        node1AtLastByte = fs.existsSync(file)
          ? createHash('sha256').update(fs.readFileSync(file)).digest()
          : null;
      }
      if (event.type !== 'metric' || copies !== null || runId === '') return;
      const members = l.emulator.clusters()[0]?.memberIds ?? [];
      copies = members.map((id) => {
        const file = memberFile(l, id, runId, 'data/dataset.bin');
        return fs.existsSync(file)
          ? createHash('sha256').update(fs.readFileSync(file)).digest()
          : null;
      });
      const node1 = l.emulator.pod(members[1] ?? '');
      node1Keys = node1
        ? fs.readFileSync(path.join(node1.dirs.rootSsh, 'authorized_keys'), 'utf8')
        : '';
      node1Home = node1 ? fs.readdirSync(node1.dirs.rootHome) : [];
      sent = members.map((id) => {
        const port = l.emulator.pod(id)?.publishedPort;
        return [...meter!.sentBytes].find(([key]) => key.endsWith(`:${port}`))?.[1] ?? 0;
      });
    });
    const result = await l.track(
      train(deps, config, l.workspace, { onRun: (r) => (runId = r.id) }),
    );
    sub.dispose();
    assert.equal(result.run.state, 'succeeded', result.summary);
    assert.ok(copies !== null, 'a step was seen');
    const [rank0, rank1] = copies as (Buffer | null)[];
    assert.ok(rank0?.equals(sha), "rank 0's copy is the dataset");
    assert.ok(rank1?.equals(sha), "node 1's copy is the dataset");
    // Passed on while it arrived: node 1's copy was whole when the last byte reached rank 0.
    assert.ok(
      node1AtLastByte?.equals(sha),
      `node 1's copy at the upload's last byte: ${node1AtLastByte === null ? 'none' : String(node1AtLastByte?.toString('hex'))}`,
    );
    // The key rank 0 used was good for that one copy: its line is gone, so are the hashes.
    assert.equal(node1Keys.trim().split('\n').length, 1, node1Keys);
    assert.doesNotMatch(node1Keys, /overbrainer-peer/);
    assert.deepEqual(
      node1Home.filter((name) => name.includes('overbrainer-peer')),
      [],
    );
    // The user's link: the dataset once (to rank 0), node 1 only its SSH session's own traffic.
    const total = meter!.total();
    assert.ok(
      total < DATASET_BYTES * 1.1,
      `sent ${total} bytes for a ${DATASET_BYTES}-byte dataset`,
    );
    assert.ok(
      sent[1]! < DATASET_BYTES / 10,
      `sent ${sent[1]} bytes to node 1 (rank 0: ${sent[0]}) for a ${DATASET_BYTES}-byte dataset`,
    );
    assert.ok(sent[0]! >= DATASET_BYTES, `rank 0 got ${sent[0]} bytes`);
  });

  it('a member whose copy from rank 0 fails fails the run naming it; the whole cluster deleted', async () => {
    const { l, deps, config } = await datasetLab(5);
    let runId = '';
    const training = l.track(train(deps, config, l.workspace, { onRun: (r) => (runId = r.id) }));
    training.catch(() => undefined);
    // Node 1's run directory holds a directory where the dataset goes: its copy cannot land.
    await waitFor(
      "node 1's run directory",
      () => {
        const id = l.emulator.clusters()[0]?.memberIds[1];
        if (id === undefined || runId === '') return undefined;
        const dir = path.dirname(memberFile(l, id, runId, '.claim'));
        if (!fs.existsSync(path.join(dir, '.claim'))) return undefined;
        fs.mkdirSync(path.join(dir, 'data', 'dataset.bin', 'in-the-way'), { recursive: true });
        return true;
      },
      300_000,
      50,
    );
    await failedAtNode1(l, training, () => runId, /Cannot open/);
  });
  it("a member whose copy does not match the client's SHA-256s fails the run naming the file; the whole cluster deleted", async () => {
    const { l, deps, config } = await datasetLab(5);
    let runId = '';
    // Node 1's copy changed once it landed, before its check (a disk that flips a byte): the
    // product says when the copies landed, and checks them after.
    let flipped = false;
    l.bus.on((event) => {
      if (event.type !== 'log' || !/reached node 1 from node 0/.test(event.message)) return;
      const id = l.emulator.clusters()[0]?.memberIds[1];
      if (id === undefined) return;
      const file = memberFile(l, id, runId, 'data/dataset.bin');
      const bytes = fs.readFileSync(file);
      bytes[12345] = bytes[12345]! ^ 0xff;
      fs.writeFileSync(file, bytes);
      flipped = true;
    });
    const training = l.track(train(deps, config, l.workspace, { onRun: (r) => (runId = r.id) }));
    training.catch(() => undefined);
    await failedAtNode1(l, training, () => runId, /data\/dataset\.bin: FAILED/);
    assert.ok(flipped, "node 1's copy was changed before its check");
  });
});
