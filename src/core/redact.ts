/**
 * The one redactor: removes secrets from text bound for a log, a message, an error, a record or a
 * copied pod log. Two kinds of secret are hidden:
 * - the secrets it is given (the API key, a host key being stored, a job's env values): each
 *   secret itself and every 16-character window of it, so a key cut, wrapped or partly echoed by
 *   a server is still hidden; every character covered by a match is replaced, each covered run by
 *   one `[redacted]`;
 * - what is shaped like a secret it never saw: a private key block, or one in base64 (as a pod's
 *   host key travels in its env: `LS0tLS1CRUdJTi…` is the base64 of `-----BEGIN`), a Runpod key
 *   (`rpa_…`), a Hugging Face token (`hf_…`), the value of an `Authorization: Bearer` header.
 */

/** Length of the windows of a secret that are redacted wherever they appear. */
const WINDOW_CHARS = 16;
/** Shorter secrets are not registered: they would mask ordinary words. */
const MIN_SECRET_CHARS = 4;
export const REDACTED = '[redacted]';

const PRIVATE_KEY_BEGIN = /-----BEGIN [A-Z ]*PRIVATE KEY-----/;
const PRIVATE_KEY_END = /-----END [A-Z ]*PRIVATE KEY-----/;
const PRIVATE_KEY_BLOCK =
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)/g;
const PRIVATE_KEY_REDACTED = '[redacted private key]';
const RUNPOD_KEY = /\brpa_[A-Za-z0-9]{16,}\b/g;
const HF_TOKEN = /\bhf_[A-Za-z0-9]{30,}\b/g;
/** Base64 of a PEM block (`-----BEGIN …`): a key file carried in an env variable. */
const PEM_BASE64 = /LS0tLS1CRUdJTi[A-Za-z0-9+/=]*/g;
const BEARER = /(authorization:\s*bearer\s+)\S+/gi;

/**
 * Hides what is shaped like a secret: private key blocks (plain or in base64), Runpod keys,
 * Hugging Face tokens, bearer tokens.
 */
export function redactShapes(text: string): string {
  return text
    .replace(PRIVATE_KEY_BLOCK, PRIVATE_KEY_REDACTED)
    .replace(PEM_BASE64, PRIVATE_KEY_REDACTED)
    .replace(RUNPOD_KEY, `rpa_${REDACTED}`)
    .replace(HF_TOKEN, `hf_${REDACTED}`)
    .replace(BEARER, `$1${REDACTED}`);
}

export class Redactor {
  private readonly needles: string[] = [];

  constructor(secrets: readonly string[] = []) {
    for (const secret of secrets) this.add(secret);
  }

  /** Registers a secret as it becomes known (e.g. the API key once read from secret storage). */
  add(secret: string): void {
    if (secret.length < MIN_SECRET_CHARS || this.needles.includes(secret)) return;
    const needles = new Set([secret]);
    for (let i = 0; i + WINDOW_CHARS <= secret.length; i++) {
      needles.add(secret.slice(i, i + WINDOW_CHARS));
    }
    this.needles.push(...needles);
  }

  /** A redactor that also hides `extra` (e.g. a secret value being stored); this one is unchanged. */
  with(extra: readonly string[]): Redactor {
    const combined = new Redactor();
    combined.needles.push(...this.needles);
    for (const secret of extra) combined.add(secret);
    return combined;
  }

  redact(text: string): string {
    if (text.length === 0) return text;
    return redactShapes(this.hideSecrets(text));
  }

  private hideSecrets(text: string): string {
    let covered: Uint8Array | undefined;
    for (const needle of this.needles) {
      let from = 0;
      for (;;) {
        const at = text.indexOf(needle, from);
        if (at < 0) break;
        covered ??= new Uint8Array(text.length);
        covered.fill(1, at, at + needle.length);
        from = at + 1;
      }
    }
    if (!covered) return text;
    let out = '';
    let i = 0;
    while (i < text.length) {
      if (covered[i]) {
        out += REDACTED;
        while (i < text.length && covered[i]) i++;
      } else {
        out += text[i];
        i++;
      }
    }
    return out;
  }
}

/**
 * Redacts a log one line at a time, as it streams: a private key block spread over lines is
 * hidden from its BEGIN line through its END line.
 */
export class LineRedactor {
  private inKey = false;

  /** `secrets` hides the known secrets (a {@link Redactor}'s redact); shapes are hidden here too. */
  constructor(private readonly secrets: (text: string) => string) {}

  redact(line: string): string {
    if (this.inKey) {
      if (PRIVATE_KEY_END.test(line)) this.inKey = false;
      return PRIVATE_KEY_REDACTED;
    }
    if (PRIVATE_KEY_BEGIN.test(line)) {
      this.inKey = !PRIVATE_KEY_END.test(line);
      return redactShapes(
        this.secrets(line.replace(/-----BEGIN [A-Z ]*PRIVATE KEY-----.*$/, '')),
      ).concat(PRIVATE_KEY_REDACTED);
    }
    return redactShapes(this.secrets(line));
  }
}
