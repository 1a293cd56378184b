/**
 * Pod logs (issue 17): Runpod's `GET /v2/pods/{id}/logs` event stream, served by the emulator from
 * a real pod's output (its own `runpod-emulator:` lines as the `system` source, the container's
 * output as `container`), followed by the client across injected drops in the middle of the
 * stream: resumed by `Last-Event-ID`, no line twice, none lost; a cursor the API refuses falls
 * back to its time. Timings: production / 60.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { systemClock } from '../../src/core/clock';
import { CLIENT_VERSION, RunpodClient } from '../../src/core/runpod/client';
import {
  drainPodLog,
  lastPodLogLines,
  POD_LOG_CURSOR_FILE,
  POD_LOG_FILE,
  startPodLogCapture,
} from '../../src/core/pod/podLogCapture';
import { PodError } from '../../src/core/pod/podError';
import { streamPodLogs, type PodLogLine } from '../../src/core/runpod/podLogs';
import { EventBus, type CoreEvent } from '../../src/core/events';
import { RunStore } from '../../src/core/runs/store';
import { startEmulator, type Emulator } from '../emulator/emulator';
import { ApiClient, waitFor, waitForPod, type PodBody } from '../emulator/testing';
import { labTiming, matrixLabs, runCli, type Lab } from '../helpers/lifecycle';
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

  /** The stream's options for `podId` from its last 5000 lines, ended by `signal`. */
  function streamOf(podId: string, signal: AbortSignal) {
    return { client, podId, clock: systemClock, timing, signal, tail: 5000 };
  }

  /** Follows the stream until the pod is deleted once `line N` arrived; returns every event. */
  async function follow(
    podId: string,
    start: { lastEventId?: string } = {},
  ): Promise<{ got: PodLogLine[]; end: string; retries: string[]; waits: number[] }> {
    const got: PodLogLine[] = [];
    const retries: string[] = [];
    const waits: number[] = [];
    let deleting: Promise<unknown> | null = null;
    const abort = new AbortController();
    const { end } = await streamPodLogs({
      ...streamOf(podId, abort.signal),
      ...start,
      onLine: (line) => {
        got.push(line);
        if (line.line === `line ${LINES}` && deleting === null)
          deleting = api.delete(`/pods/${podId}`);
      },
      onRetry: (reason, waitMs) => {
        retries.push(reason);
        waits.push(waitMs);
      },
    });
    await deleting;
    return { got, end, retries, waits };
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

  it('a 429 on the log stream waits its Retry-After, capped (a minute in production), then resumes', async function () {
    const podId = await chattyPod();
    await emulator.faults.rateLimit('getPodLogs', 5, 2);
    recordFault(this, 'logs.rateLimited', 2);
    const { got, end, retries, waits } = await follow(podId);
    assert.equal(end, 'gone');
    // Retry-After 5 s against a cap of 60 s / 60: the cap, longer than the backoff (0.5 s / 60);
    // then the stream the deleted pod ended, after lines arrived: the backoff back at its base.
    assert.deepEqual(waits, [
      timing.podLogRetryAfterCapMs,
      timing.podLogRetryAfterCapMs,
      timing.podLogRetryBaseMs,
    ]);
    assert.deepEqual(retries, [
      'the log stream answered 429',
      'the log stream answered 429',
      'the log stream ended',
    ]);
    const seen = got.map((l) => `${l.source} ${l.line}`);
    assert.deepEqual(seen, truth(podId).slice(0, seen.length));
    assert.ok(seen.includes(`container line ${LINES}`));
  });

  it('a cursor the API refuses falls back to its time: the lines since then, none twice', async () => {
    const podId = await chattyPod();
    const first = await new Promise<PodLogLine>((resolve, reject) => {
      const abort = new AbortController();
      streamPodLogs({
        ...streamOf(podId, abort.signal),
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

  it('the capture file is redacted (API key, bearer token, private key), 0600, capped with one line saying so, its cursor beside it', async () => {
    const key = emulator.apiKey;
    const created = await api.post<PodBody>('/pods', {
      name: 'leaky',
      image: 'x',
      gpu: { id: GPU },
      ports: ['22/tcp'],
      env: { LEAK: key },
      cmd: [
        'bash',
        '-c',
        [
          'echo "api key: $LEAK"',
          'echo "Authorization: Bearer rpa_ABCDEFGHIJKLMNOPQRSTUVWX"',
          'echo "-----BEGIN OPENSSH PRIVATE KEY-----"',
          'echo "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"',
          'echo "-----END OPENSSH PRIVATE KEY-----"',
          `for i in $(seq 1 300); do echo "filler $i ${'x'.repeat(60)}"; done`,
          'echo "the end"',
          'exec sleep infinity',
        ].join('; '),
      ],
    });
    assert.equal(created.status, 201);
    const podId = created.body.id;
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'podlogs-it-'));
    const bus = new EventBus();
    const shown: CoreEvent[] = [];
    bus.on((e) => shown.push(e));
    const capBytes = 8 * 1024;
    const ctx = {
      store: new RunStore(tmp, systemClock),
      client,
      bus,
      clock: systemClock,
      timing: { ...timing, podLogCapBytes: capBytes },
      version: CLIENT_VERSION,
    };
    try {
      startPodLogCapture(ctx, 'run-1', podId);
      await waitFor('the last line captured', () =>
        lastPodLogLines(podId, 1)[0]?.endsWith('the end') ? true : undefined,
      );
      await drainPodLog(ctx, 'run-1', podId);
      const file = path.join(tmp, 'run-1', POD_LOG_FILE);
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      const text = fs.readFileSync(file, 'utf8');
      assert.ok(Buffer.byteLength(text) <= capBytes, `size ${Buffer.byteLength(text)}`);
      const rows = text
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as { ts: string; source: string; line: string });
      assert.deepEqual(Object.keys(rows[0]!).sort(), ['line', 'source', 'ts']);
      assert.equal(rows.filter((r) => /capped at/.test(r.line)).length, 1);
      assert.match(rows[rows.length - 1]!.line, /capped at/);
      const shownText = shown
        .filter((e) => e.type === 'podLog')
        .map((e) => (e.type === 'podLog' ? e.line : ''))
        .join('\n');
      for (const where of [text, shownText]) {
        assert.ok(!where.includes(key), 'the API key leaked');
        assert.ok(!where.includes('rpa_ABCDEFGHIJKLMNOPQRSTUVWX'), 'a bearer token leaked');
        assert.ok(!where.includes('b3BlbnNzaC1rZXktdjEAAAAABG5v'), 'a private key leaked');
        assert.match(where, /api key: \[redacted\]/);
        assert.match(where, /\[redacted private key\]/);
      }
      assert.match(shownText, /the end/, 'every line is shown, the cap is the file only');
      const cursor = fs.readFileSync(path.join(tmp, 'run-1', POD_LOG_CURSOR_FILE), 'utf8');
      assert.match(cursor.trim(), /^\S+\/\d{12}$/);
    } finally {
      await api.delete(`/pods/${podId}`);
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});

describe('pod logs: a pod deleted before its job started leaves its log and its reason', function () {
  this.timeout(180_000);
  const lab = matrixLabs();

  /** A run whose bootstrap fails before sshd (a host key secret that is no key). */
  async function failedBoot(l: Lab): Promise<{ id: string; error: unknown }> {
    const { runId, error } = await l.trainWithBadHostKey();
    return { id: runId!, error };
  }

  it('overbrainer runs logs, spawned as a user runs it: the pod log kept (--pod, --tail, --source), the API stream (--follow), the job log, usage errors', async function () {
    const l = await lab();
    recordFault(this, 'pod.bootstrap-failed');
    const { id } = await failedBoot(l);
    const reason = 'bootstrap failed: OVERBRAINER_HOST_KEY is not an OpenSSH private key';

    const pod = await runCli(l, ['runs', 'logs', id, '--pod', '--tail', '4']);
    assert.equal(pod.code, 0, pod.stderr);
    const lines = pod.stdout.trimEnd().split('\n');
    assert.equal(lines.length, 4, pod.stdout);
    for (const line of lines) assert.match(line, /^\S+Z (container|system): /);
    assert.ok(!pod.stdout.includes(l.emulator.apiKey));

    const all = await runCli(l, [
      'runs',
      'logs',
      id,
      '--pod',
      '--tail',
      '5000',
      '--source',
      'container',
    ]);
    assert.equal(all.code, 0, all.stderr);
    assert.ok(all.stdout.includes(reason), all.stdout);
    assert.ok(!/ system: /.test(all.stdout), 'only the container source');

    const follow = await runCli(l, ['runs', 'logs', id, '--pod', '--follow']);
    assert.equal(follow.code, 0, follow.stderr);
    assert.match(follow.stderr, /pod \S+ is gone \(its kept log: runs\/\S+\/\.pod\/pod\.log\)/);

    const job = await runCli(l, ['runs', 'logs', id]);
    assert.equal(job.code, 1);
    assert.match(job.stderr, /has no job log yet/);
    fs.writeFileSync(
      path.join(l.runDir(id), 'job.log'),
      `step 1\nkey ${l.emulator.apiKey}\nstep 2\n`,
    );
    const jobLog = await runCli(l, ['runs', 'logs', id, '--tail', '2']);
    assert.equal(jobLog.code, 0, jobLog.stderr);
    assert.equal(jobLog.stdout, 'key [redacted]\nstep 2\n');
    // (the lab's end checks that no file of the run holds the key: this one was planted)
    fs.rmSync(path.join(l.runDir(id), 'job.log'));

    const usage = await runCli(l, ['runs', 'logs', id, '--follow']);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /add --pod/);
    const unknown = await runCli(l, ['runs', 'logs', 'no-such-run', '--pod']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no run no-such-run/);
  });

  it('runs logs --pod from the API, without --follow, is a read-only command: a 429 is waited out and said, then the stream is read; a refused connection fails at once naming the base URL', async function () {
    const l = await lab();
    const { id } = await failedBoot(l);
    // No kept log: the API is asked.
    fs.rmSync(path.join(l.runDir(id), POD_LOG_FILE));
    const from = l.emulator.requests().length;
    // Longer than the replay's drain time (5 s / 8 here): the wait must not be cut short by it.
    await l.emulator.faults.rateLimit('getPodLogs', 3, 1);
    const limited = await runCli(l, ['runs', 'logs', id, '--pod']);
    assert.equal(limited.code, 0, limited.stderr);
    assert.match(
      limited.stderr,
      /^rate limit: Runpod's GET \/pods\/\S+\/logs answered 429; sent again in 3 s/m,
    );
    // Then the stream was asked again and said the pod is gone.
    assert.deepEqual(
      l.emulator
        .requests()
        .slice(from)
        .filter((r) => r.route === 'getPodLogs')
        .map((r) => r.status),
      [429, 404],
    );
    assert.match(limited.stderr, /pod \S+ is gone/);

    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const url = `http://127.0.0.1:${port}/v2`;
    const refused = await runCli(l, ['runs', 'logs', id, '--pod'], {
      OVERBRAINER_RUNPOD__BASE_URL: url,
    });
    assert.equal(refused.code, 1, refused.stderr);
    assert.ok(
      refused.stderr.includes(
        `error: could not reach the Runpod API at ${url}: connection refused (ECONNREFUSED)`,
      ),
      refused.stderr,
    );
  });

  it('a bootstrap failure before sshd: the error says the watchdog verdict and the log lines; runs/<id>/.pod/pod.log keeps the boot', async function () {
    const l = await lab();
    recordFault(this, 'pod.bootstrap-failed');
    const { runId, error } = await l.trainWithBadHostKey();
    assert.ok(error instanceof PodError && error.kind === 'bootstrap_failed', String(error));
    const id = runId!;
    const reason = 'bootstrap failed: OVERBRAINER_HOST_KEY is not an OpenSSH private key';
    assert.ok(error.message.includes(reason), error.message);
    assert.match(error.message, /the watchdog's verdict: failed bootstrap: OVERBRAINER_HOST_KEY/);
    assert.ok(String(l.runJson(id).message).includes(reason), String(l.runJson(id).message));
    const file = path.join(l.runDir(id), POD_LOG_FILE);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    const kept = fs.readFileSync(file, 'utf8');
    assert.ok(kept.includes(reason), kept);
    assert.ok(kept.includes('container start #1'), 'the boot is kept from its first line');
    assert.ok(!kept.includes(l.emulator.apiKey));
    const shown = l.events.filter((e) => e.event.type === 'podLog');
    assert.ok(shown.length > 0, 'boot lines published for the output channel');
  });
});
