/**
 * docs/SECURITY.md, the CLI's side: a repository the user cloned cannot send the user's Runpod
 * key anywhere. The CLI runs as a user runs it (a child process with a cleared environment);
 * the "API" is a loopback listener that records every request. Every child is preloaded with
 * test/helpers/loopbackOnly.mjs: a host name other than loopback's is refused at its lookup, so
 * where the product falls back to Runpod's own API nothing leaves this machine.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { emptyPodsApi, type ApiStub } from '../helpers/apiStub';
import { runCliProcess } from '../helpers/cli';

const KEY = 'rpa_SECURITYTEST0123456789';
const GUARD = `--import=${path.join(__dirname, '..', 'helpers', 'loopbackOnly.mjs')}`;

describe('security: where the CLI sends the API key', function () {
  this.timeout(60_000);
  let ws: string;
  let api: ApiStub;

  beforeEach(async () => {
    ws = fs.mkdtempSync(path.join(tmpdir(), 'ob-security-'));
    api = await emptyPodsApi();
  });

  afterEach(async () => {
    await api.close();
    fs.rmSync(ws, { recursive: true, force: true });
  });

  it('a .env naming a loopback listener receives no Authorization: Bearer <key> from `overbrainer pod ls`; the line is named in a warning', async () => {
    fs.writeFileSync(
      path.join(ws, '.env'),
      `# from a repository the user cloned\nOVERBRAINER_RUNPOD__BASE_URL=${api.baseUrl}\n`,
    );
    const ran = await runCliProcess(['-C', ws, 'pod', 'ls'], {
      env: {
        OVERBRAINER_RUNPOD__API_KEY: KEY,
        NODE_OPTIONS: GUARD,
        OVERBRAINER_TIMING_SCALE: '10',
      },
    });
    assert.deepEqual(api.requests, [], `the .env's host was called:\n${ran.stderr}`);
    assert.match(
      ran.stderr,
      new RegExp(
        `warning: ${path.join(ws, '.env').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:2: OVERBRAINER_RUNPOD__BASE_URL in .env is ignored`,
      ),
    );
    assert.match(
      ran.stderr,
      /hint: To use that address, set OVERBRAINER_RUNPOD__BASE_URL in your shell/,
    );
    // It went to Runpod's own API instead (refused here by the loopback-only guard).
    assert.match(ran.stderr, /loopback only: refused a lookup of api\.runpod\.io/);
    assert.ok(!ran.stderr.includes(KEY) && !ran.stdout.includes(KEY), 'the key was printed');
  });

  it('takes the base URL from the process environment, and the key from the process or .env', async () => {
    fs.writeFileSync(path.join(ws, '.env'), `OVERBRAINER_RUNPOD__API_KEY=${KEY}\n`);
    const ran = await runCliProcess(['-C', ws, 'pod', 'ls'], {
      env: { OVERBRAINER_RUNPOD__BASE_URL: api.baseUrl, NODE_OPTIONS: GUARD },
    });
    assert.equal(ran.code, 0, ran.stderr);
    assert.deepEqual(
      api.requests.map((r) => r.headers.authorization),
      [`Bearer ${KEY}`],
    );
    // Loopback (the emulator) and Runpod's own host are not announced.
    assert.doesNotMatch(ran.stderr, /note: the Runpod API key goes to/);
  });

  it('names the host on every command that sends the key to a host other than Runpod and loopback', async () => {
    const ran = await runCliProcess(['-C', ws, 'pod', 'ls'], {
      env: {
        OVERBRAINER_RUNPOD__API_KEY: KEY,
        OVERBRAINER_RUNPOD__BASE_URL: 'https://runpod-proxy.example.test/v2',
        NODE_OPTIONS: GUARD,
        OVERBRAINER_TIMING_SCALE: '10',
      },
    });
    assert.match(
      ran.stderr,
      /note: the Runpod API key goes to runpod-proxy\.example\.test \(OVERBRAINER_RUNPOD__BASE_URL=https:\/\/runpod-proxy\.example\.test\/v2\), not to Runpod's own API/,
    );
    assert.match(ran.stderr, /loopback only: refused a lookup of runpod-proxy\.example\.test/);
  });
});
