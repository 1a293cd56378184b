/**
 * The `overbrainer` CLI end to end, as a user runs it: a child process
 * (`node dist/cli.js -C <workspace> …`, the bundle rebuilt when src/ is newer) with a cleared
 * environment, against the Runpod emulator whose pods run the real bootstrap,
 * watchdog and sshd. The workspace is examples/tiny/ with a `command`
 * trainer. Every scenario asserts on run.json, pod.json, the files on disk and
 * the emulator's ledger (what Runpod would bill), never on the CLI's words
 * alone. Acting on a running run (cancel, stop, Ctrl-C, attach, keep, release):
 * cli.runControl. Timings: the production constants divided by OVERBRAINER_TIMING_SCALE (8, see
 * emulatorEnv).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { assertDeletedAfterRetrieval } from '../helpers/retrievedDelete';
import { postRunPod } from '../emulator/testing';
import { FAILED_BY_POD_RM } from '../../src/core/pod/podAdmin';
import { cliTrainSuite, trainToml as toml } from '../helpers/cliTrainSuite';
import { readJson } from '../helpers/labFiles';

describe('overbrainer CLI against the Runpod emulator', function () {
  // A case spawns up to four CLIs, each a Node process loading the bundle: on a loaded machine
  // (CI beside the e2e windows) one case took over 150 s.
  this.timeout(300_000);
  const { suite, waitFor, hostKeySecret, noSecretIn, GATED_JOB } = cliTrainSuite();
  const { start, cli, onlyRun, runJson, podJson, ledgerOf, runsDir } = suite;

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
