/**
 * The torchrun launch line of a multi-node job, run under dash, busybox sh and bash with a
 * stand-in torchrun that prints what it was given: Runpod's cluster variables become torchrun's
 * flags on each node, the cluster interface is exported for NCCL and gloo, the script's arguments
 * arrive as they were written, and a node without the variables fails naming the missing one.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CLUSTER_IFNAME, torchrunLine } from '../../src/core/train/torchrun';

const SHELLS = ['dash', 'busybox sh', 'bash'];
const CLUSTER_ENV = {
  NUM_NODES: '3',
  NUM_TRAINERS: '8',
  NODE_RANK: '2',
  PRIMARY_ADDR: '10.65.0.2',
  PRIMARY_PORT: '29500',
};

describe('the torchrun launch line', () => {
  let dir: string;
  let fake: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ob-torchrun-'));
    fake = join(dir, 'torchrun');
    writeFileSync(
      fake,
      '#!/bin/sh\nprintf "%s\\n" "NCCL=$NCCL_SOCKET_IFNAME" "GLOO=$GLOO_SOCKET_IFNAME"\nfor a in "$@"; do printf "[%s]\\n" "$a"; done\n',
    );
    chmodSync(fake, 0o755);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  function run(shell: string, line: string, env: Record<string, string>) {
    const [program, ...first] = shell.split(' ');
    return spawnSync(program ?? 'sh', [...first, '-c', line], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
      encoding: 'utf8',
    });
  }

  for (const shell of SHELLS) {
    it(`under ${shell}: the cluster's variables become torchrun's flags, the arguments as written`, () => {
      const line = torchrunLine('train.py', ['--out', 'my output', "it's"], { torchrun: fake });
      const done = run(shell, line, CLUSTER_ENV);
      assert.equal(done.status, 0, done.stderr);
      assert.deepEqual(done.stdout.trim().split('\n'), [
        `NCCL=${CLUSTER_IFNAME}`,
        `GLOO=${CLUSTER_IFNAME}`,
        '[--nnodes=3]',
        '[--nproc_per_node=8]',
        '[--node_rank=2]',
        '[--master_addr=10.65.0.2]',
        '[--master_port=29500]',
        '[--redirects]',
        '[1]',
        '[--tee]',
        '[1]',
        '[train.py]',
        '[--out]',
        '[my output]',
        "[it's]",
      ]);
    });

    it(`under ${shell}: a node that is not a cluster member fails naming the missing variable`, () => {
      const { NODE_RANK: _rank, ...withoutRank } = CLUSTER_ENV;
      const done = run(shell, torchrunLine('train.py', [], { torchrun: fake }), withoutRank);
      assert.notEqual(done.status, 0);
      assert.equal(done.stdout, '');
      assert.match(done.stderr, /NODE_RANK.*not a member of an Instant Cluster/);
    });
  }
});
