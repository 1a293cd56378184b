/**
 * `OVERBRAINER_*` environment variables: overrides of overbrainer.toml
 * (`OVERBRAINER_TARGETS__POD__MAX_HOURS=2` sets `targets.pod.max_hours`; `__`
 * separates levels; env wins over the file, the file over defaults) and the
 * env-only Runpod settings.
 *
 * Only variables under the config's own sections (`PROJECT`, `TRAINING`,
 * `TARGETS`, `RUNPOD`) and `OVERBRAINER_SSH_CLIENT` are read here. Other
 * `OVERBRAINER_*` names (`OVERBRAINER_LOG`, `OVERBRAINER_HF_TOKEN`, the pod
 * scripts' own `OVERBRAINER_ETC_DIR`…) belong to other parts and are ignored,
 * so a test or a shell profile setting them never breaks the config.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

export type Env = Readonly<Record<string, string | undefined>>;

export const ENV_PREFIX = 'OVERBRAINER_';

/** Env-only: never accepted in overbrainer.toml. */
export const ENV_API_KEY = 'OVERBRAINER_RUNPOD__API_KEY';
export const ENV_BASE_URL = 'OVERBRAINER_RUNPOD__BASE_URL';
export const ENV_SSH_CLIENT = 'OVERBRAINER_SSH_CLIENT';

/** The config sections an env variable may override. */
const SECTIONS = new Set(['project', 'training', 'targets', 'budget', 'sweep']);

/** Keys whose env value is a comma-separated list (or `auto` where allowed). */
export const LIST_KEYS = new Set([
  'gpu_types',
  'data_center_ids',
  'upload',
  'artifacts',
  'secrets',
]);
const AUTO_KEYS = new Set(['gpu_types', 'data_center_ids']);

export interface EnvOverride {
  /** The config path, lower case: `['targets', 'pod', 'max_hours']`. */
  path: string[];
  /** The value as the config sees it: a string, or a list for LIST_KEYS. */
  value: string | string[];
  envVar: string;
}

export interface EnvProblem {
  envVar: string;
  key: string;
  message: string;
  hint: string;
}

/**
 * The overrides `env` holds, sorted by name so they apply in a stable order,
 * and the variables that cannot be one (a section without a key, an unknown
 * `RUNPOD__` key). Empty values are ignored: they override nothing.
 */
export function envOverrides(env: Env): { overrides: EnvOverride[]; problems: EnvProblem[] } {
  const overrides: EnvOverride[] = [];
  const problems: EnvProblem[] = [];
  const names = Object.keys(env)
    .filter((name) => name.startsWith(ENV_PREFIX))
    .sort();
  for (const envVar of names) {
    const raw = env[envVar];
    if (raw === undefined || raw.trim() === '') continue;
    const segments = envVar.slice(ENV_PREFIX.length).toLowerCase().split('__');
    const section = segments[0] ?? '';
    if (section === 'runpod') {
      if (envVar === ENV_API_KEY || envVar === ENV_BASE_URL) continue;
      problems.push({
        envVar,
        key: segments.join('.'),
        message: `${envVar} is not a setting overbrainer knows`,
        hint: `The Runpod settings are ${ENV_API_KEY} and ${ENV_BASE_URL}; remove or rename it.`,
      });
      continue;
    }
    if (!SECTIONS.has(section)) continue;
    const minDepth = section === 'targets' ? 3 : 2;
    if (segments.length < minDepth || segments.some((segment) => segment === '')) {
      problems.push({
        envVar,
        key: segments.join('.'),
        message: `${envVar} does not name a key`,
        hint:
          section === 'targets'
            ? 'Name a target and one of its keys, e.g. OVERBRAINER_TARGETS__POD__MAX_HOURS=2.'
            : `Name one key of [${section}], e.g. OVERBRAINER_${section.toUpperCase()}__${section === 'project' ? 'NAME' : 'TARGET'}=….`,
      });
      continue;
    }
    const leaf = segments[segments.length - 1] ?? '';
    overrides.push({ path: segments, value: envValue(leaf, raw), envVar });
  }
  return { overrides, problems };
}

/** An env string as the config key `leaf` takes it: lists are comma-separated, `auto` stays a word. */
function envValue(leaf: string, raw: string): string | string[] {
  if (!LIST_KEYS.has(leaf)) return raw.trim();
  const trimmed = raw.trim();
  // Only the exact lower-case word means auto: `AUTO` is a GPU type named AUTO, refused later.
  if (AUTO_KEYS.has(leaf) && trimmed === 'auto') return 'auto';
  return trimmed.split(',').map((item) => item.trim());
}

/**
 * Names a file in the workspace may never set: where the API key is sent is chosen by the user,
 * outside the workspace (a cloned repository's `.env` could otherwise send the key to any host).
 */
export const PROCESS_ENV_ONLY: ReadonlySet<string> = new Set([ENV_BASE_URL]);

/** A `.env` line that was not taken, and why: the CLI warns with it, naming the line. */
export interface DotEnvIgnored {
  /** The `.env` file's path. */
  file: string;
  /** 1-based. */
  line: number;
  name: string;
  message: string;
  hint: string;
}

/**
 * The process env with the workspace's `.env` under it (`KEY=VALUE` lines,
 * optional `export ` and quotes, `#` comments): the process wins, and only
 * `OVERBRAINER_*` names are taken from the file, never one of
 * {@link PROCESS_ENV_ONLY} (those lines come back in `ignored`). A missing or
 * unreadable `.env` adds nothing.
 */
export function readDotEnv(workspaceDir: string, env: Env): { env: Env; ignored: DotEnvIgnored[] } {
  const file = path.join(workspaceDir, '.env');
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return { env, ignored: [] };
  }
  const merged: Record<string, string | undefined> = { ...env };
  const ignored: DotEnvIgnored[] = [];
  text.split(/\r?\n/).forEach((line, index) => {
    const match = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (!match) return;
    const name = match[1] ?? '';
    if (!name.startsWith(ENV_PREFIX)) return;
    if (PROCESS_ENV_ONLY.has(name)) {
      ignored.push({
        file,
        line: index + 1,
        name,
        message: `${name} in .env is ignored: the Runpod API's address is read from the environment only, never from a file in the workspace (a file there could send your API key to another host)`,
        hint: `To use that address, set ${name} in your shell's environment; then remove the line from .env.`,
      });
      return;
    }
    if (env[name] !== undefined) return;
    let value = match[2] ?? '';
    const quoted = /^(['"])(.*)\1$/.exec(value);
    if (quoted) value = quoted[2] ?? '';
    else value = value.replace(/\s+#.*$/, '');
    merged[name] = value;
  });
  return { env: merged, ignored };
}

/** {@link readDotEnv}'s env alone. */
export function withDotEnv(workspaceDir: string, env: Env): Env {
  return readDotEnv(workspaceDir, env).env;
}

/** The problem of a key overbrainer.toml must not hold: a secret read from the environment only. */
export function envOnlyProblem(key: string, envVar: string): { message: string; hint: string } {
  return {
    message: `${key} is read from the environment only, never from overbrainer.toml (a secret in a file ends up in git and backups)`,
    hint: `Remove it from the file and set ${envVar} instead${envVar === ENV_API_KEY ? ' (or run "Overbrainer: Set Runpod API Key")' : ''}.`,
  };
}
