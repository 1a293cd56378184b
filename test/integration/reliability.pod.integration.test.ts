/**
 * Reliability matrix (issue #7), pod faults and the provisioning gaps: the pod dies (EXITED)
 * mid-job, the job is killed, the disk fills (the pod's runs live on a small tmpfs), the watchdog
 * cannot reach the API (the run is refused and the pod deleted), a bootstrap failure the client
 * reads over SSH (refused at once, no other GPU type tried), every GPU type unavailable (pod.json
 * ends in a terminal state), and max_cost_usd armed on the pod and enforced by its watchdog. Each
 * scenario has its own lab (emulator with real pods + workspace); they run side by side. Asserts
 * on run.json, pod.json, the files on disk and the emulator's ledger. Timings: production / 60.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { removePods } from '../../src/core/pod/podAdmin';
import { MAX_COST_REACHED } from '../../src/core/pod/limitEnd';
import { PodError } from '../../src/core/pod/podError';
import { attach } from '../../src/core/flow';
import { GPU, Lab, matrixLabs, type TrainOutcome } from '../helpers/lifecycle';
import { podKeyCallsFail } from '../helpers/podKeyFaults';
import { recordFault, recordResult } from '../helpers/reliability';

type Attempt = { result: string; gpu_type: string; detail?: string; pod_id?: string };

describe('reliability: pod faults and provisioning gaps', function () {
  this.timeout(300_000);
  const lab = matrixLabs();

  const together = async (scenarios: Promise<void>[]): Promise<void> => {
    const settled = await Promise.allSettled(scenarios);
    for (const outcome of settled) if (outcome.status === 'rejected') throw outcome.reason;
  };

  const run = (l: Lab, onRun?: (id: string) => void): Promise<TrainOutcome> =>
    l.trainOutcome(onRun);

  const attemptsOf = (l: Lab, id: string): Attempt[] => l.podJson(id).attempts as Attempt[];
  const nothingBills = (l: Lab): void =>
    assert.deepEqual(
      l.billing().map((p) => p.id),
      [],
      'a pod was left billing',
    );
  /** Host pids of the pod's processes whose command line contains `needle`. */
  const podProcesses = (l: Lab, podId: string, needle: string): number[] =>
    (l.emulator.pod(podId)?.processes ?? []).filter((pid) => {
      try {
        return fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes(needle);
      } catch {
        return false;
      }
    });

  it('the pod dies, the job is killed, the disk fills: each run ends with its reason, results kept where they exist, no pod billing', async function () {
    const name = this.test?.fullTitle() ?? 'pod';
    const podDies = async (): Promise<void> => {
      // Without recovery (max_recoveries = 0): the stopped pod is left for the user to decide.
      // With it, the run goes on on a new pod: reliability.recovery.
      const l = await lab({ steps: 200, stepSeconds: 0.1, targetExtra: 'max_recoveries = 0' });
      let id: string | null = null;
      const flow = run(l, (r) => (id = r));
      await l.jobRunning(() => id);
      const podId = String(l.podJson(id!).pod_id);
      await l.emulator.faults.podDies(podId);
      recordFault(name, 'pod.dies');
      const o = await flow;
      // Following fails (SSH refused: the pod's processes are gone) and train stops saying the
      // pod stopped under its job and what to do; the run stays `running` (its disk may hold
      // results, so deleting the pod is the user's choice, not ours), nothing is deleted yet.
      assert.ok(o.error instanceof PodError, String(o.error));
      assert.equal(o.error.kind, 'pod_stopped');
      assert.match(o.error.message, /is EXITED: it stopped while its job ran.*still bills/);
      assert.match(o.error.hint ?? '', /overbrainer train attach .*overbrainer pod rm .* --force/);
      assert.equal(l.runJson(id!).state, 'running');
      // The watchdog died with the pod: gpu billing stopped, the stopped pod's disk still bills.
      const stopped = l.ledgerOf(podId);
      assert.equal(stopped.status, 'EXITED');
      assert.equal(stopped.billing, true);
      // Attach finds it EXITED and says what to do (its /workspace may hold results: deleting
      // it is the user's choice, by `pod rm --force`).
      const attached = await l.track(attach(l.deps, l.config, id!)).then(
        () => null,
        (error: unknown) => error,
      );
      assert.ok(attached instanceof Error && /EXITED/.test(attached.message), String(attached));
      assert.equal(l.podJson(id!).state, 'running', 'pod.json never says deleted while it bills');
      // `pod rm --force` deletes it and records the run failed.
      const removal = await removePods({ ...l.deps, client: l.client }, id!, { force: true });
      assert.equal(removal.error, null, String(removal.error));
      assert.equal(l.podJson(id!).state, 'deleted');
      assert.equal(l.runJson(id!).state, 'failed');
      assert.equal(l.ledgerOf(podId).billing, false);
      nothingBills(l);
      recordResult(name, { verified: 0, lost: 0 });
    };
    const jobKilled = async (): Promise<void> => {
      const l = await lab({ steps: 200, stepSeconds: 0.1 });
      let id: string | null = null;
      const flow = run(l, (r) => (id = r));
      await l.jobRunning(() => id);
      const podId = String(l.podJson(id!).pod_id);
      const victims = podProcesses(l, podId, 'train.py');
      assert.ok(victims.length > 0, 'the job runs on the pod');
      for (const pid of victims) process.kill(pid, 'SIGKILL');
      recordFault(name, 'pod.job-killed');
      const o = await flow;
      assert.ok(o.error === null, String(o.error));
      const runJson = l.runJson(id!);
      assert.equal(runJson.state, 'failed');
      // The whole job (its wrapper too) was killed: no exit code was ever written.
      assert.equal(runJson.message, 'stopped without an exit code');
      // What the job wrote before it was killed came back (verified), and the pod went.
      assert.ok(fs.existsSync(path.join(l.runDir(id!), 'metrics.jsonl')));
      assert.equal(l.podJson(id!).state, 'deleted');
      nothingBills(l);
      recordResult(name, { verified: 1, lost: 0 });
    };
    const diskFull = async (): Promise<void> => {
      const l = await lab({
        command:
          'python3 train.py --steps 3 --step-seconds 0.05 && head -c 40000000 /dev/zero > output/fill.bin',
        emulator: { workspaceQuotaBytes: 16 * 1024 * 1024 },
      });
      const o = await run(l);
      recordFault(name, 'pod.disk-full');
      const id = o.runId!;
      const runJson = l.runJson(id);
      assert.equal(runJson.state, 'failed', l.transcript());
      // With the disk full the job's wrapper may not be able to write its exit code either (a
      // gap of the wrapper): the run then reads as stopped without one.
      assert.match(
        String(runJson.message),
        /^(exited with code 1 \(see runs\/.+\/job\.log\)|stopped without an exit code)$/,
      );
      // The partial file is what the pod had, verified: at most the quota, not 40 MB.
      const fill = fs.statSync(path.join(l.runDir(id), 'output', 'fill.bin'));
      assert.ok(fill.size > 0 && fill.size <= 16 * 1024 * 1024, `${fill.size} bytes`);
      assert.equal(l.podJson(id).state, 'deleted');
      nothingBills(l);
      recordResult(name, { verified: 1, lost: 0 });
    };
    await together([podDies(), jobKilled(), diskFull()]);
  });

  it('the watchdog cannot reach the API; a bootstrap failure read over SSH; no GPU type placed; max_cost_usd: each refused or ended with pod.json terminal', async function () {
    const name = this.test?.fullTitle() ?? 'pod';
    const watchdogUnreachable = async (): Promise<void> => {
      const l = await lab({ gpuTypes: [GPU.rtx4090, GPU.a100] });
      await podKeyCallsFail(l.emulator.faults, 'getPod', { type: 'drop' });
      recordFault(name, 'pod.watchdog-unreachable');
      const o = await run(l);
      assert.ok(
        o.error instanceof PodError && o.error.kind === 'watchdog_refused',
        String(o.error),
      );
      const id = o.runId!;
      assert.equal(
        l.runJson(id).message,
        "the pod's watchdog cannot delete its pod (unreachable): the run is refused and the pod deleted",
      );
      assert.deepEqual(
        attemptsOf(l, id).map((a) => a.result),
        ['refused'],
      );
      const pods = l.podsOfRun(id);
      assert.equal(pods.length, 1, 'no other GPU type was tried');
      assert.equal(pods[0]!.deletedBy, 'account');
      assert.equal(l.podJson(id).state, 'deleted');
      assert.equal(l.clientKeyExists(id), false);
      nothingBills(l);
    };
    const bootstrapFailedOverSsh = async (): Promise<void> => {
      // The image's CUDA env script fails: job.env cannot be written, after the host key and the
      // client's key are in place, so the failed pod serves its verdict over SSH.
      const l = await lab({
        gpuTypes: [GPU.rtx4090, GPU.a100],
        emulator: { imageFiles: { 'axolotl/scripts/cuda13_env.sh': 'exit 3\n' } },
      });
      recordFault(name, 'pod.bootstrap-failed');
      const o = await run(l);
      assert.ok(
        o.error instanceof PodError && o.error.kind === 'bootstrap_failed',
        String(o.error),
      );
      const id = o.runId!;
      assert.equal(
        l.runJson(id).message,
        "the pod's bootstrap failed: cannot write /etc/overbrainer/job.env",
      );
      assert.deepEqual(
        attemptsOf(l, id).map((a) => [a.gpu_type, a.result]),
        [[GPU.rtx4090, 'refused']],
      );
      const [pod] = l.podsOfRun(id);
      assert.ok(pod);
      // The client read the verdict and deleted the pod itself, before the watchdog's grace.
      assert.equal(pod.deletedBy, 'account', l.emulator.podLog(pod.id));
      assert.match(l.emulator.podLog(pod.id), /sshd started so the client can read the verdict/);
      assert.ok(
        l.podEvents(id).some((s) => s.kind === 'deleting' && s.reason === 'bootstrap_failed'),
      );
      assert.equal(l.podJson(id).state, 'deleted');
      nothingBills(l);
    };
    const noType = async (): Promise<void> => {
      const l = await lab({ gpuTypes: [GPU.h100] });
      recordFault(name, 'pod.no-capacity');
      const o = await run(l);
      assert.ok(o.error instanceof PodError && o.error.kind === 'no_capacity', String(o.error));
      const id = o.runId!;
      const podJson = l.podJson(id);
      assert.equal(podJson.state, 'deleted', 'pod.json ends terminal, not creating');
      assert.equal(podJson.pod_id, null);
      assert.ok(typeof podJson.deleted_at === 'string');
      assert.deepEqual(
        attemptsOf(l, id).map((a) => a.result),
        ['unavailable'],
      );
      assert.equal(l.podsOfRun(id).length, 0);
      assert.equal(l.clientKeyExists(id), false);
    };
    const costCap = async (): Promise<void> => {
      // $0.004 at $0.69/h buys about 21 s; the job would take 60 s.
      // A trainer that does not honour snapshot requests (its request path unset): the cap deletes it.
      const l = await lab({
        command: 'OVERBRAINER_SNAPSHOT= python3 train.py --steps 300 --step-seconds 0.2',
        targetExtra: 'max_cost_usd = 0.004\n',
      });
      let id: string | null = null;
      let capFile = '';
      l.bus.on((event) => {
        if (event.type === 'pod' && event.status.kind === 'ready' && id !== null) {
          capFile = l.podFile(event.status.podId, id, '.pod/cost_cap_at');
        }
      });
      const flow = run(l, (r) => (id = r));
      await l.jobRunning(() => id);
      const capAt = Number(fs.readFileSync(capFile, 'utf8').trim());
      recordFault(name, 'pod.cost-cap');
      const podJson = l.podJson(id!);
      const expected = Number(podJson.created_unix) + Math.floor((0.004 / 0.69) * 3600);
      assert.equal(capAt, expected, 'cost_cap_at = created + max_cost_usd / rate');
      const podId = String(podJson.pod_id);
      await l.waitFor(
        'the watchdog to delete the pod at the cap',
        () => !l.ledgerOf(podId).billing,
        90_000,
      );
      const entry = l.ledgerOf(podId);
      // Its watchdog, or the client's own guard at the same cap (whichever ticks first).
      assert.ok(['pod', 'account'].includes(String(entry.deletedBy)), String(entry.deletedBy));
      assert.ok(
        entry.deletedAtMs! / 1000 >= capAt - 1 && entry.deletedAtMs! / 1000 <= capAt + 10,
        `deleted at ${entry.deletedAtMs! / 1000}, cap ${capAt}`,
      );
      if (entry.deletedBy === 'pod') {
        assert.match(l.emulator.podLog(podId), /delete reason=cost_cap/);
      }
      const o = await flow;
      assert.ok(o.error instanceof PodError, String(o.error));
      assert.equal(o.error.kind, 'cost_cap_reached');
      const runJson = l.runJson(id!);
      assert.equal(runJson.state, 'failed');
      assert.equal(runJson.message, MAX_COST_REACHED);
      nothingBills(l);
    };
    await together([watchdogUnreachable(), bootstrapFailedOverSsh(), noType(), costCap()]);
  });
});
