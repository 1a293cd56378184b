/**
 * A cluster node whose host stops answering is found within 2 minutes of production time (issue
 * 37): the follow's look at each node waits at most requestTimeoutMs, every statusPollMs, and
 * MISSES_ALLOWED missed looks in a row end the run's cluster. A client that follows the run
 * again (attach) connects to each member, at most connectTimeoutMs each, every podPollMs, and as
 * many failed connects in a row name the node (cluster.attachSilent.integration shows it end to
 * end at scaled timing). And a node's first sign of an end (its look failed, its job failed) has
 * the cluster's pods looked at at once: a dead member bills until the look that finds it.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { EventBus } from '../../src/core/events';
import { LocalExecutor } from '../../src/core/exec/local';
import type { SshExecutor } from '../../src/core/exec/ssh';
import { followCluster, MISSES_ALLOWED } from '../../src/core/flow/clusterFollow';
import type { Pod } from '../../src/core/runpod/api';
import type { Cluster } from '../../src/core/runpod/clusters';
import { RunStore } from '../../src/core/runs/store';
import { fakeTiming, json, makeClient, pod, startServer, waitFor } from '../helpers/runpodClient';
import { HOST_MISSES_ALLOWED } from '../../src/core/pod/cluster';
import { PRODUCTION_TIMING } from '../../src/core/timing';

describe('a cluster node that stops answering', () => {
  it('is found within 2 minutes with the production timing', () => {
    const boundMs =
      MISSES_ALLOWED * (PRODUCTION_TIMING.requestTimeoutMs + PRODUCTION_TIMING.statusPollMs);
    assert.ok(boundMs <= 120_000, `${boundMs} ms`);
    assert.ok(MISSES_ALLOWED >= 2, 'one missed look is not a lost host');
  });

  it('is found within 2 minutes with the production timing by a client that follows the run again', () => {
    // SshExecutor waits at least 2 s for a connect, whatever the timing says.
    const connectMs = Math.max(2_000, PRODUCTION_TIMING.connectTimeoutMs);
    const boundMs = HOST_MISSES_ALLOWED * (connectMs + PRODUCTION_TIMING.podPollMs);
    assert.ok(boundMs <= 120_000, `${boundMs} ms`);
    assert.ok(boundMs < PRODUCTION_TIMING.readyTimeoutMs, 'no wait for a first boot');
    assert.equal(HOST_MISSES_ALLOWED, MISSES_ALLOWED, 'the same missed looks as the follow');
  });
});

describe("a cluster node's first sign of an end", () => {
  let dir = '';
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("looks at the cluster's pods at once, not a status poll later: its job failed and its pod EXITED", async function () {
    this.timeout(40_000);
    dir = mkdtempSync(path.join(tmpdir(), 'ob-cluster-sign-'));
    // Both nodes' jobs read from one run directory (two local executors): both exited 1, as
    // torchrun on every node does once a node died; node 1's pod EXITED from the second look on.
    const remoteDir = path.join(dir, 'pod', 'run');
    mkdirSync(remoteDir, { recursive: true });
    writeFileSync(path.join(remoteDir, 'exit_code'), '1\n');
    const looks: string[] = [];
    const server = await startServer((hit, res) => {
      looks.push(hit.url);
      const exited = looks.length > 1 ? 'EXITED' : 'RUNNING';
      json(res, 200, {
        pods: [0, 1].map((rank) =>
          pod({
            id: `p${rank}`,
            status: rank === 1 ? exited : 'RUNNING',
            cluster: { id: 'c1', rank, ip: `10.65.0.${rank + 2}` },
          }),
        ),
      });
    });
    // The fake clock never moves here: a follow that waited for its next status poll never ends.
    const { client, clock } = makeClient(server);
    const startMs = clock.nowMs();
    const store = new RunStore(path.join(dir, 'runs'), clock);
    const run = store.create({ project: 'ddp', target: 'cluster', remoteDir: () => remoteDir });
    const bus = new EventBus();
    const ctx = { store, client, bus, clock, timing: fakeTiming(), version: '0.0.0' };
    const members = [0, 1].map((rank) => ({
      rank,
      pod: { id: `p${rank}` } as Pod,
      ip: null,
      executor: new LocalExecutor({ clock }) as unknown as SshExecutor,
    }));
    const handle = { cluster: { id: 'c1' } as Cluster, members };
    const stop = new AbortController();
    const following = followCluster(ctx, run, handle, { signal: stop.signal });
    let ended = false;
    void following.finally(() => (ended = true)).catch(() => undefined);
    try {
      await waitFor(() => ended, 'the end of the follow', 30_000);
    } finally {
      stop.abort();
    }
    const end = await following;
    assert.equal(end.kind, 'died', JSON.stringify(end));
    assert.match(end.message, /node 1 failed the run: its pod p1 is EXITED/);
    assert.equal(looks.length, 2, 'the pods looked at twice: the poll, then at the sign');
    assert.equal(clock.nowMs(), startMs, 'no wait');
  });
});
