/**
 * The emulator's budget on this kind of machine: it starts in under a second, and holds 20 pods
 * at once, each running a real sshd reached over SSH. Prints the figures (start time, time to 20
 * reachable pods, memory of the emulator and of the pods' processes).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { processesInPidNamespace } from '../emulator/container';
import { startEmulator, type Emulator } from '../emulator/emulator';
import {
  ApiClient,
  assertPodGone,
  snapshotPod,
  ed25519,
  sshExec,
  sshHandshake,
  testPodCmd,
  testPodEnv,
  waitFor,
  waitForPod,
  type PodBody,
} from '../emulator/testing';

const PODS = 20;

/** Resident and proportional set size of a process, in KiB (0 if it is gone). */
function memoryKiB(pid: number): { rss: number; pss: number } {
  try {
    const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const field = (name: string): number =>
      Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0);
    return { rss: field('Rss'), pss: field('Pss') };
  } catch {
    return { rss: 0, pss: 0 };
  }
}

describe('Runpod emulator: start time and 20 pods at once', function () {
  this.timeout(300_000); // generous: the machine is shared
  let emulator: Emulator | undefined;
  after(async () => {
    await emulator?.close();
  });

  it('starts in under a second of CPU time', async () => {
    // Wall time on this shared 2-core machine swings with everyone's load; CPU time does not.
    // The first start in a process also loads the OpenAPI contract (ajv): its CPU time is
    // asserted; the wall times are printed, a figure of the machine's load.
    const wallMs: number[] = [];
    const cpuMs: number[] = [];
    for (let i = 0; i < 3; i++) {
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const e = await startEmulator();
      wallMs.push(performance.now() - t0);
      const cpu = process.cpuUsage(cpu0);
      cpuMs.push((cpu.user + cpu.system) / 1000);
      await e.close();
    }
    const list = (xs: number[]): string => xs.map((x) => `${x.toFixed(0)} ms`).join(', ');
    console.log(
      `      startEmulator(): wall ${list(wallMs)}, CPU ${list(cpuMs)} (the first includes loading the OpenAPI contract)`,
    );
    assert.ok(Math.max(...cpuMs) < 1000, `CPU ${list(cpuMs)}`);
  });

  it(`holds ${PODS} pods with real sshd, each reachable with its pinned host key`, async () => {
    emulator = await startEmulator({ bootDelaysMs: { provisioning: 50, starting: 50 } });
    await emulator.faults.setStock('NVIDIA GeForce RTX 4090', PODS, 'EU-RO-1');
    const api = new ApiClient(emulator.baseUrl, emulator.apiKey);
    const client = ed25519();
    const hostKeys = Array.from({ length: PODS }, () => ed25519());
    const rssBeforeKiB = Math.round(process.memoryUsage().rss / 1024);
    const t0 = performance.now();
    const ids: string[] = [];
    for (let i = 0; i < PODS; i++) {
      const hostKey = hostKeys[i];
      assert.ok(hostKey);
      const r = await api.post<PodBody>('/pods', {
        name: `scale-${i}`,
        image: 'x',
        gpu: { id: 'NVIDIA GeForce RTX 4090' },
        dataCenterIds: ['EU-RO-1'],
        ports: ['22/tcp'],
        env: testPodEnv(hostKey, client),
        cmd: testPodCmd(),
      });
      assert.equal(r.status, 201);
      ids.push(r.body.id);
    }
    const pods = await Promise.all(
      ids.map((id) => waitForPod(api, id, (p) => p.ssh.direct !== null, 120_000, 250)),
    ).catch((error: unknown) => {
      // What the pods that did not make it went through.
      for (const id of ids) {
        const p = emulator?.pod(id);
        if (p && (p.containerStarts > 1 || p.status !== 'RUNNING')) {
          console.log(
            `      ${id} ${p.status} starts=${p.containerStarts}\n${emulator?.podLog(id)}`,
          );
        }
      }
      throw error;
    });
    const readyMs = performance.now() - t0;
    // Memory of 20 idle pods (PID 1 + a listening sshd each), before any SSH session.
    const namespaces = ids.map((id) => emulator?.pod(id)?.pidNamespace ?? '');
    const snapshots = namespaces.map((ns) => snapshotPod(ns));
    let processes = 0;
    let rssKiB = 0;
    let pssKiB = 0;
    for (const ns of namespaces) {
      for (const pid of processesInPidNamespace(ns)) {
        const m = memoryKiB(pid);
        processes++;
        rssKiB += m.rss;
        pssKiB += m.pss;
      }
    }
    // The unshare and setpriv parents live outside the namespaces.
    let parentsPssKiB = 0;
    for (const p of emulator.pods()) parentsPssKiB += memoryKiB(p.unsharePid ?? 0).pss;
    const emulatorRssKiB = Math.round(process.memoryUsage().rss / 1024);

    const tSsh = performance.now();
    const targets = pods.map(({ pod }, i) => ({
      port: pod.ssh.direct?.port ?? 0,
      privateKey: client.privateKey,
      hostKeyBlob: hostKeys[i]?.blob ?? Buffer.alloc(0),
    }));
    // Every pod's sshd proves its own pinned host key (key exchange); a few also run a command
    // (a full session costs the machine an sshd session process and a shell per pod).
    await Promise.all(targets.map((target) => sshHandshake(target)));
    const handshakeMs = performance.now() - tSsh;
    for (const i of [0, 9, PODS - 1]) {
      const target = targets[i];
      assert.ok(target);
      const out = await sshExec(target, 'tr "\\0" "\\n" < /proc/1/environ | grep ^RUNPOD_POD_ID=');
      assert.equal(out.stdout, `RUNPOD_POD_ID=${ids[i]}\n`);
    }
    const sshMs = performance.now() - tSsh;
    console.log(
      `      ${PODS} pods reachable over SSH ${(readyMs / 1000).toFixed(1)} s after the first create; ` +
        `${processes} pod processes: PSS ${(pssKiB / 1024).toFixed(1)} MiB (RSS ${(rssKiB / 1024).toFixed(1)} MiB), ` +
        `+ unshare parents PSS ${(parentsPssKiB / 1024).toFixed(1)} MiB; ` +
        `SSH key exchange with all ${PODS} pods (in parallel) ${(handshakeMs / 1000).toFixed(1)} s, 3 sessions ${((sshMs - handshakeMs) / 1000).toFixed(1)} s; ` +
        `test process (emulator + mocha) RSS ${(rssBeforeKiB / 1024).toFixed(0)} → ${(emulatorRssKiB / 1024).toFixed(0)} MiB`,
    );

    const t1 = performance.now();
    for (const id of ids) assert.equal((await api.delete(`/pods/${id}`)).status, 204);
    console.log(`      deleted ${PODS} pods in ${(performance.now() - t1).toFixed(0)} ms`);
    // Billing ends with the 204; the processes and files go after it, and each pod answers 404
    // once none of them is left.
    for (const id of ids) {
      await waitFor(`the 404 of deleted pod ${id}`, async () =>
        (await api.get(`/pods/${id}`)).status === 404 ? true : undefined,
      );
    }
    snapshots.forEach((snapshot) => assertPodGone(snapshot));
    assert.equal(emulator.ledger().totals.podsBilling, 0);
    assert.deepEqual(emulator.contractViolations(), []);
  });
});
