/**
 * The config unit tests' fixture: a config file path, a base overbrainer.toml (a training
 * section and a runpod target), an Axolotl one, and the asserts on a parsed config or a
 * ConfigError.
 */
import assert from 'node:assert/strict';
import {
  formatConfigError,
  parseConfig,
  type ConfigError,
  type Env,
  type OverbrainerConfig,
  type RunpodTargetConfig,
  type TargetConfig,
} from '../../src/core/config';

export const FILE = '/w/overbrainer.toml';

/** Lines 1-3 training, 5-8 a runpod target; appended lines start at 9. */
export const BASE = `[training]
trainer = "command"
command = "python train.py"

[targets.pod]
kind = "runpod"
gpu_types = ["NVIDIA A40"]
max_hours = 6
`;

/**
 * An overbrainer.toml of the original CLI: an Axolotl LoRA of Qwen 2.5 7B with merge and
 * hub_model_id (at line 6, or 7 with `epochs`), uploading data/ to a runpod target.
 */
export function axolotlToml(epochs?: number): string {
  return `[training]
target = "pod"
trainer = "axolotl"
base_model = "Qwen/Qwen2.5-7B-Instruct"
${epochs === undefined ? '' : `epochs = ${epochs}\n`}merge = true
hub_model_id = "me/qwen-lora"
upload = ["data"]

[targets.pod]
kind = "runpod"
gpu_types = ["NVIDIA A40"]
max_hours = 6
`;
}

export function parse(text: string, env: Env = {}): ReturnType<typeof parseConfig> {
  return parseConfig(text, { file: FILE, env, workspaceName: 'My Workspace' });
}

export function ok(text: string, env: Env = {}): OverbrainerConfig {
  const result = parse(text, env);
  if (!result.ok) assert.fail(result.errors.map(formatConfigError).join('\n'));
  return result.config;
}

export function errors(text: string, env: Env = {}): ConfigError[] {
  const result = parse(text, env);
  if (result.ok) assert.fail('expected errors, the config was accepted');
  return result.errors;
}

/** The only error of `text`. */
export function one(text: string, env: Env = {}): ConfigError {
  const found = errors(text, env);
  assert.equal(found.length, 1, found.map(formatConfigError).join('\n'));
  return found[0] as ConfigError;
}

export function pod(config: OverbrainerConfig, name = 'pod'): RunpodTargetConfig {
  const target = config.targets[name];
  assert.ok(target && target.kind === 'runpod', `no runpod target ${name}`);
  return target;
}

/** The config's first target (the one a run takes when none is named). */
export function firstTarget(config: OverbrainerConfig): TargetConfig {
  const target = Object.values(config.targets)[0];
  assert.ok(target, 'no target');
  return target;
}

/** Asserts where `error` is and what it says. */
export function at(
  error: ConfigError,
  line: number,
  column: number,
  message: RegExp,
  hint: RegExp,
): void {
  assert.equal(error.file, FILE, formatConfigError(error));
  assert.deepEqual([error.line, error.column], [line, column], formatConfigError(error));
  assert.match(error.message, message);
  assert.match(error.hint, hint);
}
