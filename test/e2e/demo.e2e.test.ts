import * as assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT, tempDir } from './harness';
import { lockTreeBuild } from './treeBuild';

/**
 * The README's first command, as a newcomer runs it: `npm start -- --check` drives the whole demo
 * (emulator, code-server, Chromium, a real run on a real emulated pod) and must exit 0; `npm start`
 * must print its URL, serve the workbench and, on Ctrl-C, leave no process and no emulated pod.
 *
 * "No process left" is checked by a marker: every process the demo starts inherits the marker
 * variable from `npm start`'s environment (code-server, its extension host, Chromium), except the
 * emulated pods, whose env is their create call's. Pods are found by the demo's --dir, which holds
 * the emulator's state and is in each pod launcher's command line, and, for the pod this test
 * creates, by the marker it puts in the pod's env.
 */
const MARKER_VAR = 'OVERBRAINER_DEMO_MARKER';

interface Leftover {
  pid: number;
  cmdline: string;
}

/** Live processes (not zombies) with `marker` in their env, or `dir` in their command line. */
function processesOf(marker: string, dir: string): Leftover[] {
  const found: Leftover[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (pid === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (/^\d+ \(.*\) Z /s.test(stat)) continue;
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      if (environ.includes(`${MARKER_VAR}=${marker}`) || cmdline.includes(dir)) {
        found.push({ pid, cmdline: cmdline.slice(0, 200) });
      }
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

async function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/**
 * What the demo prints once its code-server runs: its build is done and copied by then, so the
 * tree's build lock (./treeBuild.ts) is let go.
 */
const SERVING = /^settings: overbrainer\.runpod\.baseUrl = /m;

/** `npm start -- <args>` in its own process group, as a terminal runs it; output collected. */
class Demo {
  readonly output = { text: '' };
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly child: ChildProcess;

  /** Starts it once no other e2e file builds the tree; it builds dist/ and copies it itself. */
  static async start(args: string[], marker: string): Promise<Demo> {
    return new Demo(args, marker, await lockTreeBuild('npm start'));
  }

  private constructor(
    args: string[],
    readonly marker: string,
    releaseBuild: () => void,
  ) {
    this.child = spawn('npm', ['start', '--', ...args], {
      cwd: REPO_ROOT,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, [MARKER_VAR]: marker },
    });
    const collect = (chunk: Buffer): void => {
      this.output.text += chunk.toString();
      if (SERVING.test(this.output.text)) releaseBuild();
    };
    this.child.stdout?.on('data', collect);
    this.child.stderr?.on('data', collect);
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code, signal) => {
        releaseBuild();
        resolve({ code, signal });
      }),
    );
  }

  /** Ctrl-C in a terminal: SIGINT to the whole foreground process group. */
  interrupt(): void {
    if (this.child.pid !== undefined) process.kill(-this.child.pid, 'SIGINT');
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The last resort of a failed test: SIGINT, then SIGKILL to whatever still has the marker. */
  async stop(dir: string): Promise<void> {
    if (this.running) {
      this.interrupt();
      await Promise.race([this.exited, new Promise((resolve) => setTimeout(resolve, 60_000))]);
    }
    for (const left of processesOf(this.marker, dir)) {
      try {
        process.kill(left.pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
  }
}

function printIndented(text: string): void {
  for (const line of text.trimEnd().split('\n')) console.log(`      | ${line}`);
}

describe('npm start: the demo', function () {
  this.timeout(600_000);
  let dir: ReturnType<typeof tempDir>;
  let demo: Demo | undefined;

  beforeEach(function () {
    dir = tempDir('demo');
  });

  afterEach(async function () {
    await demo?.stop(dir.dir);
    if (this.currentTest?.state === 'failed' && demo) printIndented(demo.output.text);
    demo = undefined;
    dir.remove();
  });

  it('--check trains through the UI to verified results and exits 0, leaving nothing', async function () {
    const marker = randomBytes(8).toString('hex');
    demo = await Demo.start(['--check', '--dir', dir.dir], marker);
    const started = Date.now();
    const { code } = await demo.exited;
    const tookS = ((Date.now() - started) / 1000).toFixed(0);
    const lines = demo.output.text.split('\n').filter((line) => /^\[check|demo check/.test(line));
    printIndented(lines.join('\n'));
    console.log(`      npm start -- --check exited ${code} after ${tookS} s`);
    assert.equal(code, 0, `the demo check failed:\n${demo.output.text}`);
    for (const step of [
      'the run appears in the Runs tree',
      'the run succeeds',
      'the results are on disk',
      'no pod is left on the emulator',
    ]) {
      assert.ok(
        lines.some((line) => line.includes(`✓ ${step}`)),
        `step "${step}" passed`,
      );
    }
    assert.match(demo.output.text, /demo check: passed/);
    assert.deepEqual(processesOf(marker, dir.dir), [], 'processes left by the demo');
  });

  it('prints the URL, serves VS Code, and Ctrl-C leaves no process and no emulated pod', async function () {
    const marker = randomBytes(8).toString('hex');
    demo = await Demo.start(['--port', '0', '--dir', dir.dir], marker);
    const output = demo.output;
    const url = await waitFor(
      'the demo URL',
      () =>
        /Overbrainer demo: open (http:\/\/127\.0\.0\.1:\d+\/\?folder=\S+)/.exec(output.text)?.[1],
      300_000,
    );
    const [, baseUrl, apiKey] =
      /Runpod emulator: (http:\/\/127\.0\.0\.1:\d+\/v2) \(api key: (\S+?);/.exec(output.text) ?? [];
    assert.ok(baseUrl && apiKey, `the emulator line in:\n${output.text}`);
    const page = await fetch(url);
    assert.equal(page.status, 200, 'the workbench URL serves');
    assert.match(decodeURIComponent(url), new RegExp(`${dir.dir}/workspace$`));
    const toml = readFileSync(path.join(dir.dir, 'workspace', 'overbrainer.toml'), 'utf8');
    assert.match(toml, /kind = "runpod"/, 'the opened folder is a copy of examples/tiny');
    // The emulator's URL is where a user would set it, never in the workspace (scope machine).
    assert.ok(!existsSync(path.join(dir.dir, 'workspace', '.vscode')), 'the workspace has .vscode');
    const machineFile = /in code-server's machine settings \((.+)\)\n/.exec(output.text)?.[1];
    assert.ok(machineFile, `the settings line in:\n${output.text}`);
    const settings = JSON.parse(readFileSync(machineFile, 'utf8')) as Record<string, unknown>;
    assert.equal(settings['overbrainer.runpod.baseUrl'], baseUrl);

    // A pod that is up when Ctrl-C comes: the demo must delete it and wait until it is gone.
    const created = await fetch(`${baseUrl}/pods`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        name: 'overbrainer-demo-test-1',
        image: 'runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404',
        gpu: { id: 'NVIDIA GeForce RTX 4090', count: 1 },
        env: { [MARKER_VAR]: marker },
        cmd: ['sleep', '600'],
      }),
    });
    assert.equal(created.status, 201, await created.text());
    await waitFor(
      "the pod's process",
      () =>
        processesOf(marker, dir.dir).some((p) => p.cmdline === 'sleep 600') ? true : undefined,
      60_000,
    );
    const before = processesOf(marker, dir.dir);
    console.log(`      before Ctrl-C: ${before.length} processes of the demo, the pod's included`);

    const interrupted = Date.now();
    demo.interrupt();
    // npm may end before the demo's node process has finished cleaning up: wait for its words.
    await waitFor(
      'the demo to say it stopped',
      () => (/stopped: no process and no emulated pod left/.test(output.text) ? true : undefined),
      120_000,
    );
    const { code, signal } = await demo.exited;
    console.log(
      `      stopped ${((Date.now() - interrupted) / 1000).toFixed(1)} s after Ctrl-C (npm exited ${code ?? signal})`,
    );
    assert.match(output.text, /deleting 1 emulated pod/);
    // npm itself may end a moment before the last child: give the group a few seconds.
    const left = await waitFor(
      'every process of the demo to end',
      () => {
        const now = processesOf(marker, dir.dir);
        return now.length === 0 ? now : undefined;
      },
      30_000,
    ).catch(() => processesOf(marker, dir.dir));
    assert.deepEqual(left, [], 'processes left after Ctrl-C');
  });
});
