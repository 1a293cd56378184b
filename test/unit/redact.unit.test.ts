import assert from 'node:assert/strict';
import { LineRedactor, Redactor } from '../../src/core/redact';

describe('LineRedactor (pod logs, one line at a time)', function () {
  it('hides a private key block spread over lines, from its BEGIN line to its END line', function () {
    const lines = new LineRedactor((text) => text);
    const out = [
      'boot ok',
      'key: -----BEGIN OPENSSH PRIVATE KEY-----',
      'b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ',
      '-----END OPENSSH PRIVATE KEY-----',
      'sshd started',
    ].map((line) => lines.redact(line));
    assert.deepEqual(out, [
      'boot ok',
      'key: [redacted private key]',
      '[redacted private key]',
      '[redacted private key]',
      'sshd started',
    ]);
  });

  it('hides the known secrets it is given and secret-shaped words it was not', function () {
    const apiKey = 'a-known-secret-value-0123456789';
    const lines = new LineRedactor((text) => new Redactor([apiKey]).redact(text));
    assert.equal(
      lines.redact(`env KEY=${apiKey} other=rpa_ABCDEFGHIJKLMNOPQRST`),
      'env KEY=[redacted] other=rpa_[redacted]',
    );
  });
});

describe('Redactor.add', function () {
  it('hides a secret registered after creation, and its 16-character windows', function () {
    const redactor = new Redactor();
    const secret = 'registered-later-0123456789abcdef';
    assert.equal(redactor.redact(secret), secret);
    redactor.add(secret);
    assert.equal(redactor.redact(`x ${secret.slice(3, 19)} y`), 'x [redacted] y');
  });
});
