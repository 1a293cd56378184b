/**
 * The read-only commands (`pod ls`, `pod gpus`, the catalog listings, `spend`'s bills, `runs logs
 * --pod` from the API) against an API that limits, refuses or never answers, spawned from the
 * built bundle as a user runs them, with production timing (the limits are the product's own):
 * Runpod's rate limit is waited out and the call sent again (30 s in all at most, each wait said,
 * counted down on a terminal); a longer wait fails at once saying when to run it again; a refused
 * connection fails at once, an API that never answers after the 8 s limit, both naming the base
 * URL. Exit codes are asserted on every call.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import { startEmulator, type Emulator } from '../emulator/emulator';
import { cliArgv, runCliProcess, type Ran } from '../helpers/cli';
import { tempWorkspace } from '../helpers/tinyWorkspace';
import { screenOf } from '../helpers/terminalScreen';
import { closedPort } from '../helpers/apiStub';

describe('overbrainer read-only commands: rate limits and an unreachable API (the built bundle)', function () {
  this.timeout(120_000);
  let emulator: Emulator;
  let tmp: string;
  let ws: string;

  before(async () => {
    emulator = await startEmulator({});
  });

  after(async () => {
    await emulator?.close();
    if (emulator) assert.deepEqual(emulator.contractViolations(), []);
  });

  beforeEach(() => {
    ({ tmp, ws } = tempWorkspace('cli-ro-'));
  });

  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  const env = (baseUrl = emulator.baseUrl): Record<string, string> => ({
    OVERBRAINER_RUNPOD__API_KEY: emulator.apiKey,
    OVERBRAINER_RUNPOD__BASE_URL: baseUrl,
  });
  const cli = (args: string[], baseUrl?: string): Promise<Ran> =>
    runCliProcess(['-C', ws, ...args], { env: env(baseUrl) });
  /** The calls the emulator answered on `route` since `from` (a request count). */
  const calls = (route: string, from: number): (number | string)[] =>
    emulator
      .requests()
      .slice(from)
      .filter((r) => r.route === route)
      .map((r) => r.status);

  it('pod ls waits out a 429 whose Retry-After is longer than the old 10 s limit, saying so, then lists the pods (exit 0)', async () => {
    const from = emulator.requests().length;
    await emulator.faults.rateLimit('listPods', 12, 1);
    const ran = await cli(['pod', 'ls']);
    assert.equal(ran.code, 0, ran.stderr);
    assert.equal(ran.stdout, 'pod: no overbrainer pod on this Runpod account\n');
    assert.match(
      ran.stderr,
      /^rate limit: Runpod's GET \/pods answered 429; sent again in 12 s \(a read-only command waits 30 s at most in all\)$/m,
    );
    // The call was sent again after the wait, once: the 429, then the answer listed.
    assert.deepEqual(calls('listPods', from), [429, 200]);
  });

  it('pod gpus: a Retry-After past the 30 s a read-only command waits fails at once, saying when to run it again (exit 1)', async () => {
    const from = emulator.requests().length;
    await emulator.faults.rateLimit('listGpuTypes', 45, 1);
    const ran = await cli(['pod', 'gpus']);
    assert.equal(ran.code, 1, ran.stderr);
    assert.equal(ran.stdout, '');
    assert.ok(
      ran.stderr.includes(
        `error: Runpod's rate limit at ${emulator.baseUrl} asks to wait 45 s more: a read-only command waits 30 s at most`,
      ),
      ran.stderr,
    );
    assert.match(ran.stderr, /^hint: Run it again after \d\d:\d\d:\d\d UTC \(in 45 s\)\./m);
    // Not waited, not sent again: the one 429 is all.
    assert.deepEqual(calls('listGpuTypes', from), [429]);
    // The next call, once the fault is spent, answers.
    assert.equal((await cli(['pod', 'gpus'])).code, 0);
  });

  it('on a terminal, the wait is counted down in place, and gone once the listing is printed', async () => {
    await emulator.faults.rateLimit('listPods', 3, 1);
    const command = [process.execPath, ...cliArgv(), '-C', ws, 'pod', 'ls']
      .map((a) => `'${a.replace(/'/g, `'\\''`)}'`)
      .join(' ');
    const child = spawn('script', ['-qfec', command, '/dev/null'], {
      env: { HOME: '/nonexistent', PATH: process.env.PATH ?? '/usr/bin:/bin', ...env() },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (out += d.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 0, out);
    // Each second's line was drawn: 3 s, 2 s, 1 s before the call went again.
    for (const s of [3, 2, 1])
      assert.ok(out.includes(`rate limit: GET /pods again in ${s} s`), out);
    const screen = screenOf(out.replace(/\r\n/g, '\n'));
    assert.ok(!screen.some((l) => l.includes('GET /pods again in')), screen.join('\n'));
    assert.ok(screen.includes('pod: no overbrainer pod on this Runpod account'), screen.join('\n'));
  });

  it('pod ls and pod gpus fail fast on an API that cannot be reached, naming its base URL: a refused connection at once, never retried; an address that never answers after the 8 s limit', async () => {
    // A listener that accepts and never answers, and a port where nothing listens.
    const silent = net.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const silentUrl = `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}/v2`;
      const closedUrl = `http://127.0.0.1:${await closedPort()}/v2`;

      for (const args of [
        ['pod', 'ls'],
        ['pod', 'gpus'],
      ]) {
        const refused = await cli(args, closedUrl);
        const said = `${args.join(' ')} against ${closedUrl}: ${refused.stderr}`;
        assert.equal(refused.code, 1, said);
        assert.ok(
          refused.stderr.includes(
            `error: could not reach the Runpod API at ${closedUrl}: connection refused (ECONNREFUSED)`,
          ),
          said,
        );
        assert.match(refused.stderr, /^hint: .*OVERBRAINER_RUNPOD__BASE_URL/m, said);
        // Not retried (the lifecycle's calls warn before each retry), so not waited for: what
        // bounds the command's time is one refused connect on loopback, not a limit.
        assert.ok(!/retry \d/.test(refused.stderr), said);
      }

      for (const args of [
        ['pod', 'ls'],
        ['pod', 'gpus'],
      ]) {
        const startedMs = Date.now();
        const ran = await cli(args, silentUrl);
        const tookMs = Date.now() - startedMs;
        const said = `${args.join(' ')} against ${silentUrl} (${tookMs} ms): ${ran.stderr}`;
        assert.equal(ran.code, 1, said);
        // "within 8 s" says the CLI's own limit ended it (the product's constant, unscaled),
        // so that a CLI that also starts in about a second fails within 10 s.
        assert.ok(
          ran.stderr.includes(`error: the Runpod API at ${silentUrl} did not answer within 8 s`),
          said,
        );
        assert.match(ran.stderr, /^hint: .*OVERBRAINER_RUNPOD__BASE_URL/m, said);
        // A CLI start under load takes seconds, so the wall time bounds it loosely: without the
        // limit a silent API takes minutes (30 s per try, 5 retries).
        assert.ok(tookMs < 45_000, said);
      }
    } finally {
      silent.close();
    }
  });
});
