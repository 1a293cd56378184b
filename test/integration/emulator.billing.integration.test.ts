/**
 * The emulator's `GET /v2/billing/pods` against Runpod's document: `ApiClient` validates every
 * response against ListPodBillingResponse (ajv), these tests check the ledger's amounts, the
 * bucketing and the window's snapping.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { EventBus, type CoreEvent } from '../../src/core/events';
import { recordBilled } from '../../src/core/pod/billing';
import { RunpodClient } from '../../src/core/runpod/client';
import { newPodRecord } from '../../src/core/runs/podRecord';
import { RunStore } from '../../src/core/runs/store';
import { PRODUCTION_TIMING } from '../../src/core/timing';
import { refreshesSpend } from '../../src/ui/spend/spendModel';
import { FakeClock } from '../helpers/fakeClock';
import { startEmulator, type Emulator } from '../emulator/emulator';
import { ApiClient, waitForPod, type PodBody, type Problem } from '../emulator/testing';

const GPU = 'NVIDIA GeForce RTX 4090';
const HOST_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl';

interface Amounts {
  totalAmount: number;
  gpuAmount: number;
  cpuAmount: number;
  diskAmount: number;
}
interface PodBilling {
  records: (Amounts & { startTime: string; endTime: string; podId: string })[];
  metadata: {
    query: { startTime: string; endTime: string; bucketSize: string; podId?: string | null };
    recordCount: number;
    uniquePodCount: number;
    totals: Amounts;
  };
}

describe('Runpod emulator: GET /v2/billing/pods', function () {
  this.timeout(60_000);
  // 2026-09-29 12:00 UTC.
  const clock = new FakeClock();
  let emulator: Emulator;
  let api: ApiClient;
  let billed: string;
  let other: string;

  before(async () => {
    emulator = await startEmulator({ clock, bootDelaysMs: { provisioning: 0, starting: 0 } });
    api = new ApiClient(emulator.baseUrl, emulator.apiKey);
    const body = {
      name: 'billed',
      image: 'runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404',
      gpu: { id: GPU, count: 2 },
      disk: 72,
      cmd: ['sleep', 'infinity'],
    };
    billed = (await api.post<PodBody>('/pods', body)).body.id;
    other = (await api.post<PodBody>('/pods', { ...body, name: 'other' })).body.id;
    await waitForPod(api, billed, (p) => p.status === 'RUNNING');
    // An hour at 2 × $0.69, then stopped across midnight (72 GB × $0.20 / 720 h = $0.02 / h).
    await clock.advanceMs(3_600_000);
    assert.equal((await api.post(`/pods/${billed}/action`, { action: 'stop' })).status, 200);
    await clock.advanceMs(12 * 3_600_000);
    assert.equal((await api.delete(`/pods/${billed}`)).status, 204);
    assert.equal((await api.delete(`/pods/${other}`)).status, 204);
    await clock.advanceMs(3_600_000);
  });
  after(async () => {
    await emulator?.close();
    assert.deepEqual(emulator.contractViolations(), []);
  });

  it("bills one pod per day bucket with the ledger's GPU and stopped-disk amounts", async () => {
    const r = await api.get<PodBilling>(
      `/billing/pods?podId=${billed}&startTime=2026-09-29T00:00:00Z&endTime=2026-10-01T00:00:00Z&bucketSize=day`,
    );
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.records, [
      {
        startTime: '2026-09-29T00:00:00.000Z',
        endTime: '2026-09-30T00:00:00.000Z',
        podId: billed,
        totalAmount: 1.6,
        gpuAmount: 1.38,
        cpuAmount: 0,
        diskAmount: 0.22,
      },
      {
        startTime: '2026-09-30T00:00:00.000Z',
        endTime: '2026-10-01T00:00:00.000Z',
        podId: billed,
        totalAmount: 0.02,
        gpuAmount: 0,
        cpuAmount: 0,
        diskAmount: 0.02,
      },
    ]);
    assert.equal(r.body.metadata.recordCount, 2);
    assert.equal(r.body.metadata.uniquePodCount, 1);
    assert.equal(r.body.metadata.query.podId, billed);
    assert.equal(r.body.metadata.totals.totalAmount, 1.62);
    assert.equal(r.body.metadata.totals.totalAmount, emulator.ledger().pods[0]?.costUsd);
  });

  it('snaps the window to bucket boundaries and emits every pod without a filter', async () => {
    const r = await api.get<PodBilling>(
      '/billing/pods?startTime=2026-09-29T12:30:00Z&endTime=2026-09-29T13:10:00Z&bucketSize=hour',
    );
    assert.equal(r.status, 200);
    assert.equal(r.body.metadata.query.startTime, '2026-09-29T12:00:00.000Z');
    assert.equal(r.body.metadata.query.endTime, '2026-09-29T14:00:00.000Z');
    assert.equal(r.body.metadata.query.bucketSize, 'hour');
    assert.deepEqual(
      r.body.records.map((x) => [x.startTime.slice(11, 16), x.podId]),
      [
        ['12:00', billed],
        ['12:00', other],
        ['13:00', billed],
        ['13:00', other],
      ],
    );
    assert.equal(r.body.metadata.uniquePodCount, 2);
  });

  it('answers lastN with the current bucket last, and refuses lastN with startTime', async () => {
    const r = await api.get<PodBilling>(`/billing/pods?podId=${billed}&lastN=2&bucketSize=day`);
    assert.equal(r.status, 200);
    assert.equal(r.body.metadata.query.startTime, '2026-09-29T00:00:00.000Z');
    assert.equal(r.body.metadata.query.endTime, '2026-10-01T00:00:00.000Z');
    assert.equal(r.body.metadata.totals.totalAmount, 1.62);
    const bad = await api.get<Problem>('/billing/pods?lastN=2&startTime=2026-09-29T00:00:00Z');
    assert.equal(bad.status, 400);
  });

  it("RunpodClient.podBilling reads a pod's billed amount as the document shapes it", async () => {
    const client = new RunpodClient({
      baseUrl: emulator.baseUrl,
      apiKey: emulator.apiKey,
      clock,
      timing: PRODUCTION_TIMING,
    });
    const bill = await client.podBilling(billed, {
      startTime: new Date('2026-09-29T00:00:00Z'),
      endTime: new Date('2026-10-01T00:00:00Z'),
    });
    assert.equal(bill.totalAmount, 1.62);
    assert.equal(bill.gpuAmount, 1.38);
    assert.equal(bill.diskAmount, 0.24);
    assert.equal(bill.bucketSize, 'day');
    assert.deepEqual(
      bill.records.map((r) => [r.startTime, r.totalAmount]),
      [
        ['2026-09-29T00:00:00.000Z', 1.6],
        ['2026-09-30T00:00:00.000Z', 0.02],
      ],
    );
  });

  it("recordBilled saves the ended pod's bill in pod.json and publishes it, on which the Spend view reads the records again", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-billing-it-'));
    try {
      const store = new RunStore(path.join(dir, 'runs'), clock);
      const run = store.create({ project: 'tiny', target: 'pod', remoteDir: (id) => id });
      const pod = newPodRecord(run.id, false, 2, HOST_KEY);
      const createdMs = Date.parse('2026-09-29T12:00:00Z');
      pod.beginAttempt(GPU, createdMs, 6);
      pod.created({ id: billed, costPerHourUsd: 1.38 }, 'created', createdMs);
      pod.deleted('client', createdMs + 13 * 3_600_000);
      store.savePod(pod);
      const bus = new EventBus();
      const events: CoreEvent[] = [];
      bus.on((event) => events.push(event));
      const client = new RunpodClient({
        baseUrl: emulator.baseUrl,
        apiKey: emulator.apiKey,
        clock,
        timing: PRODUCTION_TIMING,
      });

      assert.equal(await recordBilled({ client, store, clock, bus }, pod), 1.62);
      assert.equal(store.loadPod(run.id)?.billedUsd, 1.62);
      // No file event is sure to follow the write in time: the bus says the bill came in.
      const said = events.filter((e) => e.type === 'billed');
      assert.deepEqual(said, [{ type: 'billed', runId: run.id, podId: billed, billedUsd: 1.62 }]);
      assert.ok(said.every(refreshesSpend), 'the Spend view reads the records again on it');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
