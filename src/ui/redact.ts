/**
 * Removes secrets from text bound for a log or a message. Secrets are registered as they become
 * known (the API key once read from secret storage); anything shaped like a Runpod key or a
 * private key block is masked too, so a secret the extension never saw (echoed by a tool, pasted
 * in a config) does not reach the output either.
 */
export class Redactor {
  private readonly secrets = new Set<string>();

  /** Registers a secret value; very short values are ignored (they would mask ordinary words). */
  add(secret: string): void {
    if (secret.length >= 8) this.secrets.add(secret);
  }

  redact(text: string): string {
    let out = text;
    for (const secret of this.secrets) out = out.split(secret).join('***');
    return out
      .replace(
        /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)/g,
        '***private key***',
      )
      .replace(/\brpa_[A-Za-z0-9]{16,}\b/g, 'rpa_***')
      .replace(/(authorization:\s*bearer\s+)\S+/gi, '$1***');
  }
}
