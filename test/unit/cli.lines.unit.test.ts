/**
 * Whole command lines run in-process (runCli with an injected io) that never reach Runpod: help,
 * config errors with their places, bad settings, runs ls, what a lost connection and an EXITED pod
 * are called, pod rm of a bad ID. The API key is never printed.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { runCli, timingFrom, type CliIo } from '../../src/cli/main';
import { newPodRecord } from '../../src/core/runs/podRecord';
import { RunStore } from '../../src/core/runs/store';
import { PRODUCTION_TIMING } from '../../src/core/timing';
import { FakeClock } from '../helpers/fakeClock';

const HOST_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOv1kJg2b3q4c5d6e7f8g9h0i1j2k3l4m5n6o7p8q9r0';

describe('cli: whole command lines that never reach Runpod', () => {
  let tmp: string;

  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-unit-'));
  });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  async function run(
    argv: string[],
    env: Record<string, string> = {},
  ): Promise<{ code: number; stdout: string[]; stderr: string[]; interrupts: number }> {
    const stdout: string[] = [];
    const stderr: string[] = [];
    let interrupts = 0;
    const io: CliIo = {
      stdout: (line) => stdout.push(line),
      stderr: (line) => stderr.push(line),
      env: { OVERBRAINER_RUNPOD__API_KEY: 'rpa_NEVERPRINTED0123456789', ...env },
      cwd: tmp,
      onInterrupt: () => {
        interrupts++;
        return () => undefined;
      },
    };
    const code = await runCli(argv, io);
    for (const line of [...stdout, ...stderr]) {
      assert.ok(!line.includes('rpa_NEVERPRINTED'), `the API key was printed: ${line}`);
    }
    return { code, stdout, stderr, interrupts };
  }

  it('--help prints the usage on stdout and exits 0; no command is a usage error (exit 2)', async () => {
    const help = await run(['--help']);
    assert.equal(help.code, 0);
    assert.equal(help.stdout[0], 'usage: overbrainer [-C DIR] <command> [options]');
    assert.ok(help.stdout.some((l) => l.includes('pod rm RUN_ID [--force]')));
    assert.ok(!help.stdout.join('\n').includes('TIMING_SCALE'), 'the test hook is not advertised');
    const none = await run([]);
    assert.equal(none.code, 2);
    assert.equal(none.stderr[0], 'overbrainer: no command given');
    assert.deepEqual(none.stdout, []);
  });

  it('a missing or invalid overbrainer.toml stops train with exit 2, placed at file:line:col', async () => {
    const missing = await run(['train']);
    assert.equal(missing.code, 2);
    assert.match(
      missing.stderr.join('\n'),
      new RegExp(
        `^${path.join(tmp, 'overbrainer.toml').replace(/[.]/g, '\\.')}:1:1: there is no overbrainer\\.toml in .+\\. Run`,
      ),
    );
    fs.writeFileSync(
      path.join(tmp, 'overbrainer.toml'),
      '[training]\ntarget = "pod"\ntrainer = "command"\ncommand = "true"\n\n[targets.pod]\nkind = "runpod"\ngpu_type = "NVIDIA A40"\nmax_hours = 1\ngpu_types = ["NVIDIA A40"]\n',
    );
    const invalid = await run(['train']);
    assert.equal(invalid.code, 2);
    assert.match(invalid.stderr.join('\n'), /overbrainer\.toml:8:1: .*gpu_type.*\. /);
    assert.equal(fs.existsSync(path.join(tmp, 'runs')), false);
    fs.writeFileSync(
      path.join(tmp, 'overbrainer.toml'),
      Buffer.concat([Buffer.from('[training]\n# na'), Buffer.from([0xef, 0x76, 0x65, 0x0a])]),
    );
    const latin1 = await run(['train']);
    assert.equal(latin1.code, 2);
    assert.match(
      latin1.stderr.join('\n'),
      /overbrainer\.toml:2:5: overbrainer\.toml is not UTF-8: byte 0xEF/,
    );
    assert.equal(fs.existsSync(path.join(tmp, 'runs')), false);
  });

  it('refuses a bad API setting or test hook with exit 2', async () => {
    const noKey = await run(['pod', 'ls'], { OVERBRAINER_RUNPOD__API_KEY: '' });
    assert.equal(noKey.code, 2);
    assert.match(noKey.stderr[0] ?? '', /^OVERBRAINER_RUNPOD__API_KEY: no Runpod API key is set\./);
    const plain = await run(['pod', 'ls'], {
      OVERBRAINER_RUNPOD__BASE_URL: 'http://api.example.com/v2',
    });
    assert.equal(plain.code, 2);
    assert.match(
      plain.stderr[0] ?? '',
      /^OVERBRAINER_RUNPOD__BASE_URL uses plain http.*unencrypted/,
    );
    const hook = await run(['runs', 'ls'], { OVERBRAINER_TIMING_SCALE: '0.5' });
    assert.equal(hook.code, 2);
    assert.match(hook.stderr[0] ?? '', /^OVERBRAINER_TIMING_SCALE: must be a number of at least 1/);
    assert.deepEqual(timingFrom({}), { ...PRODUCTION_TIMING });
    assert.equal(timingFrom({ OVERBRAINER_TIMING_SCALE: '10' }).podPollMs, 500);
    // The read-only commands' limit bounds the API's real answer time: never scaled.
    assert.equal(
      timingFrom({ OVERBRAINER_TIMING_SCALE: '10' }).readOnlyLimitMs,
      PRODUCTION_TIMING.readOnlyLimitMs,
    );
  });

  it('runs ls lists the runs of -C DIR from their records, newest first', async () => {
    const store = new RunStore(
      path.join(tmp, 'ws', 'runs'),
      new FakeClock(Date.UTC(2026, 8, 29, 12)),
    );
    const first = store.create({ project: 'tiny', target: 'pod', remoteDir: (id) => `/w/${id}` });
    const pod = newPodRecord(first.id, true, 1, HOST_KEY);
    pod.beginAttempt('NVIDIA A40', Date.UTC(2026, 8, 29, 12), 6);
    pod.created({ id: 'k3x9abc', costPerHourUsd: 0.53 }, 'created', Date.UTC(2026, 8, 29, 12));
    pod.state = 'kept';
    store.savePod(pod);
    first.state = 'succeeded';
    store.saveRun(first);
    const second = store.create({ project: 'tiny', target: 'here', remoteDir: (id) => `/w/${id}` });
    second.state = 'failed';
    second.message = 'exited with code 2 (see runs/x/job.log)';
    store.saveRun(second);
    fs.mkdirSync(path.join(tmp, 'ws', 'runs', 'tiny_damaged'));
    fs.writeFileSync(path.join(tmp, 'ws', 'runs', 'tiny_damaged', 'run.json'), '{"id":');
    const listed = await run(['-C', 'ws', 'runs', 'ls']);
    assert.equal(listed.code, 0);
    assert.deepEqual(listed.stdout, [
      'RUN                     STATE      TARGET  CREATED               SUMMARY',
      `${second.id}  failed     here    2026-09-29T12:00:00Z  exited with code 2 (see runs/x/job.log)`,
      `${first.id}    succeeded  pod     2026-09-29T12:00:00Z  pod kept k3x9abc`,
    ]);
    assert.equal(listed.stderr.length, 1);
    assert.match(listed.stderr[0] ?? '', /^warning: skipping run tiny_damaged: /);
    const empty = await run(['runs', 'ls']);
    assert.deepEqual(empty.stdout, [`runs: no run in ${path.join(tmp, 'runs')}`]);
  });

  /** A run in tmp/runs whose job runs (pid 4242) on pod k3x9abc, both created now. */
  function runningOnPod() {
    const nowMs = Date.now();
    const store = new RunStore(path.join(tmp, 'runs'), new FakeClock(nowMs));
    const record = store.create({ project: 'tiny', target: 'pod', remoteDir: (id) => `/w/${id}` });
    const pod = newPodRecord(record.id, false, 1, HOST_KEY);
    pod.beginAttempt('NVIDIA A40', nowMs, 6);
    pod.created({ id: 'k3x9abc', costPerHourUsd: 0.53 }, 'created', nowMs);
    pod.state = 'running';
    store.savePod(pod);
    record.state = 'running';
    record.job = { dir: record.remoteDir, pid: 4242, container: null };
    store.saveRun(record);
    return { store, record, pod };
  }

  it('a connection lost while following is no failed run: the CLI says the run goes on, how to attach and what the watchdog does, as VS Code does', async () => {
    const { store, record, pod } = runningOnPod();
    // The API cannot be reached (nothing listens on port 9): attach cannot follow the run.
    const lost = await run(['train', 'attach', record.id], {
      OVERBRAINER_RUNPOD__BASE_URL: 'http://127.0.0.1:9/v2',
      OVERBRAINER_TIMING_SCALE: '600',
    });
    assert.equal(lost.code, 1);
    const said = lost.stderr.join('\n');
    assert.doesNotMatch(said, /^error:/m, said);
    assert.match(
      said,
      new RegExp(
        `^lost: Lost the connection to run ${record.id} \\(could not reach the Runpod API at http://127\\.0\\.0\\.1:9/v2`,
        'm',
      ),
    );
    assert.ok(
      said.includes(
        `The run goes on on its pod: follow it again with \`overbrainer train attach ${record.id}\`; if nobody follows, the pod's watchdog deletes it at its deadline, ${String(pod.deadline)}`,
      ),
      said,
    );
    assert.equal(store.loadRun(record.id).state, 'running', 'the run was not failed');
    // Kept: nothing deletes it.
    pod.keep = true;
    store.savePod(pod);
    const kept = await run(['train', 'attach', record.id], {
      OVERBRAINER_RUNPOD__BASE_URL: 'http://127.0.0.1:9/v2',
      OVERBRAINER_TIMING_SCALE: '600',
    });
    assert.match(
      kept.stderr.join('\n'),
      /its pod is kept: nothing deletes it until you remove it\.$/m,
    );
  });

  it('a pod Runpod shows EXITED under a followed run is named so by every line, the final one too: no "pod running", no "lost"', async () => {
    const doc = JSON.parse(
      fs.readFileSync(path.join(__dirname, '..', 'emulator', 'openapi-v2.json'), 'utf8'),
    ) as {
      paths: Record<string, { get: { responses: Record<string, { content: unknown }> } }>;
    };
    const example = (
      doc.paths['/v2/pods/{id}']!.get.responses['200']!.content as {
        'application/json': { examples: { pod: { value: Record<string, unknown> } } };
      }
    )['application/json'].examples.pod.value;
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          ...example,
          id: 'k3x9abc',
          status: 'EXITED',
          publicIp: null,
          portMappings: null,
        }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    try {
      const port = (server.address() as { port: number }).port;
      const { record } = runningOnPod();
      const stopped = await run(['train', 'attach', record.id], {
        OVERBRAINER_RUNPOD__BASE_URL: `http://127.0.0.1:${port}/v2`,
        OVERBRAINER_TIMING_SCALE: '600',
      });
      assert.equal(stopped.code, 1);
      const said = [...stopped.stderr, ...stopped.stdout].join('\n');
      assert.match(said, /pod k3x9abc of run \S+ is EXITED/, said);
      assert.doesNotMatch(said, /^lost:/m, said);
      assert.doesNotMatch(said, /pod running/, said);
      assert.match(stopped.stdout.at(-1) ?? '', /pod k3x9abc EXITED in Runpod/, said);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('pod rm of an ID that would leave runs/ fails without a call (exit 1)', async () => {
    const bad = await run(['pod', 'rm', '../../etc'], {
      OVERBRAINER_RUNPOD__BASE_URL: 'http://127.0.0.1:9/v2',
    });
    assert.equal(bad.code, 1);
    assert.match(
      bad.stderr.join('\n'),
      /^error: "\.\.\/\.\.\/etc" is not a valid run ID\nhint: Run IDs hold only/,
    );
    assert.equal(bad.interrupts, 1, 'pod rm shields its deletes from Ctrl-C');
  });
});
