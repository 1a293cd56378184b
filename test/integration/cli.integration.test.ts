/**
 * The `overbrainer` CLI end to end, as a user runs it: a child process
 * (`node dist/cli.js -C <workspace> …`, the bundle rebuilt when src/ is newer) with a cleared
 * environment, against the Runpod emulator whose pods run the real bootstrap,
 * watchdog and sshd. The workspace is examples/tiny/ with a `command`
 * trainer. Every scenario asserts on run.json, pod.json, the files on disk and
 * the emulator's ledger (what Runpod would bill), never on the CLI's words
 * alone. Timings: the production constants divided by OVERBRAINER_TIMING_SCALE (8, see
 * emulatorEnv).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { assertDeletedAfterRetrieval } from '../helpers/retrievedDelete';
import { postRunPod } from '../emulator/testing';
import { FAILED_BY_POD_RM } from '../../src/core/pod/podAdmin';
import { type Running } from '../helpers/cli';
import { gatedCommand, openGate } from '../helpers/gatedJob';
import { cliSuite } from '../helpers/cliSuite';
import { readJson } from '../helpers/labFiles';
import { tinyToml } from '../helpers/tinyWorkspace';

function toml(extra = ''): string {
  return tinyToml('python3 train.py --steps 20 --step-seconds 0.05', extra);
}

describe('overbrainer CLI against the Runpod emulator', function () {
  // A case spawns up to four CLIs, each a Node process loading the bundle: on a loaded machine
  // (CI beside the e2e windows) one case took over 150 s.
  this.timeout(300_000);
  const suite = cliSuite('cli-it-', () => toml());
  const { start, cli, onlyRun, runJson, podJson, ledgerOf, runsDir } = suite;

  async function waitFor(
    what: string,
    running: Running,
    probe: () => boolean,
    timeoutMs = 90_000,
  ): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!probe()) {
      if (Date.now() > until || (running.child.exitCode !== null && !running.exitOk)) {
        throw new Error(`timed out waiting for ${what}; the CLI said:\n${running.out.stderr}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Whether the account still holds the run's host-key secret. */
  const hostKeySecret = async (id: string): Promise<boolean> => {
    const listed = await suite.api.get<{ secrets: { name: string }[] }>('/account/secrets');
    return listed.body.secrets.some((s) => s.name === `overbrainer_host_key_${id}`);
  };
  const noSecretIn = (ran: { stdout: string; stderr: string }): void => {
    assert.ok(
      !ran.stdout.includes(suite.emulator.apiKey) && !ran.stderr.includes(suite.emulator.apiKey),
      'the API key was printed',
    );
  };
  /**
   * A run whose job ends only when the test lets it (helpers/gatedJob.ts) or a command ends it
   * (cancel, pod rm): the test acts while it surely runs, however slow the machine (a 40 s job
   * once ended under a load of 20 before two CLI calls had refused and forced a pod rm).
   */
  const GATED_JOB = { OVERBRAINER_TRAINING__COMMAND: gatedCommand() };
  /** A job long enough to be stopped: a snapshot request is honoured between train.py's steps. */
  const LONG_JOB = {
    OVERBRAINER_TRAINING__COMMAND: 'python3 train.py --steps 400 --step-seconds 0.1',
  };

  it('trains: results verified on disk, pod deleted and confirmed, client key and host-key secret gone; runs ls', async () => {
    // A pod of a run another checkout started: warned about before the run, never deleted.
    const other = 'elsewhere_20260101-000000';
    const orphanId = await postRunPod(suite.api, other, ['sleep', '600']);
    const ran = await cli(['train']);
    assert.ok(
      ran.stderr.includes(
        `warning: pod ${orphanId} is still on Runpod at $0.69/h: not in this project's runs/; if no other checkout owns it, \`overbrainer pod rm ${other} --force\``,
      ) ||
        ran.stderr.includes(
          `warning: pod ${orphanId} is still on Runpod: not in this project's runs/; if no other checkout owns it, \`overbrainer pod rm ${other} --force\``,
        ),
      ran.stderr,
    );
    assert.equal(ledgerOf(orphanId).billing, true, 'the warning never deletes');
    await suite.api.delete(`/pods/${orphanId}`);
    assert.equal(ran.code, 0, ran.stderr);
    noSecretIn(ran);
    const id = onlyRun();
    const lines = ran.stdout.trimEnd().split('\n');
    assert.equal(lines.length, 1, ran.stdout);
    assert.match(
      lines[0] ?? '',
      new RegExp(
        `^train: run ${id} succeeded; pod deleted about \\$\\d+\\.\\d\\d; output in runs/${id}/output$`,
      ),
    );
    const run = runJson(id);
    assert.equal(run.state, 'succeeded');
    assert.equal(run.message, null);
    const dir = path.join(runsDir(), id);
    const model = readJson(path.join(dir, 'output', 'model.json'));
    assert.equal(model.kind, 'linear_regression');
    assert.equal(model.step, 20, 'the model of the last step came back');
    assert.ok(fs.existsSync(path.join(dir, 'output', 'README.txt')));
    const metrics = fs.readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n');
    assert.ok(metrics.length >= 20, `${metrics.length} metric lines`);
    const pod = podJson(id);
    const podId = String(pod.pod_id);
    assert.equal(pod.state, 'deleted');
    assertDeletedAfterRetrieval(suite.emulator, podId, pod.deleted_by);
    assert.equal(typeof pod.estimated_spend, 'number');
    const entry = ledgerOf(podId);
    assert.equal(entry.billing, false);
    assert.equal(entry.runId, id);
    assert.equal(
      fs.existsSync(path.join(dir, 'ssh', 'id_ed25519')),
      false,
      'the client key is forgotten',
    );
    assert.ok(fs.existsSync(path.join(dir, 'ssh', 'known_hosts')));
    assert.equal(await hostKeySecret(id), false, 'the host-key secret is deleted');
    for (const expected of [
      `train: run ${id} on target pod`,
      `pod: creating overbrainer-${id}-1 (NVIDIA GeForce RTX 4090)`,
      `pod: created ${podId} (NVIDIA GeForce RTX 4090, `,
      '; waiting for SSH',
      `pod: ${podId} ready after `,
      '; watchdog armed, deletes it by ',
      'train: step ',
      'train: job exited with code 0',
      `pod: deleting ${podId} (results retrieved)`,
      `pod: ${podId} deleted after `,
    ]) {
      assert.ok(
        ran.stderr.includes(expected),
        `stderr lacks ${JSON.stringify(expected)}:\n${ran.stderr}`,
      );
    }

    const listed = await cli(['runs', 'ls']);
    assert.equal(listed.code, 0, listed.stderr);
    const [header, row] = listed.stdout.trimEnd().split('\n');
    assert.match(header ?? '', /^RUN\s+STATE\s+TARGET\s+CREATED\s+SUMMARY$/);
    assert.match(
      row ?? '',
      new RegExp(`^${id}\\s+succeeded\\s+pod\\s+\\S+Z\\s+pod deleted about \\$\\d+\\.\\d\\d$`),
    );
  });

  it('train --keep-pod keeps the pod (ssh command printed); pod ls shows it kept; pod rm deletes it', async () => {
    const ran = await cli(['train', '--keep-pod']);
    assert.equal(ran.code, 0, ran.stderr);
    const id = onlyRun();
    const pod = podJson(id);
    const podId = String(pod.pod_id);
    assert.equal(pod.state, 'kept');
    assert.equal(pod.keep, true);
    assert.equal(pod.deadline, null);
    assert.equal(runJson(id).state, 'succeeded');
    assert.ok(fs.existsSync(path.join(runsDir(), id, 'output', 'model.json')));
    assert.ok(ran.stderr.includes(`kept (--keep-pod): \`overbrainer runs ssh ${id}\``), ran.stderr);
    assert.ok(
      ran.stderr.includes('watchdog armed, kept with no time limit (--keep-pod)'),
      ran.stderr,
    );
    assert.match(
      ran.stdout.trim(),
      new RegExp(`^train: run ${id} succeeded; pod kept ${podId}; output in runs/${id}/output$`),
    );
    assert.equal(ledgerOf(podId).billing, true, 'a kept pod stays');
    assert.ok(
      fs.existsSync(path.join(runsDir(), id, 'ssh', 'id_ed25519')),
      'its key stays to reach it',
    );

    const ls = await cli(['pod', 'ls']);
    assert.equal(ls.code, 0, ls.stderr);
    const [header, ...rows] = ls.stdout.trimEnd().split('\n');
    assert.match(header ?? '', /^RUN\s+POD\s+STATUS\s+GPU\s+\$\/H\s+CREATED\s+NOTE$/);
    assert.equal(rows.length, 1, ls.stdout);
    assert.match(
      rows[0] ?? '',
      new RegExp(
        `^${id}\\s+${podId}\\s+RUNNING\\s+NVIDIA GeForce RTX 4090\\s+\\d+\\.\\d\\d\\s+\\S+\\s+kept$`,
      ),
    );

    const rm = await cli(['pod', 'rm', id]);
    assert.equal(rm.code, 0, rm.stderr);
    assert.match(
      rm.stdout.trim(),
      new RegExp(
        `^pod: ${podId} deleted after (\\d+s|\\d+m\\d\\ds|\\d+h\\d\\dm), about \\$\\d+\\.\\d\\d$`,
      ),
    );
    assert.equal(ledgerOf(podId).billing, false);
    const after = podJson(id);
    assert.equal(after.state, 'deleted');
    assert.equal(after.deleted_by, 'pod_rm');
    assert.equal(runJson(id).state, 'succeeded', 'removing a kept pod leaves its run as it ended');
    assert.equal(fs.existsSync(path.join(runsDir(), id, 'ssh', 'id_ed25519')), false);

    const again = await cli(['pod', 'rm', id]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout.trim(), `pod: no pod for run ${id}`);
  });

  it('pod rm refuses a running run without --force; --force deletes its pod and the follower finds it gone', async () => {
    const training = start(['train'], GATED_JOB);
    await waitFor('the job to run', training, () =>
      training.out.stderr.includes('train: job running'),
    );
    const id = onlyRun();
    const podId = String(podJson(id).pod_id);

    const refused = await cli(['pod', 'rm', id]);
    assert.equal(refused.code, 1, refused.stderr);
    assert.ok(
      refused.stderr.includes(
        `error: run ${id} is still running: its training pod ${podId} was kept; stop it with \`overbrainer train cancel ${id}\` first, or pass --force`,
      ),
      refused.stderr,
    );
    assert.equal(refused.stdout, '');
    assert.equal(ledgerOf(podId).billing, true);
    assert.equal(runJson(id).state, 'running');

    const forced = await cli(['pod', 'rm', id, '--force']);
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(
      forced.stdout.trim(),
      new RegExp(
        `^pod: ${podId} deleted after (\\d+s|\\d+m\\d\\ds|\\d+h\\d\\dm), about \\$\\d+\\.\\d\\d$`,
      ),
    );
    assert.equal(ledgerOf(podId).billing, false);

    const followed = await training.done;
    assert.equal(followed.code, 1, followed.stderr);
    assert.ok(
      followed.stderr.includes(`pod ${podId} was deleted by \`overbrainer pod rm\``),
      followed.stderr,
    );
    assert.match(
      followed.stdout.trim(),
      new RegExp(
        `^train: run ${id} failed; ${FAILED_BY_POD_RM.replace(/[`$()]/g, '\\$&')}; pod deleted`,
      ),
    );
    const run = runJson(id);
    assert.equal(run.state, 'failed');
    assert.equal(run.message, FAILED_BY_POD_RM);
    const pod = podJson(id);
    assert.equal(pod.state, 'deleted');
    assert.equal(pod.deleted_by, 'pod_rm', 'the follower keeps what pod rm recorded');
  });

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

  it('trains on a local target without any API key; --keep-pod is refused there', async () => {
    fs.writeFileSync(
      path.join(suite.ws, 'overbrainer.toml'),
      toml().replace('target = "pod"', 'target = "here"') + '\n[targets.here]\nkind = "local"\n',
    );
    const before = suite.emulator.requests().length;
    const ran = await cli(['train'], { OVERBRAINER_RUNPOD__API_KEY: '' });
    assert.equal(ran.code, 0, ran.stderr);
    const id = onlyRun();
    assert.equal(ran.stdout.trim(), `train: run ${id} succeeded; output in runs/${id}/output`);
    assert.equal(runJson(id).state, 'succeeded');
    assert.ok(fs.existsSync(path.join(runsDir(), id, 'output', 'model.json')));
    assert.equal(fs.existsSync(path.join(runsDir(), id, 'pod.json')), false);
    const keep = await cli(['train', '--keep-pod'], { OVERBRAINER_RUNPOD__API_KEY: '' });
    assert.equal(keep.code, 1);
    assert.ok(
      keep.stderr.includes('error: --keep-pod only applies to a runpod target'),
      keep.stderr,
    );
    assert.equal(suite.emulator.requests().length, before, 'a local run never calls Runpod');
  });

  it('refuses bad configuration and usage with exit 2, before any call to Runpod', async () => {
    const before = suite.emulator.requests().length;
    fs.writeFileSync(path.join(suite.ws, 'overbrainer.toml'), toml('gpu_type = "NVIDIA A40"\n'));
    const bad = await cli(['train']);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /overbrainer\.toml:\d+:\d+: .+\. .+/);
    const usage = await cli(['pod', 'rm']);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /^overbrainer: pod rm needs a RUN_ID\n/);
    const noKey = await cli(['pod', 'ls'], { OVERBRAINER_RUNPOD__API_KEY: '' });
    assert.equal(noKey.code, 2, noKey.stderr);
    assert.match(noKey.stderr, /OVERBRAINER_RUNPOD__API_KEY: no Runpod API key is set/);
    assert.equal(suite.emulator.requests().length, before);
    assert.equal(fs.existsSync(runsDir()), false, 'no run was created');
  });
});
