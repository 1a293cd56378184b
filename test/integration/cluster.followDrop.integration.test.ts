/**
 * A cluster node whose SSH connection drops while the follow pauses between its looks (its pod
 * stopped or gone: its sshd went with it) has the cluster's pods looked at at once, not at the
 * end of the pause: a dead member bills until the look that finds it (issue 37). The nodes are
 * real SSH sessions to a real sshd whose sessions the test drops; the API is a scripted loopback
 * server; the follow's clock never moves, so a follow that waited out its pause never ends.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { EventBus } from '../../src/core/events';
import { SshExecutor } from '../../src/core/exec/ssh';
import { followCluster } from '../../src/core/flow/clusterFollow';
import type { Pod } from '../../src/core/runpod/api';
import type { Cluster } from '../../src/core/runpod/clusters';
import { RunStore } from '../../src/core/runs/store';
import { fakeTiming, json, makeClient, pod, startServer, waitFor } from '../helpers/runpodClient';
import { executorOptions, startSshd, type Sshd } from '../helpers/sshd';

/** The follow's pause between looks (statusPollMs, rank 0's metrics follower's too). */
const PAUSE_MS = 123_457;

describe("a cluster node's connection that drops while the follow pauses", function () {
  this.timeout(60_000);
  let sshd: Sshd | null = null;
  let job: ChildProcess | null = null;
  afterEach(async () => {
    job?.kill('SIGKILL');
    await sshd?.stop();
    sshd = null;
  });

  it("has the cluster's pods looked at at once: its pod EXITED found without waiting out the pause", async () => {
    sshd = await startSshd();
    const remoteDir = path.join(sshd.root, 'run');
    mkdirSync(remoteDir, { recursive: true });
    // Both nodes' jobs run (one process group, read from one run directory by both sessions).
    job = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' });
    writeFileSync(path.join(remoteDir, 'job.pid'), `${job.pid}\n`);
    let dropped = false;
    let looks = 0;
    const server = await startServer((_hit, res) => {
      looks += 1;
      json(res, 200, {
        pods: [0, 1].map((rank) =>
          pod({
            id: `p${rank}`,
            status: rank === 1 && dropped ? 'EXITED' : 'RUNNING',
            cluster: { id: 'c1', rank, ip: `10.65.0.${rank + 2}` },
          }),
        ),
      });
    });
    const { client, clock } = makeClient(server);
    const startMs = clock.nowMs();
    const timing = fakeTiming({ statusPollMs: PAUSE_MS });
    const store = new RunStore(path.join(sshd.dir, 'runs'), clock);
    const run = store.create({ project: 'ddp', target: 'cluster', remoteDir: () => remoteDir });
    const ctx = { store, client, bus: new EventBus(), clock, timing, version: '0.0.0' };
    const members = await Promise.all(
      [0, 1].map(async (rank) => ({
        rank,
        pod: { id: `p${rank}` } as Pod,
        ip: null,
        executor: await SshExecutor.connect(executorOptions(sshd!)),
      })),
    );
    const handle = { cluster: { id: 'c1' } as Cluster, members };
    const stop = new AbortController();
    const following = followCluster(ctx, run, handle, { signal: stop.signal });
    let ended = false;
    void following.finally(() => (ended = true)).catch(() => undefined);
    try {
      await waitFor(
        // Rank 0's metrics follower and the nodes' look loop: both paused.
        () => clock.waits.filter((w) => w.ms === PAUSE_MS && !w.settled).length === 2,
        'the follow to pause after its first looks',
        30_000,
      );
      assert.equal(looks, 1);
      dropped = true;
      await sshd.dropSessions();
      await waitFor(() => ended, 'the end of the follow', 30_000);
    } finally {
      stop.abort();
      members.forEach((m) => m.executor.dispose());
    }
    const end = await following;
    assert.equal(end.kind, 'died', JSON.stringify(end));
    assert.match(end.message, /node 1 failed the run: its pod p1 is EXITED/);
    assert.equal(looks, 2, 'the pods looked at again at the drop');
    assert.equal(clock.nowMs(), startMs, 'the pause was not waited out');
  });
});
