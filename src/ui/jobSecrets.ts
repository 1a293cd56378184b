/**
 * The job's secrets in VS Code's SecretStorage: the Hugging Face token ("Set Hugging Face Token")
 * and further named secrets for `[training] secrets` ("Set Job Secret"). A session's environment
 * takes them (stored values win over VS Code's environment, as the API key does), so the core
 * reads them where the CLI reads its environment. Every value read or stored joins the redactor.
 */
import type { Redactor } from '../core/redact';
import type { SecretStore } from './apiKey';

/** The SecretStorage entry holding the Hugging Face token. */
export const HF_TOKEN_SECRET = 'overbrainer.hfToken';
/** The environment name the token takes (the CLI's). */
export const HF_TOKEN_ENV = 'OVERBRAINER_HF_TOKEN';
/** The SecretStorage entry listing the names of the stored job secrets (JSON list). */
const NAMES_SECRET = 'overbrainer.jobSecretNames';
const valueKey = (name: string): string => `overbrainer.jobSecret.${name}`;
const NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** Null when `name` can be a job secret's name; otherwise what is wrong. */
export function validateSecretName(name: string): string | null {
  const trimmed = name.trim();
  if (!NAME.test(trimmed))
    return 'A name of letters, digits and _, as [training] secrets lists it.';
  if (trimmed === 'HF_TOKEN' || trimmed === HF_TOKEN_ENV)
    return 'The Hugging Face token has its own command: "Overbrainer: Set Hugging Face Token".';
  if (trimmed.startsWith('OVERBRAINER_'))
    return "Names starting OVERBRAINER_ are Overbrainer's own.";
  return null;
}

/** Null when the text can be a secret's value; otherwise what is wrong, without quoting it. */
export function validateSecretValue(text: string): string | null {
  const value = text.trim();
  if (value === '') return 'Enter the value.';
  if (/[\r\n\0]/.test(value)) return 'A secret is one line.';
  return null;
}

export class JobSecretStore {
  constructor(
    private readonly secrets: SecretStore,
    private readonly redactor: Redactor,
  ) {}

  /** The stored secrets as environment entries: `OVERBRAINER_HF_TOKEN` and each stored name. */
  async env(): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    const token = (await this.secrets.get(HF_TOKEN_SECRET))?.trim();
    if (token) out[HF_TOKEN_ENV] = token;
    for (const name of await this.names()) {
      const value = (await this.secrets.get(valueKey(name)))?.trim();
      if (value) out[name] = value;
    }
    for (const value of Object.values(out)) this.redactor.add(value);
    return out;
  }

  async hasHfToken(): Promise<boolean> {
    return Boolean((await this.secrets.get(HF_TOKEN_SECRET))?.trim());
  }

  async setHfToken(token: string): Promise<void> {
    const problem = validateSecretValue(token);
    if (problem !== null) throw new Error(problem);
    this.redactor.add(token.trim());
    await this.secrets.store(HF_TOKEN_SECRET, token.trim());
  }

  async set(name: string, value: string): Promise<void> {
    const problem = validateSecretName(name) ?? validateSecretValue(value);
    if (problem !== null) throw new Error(problem);
    this.redactor.add(value.trim());
    await this.secrets.store(valueKey(name.trim()), value.trim());
    const names = new Set(await this.names());
    names.add(name.trim());
    await this.secrets.store(NAMES_SECRET, JSON.stringify([...names].sort()));
  }

  async names(): Promise<string[]> {
    try {
      const parsed: unknown = JSON.parse((await this.secrets.get(NAMES_SECRET)) ?? '[]');
      return Array.isArray(parsed)
        ? parsed.filter((n): n is string => typeof n === 'string' && NAME.test(n))
        : [];
    } catch {
      return [];
    }
  }
}
