import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { EventBus } from '../../src/core/events';
import { PRODUCTION_TIMING } from '../../src/core/timing';
import { FakeClock } from '../helpers/fakeClock';
import { SetupError } from '../../src/core/flow';
import { WorkspaceSession } from '../../src/ui/workspace';
import { timingFromEnv } from '../../src/core/timing';

describe('workspace session (extension FlowDeps)', function () {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ui-ws-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  function session(apiKey: string | null, baseUrl: string | null, env = {}): WorkspaceSession {
    return new WorkspaceSession({
      dir,
      runsDir: path.join(dir, 'runs'),
      env,
      apiKey,
      baseUrl,
      trusted: true,
      bus: new EventBus(),
      clock: new FakeClock(),
      timing: PRODUCTION_TIMING,
    });
  }

  it('reads the timing test hook like the CLI, ignoring nonsense', function () {
    assert.deepEqual(timingFromEnv({}).timing, PRODUCTION_TIMING);
    assert.equal(
      timingFromEnv({ OVERBRAINER_TIMING_SCALE: '100' }).timing.leaseTtlMs,
      PRODUCTION_TIMING.leaseTtlMs / 100,
    );
    assert.deepEqual(timingFromEnv({ OVERBRAINER_TIMING_SCALE: '0.5' }).timing, PRODUCTION_TIMING);
  });

  it('layers the stored key and the base URL setting over the environment', function () {
    const env = session('rpa_stored_key', 'http://127.0.0.1:9/v2', {
      OVERBRAINER_RUNPOD__API_KEY: 'rpa_env_key',
    }).env();
    assert.equal(env.OVERBRAINER_RUNPOD__API_KEY, 'rpa_stored_key');
    assert.equal(env.OVERBRAINER_RUNPOD__BASE_URL, 'http://127.0.0.1:9/v2');
    assert.equal(
      session(null, null, { OVERBRAINER_RUNPOD__API_KEY: 'rpa_env_key' }).env()
        .OVERBRAINER_RUNPOD__API_KEY,
      'rpa_env_key',
    );
  });

  it('without a key, the API is a SetupError asking for the key; deps without it have no client', async function () {
    const s = session(null, null);
    assert.throws(
      () => s.api(),
      (e: unknown) => e instanceof SetupError && e.needsKey,
    );
    assert.equal(s.deps(false).client, null);
    assert.equal(s.deps(false).owner, 'VS Code window');
    await s.close();
  });

  it('a config error is a SetupError whose hint is not repeated in its message', function () {
    const toml = fs
      .readFileSync(path.join(__dirname, '../../examples/tiny/overbrainer.toml'), 'utf8')
      .replace(/^boot_grace_minutes = \d+$/m, 'boot_grace_minutes = 1');
    fs.writeFileSync(path.join(dir, 'overbrainer.toml'), toml);
    assert.throws(
      () => session(null, null).config(),
      (e: unknown) => {
        assert.ok(e instanceof SetupError, String(e));
        assert.match(e.message, /boot_grace_minutes/);
        assert.match(e.hint, /Write boot_grace_minutes = 30/);
        assert.doesNotMatch(e.message, /Write boot_grace_minutes/);
        return true;
      },
    );
  });

  it('a missing overbrainer.toml is a SetupError with the create hint', function () {
    assert.throws(
      () => session(null, null).config(),
      (e: unknown) => e instanceof SetupError && /Create overbrainer\.toml/.test(e.hint),
    );
  });
});
