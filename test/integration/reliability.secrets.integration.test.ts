/**
 * Secrets (issue #7): real runs — the CLI as a user runs it, and the core in this process as the
 * extension runs it — against the Runpod emulator through a recording proxy, while every
 * process's command line (/proc/<pid>/cmdline of the CLI, ssh, the pod's sshd, bootstrap,
 * watchdog and job) is sampled. The account API key, the run's client private key and any
 * private key appear in no process argument, no output or log (the CLI's, the pod's), no file
 * under runs/ (but runs/<id>/ssh/id_ed25519 while its pod lives, forgotten once no pod of the
 * run may exist) or in the emulator's state (the pods' disks), no event on the bus, and the
 * client's private key in no request the client sends to Runpod.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { train } from '../../src/core/flow';
import { startEmulator, type Emulator } from '../emulator/emulator';
import { startCli } from '../helpers/cli';
import { filesUnder, Lab, tomlFor } from '../helpers/lifecycle';
import { recordLedger, recordResult } from '../helpers/reliability';
import { emulatorEnv, writeTinyWorkspace } from '../helpers/tinyWorkspace';

const ARMOR = '-----BEGIN OPENSSH PRIVATE KEY-----';
const ARMOR_END = '-----END OPENSSH PRIVATE KEY-----';

/** Recorded request bodies of a loopback proxy in front of the emulator. */
interface Proxy {
  baseUrl: string;
  bodies: { method: string; url: string; body: string }[];
  close(): Promise<void>;
}

async function recordingProxy(target: Emulator): Promise<Proxy> {
  const bodies: Proxy['bodies'] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      bodies.push({ method: req.method ?? '', url: req.url ?? '', body: body.toString('latin1') });
      const forward = http.request(
        {
          host: '127.0.0.1',
          port: target.port,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, host: `127.0.0.1:${target.port}` },
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      forward.on('error', () => res.destroy());
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}/v2`,
    bodies,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Every process's command line now (pid: argv joined by spaces). */
function cmdlines(): Map<number, string> {
  const out = new Map<number, string>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const raw = fs.readFileSync(`/proc/${entry}/cmdline`);
      if (raw.length > 0) out.set(Number(entry), raw.toString('latin1').replace(/\0/g, ' '));
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

/**
 * The private key in `file` once it is whole, else null: the core creates the file (empty) a
 * moment before it writes the key.
 */
function wholeKey(file: string): string | null {
  if (!fs.existsSync(file)) return null;
  const text = fs.readFileSync(file, 'utf8');
  return text.includes(ARMOR_END) ? text : null;
}

/**
 * The needles that give a private key away: each base64 line of its body but the first (a line
 * of 70 characters of key material is never anything else), and a piece of the key's whole
 * armored text in base64, the form an account secret takes.
 */
function keyNeedles(armored: string): string[] {
  assert.ok(armored.includes(ARMOR_END), `not a whole private key: ${armored.length} bytes`);
  const lines = armored
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length >= 40 && !l.startsWith('-----'));
  const b64 = Buffer.from(armored).toString('base64');
  // The first line is the same in every ed25519 key (openssh-key-v1, none, none, ssh-ed25519…),
  // as is the start of the armored text's base64: only what follows is this key's own.
  return [...lines.slice(1), b64.slice(200, 280)];
}

/** Samples every process's command line until stopped; collects the ones holding a needle. */
class CmdlineSampler {
  samples = 0;
  processesSeen = new Set<string>();
  readonly hits: string[] = [];
  private timer: NodeJS.Timeout;
  constructor(private readonly needles: () => string[]) {
    this.timer = setInterval(() => this.sample(), 50);
  }
  sample(): void {
    this.samples++;
    const needles = [ARMOR, ...this.needles()];
    for (const [pid, line] of cmdlines()) {
      this.processesSeen.add(line.split(' ')[0] ?? '');
      for (const needle of needles) {
        if (line.includes(needle)) this.hits.push(`pid ${pid}: ${line.slice(0, 60)}…`);
      }
    }
  }
  stop(): void {
    clearInterval(this.timer);
    this.sample();
  }
}

/** Where the needles occur among `files` (relative path → content), except the paths allowed. */
function leaksIn(
  files: Map<string, Buffer>,
  needles: string[],
  allowed: (rel: string) => boolean = () => false,
): string[] {
  const found: string[] = [];
  for (const [rel, data] of files) {
    if (allowed(rel)) continue;
    const text = data.toString('latin1');
    for (const needle of needles) if (text.includes(needle)) found.push(rel);
  }
  return [...new Set(found)];
}

describe('reliability: secrets', function () {
  this.timeout(300_000); // a shared machine: one run each, about a minute when it is quiet

  it('the CLI: no key in any process argument, output, log, runs/ file, pod disk or request body', async function () {
    const emulator = await startEmulator({ bootDelaysMs: { provisioning: 100, starting: 100 } });
    const proxy = await recordingProxy(emulator);
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'secrets-it-'));
    let clientKey: string | null = null;
    let clientKeySeenWhileLive = false;
    const sampler = new CmdlineSampler(() => [
      emulator.apiKey,
      ...(clientKey === null ? [] : keyNeedles(clientKey)),
    ]);
    try {
      const ws = path.join(tmp, 'ws');
      fs.mkdirSync(ws);
      writeTinyWorkspace(ws, tomlFor({ steps: 30, stepSeconds: 0.1, retrieveGraceMinutes: 10 }));
      const cli = startCli(['-C', ws, 'train'], {
        env: emulatorEnv({ apiKey: emulator.apiKey, baseUrl: proxy.baseUrl }),
        encoding: 'latin1',
      });
      // The client key, read as soon as it exists, joins the needles while the pod lives.
      const runsDir = path.join(ws, 'runs');
      const keyWatch = setInterval(() => {
        if (!fs.existsSync(runsDir)) return;
        for (const id of fs.readdirSync(runsDir)) {
          clientKey ??= wholeKey(path.join(runsDir, id, 'ssh', 'id_ed25519'));
          if (clientKey === null) continue;
          if (emulator.ledger().pods.some((p) => p.billing)) clientKeySeenWhileLive = true;
        }
      }, 20);
      const { code, stdout, stderr } = await cli.done;
      clearInterval(keyWatch);
      sampler.stop();
      assert.equal(code, 0, stderr);
      assert.ok(clientKey !== null, 'the run had a client key');
      assert.ok(clientKeySeenWhileLive, 'the client key lived while its pod did');
      const id = fs.readdirSync(runsDir)[0] ?? '';
      const run = JSON.parse(fs.readFileSync(path.join(runsDir, id, 'run.json'), 'utf8')) as {
        state: string;
      };
      assert.equal(run.state, 'succeeded');
      recordLedger(this, emulator.ledger());
      recordResult(this, { verified: 1, lost: 0 });

      const keyParts = keyNeedles(clientKey);
      const all = [emulator.apiKey, ARMOR, ...keyParts];
      assert.ok(sampler.samples > 20, `${sampler.samples} samples of /proc/*/cmdline`);
      for (const name of ['sshd', 'sh', 'python3']) {
        assert.ok(
          [...sampler.processesSeen].some((p) => p.includes(name)),
          `the pod's ${name} was sampled: ${[...sampler.processesSeen].join(', ')}`,
        );
      }
      assert.deepEqual(sampler.hits, [], 'a secret in a process argument');
      for (const needle of all) {
        assert.ok(!stdout.includes(needle) && !stderr.includes(needle), 'a secret in the output');
      }
      // runs/: the client key is forgotten with its pod; nothing else ever held a secret.
      assert.equal(fs.existsSync(path.join(runsDir, id, 'ssh', 'id_ed25519')), false);
      assert.deepEqual(leaksIn(filesUnder(ws), all), [], 'a secret in the workspace');
      // The pods' disks and logs (bootstrap.log, watchdog.log, job.log, the emulator's log).
      const podIds = emulator.ledger().pods.map((p) => p.id);
      const logs = new Map(podIds.map((p) => [`log of ${p}`, Buffer.from(emulator.podLog(p))]));
      assert.deepEqual(leaksIn(logs, all), [], "a secret in a pod's log");
      const state = filesUnder(emulator.stateDir);
      assert.ok(state.size > 0);
      assert.deepEqual(leaksIn(state, all), [], "a secret on a pod's disk or the emulator's state");
      // Requests: the account key only in the Authorization header, the client key never sent
      // (only its public half, authorized on the pod).
      assert.ok(proxy.bodies.some((b) => b.method === 'POST' && b.url.endsWith('/pods')));
      const sent = new Map(
        proxy.bodies.map((b, n) => [`${b.method} ${b.url} #${n}`, Buffer.from(b.body, 'latin1')]),
      );
      assert.deepEqual(
        leaksIn(sent, [emulator.apiKey, ...keyParts]),
        [],
        'a secret in a request body',
      );
    } finally {
      sampler.stop();
      await proxy.close();
      await emulator.close();
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('the core in process: no key in any event published on the bus or any process argument', async function () {
    const lab = await Lab.start({ steps: 30, stepSeconds: 0.1 });
    let clientKey: string | null = null;
    const sampler = new CmdlineSampler(() => [
      lab.emulator.apiKey,
      ...(clientKey === null ? [] : keyNeedles(clientKey)),
    ]);
    let id: string | null = null;
    try {
      const keyWatch = lab.bus.on((event) => {
        if (clientKey !== null || id === null) return;
        if (event.type === 'pod')
          clientKey = wholeKey(path.join(lab.runDir(id), 'ssh', 'id_ed25519'));
      });
      const result = await lab.track(
        train(lab.deps, lab.config, lab.workspace, { onRun: (run) => (id = run.id) }),
      );
      keyWatch.dispose();
      sampler.stop();
      assert.equal(result.run.state, 'succeeded');
      assert.ok(clientKey !== null, 'the run had a client key');
      recordLedger(this, lab.emulator.ledger());
      recordResult(this, { verified: 1, lost: 0 });
      const needles = [lab.emulator.apiKey, ARMOR, ...keyNeedles(clientKey)];
      assert.ok(lab.events.length > 30, `${lab.events.length} events`);
      const published = lab.events.map((e) => JSON.stringify(e.event));
      for (const needle of needles) {
        const hit = published.find((e) => e.includes(needle));
        assert.equal(hit, undefined, 'a secret in an event on the bus');
      }
      assert.deepEqual(sampler.hits, [], 'a secret in a process argument');
    } finally {
      sampler.stop();
      await lab.close(); // also: no secret in the workspace, no pod process left
    }
  });
});
