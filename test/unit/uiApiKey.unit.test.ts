import * as assert from 'node:assert/strict';
import {
  API_KEY_ENV,
  API_KEY_SECRET,
  ApiKeyStore,
  validateApiKey,
  type SecretStore,
} from '../../src/ui/apiKey';
import { Redactor } from '../../src/core/redact';

/** An in-memory SecretStorage with the same contract (a Map, not a mock that accepts anything). */
class MemorySecrets implements SecretStore {
  readonly values = new Map<string, string>();
  async get(key: string): Promise<string | undefined> {
    return this.values.get(key);
  }
  async store(key: string, value: string): Promise<void> {
    this.values.set(key, value);
  }
  async delete(key: string): Promise<void> {
    this.values.delete(key);
  }
}

describe('ui API key store', function () {
  const key = 'rpa_ABCDEFGHIJKLMNOPQRSTUVWX0123456789';

  it('stores the trimmed key in secret storage and reads it back', async function () {
    const secrets = new MemorySecrets();
    const store = new ApiKeyStore(secrets, new Redactor(), {});
    assert.equal(await store.get(), null);
    await store.set(`  ${key}\n`);
    assert.equal(secrets.values.get(API_KEY_SECRET), key);
    assert.deepEqual(await store.get(), { key, source: 'secretStorage' });
    await store.clear();
    assert.equal(await store.get(), null);
  });

  it('falls back to the environment, and a stored key wins over it', async function () {
    const secrets = new MemorySecrets();
    const store = new ApiKeyStore(secrets, new Redactor(), { [API_KEY_ENV]: 'env-key-12345678' });
    assert.deepEqual(await store.get(), { key: 'env-key-12345678', source: 'environment' });
    await store.set(key);
    assert.deepEqual(await store.get(), { key, source: 'secretStorage' });
  });

  it('registers every key it sees with the redactor', async function () {
    const redactor = new Redactor();
    const store = new ApiKeyStore(new MemorySecrets(), redactor, {
      [API_KEY_ENV]: 'envsecretvalue99',
    });
    await store.get();
    await store.set('customsecret-without-prefix');
    assert.equal(
      redactor.redact('a envsecretvalue99 b customsecret-without-prefix c'),
      'a [redacted] b [redacted] c',
    );
  });

  it('refuses what cannot be a key, without quoting it', async function () {
    const store = new ApiKeyStore(new MemorySecrets(), new Redactor(), {});
    for (const bad of ['', '   ', 'two words here', 'xq7z']) {
      const problem = validateApiKey(bad);
      assert.ok(problem !== null, bad);
      if (bad.trim() !== '') assert.ok(!problem.includes(bad.trim()), problem);
      await assert.rejects(store.set(bad));
    }
    assert.equal(validateApiKey(key), null);
  });
});

describe('the redactor of the ui (the core one)', function () {
  it('masks Runpod-shaped keys, private keys and bearer headers it was never told about', function () {
    const redactor = new Redactor();
    const text = [
      'key rpa_0123456789ABCDEFGHIJ used',
      'Authorization: Bearer abc.def',
      '-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----',
    ].join('\n');
    const out = redactor.redact(text);
    assert.ok(!out.includes('0123456789ABCDEFGHIJ'));
    assert.ok(!out.includes('abc.def'));
    assert.ok(!out.includes('AAAA'));
    assert.match(out, /rpa_\[redacted\]/);
  });

  it('ignores very short secrets that would mask ordinary words', function () {
    const redactor = new Redactor();
    redactor.add('abc');
    assert.equal(redactor.redact('abc abc'), 'abc abc');
  });
});
