/**
 * The user's own GPU machine of an ssh target (`kind = "ssh"`), for the integration tests: a real
 * OpenSSH sshd on loopback, a HOME whose SSH config names it `gpubox` (HostName, Port,
 * IdentityFile, UserKnownHostsFile) with its host key in their known_hosts, and a workspace whose
 * target `box` reaches it through OVERBRAINER_TARGETS__BOX__HOST. {@link closeMachines} ends the
 * jobs left on them (a failed assertion leaves none running), the daemons, the temp folders.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { systemClock } from '../../src/core/clock';
import { loadConfig } from '../../src/core/config';
import type { OverbrainerConfig } from '../../src/core/config/types';
import { EventBus } from '../../src/core/events';
import { train, type FlowDeps } from '../../src/core/flow';
import { RunStore } from '../../src/core/runs/store';
import { scaleTiming } from '../../src/core/timing';
import { startSshd, type Sshd } from './sshd';
import { sshToml, tempTinyWorkspace } from './tinyWorkspace';

/** What a shell the user runs printed, and its exit code. */
export interface ShellRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * `file args…` as the user's shell or VS Code's terminal spawns it: in `cwd`, with PATH and `env`
 * only (their HOME), `input` typed on its stdin (a pipe, closed after it), until its output closes.
 */
export function spawnAsUser(
  file: string,
  args: string[],
  options: {
    env: Record<string, string>;
    cwd?: string;
    input?: string;
    /** Holds the process while it runs (a test's `after` kills what is left). */
    children?: Set<ChildProcess>;
  },
): Promise<ShellRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      cwd: options.cwd,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...options.env },
      stdio: 'pipe',
    });
    options.children?.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => {
      options.children?.delete(child);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.input ?? '');
  });
}

/** The `Host` alias of the user's SSH config. */
export const ALIAS = 'gpubox';

export interface Box {
  sshd: Sshd;
  tmp: string;
  ws: string;
  home: string;
  deps: FlowDeps;
  config: OverbrainerConfig;
  /** The environment of the user's shell (HOME, the target's address, what the test adds). */
  env: Record<string, string>;
}

const boxes: Box[] = [];
const launched: number[] = [];

/** A job a test launched itself on a machine: {@link closeMachines} ends it. */
export function trackJob(pid: number): void {
  launched.push(pid);
}

/** Ends what the machines made so far hold: their jobs, daemons and temp folders. */
export async function closeMachines(): Promise<void> {
  for (const box of boxes.splice(0)) {
    const runsDir = path.join(box.sshd.root, 'ob');
    for (const id of fs.existsSync(runsDir) ? fs.readdirSync(runsDir) : []) {
      const pidFile = path.join(runsDir, id, 'job.pid');
      if (fs.existsSync(pidFile)) launched.push(Number(fs.readFileSync(pidFile, 'utf8')));
    }
    for (const pid of launched.splice(0)) {
      if (!Number.isSafeInteger(pid) || pid <= 1) continue;
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    await box.sshd.stop();
    fs.rmSync(box.tmp, { recursive: true, force: true });
  }
}

/** An sshd, a HOME whose SSH config names it `gpubox`, a workspace on target `box`. */
export async function userMachine(
  command: string,
  knownHostKey?: string,
  more: { training?: string; env?: Record<string, string> } = {},
): Promise<Box> {
  const sshd = await startSshd();
  const { tmp, ws } = tempTinyWorkspace('ob-sshtarget-');
  const home = path.join(tmp, 'home');
  const dotSsh = path.join(home, '.ssh');
  fs.mkdirSync(dotSsh, { recursive: true, mode: 0o700 });
  fs.writeFileSync(path.join(dotSsh, 'id_box'), sshd.clientPrivateKey, { mode: 0o600 });
  const known = knownHostKey ?? sshd.hostPublicKey;
  fs.writeFileSync(path.join(dotSsh, 'known_hosts'), `[127.0.0.1]:${sshd.port} ${known}\n`);
  fs.writeFileSync(
    path.join(dotSsh, 'config'),
    [
      `Host ${ALIAS}`,
      '  HostName 127.0.0.1',
      `  Port ${sshd.port}`,
      `  IdentityFile ${path.join(dotSsh, 'id_box')}`,
      `  UserKnownHostsFile ${path.join(dotSsh, 'known_hosts')}`,
      '',
    ].join('\n'),
  );
  fs.writeFileSync(
    path.join(ws, 'overbrainer.toml'),
    sshToml(command, `${sshd.root}/ob`, more.training),
  );
  const env = {
    HOME: home,
    OVERBRAINER_TARGETS__BOX__HOST: `${sshd.user}@${ALIAS}`,
    ...more.env,
  };
  const loaded = loadConfig(ws, env);
  assert.ok(loaded.ok, JSON.stringify(!loaded.ok && loaded.errors));
  const deps: FlowDeps = {
    store: new RunStore(path.join(ws, 'runs'), systemClock),
    client: null,
    bus: new EventBus(),
    clock: systemClock,
    timing: scaleTiming(4),
    version: 'test',
    owner: 'test',
    env,
  };
  const made = { sshd, tmp, ws, home, deps, config: loaded.config, env };
  boxes.push(made);
  return made;
}

/** Starts a train and resolves with its run ID once its job runs; the train's own promise too. */
export async function startGated(
  b: Box,
): Promise<{ runId: string; ended: Promise<unknown>; stop: AbortController }> {
  const stop = new AbortController();
  let runId = '';
  const running = new Promise<void>((resolve) => {
    const sub = b.deps.bus.on((event) => {
      if (event.type === 'runState' && event.state === 'running') {
        runId = event.runId;
        sub.dispose();
        resolve();
      }
    });
  });
  const ended = train(b.deps, b.config, b.ws, { signal: stop.signal }).then(
    (r) => r,
    (e: unknown) => e,
  );
  await Promise.race([running, ended]);
  if (runId === '') assert.fail(`the job never ran: ${String(await ended)}`);
  return { runId, ended, stop };
}
