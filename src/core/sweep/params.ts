/**
 * How a trial's params reach its job besides params.json and `{name}` placeholders: environment
 * variables (OVERBRAINER_PARAM_<NAME>), and, for the axolotl trainer, keys of the run's
 * axolotl.yaml (a dotted name is a nested key): deep-merged into a generated config, or set in
 * the user's own YAML by python/overbrainer_yaml.py under the sweep's Python (Optuna brings
 * PyYAML). A key on the way that holds something else than a mapping is a {@link ParamPathError}.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { paramEnvName } from '../config/sweepParams';
import { HintedError } from '../errors';
import { DEFAULT_PYTHON } from './study';
import type { ParamValue } from './studyMessages';

export { paramEnvName } from '../config/sweepParams';

/** A parameter that cannot be set in the trainer's YAML (a key on its way is no mapping). */
export class ParamPathError extends HintedError<'bad_path' | 'bad_yaml' | 'no_yaml'> {}

/** The job's environment for a trial's params: numbers as JSON writes them, true/false. */
export function paramEnv(params: Readonly<Record<string, ParamValue>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(params)) env[paramEnvName(name)] = String(value);
  return env;
}

type Mapping = Record<string, unknown>;
const isMapping = (value: unknown): value is Mapping =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * `params` set into a copy of `doc` at their dotted paths (the mappings on the way made when
 * missing). Throws a {@link ParamPathError} naming the key on the way that holds something else.
 */
export function setParams(doc: Mapping, params: Readonly<Record<string, ParamValue>>): Mapping {
  const out = structuredClone(doc);
  for (const [name, value] of Object.entries(params)) {
    const keys = name.split('.');
    let node = out;
    for (const [depth, key] of keys.slice(0, -1).entries()) {
      const under = Object.hasOwn(node, key) ? node[key] : undefined;
      if (under === undefined || under === null) node[key] = {};
      else if (!isMapping(under)) throw pathError(name, keys, depth, under);
      node = node[key] as Mapping;
    }
    node[keys[keys.length - 1]!] = value;
  }
  return out;
}

/** Only the params as a nested mapping (what is deep-merged over a generated config). */
export function nestedParams(params: Readonly<Record<string, ParamValue>>): Mapping {
  return setParams({}, params);
}

function pathError(name: string, keys: string[], depth: number, under: unknown): ParamPathError {
  const where = keys.slice(0, depth + 1).join('.');
  const kind = Array.isArray(under) ? 'list' : typeof under;
  return new ParamPathError(
    'bad_path',
    `sweep.params.${name}: ${where} in axolotl.yaml holds a ${kind}, not a mapping, so ${keys.slice(depth + 1).join('.')} cannot be set under it`,
    `Rename the parameter to a key of a mapping of axolotl.yaml, or set ${where} in the YAML itself.`,
  );
}

/** The shipped script: next to the bundle (dist/python) or in the source tree. */
function yamlScript(): string {
  const candidates = [
    path.join(__dirname, 'python', 'overbrainer_yaml.py'),
    path.join(__dirname, '..', '..', '..', 'python', 'overbrainer_yaml.py'),
  ];
  const found = candidates.find((file) => fs.existsSync(file));
  if (!found)
    throw new ParamPathError(
      'no_yaml',
      "the sweep's YAML script is missing from this installation",
      'Reinstall the extension.',
    );
  return found;
}

/**
 * The user's YAML `text` with `params` set at their dotted paths, by `python` (the sweep's, with
 * Optuna and so PyYAML). Comments are not kept. `file` names the YAML in errors.
 */
export async function setParamsInYaml(
  python: string | null,
  text: string,
  params: Readonly<Record<string, ParamValue>>,
  file: string,
): Promise<string> {
  const interpreter = python?.trim() || DEFAULT_PYTHON;
  const child = spawn(interpreter, [yamlScript()], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '', PYTHONIOENCODING: 'utf-8' },
    windowsHide: true,
  });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  child.stdin.on('error', () => undefined);
  child.stdin.end(JSON.stringify({ text, set: params }));
  const code = await new Promise<number | null>((resolve) => {
    child.once('error', () => resolve(-1));
    child.once('close', (c) => resolve(c));
  });
  let answer: { ok?: boolean; text?: string; error?: { kind?: string; message?: string } } = {};
  try {
    answer = JSON.parse(out) as typeof answer;
  } catch {
    // Said below.
  }
  if (answer.ok === true && typeof answer.text === 'string') return answer.text;
  const kind = answer.error?.kind;
  if (kind === 'bad_path' || kind === 'bad_yaml') {
    throw new ParamPathError(
      kind,
      `${file}: ${answer.error?.message ?? '?'}`,
      kind === 'bad_path'
        ? `Rename the parameter to a key of a mapping of ${file}, or set that key in the YAML itself.`
        : `Fix ${file}: a trial's params are set as keys of its top-level mapping.`,
    );
  }
  throw new ParamPathError(
    'no_yaml',
    `${interpreter} could not set the trial's params in ${file} (exit ${code ?? 'on a signal'}${err ? `: ${err.trim().split('\n').slice(-2).join(' | ')}` : ''})`,
    `Use a Python with Optuna and PyYAML for sweeps (${interpreter} -m pip install optuna pyyaml).`,
  );
}
