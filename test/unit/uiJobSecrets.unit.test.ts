/**
 * The job's secrets in VS Code's SecretStorage: the HF token and named secrets become the
 * session's environment entries (winning over VS Code's environment), each value joins the
 * redactor, and bad names or values are refused without quoting them.
 */
import assert from 'node:assert/strict';
import { Redactor } from '../../src/core/redact';
import {
  HF_TOKEN_ENV,
  JobSecretStore,
  validateSecretName,
  validateSecretValue,
} from '../../src/ui/jobSecrets';
import { WorkspaceSession } from '../../src/ui/workspace';
import { EventBus } from '../../src/core/events';
import { systemClock } from '../../src/core/clock';
import { PRODUCTION_TIMING } from '../../src/core/timing';

function memory(): {
  get(k: string): Promise<string | undefined>;
  store(k: string, v: string): Promise<void>;
  delete(k: string): Promise<void>;
  map: Map<string, string>;
} {
  const map = new Map<string, string>();
  return {
    map,
    get: (k) => Promise.resolve(map.get(k)),
    store: (k, v) => Promise.resolve(void map.set(k, v)),
    delete: (k) => Promise.resolve(void map.delete(k)),
  };
}

describe('VS Code: the job secrets in SecretStorage', () => {
  it('become the env entries a session reads, over the environment, and are redacted', async () => {
    const secrets = memory();
    const redactor = new Redactor([]);
    const store = new JobSecretStore(secrets, redactor);
    assert.deepEqual(await store.env(), {});
    await store.setHfToken(' hf_storedToken123 ');
    await store.set('WANDB_API_KEY', 'wandb_storedValue456');
    assert.deepEqual(await store.env(), {
      [HF_TOKEN_ENV]: 'hf_storedToken123',
      WANDB_API_KEY: 'wandb_storedValue456',
    });
    assert.equal(
      redactor.redact('x hf_storedToken123 wandb_storedValue456').includes('stored'),
      false,
    );
    const session = new WorkspaceSession({
      dir: '/w',
      runsDir: '/w/runs',
      env: { WANDB_API_KEY: 'from-env', OTHER: '1' },
      apiKey: null,
      baseUrl: null,
      secretEnv: await store.env(),
      trusted: true,
      bus: new EventBus(),
      clock: systemClock,
      timing: PRODUCTION_TIMING,
    });
    assert.equal(session.env().WANDB_API_KEY, 'wandb_storedValue456');
    assert.equal(session.env()[HF_TOKEN_ENV], 'hf_storedToken123');
    assert.equal(session.env().OTHER, '1');
  });

  it('refuses names Overbrainer owns and values of several lines, without quoting them', async () => {
    assert.match(validateSecretName('HF_TOKEN') ?? '', /Set Hugging Face Token/);
    assert.match(validateSecretName('OVERBRAINER_X') ?? '', /Overbrainer's own/);
    assert.match(validateSecretName('not a name') ?? '', /letters, digits and _/);
    assert.equal(validateSecretName('WANDB_API_KEY'), null);
    assert.match(validateSecretValue('a\nb') ?? '', /one line/);
    await assert.rejects(new JobSecretStore(memory(), new Redactor([])).set('PATH x', 'v'));
  });
});
