/**
 * `npm run emulator`: one line on stdout once it listens, pods killed on SIGINT/SIGTERM, and no
 * pod outliving the emulator even when it is SIGKILLed (the parent-death signal chain).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processesInPidNamespace } from '../emulator/container';
import {
  adminHeaders,
  ApiClient,
  assertPodGone,
  snapshotPod,
  waitFor,
  type PodBody,
} from '../emulator/testing';

const CLI = join(__dirname, '..', 'emulator', 'cli.ts');
const LINE =
  /^runpod emulator listening on (http:\/\/127\.0\.0\.1:(\d+)\/v2) \(api key: (\S+)\)\n$/;

interface Running {
  child: ChildProcess;
  baseUrl: string;
  apiKey: string;
  startedMs: number;
  stdout: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts the emulator's CLI with node itself, or as a user does: `npm run emulator -- …`. */
async function runCli(args: string[], via: 'node' | 'npm' = 'node'): Promise<Running> {
  const t0 = performance.now();
  const child =
    via === 'node'
      ? spawn(process.execPath, ['--import', 'tsx', CLI, ...args], {
          stdio: ['ignore', 'pipe', 'pipe'],
        })
      : spawn('npm', ['run', '--silent', 'emulator', '--', ...args], {
          cwd: join(__dirname, '..', '..'),
          stdio: ['ignore', 'pipe', 'pipe'],
        });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const match = await waitFor(
    () => `the emulator's line (stdout: ${stdout}, stderr: ${stderr})`,
    () => LINE.exec(stdout) ?? undefined,
    30_000,
    10,
  );
  return {
    child,
    baseUrl: match[1] ?? '',
    apiKey: match[3] ?? '',
    startedMs: performance.now() - t0,
    stdout: () => stdout,
    exited,
  };
}

async function podNamespace(cli: Running, id: string): Promise<string> {
  const origin = cli.baseUrl.replace(/\/v2$/, '');
  return waitFor(`the namespace of ${id}`, async () => {
    const r = (await (
      await fetch(`${origin}/_emulator/pods`, { headers: adminHeaders(cli) })
    ).json()) as {
      pods: { id: string; pidNamespace: string | null }[];
    };
    return r.pods.find((p) => p.id === id)?.pidNamespace ?? undefined;
  });
}

describe('Runpod emulator: the CLI', function () {
  this.timeout(90_000);
  const children: ChildProcess[] = [];
  after(() => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  });

  it('prints one line, serves the API with the given key and state dir, and kills its pods on SIGTERM', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'emu-cli-'));
    try {
      const cli = await runCli([
        '--api-key',
        'rpa_CLITEST',
        '--state-dir',
        stateDir,
        '--boot-ms',
        '100',
      ]);
      children.push(cli.child);
      console.log(
        `      CLI ready line ${cli.startedMs.toFixed(0)} ms after spawn (node + tsx + emulator)`,
      );
      assert.equal(cli.apiKey, 'rpa_CLITEST');
      const api = new ApiClient(cli.baseUrl, cli.apiKey);
      const r = await api.post<PodBody>('/pods', {
        name: 'cli',
        image: 'x',
        gpu: { id: 'NVIDIA GeForce RTX 4090' },
        cmd: ['sleep', 'infinity'],
      });
      assert.equal(r.status, 201);
      const ns = await podNamespace(cli, r.body.id);
      assert.ok(existsSync(join(stateDir, 'pods', r.body.id)));
      const snapshot = snapshotPod(ns);
      cli.child.kill('SIGTERM');
      assert.deepEqual(await cli.exited, { code: 0, signal: null });
      assertPodGone(snapshot);
      assert.equal(cli.stdout().split('\n').filter(Boolean).length, 1, 'exactly one line');
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`npm run emulator stops with its pods on ${signal} sent to npm`, async () => {
      const cli = await runCli(['--boot-ms', '100'], 'npm');
      children.push(cli.child);
      const api = new ApiClient(cli.baseUrl, cli.apiKey);
      const r = await api.post<PodBody>('/pods', {
        name: 'npm-run',
        image: 'x',
        gpu: { id: 'NVIDIA GeForce RTX 4090' },
        cmd: ['sleep', 'infinity'],
      });
      assert.equal(r.status, 201);
      const snapshot = snapshotPod(await podNamespace(cli, r.body.id));
      cli.child.kill(signal);
      const exited = await cli.exited;
      assert.ok(
        exited.code === 0 || exited.signal === signal,
        `npm ended with ${JSON.stringify(exited)}`,
      );
      await waitFor('the emulator gone from the port', async () => {
        try {
          await fetch(`${cli.baseUrl.replace(/\/v2$/, '')}/_emulator/pods`);
          return undefined;
        } catch {
          return true;
        }
      });
      assertPodGone(snapshot);
    });
  }

  it('leaves no pod process behind when the emulator itself is SIGKILLed', async () => {
    // A SIGKILLed emulator cannot remove its state dir: the test owns it.
    const stateDir = mkdtempSync(join(tmpdir(), 'emu-cli-'));
    try {
      const cli = await runCli(['--boot-ms', '0', '--state-dir', stateDir]);
      children.push(cli.child);
      const api = new ApiClient(cli.baseUrl, cli.apiKey);
      const r = await api.post<PodBody>('/pods', {
        name: 'orphan?',
        image: 'x',
        gpu: { id: 'NVIDIA GeForce RTX 4090' },
        // A daemonized grandchild too: it must die with the namespace.
        cmd: ['bash', '-c', 'setsid sleep 1000 & exec sleep infinity'],
      });
      const ns = await podNamespace(cli, r.body.id);
      await waitFor('both sleeps', () =>
        processesInPidNamespace(ns).length >= 2 ? true : undefined,
      );
      const snapshot = snapshotPod(ns);
      cli.child.kill('SIGKILL');
      await cli.exited;
      await waitFor(
        'the pod processes to die with the emulator',
        () => (snapshot.running().length === 0 && snapshot.namespaceEnded() ? true : undefined),
        5000,
      );
      assertPodGone(snapshot);
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it('refuses bad arguments with exit code 2', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', CLI, '--port', 'x'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.equal(code, 2);
    assert.match(stderr, /--port takes an integer/);
  });
});
