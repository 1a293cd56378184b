/**
 * `kind = "ssh"` (issue 36 part 3): the user's own GPU machine, here a real OpenSSH sshd on
 * loopback. Reached as the user's ssh reaches it: the address an alias of their SSH config
 * (HOME/.ssh/config: HostName, Port, IdentityFile, UserKnownHostsFile), the host key checked
 * against their known_hosts and never accepted on its own. The same run as on a pod minus the
 * pod: files uploaded, the job detached, followed, the results brought home verified; attach
 * after the client died; cancel. Nothing on the machine is deleted.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { systemClock } from '../../src/core/clock';
import { ExecError } from '../../src/core/exec/executor';
import { LocalExecutor } from '../../src/core/exec/local';
import { attach, cancel, recoverAbandoned, stop, train } from '../../src/core/flow';
import type { RunRecord } from '../../src/core/runs/runRecord';
import { startJob } from '../../src/core/train/job';
import { RunStore } from '../../src/core/runs/store';
import { runCliProcess } from '../helpers/cli';
import { startHubStandIn } from '../helpers/hubStandIn';
import { gatedCommand } from '../helpers/gatedJob';
import { filesUnder } from '../helpers/labFiles';
import { generateEd25519, processAlive } from '../helpers/sshd';
import {
  closeMachines,
  startGated,
  trackJob,
  userMachine as box,
  type Box,
} from '../helpers/userMachine';

describe('kind = "ssh": the user\'s own machine over their SSH config and known_hosts', function () {
  this.timeout(120_000);
  afterEach(closeMachines);

  it('trains on the machine: files uploaded, job followed, results home verified, nothing deleted there', async () => {
    const b = await box('python3 train.py --steps 12 --step-seconds 0.05');
    const result = await train(b.deps, b.config, b.ws);
    assert.equal(result.run.state, 'succeeded', result.summary);
    assert.equal(result.pod, null);
    assert.equal(result.run.remoteDir, `${b.sshd.root}/ob/${result.run.id}`);
    const local = path.join(b.ws, 'runs', result.run.id, 'output');
    assert.ok(fs.readdirSync(local).length > 0, 'the output came home');
    assert.ok(fs.existsSync(path.join(b.ws, 'runs', result.run.id, 'metrics.jsonl')));
    // Nothing deleted on the user's machine: the run directory and its output stay.
    assert.ok(fs.readdirSync(path.join(result.run.remoteDir, 'output')).length > 0);
    assert.match(result.summary, /succeeded/);
  });

  it('refuses a machine whose host key the known_hosts does not list, before anything is sent', async () => {
    const b = await box('python3 train.py --steps 3 --step-seconds 0.05');
    fs.writeFileSync(path.join(b.home, '.ssh', 'known_hosts'), '');
    const error = await train(b.deps, b.config, b.ws).then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(error instanceof ExecError, String(error));
    assert.equal(error.kind, 'host_key');
    assert.match(error.message, /host key of root@127\.0\.0\.1:\d+ is unknown/);
    assert.match(error.message, /never accepts a host key on its own/);
    assert.match(error.hint, new RegExp(`ssh -p ${b.sshd.port} root@127\\.0\\.0\\.1`));
    assert.equal(fs.existsSync(path.join(b.sshd.root, 'ob')), false, 'nothing reached the machine');
    const [run] = b.deps.store.list().runs;
    assert.equal(run?.state, 'failed');
    // Another key listed for it: refused the same, named as not the one known.
    const other = await box('true', generateEd25519().publicKey);
    const mismatch = await train(other.deps, other.config, other.ws).then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(mismatch instanceof ExecError && mismatch.kind === 'host_key', String(mismatch));
    assert.match(mismatch.message, /which your known_hosts .* does not list for it/);
    assert.equal(fs.existsSync(path.join(other.sshd.root, 'ob')), false);
  });

  it('attach after the client died: the job ran on, its results come home verified', async () => {
    const b = await box(gatedCommand(8));
    const { runId, ended, stop } = await startGated(b);
    stop.abort(); // the client goes away; the job runs on on the machine
    await ended;
    const run = b.deps.store.loadRun(runId);
    assert.equal(run.state, 'running');
    fs.writeFileSync(path.join(run.remoteDir, 'go'), '');
    const result = await attach(b.deps, b.config, runId);
    assert.equal(result.run.state, 'succeeded', result.summary);
    assert.ok(fs.readdirSync(path.join(b.ws, 'runs', runId, 'output')).length > 0);
  });

  it('cancel stops the job on the machine and brings home what it wrote', async () => {
    const b = await box(gatedCommand(8));
    const { runId, ended, stop } = await startGated(b);
    stop.abort();
    await ended;
    const pid = b.deps.store.loadRun(runId).job!.pid;
    const result = await cancel(b.deps, b.config, runId);
    assert.equal(result.run.state, 'cancelled', result.summary);
    assert.equal(processAlive(pid), false, 'the job is gone');
    assert.ok(fs.existsSync(result.run.remoteDir), 'nothing deleted on the machine');
  });
  it('stop while the train follows: the snapshot comes home, the run ends stopped; a resume goes on from it', async () => {
    const b = await box('python3 train.py --steps 80 --step-seconds 0.1');
    let metrics = 0;
    let id = '';
    const fewSteps = new Promise<void>((resolve) => {
      b.deps.bus.on((event) => {
        if (event.type === 'metric' && ++metrics === 5) {
          id = event.runId;
          resolve();
        }
      });
    });
    const training = train(b.deps, b.config, b.ws);
    await fewSteps;
    const other = {
      ...b.deps,
      store: new RunStore(path.join(b.ws, 'runs'), systemClock),
      owner: 'cli',
    };
    const stopped = await stop(other, b.config, id);
    assert.equal(stopped.request.kind, 'requested');
    assert.equal(stopped.result, null, 'the following train brings the snapshot home');
    const result = await training;
    assert.equal(result.run.state, 'stopped', result.summary);
    const snapshot = result.run.snapshot!;
    assert.ok(snapshot.step > 0 && snapshot.step < 80, `stopped at ${snapshot.step}`);
    const checkpoint = path.join(b.ws, 'runs', id, snapshot.checkpoint, 'model.json');
    assert.ok(fs.existsSync(checkpoint), 'the snapshot checkpoint is home');

    const resumed = await train(b.deps, b.config, b.ws, { resumeFrom: id });
    assert.equal(resumed.run.state, 'succeeded', resumed.summary);
    assert.equal(resumed.run.resumedFrom, id);
    const steps = fs
      .readFileSync(path.join(b.ws, 'runs', resumed.run.id, 'metrics.jsonl'), 'utf8')
      .split('\n')
      .filter((line) => line.includes('"loss"'))
      .map((line) => (JSON.parse(line) as { step: number }).step);
    assert.equal(steps[0], snapshot.step + 1, 'the resumed run goes on at the next step');
    assert.equal(steps.at(-1), 80);
  });

  it('stop with no client following: stop follows the job to its snapshot, brings it home, the run ends stopped', async () => {
    const b = await box('python3 train.py --steps 200 --step-seconds 0.1');
    const stopFollowing = new AbortController();
    let metrics = 0;
    let id = '';
    b.deps.bus.on((event) => {
      if (event.type === 'metric' && ++metrics === 3) {
        id = event.runId;
        stopFollowing.abort(); // the client goes away; the job runs on on the machine
      }
    });
    await train(b.deps, b.config, b.ws, { signal: stopFollowing.signal }).catch(() => null);
    assert.equal(b.deps.store.loadRun(id).state, 'running');
    const stopped = await stop(b.deps, b.config, id);
    assert.equal(stopped.request.kind, 'requested');
    assert.ok(stopped.result, 'nobody else follows: stop follows the run to its end');
    assert.equal(stopped.result.run.state, 'stopped', stopped.result.summary);
    const snapshot = stopped.result.run.snapshot!;
    assert.ok(snapshot.step > 0 && snapshot.step < 200, `stopped at ${snapshot.step}`);
    assert.ok(fs.existsSync(path.join(b.ws, 'runs', id, snapshot.checkpoint, 'model.json')));
  });

  it('hub_model_id: the job pushes from the machine, the run records the revision the Hub answered', async () => {
    const token = 'hf_itSshTargetToken_8c41e0d2';
    const hub = await startHubStandIn({ token });
    try {
      const b = await box('python3 train.py --steps 4 --step-seconds 0.05', undefined, {
        training: 'hub_model_id = "me/box"',
        env: { HF_ENDPOINT: hub.url, OVERBRAINER_HF_TOKEN: token },
      });
      const result = await train(b.deps, b.config, b.ws);
      assert.equal(result.run.state, 'succeeded', result.summary);
      const [revision] = hub.revisions('me/box');
      assert.ok(revision, `nothing was pushed: ${result.summary}`);
      assert.equal(result.run.hubPush?.state, 'pushed', result.summary);
      assert.equal(result.run.hubPush?.state === 'pushed' && result.run.hubPush.revision, revision);
      assert.match(
        result.summary,
        new RegExp(`pushed output/ to the Hub as me/box \\(revision ${revision}\\)`),
      );
      // The token reached the job (the Hub took it) over the launcher's stdin, and no file:
      // neither the workspace (run.json, the copied job.log) nor the run directory on the machine.
      for (const dir of [b.ws, result.run.remoteDir]) {
        for (const [rel, data] of filesUnder(dir)) {
          assert.ok(!data.toString('latin1').includes(token), `${dir}/${rel} holds the token`);
        }
      }
    } finally {
      await hub.close();
    }
  });

  /**
   * What a client killed before the job started leaves (the flow's own records, made by its own
   * calls): a run `preparing`, its directory on the machine half uploaded; with `job`, a job
   * launched there whose start was never recorded (killed between the launch and its record).
   */
  async function leftPreparing(b: Box, job: boolean): Promise<{ run: RunRecord; pid: number }> {
    const run = b.deps.store.create({
      project: 'tiny',
      target: 'box',
      remoteDir: (id) => `${b.sshd.root}/ob/${id}`,
    });
    fs.mkdirSync(path.join(run.remoteDir, 'data'), { recursive: true });
    fs.writeFileSync(path.join(run.remoteDir, 'train.py'), '# half of it');
    if (!job) return { run, pid: 0 };
    const local = new LocalExecutor({ clock: systemClock });
    try {
      const { pid } = await startJob(local, { runDir: run.remoteDir, script: 'exec sleep 300' });
      trackJob(pid);
      return { run, pid };
    } finally {
      local.dispose();
    }
  }

  it('a run left preparing (its client killed before the job started) is settled by attach and at the next start: failed, no job left, its half-uploaded directory removed', async () => {
    const b = await box('python3 train.py --steps 3 --step-seconds 0.05');
    const byAttach = await leftPreparing(b, true);
    assert.ok(processAlive(byAttach.pid), 'the unrecorded job runs');
    const attached = await attach(b.deps, b.config, byAttach.run.id);
    assert.equal(attached.run.state, 'failed', attached.summary);
    assert.equal(attached.run.message, 'interrupted before the job started');
    assert.deepEqual(attached.run.end?.cause, 'interrupted');
    assert.equal(processAlive(byAttach.pid), false, 'no job nobody follows is left running');
    assert.equal(fs.existsSync(byAttach.run.remoteDir), false, 'the half upload is removed');
    assert.equal(b.deps.store.loadRun(byAttach.run.id).state, 'failed');

    const atStart = await leftPreparing(b, false);
    const recovered = await recoverAbandoned(b.deps, b.config);
    assert.deepEqual(
      recovered.map((r) => [r.runId, r.error]),
      [[atStart.run.id, null]],
    );
    assert.equal(b.deps.store.loadRun(atStart.run.id).state, 'failed');
    assert.equal(fs.existsSync(atStart.run.remoteDir), false, 'the half upload is removed');
    // The workdir itself and the runs beside it stay: only the run's own directory goes.
    assert.ok(fs.existsSync(path.join(b.sshd.root, 'ob')));
  });

  it('overbrainer train on the machine settles a run a killed client left preparing, then trains', async () => {
    const b = await box('python3 train.py --steps 3 --step-seconds 0.05');
    const left = await leftPreparing(b, true);
    const ran = await runCliProcess(['-C', b.ws, 'train'], { env: b.env });
    assert.equal(ran.code, 0, ran.stderr);
    assert.match(
      ran.stderr,
      new RegExp(`run ${left.run.id} was left starting by a client that stopped`),
    );
    const settled = b.deps.store.loadRun(left.run.id);
    assert.equal(settled.state, 'failed');
    assert.equal(settled.message, 'interrupted before the job started');
    assert.equal(processAlive(left.pid), false);
    assert.equal(fs.existsSync(left.run.remoteDir), false);
    const [trained] = b.deps.store.list().runs.filter((r) => r.id !== left.run.id);
    assert.equal(trained?.state, 'succeeded', ran.stderr);
  });
});
