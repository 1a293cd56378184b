/**
 * Reading the workspace's configuration from disk: `overbrainer.toml` plus the
 * environment (with the workspace's `.env` under it), and the paths it names
 * checked against the workspace (they must exist and, links resolved, stay
 * inside it).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ENV_API_KEY, ENV_BASE_URL, withDotEnv, type Env } from './env';
import { parseConfigWithPositions } from './parse';
import {
  CONFIG_FILE,
  DEFAULT_RUNPOD_BASE_URL,
  TRAIN_DATA,
  uploadHolds,
  type ConfigError,
  type ConfigResult,
  type RunpodSettings,
} from './types';

/** {@link ConfigResult} plus the environment it was read with (the process env over `.env`). */
export type LoadedConfig = ConfigResult & { env: Env };

/**
 * Reads `<workspaceDir>/overbrainer.toml` with `env` (default: the process
 * env) over the workspace's `.env`, validates it, and checks that
 * `training.config` and every `training.upload` entry exist inside the
 * workspace.
 */
export function loadConfig(workspaceDir: string, env: Env = process.env): LoadedConfig {
  const merged = withDotEnv(workspaceDir, env);
  const file = path.join(workspaceDir, CONFIG_FILE);
  let text: string;
  try {
    const decoded = decodeUtf8(fs.readFileSync(file));
    if (!decoded.ok)
      return { ok: false, env: merged, errors: [{ file, key: '', ...decoded.error }] };
    text = decoded.text;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return {
      ok: false,
      env: merged,
      errors: [
        {
          file,
          line: 1,
          column: 1,
          key: '',
          message:
            code === 'ENOENT'
              ? `there is no ${CONFIG_FILE} in ${workspaceDir}`
              : `${CONFIG_FILE} cannot be read (${code ?? 'unknown error'})`,
          hint:
            code === 'ENOENT'
              ? 'Run `overbrainer init` in a terminal, or "Overbrainer: Create overbrainer.toml" in VS Code, to start from a commented template.'
              : `Check the file's permissions.`,
        },
      ],
    };
  }
  const { result, report } = parseConfigWithPositions(text, {
    file,
    env: merged,
    workspaceName: path.basename(path.resolve(workspaceDir)),
  });
  if (!result.ok || report === null || result.config.training === null) {
    return { ...result, env: merged };
  }
  const training = result.config.training;
  let root: string;
  try {
    root = fs.realpathSync(workspaceDir);
  } catch {
    root = path.resolve(workspaceDir);
  }
  const problem = (relative: string, wantFile: boolean): string | null => {
    let real: string;
    try {
      real = fs.realpathSync(path.join(workspaceDir, ...relative.split('/')));
    } catch {
      return 'does not exist';
    }
    if (real !== root && !real.startsWith(root + path.sep))
      return 'leads outside the workspace (through a link)';
    if (wantFile && !fs.statSync(real).isFile()) return 'is not a file';
    return null;
  };
  if (training.trainer.kind === 'axolotl' && training.trainer.configPath !== null) {
    const found = problem(training.trainer.configPath, true);
    if (found) {
      report.add(
        ['training', 'config'],
        `training.config names ${training.trainer.configPath}, which ${found}`,
        'Write the path of your Axolotl YAML relative to the workspace, e.g. config = "axolotl.yaml".',
      );
    }
  }
  const model = training.trainer.kind === 'axolotl' ? training.trainer.model : null;
  if (model !== null && !Object.hasOwn(model.extra, 'datasets')) {
    const found = uploadHolds(training.upload, TRAIN_DATA)
      ? problem(TRAIN_DATA, true)
      : 'is not uploaded';
    if (found) {
      report.add(
        ['training', 'base_model'],
        `the Axolotl config generated from [training] trains on ${TRAIN_DATA}, which ${found}`,
        `Put your dataset at ${TRAIN_DATA} (one chat per line: {"messages": [{"role": …, "content": …}]}) and upload it with upload = ["data"], or name your own in [training.axolotl_extra] datasets.`,
        'key',
      );
    }
  }
  training.upload.forEach((entry, index) => {
    const found = problem(entry, false);
    if (found) {
      report.add(
        ['training', 'upload', index],
        `training.upload names ${entry}, which ${found}`,
        'List files and folders of the workspace, relative to it, e.g. upload = ["train.py", "data/"].',
      );
    }
  });
  if (report.errors.length > 0) {
    const errors: ConfigError[] = [...report.errors].sort(
      (a, b) => a.line - b.line || a.column - b.column,
    );
    return { ok: false, errors, env: merged };
  }
  return { ...result, env: merged };
}

/**
 * Decodes `bytes` as UTF-8 (a leading BOM dropped), refusing the first byte that is not valid
 * UTF-8 instead of replacing it with U+FFFD: a Latin-1 file would otherwise be read as something
 * its author never wrote. The error names the byte, its line and its column (1-based, counted in
 * characters of the valid text before it).
 */
export function decodeUtf8(
  bytes: Uint8Array,
):
  | { ok: true; text: string }
  | { ok: false; error: { line: number; column: number; message: string; hint: string } } {
  try {
    return { ok: true, text: new TextDecoder('utf-8', { fatal: true }).decode(bytes) };
  } catch {
    // Walk the lossy decoding: the first U+FFFD that the bytes do not spell out (EF BF BD) is
    // where the first bad sequence starts.
    const lossy = new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes);
    let offset = 0;
    let line = 1;
    let column = 1;
    for (const char of lossy) {
      const spelled =
        bytes[offset] === 0xef && bytes[offset + 1] === 0xbf && bytes[offset + 2] === 0xbd;
      if (char === '\uFFFD' && !spelled) break;
      offset += Buffer.byteLength(char);
      if (char === '\n') {
        line += 1;
        column = 1;
      } else if (char !== '\uFEFF' || offset > 3) {
        column += 1;
      }
    }
    const byte = (bytes[offset] ?? 0).toString(16).toUpperCase().padStart(2, '0');
    return {
      ok: false,
      error: {
        line,
        column,
        message: `${CONFIG_FILE} is not UTF-8: byte 0x${byte} at line ${line}, column ${column} is not valid UTF-8`,
        hint: `Save ${CONFIG_FILE} as UTF-8 (most editors: "Save with Encoding" → UTF-8) and retype that character.`,
      },
    };
  }
}

const LOOPBACK_HOSTS = new Set(['localhost', '[::1]', '::1']);

function isLoopback(hostname: string): boolean {
  return LOOPBACK_HOSTS.has(hostname) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/**
 * The host of `baseUrl` when it is neither Runpod's own API host nor this machine (loopback):
 * every command that sends the API key there says so. Null for Runpod and loopback.
 */
export function otherApiHost(baseUrl: string): string | null {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    return baseUrl;
  }
  if (isLoopback(url.hostname)) return null;
  if (url.hostname === new URL(DEFAULT_RUNPOD_BASE_URL).hostname) return null;
  return url.host;
}

function envError(envVar: string, message: string, hint: string): ConfigError {
  return { file: `env:${envVar}`, line: 1, column: 1, key: envVar, message, hint, envVar };
}

/**
 * The Runpod settings of `env` (env only; overbrainer.toml refuses them):
 * `OVERBRAINER_RUNPOD__API_KEY` (null when unset) and
 * `OVERBRAINER_RUNPOD__BASE_URL` (https, or http on a loopback host only — the
 * test hook for the emulator). Errors never quote the key.
 */
export function runpodSettings(
  env: Env,
): { ok: true; settings: RunpodSettings } | { ok: false; errors: ConfigError[] } {
  const errors: ConfigError[] = [];
  let apiKey: string | null = null;
  const rawKey = env[ENV_API_KEY];
  if (rawKey !== undefined && rawKey.trim() !== '') {
    const key = rawKey.trim();
    if (key.startsWith('vault:')) {
      errors.push(
        envError(
          ENV_API_KEY,
          `${ENV_API_KEY} holds a vault: reference, which Overbrainer for VS Code cannot resolve`,
          'Set the key itself, or store it with "Overbrainer: Set Runpod API Key".',
        ),
      );
    } else if (!/^[\x21-\x7e]+$/.test(key)) {
      errors.push(
        envError(
          ENV_API_KEY,
          `${ENV_API_KEY} holds spaces or characters no Runpod key has`,
          'Copy the key again from the Runpod console (Settings → API Keys), without quotes or spaces.',
        ),
      );
    } else {
      apiKey = key;
    }
  }
  let baseUrl = DEFAULT_RUNPOD_BASE_URL;
  const rawUrl = env[ENV_BASE_URL]?.trim();
  if (rawUrl) {
    const hint = `Unset ${ENV_BASE_URL} to use ${DEFAULT_RUNPOD_BASE_URL}, or give an https:// URL (http:// only for 127.0.0.1 or localhost).`;
    let url: URL | null = null;
    try {
      url = new URL(rawUrl);
    } catch {
      errors.push(envError(ENV_BASE_URL, `${ENV_BASE_URL} is not a URL`, hint));
    }
    if (url) {
      if (url.username !== '' || url.password !== '') {
        errors.push(
          envError(ENV_BASE_URL, `${ENV_BASE_URL} must not hold a user name or password`, hint),
        );
      } else if (url.search !== '' || url.hash !== '') {
        errors.push(
          envError(ENV_BASE_URL, `${ENV_BASE_URL} must not hold a query or fragment`, hint),
        );
      } else if (!/^(\/[^/]+)*\/v2\/*$/.test(url.pathname)) {
        // Every route of another base answers 404, which must never read as "pod gone".
        errors.push(
          envError(
            ENV_BASE_URL,
            `${ENV_BASE_URL} is not a Runpod API v2 root: its path ${url.pathname} must end in /v2`,
            `Give the API's v2 root, e.g. ${DEFAULT_RUNPOD_BASE_URL} (the emulator prints its own: http://127.0.0.1:PORT/v2).`,
          ),
        );
      } else if (
        url.protocol === 'https:' ||
        (url.protocol === 'http:' && isLoopback(url.hostname))
      ) {
        baseUrl = url.href.replace(/\/+$/, '');
      } else {
        errors.push(
          envError(
            ENV_BASE_URL,
            url.protocol === 'http:'
              ? `${ENV_BASE_URL} uses plain http to a host that is not this machine, which would send the API key unencrypted`
              : `${ENV_BASE_URL} must be an https:// URL`,
            hint,
          ),
        );
      }
    }
  }
  if (errors.length > 0) return { ok: false, errors };
  return { ok: true, settings: { apiKey, baseUrl } };
}
