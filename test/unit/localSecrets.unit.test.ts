/**
 * docs/SECURITY.md, "the smaller holes": the local target starts the job (the workspace's own
 * code) with this process's environment minus the secrets the product holds. A real job is
 * started by the real launcher under /bin/sh on the LocalExecutor and writes the environment it
 * got; the test waits for its exit code file.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { LocalExecutor, localCommandEnv } from '../../src/core/exec/local';
import { startJob } from '../../src/core/train/job';

const SECRETS = {
  OVERBRAINER_RUNPOD__API_KEY: 'rpa_LOCALSECRET0123456789',
  OVERBRAINER_RUNPOD__BASE_URL: 'http://127.0.0.1:9/v2',
  RUNPOD_API_KEY: 'rpa_RUNPODSECRET0123456789',
};

describe('security: the local target keeps the secrets out of the job', function () {
  let dir: string;
  const saved: Record<string, string | undefined> = {};
  beforeEach(function () {
    dir = fs.mkdtempSync(path.join(tmpdir(), 'ob-localenv-'));
    for (const [name, value] of Object.entries(SECRETS)) {
      saved[name] = process.env[name];
      process.env[name] = value;
    }
    process.env.OVERBRAINER_TEST_VISIBLE = 'kept';
  });
  afterEach(function () {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    delete process.env.OVERBRAINER_TEST_VISIBLE;
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a local job sees no OVERBRAINER_RUNPOD__* variable nor RUNPOD_API_KEY, and the rest of the environment', async function () {
    const executor = new LocalExecutor();
    await startJob(executor, { runDir: dir, script: 'env > seen.env', env: {} });
    const exitCode = path.join(dir, 'exit_code');
    for (let i = 0; i < 500 && !fs.existsSync(exitCode); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(fs.readFileSync(exitCode, 'utf8').trim(), '0');
    const seen = fs.readFileSync(path.join(dir, 'seen.env'), 'utf8');
    for (const [name, value] of Object.entries(SECRETS)) {
      assert.ok(!seen.includes(name) && !seen.includes(value), `the job saw ${name}`);
    }
    assert.match(seen, /^OVERBRAINER_TEST_VISIBLE=kept$/m);
    assert.match(seen, /^PATH=/m);
    executor.dispose();
  });

  it('localCommandEnv drops exactly the product’s secrets', function () {
    assert.deepEqual(
      localCommandEnv({
        OVERBRAINER_RUNPOD__API_KEY: 'k',
        OVERBRAINER_RUNPOD__ANYTHING: 'x',
        RUNPOD_API_KEY: 'k',
        OVERBRAINER_TIMING_SCALE: '10',
        HF_TOKEN: 'the user’s own, for their job',
        HOME: '/root',
      }),
      { OVERBRAINER_TIMING_SCALE: '10', HF_TOKEN: 'the user’s own, for their job', HOME: '/root' },
    );
  });
});
