import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  decodePodRecord,
  encodePodRecord,
  isRunsError,
  newPodRecord,
  noPodLeft,
  POD_FILE,
  RunStore,
  type CreatedPod,
} from '../../src/core/runs';
import { FakeClock } from '../helpers/fakeClock';
import { assertNotInError } from '../helpers/secretAsserts';

const RUN = '20260922-143005-a1b2';
const at = (seconds: number): number => seconds * 1000;
const POD: CreatedPod = {
  id: 'k3x9abc',
  gpuTypeId: 'NVIDIA RTX A6000',
  dataCenterId: 'EU-RO-1',
  costPerHourUsd: 0.53,
};

describe('runs: PodRecord (its state rules)', () => {
  it('goes from attempts to deleted with its spend', () => {
    const record = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost overbrainer-x');
    assert.equal(record.hostKey, 'ssh-ed25519 AAAAhost');
    assert.equal(record.state, 'creating');
    const first = record.beginAttempt('NVIDIA GeForce RTX 4090', at(1_790_000_000), 6);
    assert.equal(first.name, `overbrainer-${RUN}-1`);
    assert.equal(first.deadlineUnixS, 1_790_021_600);
    assert.equal(first.sentAt, '2026-09-21T14:13:20Z');
    assert.equal(first.result, 'sent');
    record.endAttempt('unavailable', 'no capacity for this GPU type');
    const second = record.beginAttempt('NVIDIA RTX A6000', at(1_790_000_002), 6);
    assert.equal(second.name, `overbrainer-${RUN}-2`);
    record.created(POD, 'created', at(1_790_000_003));
    assert.equal(record.state, 'provisioning');
    assert.equal(record.podId, 'k3x9abc');
    assert.equal(record.deadline, '2026-09-21T20:13:22Z');
    assert.equal(record.deadlineUnixS, 1_790_021_602);
    assert.equal(record.gpuType, 'NVIDIA RTX A6000');
    assert.equal(record.dataCenterId, 'EU-RO-1');
    assert.equal(record.createdUnixS, 1_790_000_003);
    assert.equal(record.attempts[0]?.result, 'unavailable');
    assert.equal(record.attempts[0]?.detail, 'no capacity for this GPU type');
    assert.deepEqual(record.attempts[1], {
      name: `overbrainer-${RUN}-2`,
      gpuType: 'NVIDIA RTX A6000',
      sentAt: '2026-09-21T14:13:22Z',
      sentMs: at(1_790_000_002),
      deadlineUnixS: 1_790_021_602,
      result: 'created',
      podId: 'k3x9abc',
    });
    assert.equal(record.summary(), 'pod provisioning k3x9abc $0.53/h');
    record.ready({ host: '203.0.113.7', port: 40122, user: 'root' }, at(1_790_000_224));
    assert.equal(record.state, 'ready');
    assert.equal(record.readyAt, '2026-09-21T14:17:04Z');
    record.state = 'running';
    assert.equal(record.summary(), 'pod running k3x9abc $0.53/h');
    assert.equal(record.uptimeMs(at(1_790_004_323)), 4320_000);
    record.deleted('client', at(1_790_004_323));
    // From the create call's sending (…002), not its answer: 4,321 s at $0.53/h.
    assert.equal(record.estimatedSpendUsd, 0.6361);
    assert.equal(record.summary(), 'pod deleted about $0.64');
    assert.equal(record.deletedBy, 'client');
    assert.equal(record.deletedAt, '2026-09-21T15:25:23Z');
    assert.equal(record.state, 'deleted');
  });

  it('rounds the spend to a hundredth of a cent, and has none without a rate', () => {
    const record = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
    record.beginAttempt('A', at(1000), 1);
    record.created({ id: 'p1', costPerHourUsd: 0.44 }, 'created', at(1000));
    record.deleted('watchdog', at(1000 + 7));
    assert.equal(record.estimatedSpendUsd, 0.0009); // 0.000855… → 0.0009
    const free = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
    free.beginAttempt('A', at(1000), 1);
    free.created({ id: 'p1', costPerHourUsd: 0 }, 'adopted', at(1000));
    assert.equal(free.attempts[0]?.result, 'adopted');
    assert.equal(free.costPerHourUsd, null);
    assert.equal(free.summary(), 'pod provisioning p1');
    free.deleted('unknown', at(5000));
    assert.equal(free.estimatedSpendUsd, null);
    assert.equal(free.summary(), 'pod deleted');
  });

  it('counts the spend to the millisecond from the create call that made the pod, never under the bill', () => {
    // Runpod bills from the pod's creation, inside the create call, to its deletion, inside the
    // delete call: a pod of seconds at $36/h is a cent a second, so whole seconds on each end
    // were off by up to two cents (CI: estimate $0.0700, bill $0.0798).
    const record = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
    const sentMs = at(1000) + 900;
    record.beginAttempt('A', sentMs, 1);
    record.created({ id: 'p1', costPerHourUsd: 36 }, 'created', sentMs + 250);
    assert.equal(record.createdUnixS, 1001, 'deadlines still count from the answer');
    const billedFromMs = sentMs + 30; // Runpod made the pod during the call
    const deletedMs = sentMs + 8_630;
    const billedUsd = ((deletedMs - 15 - billedFromMs) / 3_600_000) * 36;
    assert.equal(record.spendUsd(sentMs + 4_000), 0.04);
    record.deleted('client', deletedMs);
    assert.equal(record.estimatedSpendUsd, 0.0863);
    assert.ok(record.estimatedSpendUsd >= billedUsd - 0.00005, 'never under the bill');
    assert.ok(record.estimatedSpendUsd - billedUsd < 0.01 * billedUsd, 'within 1 % of it');
    // A record of an older version has no sent_ms: from the create call's whole second.
    const old = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
    old.beginAttempt('A', sentMs, 1);
    delete old.attempts[0]!.sentMs;
    old.created({ id: 'p1', costPerHourUsd: 36 }, 'created', sentMs + 250);
    old.deleted('client', deletedMs);
    assert.equal(old.estimatedSpendUsd, 0.0953);
  });

  it("counts from the pod's createdAt as the API gives it, never before the create was sent, nor from a createdAt later than the answer", () => {
    const sentMs = at(1000) + 200;
    const created = (createdAt: string | null): number | null => {
      const record = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
      record.beginAttempt('A', sentMs, 1);
      record.created({ id: 'p1', costPerHourUsd: 36, createdAt }, 'created', sentMs + 3_000);
      return record.billedFromMs;
    };
    // A slow create (3 s): Runpod's createdAt, whole seconds, is when it began billing.
    assert.equal(created('1970-01-01T00:16:42Z'), at(1002));
    // Its whole second began before the call was sent: the sending bounds it.
    assert.equal(created('1970-01-01T00:16:40Z'), sentMs);
    // Later than the answer: another clock than ours, not comparable; no createdAt: the sending.
    assert.equal(created('1970-01-01T00:17:00Z'), sentMs);
    assert.equal(created(null), sentMs);
  });

  it('a recovery carries the earlier pods with their money, and attempt names count on', () => {
    const first = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
    first.beginAttempt('A', at(1000), 1);
    first.created({ id: 'p1', costPerHourUsd: 36 }, 'created', at(1000));
    first.deleted('unknown', at(1010));
    const next = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
    next.carryOver(first);
    assert.equal(next.beginAttempt('A', at(1020), 1).name, `overbrainer-${RUN}-2`);
    next.created({ id: 'p2', costPerHourUsd: 36 }, 'created', at(1020));
    assert.deepEqual(
      next.otherPods.map((o) => [o.podId, o.endedMs, o.estimatedSpendUsd]),
      [['p1', at(1010), 0.1]],
    );
    // Both pods: 10 s ended, 5 s so far, at a cent a second.
    assert.equal(next.runSpendUsd(at(1025)), 0.15);
    const third = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
    third.carryOver(next);
    assert.equal(third.beginAttempt('A', at(1030), 1).name, `overbrainer-${RUN}-3`);
    const back = decodePodRecord(encodePodRecord(third), 'pod.json');
    assert.equal(back.earlierAttempts, 2);
    assert.deepEqual(back.otherPods, third.otherPods);
  });

  it("a swept pod bills until its deletion is confirmed; a stray's until it is found gone", () => {
    const record = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
    record.noteOtherPod({ id: 'dup', costPerHourUsd: 36, createdAt: '1970-01-01T00:16:40Z' }, null);
    assert.equal(record.runSpendUsd(at(1005)), 0.05, 'a stray so far');
    record.otherPodGone('dup', at(1008));
    assert.equal(record.runSpendUsd(at(2000)), 0.08, 'to its confirmed end');
  });

  it('keeps the first non-zero rate only', () => {
    const record = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
    record.beginAttempt('A', at(1000), 1);
    record.created({ id: 'p1', costPerHourUsd: null }, 'created', at(1000));
    record.noteRate(0);
    assert.equal(record.costPerHourUsd, null);
    record.noteRate(0.79);
    record.noteRate(1.5);
    assert.equal(record.costPerHourUsd, 0.79);
  });

  it('has no deadline when kept, and no cost cap', () => {
    const record = newPodRecord(RUN, true, 1, 'ssh-ed25519 AAAAhost', { costCapUsd: 20 });
    assert.equal(record.costCapUsd, null);
    const attempt = record.beginAttempt('NVIDIA A40', at(1_790_000_000), 6);
    assert.equal(attempt.deadlineUnixS, null);
    record.created(POD, 'created', at(1_790_000_001));
    assert.equal(record.deadline, null);
    assert.equal(record.deadlineUnixS, null);
    record.state = 'kept';
    assert.equal(record.summary(), 'pod kept k3x9abc');
    record.state = 'awaiting_retrieval';
    assert.equal(record.summary(), 'pod awaiting retrieval k3x9abc');
    const capped = newPodRecord(RUN, false, 2, 'ssh-ed25519 AAAAhost', {
      costCapUsd: 20,
      networkVolumeId: 'vol1',
      maxVolumeGb: 100,
    });
    assert.deepEqual(
      [capped.costCapUsd, capped.networkVolumeId, capped.maxVolumeGb, capped.gpuCount],
      [20, 'vol1', 100, 2],
    );
  });

  it('forgetting a pod clears what belonged to it, keeping the attempts', () => {
    const record = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
    record.beginAttempt('NVIDIA A40', at(1_790_000_000), 1);
    record.created(POD, 'created', at(1_790_000_001));
    record.ready({ host: 'h', port: 1, user: 'root' }, at(1_790_000_100));
    record.endAttempt('not_ready', 'no SSH within 15 minutes');
    record.forgetPod();
    assert.equal(record.podId, null);
    assert.equal(record.state, 'creating');
    assert.equal(record.createdAt, null);
    assert.equal(record.createdUnixS, null);
    assert.equal(record.costPerHourUsd, null);
    assert.equal(record.deadline, null);
    assert.equal(record.deadlineUnixS, null);
    assert.equal(record.ssh, null);
    assert.equal(record.uptimeMs(at(1_790_000_500)), null);
    assert.equal(record.attempts[0]?.result, 'not_ready');
    assert.equal(record.attempts[0]?.podId, 'k3x9abc');
    assert.equal(record.summary(), 'pod creating (no pod)');
  });

  it('an uptime is never negative (a clock set back)', () => {
    const record = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
    record.beginAttempt('A', at(2000), 1);
    record.created({ id: 'p1' }, 'created', at(2000));
    assert.equal(record.uptimeMs(at(1000)), 0);
  });

  it('records strays once each', () => {
    const record = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
    record.setStrayPods(['a1', 'b2', 'a1']);
    assert.deepEqual(record.strayPods, ['a1', 'b2']);
  });
});

describe('runs: pod.json', () => {
  let dir: string;
  let store: RunStore;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-pod-'));
    store = new RunStore(path.join(dir, 'runs'), new FakeClock());
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('round-trips with the spec field names, mode 0600, holding no secret', () => {
    assert.equal(store.loadPod(RUN), null);
    const record = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost', { costCapUsd: 12.5 });
    record.beginAttempt('NVIDIA A40', at(1_790_000_000), 1.5);
    store.savePod(record);
    assert.deepEqual(store.loadPod(RUN), record);
    const file = path.join(store.runDir(RUN), POD_FILE);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    const json = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
    assert.deepEqual(Object.keys(json), [
      'version',
      'run_id',
      'state',
      'keep',
      'deadline',
      'deadline_unix',
      'attempts',
      'pod_id',
      'gpu_type',
      'gpu_count',
      'data_center_id',
      'cost_per_hour',
      'created_at',
      'created_unix',
      'ready_at',
      'ssh',
      'host_key',
      'deleted_at',
      'deleted_by',
      'estimated_spend',
      'stray_pods',
      'max_cost_usd',
      'network_volume_id',
      'max_volume_gb',
    ]);
    assert.equal(json.version, 1);
    assert.equal(json.state, 'creating');
    assert.deepEqual(json.attempts, [
      {
        name: `overbrainer-${RUN}-1`,
        gpu_type: 'NVIDIA A40',
        sent_at: '2026-09-21T14:13:20Z',
        sent_ms: 1_790_000_000_000,
        deadline_unix: 1_790_005_400,
        result: 'sent',
      },
    ]);
    assert.equal(json.max_cost_usd, 12.5);
    assert.deepEqual(fs.readdirSync(store.runDir(RUN)), [POD_FILE]);
  });

  it('reads a record of an older version, without the newer fields', () => {
    const old = {
      version: 1,
      run_id: RUN,
      state: 'deleted',
      keep: false,
      deadline: null,
      deadline_unix: null,
      attempts: [],
      pod_id: 'abc',
      gpu_type: 'A',
      gpu_count: 1,
      data_center_id: null,
      cost_per_hour: 0.5,
      created_at: null,
      created_unix: 10,
      ready_at: null,
      ssh: { host: '1.2.3.4', port: 22, user: 'root' },
      host_key: 'ssh-ed25519 AAAAhost',
      deleted_at: '2026-09-21T15:25:23Z',
      deleted_by: 'pod_rm',
      estimated_spend: 0.64,
    };
    fs.mkdirSync(store.runDir(RUN), { recursive: true });
    fs.writeFileSync(path.join(store.runDir(RUN), POD_FILE), JSON.stringify(old, null, 2));
    const record = store.loadPod(RUN);
    assert.ok(record);
    assert.deepEqual(record.strayPods, []);
    assert.equal(record.costCapUsd, null);
    assert.equal(record.networkVolumeId, null);
    assert.equal(record.deletedBy, 'pod_rm');
    assert.equal(record.summary(), 'pod deleted about $0.64');
  });

  it('keeps fields it does not know, in the record and in its attempts', () => {
    const record = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
    record.beginAttempt('A', at(1000), 1);
    const json = JSON.parse(encodePodRecord(record)) as Record<string, unknown> & {
      attempts: Record<string, unknown>[];
    };
    json.future_field = { nested: [1, 2] };
    (json.attempts[0] as Record<string, unknown>).future_attempt_field = 'x';
    const loaded = decodePodRecord(JSON.stringify(json), 'pod.json');
    loaded.state = 'deleting';
    const saved = JSON.parse(encodePodRecord(loaded)) as Record<string, unknown> & {
      attempts: Record<string, unknown>[];
    };
    assert.deepEqual(saved.future_field, { nested: [1, 2] });
    assert.equal(saved.attempts[0]?.future_attempt_field, 'x');
    assert.equal(saved.state, 'deleting');
  });

  it('a damaged pod.json fails by position only, never echoing its content', () => {
    const MARKER = 'MARKER-6b1f2d9c-never-printed';
    const file = path.join(store.runDir(RUN), POD_FILE);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const valid = encodePodRecord(newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost'));
    const cases: [string, number, number, RegExp][] = [
      [`{"version": 1, "${MARKER}": `, 1, 20 + MARKER.length, /not valid JSON/],
      [`["${MARKER}", 1, 2]`, 1, 1, /not a JSON object/],
      [
        valid.replace('"state": "creating"', `"state": "${MARKER}"`),
        4,
        12,
        /"state" has a value that is not valid/,
      ],
      [
        valid.replace('"ssh-ed25519 AAAAhost"', `"ssh-ed25519 AAAAhost\\nx ssh-ed25519 ${MARKER}"`),
        18,
        15,
        /"host_key"/,
      ],
      [valid.replace('"pod_id": null', `"pod_id": "\\u0007${MARKER}"`), 9, 13, /"pod_id"/],
      [valid.replace('  "gpu_count": 1,\n', ''), 1, 1, /"gpu_count" is missing/],
      [valid.replace('"version": 1', '"version": 2'), 2, 14, /"version"/],
    ];
    for (const [content, line, column, what] of cases) {
      fs.writeFileSync(file, content);
      let caught: unknown;
      try {
        store.loadPod(RUN);
      } catch (error) {
        caught = error;
      }
      assert.ok(isRunsError(caught, 'invalid'), `expected invalid for ${content.slice(0, 60)}`);
      assert.deepEqual([caught.line, caught.column], [line, column], caught.message);
      assert.match(caught.message, what);
      assert.match(caught.message, new RegExp(`line ${line}, column ${column}`));
      assert.match(caught.hint, /pod ls/);
      assertNotInError(caught, MARKER);
    }
  });

  it('refuses to save what pod.json must never hold', () => {
    const record = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
    record.podId = 'a\nb';
    assert.throws(() => store.savePod(record), RangeError);
    record.podId = null;
    record.hostKey = 'ssh-ed25519 AAAA\nevil ssh-ed25519 BBBB';
    assert.throws(() => store.savePod(record), RangeError);
    assert.equal(store.loadPod(RUN), null);
  });

  it('refuses a pod.json copied from another run', () => {
    store.savePod(newPodRecord('other-run', false, 1, 'ssh-ed25519 AAAAhost'));
    fs.mkdirSync(store.runDir(RUN));
    fs.copyFileSync(
      path.join(store.runDir('other-run'), POD_FILE),
      path.join(store.runDir(RUN), POD_FILE),
    );
    assert.throws(
      () => store.loadPod(RUN),
      (error: unknown) => isRunsError(error, 'invalid') && /another run/.test(error.message),
    );
  });
});

describe('runs: noPodLeft', () => {
  let dir: string;
  let store: RunStore;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-left-'));
    store = new RunStore(path.join(dir, 'runs'), new FakeClock());
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('true with no pod.json: no pod was ever asked for', () => {
    assert.equal(noPodLeft(store, RUN), true);
  });

  it('true with no pod yet, or its pod confirmed deleted, and no stray', () => {
    const record = newPodRecord(RUN, false, 1, 'ssh-ed25519 AAAAhost');
    record.beginAttempt('A', at(1000), 1);
    store.savePod(record);
    assert.equal(noPodLeft(store, RUN), true);
    record.created({ id: 'p1' }, 'created', at(1000));
    store.savePod(record);
    assert.equal(noPodLeft(store, RUN), false);
    record.state = 'deleting';
    store.savePod(record);
    assert.equal(noPodLeft(store, RUN), false);
    record.deleted('client', at(2000));
    store.savePod(record);
    assert.equal(noPodLeft(store, RUN), true);
    record.setStrayPods(['p2']);
    store.savePod(record);
    assert.equal(noPodLeft(store, RUN), false);
  });

  it('false, with a warning, when pod.json cannot be read', () => {
    fs.mkdirSync(store.runDir(RUN), { recursive: true });
    fs.writeFileSync(path.join(store.runDir(RUN), POD_FILE), '{');
    const warnings: string[] = [];
    assert.equal(
      noPodLeft(store, RUN, (w) => warnings.push(w)),
      false,
    );
    assert.equal(warnings.length, 1);
    assert.match(warnings[0] ?? '', /cannot read the pod record of run/);
  });
});
