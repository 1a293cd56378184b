/**
 * The typed configuration the rest of the core uses: `overbrainer.toml` layered
 * with `OVERBRAINER_*` environment variables, validated, with units in names.
 * The user's key names (`max_hours`) only exist at the edge, in ./parse.ts.
 */
import type { BudgetConfig } from './budget';
import type { SweepConfig } from './sweep';

/** Image of a Runpod pod when a target sets none: Axolotl 0.19.0's cloud image for CUDA 13, pinned by its index digest. */
export const DEFAULT_RUNPOD_IMAGE =
  'axolotlai/axolotl-cloud-term:0.19.0-py3.12-cu130-2.12.1@sha256:f7b94da82913920a003e28e091d8528f57f76da7360fca87e95faf62fa32a680';

/** Virtual environment holding Axolotl in {@link DEFAULT_RUNPOD_IMAGE}. */
export const DEFAULT_RUNPOD_VENV = '/workspace/axolotl-venv';

/** Recoveries on a new pod a run gets when the target does not say (`max_recoveries`). */
export const DEFAULT_MAX_RECOVERIES = 2;

/**
 * Most a retrieval brings home (GB, 10^9 bytes) when the target does not say
 * (`max_retrieve_gb`): a real fine-tune's outputs fit in it, a job's sparse terabytes do not.
 */
export const DEFAULT_MAX_RETRIEVE_GB = 200;

/** `boot_grace_minutes` and `retrieve_grace_minutes` when the target does not say. */
export const DEFAULT_BOOT_GRACE_MINUTES = 30;
export const DEFAULT_RETRIEVE_GRACE_MINUTES = 60;

/** Base URL of the Runpod REST API (v2) when OVERBRAINER_RUNPOD__BASE_URL is unset. */
export const DEFAULT_RUNPOD_BASE_URL = 'https://api.runpod.io/v2';

/** What comes back from a run when `training.artifacts` is unset. */
export const DEFAULT_ARTIFACTS: readonly string[] = Object.freeze([
  'output/',
  'metrics.jsonl',
  'job.log',
]);

/** The configuration file, at the workspace root. */
export const CONFIG_FILE = 'overbrainer.toml';

/** Where a network volume is mounted on a pod. */
export const NETWORK_VOLUME_MOUNT = '/workspace/data';

/** Target names: `[targets.NAME]`. */
export const TARGET_NAME = /^[a-z0-9_]+$/;

/** A list, or `"auto"`: chosen from the Runpod catalog when the run starts. */
export type ListOrAuto = readonly string[] | 'auto';

/** The most nodes Runpod's cluster create takes (`compute.podCount`: 2 to 250). */
export const MAX_CLUSTER_NODES = 250;
/** What Runpod's self-serve accounts get (its Instant Clusters pages); more goes through its sales. */
export const SELF_SERVE_MAX_NODES = 8;

export interface RunpodTargetConfig {
  kind: 'runpod';
  name: string;
  /** Runpod GPU type IDs tried in order, or `auto` (from the catalog, cheapest first). */
  gpuTypes: ListOrAuto;
  /** Least VRAM per GPU for `auto`. */
  minVramGb: number | null;
  /** Highest list price of one GPU for `auto`. */
  maxPricePerHourUsd: number | null;
  /** GPUs on each node (each pod). */
  gpuCount: number;
  /**
   * `nodes`: 1, one pod; 2 or more, one Runpod Instant Cluster of that many identical pods,
   * the job launched on every one by torchrun. `max_hours`, `max_cost_usd` (the cluster's
   * total) and the rest apply to the whole cluster.
   */
  nodes: number;
  image: string;
  /** Absolute path on the pod of the virtual environment holding `bin/axolotl`. */
  venv: string;
  containerDiskGb: number;
  /** The pod's watchdog deletes the pod this long after its create call (not for a kept pod). */
  maxHours: number;
  /**
   * `max_cost_usd`: most a run may spend on its pod, as the user set it; null for no cap.
   * Ignored for a kept pod. The budget may grant a run less (`budgetCapUsd`); the pod records
   * the cap it was armed with (`costCapUsd`).
   */
  maxCostUsd: number | null;
  /**
   * How many times a run whose pod died while its job ran goes on by itself on a new pod, from
   * its newest verified checkpoint, within what is left of max_hours and max_cost_usd; 0: never.
   */
  maxRecoveries: number;
  /** The watchdog deletes a pod whose job never started after this long. */
  bootGraceS: number;
  /** The watchdog deletes a pod whose ended job was not retrieved after this long. */
  retrieveGraceS: number;
  /**
   * Most one retrieval (the results, a streamed checkpoint) brings home, in GB (10^9 bytes):
   * more is refused before anything is downloaded, the pod kept for its retrieve grace.
   */
  maxRetrieveGb: number;
  /** Data centers the pod may be placed in (empty: any), or `auto`. */
  dataCenterIds: ListOrAuto;
  /** Network volume mounted at /workspace/data; null for none. */
  networkVolumeId: string | null;
  /** Largest size overbrainer may grow the network volume to; null: never grows. */
  maxVolumeGb: number | null;
  /**
   * The client of the user's shells on a pod (Open SSH Terminal, `runs ssh`, the command `runs
   * show` prints): the system `ssh`, or Overbrainer's own (OVERBRAINER_SSH_CLIENT overrides).
   */
  sshClient: 'openssh' | 'builtin';
}

export interface LocalTargetConfig {
  kind: 'local';
  name: string;
  /** Absolute path of a virtual environment whose `bin` goes first on the job's PATH; null for none. */
  venv: string | null;
}

/** Where a `kind = "ssh"` target's machine answers: `user@host[:port]`. */
export interface SshHostAddress {
  user: string;
  /** A host name, an address, or a `Host` alias of the user's SSH config. */
  host: string;
  /** Null when not given: the user's SSH config says, else 22. */
  port: number | null;
}

/** The user's own GPU machine over SSH: the run's job in `workdir/<run-id>`, no pod, no watchdog. */
export interface SshTargetConfig {
  kind: 'ssh';
  name: string;
  /**
   * From OVERBRAINER_TARGETS__<NAME>__HOST (env only); null when unset, which a command on the
   * target refuses with the variable to set.
   */
  host: SshHostAddress | null;
  /** The runs' directory on the machine, relative to the SSH user's home or absolute. */
  workdir: string;
  /** The client of the user's shells on the machine (OVERBRAINER_SSH_CLIENT overrides). */
  sshClient: 'openssh' | 'builtin';
  /** Absolute path of a virtual environment on the machine; null for none. */
  venv: string | null;
}

/** `OVERBRAINER_TARGETS__<NAME>__HOST`: the variable an ssh target's address is read from. */
export function sshHostEnvVar(targetName: string): string {
  return `OVERBRAINER_TARGETS__${targetName.toUpperCase()}__HOST`;
}

/** `user@host[:port]` parsed; null when it is not of that shape. */
export function parseSshHost(text: string): SshHostAddress | null {
  const match =
    /^([A-Za-z0-9._][A-Za-z0-9._-]*)@([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?$/.exec(
      text.trim(),
    );
  if (match === null) return null;
  const port = match[3] === undefined ? null : Number(match[3]);
  if (port !== null && (port < 1 || port > 65535)) return null;
  return { user: match[1]!, host: match[2]!.replace(/^\[|\]$/g, ''), port };
}

export type TargetConfig = RunpodTargetConfig | LocalTargetConfig | SshTargetConfig;

/** The model keys of `[training]` (the overbrainer CLI's): the Axolotl config is generated from them. */
export interface AxolotlModel {
  baseModel: string;
  adapter: 'lora' | 'qlora' | 'full';
  epochs: number;
  learningRate: number;
  loraR: number;
  loraAlpha: number;
  loraDropout: number;
  sequenceLen: number;
  microBatchSize: number;
  gradientAccumulationSteps: number;
  optimizer: string;
  lrScheduler: string;
  samplePacking: boolean;
  evalsPerEpoch: number;
  savesPerEpoch: number;
  /** `axolotl_extra`: deep-merged over the generated config (tables merge, other values replace). */
  extra: Readonly<Record<string, unknown>>;
}

/** The dataset a generated Axolotl config trains on, relative to the run directory. */
export const TRAIN_DATA = 'data/train.jsonl';
/** The evaluation dataset a generated Axolotl config names when it is uploaded. */
export const EVAL_DATA = 'data/eval.jsonl';

/** Whether `file` (relative) is inside one of the `upload` entries (so it reaches the run). */
export function uploadHolds(upload: readonly string[], file: string): boolean {
  return upload.some((entry) => entry === file || file.startsWith(`${entry}/`));
}

/** How the job is started in the run directory. */
export type TrainerConfig =
  | {
      kind: 'axolotl';
      /**
       * The user's own Axolotl YAML, relative to the workspace (`/`-separated, inside it); null
       * when the config is generated from {@link AxolotlModel}.
       */
      configPath: string | null;
      /** The model keys the config is generated from; null with the user's own YAML. */
      model: AxolotlModel | null;
    }
  | {
      kind: 'command';
      /**
       * A shell command run with `sh -c` in the run directory; with a launcher, the script and
       * its arguments the launcher starts.
       */
      command: string;
      /** `launcher = "torchrun"`: the command started by torchrun on every node; null: as is. */
      launcher: 'torchrun' | null;
    };

export interface TrainingConfig {
  /** The default target; null when unset (the command then asks, or a single target is used). */
  target: string | null;
  trainer: TrainerConfig;
  /** Files and folders copied into the run directory, relative to the workspace (`/`-separated, inside it). */
  upload: readonly string[];
  /** What comes back from the run directory, relative to it; a trailing `/` marks a folder. */
  artifacts: readonly string[];
  /** `merge`: Axolotl's LoRA merge runs after training, into `output/merged/`. */
  merge: boolean;
  /** `hub_model_id` (`me/model`): the result is pushed to the Hugging Face Hub at the job's end; null: not. */
  hubModelId: string | null;
  /** The Hub's base URL the push goes to (`HF_ENDPOINT`, else https://huggingface.co); null without hub_model_id. */
  hubEndpoint: string | null;
  /**
   * `secrets`: names of further secrets (`WANDB_API_KEY`) the job gets in its environment, read
   * from the environment or VS Code's secret storage; never written anywhere.
   */
  secrets: readonly string[];
}

export interface OverbrainerConfig {
  /** The file the configuration was read from (as given to the parser). */
  file: string;
  /** The project name (run IDs start with its slug). */
  projectName: string;
  /** `[training]`; null when the file has none (only pod and run commands work then). */
  training: TrainingConfig | null;
  /** Targets by name (a null-prototype object: names never reach Object.prototype). */
  targets: Readonly<Record<string, TargetConfig>>;
  /** `[budget]`; null or absent when the file has none (no budget). */
  budget?: BudgetConfig | null;
  /** `[sweep]`; null or absent when the file has none. */
  sweep?: SweepConfig | null;
}

/** Runpod API access: env only, never in overbrainer.toml. */
export interface RunpodSettings {
  /** The API key, or null when unset (Runpod commands then ask for it). Never log it. */
  apiKey: string | null;
  /** Without a trailing slash. */
  baseUrl: string;
}

/**
 * One configuration problem. Every error has a place: a line and column of the
 * file, or (for a value from the environment) the variable in `envVar` with
 * `file` set to `env:NAME`, line and column 1.
 */
export interface ConfigError {
  file: string;
  line: number;
  column: number;
  /** Dotted path of the key, e.g. `targets.pod.max_hours`; empty for the whole file. */
  key: string;
  message: string;
  /** A sentence saying what to write instead. */
  hint: string;
  envVar?: string;
}

export type ConfigResult =
  { ok: true; config: OverbrainerConfig } | { ok: false; errors: ConfigError[] };

/** `file:line:column: message. hint`, or `NAME: message. hint` for an environment variable. */
export function formatConfigError(error: ConfigError): string {
  return `${configErrorWithoutHint(error)} ${error.hint}`;
}

/** {@link formatConfigError} without the hint: where, and what is wrong. */
export function configErrorWithoutHint(error: ConfigError): string {
  // An environment error's message already starts with its variable's name: not twice.
  if (error.envVar !== undefined && error.message.startsWith(error.envVar)) {
    return `${error.message}.`;
  }
  const where = error.envVar ?? `${error.file}:${error.line}:${error.column}`;
  return `${where}: ${error.message}.`;
}

/**
 * The directory on the pod that holds the runs: `/workspace/overbrainer`, or
 * `/workspace/data/overbrainer` on a network volume (mounted at /workspace/data).
 */
export function workdirFor(target: RunpodTargetConfig): string {
  return target.networkVolumeId === null
    ? '/workspace/overbrainer'
    : `${NETWORK_VOLUME_MOUNT}/overbrainer`;
}
