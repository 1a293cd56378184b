/**
 * The workspace most end-to-end tests train in: examples/tiny's train.py and data beside an
 * overbrainer.toml running them on one emulated Runpod pod, and the environment that points the
 * CLI (or VS Code) at an emulator. Shared by the integration labs, the CLI tests and the e2e
 * windows, so each spells out only what differs.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ROOT } from './cli';

export const TINY = path.join(ROOT, 'examples', 'tiny');

/** GPU types of the emulator's default catalog (H100 is out of stock everywhere). */
export const GPU = {
  rtx4090: 'NVIDIA GeForce RTX 4090',
  a5000: 'NVIDIA RTX A5000',
  a100: 'NVIDIA A100 80GB PCIe',
  h100: 'NVIDIA H100 80GB HBM3',
} as const;

export interface TinyTomlOptions {
  /** Steps and seconds per step of examples/tiny/train.py. */
  steps?: number;
  stepSeconds?: number;
  /** The command run on the pod (default: train.py with `steps` and `stepSeconds`). */
  command?: string;
  gpuTypes?: string[];
  maxHours?: number;
  bootGraceMinutes?: number;
  /** Default 1 (the labs' scaled clocks); the CLI and e2e tests give 10. */
  retrieveGraceMinutes?: number;
  /** More lines for the `[targets.pod]` table. */
  targetExtra?: string;
  /** More lines for the `[training]` table (after `upload`), each ending in a newline. */
  trainingExtra?: string;
}

/** examples/tiny's overbrainer.toml on a `runpod` target named `pod`. */
export function tomlFor(options: TinyTomlOptions): string {
  const command =
    options.command ??
    `python3 train.py --steps ${options.steps ?? 20} --step-seconds ${options.stepSeconds ?? 0.05}`;
  return `${trainingOn('pod', command)}${options.trainingExtra ?? ''}
${runpodTarget('pod', options)}`;
}

/**
 * The `[targets.<name>]` table of a `runpod` target with the labs' graces (boot 5 min, retrieve
 * 1 min unless told), for tests that write their own `[training]`.
 */
export function runpodTarget(name: string, options: TinyTomlOptions = {}): string {
  const gpuTypes = (options.gpuTypes ?? [GPU.rtx4090]).map((g) => JSON.stringify(g)).join(', ');
  return `[targets.${name}]
kind = "runpod"
gpu_types = [${gpuTypes}]
max_hours = ${options.maxHours ?? 1}
boot_grace_minutes = ${options.bootGraceMinutes ?? 5}
retrieve_grace_minutes = ${options.retrieveGraceMinutes ?? 1}
${options.targetExtra ?? ''}`;
}

/** The overbrainer.toml of examples/tiny on one RTX 4090 pod, running `command`. */
export function tinyToml(command: string, targetExtra = ''): string {
  return tomlFor({ command, retrieveGraceMinutes: 10, targetExtra });
}

/** The `[project]` and `[training]` of examples/tiny on target `target`, running `command`. */
function trainingOn(target: string, command: string, upload = true): string {
  return `[project]
name = "tiny"

[training]
target = "${target}"
trainer = "command"
command = ${JSON.stringify(command)}
${upload ? 'upload = ["train.py", "data"]\n' : ''}`;
}

/** An overbrainer.toml on a `local` target named `here`, running `command` (uploading the tiny files). */
export function localToml(command: string, upload = true): string {
  return `${trainingOn('here', command, upload)}
[targets.here]
kind = "local"
`;
}

/**
 * An overbrainer.toml on an `ssh` target named `box` (the user's own machine) with its runs under
 * `workdir`, running `command` (uploading the tiny files); `trainingExtra` ends `[training]`.
 */
export function sshToml(command: string, workdir: string, trainingExtra = ''): string {
  return `${trainingOn('box', command)}${trainingExtra}
[targets.box]
kind = "ssh"
workdir = ${JSON.stringify(workdir)}
`;
}

/** Copies examples/tiny's train.py and data into `dir`, and writes `toml` as its overbrainer.toml. */
export function writeTinyWorkspace(dir: string, toml?: string): void {
  fs.copyFileSync(path.join(TINY, 'train.py'), path.join(dir, 'train.py'));
  fs.cpSync(path.join(TINY, 'data'), path.join(dir, 'data'), { recursive: true });
  if (toml !== undefined) fs.writeFileSync(path.join(dir, 'overbrainer.toml'), toml);
}

/** A temp directory (`tmp`, remove it when done) holding an empty workspace `ws`. */
export function tempWorkspace(prefix: string): { tmp: string; ws: string } {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const ws = path.join(tmp, 'ws');
  fs.mkdirSync(ws);
  return { tmp, ws };
}

/** A temp directory (`tmp`, remove it when done) holding a tiny workspace `ws`. */
export function tempTinyWorkspace(prefix: string, toml?: string): { tmp: string; ws: string } {
  const made = tempWorkspace(prefix);
  writeTinyWorkspace(made.ws, toml);
  return made;
}

/**
 * The CLI's environment against an emulator: its API key and base URL, and the production
 * timing divided by `scale` (8: SSH commands into an emulated pod take up to ~2 s each on a
 * loaded machine, so the scaled request timeout keeps a margin).
 */
export function emulatorEnv(
  emulator: { apiKey: string; baseUrl: string },
  scale = '8',
): Record<string, string> {
  return {
    OVERBRAINER_RUNPOD__API_KEY: emulator.apiKey,
    OVERBRAINER_RUNPOD__BASE_URL: emulator.baseUrl,
    OVERBRAINER_TIMING_SCALE: scale,
  };
}
