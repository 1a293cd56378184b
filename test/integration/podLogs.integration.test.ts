/**
 * Pod logs (issue 17): Runpod's `GET /v2/pods/{id}/logs` event stream, served by the emulator from
 * a real pod's output (its own `runpod-emulator:` lines as the `system` source, the container's
 * output as `container`), followed by the client across injected drops in the middle of the
 * stream: resumed by `Last-Event-ID`, no line twice, none lost; a cursor the API refuses falls
 * back to its time. Timings: production / 60.
 */
import assert from 'node:assert/strict';
import { systemClock } from '../../src/core/clock';
import { CLIENT_VERSION, RunpodClient } from '../../src/core/runpod/client';
import { streamPodLogs, type PodLogLine } from '../../src/core/runpod/podLogs';
import { startEmulator, type Emulator } from '../emulator/emulator';
import { ApiClient, waitForPod, type PodBody } from '../emulator/testing';
import { labTiming } from '../helpers/lifecycle';
import { recordFault, recordLedger } from '../helpers/reliability';

const GPU = 'NVIDIA GeForce RTX 4090';
const LINES = 40;

describe('pod logs: the log stream against the emulator', function () {
  this.timeout(120_000);
  let emulator: Emulator;
  let api: ApiClient;
  let client: RunpodClient;
  const timing = labTiming();

  beforeEach(async () => {
    emulator = await startEmulator({ bootDelaysMs: { provisioning: 100, starting: 100 } });
    api = new ApiClient(emulator.baseUrl, emulator.apiKey);
    client = new RunpodClient({
      baseUrl: emulator.baseUrl,
      apiKey: emulator.apiKey,
      clock: systemClock,
      timing,
      version: CLIENT_VERSION,
    });
  });
  afterEach(async function () {
    recordLedger(this.currentTest?.fullTitle() ?? 'pod logs', emulator.ledger());
    client.dispose();
    await emulator.close();
    assert.deepEqual(emulator.contractViolations(), []);
  });

  /** A pod whose container prints `line 1` .. `line N`, then stays up. */
  async function chattyPod(): Promise<string> {
    const created = await api.post<PodBody>('/pods', {
      name: 'chatty',
      image: 'x',
      gpu: { id: GPU },
      ports: ['22/tcp'],
      cmd: [
        'bash',
        '-c',
        `for i in $(seq 1 ${LINES}); do echo "line $i"; sleep 0.01; done; exec sleep infinity`,
      ],
    });
    assert.equal(created.status, 201);
    await waitForPod(api, created.body.id, (p) => p.status === 'RUNNING');
    return created.body.id;
  }

  /** The pod's log as the emulator wrote it, as (source, line) pairs. */
  function truth(podId: string): string[] {
    return emulator
      .podLog(podId)
      .split('\n')
      .filter((l) => l !== '')
      .map((l) =>
        l.startsWith('runpod-emulator: ')
          ? `system ${l.slice('runpod-emulator: '.length)}`
          : `container ${l}`,
      );
  }

  /** Follows the stream until the pod is deleted once `line N` arrived; returns every event. */
  async function follow(
    podId: string,
    start: { lastEventId?: string } = {},
  ): Promise<{ got: PodLogLine[]; end: string; retries: string[] }> {
    const got: PodLogLine[] = [];
    const retries: string[] = [];
    let deleting: Promise<unknown> | null = null;
    const abort = new AbortController();
    const { end } = await streamPodLogs({
      client,
      podId,
      clock: systemClock,
      timing,
      signal: abort.signal,
      tail: 5000,
      ...start,
      onLine: (line) => {
        got.push(line);
        if (line.line === `line ${LINES}` && deleting === null)
          deleting = api.delete(`/pods/${podId}`);
      },
      onRetry: (reason) => retries.push(reason),
    });
    await deleting;
    return { got, end, retries };
  }

  it('a stream dropped twice in the middle resumes by Last-Event-ID: every line once, in order, none lost', async function () {
    const podId = await chattyPod();
    await emulator.faults.add({
      kind: 'request',
      route: 'getPodLogs',
      times: 2,
      effect: { type: 'dropStream', afterEvents: 7 },
    });
    recordFault(this, 'logs.streamDrop', 2);
    const { got, end, retries } = await follow(podId);
    assert.equal(end, 'gone');
    assert.ok(
      retries.filter((r) => r.startsWith('the log stream broke')).length >= 2,
      `retries: ${retries.join(' | ')}`,
    );
    const ids = got.map((l) => l.id);
    assert.equal(new Set(ids).size, ids.length, 'a line came twice');
    const seen = got.map((l) => `${l.source} ${l.line}`);
    const expected = truth(podId);
    assert.deepEqual(seen, expected.slice(0, seen.length), 'a line was lost or reordered');
    for (let i = 1; i <= LINES; i++) assert.ok(seen.includes(`container line ${i}`), `line ${i}`);
    assert.ok(
      seen.some((l) => l.startsWith('system container start #1')),
      'the system source (the emulator) is in the stream',
    );
    const opens = emulator.requests().filter((r) => r.route === 'getPodLogs');
    assert.ok(opens.length >= 3, `opens: ${opens.length}`);
  });

  it('a cursor the API refuses falls back to its time: the lines since then, none twice', async () => {
    const podId = await chattyPod();
    const first = await new Promise<PodLogLine>((resolve, reject) => {
      const abort = new AbortController();
      streamPodLogs({
        client,
        podId,
        clock: systemClock,
        timing,
        signal: abort.signal,
        tail: 5000,
        onLine: (line) => {
          abort.abort();
          resolve(line);
        },
      }).catch(reject);
    });
    // The same time, a sequence number this stream never sent: refused (400), resumed by time.
    const refused = `${first.ts}/999999999999`;
    const { got, end } = await follow(podId, { lastEventId: refused });
    assert.equal(end, 'gone');
    const ids = got.map((l) => l.id);
    assert.equal(new Set(ids).size, ids.length, 'a line came twice');
    assert.equal(ids[0], first.id, 'resumed from the time of the refused cursor');
    const seen = got.map((l) => `${l.source} ${l.line}`);
    assert.deepEqual(seen, truth(podId).slice(0, seen.length));
    assert.ok(seen.includes(`container line ${LINES}`));
  });
});
