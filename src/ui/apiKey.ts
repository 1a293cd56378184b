import type { Redactor } from '../core/redact';

/** The part of vscode.SecretStorage the key store needs (so it is unit-tested without VS Code). */
export interface SecretStore {
  get(key: string): PromiseLike<string | undefined>;
  store(key: string, value: string): PromiseLike<void>;
  delete(key: string): PromiseLike<void>;
}

/** The SecretStorage entry holding the Runpod API key. */
export const API_KEY_SECRET = 'overbrainer.runpod.apiKey';
/** The environment fallback (same name as the CLI's, `__` between config levels). */
export const API_KEY_ENV = 'OVERBRAINER_RUNPOD__API_KEY';

export type ApiKeySource = 'secretStorage' | 'environment';

/**
 * Where the Runpod API key lives: VS Code's SecretStorage first, else the environment. Never in
 * settings or files. Every key read or stored is registered with the redactor, so it cannot
 * reach a log line or an error text.
 */
export class ApiKeyStore {
  constructor(
    private readonly secrets: SecretStore,
    private readonly redactor: Redactor,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  async get(): Promise<{ key: string; source: ApiKeySource } | null> {
    const stored = (await this.secrets.get(API_KEY_SECRET))?.trim();
    if (stored !== undefined && stored !== '') {
      this.redactor.add(stored);
      return { key: stored, source: 'secretStorage' };
    }
    const fromEnv = this.env[API_KEY_ENV]?.trim();
    if (fromEnv !== undefined && fromEnv !== '') {
      this.redactor.add(fromEnv);
      return { key: fromEnv, source: 'environment' };
    }
    return null;
  }

  async set(key: string): Promise<void> {
    const problem = validateApiKey(key);
    if (problem !== null) throw new Error(problem);
    const trimmed = key.trim();
    this.redactor.add(trimmed);
    await this.secrets.store(API_KEY_SECRET, trimmed);
  }

  async clear(): Promise<void> {
    await this.secrets.delete(API_KEY_SECRET);
  }
}

/** Null when the text can be a key; otherwise what is wrong, without quoting the text. */
export function validateApiKey(text: string): string | null {
  const key = text.trim();
  if (key === '') return 'Enter the API key from Runpod → Settings → API Keys.';
  if (/\s/.test(key)) return 'An API key has no spaces or line breaks.';
  if (key.length < 8) return 'That is too short to be a Runpod API key.';
  return null;
}
