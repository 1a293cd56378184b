/**
 * The project's REAL pod command (src/core/pod/podScripts.ts: bootstrap.sh + watchdog.sh) runs
 * unchanged in an emulated pod: production paths, `service ssh restart`, the host key from an
 * account secret, the watchdog proving it reaches the API with the pod's own key, and deleting
 * its pod by itself once the retrieved marker appears.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startEmulator, type Emulator } from '../emulator/emulator';
import {
  ApiClient,
  assertPodGone,
  ed25519,
  postRunPod,
  snapshotPod,
  sshExec,
  waitFor,
  waitForPod,
} from '../emulator/testing';

const POD_SCRIPTS = join(__dirname, '..', '..', 'src', 'core', 'pod', 'podScripts.ts');

describe('Runpod emulator: the real bootstrap and watchdog', function () {
  this.timeout(180_000); // generous: the machine is shared
  let emulator: Emulator | undefined;

  before(function () {
    // The pod scripts are what this file tests: without them it fails, it does not skip.
    assert.ok(existsSync(POD_SCRIPTS), `${POD_SCRIPTS} is missing`);
  });
  after(async () => {
    await emulator?.close();
    if (emulator) assert.deepEqual(emulator.contractViolations(), []);
  });

  it('boots a pod with podCmd()/podEnv(): sshd via `service ssh restart`, verdict ready, self-delete on the retrieved marker', async () => {
    const scripts = await import('../../src/core/pod/podScripts');
    emulator = await startEmulator({ bootDelaysMs: { provisioning: 100, starting: 100 } });
    const api = new ApiClient(emulator.baseUrl, emulator.apiKey);
    const hostKey = ed25519();
    const client = ed25519();
    const runId = 'emu-real-1';
    const secretName = `overbrainer_host_key_${runId}`;
    const secret = await api.post('/account/secrets', {
      name: secretName,
      value: Buffer.from(hostKey.privateKey).toString('base64'),
    });
    assert.equal(secret.status, 201);
    const env = scripts.podEnv({
      runId,
      workdir: '/workspace/overbrainer',
      deadlineUnixS: Math.floor(Date.now() / 1000) + 3600,
      bootGraceS: 600,
      retrieveGraceS: 600,
      keepPod: false,
      apiUrl: emulator.baseUrl,
      authorizedKey: client.publicKey,
      claim: hostKey.publicKey,
      version: '0.1.0',
      hostKey: `{{ RUNPOD_SECRET_${secretName} }}`,
      timing: {
        watchdogIntervalS: 1,
        watchdogProbeTries: 3,
        watchdogProbeWaitS: 1,
        snapshotLeadS: 900,
        snapshotWaitS: 900,
        leaseTtlMs: 900_000,
        preflightTimeoutMs: 60_000,
      },
    });
    const id = await postRunPod(api, runId, scripts.podCmd(), { suffix: 'a1', env });
    const { pod } = await waitForPod(api, id, (p) => p.ssh.direct !== null, 40_000);
    const internals = emulator.pod(id);
    assert.ok(internals);
    const runDir = join(internals.dirs.workspace, 'overbrainer', runId);
    const verdict = await waitFor(
      () => `the watchdog verdict (log: ${emulator?.podLog(id)})`,
      () => {
        try {
          return readFileSync(join(runDir, '.pod', 'watchdog'), 'utf8');
        } catch {
          return undefined;
        }
      },
      40_000,
    );
    assert.deepEqual(scripts.parseWatchdogVerdict(verdict), { kind: 'ready' });
    const bootLog = readFileSync(join(runDir, '.pod', 'bootstrap.log'), 'utf8');
    assert.match(bootLog, /starting sshd: service ssh restart/);
    assert.match(bootLog, /exec watchdog/);
    assert.equal(readFileSync(join(runDir, '.claim'), 'utf8'), `${hostKey.publicKey}\n`);

    const target = {
      port: pod.ssh.direct?.port ?? 0,
      privateKey: client.privateKey,
      hostKeyBlob: hostKey.blob,
    };
    const inside = await sshExec(
      target,
      'tr "\\0" " " < /proc/1/cmdline; echo; cat /etc/ssh/ssh_host_ed25519_key.pub; cat /root/.ssh/authorized_keys; ls /etc/overbrainer',
    );
    assert.equal(inside.code, 0, inside.stderr);
    assert.match(
      inside.stdout,
      /^bash \/etc\/overbrainer\/watchdog\.sh/m,
      'the watchdog is the pod’s PID 1',
    );
    assert.ok(inside.stdout.includes(hostKey.publicKey.split(' ').slice(0, 2).join(' ')));
    assert.ok(inside.stdout.includes(client.publicKey));
    assert.match(inside.stdout, /job\.env/);
    await assert.rejects(sshExec({ ...target, hostKeyBlob: ed25519().blob }, 'true'));

    const snapshot = snapshotPod(emulator.pod(id)?.pidNamespace);
    const proof = emulator.requests().filter((r) => r.key === `pod:${id}` && r.route === 'getPod');
    assert.ok(
      proof.length >= 1 && proof.every((r) => r.status === 200),
      'startup proof with the pod key',
    );

    // The client verified its results: the watchdog deletes the pod, with the pod's own key.
    await sshExec(target, `touch /workspace/overbrainer/${runId}/.pod/retrieved`);
    await waitFor(
      'the watchdog to delete its pod',
      async () => ((await api.get(`/pods/${id}`)).status === 404 ? true : undefined),
      30_000,
    );
    const entry = emulator.ledger().pods.find((p) => p.id === id);
    assert.equal(entry?.deletedBy, 'pod');
    assert.equal(entry?.runId, runId);
    assert.equal(emulator.ledger().totals.podsBilling, 0);
    assertPodGone(snapshot);
    assert.match(emulator.podLog(id), /delete reason=retrieved/);
  });
});
