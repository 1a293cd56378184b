/**
 * `overbrainer pod rm` and `train release` tell the truth and apply one set of rules, as a user
 * runs them (the CLI in a child process against the Runpod emulator, whose pods run the real
 * bootstrap, watchdog and sshd): a recorded pod that is not on the account is said to be gone,
 * never deleted; `pod rm POD_ID` refuses what `pod rm RUN_ID` refuses (a pod of another
 * checkout's run, of a run still starting or running), with the same messages, unless forced;
 * a pod kept with `--keep-pod` can be released, and is then retrieved and deleted as any run.
 * Every scenario asserts on pod.json, run.json, the pod's own files and the emulator's ledger,
 * not on the words alone. Timings: production / 8.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { postRunPod } from '../emulator/testing';
import { cliSuite } from '../helpers/cliSuite';
import { gatedCommand, openGate } from '../helpers/gatedJob';
import { tinyToml } from '../helpers/tinyWorkspace';

describe('overbrainer pod rm and train release against the Runpod emulator', function () {
  this.timeout(150_000);
  const suite = cliSuite('cli-podrm-', () =>
    tinyToml('python3 train.py --steps 20 --step-seconds 0.05'),
  );
  const { start, cli, onlyRun, runJson, podJson, runsDir } = suite;
  const billing = (podId: string): boolean =>
    suite.emulator.ledger().pods.find((p) => p.id === podId)?.billing ?? false;

  it('pod rm of a recorded pod no longer on the account says it was already gone, deletes nothing, records it gone', async () => {
    const trained = await cli(['train', '--keep-pod']);
    assert.equal(trained.code, 0, trained.stderr);
    const id = onlyRun();
    const podId = String(podJson(id).pod_id);
    assert.equal(podJson(id).state, 'kept');
    // Removed behind the CLI's back (the Runpod console, another tool): the record still names it.
    assert.equal((await suite.api.delete(`/pods/${podId}`)).status, 204);
    const deletesBefore = suite.emulator.ledger().pods.length;

    const rm = await cli(['pod', 'rm', id]);
    assert.equal(rm.code, 0, rm.stderr);
    assert.equal(
      rm.stdout.trim(),
      `pod: pod ${podId} was already gone from the account; nothing deleted`,
    );
    assert.doesNotMatch(rm.stdout, /deleted after|about \$/);
    const after = podJson(id);
    assert.equal(after.state, 'deleted', 'recorded gone');
    assert.equal(runJson(id).state, 'succeeded');
    assert.equal(
      suite.emulator.ledger().pods.length,
      deletesBefore,
      'no pod was created or touched',
    );

    const again = await cli(['pod', 'rm', id]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout.trim(), `pod: no pod for run ${id}`);
  });

  it('pod rm POD_ID refuses a pod of another checkout’s run and of a running run with the messages of pod rm RUN_ID; --force deletes it', async () => {
    // Another checkout's run: its marker names a run this project's runs/ does not hold.
    const other = 'elsewhere_20260101-000000';
    const foreign = await postRunPod(suite.api, other, ['sleep', '600']);
    const byRun = await cli(['pod', 'rm', other]);
    const byPod = await cli(['pod', 'rm', foreign]);
    assert.equal(byRun.code, 1, byRun.stderr);
    assert.equal(byPod.code, 1, byPod.stderr);
    assert.match(byRun.stderr, /not in this project's runs\//);
    assert.equal(byPod.stderr, byRun.stderr, 'the same refusal');
    assert.equal(byPod.stdout, '');
    assert.equal(billing(foreign), true, 'refused: nothing deleted');
    const forced = await cli(['pod', 'rm', foreign, '--force']);
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(forced.stdout.trim(), new RegExp(`^pod: ${foreign} deleted`));
    assert.equal(billing(foreign), false);

    // A run of this checkout still running: its training pod by ID is refused as by the run.
    // Its job ends only when the forced pod rm deletes the pod (its gate is never opened).
    const training = start(['train'], { OVERBRAINER_TRAINING__COMMAND: gatedCommand() });
    const until = Date.now() + 90_000;
    while (!training.out.stderr.includes('train: job running')) {
      assert.ok(Date.now() < until && training.child.exitCode === null, training.out.stderr);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const id = onlyRun();
    const podId = String(podJson(id).pod_id);
    const runRefused = await cli(['pod', 'rm', id]);
    const podRefused = await cli(['pod', 'rm', podId]);
    assert.equal(runRefused.code, 1, runRefused.stderr);
    assert.equal(podRefused.code, 1, podRefused.stderr);
    assert.ok(
      podRefused.stderr.includes(
        `error: run ${id} is still running: its training pod ${podId} was kept; stop it with \`overbrainer train cancel ${id}\` first, or pass --force`,
      ),
      podRefused.stderr,
    );
    assert.equal(podRefused.stderr, runRefused.stderr, 'the same refusal');
    assert.equal(billing(podId), true);
    assert.equal(runJson(id).state, 'running');

    const podForced = await cli(['pod', 'rm', podId, '--force']);
    assert.equal(podForced.code, 0, podForced.stderr);
    assert.match(
      podForced.stdout.trim(),
      new RegExp(`^pod: ${podId} deleted after (\\d+s|\\d+m\\d\\ds|\\d+h\\d\\dm)`),
    );
    assert.equal(billing(podId), false);
    assert.equal((await training.done).code, 1);
    assert.equal(runJson(id).state, 'failed');
    assert.equal(podJson(id).deleted_by, 'pod_rm');
  });

  it('pod rm POD_ID of a run still starting its pod is refused as pod rm RUN_ID is', async () => {
    // A create went unanswered: the run is running, its last create call names no pod, and
    // Runpod lists a pod carrying its marker (the one that call made).
    const trained = await cli(['train', '--keep-pod']);
    assert.equal(trained.code, 0, trained.stderr);
    const id = onlyRun();
    const kept = String(podJson(id).pod_id);
    await suite.api.delete(`/pods/${kept}`);
    const pod = podJson(id);
    const attempts = pod.attempts as Record<string, unknown>[];
    attempts.push({
      ...attempts[0],
      name: `overbrainer-${id}-2`,
      result: 'ambiguous',
      pod_id: undefined,
    });
    fs.writeFileSync(
      path.join(runsDir(), id, 'pod.json'),
      JSON.stringify({ ...pod, state: 'creating', pod_id: null, attempts }, null, 2),
    );
    fs.writeFileSync(
      path.join(runsDir(), id, 'run.json'),
      JSON.stringify({ ...runJson(id), state: 'running' }, null, 2),
    );
    const made = await postRunPod(suite.api, id, ['sleep', '600'], { suffix: '2' });
    const byRun = await cli(['pod', 'rm', id]);
    const byPod = await cli(['pod', 'rm', made]);
    assert.equal(byRun.code, 1, byRun.stderr);
    assert.match(byRun.stderr, new RegExp(`run ${id} is still starting its pod`));
    assert.equal(byPod.code, 1, byPod.stderr);
    assert.equal(byPod.stderr, byRun.stderr, 'the same refusal');
    assert.equal(billing(made), true, 'refused: nothing deleted');
    const forced = await cli(['pod', 'rm', made, '--force']);
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(forced.stdout.trim(), new RegExp(`^pod: ${made} deleted`));
    assert.equal(billing(made), false);
  });

  it('train release of a pod kept with --keep-pod after its run: its results were retrieved, so it is deleted', async () => {
    const trained = await cli(['train', '--keep-pod']);
    assert.equal(trained.code, 0, trained.stderr);
    const id = onlyRun();
    const podId = String(podJson(id).pod_id);
    assert.equal(podJson(id).deadline_unix, null, 'kept at creation: no deadline');
    assert.equal(billing(podId), true);
    await suite.releaseRetrieved(id, podId);
    assert.equal(billing(podId), false);
    assert.equal(runJson(id).state, 'succeeded');
    assert.equal(fs.existsSync(path.join(runsDir(), id, 'ssh', 'id_ed25519')), false);
  });

  it('train release of a pod kept with --keep-pod while a followed job runs: a fresh lease, then a deadline for its watchdog; the follower retrieves and deletes it', async () => {
    // The job ends once the release is checked on the pod (its gate), however slow the machine.
    const training = start(['train', '--keep-pod'], {
      OVERBRAINER_TRAINING__COMMAND: gatedCommand(),
    });
    const until = Date.now() + 90_000;
    while (!training.out.stderr.includes('train: job running')) {
      assert.ok(Date.now() < until && training.child.exitCode === null, training.out.stderr);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const id = onlyRun();
    const before = podJson(id);
    const podId = String(before.pod_id);
    assert.equal(before.deadline_unix, null);
    const releasedAtS = Math.floor(Date.now() / 1000);
    const released = await cli(['train', 'release', id]);
    assert.equal(released.code, 0, released.stderr);
    const pod = podJson(id);
    assert.equal(pod.keep, false);
    // The deadline max_hours (1 h) after its creation, as if it had never been kept.
    assert.equal(pod.deadline_unix, Number(pod.created_unix) + 3600);
    assert.ok(
      released.stdout.includes(`pod: ${podId} released: its watchdog's deadline (${pod.deadline})`),
      released.stdout,
    );
    // On the pod: the deadline its watchdog now reads, and a lease written at the release.
    const emulated = suite.emulator.pod(podId);
    assert.ok(emulated, `pod ${podId} is gone`);
    const remote = path.join(emulated.dirs.workspace, 'overbrainer', id);
    assert.equal(
      fs.readFileSync(path.join(remote, '.pod', 'deadline'), 'utf8').trim(),
      String(pod.deadline_unix),
    );
    assert.ok(fs.statSync(path.join(remote, '.pod', 'lease')).mtimeMs >= (releasedAtS - 1) * 1000);
    openGate(suite.emulator, podId, id);
    const followed = await training.done;
    assert.equal(followed.code, 0, followed.stderr);
    assert.match(followed.stdout.trim(), new RegExp(`^train: run ${id} succeeded; pod deleted`));
    assert.equal(podJson(id).state, 'deleted');
    assert.equal(billing(podId), false, 'released: deleted after its retrieval, not kept');
    assert.ok(fs.existsSync(path.join(runsDir(), id, 'output', 'model.json')));
  });
});
