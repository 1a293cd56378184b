/**
 * The emulator's pods are real: a namespace per pod, real OpenSSH sshd reached with ssh2 and a
 * pinned host key, the pod-scoped key, and no process left behind by delete, stop or close.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { probeSshBanner, type ProcessSnapshot } from '../emulator/container';
import { startEmulator, type Emulator } from '../emulator/emulator';
import {
  ApiClient,
  assertPodGone,
  ed25519,
  snapshotPod,
  sshConnect,
  sshExec,
  sshRun,
  testPodCmd,
  testPodEnv,
  waitFor,
  waitForPod,
  type KeyPair,
  type PodBody,
  type Problem,
} from '../emulator/testing';

const GPU = 'NVIDIA GeForce RTX 4090';

describe('Runpod emulator: real pods', function () {
  this.timeout(180_000); // generous: the machine is shared
  let emulator: Emulator;
  let api: ApiClient;
  const hostKey = ed25519();
  const client = ed25519();
  /** Every pod container seen, checked for leftovers once the emulator is closed. */
  const snapshots: ProcessSnapshot[] = [];

  function createBody(
    name: string,
    extraEnv: Record<string, string> = {},
  ): Record<string, unknown> {
    return {
      name,
      image: 'runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404',
      cloud: 'SECURE',
      gpu: { id: GPU, count: 1, minCudaVersion: '12.8' },
      disk: 20,
      ports: ['22/tcp'],
      startSsh: false,
      env: testPodEnv(hostKey, client, extraEnv),
      cmd: testPodCmd(),
    };
  }

  async function createPod(name: string, extraEnv: Record<string, string> = {}): Promise<PodBody> {
    const r = await api.post<PodBody>('/pods', createBody(name, extraEnv));
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body;
  }

  async function sshReady(id: string): Promise<PodBody> {
    const { pod } = await waitForPod(
      api,
      id,
      (p) => p.status === 'RUNNING' && p.ssh.direct !== null,
    );
    snapshots.push(snapshotPod(emulator.pod(id)?.pidNamespace));
    return pod;
  }

  function target(port: number, key: KeyPair = client, host: KeyPair = hostKey) {
    return { port, privateKey: key.privateKey, hostKeyBlob: host.blob };
  }

  before(async () => {
    emulator = await startEmulator({
      bootDelaysMs: { provisioning: 100, starting: 100, restart: 100 },
      secrets: { test_secret: 's3cr3t-value' },
    });
    api = new ApiClient(emulator.baseUrl, emulator.apiKey);
  });

  after(async () => {
    await emulator?.close();
    snapshots.forEach((snapshot, i) => assertPodGone(snapshot, `pod container #${i}`));
    assert.deepEqual(emulator.contractViolations(), []);
  });

  it('boots PROVISIONING → STARTING → RUNNING, publishes ssh.direct only once sshd answers, and serves the pinned host key sent in env', async () => {
    const created = await createPod('boot', {
      SECRET_FROM_ACCOUNT: '{{ RUNPOD_SECRET_test_secret }}',
    });
    assert.equal(created.status, 'PROVISIONING');
    assert.equal(created.ssh.direct, null);
    assert.equal(created.cost, 0.69);
    const { pod, statuses } = await waitForPod(api, created.id, (p) => p.ssh.direct !== null);
    assert.deepEqual(
      statuses.filter((s, i) => statuses.indexOf(s) === i),
      statuses,
      'statuses never go back',
    );
    assert.equal(statuses[statuses.length - 1], 'RUNNING');
    for (const s of statuses) assert.ok(['PROVISIONING', 'STARTING', 'RUNNING'].includes(s), s);
    const direct = pod.ssh.direct;
    assert.ok(direct);
    assert.equal(direct.host, '127.0.0.1');
    assert.equal(direct.username, 'root');
    assert.equal(direct.command, `ssh root@127.0.0.1 -p ${direct.port}`);
    assert.ok(
      await probeSshBanner(direct.port, 2000),
      'a published port answers with an SSH banner',
    );
    snapshots.push(snapshotPod(emulator.pod(created.id)?.pidNamespace));

    // Inside: the pod's own filesystem at the production paths, Runpod's env, the secret resolved.
    const out = await sshExec(
      target(direct.port),
      [
        'tr "\\0" "\\n" < /proc/1/environ | sort',
        'echo ---',
        'grep -E "^(Port|ListenAddress)" /etc/ssh/sshd_config',
        'echo ---',
        'cat /proc/1/cmdline | tr "\\0" " "; echo',
        'echo hello > /workspace/from-ssh.txt',
        'ls /etc/overbrainer /run',
      ].join('; '),
    );
    assert.equal(out.code, 0, out.stderr);
    const [envText = '', sshdText = '', rest = ''] = out.stdout.split('---\n');
    const env = Object.fromEntries(
      envText
        .trim()
        .split('\n')
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    );
    const internals = emulator.pod(created.id);
    assert.ok(internals);
    assert.equal(env.RUNPOD_POD_ID, created.id);
    assert.equal(env.RUNPOD_API_KEY, internals.apiKey);
    assert.notEqual(env.RUNPOD_API_KEY, emulator.apiKey);
    assert.equal(env.RUNPOD_PUBLIC_IP, '127.0.0.1');
    assert.equal(env.RUNPOD_TCP_PORT_22, String(direct.port));
    assert.equal(env.RUNPOD_GPU_COUNT, '1');
    assert.equal(env.RUNPOD_DC_ID, pod.dataCenterId);
    // The image's plain PATH, not the host's (which may point into the host's home).
    assert.equal(env.PATH, '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin');
    assert.equal(env.SECRET_FROM_ACCOUNT, 's3cr3t-value');
    assert.equal(
      pod.env.SECRET_FROM_ACCOUNT,
      '{{ RUNPOD_SECRET_test_secret }}',
      'the API shows the reference',
    );
    assert.match(sshdText, new RegExp(`^Port ${direct.port}$`, 'm'));
    assert.match(sshdText, /^ListenAddress 127\.0\.0\.1$/m);
    assert.match(rest, /^sleep infinity $/m, 'the pod command is PID 1 of its namespace');
    assert.match(rest, /sshd\.pid/, '/run is the pod’s own tmpfs');
    assert.equal(readFileSync(join(internals.dirs.workspace, 'from-ssh.txt'), 'utf8'), 'hello\n');
    assert.equal(existsSync('/workspace/from-ssh.txt'), false, 'the host /workspace is untouched');
  });

  it('refuses a session pinned to another host key, and a client key that is not authorized', async () => {
    const pod = await sshReady((await createPod('pins')).id);
    const port = pod.ssh.direct?.port ?? 0;
    await assert.rejects(
      sshExec(target(port, client, ed25519()), 'true'),
      /verification failed|Handshake failed/i,
    );
    await assert.rejects(
      sshExec(target(port, ed25519(), hostKey), 'true'),
      /authentication methods failed/i,
    );
    const ok = await sshExec(target(port), 'echo ok');
    assert.equal(ok.stdout, 'ok\n');
  });

  it('starts sshd with `service ssh restart` inside the namespace (/run is a fresh tmpfs)', async () => {
    const pod = await sshReady((await createPod('service', { TEST_SSHD_START: 'service' })).id);
    const out = await sshExec(
      target(pod.ssh.direct?.port ?? 0),
      'ls -d /run/sshd /run/sshd.pid && cat /run/sshd.pid',
    );
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, /^\/run\/sshd\n\/run\/sshd\.pid\n\d+\n$/);
    assert.match(emulator.podLog(pod.id), /Restarting OpenBSD Secure Shell server: sshd/);
  });

  it('lets a pod key read, stop and delete only its own pod, and the pod deletes itself with it', async () => {
    const a = await sshReady((await createPod('self-a')).id);
    const b = await createPod('self-b');
    const aKey = emulator.pod(a.id)?.apiKey ?? '';
    const forbidden = async (method: string, path: string, body?: unknown): Promise<void> => {
      const r = await api.call<Problem>(method, path, { key: aKey, body });
      assert.equal(r.status, 403, `${method} ${path} with a pod key`);
      assert.match(r.body.detail, /pod-scoped key/);
    };
    assert.equal((await api.get(`/pods/${a.id}`, { key: aKey })).status, 200);
    await forbidden('GET', `/pods/${b.id}`);
    await forbidden('DELETE', `/pods/${b.id}`);
    await forbidden('POST', `/pods/${b.id}/action`, { action: 'terminate' });
    await forbidden('POST', `/pods/${a.id}/action`, { action: 'restart' });
    await forbidden('GET', '/pods');
    await forbidden('POST', '/pods', createBody('by-pod-key'));
    await forbidden('GET', '/catalog/gpus');
    await forbidden('GET', '/account/secrets');
    assert.equal((await api.get(`/pods/${b.id}`)).status, 200, 'b is untouched');

    // The pod deletes itself from inside, as the watchdog does: curl, key on stdin.
    const port = a.ssh.direct?.port ?? 0;
    const aSnapshot = snapshotPod(emulator.pod(a.id)?.pidNamespace);
    const session = await sshConnect(target(port));
    const closed = new Promise<void>((resolve) => session.once('close', () => resolve()));
    void sshRun(
      session,
      [
        `KEY=$(tr '\\0' '\\n' < /proc/1/environ | sed -n 's/^RUNPOD_API_KEY=//p')`,
        `ID=$(tr '\\0' '\\n' < /proc/1/environ | sed -n 's/^RUNPOD_POD_ID=//p')`,
        `printf 'Authorization: Bearer %s\\n' "$KEY" | curl -s -o /dev/null -w '%{http_code}' -X DELETE -H @- ${emulator.baseUrl}/pods/$ID`,
      ].join('; '),
    ).catch(() => undefined);
    await closed; // the pod is being killed, and the session with it
    // TERMINATED while its namespace dies, then 404 once no process of it is left.
    const gone = await waitFor('the 404 of the deleted pod', async () => {
      const r = await api.get<Problem & PodBody>(`/pods/${a.id}`);
      if (r.status === 200) assert.equal(r.body.status, 'TERMINATED');
      return r.status === 404 ? r : undefined;
    });
    assert.deepEqual(gone.body, { title: 'Not Found', status: 404, detail: 'pod not found' });
    assertPodGone(aSnapshot);
    const entry = emulator.ledger().pods.find((p) => p.id === a.id);
    assert.equal(entry?.deletedBy, 'pod');
    assert.equal(entry?.billing, false);
    assert.equal(emulator.ledger().pods.find((p) => p.id === b.id)?.billing, true);
    assert.equal(
      (await api.get(`/pods/${a.id}`, { key: aKey })).status,
      401,
      'the key died with its pod',
    );
    // The pod's own DELETE: its answer (after billing ended) raced the pod's processes being
    // killed, the curl that sent it among them: its log entry is waited for.
    const deletes = await waitFor('the pod key’s DELETE answered', async () => {
      const list = emulator
        .requests()
        .filter((r) => r.route === 'deletePod' && r.key === `pod:${a.id}`);
      return list.every((r) => r.status !== 0)
        ? list.map((r) => `${r.path} ${r.status}`)
        : undefined;
    });
    assert.deepEqual(deletes, [`/v2/pods/${b.id} 403`, `/v2/pods/${a.id} 204`]);
  });

  it('kills every process of a pod on delete: sessions, daemons, their children', async () => {
    const pod = await sshReady((await createPod('kill-all')).id);
    const session = await sshConnect(target(pod.ssh.direct?.port ?? 0));
    const sessionClosed = new Promise<void>((resolve) => session.once('close', () => resolve()));
    await sshRun(
      session,
      'setsid sleep 1000 > /dev/null 2>&1 < /dev/null & nohup sleep 999 > /dev/null 2>&1 &',
    );
    const snapshot = snapshotPod(emulator.pod(pod.id)?.pidNamespace);
    const pids = snapshot.processes.map((p) => p.pid);
    // sleep (PID 1), the sshd listener, the session's sshd processes, the two background sleeps
    assert.ok(pids.length >= 5, `pod processes: ${pids.join(',')}`);
    const r = await api.delete(`/pods/${pod.id}`);
    assert.equal(r.status, 204);
    assert.equal(r.body, undefined);
    // Billing ended with the answer; the pod reads TERMINATED while its processes go, then 404
    // once none is left.
    assert.equal(emulator.ledger().pods.find((p) => p.id === pod.id)?.billing, false);
    await waitFor('the 404 of the deleted pod', async () => {
      const got = await api.get<Problem & PodBody>(`/pods/${pod.id}`);
      if (got.status === 200) assert.equal(got.body.status, 'TERMINATED');
      return got.status === 404 ? true : undefined;
    });
    assertPodGone(snapshot);
    await sessionClosed;
    assert.equal(
      (await api.delete(`/pods/${pod.id}`)).status,
      404,
      'a second delete: already gone',
    );
  });

  it('stops to EXITED (no process, cost 0, disks billed) and starts on a new port; restart moves the port too', async () => {
    const pod = await sshReady((await createPod('stop-start')).id);
    const firstPort = pod.ssh.direct?.port ?? 0;
    const snapshot = snapshotPod(emulator.pod(pod.id)?.pidNamespace);
    const stopped = await api.post<PodBody>(`/pods/${pod.id}/action`, { action: 'stop' });
    assert.equal(stopped.status, 200);
    assert.equal(stopped.body.status, 'EXITED');
    assert.equal(stopped.body.cost, 0);
    assert.equal(stopped.body.ssh.direct, null);
    assert.deepEqual(stopped.body.actions, ['start', 'terminate']);
    assertPodGone(snapshot);
    assert.equal(await probeSshBanner(firstPort, 500), false);
    const again = await api.post<PodBody>(`/pods/${pod.id}/action`, { action: 'stop' });
    assert.equal(again.status, 409);
    const entry = emulator.ledger().pods.find((p) => p.id === pod.id);
    assert.equal(entry?.status, 'EXITED');
    assert.equal(entry?.billing, true, 'a stopped pod still pays for its disk');

    const started = await api.post<PodBody>(`/pods/${pod.id}/action`, { action: 'start' });
    assert.equal(started.status, 200);
    assert.equal(started.body.status, 'STARTING');
    const running = await sshReady(pod.id);
    const secondPort = running.ssh.direct?.port ?? 0;
    assert.notEqual(secondPort, firstPort);
    assert.equal((await sshExec(target(secondPort), 'echo back')).stdout, 'back\n');

    const restarted = await api.post<PodBody>(`/pods/${pod.id}/action`, { action: 'restart' });
    assert.equal(restarted.status, 200);
    const third = await sshReady(pod.id);
    assert.notEqual(third.ssh.direct?.port, secondPort);
    assert.ok((emulator.ledger().pods.find((p) => p.id === pod.id)?.diskBilledSeconds ?? 0) > 0);
    assert.equal((await api.post(`/pods/${pod.id}/action`, { action: 'terminate' })).status, 204);
    assert.equal((await api.get(`/pods/${pod.id}`)).status, 404);
  });

  it('restarts a pod whose command exits (new port), as Runpod does', async () => {
    const pod = await sshReady(
      (await createPod('crashy', { TEST_EXIT_FILE: '/workspace/exit-now' })).id,
    );
    const port = pod.ssh.direct?.port ?? 0;
    // The pod's main process (PID 1 of its namespace) ends by itself.
    await sshExec(target(port), 'touch /workspace/exit-now');
    const back = await waitForPod(
      api,
      pod.id,
      (p) => p.ssh.direct !== null && p.ssh.direct.port !== port,
    );
    assert.equal(back.pod.status, 'RUNNING');
    assert.equal(emulator.pod(pod.id)?.containerStarts, 2);
    assert.match(emulator.podLog(pod.id), /test pod: exiting\n.*container exited \(code 7/);
    // The container disk survives such a restart: the same pod, the same files.
    assert.equal((await sshExec(target(back.pod.ssh.direct?.port ?? 0), 'ls /workspace')).code, 0);
    await api.delete(`/pods/${pod.id}`);
  });

  it('ends a pod whose command exits in EXITED when restartOnExit is off', async () => {
    const other = await startEmulator({
      bootDelaysMs: { provisioning: 0, starting: 0 },
      restartOnExit: false,
    });
    try {
      const otherApi = new ApiClient(other.baseUrl, other.apiKey);
      const r = await otherApi.post<PodBody>('/pods', {
        name: 'one-shot',
        image: 'x',
        gpu: { id: GPU },
        cmd: ['bash', '-c', 'sleep 0.2; exit 3'],
      });
      const { statuses } = await waitForPod(otherApi, r.body.id, (p) => p.status === 'EXITED');
      assert.ok(statuses.includes('RUNNING') || statuses.includes('STARTING'));
      assert.match(other.podLog(r.body.id), /container exited \(code 3/);
    } finally {
      await other.close();
    }
  });

  it('close() kills every pod it started', async () => {
    const other = await startEmulator({ bootDelaysMs: { provisioning: 0, starting: 0 } });
    const otherApi = new ApiClient(other.baseUrl, other.apiKey);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await otherApi.post<PodBody>('/pods', {
        name: `c${i}`,
        image: 'x',
        gpu: { id: GPU },
        cmd: ['sleep', 'infinity'],
      });
      ids.push(r.body.id);
    }
    const nss = await Promise.all(
      ids.map((id) =>
        waitFor(`namespace of ${id}`, () => other.pod(id)?.pidNamespace ?? undefined),
      ),
    );
    const podSnapshots = nss.map((ns) => snapshotPod(ns));
    await other.close();
    podSnapshots.forEach((snapshot) => assertPodGone(snapshot));
    assert.equal(
      other.ledger().totals.podsBilling,
      3,
      'closing the emulator deletes nothing: still billing',
    );
  });
});
