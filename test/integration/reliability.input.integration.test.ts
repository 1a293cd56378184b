/**
 * Hostile or broken input (issue #7). The CLI as a user runs it, against the Runpod emulator:
 * a hand-edited or damaged run.json, pod.json or overbrainer.toml, run IDs that try to leave
 * runs/, a base URL in plain http off loopback. And the core in process against a real emulated
 * pod whose job is hostile: metric lines that are huge, cut short, not UTF-8, NaN or negative;
 * results holding symlinks out of the run, odd names, a FIFO; a result file that keeps changing
 * while it is downloaded. Each case: a clear error or warning naming the next action, the records
 * left as they were, nothing written outside the run's directory, nothing lost.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { attach, train } from '../../src/core/flow';
import { RunStore } from '../../src/core/runs/store';
import { systemClock } from '../../src/core/clock';
import { isRunsError } from '../../src/core/runs/runsError';
import { startEmulator, type Emulator } from '../emulator/emulator';
import { runCliProcess, type Ran } from '../helpers/cli';
import { Lab, tomlFor } from '../helpers/lifecycle';
import { recordFault, recordLedger, recordResult } from '../helpers/reliability';
import { emulatorEnv, tempTinyWorkspace } from '../helpers/tinyWorkspace';

/** Every path under `dir` with its bytes (directories and links included), for before/after. */
function tree(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (rel: string): void => {
    for (const entry of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const child = rel === '' ? entry.name : `${rel}/${entry.name}`;
      const full = path.join(dir, child);
      if (entry.isDirectory()) {
        out.set(`${child}/`, '');
        walk(child);
      } else if (entry.isSymbolicLink()) out.set(child, `-> ${fs.readlinkSync(full)}`);
      else out.set(child, fs.readFileSync(full).toString('base64'));
    }
  };
  if (fs.existsSync(dir)) walk('');
  return out;
}

describe('reliability: hostile or broken input (CLI)', function () {
  // Each CLI start takes a second or more on a loaded machine, and the cases start it many times.
  this.timeout(400_000);
  let emulator: Emulator;
  let tmp: string;
  let ws: string;

  before(async () => {
    emulator = await startEmulator({ bootDelaysMs: { provisioning: 100, starting: 100 } });
  });
  after(async () => {
    await emulator?.close();
    if (emulator) assert.deepEqual(emulator.contractViolations(), []);
  });
  beforeEach(() => {
    ({ tmp, ws } = tempTinyWorkspace('input-it-', tomlFor({})));
  });
  afterEach(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  const cli = (args: string[], env: Record<string, string> = {}): Promise<Ran> =>
    runCliProcess(['-C', ws, ...args], { env: { ...emulatorEnv(emulator), ...env } });

  /** A run as the CLI leaves one that ended: run.json, pod.json of a deleted pod, its output. */
  function seedRun(id: string): string {
    const dir = path.join(ws, 'runs', id);
    fs.mkdirSync(path.join(dir, 'output'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'output', 'model.json'), '{"kind":"linear_regression"}\n');
    fs.writeFileSync(path.join(dir, 'metrics.jsonl'), '{"event":"log","step":1,"time":1}\n');
    return dir;
  }

  // Every command that names a run (each CLI start costs seconds on a loaded machine: the cases
  // below spread them over their inputs rather than running every pair).
  const COMMANDS = (id: string): string[][] => [
    ['train', 'attach', id],
    ['train', 'cancel', id],
    ['train', 'keep', id],
    ['train', 'release', id],
    ['pod', 'rm', id, '--force'],
  ];

  it('a damaged run.json: every command names the file, line and column and leaves the run as it was', async function () {
    const id = 'tiny_20260101-000000';
    const dir = seedRun(id);
    // Hand-edited: a word that is not JSON on line 4, and a secret-looking value on line 3.
    fs.writeFileSync(
      path.join(dir, 'run.json'),
      '{\n  "id": "tiny_20260101-000000",\n  "note": "rpa_NOT_TO_BE_QUOTED",\n  "state": runing\n}\n',
    );
    recordFault(this, 'input.run_json_damaged');
    const before = tree(tmp);
    const commands = COMMANDS(id);
    for (const args of [commands[0]!, commands[1]!, commands[4]!]) {
      const ran = await cli(args);
      if (args[0] === 'pod') {
        // Forced, a damaged record never blocks removal: the run's pods are looked up by marker.
        assert.equal(ran.code, 0, `${args.join(' ')}: ${ran.stderr}`);
        assert.equal(ran.stdout.trim(), `pod: no pod for run ${id}`);
      } else {
        assert.notEqual(ran.code, 0, args.join(' '));
      }
      assert.ok(
        ran.stderr.includes(
          `${path.join(dir, 'run.json')} is not a valid run record (line 4, column 12): it is not valid JSON`,
        ),
        `${args.join(' ')}: ${ran.stderr}`,
      );
      if (args[0] !== 'pod') assert.match(ran.stderr, /hint: Repair or restore the file/);
      assert.doesNotMatch(ran.stderr, /rpa_NOT_TO_BE_QUOTED|runing/, 'the content is never quoted');
    }
    const ls = await cli(['runs', 'ls']);
    assert.equal(ls.code, 0, ls.stderr);
    assert.match(ls.stderr, /warning: skipping run tiny_20260101-000000: .*\(line 4, column 12\)/);
    assert.deepEqual(tree(tmp), before, 'nothing was written, the run is as it was');
    assert.equal(emulator.ledger().totals.podsCreated, 0);
  });

  it('a damaged or hand-edited pod.json: the place, a hint to look for the pod, the records unchanged', async function () {
    const id = 'tiny_20260101-000001';
    const dir = seedRun(id);
    fs.writeFileSync(
      path.join(dir, 'run.json'),
      `${JSON.stringify(
        {
          id,
          target: 'pod',
          project: 'tiny',
          state: 'running',
          message: null,
          created: '2026-01-01T00:00:00Z',
          remote_dir: `/workspace/overbrainer/${id}`,
          job: { dir: `/workspace/overbrainer/${id}`, pid: 4242, container: null },
        },
        null,
        2,
      )}\n`,
    );
    // Cut short (an editor killed mid-save), then hand-edited to a state that does not exist.
    const damaged: [string, RegExp][] = [
      [
        '{\n  "version": 1,\n  "pod_id": "abc',
        /\(line 3, column 17\): it is not valid JSON \(it ends early\)/,
      ],
      ['{\n  "version": 1,\n  "state": "zombie"\n}\n', /\(line \d+, column \d+\): /],
    ];
    for (const [k, [text, place]] of damaged.entries()) {
      fs.writeFileSync(path.join(dir, 'pod.json'), text);
      recordFault(this, 'input.pod_json_damaged');
      const before = tree(tmp);
      const commands = COMMANDS(id);
      const some = k === 0 ? [0, 2, 4] : [1, 3];
      for (const args of [...some.map((n) => commands[n]!), ['pod', 'ls']]) {
        const ran = await cli(args);
        const said = `${args.join(' ')}: ${ran.stderr}`;
        if (args[1] === 'ls') {
          // The listing goes on, and says which record it could not read.
          assert.match(ran.stderr, new RegExp(`${id}.*pod.json.*line`), said);
          continue;
        }
        assert.ok(ran.stderr.includes(path.join(dir, 'pod.json')), said);
        assert.match(ran.stderr, place, said);
        if (args[0] === 'pod') {
          // Forced, a damaged record never blocks removal: the run's pods are looked up by marker.
          assert.equal(ran.code, 0, said);
          assert.equal(ran.stdout.trim(), `pod: no pod for run ${id}`, said);
          assert.match(ran.stderr, /by their marker/, said);
          continue;
        }
        assert.notEqual(ran.code, 0, said);
        assert.match(ran.stderr, /pod ls|Runpod console/, said);
      }
      assert.deepEqual(tree(tmp), before, 'nothing was written, the run is as it was');
    }
    assert.equal(emulator.ledger().totals.podsCreated, 0, 'no command created a pod');
  });

  it('a broken overbrainer.toml: train says where, creates no run and no pod', async function () {
    const cases: [string, RegExp][] = [
      [tomlFor({}).replace('max_hours = 1', 'max_hours = "lots"'), /overbrainer\.toml:13:13: /],
      [tomlFor({}).replace('[targets.pod]', '[targets.pod'), /overbrainer\.toml:10:\d+: /],
      [`${tomlFor({})}\u0000\n`, /overbrainer\.toml:\d+:\d+: /],
      [Buffer.from([0xff, 0xfe, 0x5b]).toString('latin1'), /overbrainer\.toml/],
    ];
    for (const [text, where] of cases) {
      fs.writeFileSync(path.join(ws, 'overbrainer.toml'), text, 'latin1');
      recordFault(this, 'input.toml_broken');
      const before = tree(tmp);
      const ran = await cli(['train']);
      assert.equal(ran.code, 2, ran.stderr);
      assert.match(ran.stderr, where);
      assert.deepEqual(tree(tmp), before, 'train wrote nothing');
    }
    assert.equal(emulator.ledger().totals.podsCreated, 0);
  });

  it('run IDs that try to leave runs/ are refused by every command, nothing created anywhere', async function () {
    fs.mkdirSync(path.join(ws, 'runs'));
    const before = tree(tmp);
    const ids = [
      '../x',
      '..',
      '.',
      `../../${path.basename(tmp)}/escaped`,
      '/etc',
      path.join(tmp, 'abs'),
      'a/b',
      'a\\b',
      '~',
      'x'.repeat(65),
      'y'.repeat(10_000),
      'tiny_2026\u2215x', // a division slash that looks like "/"
      '-rf',
      ' ',
    ];
    // Through the CLI for a few (each start costs seconds), all of them in process below.
    const viaCli = [ids[0]!, ids[4]!, ids[5]!, ids[10]!, ids[11]!];
    for (const [n, id] of viaCli.entries()) {
      recordFault(this, 'input.run_id_escape');
      const commands = COMMANDS(id);
      const args = commands[n % commands.length]!;
      const ran = await cli(args);
      const said = `${args.join(' ')}: ${ran.stderr}`;
      assert.notEqual(ran.code, 0, said);
      assert.match(ran.stderr, /is not a valid run ID|usage|unknown option/i, said);
      assert.ok(ran.stderr.length < 2_000, 'a very long ID is not echoed whole');
    }
    assert.deepEqual(tree(tmp), before, 'nothing was created anywhere');
    // In process too (NUL cannot be an argument): the store refuses before touching the disk.
    const store = new RunStore(path.join(ws, 'runs'), systemClock);
    for (const id of [...ids, 'a\u0000b', 'tiny\u0000/../../x', '']) {
      for (const call of [
        () => store.loadRun(id),
        () => store.loadPod(id),
        () => store.runDir(id),
        () => store.sshDir(id),
      ]) {
        assert.throws(
          call,
          (error: unknown) => isRunsError(error, 'invalid_id'),
          JSON.stringify(id),
        );
      }
    }
    assert.deepEqual(tree(tmp), before);
  });

  it('a base URL in plain http off loopback is refused before anything is sent', async function () {
    // A listener on this machine's non-loopback address: it must never see a connection.
    const external = Object.values(os.networkInterfaces())
      .flat()
      .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
    const connections: string[] = [];
    const server = net.createServer((socket) => {
      connections.push(String(socket.remoteAddress));
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
    const port = (server.address() as net.AddressInfo).port;
    try {
      const urls = [
        `http://${external ?? '10.0.0.1'}:${port}/v2`,
        `http://api.runpod.io:${port}/v2`,
        `http://127.0.0.1.nip.io:${port}/v2`,
      ];
      const commands = [['train'], ['pod', 'ls'], ['pod', 'gpus']];
      for (const [n, url] of urls.entries()) {
        recordFault(this, 'input.base_url_plain_http');
        {
          const args = commands[n % commands.length]!;
          const ran = await cli(args, { OVERBRAINER_RUNPOD__BASE_URL: url });
          const said = `${args.join(' ')} with ${url}: ${ran.stderr}`;
          assert.equal(ran.code, 2, said);
          assert.match(
            ran.stderr,
            /^OVERBRAINER_RUNPOD__BASE_URL uses plain http to a host that is not this machine, which would send the API key unencrypted\. Unset OVERBRAINER_RUNPOD__BASE_URL .*give an https:\/\/ URL/m,
            said,
          );
          assert.ok(!ran.stderr.includes(emulator.apiKey));
        }
      }
      assert.ok(!fs.existsSync(path.join(ws, 'runs')), 'no run was created');
      // Loopback http stays allowed (the emulator): the same command works there.
      const ok = await cli(['pod', 'ls']);
      assert.equal(ok.code, 0, ok.stderr);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    assert.deepEqual(connections, [], 'a request went out over plain http');
  });
});

/**
 * A hostile job (shell): metric lines of every broken kind between good ones, and results that
 * try to reach out of the run (symlinks to / and to a file outside, a FIFO) or hold odd names.
 */
const HOSTILE_JOB = String.raw`set -e
m="$OVERBRAINER_METRICS"
good() { printf '{"event":"log","step":%s,"loss":%s,"time":%s}\n' "$1" "$2" "$(date +%s)" >>"$m"; }
good 1 0.9
head -c 3145728 /dev/zero | tr '\0' 'a' >>"$m"; printf '\n' >>"$m"
good 2 0.8
printf '{"event":"log","step":3,"loss":0.7,"ti\n' >>"$m"
printf '\377\376{"event":"log","step":4}\n' >>"$m"
printf '{"event":"log","step":5,"loss":NaN,"time":1}\n' >>"$m"
printf '{"event":"log","step":6,"loss":-1.5,"learning_rate":-3,"time":1}\n' >>"$m"
printf '{"event":"log","step":-7,"loss":0.5,"time":1}\n' >>"$m"
good 8 0.5
mkdir -p output/sub
echo model >output/model.txt
ln -s / output/root
ln -s /etc/passwd output/passwd
ln -s ../../../../../../../../tmp output/sub/up
mkfifo output/fifo
printf x >"output/-rf"
printf y >"output/with space"
printf w >"output/$(printf 'n%.0s' $(seq 1 200))"
good 9 0.4
printf '{"event":"log","step":10,"loss":0.3,"time":1}' >>"$m"
`;

describe('reliability: hostile or broken input (a hostile job on a real emulated pod)', function () {
  this.timeout(150_000);

  it('broken metric lines are skipped with a warning each kind; hostile results stay inside the run; nothing lost', async function () {
    // The command runs in the run dir on the pod, where the upload puts data/.
    const lab = await Lab.start({ command: 'sh data/hostile.sh' });
    try {
      fs.writeFileSync(path.join(lab.workspace, 'data', 'hostile.sh'), HOSTILE_JOB);
      const outside = tree(lab.tmp);
      let id: string | null = null;
      recordFault(this, 'input.metrics_hostile', 6);
      recordFault(this, 'input.results_hostile', 5);
      const result = await lab.track(
        train(lab.deps, lab.config, lab.workspace, { onRun: (run) => (id = run.id) }),
      );
      assert.equal(result.run.state, 'succeeded', lab.transcript());
      assert.ok(id !== null);
      const steps = lab.events
        .map((e) => e.event)
        .filter((e) => e.type === 'metric' && e.runId === id)
        .map((e) => (e.type === 'metric' ? [e.metric.step, e.metric.loss ?? null] : []));
      // Good lines, in order; NaN and a negative rate nulled, a negative loss kept; a negative
      // step skipped; the unterminated last line read once the job ended.
      assert.deepEqual(steps, [
        [1, 0.9],
        [2, 0.8],
        [5, null],
        [6, -1.5],
        [8, 0.5],
        [9, 0.4],
        [10, 0.3],
      ]);
      // Skipped lines are logged as warnings (level warn), once per kind.
      const warned = lab.logs().filter((l) => l.startsWith('warn: ') && l.includes('skipped'));
      for (const why of [
        /skipped a line (of \d+ bytes|longer than \d+ bytes)/,
        /not valid JSON/,
        /not UTF-8/,
        /step is missing, negative/,
      ]) {
        assert.equal(
          warned.filter((w) => why.test(w)).length,
          1,
          `${String(why)}: ${warned.join('\n')}`,
        );
      }
      // Results: regular files only, odd names kept inside output/, no link, no FIFO (names
      // Windows reads differently refuse the whole list: reliability.results.integration).
      const runDir = lab.runDir(id);
      const got = tree(path.join(runDir, 'output'));
      assert.deepEqual(
        [...got.keys()].sort(),
        // sub/ held only a link: no folder for it.
        ['-rf', 'model.txt', 'with space', 'n'.repeat(200)].sort(),
      );
      for (const name of got.keys()) {
        const stat = fs.lstatSync(path.join(runDir, 'output', name));
        assert.ok(stat.isFile() || stat.isDirectory(), `${name} is a plain file or folder`);
      }
      // Nothing outside runs/<id> changed.
      const after = tree(lab.tmp);
      for (const [rel, data] of after) {
        if (rel.startsWith(`ws/runs/${id}/`) || rel === 'ws/runs/' || rel === `ws/runs/${id}/`)
          continue;
        assert.equal(outside.get(rel), data, `${rel} was written outside the run directory`);
      }
      assert.equal(lab.billing().length, 0, 'the pod was deleted once the results were verified');
      recordLedger(this, lab.emulator.ledger());
      recordResult(this, { verified: 1, lost: 0 });
    } finally {
      await lab.close();
    }
  });

  it('a result that keeps changing during the download is never taken: the pod waits, attach retrieves it once it settles', async function () {
    const lab = await Lab.start({ command: 'sh data/changing.sh', retrieveGraceMinutes: 10 });
    try {
      // The job leaves a writer behind that appends to output/live.bin without pause (starting it
      // over every 4 MiB) until data/stop exists on the pod: the file never sits still. Without
      // pause, because a writer that paused between whole-file rewrites let the pod's hash and the
      // download read the same bytes at nearly the same instant about half the time (the torn file
      // was taken); retrieval must notice that the file changed while it ran, whatever it read.
      fs.writeFileSync(
        path.join(lab.workspace, 'data', 'changing.sh'),
        String.raw`mkdir -p output
printf '{"event":"log","step":1,"loss":1,"time":%s}\n' "$(date +%s)" >>"$OVERBRAINER_METRICS"
echo stable >output/stable.txt
setsid sh -c 'n=0; while [ ! -e data/stop ]; do n=$((n+1)); head -c 4096 /dev/urandom >>output/live.bin; if [ $((n % 1024)) -eq 0 ]; then : >output/live.bin; fi; done; echo "final $n" >output/live.bin' </dev/null >/dev/null 2>&1 &
sleep 0.5
`,
      );
      let id: string | null = null;
      recordFault(this, 'input.result_changes_during_download');
      const result = await lab.track(
        train(lab.deps, lab.config, lab.workspace, { onRun: (run) => (id = run.id) }),
      );
      assert.ok(id !== null);
      const runDir = lab.runDir(id);
      assert.equal(result.ending, 'awaiting_retrieval', lab.transcript());
      const warning = lab.warnings().find((w) => w.code === 'awaiting_retrieval');
      assert.ok(warning, lab.transcript());
      assert.match(warning.message, /overbrainer train attach|overbrainer pod rm/);
      assert.match(
        String(result.run.message),
        /still being written on the pod while they were retrieved \(output\/live\.bin\): none was taken/,
      );
      assert.equal(
        fs.existsSync(path.join(runDir, 'output', 'live.bin')),
        false,
        'no unverified copy',
      );
      const podId = String(lab.podJson(id).pod_id);
      assert.equal(lab.ledgerOf(podId).billing, true, 'the pod keeps the only copy');
      // The writer stops; attach retrieves and verifies everything, then deletes the pod.
      fs.writeFileSync(lab.podFile(podId, id, 'data/stop'), '');
      await lab.waitFor('the writer to stop', () =>
        fs.readFileSync(lab.podFile(podId, id!, 'output/live.bin'), 'latin1').startsWith('final'),
      );
      const attached = await lab.track(attach(lab.deps, lab.config, id));
      assert.equal(attached.run.state, 'succeeded', lab.transcript());
      assert.match(fs.readFileSync(path.join(runDir, 'output', 'live.bin'), 'utf8'), /^final \d+/);
      assert.equal(fs.readFileSync(path.join(runDir, 'output', 'stable.txt'), 'utf8'), 'stable\n');
      assert.equal(lab.ledgerOf(podId).billing, false);
      recordLedger(this, lab.emulator.ledger());
      recordResult(this, { verified: 1, lost: 0 });
    } finally {
      await lab.close();
    }
  });
});
