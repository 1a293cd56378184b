/**
 * A cluster's node dies in the ways other than its pod EXITED (issue 37; EXITED is
 * cluster.recovery's): a member that vanishes (404), a member whose host stops answering SSH
 * while the API lists it RUNNING, and the whole cluster gone. Each time the client names the
 * node, deletes whatever is left of the cluster (confirmed gone), and the run completes on a new
 * cluster from the newest checkpoint streamed home from rank 0, verified; then nothing bills in
 * the emulator's ledger, and spend counts both clusters from Runpod's bills within 1 %, never
 * under. A real torchrun job across two emulated members each time, of the step trainer
 * (clusterStepTrainer.py: examples/ddp's arguments and files, its ranks in lockstep, no torch
 * import); the training itself is cluster.train's.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Lab } from '../helpers/lifecycle';
import { ddpLab, loggedSteps, recordOf, trainUntilCheckpointHome } from '../helpers/clusterRun';
import { assertWithin1Percent, ledgerSum, spendRowOf } from '../helpers/runSpend';
import type { Timing } from '../../src/core/timing';
import { SshExecutor } from '../../src/core/exec/ssh';
import { LEASE_FILE } from '../../src/core/pod/podScripts';

const STEPS = 80;
/** The first cluster's node dies once a checkpoint at least this far is home. */
const KILL_AFTER_STEP = 20;
const JOB = { steps: STEPS, stepSeconds: 0.3, saveEvery: 10, trainer: 'steps' } as const;

describe('a cluster node dies (vanished, host silent, whole cluster gone): recovered on a new cluster', function () {
  this.timeout(900_000); // two clusters, four torchrun agents, on a shared 2-core machine
  let lab: Lab | null = null;
  /** Undoes a test's patch of the SSH executor. */
  let restore = (): void => undefined;
  afterEach(async () => {
    restore();
    restore = () => undefined;
    await lab?.close();
    lab = null;
  });

  /**
   * Trains until a checkpoint is home, kills the first cluster's node as `kill` does, then
   * checks the run's end: succeeded on a second cluster resumed from a checkpoint at least the
   * one home before the kill, the dead node (`deadRank`) named in the first cluster's record as
   * `why` says, one curve, nothing billing, both clusters in spend from their bills. Returns the
   * lab.
   */
  async function diesAndRecovers(
    kill: (l: Lab, clusterId: string, members: string[]) => Promise<unknown>,
    deadRank: number,
    why: RegExp,
    timing: Partial<Timing> = {},
  ): Promise<void> {
    const { l, config } = await ddpLab(JOB, timing);
    lab = l;
    const { training, runId, step, clusterId, members } = await trainUntilCheckpointHome(
      l,
      config,
      KILL_AFTER_STEP,
    );
    await kill(l, clusterId, members);
    const result = await training;
    const record = recordOf(l, runId);
    assert.equal(result.run.state, 'succeeded', `${result.summary}\n${JSON.stringify(record)}`);

    const attempts = record.attempts ?? [];
    assert.deepEqual(
      attempts.map((a) => a.reason),
      ['node_failed', null],
      JSON.stringify(attempts),
    );
    const second = attempts[1]!;
    assert.ok((second.resumedFromStep ?? 0) >= step, JSON.stringify(second));
    const earlier = record.earlierClusters ?? [];
    assert.equal(earlier.length, 1);
    assert.equal(earlier[0]!.id, clusterId);
    assert.notEqual(record.cluster?.id, clusterId);
    const dead = earlier[0]!.nodes[deadRank];
    assert.equal(dead?.state, 'failed', JSON.stringify(earlier[0]));
    assert.match(dead?.message ?? '', why);
    assert.notEqual(earlier[0]!.deletedAt, null, 'the first cluster confirmed gone');
    // A member found gone: when recorded (its estimate ends there), never before the ledger's end.
    if (/gone$/.test(dead?.message ?? '')) assert.ok(dead?.endedAt, JSON.stringify(dead));
    for (const n of earlier[0]!.nodes.filter((n) => n.endedAt !== undefined)) {
      const endMs = l.emulator.ledger().pods.find((p) => p.id === n.podId)?.deletedAtMs;
      assert.ok(endMs && endMs <= Date.parse(n.endedAt!), JSON.stringify({ n, endMs }));
    }

    // The job went on from that checkpoint on the new cluster: one curve to the last step.
    const resultJson = JSON.parse(
      fs.readFileSync(path.join(l.runDir(runId), 'output', 'result.json'), 'utf8'),
    ) as { started_at: number; world_size: number; steps: number };
    assert.deepEqual(
      [resultJson.started_at, resultJson.world_size, resultJson.steps],
      [second.resumedFromStep, 2, STEPS],
    );
    assert.deepEqual(
      loggedSteps(l, runId),
      Array.from({ length: STEPS }, (_, i) => i + 1),
    );

    // Nothing left billing: no cluster, every member of both clusters ended in the ledger.
    assert.deepEqual(l.emulator.clusters(), []);
    const pods = l.emulator.ledger().pods.filter((p) => p.runId === runId);
    assert.equal(pods.length, 4, JSON.stringify(pods));
    assert.ok(
      pods.every((p) => !p.billing),
      JSON.stringify(pods),
    );
    // spend: both clusters, all 4 members, from Runpod's cluster bills.
    const row = (await spendRowOf(l, runId)) as Awaited<ReturnType<typeof spendRowOf>> & {
      pods: number;
    };
    assert.equal(row.pods, 4, JSON.stringify(row));
    const usdPerHour = pods[0]!.gpuUsdPerHour;
    assertWithin1Percent(row.billed_usd, ledgerSum(pods), 'spend: billed', 4, usdPerHour);
    assertWithin1Percent(row.estimated_usd, ledgerSum(pods), 'spend: estimated', 4, usdPerHour);
  }

  /** When the frozen host was named (the lab's event time), once the kill set it. */
  let named: () => number | undefined = () => undefined;

  it('a member vanishes (its pod 404): the whole cluster deleted, the run completes on a new cluster; nothing billing', async () => {
    await diesAndRecovers(
      (l, _cluster, members) => l.emulator.faults.podVanishes(members[1]!),
      1,
      /^its pod \S+ is gone$/,
    );
  });

  it("a member's host stops answering while the API lists it RUNNING: named within 3 × (request timeout + status poll) of the freeze, the whole cluster deleted, the run completes on a new cluster; nothing billing", async () => {
    let listed = '';
    let frozenAtMs = 0;
    let pollMs = 0;
    const timing = { requestTimeoutMs: 5_000 };
    await diesAndRecovers(
      async (l, _cluster, members) => {
        // The worst moment: the host freezes as the follow writes its lease, right after its
        // job status answered (a look that answered, then a write that never will).
        const port = l.emulator.pod(members[1]!)?.publishedPort;
        const writeFileAtomic = SshExecutor.prototype.writeFileAtomic;
        let frozen: Promise<unknown> | null = null;
        SshExecutor.prototype.writeFileAtomic = async function (
          this: SshExecutor,
          ...args: Parameters<typeof writeFileAtomic>
        ) {
          if (
            frozen === null &&
            args[0].endsWith(`/${LEASE_FILE}`) &&
            this.where.endsWith(`:${port}`)
          ) {
            frozen = l.emulator.faults.hostLost(members[1]!).then(() => {
              frozenAtMs = Date.now();
            });
            await frozen;
          }
          return writeFileAtomic.apply(this, args);
        };
        restore = () => {
          SshExecutor.prototype.writeFileAtomic = writeFileAtomic;
        };
        // The next look's lease write freezes the host (a look comes every status poll).
        while (frozen === null) await new Promise((resolve) => setTimeout(resolve, 20));
        await frozen;
        pollMs = l.timing.statusPollMs;
        listed = l.emulator.pod(members[1]!)?.status ?? '(gone)';
        named = () =>
          l.events.find(
            ({ event }) =>
              event.type === 'log' &&
              event.level === 'error' &&
              /^node 1 failed the run: its host stopped answering/.test(event.message),
          )?.atMs;
      },
      1,
      /^its host stopped answering/,
      // Each look waits at most this long: 3 missed looks in a row name the host.
      timing,
    );
    assert.equal(listed, 'RUNNING', 'the API listed the lost host RUNNING');
    // The promise (clusterFollow's MISSES_ALLOWED): each look, its connect, its channel and the
    // lease it writes included, waits at most the request timeout, and one comes every status
    // poll. A second is allowed for the pods list each look begins with and the bus.
    const namedAtMs = named();
    assert.ok(namedAtMs !== undefined, 'the lost host was named in a log line');
    const boundMs = 3 * (timing.requestTimeoutMs + pollMs) + 1_000;
    assert.ok(
      namedAtMs - frozenAtMs <= boundMs,
      `named ${namedAtMs - frozenAtMs} ms after the freeze; the bound is ${boundMs} ms`,
    );
  });

  it('the whole cluster is gone (404): named, its end confirmed, the run completes on a new cluster; nothing billing', async () => {
    await diesAndRecovers(
      (l, clusterId) => l.emulator.faults.clusterVanishes(clusterId),
      0,
      /^its cluster \S+ is gone$/,
    );
  });
});
