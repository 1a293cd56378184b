/**
 * `overbrainer.toml` → {@link OverbrainerConfig}: smol-toml parses, the
 * `OVERBRAINER_*` environment overrides, zod checks each value, and every
 * problem found is reported at once, each with its file, line and column and
 * a sentence saying what to write instead. Unknown keys are refused (a typo
 * must not silently fall back to a default that keeps a pod billing longer). Here the document
 * and its top level; each section's check is ./sections.ts.
 */
import { parse as parseToml, TomlError } from 'smol-toml';
import { checkBudget } from './budget';
import { ENV_API_KEY, ENV_BASE_URL, envOnlyProblem, envOverrides, type Env } from './env';
import { KNOWN_KEYS, TOP_LEVEL } from './fields';
import { closest, describe, dotted, isTable, Reporter, type Table } from './report';
import { checkProject, checkTargets, checkTraining } from './sections';
import { checkSweep } from './sweep';
import { TomlPositions } from './tomlPositions';
import type { ConfigResult, OverbrainerConfig } from './types';

export interface ParseOptions {
  /** The file name errors carry (the path of overbrainer.toml). */
  file: string;
  /** Environment overrides; none when omitted. */
  env?: Env;
  /** The workspace folder's name: the project name when `[project] name` is unset. */
  workspaceName: string;
}

// ---------------------------------------------------------------------------

/**
 * Parses and validates `text` (the content of overbrainer.toml) with the
 * environment overrides of `options.env`. Collects every error, not just the
 * first.
 */
export function parseConfig(text: string, options: ParseOptions): ConfigResult {
  return parseConfigWithPositions(text, options).result;
}

/** {@link parseConfig}, also returning the reporter so callers can add errors at the same places. */
export function parseConfigWithPositions(
  text: string,
  options: ParseOptions,
): { result: ConfigResult; report: Reporter | null } {
  let document: Table;
  try {
    document = parseToml(text) as Table;
  } catch (error) {
    if (error instanceof TomlError) {
      // The first line only: the rest of smol-toml's message quotes the file.
      const what = (error.message.split('\n')[0] ?? '').replace(/^Invalid TOML document:\s*/, '');
      return {
        result: {
          ok: false,
          errors: [
            {
              file: options.file,
              line: error.line,
              column: error.column,
              key: '',
              message: `overbrainer.toml is not valid TOML: ${what}`,
              hint: 'Fix the syntax at this place (strings in "quotes", lists in [brackets], one key = value per line).',
            },
          ],
        },
        report: null,
      };
    }
    throw error;
  }

  const report = new Reporter(options.file, new TomlPositions(text), new Map());
  applyEnv(document, options.env ?? {}, report);

  for (const [key, value] of Object.entries(document)) {
    if (TOP_LEVEL.includes(key)) {
      if (!isTable(value)) {
        report.add(
          [key],
          `${key} must be a table, not ${describe(value)}`,
          `Write it as a [${key}] section.`,
          'key',
        );
        document[key] = undefined;
      }
      continue;
    }
    if (key === 'runpod' && isTable(value)) {
      for (const inner of Object.keys(value)) {
        const envVar =
          inner === 'api_key' ? ENV_API_KEY : inner === 'base_url' ? ENV_BASE_URL : null;
        const problem = envVar
          ? envOnlyProblem(`runpod.${inner}`, envVar)
          : {
              message: `runpod.${inner} is not a setting overbrainer knows`,
              hint: `Remove it; Runpod access is set with ${ENV_API_KEY} and ${ENV_BASE_URL} in the environment.`,
            };
        report.add(['runpod', inner], problem.message, problem.hint, 'key');
      }
      if (Object.keys(value).length === 0) {
        report.add(
          ['runpod'],
          'a [runpod] section is not read',
          `Remove it; set ${ENV_API_KEY} in the environment.`,
          'key',
        );
      }
      continue;
    }
    if (key === 'hf_token' || key === 'log') {
      const problem = envOnlyProblem(key, `OVERBRAINER_${key.toUpperCase()}`);
      report.add([key], problem.message, problem.hint, 'key');
      continue;
    }
    const guess = closest(key, TOP_LEVEL);
    report.add(
      [key],
      `${key} is not a section overbrainer knows`,
      guess
        ? `Did you mean [${guess}]? Otherwise remove it; the sections are [project], [training], [targets.NAME], [budget] and [sweep].`
        : 'Remove it; the sections are [project], [training], [targets.NAME], [budget] and [sweep].',
      'key',
    );
  }

  const projectName = checkProject(report, document.project, options.workspaceName);
  const targets = checkTargets(report, document.targets, options.env ?? {});
  const training = checkTraining(report, document.training, targets, options.env ?? {});
  const budget = checkBudget(report, document.budget);
  const sweep = checkSweep(report, document.sweep, exactSweepParams(text, report), {
    targets: targets.valid,
    targetNames: targets.names,
    training,
    hasTraining: isTable(document.training),
  });

  if (report.errors.length > 0) {
    report.errors.sort((a, b) =>
      a.file === b.file ? a.line - b.line || a.column - b.column : a.file < b.file ? -1 : 1,
    );
    return { result: { ok: false, errors: report.errors }, report };
  }
  const config: OverbrainerConfig = {
    file: options.file,
    projectName,
    training,
    targets: targets.valid,
    budget,
    sweep,
  };
  return { result: { ok: true, config }, report };
}

/**
 * `[sweep.params]` read again with TOML integers kept as bigint, so that `8` (Optuna's int) and
 * `8.0` (a float) stay apart; undefined when the file has none. The environment cannot set a
 * parameter (a variable holds no range): one that tries is reported here.
 */
function exactSweepParams(text: string, report: Reporter): unknown {
  for (const [id, envVar] of report.origins) {
    const path = JSON.parse(id) as string[];
    if (path[0] === 'sweep' && path[1] === 'params') {
      report.errors.push({
        file: `env:${envVar}`,
        line: 1,
        column: 1,
        key: dotted(path),
        envVar,
        message: `${envVar} sets a sweep parameter, which only overbrainer.toml can hold`,
        hint: `Unset ${envVar} and write the parameter under [sweep.params] in overbrainer.toml.`,
      });
    }
  }
  const exact = parseToml(text, { integersAsBigInt: true }) as Table;
  const sweep = exact.sweep;
  return isTable(sweep) ? sweep.params : undefined;
}

/** Layers the overrides of `env` over the document, remembering which paths they set. */
function applyEnv(document: Table, env: Env, report: Reporter): void {
  const { overrides, problems } = envOverrides(env);
  for (const problem of problems) {
    report.errors.push({
      file: `env:${problem.envVar}`,
      line: 1,
      column: 1,
      key: problem.key,
      message: problem.message,
      hint: problem.hint,
      envVar: problem.envVar,
    });
  }
  for (const override of overrides) {
    let table: Table = document;
    let blocked: string | null = null;
    for (let i = 0; i < override.path.length - 1; i++) {
      const segment = override.path[i] ?? '';
      const next: unknown = table[segment];
      if (next === undefined) {
        const created: Table = Object.create(null) as Table;
        table[segment] = created;
        table = created;
      } else if (isTable(next)) {
        table = next;
      } else {
        blocked = dotted(override.path.slice(0, i + 1));
        break;
      }
    }
    if (blocked !== null) {
      report.errors.push({
        file: `env:${override.envVar}`,
        line: 1,
        column: 1,
        key: dotted(override.path),
        envVar: override.envVar,
        message: `${override.envVar} sets a key inside ${blocked}, which is not a table`,
        hint: `Fix ${blocked} in overbrainer.toml, or unset ${override.envVar}.`,
      });
      continue;
    }
    table[override.path[override.path.length - 1] ?? ''] = override.value;
    report.origins.set(JSON.stringify(override.path), override.envVar);
  }
}

export { KNOWN_KEYS };
export type { Reporter };
