/**
 * The `overbrainer` CLI acting on a run while it runs, end to end as a user runs it (child
 * processes of `node dist/cli.js` against the Runpod emulator's real pods): `train cancel`,
 * `train stop`, Ctrl-C (once the job runs, and while the pod is provisioning), `train attach`,
 * `train keep` and `train release`. Every scenario asserts on run.json, pod.json and the
 * emulator's ledger, never on the CLI's words alone. A whole train, pod rm, local targets and
 * usage errors: cli. Timings: production / OVERBRAINER_TIMING_SCALE (8, see emulatorEnv).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { assertDeletedAfterRetrieval } from '../helpers/retrievedDelete';
import { gatedCommand, openGate } from '../helpers/gatedJob';
import { cliTrainSuite } from '../helpers/cliTrainSuite';

describe('overbrainer CLI acting on a running run, against the Runpod emulator', function () {
  // A case spawns up to four CLIs, each a Node process loading the bundle: on a loaded machine
  // (CI beside the e2e windows) one case took over 150 s.
  this.timeout(300_000);
  const { suite, waitFor, hostKeySecret, GATED_JOB, LONG_JOB } = cliTrainSuite();
  const { start, cli, onlyRun, runJson, podJson, ledgerOf, runsDir } = suite;

  it('train cancel while another CLI follows: the follower collects the cancelled run and deletes the pod', async () => {
    const training = start(['train'], GATED_JOB);
    await waitFor('the job to run', training, () =>
      training.out.stderr.includes('train: job running'),
    );
    const id = onlyRun();
    const podId = String(podJson(id).pod_id);
    const cancelled = await cli(['train', 'cancel', id]);
    assert.equal(cancelled.code, 0, cancelled.stderr);
    const followed = await training.done;
    assert.equal(followed.code, 1, followed.stderr);
    assert.match(
      followed.stdout.trim(),
      new RegExp(`^train: run ${id} cancelled; pod deleted about \\$\\d+\\.\\d\\d`),
    );
    assert.ok(followed.stderr.includes('train: job cancelled'), followed.stderr);
    assert.equal(runJson(id).state, 'cancelled');
    assert.equal(podJson(id).state, 'deleted');
    assert.equal(ledgerOf(podId).billing, false);
  });

  it('exit codes of a stopped run: train stop exits 0 once the snapshot is asked for; the train following the run brings it home and exits 1 (stopped)', async () => {
    const training = start(['train'], LONG_JOB);
    await waitFor('the job to run', training, () =>
      training.out.stderr.includes('train: job running'),
    );
    const id = onlyRun();
    const podId = String(podJson(id).pod_id);
    const stopped = await cli(['train', 'stop', id]);
    assert.equal(stopped.code, 0, stopped.stderr);
    assert.match(stopped.stdout, new RegExp(`^train: run ${id} asked for a snapshot`, 'm'));
    const followed = await training.done;
    assert.equal(followed.code, 1, followed.stderr);
    assert.match(followed.stdout.trim(), new RegExp(`^train: run ${id} stopped`));
    assert.equal(runJson(id).state, 'stopped');
    assert.equal(podJson(id).state, 'deleted');
    assert.equal(ledgerOf(podId).billing, false);
  });

  it('Ctrl-C once the job runs only stops following; train cancel then cancels it and deletes the pod', async () => {
    const training = start(['train'], GATED_JOB);
    await waitFor('the job to run', training, () =>
      training.out.stderr.includes('train: job running'),
    );
    const id = onlyRun();
    const podId = String(podJson(id).pod_id);
    training.child.kill('SIGINT');
    const stopped = await training.done;
    assert.equal(stopped.code, 1, stopped.stderr);
    assert.ok(
      stopped.stderr.includes(
        'interrupt: stopping to follow the run; its job and pod keep running',
      ),
      stopped.stderr,
    );
    assert.ok(
      stopped.stderr.includes(
        `interrupted: stopped following run ${id}: the job and pod ${podId} keep running`,
      ),
      stopped.stderr,
    );
    assert.ok(stopped.stderr.includes(`overbrainer train attach ${id}`), stopped.stderr);
    assert.equal(runJson(id).state, 'running');
    assert.equal(ledgerOf(podId).billing, true, 'the pod keeps running');

    const cancelled = await cli(['train', 'cancel', id]);
    assert.equal(cancelled.code, 0, cancelled.stderr);
    assert.match(
      cancelled.stdout.trim(),
      new RegExp(`^train: run ${id} cancelled; pod deleted about \\$\\d+\\.\\d\\d`),
    );
    assert.equal(runJson(id).state, 'cancelled');
    assert.equal(podJson(id).state, 'deleted');
    assert.equal(ledgerOf(podId).billing, false);
    const again = await cli(['train', 'cancel', id]);
    assert.equal(again.code, 1);
    assert.ok(again.stderr.includes(`error: run ${id} already ended: cancelled`), again.stderr);
  });

  it('train attach after Ctrl-C follows the job again to its end, retrieves and deletes the pod', async () => {
    const medium = {
      OVERBRAINER_TRAINING__COMMAND: 'python3 train.py --steps 120 --step-seconds 0.1',
    };
    const training = start(['train'], medium);
    await waitFor('the job to run', training, () =>
      training.out.stderr.includes('train: job running'),
    );
    const id = onlyRun();
    const podId = String(podJson(id).pod_id);
    training.child.kill('SIGINT');
    assert.equal((await training.done).code, 1);
    const attached = await cli(['train', 'attach', id], medium);
    assert.equal(attached.code, 0, attached.stderr);
    assert.match(
      attached.stdout.trim(),
      new RegExp(
        `^train: run ${id} succeeded; pod deleted about \\$\\d+\\.\\d\\d; output in runs/${id}/output$`,
      ),
    );
    assert.equal(runJson(id).state, 'succeeded');
    const metrics = fs.readFileSync(path.join(runsDir(), id, 'metrics.jsonl'), 'utf8');
    assert.ok(metrics.includes('"step":120'), 'the whole metrics file came back');
    assert.equal(podJson(id).state, 'deleted');
    assert.equal(ledgerOf(podId).billing, false);
  });

  it('train keep at runtime keeps the pod after the run; train release after the retrieval deletes it', async () => {
    // The job ends once the pod is kept (its gate): a second CLI keeps it while it surely runs,
    // however long a CLI start takes on a loaded machine.
    const training = start(['train'], { OVERBRAINER_TRAINING__COMMAND: gatedCommand() });
    await waitFor('the job to run', training, () =>
      training.out.stderr.includes('train: job running'),
    );
    const id = onlyRun();
    const podId = String(podJson(id).pod_id);
    const kept = await cli(['train', 'keep', id]);
    assert.equal(kept.code, 0, kept.stderr);
    assert.ok(
      kept.stdout.includes(`pod: ${podId} kept: \`overbrainer runs ssh ${id}\``),
      kept.stdout,
    );
    assert.equal(podJson(id).keep, true);
    openGate(suite.emulator, podId, id);
    const followed = await training.done;
    assert.equal(followed.code, 0, followed.stderr);
    assert.match(
      followed.stdout.trim(),
      new RegExp(`^train: run ${id} succeeded; pod kept ${podId}; output in runs/${id}/output$`),
    );
    assert.equal(podJson(id).state, 'kept');
    assert.equal(ledgerOf(podId).billing, true, 'kept at runtime: it stays after the run');

    const pod = await suite.releaseRetrieved(id, podId);
    // Its results were retrieved (the marker is on the pod): the release deletes it at once.
    assert.equal(ledgerOf(podId).billing, false);
    assertDeletedAfterRetrieval(suite.emulator, podId, pod.deleted_by);
  });

  it('Ctrl-C while the pod is provisioning deletes the pod and fails the run', async () => {
    const training = start(['train']);
    await waitFor('the pod to be created', training, () =>
      training.out.stderr.includes('; waiting for SSH'),
    );
    // Runpod asks the delete to wait 3 s (429): a second Ctrl-C lands while it is under way.
    await suite.emulator.faults.rateLimit('deletePod', 3, 1);
    training.child.kill('SIGINT');
    await waitFor('the delete', training, () => training.out.stderr.includes('pod: deleting '));
    training.child.kill('SIGINT');
    const ran = await training.done;
    assert.match(
      ran.stderr,
      /interrupt ignored: pod \S+ is being deleted, and a delete is never interrupted; wait for it to be confirmed/,
    );
    assert.notEqual(ran.code, 0, ran.stderr);
    const id = onlyRun();
    const run = runJson(id);
    assert.equal(run.state, 'failed');
    assert.equal(run.message, 'interrupted before the job started');
    assert.equal(run.job, null);
    const pod = podJson(id);
    assert.equal(pod.state, 'deleted');
    const podId = String(pod.pod_id);
    assert.equal(ledgerOf(podId).billing, false);
    assert.ok(
      ran.stderr.includes(`pod: deleting ${podId} (interrupted before the job started)`),
      ran.stderr,
    );
    assert.ok(
      ran.stderr.includes(
        `interrupted: run ${id} stopped before its job started; it has no pod left`,
      ),
      ran.stderr,
    );
    assert.match(
      ran.stdout.trim(),
      new RegExp(`^train: run ${id} failed; interrupted before the job started; pod deleted`),
    );
    assert.equal(fs.existsSync(path.join(runsDir(), id, 'ssh', 'id_ed25519')), false);
    assert.equal(await hostKeySecret(id), false, 'the host-key secret is deleted');
  });
});
