/**
 * The Runpod client's pure rules: base URL, redaction, decoding, the create
 * body, Retry-After, and the reason a failed run keeps in run.json.
 */
import assert from 'node:assert/strict';
import {
  createPodBody,
  decodeJson,
  isDead,
  isPodId,
  isSecretName,
  ListPodsSchema,
  PodSchema,
  secretReference,
} from '../../src/core/runpod/api';
import { retryAfterMs, userAgentFor, validateBaseUrl } from '../../src/core/runpod/client';
import { lineColumn, scanJson } from '../../src/core/runs/jsonPositions';
import {
  ApiError,
  isPlacement400,
  isRunpod404,
  oneLine,
  Redactor,
  RunpodConfigError,
  runMessage,
  runpodText,
} from '../../src/core/runpod/apiErrors';

describe('Runpod base URL', () => {
  const accepted: [string, string][] = [
    ['https://api.runpod.io/v2', 'https://api.runpod.io/v2'],
    ['https://api.runpod.io/v2/', 'https://api.runpod.io/v2'],
    ['http://127.0.0.1:8080/v2', 'http://127.0.0.1:8080/v2'],
    ['http://127.45.6.7:1/v2', 'http://127.45.6.7:1/v2'],
    ['http://127.1:9/v2', 'http://127.0.0.1:9/v2'],
    ['http://localhost:3000/v2', 'http://localhost:3000/v2'],
    ['http://[::1]:3000/v2', 'http://[::1]:3000/v2'],
    ['HTTPS://API.RUNPOD.IO/v2', 'https://api.runpod.io/v2'],
    ['https://proxy.internal/runpod/v2/', 'https://proxy.internal/runpod/v2'],
  ];
  for (const [raw, normalised] of accepted) {
    it(`accepts ${raw}`, () => assert.equal(validateBaseUrl(raw), normalised));
  }

  const refused = [
    'http://api.runpod.io/v2',
    'http://10.0.0.1/v2',
    'http://127.0.0.1.nip.io/v2',
    'http://localhost.evil.com/v2',
    'http://[::2]/v2',
    'http://128.0.0.1/v2',
    'ftp://127.0.0.1/v2',
    'file:///etc/passwd',
    'https://user:pw@api.runpod.io/v2',
    'https://api.runpod.io/v2?x=1',
    'https://api.runpod.io/v2#frag',
    'api.runpod.io/v2',
    '',
    // Not an API v2 root: every route would 404, and a 404 must never read as "pod gone".
    'https://api.runpod.io',
    'https://api.runpod.io/',
    'https://api.runpod.io/v1',
    'http://127.0.0.1:8080/v2/pods',
    'http://127.0.0.1:8080/graphql',
  ];
  for (const raw of refused) {
    it(`refuses ${JSON.stringify(raw)}, naming OVERBRAINER_RUNPOD__BASE_URL`, () => {
      assert.throws(
        () => validateBaseUrl(raw),
        (e: unknown) =>
          e instanceof RunpodConfigError &&
          e.variable === 'OVERBRAINER_RUNPOD__BASE_URL' &&
          e.message.startsWith('OVERBRAINER_RUNPOD__BASE_URL'),
      );
    });
  }
});

describe('User-Agent', () => {
  it('names the product and its version', () => {
    assert.equal(userAgentFor('1.2.3'), 'overbrainer-vscode/1.2.3');
  });
});

describe('redaction', () => {
  const key = 'rpa_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
  const redactor = new Redactor([key]);

  it('hides the key itself', () => {
    assert.equal(redactor.redact(`Bearer ${key} refused`), 'Bearer [redacted] refused');
  });

  it('hides any 16-character window of the key, and only that', () => {
    const part = key.slice(5, 21);
    assert.equal(redactor.redact(`x${part}y`), 'x[redacted]y');
    // 15 characters of the key are not a window: kept.
    const short = key.slice(5, 20);
    assert.equal(redactor.redact(`x${short}y`), `x${short}y`);
  });

  it('hides overlapping pieces as one run', () => {
    const text = `${key.slice(0, 20)}${key.slice(10, 30)}`;
    assert.equal(redactor.redact(text), '[redacted]');
  });

  it('hides a short key only where it appears whole', () => {
    const short = new Redactor(['abc123']);
    assert.equal(short.redact('xabc123y abc12'), 'x[redacted]y abc12');
  });

  it('adds extra secrets for one call without changing the base redactor', () => {
    const value = 'the-secret-value-of-a-host-key-0001';
    const both = redactor.with([value]);
    assert.equal(both.redact(`${key} ${value}`), '[redacted] [redacted]');
    assert.equal(redactor.redact(value), value);
  });

  it('redacts Runpod text before and after decoding JSON escapes', () => {
    const escaped = Array.from(
      key,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
    ).join('');
    const text = runpodText(`{"title":"Bad","detail":"key ${escaped}"}`, redactor);
    assert.equal(text, 'Bad: key [redacted]');
    assert.equal(runpodText(`<p>${key}</p>`, redactor), '<p>[redacted]</p>');
  });

  it('builds problem text from title, detail and errors[]', () => {
    const text = runpodText(
      JSON.stringify({
        title: 'Unprocessable Entity',
        status: 422,
        detail: 'bad',
        errors: ['a', 'b'],
      }),
      redactor,
    );
    assert.equal(text, 'Unprocessable Entity: bad (a; b)');
  });

  it('caps text to 300 characters on one line', () => {
    const long = oneLine('a\u0000b\r\n' + 'é'.repeat(400));
    assert.equal(Array.from(long).length, 300);
    assert.ok(long.startsWith('a b é'));
    assert.ok(long.endsWith('…'));
  });
});

describe("Runpod's 404 and capacity", () => {
  it("tells Runpod's 404 from any other", () => {
    assert.equal(isRunpod404('{"title":"Not Found","status":404,"detail":"pod not found"}'), true);
    assert.equal(isRunpod404('{"status":404}'), true);
    assert.equal(isRunpod404('{"detail":"x"}'), true);
    assert.equal(isRunpod404('{"title":"x"}'), true);
    assert.equal(isRunpod404('{"status":"404"}'), false);
    assert.equal(isRunpod404('{"message":"Not Found"}'), false);
    assert.equal(isRunpod404('<html>404</html>'), false);
    assert.equal(isRunpod404(''), false);
    assert.equal(isRunpod404('null'), false);
    assert.equal(isRunpod404('[{"title":"x"}]'), false);
  });

  it("reads a create's 400 as 'could not be placed' from Runpod's problem form, not its words", () => {
    // The document's own example, and the field's phrase: both move the walk on.
    assert.equal(
      isPlacement400(
        '{"title":"Bad Request","status":400,"detail":"request could not be processed"}',
      ),
      true,
    );
    assert.equal(
      isPlacement400(
        '{"title":"Bad Request","status":400,"detail":"There are no longer any instances available with the requested specifications. Please refresh and try again."}',
      ),
      true,
    );
    assert.equal(isPlacement400('{"detail":"Keine Instanzen mehr verfügbar"}'), true);
    // Not Runpod's document: a proxy's page or a bare phrase proves nothing about capacity.
    assert.equal(isPlacement400('no longer any instances available'), false);
    assert.equal(isPlacement400('<html>400 Bad Request</html>'), false);
    assert.equal(isPlacement400('{"message":"bad"}'), false);
  });
});

describe('decoding', () => {
  it('locates a syntax error at the offending word by line and column without quoting the text', () => {
    // `tru` starts at column 12 of line 3: the word is wrong, not the `}` after it.
    const result = decodeJson('{\n  "pods": [\n    {"id": tru}\n  ]\n}', ListPodsSchema);
    assert.deepEqual(result, { ok: false, reason: 'syntax error at line 3 column 12' });
  });

  it('says a cut-short answer ended early, at its end', () => {
    const result = decodeJson('{\n  "pods": [\n    {"id": "ab', ListPodsSchema);
    assert.deepEqual(result, { ok: false, reason: 'unexpected end at line 3 column 15' });
  });

  // [text, offset, eof]: a wrong word at its start; inside a string the character that cannot be
  // there; a text cut short at its end (eof).
  const offsets: [string, number, boolean][] = [
    ['', 0, true],
    ['{', 1, true],
    ['{"a":', 5, true],
    ['{"a":1,}', 7, false],
    ['[1 2]', 3, false],
    ['"abc', 4, true],
    ['"a\\x"', 3, false],
    ['"\\u12G4"', 5, false],
    ['"\\u12', 5, true],
    ['01', 1, false],
    ['-', 1, true],
    ['-x', 0, false],
    ['{"a":1} x', 8, false],
    ['"tab\there"', 4, false],
    ['nul', 3, true],
    ['{"a": tru}', 6, false],
    ['{"loss": NaN}', 9, false],
    ['{"loss": -Infinity}', 9, false],
    ["{'a': 1}", 1, false],
    ['{"a" 1}', 5, false],
  ];
  for (const [text, offset, eof] of offsets) {
    it(`finds where ${JSON.stringify(text)} stops being JSON`, () => {
      assert.ok(
        (() => {
          try {
            JSON.parse(text);
            return false;
          } catch {
            return true;
          }
        })(),
        'the case is invalid JSON',
      );
      assert.deepEqual(scanJson(text), { ok: false, errorAt: offset, eof });
    });
  }

  it('accepts what JSON.parse accepts, however long a number or deep a document', () => {
    for (const text of [
      `[${'9'.repeat(1000)}]`,
      `{"a":[1,-0.5e+3,true,false,null,"\\u00e9\\n"]}`,
      `${'['.repeat(500)}${']'.repeat(500)}`,
      ' {} ',
    ]) {
      JSON.parse(text);
      assert.equal(scanJson(text).ok, true, text.slice(0, 40));
    }
  });

  it('places a line and column by 1-based counting, an offset past the end at the end', () => {
    assert.deepEqual(lineColumn('ab\ncd', 4), { line: 2, column: 2 });
    assert.deepEqual(lineColumn('ab', 99), { line: 1, column: 3 });
  });

  it('names the first wrong field by path and issue code only', () => {
    const result = decodeJson('{"pods":[{"id":"abc","name":"n","status":1}]}', ListPodsSchema);
    assert.deepEqual(result, { ok: false, reason: 'data: pods.0.status invalid_type' });
  });

  it('reads a minimal pod with defaults for what Runpod left out', () => {
    const result = decodeJson('{"id":"abc","name":"n","status":"STARTING"}', PodSchema);
    assert.deepEqual(result, {
      ok: true,
      value: {
        id: 'abc',
        name: 'n',
        status: 'STARTING',
        costPerHourUsd: 0,
        dataCenterId: null,
        gpu: null,
        sshDirect: null,
        runMarker: null,
        createdAt: null,
        cluster: null,
      },
    });
  });

  it("reads a cluster member's membership, and a malformed one as none", () => {
    const member = decodeJson(
      '{"id":"abc","name":"n","status":"RUNNING","cluster":{"id":"c1","rank":1,"ip":"10.65.0.3"}}',
      PodSchema,
    );
    assert.ok(member.ok);
    assert.deepEqual(member.value.cluster, { clusterId: 'c1', rank: 1, ip: '10.65.0.3' });
    const unranked = decodeJson(
      '{"id":"a","name":"n","status":"X","cluster":{"id":"c1","rank":null}}',
      PodSchema,
    );
    assert.ok(unranked.ok);
    assert.deepEqual(unranked.value.cluster, { clusterId: 'c1', rank: null, ip: null });
    const broken = decodeJson(
      '{"id":"a","name":"n","status":"X","cluster":{"rank":"x"}}',
      PodSchema,
    );
    assert.ok(broken.ok);
    assert.equal(broken.value.cluster, null);
  });

  it('treats a run marker of the wrong type as none rather than failing the pod', () => {
    const result = decodeJson(
      '{"id":"abc","name":"n","status":"RUNNING","env":{"OVERBRAINER_RUN_ID":7,"X":{"y":1}}}',
      PodSchema,
    );
    assert.ok(result.ok);
    assert.equal(result.value.runMarker, null);
  });
});

describe('pods', () => {
  it('are dead once EXITED, ERROR or TERMINATED', () => {
    for (const status of ['EXITED', 'ERROR', 'TERMINATED']) assert.equal(isDead({ status }), true);
    for (const status of ['PROVISIONING', 'STARTING', 'RUNNING', 'HIBERNATING']) {
      assert.equal(isDead({ status }), false);
    }
  });

  it('have any non-empty ID without control characters, except the dot segments', () => {
    for (const id of ['7h9k2m4n6p', 'a-b', 'a_b', 'a/b', 'é', 'a b', 'x'.repeat(256)]) {
      assert.equal(isPodId(id), true, id);
    }
    for (const id of ['', '.', '..', 'a\nb', 'a\u0000', 'x'.repeat(257)]) {
      assert.equal(isPodId(id), false, JSON.stringify(id));
    }
  });

  it('are created with the fixed parts of every overbrainer pod', () => {
    const body = createPodBody({
      name: 'overbrainer-r-1',
      image: 'img@sha256:00',
      gpuTypeId: 'NVIDIA A40',
      gpuCount: 2,
      containerDiskGb: 60,
      env: { OVERBRAINER_RUN_ID: 'r' },
      cmd: ['bash', '-c', 'true'],
      dataCenterIds: [],
      networkVolumeId: null,
    });
    assert.deepEqual(body, {
      name: 'overbrainer-r-1',
      image: 'img@sha256:00',
      cloud: 'SECURE',
      gpu: { id: 'NVIDIA A40', count: 2, minCudaVersion: '13.0' },
      disk: 60,
      ports: ['22/tcp'],
      startSsh: false,
      env: { OVERBRAINER_RUN_ID: 'r' },
      cmd: ['bash', '-c', 'true'],
    });
  });
});

describe('secrets', () => {
  it("accept the names Runpod's reference allows", () => {
    assert.equal(isSecretName('overbrainer_host_key_proj_20260929-120000'), true);
    assert.equal(isSecretName('_a.b-c/d'), true);
    assert.equal(isSecretName('a'.repeat(191)), true);
    assert.equal(isSecretName('a'.repeat(192)), false);
    assert.equal(isSecretName('runpod_x'), false);
    assert.equal(isSecretName('9lives'), false);
    assert.equal(isSecretName(''), false);
  });

  it('are referenced from env by name', () => {
    assert.equal(
      secretReference('overbrainer_host_key_r'),
      '{{ RUNPOD_SECRET_overbrainer_host_key_r }}',
    );
  });
});

describe('Retry-After', () => {
  const now = Date.UTC(2026, 8, 29, 12, 0, 0);
  it('reads seconds and HTTP-dates, and ignores the unreadable', () => {
    assert.equal(retryAfterMs('12', now), 12_000);
    assert.equal(retryAfterMs(' 0 ', now), 0);
    assert.equal(retryAfterMs(['3', '9'], now), 3_000);
    assert.equal(retryAfterMs('Tue, 29 Sep 2026 12:00:30 GMT', now), 30_000);
    assert.equal(retryAfterMs('Tue, 29 Sep 2026 11:00:00 GMT', now), 0);
    assert.equal(retryAfterMs(undefined, now), undefined);
    assert.equal(retryAfterMs('', now), undefined);
    assert.equal(retryAfterMs('-5', now), undefined);
    assert.equal(retryAfterMs('1.5', now), undefined);
    assert.equal(retryAfterMs('soon', now), undefined);
  });
});

describe('run messages', () => {
  it('a_failed_run_keeps_only_the_status_of_an_api_answer', () => {
    const answered = new ApiError('server', 'Runpod answered 500: server text', { status: 500 });
    assert.equal(runMessage(answered), 'Runpod answered 500');
    assert.equal(
      runMessage(new Error('interrupted before the job started')),
      'interrupted before the job started',
    );
  });

  it('keeps the message of an API error without an answer', () => {
    const transport = new ApiError(
      'transport',
      'could not reach the Runpod API: connection refused',
    );
    assert.equal(runMessage(transport), 'could not reach the Runpod API: connection refused');
  });

  it('an ApiError shows only kind, status, retryAfterMs and aborted as fields', () => {
    const error = new ApiError('rate_limited', 'slow', { status: 429, retryAfterMs: 5000 });
    assert.deepEqual(Object.keys(error).sort(), ['aborted', 'kind', 'retryAfterMs', 'status']);
    assert.equal(error.name, 'ApiError');
  });
});
