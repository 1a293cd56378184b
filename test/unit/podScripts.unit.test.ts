/**
 * The pod scripts as text and the create call's env: the watchdog's lease default, production
 * paths, the generated cmd parsing under every shell it may meet, its size, the embedded
 * watchdog coming out byte for byte, where the keys may appear, and podEnv's rules.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

import {
  BOOTSTRAP_FAILED,
  BOOTSTRAP_LOG,
  COST_CAP_FILE,
  DEADLINE_FILE,
  JOB_ENV_PATH,
  KEEP_MARKER,
  LEASE_FILE,
  POD_CMD_MAX_BYTES,
  POD_ENV_MAX_VARS,
  PodScriptError,
  REFUSED_RUN_DIR,
  RETRIEVED_MARKER,
  SNAPSHOT_AT_FILE,
  VOLUME_GB_FILE,
  WATCHDOG_LOG,
  WATCHDOG_PATH,
  WATCHDOG_USER_AGENT_PREFIX,
  WATCHDOG_VERDICT,
  bootstrapScript,
  parseWatchdogVerdict,
  podCmd,
  podEnv,
  watchdogScript,
  type PodEnvParams,
} from '../../src/core/pod/podScripts';
import { PRODUCTION_TIMING, scaleTiming } from '../../src/core/timing';
import { SNAPSHOT_JSON, SNAPSHOT_REQUEST } from '../../src/core/train/job';

const SHELLS: [string, string[]][] = [
  ['sh', ['sh', '-n']],
  ['dash', ['dash', '-n']],
  ['bash', ['bash', '-n']],
  ['busybox sh', ['busybox', 'sh', '-n']],
];

function parses(argv: string[], script: string): { ok: boolean; stderr: string } {
  const r = spawnSync(argv[0]!, argv.slice(1), { input: script, encoding: 'utf8' });
  if (r.error) throw r.error;
  return { ok: r.status === 0, stderr: r.stderr };
}

/** Non-comment lines of `script` that mention `word`. */
function codeLinesWith(script: string, word: string): string[] {
  return script
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => !l.startsWith('#') && l.includes(word));
}

const HOST_PUB =
  'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostHostHostHostHostHostHostHostHostHost overbrainer-r1';
const CLIENT_PUB =
  'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIClientClientClientClientClientClientCl overbrainer-r1';

function params(overrides: Partial<PodEnvParams> = {}): PodEnvParams {
  return {
    runId: 'tiny_20260929-120000',
    workdir: '/workspace/overbrainer',
    deadlineUnixS: 1_790_000_000,
    bootGraceS: 1800,
    retrieveGraceS: 3600,
    keepPod: false,
    apiUrl: 'https://api.runpod.io/v2',
    authorizedKey: CLIENT_PUB,
    claim: HOST_PUB,
    version: '0.1.0',
    hostKey: Buffer.from('-----BEGIN OPENSSH PRIVATE KEY-----\nxyz\n').toString('base64'),
    timing: PRODUCTION_TIMING,
    ...overrides,
  };
}

describe('podScripts', function () {
  describe('the watchdog script', function () {
    it('holds the lease as long as the client counts on (OVERBRAINER_LEASE_TTL:-900})', function () {
      assert.ok(watchdogScript().includes('OVERBRAINER_LEASE_TTL:-900}'));
      const seconds = PRODUCTION_TIMING.leaseTtlMs / 1000;
      assert.ok(watchdogScript().includes(`\${OVERBRAINER_LEASE_TTL:-${seconds}}`));
    });

    it('has the spec defaults: interval 60, probe 5 tries 10 s apart, graces 1800/3600, API v2', function () {
      const w = watchdogScript();
      for (const fragment of [
        '"${OVERBRAINER_INTERVAL:-}" 60)',
        '"${OVERBRAINER_PROBE_TRIES:-}" 5)',
        '"${OVERBRAINER_PROBE_WAIT:-}" 10)',
        '"${OVERBRAINER_BOOT_GRACE:-}" 1800)',
        '"${OVERBRAINER_RETRIEVE_GRACE:-}" 3600)',
        '${OVERBRAINER_API_URL:-https://api.runpod.io/v2}',
        `WD_UA="${WATCHDOG_USER_AGENT_PREFIX}$WD_VERSION"`,
      ]) {
        assert.ok(w.includes(fragment), fragment);
      }
      assert.equal(PRODUCTION_TIMING.watchdogIntervalS, 60);
      assert.equal(PRODUCTION_TIMING.watchdogProbeTries, 5);
      assert.equal(PRODUCTION_TIMING.watchdogProbeWaitS, 10);
    });

    it('has the snapshot defaults: lead and wait as the timing object, disk at 92 % and 97 %', function () {
      const w = watchdogScript();
      for (const fragment of [
        `"\${OVERBRAINER_SNAPSHOT_LEAD:-}" ${PRODUCTION_TIMING.snapshotLeadS})`,
        `"\${OVERBRAINER_SNAPSHOT_WAIT:-}" ${PRODUCTION_TIMING.snapshotWaitS})`,
        '"${OVERBRAINER_DISK_ACT:-}" 92)',
        '"${OVERBRAINER_DISK_BACKSTOP:-}" 97)',
        '${OVERBRAINER_VOLUME_DIR:-}',
      ]) {
        assert.ok(w.includes(fragment), fragment);
      }
      // What the create call's env gives it, by the names it reads.
      const env = podEnv(params({ volumeDir: '/workspace/data' }));
      assert.equal(env.OVERBRAINER_SNAPSHOT_LEAD, String(PRODUCTION_TIMING.snapshotLeadS));
      assert.equal(env.OVERBRAINER_SNAPSHOT_WAIT, String(PRODUCTION_TIMING.snapshotWaitS));
      assert.equal(env.OVERBRAINER_VOLUME_DIR, '/workspace/data');
    });

    it('uses the files the client writes and reads, by the exported names', function () {
      const w = watchdogScript();
      for (const file of [
        LEASE_FILE,
        RETRIEVED_MARKER,
        KEEP_MARKER,
        WATCHDOG_LOG,
        WATCHDOG_VERDICT,
        COST_CAP_FILE,
        BOOTSTRAP_FAILED,
        SNAPSHOT_AT_FILE,
        VOLUME_GB_FILE,
        DEADLINE_FILE,
        SNAPSHOT_REQUEST,
        SNAPSHOT_JSON,
      ]) {
        assert.ok(w.includes(`$WD_RUN/${file}"`), file);
      }
      assert.ok(bootstrapScript().includes(`/${BOOTSTRAP_LOG}"`));
      assert.ok(bootstrapScript().includes(`/${BOOTSTRAP_FAILED}"`));
      assert.ok(w.includes('.pod/keep'), 'the runtime keep marker is documented and used');
    });

    it('passes the key only to builtins: printf into curl -H @-, and runpodctl by env', function () {
      const w = watchdogScript();
      const allowed = [
        /^wd_key=\$\{RUNPOD_API_KEY:-\}$/,
        /^unset RUNPOD_API_KEY$/,
        /^wd_c=\$\(printf 'Authorization: Bearer %s\\n' "\$wd_key" \|$/,
        /^wd_out=\$\(printf 'Authorization: Bearer %s\\n' "\$wd_key" \|$/,
        /^if \[ -n "\$wd_key" \] && command -v curl >\/dev\/null 2>&1; then$/,
        /^if \[ -z "\$wd_key" \] \|\| \[ -z "\$wd_pod" \]; then$/,
        /^if \[ -n "\$wd_key" \] && \[ -n "\$wd_pod" \] && command -v curl >\/dev\/null 2>&1; then$/,
        /^if \[ -n "\$wd_key" \]; then$/,
        /^RUNPOD_API_KEY=\$wd_key runpodctl pod delete "\$wd_pod" >\/dev\/null 2>&1$/,
      ];
      const lines = [...codeLinesWith(w, 'wd_key'), ...codeLinesWith(w, 'RUNPOD_API_KEY')];
      assert.ok(lines.length >= 7);
      for (const line of lines) {
        assert.ok(
          allowed.some((re) => re.test(line)),
          `key used in: ${line}`,
        );
      }
      // The header goes to curl on stdin.
      assert.equal(codeLinesWith(w, '-H @-').length, 3);
    });
  });

  describe('the bootstrap script', function () {
    it('defaults to the production paths (the emulator runs it unchanged)', function () {
      const b = bootstrapScript();
      for (const fragment of [
        '${OVERBRAINER_ETC_DIR:-/etc/overbrainer}',
        '${OVERBRAINER_SSH_ETC:-/etc/ssh}',
        '${OVERBRAINER_ROOT_SSH:-/root/.ssh}',
        `\${OVERBRAINER_REFUSED_DIR:-${REFUSED_RUN_DIR}}`,
        '${OVERBRAINER_SSHD_START:-service ssh restart}',
        '${OVERBRAINER_CUDA_ENV:-/workspace/axolotl/scripts/cuda13_env.sh}',
        '"$BS_ETC/watchdog.sh"',
        '"$BS_ETC/job.env"',
      ]) {
        assert.ok(b.includes(fragment), fragment);
      }
      assert.equal(JOB_ENV_PATH, '/etc/overbrainer/job.env');
      assert.equal(WATCHDOG_PATH, '/etc/overbrainer/watchdog.sh');
      assert.match(b, /^set -eu\numask 077$/m);
    });

    it('hands the host key only to printf (a builtin) and never to a log line', function () {
      // Mentions of its name inside a failure message are text, not its value.
      const lines = codeLinesWith(bootstrapScript(), 'OVERBRAINER_HOST_KEY')
        .map((l) => l.replace(/fail "[^"$]*"/g, 'fail "…"'))
        .filter((l) => l.includes('OVERBRAINER_HOST_KEY'));
      const allowed = [
        /^case \$\{OVERBRAINER_HOST_KEY:-\} in$/,
        /^if ! printf '%s' "\$OVERBRAINER_HOST_KEY" \| base64 -d >"\$bs_key_file" 2>\/dev\/null; then$/,
        /^unset OVERBRAINER_HOST_KEY OVERBRAINER_AUTHORIZED_KEY( RUNPOD_API_KEY)?$/,
      ];
      assert.ok(lines.length >= 4, lines.join('\n'));
      for (const line of lines) {
        assert.ok(
          allowed.some((re) => re.test(line)),
          `host key used in: ${line}`,
        );
      }
      for (const line of codeLinesWith(bootstrapScript(), 'bs_log ')) {
        assert.ok(!line.includes('HOST_KEY"') && !line.includes('$OVERBRAINER_HOST_KEY'), line);
      }
    });
  });

  describe('podCmd', function () {
    const [bash, dashC, script] = podCmd();

    it('is bash -c of the bootstrap, the embedded watchdog and bootstrap_main, under 100 KiB', function () {
      assert.equal(bash, 'bash');
      assert.equal(dashC, '-c');
      assert.ok(script!.startsWith(bootstrapScript()));
      assert.ok(script!.endsWith('\nbootstrap_main\n'));
      assert.ok(Buffer.byteLength(script!) < POD_CMD_MAX_BYTES);
      assert.equal(POD_CMD_MAX_BYTES, 102_400);
      assert.equal(podCmd()[2], script, 'cached');
    });

    for (const [name, argv] of SHELLS) {
      it(`parses under ${name} -n (and ${name} -n does reject a broken script)`, function () {
        const result = parses(argv, script!);
        assert.ok(result.ok, result.stderr);
        assert.equal(parses(argv, 'if then fi\n').ok, false);
      });
    }

    it('writes the watchdog out byte for byte (write_watchdog)', function () {
      const writer = script!.replace(/bootstrap_main\n$/, 'write_watchdog\n');
      const r = spawnSync('bash', ['-c', writer], { env: { PATH: '/usr/bin:/bin' } });
      assert.equal(r.status, 0, String(r.stderr));
      assert.equal(r.stdout.toString('utf8'), watchdogScript());
    });
  });

  describe('podEnv', function () {
    it("builds the create call's env from the run and the timing", function () {
      const p = params();
      assert.deepEqual(podEnv(p), {
        OVERBRAINER_RUN_ID: 'tiny_20260929-120000',
        OVERBRAINER_WORKDIR: '/workspace/overbrainer',
        OVERBRAINER_RUN_DIR: '/workspace/overbrainer/tiny_20260929-120000',
        OVERBRAINER_DEADLINE: '1790000000',
        OVERBRAINER_BOOT_GRACE: '1800',
        OVERBRAINER_RETRIEVE_GRACE: '3600',
        OVERBRAINER_KEEP_POD: '0',
        OVERBRAINER_API_URL: 'https://api.runpod.io/v2',
        OVERBRAINER_AUTHORIZED_KEY: CLIENT_PUB,
        OVERBRAINER_CLAIM: HOST_PUB,
        OVERBRAINER_VERSION: '0.1.0',
        JUPYTER_DISABLE: '1',
        OVERBRAINER_HOST_KEY: p.hostKey,
        OVERBRAINER_INTERVAL: '60',
        OVERBRAINER_PROBE_TRIES: '5',
        OVERBRAINER_PROBE_WAIT: '10',
        OVERBRAINER_LEASE_TTL: '900',
        OVERBRAINER_FAIL_GRACE: '180',
        OVERBRAINER_SNAPSHOT_LEAD: '900',
        OVERBRAINER_SNAPSHOT_WAIT: '900',
      });
    });

    it('omits the deadline of a kept pod, adds the volume dir, takes a secret reference and scaled timing', function () {
      const env = podEnv(
        params({
          keepPod: true,
          deadlineUnixS: null,
          volumeDir: '/workspace/data',
          workdir: '/workspace/data/overbrainer',
          hostKey: '{{ RUNPOD_SECRET_overbrainer_host_key_tiny_20260929-120000 }}',
          apiUrl: 'http://127.0.0.1:4567/v2/',
          timing: scaleTiming(60, { watchdogProbeWaitS: 0 }),
        }),
      );
      assert.equal(env.OVERBRAINER_DEADLINE, undefined);
      assert.equal(env.OVERBRAINER_KEEP_POD, '1');
      assert.equal(env.OVERBRAINER_VOLUME_DIR, '/workspace/data');
      assert.equal(env.OVERBRAINER_RUN_DIR, '/workspace/data/overbrainer/tiny_20260929-120000');
      assert.equal(
        env.OVERBRAINER_HOST_KEY,
        '{{ RUNPOD_SECRET_overbrainer_host_key_tiny_20260929-120000 }}',
      );
      assert.equal(env.OVERBRAINER_API_URL, 'http://127.0.0.1:4567/v2');
      assert.equal(env.OVERBRAINER_INTERVAL, '1');
      assert.equal(env.OVERBRAINER_PROBE_WAIT, '0');
      assert.equal(env.OVERBRAINER_LEASE_TTL, '15');
      assert.equal(env.OVERBRAINER_FAIL_GRACE, '3');
    });

    it('stays within 50 vars and never carries an API key, HF_TOKEN or PUBLIC_KEY', function () {
      for (const env of [
        podEnv(params()),
        podEnv(params({ keepPod: true, deadlineUnixS: null, volumeDir: '/workspace/data' })),
      ]) {
        assert.ok(Object.keys(env).length <= POD_ENV_MAX_VARS);
        for (const name of Object.keys(env)) {
          assert.doesNotMatch(name, /API_KEY|HF_TOKEN|^PUBLIC_KEY$|RUNPOD_/);
        }
        for (const value of Object.values(env)) {
          assert.equal(typeof value, 'string');
          assert.doesNotMatch(value, /[\r\n\0]/);
        }
      }
    });

    const refusals: [string, Partial<PodEnvParams>, RegExp][] = [
      ['a run id with a slash', { runId: '../etc' }, /run id/],
      ['a relative workdir', { workdir: 'workspace' }, /workdir/],
      ['a workdir with ..', { workdir: '/workspace/../etc' }, /workdir/],
      ['credentials in the API URL', { apiUrl: 'https://me:key@api.runpod.io/v2' }, /apiUrl/],
      ['a query in the API URL', { apiUrl: 'https://api.runpod.io/v2?api_key=x' }, /apiUrl/],
      ['a non-http API URL', { apiUrl: 'ftp://api.runpod.io/v2' }, /apiUrl/],
      ['a kept pod with a deadline', { keepPod: true }, /kept pod has no deadline/],
      ['a pod without deadline', { deadlineUnixS: null }, /needs its max_hours deadline/],
      ['a fractional deadline', { deadlineUnixS: 1.5 }, /deadlineUnixS/],
      [
        'a two-line authorized key',
        { authorizedKey: `${CLIENT_PUB}\n${CLIENT_PUB}` },
        /authorizedKey/,
      ],
      ['a host key that is neither base64 nor a secret', { hostKey: 'not base64!' }, /hostKey/],
      [
        'a zero interval',
        { timing: { ...PRODUCTION_TIMING, watchdogIntervalS: 0 } },
        /watchdogIntervalS/,
      ],
    ];
    for (const [what, overrides, message] of refusals) {
      it(`refuses ${what}`, function () {
        assert.throws(
          () => podEnv(params(overrides)),
          (e: unknown) => e instanceof PodScriptError && message.test(e.message),
        );
      });
    }
  });

  describe('parseWatchdogVerdict', function () {
    it('reads the watchdog’s verdict words', function () {
      assert.deepEqual(parseWatchdogVerdict('ready\n'), { kind: 'ready' });
      assert.deepEqual(parseWatchdogVerdict('failed missing_key\n'), {
        kind: 'failed',
        reason: 'missing_key',
      });
      assert.deepEqual(parseWatchdogVerdict('failed http_401\n'), {
        kind: 'failed',
        reason: 'http_401',
      });
      assert.deepEqual(parseWatchdogVerdict('failed bootstrap: run dir claimed by another pod\n'), {
        kind: 'bootstrap_failed',
        reason: 'run dir claimed by another pod',
      });
    });

    it('keeps printable ASCII of the first line, at most 200 characters; anything else is no verdict', function () {
      const parsed = parseWatchdogVerdict(
        `failed bootstrap: a\x1b[31m\u00e9${'x'.repeat(300)}\nready`,
      );
      assert.equal(parsed?.kind, 'bootstrap_failed');
      assert.equal(
        ('reason' in parsed! && parsed.reason.length) || 0,
        200 - 'failed bootstrap: '.length,
      );
      assert.equal(parseWatchdogVerdict(''), null);
      assert.equal(parseWatchdogVerdict('\nready\n'), null);
      assert.equal(parseWatchdogVerdict('readyish'), null);
    });
  });
});
