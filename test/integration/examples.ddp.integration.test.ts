/**
 * examples/ddp as shipped, trained by the CLI on one emulated pod: its `launcher = "torchrun"`
 * starts torchrun on one node there with a process per GPU of the pod (gpu_count 1: one process,
 * gloo on CPU; real Python, Debian's real torchrun), so the one `[training]` serves its pod
 * target and its cluster target (the cluster's run is cluster.torchrun's and cluster.train's).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { cliSuite } from '../helpers/cliSuite';

const DDP = path.resolve(__dirname, '..', '..', 'examples', 'ddp');

describe('examples/ddp as shipped, on one pod', function () {
  this.timeout(300_000);
  const suite = cliSuite(
    'ddp-it-',
    () => fs.readFileSync(path.join(DDP, 'overbrainer.toml'), 'utf8'),
    {
      prepare: (ws) => fs.copyFileSync(path.join(DDP, 'train.py'), path.join(ws, 'train.py')),
    },
  );

  it('overbrainer train runs it under torchrun on one node: its 40 steps, its model and checkpoints home verified, its pod deleted', async () => {
    assert.ok(fs.existsSync('/usr/bin/torchrun'), 'apt-get install python3-torch');
    // The emulator's pods share this machine's network: something else on it holds torchrun
    // --standalone's fixed port (29400), as another job's torchrun may; the run must not care.
    const holder = net.createServer();
    await new Promise<void>((resolve) => {
      holder.once('error', () => resolve()); // held already: the same case
      holder.listen(29400, '127.0.0.1', () => resolve());
    });
    const ran = await suite.cli(['train']).finally(() => holder.close());
    const id = suite.onlyRun();
    const jobLog = path.join(suite.runsDir(), id, 'job.log');
    const log = fs.existsSync(jobLog)
      ? fs.readFileSync(jobLog, 'utf8').slice(-3000)
      : '(no job.log)';
    assert.equal(ran.code, 0, `${ran.stderr}\njob.log:\n${log}`);
    assert.equal(suite.runJson(id).state, 'succeeded');
    const runDir = path.join(suite.runsDir(), id);
    const result = JSON.parse(
      fs.readFileSync(path.join(runDir, 'output', 'result.json'), 'utf8'),
    ) as { steps: number; world_size: number; loss: number };
    assert.deepEqual([result.steps, result.world_size], [40, 1]);
    assert.ok(fs.existsSync(path.join(runDir, 'output', 'model.pt')), 'the model is home');
    const rank0 = JSON.parse(
      fs.readFileSync(path.join(runDir, 'output', 'rank-0.json'), 'utf8'),
    ) as { world_size: number };
    assert.equal(rank0.world_size, 1);
    // The protocol's lines from rank 0: every step once, the loss falling.
    const steps = fs
      .readFileSync(path.join(runDir, 'metrics.jsonl'), 'utf8')
      .split('\n')
      .filter((line) => line.includes('"step"'))
      .map((line) => JSON.parse(line) as { step?: number; loss?: number })
      .filter((m) => m.loss !== undefined);
    assert.deepEqual(
      steps.map((m) => m.step),
      Array.from({ length: 40 }, (_, i) => i + 1),
    );
    assert.ok(steps.at(-1)!.loss! < steps[0]!.loss!, 'the loss falls');
    assert.equal(suite.podJson(id).state, 'deleted');
  });
});
