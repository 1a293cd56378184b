/**
 * The sections of overbrainer.toml once the document is read (./parse.ts): `[project]`,
 * `[training]` and each `[targets.NAME]` (a Runpod pod or the local machine), every value checked
 * against its zod schema and every problem reported at its place with what to write instead.
 */
import { ENV_SSH_CLIENT, envOnlyProblem, type Env } from './env';
import { LOCAL_FIELDS, PROJECT_FIELDS, RUNPOD_FIELDS, SSH_FIELDS } from './fields';
import { checkFields, describe, isTable, type Reporter, type Table } from './report';
import {
  DEFAULT_BOOT_GRACE_MINUTES,
  DEFAULT_MAX_RECOVERIES,
  DEFAULT_MAX_RETRIEVE_GB,
  DEFAULT_RETRIEVE_GRACE_MINUTES,
  DEFAULT_RUNPOD_IMAGE,
  DEFAULT_RUNPOD_VENV,
  TARGET_NAME,
  parseSshHost,
  sshHostEnvVar,
  type LocalTargetConfig,
  type SshTargetConfig,
  type RunpodTargetConfig,
  type TargetConfig,
} from './types';

export { checkTraining } from './training';

export function checkProject(report: Reporter, raw: unknown, workspaceName: string): string {
  if (!isTable(raw)) return workspaceName;
  const valid = checkFields(report, raw, ['project'], PROJECT_FIELDS, () => null);
  return valid.name ?? workspaceName;
}

export function checkTargets(
  report: Reporter,
  raw: unknown,
  env: Env,
): { valid: Record<string, TargetConfig>; names: Set<string> } {
  const valid = Object.create(null) as Record<string, TargetConfig>;
  const names = new Set<string>();
  if (!isTable(raw)) return { valid, names };
  const sshClientEnv = env[ENV_SSH_CLIENT]?.trim();
  if (sshClientEnv && sshClientEnv !== 'openssh' && sshClientEnv !== 'builtin') {
    report.errors.push({
      file: `env:${ENV_SSH_CLIENT}`,
      line: 1,
      column: 1,
      key: 'ssh_client',
      envVar: ENV_SSH_CLIENT,
      message: `${ENV_SSH_CLIENT} must be "openssh" or "builtin"`,
      hint: `Set ${ENV_SSH_CLIENT}=openssh, or unset it.`,
    });
  }
  for (const [name, table] of Object.entries(raw)) {
    const path = ['targets', name];
    // `__proto__` and friends pass the name pattern but must never become keys of a plain object.
    if (
      !TARGET_NAME.test(name) ||
      name === '__proto__' ||
      name === 'constructor' ||
      name === 'prototype'
    ) {
      const suggestion =
        name
          .toLowerCase()
          .replace(/[^a-z0-9_]+/g, '_')
          .replace(/^_+|_+$/g, '') || 'pod';
      report.add(
        path,
        `target name "${name.slice(0, 40)}" is not allowed: use lower-case letters, digits and _`,
        `Rename it, e.g. [targets.${suggestion === 'constructor' || suggestion === 'prototype' ? `${suggestion}_1` : suggestion}].`,
        'key',
      );
      continue;
    }
    names.add(name);
    if (!isTable(table)) {
      report.add(
        path,
        `targets.${name} must be a table, not ${describe(table)}`,
        `Write it as a [targets.${name}] section with kind = "runpod" or "local".`,
        'key',
      );
      continue;
    }
    const kind = table.kind;
    if (kind === 'runpod') {
      const target = checkRunpod(report, table, name, sshClientEnv);
      if (target) valid[name] = target;
    } else if (kind === 'local') {
      const target = checkLocal(report, table, name);
      if (target) valid[name] = target;
    } else if (kind === undefined) {
      report.add(
        path,
        `targets.${name} needs kind`,
        'Add kind = "runpod" (a GPU pod per run) or kind = "local" (this machine).',
        'key',
      );
    } else if (kind === 'ssh') {
      const target = checkSsh(report, table, name, sshClientEnv);
      if (target) valid[name] = target;
    } else {
      report.add(
        [...path, 'kind'],
        `targets.${name}.kind must be "runpod", "ssh" or "local", not ${describe(kind)}`,
        'Write kind = "runpod" for a GPU pod per run, kind = "ssh" for your own GPU machine, or kind = "local" for this machine.',
      );
    }
  }
  return { valid, names };
}

function checkRunpod(
  report: Reporter,
  table: Table,
  name: string,
  sshClientEnv: string | undefined,
): RunpodTargetConfig | null {
  const at = ['targets', name];
  const before = report.errors.length;
  const valid = checkFields(report, table, at, RUNPOD_FIELDS, (key, value) => {
    if (key === 'gpu_type') {
      const list = typeof value === 'string' ? `[${JSON.stringify(value)}]` : '["NVIDIA A40"]';
      return {
        message: 'gpu_type is the old single-type key',
        hint: `Did you mean gpu_types = ${list}? It is a list tried in order (or "auto").`,
      };
    }
    if (key === 'host')
      return envOnlyProblem(
        `targets.${name}.host`,
        `OVERBRAINER_TARGETS__${name.toUpperCase()}__HOST`,
      );
    return null;
  });
  const gpuTypes = valid.gpu_types;
  const dataCenterIds = valid.data_center_ids ?? [];
  const volume = valid.network_volume_id;
  if (gpuTypes !== undefined && gpuTypes !== 'auto') {
    for (const key of ['min_vram_gb', 'max_price_per_hour'] as const) {
      if (valid[key] !== undefined) {
        report.add(
          [...at, key],
          `${key} only applies to gpu_types = "auto"`,
          `Remove ${key}, or write gpu_types = "auto" to pick GPU types from the catalog by it.`,
          'key',
        );
      }
    }
  }
  if (volume !== undefined) {
    if (dataCenterIds === 'auto') {
      report.add(
        [...at, 'data_center_ids'],
        'data_center_ids = "auto" cannot go with a network volume: the pod must be in the volume\'s data center',
        'Write data_center_ids = ["<the volume\'s data center>"], e.g. ["EU-RO-1"].',
      );
    } else if (dataCenterIds.length !== 1) {
      report.add(
        [...at, 'network_volume_id'],
        `network_volume_id needs exactly one data_center_ids entry, the volume's data center (there ${dataCenterIds.length === 0 ? 'is none' : `are ${dataCenterIds.length}`})`,
        'Write data_center_ids = ["EU-RO-1"] with the data center Runpod shows for the volume.',
        'key',
      );
    }
  } else if (valid.max_volume_gb !== undefined) {
    report.add(
      [...at, 'max_volume_gb'],
      'max_volume_gb only applies with network_volume_id',
      'Remove max_volume_gb, or add network_volume_id for the volume it may grow.',
      'key',
    );
  }
  if (report.errors.length > before || gpuTypes === undefined) return null;
  const maxHours = valid.max_hours;
  if (maxHours === undefined) return null;
  const sshClient =
    sshClientEnv === 'openssh' || sshClientEnv === 'builtin'
      ? sshClientEnv
      : (valid.ssh_client ?? 'openssh');
  return {
    kind: 'runpod',
    name,
    gpuTypes: gpuTypes === 'auto' ? 'auto' : Object.freeze([...gpuTypes]),
    minVramGb: valid.min_vram_gb ?? null,
    maxPricePerHourUsd: valid.max_price_per_hour ?? null,
    gpuCount: valid.gpu_count ?? 1,
    nodes: valid.nodes ?? 1,
    image: valid.image ?? DEFAULT_RUNPOD_IMAGE,
    venv: valid.venv ?? DEFAULT_RUNPOD_VENV,
    containerDiskGb: valid.container_disk_gb ?? 50,
    maxHours,
    maxCostUsd: valid.max_cost_usd ?? null,
    maxRecoveries: valid.max_recoveries ?? DEFAULT_MAX_RECOVERIES,
    bootGraceS: (valid.boot_grace_minutes ?? DEFAULT_BOOT_GRACE_MINUTES) * 60,
    retrieveGraceS: (valid.retrieve_grace_minutes ?? DEFAULT_RETRIEVE_GRACE_MINUTES) * 60,
    maxRetrieveGb: valid.max_retrieve_gb ?? DEFAULT_MAX_RETRIEVE_GB,
    dataCenterIds: dataCenterIds === 'auto' ? 'auto' : Object.freeze([...dataCenterIds]),
    networkVolumeId: volume ?? null,
    maxVolumeGb: valid.max_volume_gb ?? null,
    sshClient,
  };
}

/**
 * What an unknown key of target `name` (not a runpod one) is told: a key of a container runtime
 * (`notRead`) is not read, for `why`; a runpod key only applies to kind = "runpod".
 */
function notRunpodKey(
  name: string,
  notRead: readonly string[],
  why: string,
): (key: string) => { message: string; hint: string } | null {
  return (key) => {
    if (notRead.includes(key)) {
      return { message: `targets.${name}.${key} is not read: ${why}`, hint: `Remove ${key}.` };
    }
    if (Object.hasOwn(RUNPOD_FIELDS, key)) {
      return {
        message: `targets.${name}.${key} only applies to kind = "runpod"`,
        hint: `Remove ${key}, or write kind = "runpod" for a GPU pod per run.`,
      };
    }
    return null;
  };
}

function checkLocal(report: Reporter, table: Table, name: string): LocalTargetConfig | null {
  const before = report.errors.length;
  const valid = checkFields(
    report,
    table,
    ['targets', name],
    LOCAL_FIELDS,
    notRunpodKey(
      name,
      ['engine', 'image'],
      'a local target runs its job on this machine, not in a container',
    ),
  );
  if (report.errors.length > before) return null;
  return { kind: 'local', name, venv: valid.venv ?? null };
}

/**
 * `kind = "ssh"`: the user's own machine. Its `host` comes from OVERBRAINER_TARGETS__<NAME>__HOST
 * only (an address with a user in a shared file says where to log in); unset, the target loads
 * and a command on it names the variable to set.
 */
function checkSsh(
  report: Reporter,
  table: Table,
  name: string,
  sshClientEnv: string | undefined,
): SshTargetConfig | null {
  const at = ['targets', name];
  const before = report.errors.length;
  const envVar = sshHostEnvVar(name);
  const fromEnv = report.envVarOf([...at, 'host']) !== undefined;
  if (table.host !== undefined && !fromEnv) {
    const problem = envOnlyProblem(`targets.${name}.host`, envVar);
    report.add([...at, 'host'], problem.message, problem.hint, 'key');
  }
  const fields = Object.fromEntries(Object.entries(table).filter(([key]) => key !== 'host'));
  const valid = checkFields(
    report,
    fields,
    at,
    SSH_FIELDS,
    notRunpodKey(
      name,
      ['runtime', 'engine', 'image'],
      'an ssh target runs its job natively on the machine',
    ),
  );
  let host = null;
  if (fromEnv) {
    const text = typeof table.host === 'string' ? table.host : '';
    host = parseSshHost(text);
    if (host === null) {
      report.add(
        [...at, 'host'],
        `${envVar} must be user@host or user@host:port, not ${describe(table.host)}`,
        `Set ${envVar}=me@gpu-box (or me@gpu-box:2222).`,
      );
    }
  }
  if (report.errors.length > before) return null;
  const sshClient =
    sshClientEnv === 'openssh' || sshClientEnv === 'builtin'
      ? sshClientEnv
      : (valid.ssh_client ?? 'openssh');
  return {
    kind: 'ssh',
    name,
    host,
    workdir: valid.workdir ?? 'overbrainer',
    sshClient,
    venv: valid.venv ?? null,
  };
}
