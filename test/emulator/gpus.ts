/**
 * The emulator's stand-in for the GPU hardware: its pods have no GPU, so each ships an
 * `nvidia-smi` (POSIX sh + awk) that answers the query the product makes
 * (`--query-gpu=<fields> --format=csv[,noheader][,nounits]`, and `-L`) with figures a test sets:
 * one line per GPU of the pod (its count, its type's name and VRAM from the catalog), the
 * utilisation, memory, temperature and power of the setting (`busy` by default).
 *
 * The stand-in lies over the pod's `/usr/local/bin` (a read-only overlay, so the host's own files
 * there stay visible and untouched; a bind over `/usr/local/sbin` where overlays are refused) and
 * reads the pod's figures file on the host at each call (`<stateDir>/gpus/<podId>.csv`): a new
 * setting takes effect at the next call, with no restart.
 */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { GpuTypeSpec } from './catalog';

/** Named settings: what a test wants the job to look like. */
export const GPU_PRESETS = ['busy', 'idle', 'lowMemory', 'outOfMemory', 'noDriver'] as const;
export type GpuPreset = (typeof GPU_PRESETS)[number];

/** One GPU's figures; memory as MiB used or as a fraction of the card. */
export interface GpuFigures {
  utilizationPct: number;
  memoryUsedMiB?: number;
  memoryUsedFraction?: number;
  temperatureC?: number;
  /** Null: the card does not report it (`[N/A]`, as some do). */
  powerW?: number | null;
}

/**
 * What a pod's GPUs answer: a preset for all, or figures per GPU index (the last repeats for the
 * GPUs after it).
 */
export type GpuSetting = GpuPreset | GpuFigures[];

const PRESET_FIGURES: Record<Exclude<GpuPreset, 'noDriver'>, GpuFigures> = {
  busy: { utilizationPct: 97, memoryUsedFraction: 0.78, temperatureC: 68, powerW: 0.82 },
  // The model loaded, the GPU waiting: the memory is held, nothing computes.
  idle: { utilizationPct: 0, memoryUsedFraction: 0.62, temperatureC: 34, powerW: 0.14 },
  lowMemory: { utilizationPct: 91, memoryUsedFraction: 0.09, temperatureC: 61, powerW: 0.55 },
  outOfMemory: { utilizationPct: 100, memoryUsedFraction: 1, temperatureC: 74, powerW: 0.96 },
};

/** The fields the stand-in knows, in the order of its figures file. */
export const STAND_IN_FIELDS = [
  'index',
  'name',
  'uuid',
  'utilization.gpu',
  'memory.used',
  'memory.total',
  'temperature.gpu',
  'power.draw',
  'power.limit',
] as const;

/** A card's board power limit (W), by VRAM: roughly what Runpod's cards allow. */
function powerLimitW(memoryGb: number): number {
  if (memoryGb >= 80) return 700;
  if (memoryGb >= 40) return 400;
  if (memoryGb >= 24) return 450;
  return 300;
}

/** Validates a setting (from a test or the admin route); throws saying what is wrong. */
export function parseGpuSetting(value: unknown): GpuSetting {
  if (typeof value === 'string') {
    if ((GPU_PRESETS as readonly string[]).includes(value)) return value as GpuPreset;
    throw new Error(`unknown GPU preset '${value}': one of ${GPU_PRESETS.join(', ')}`);
  }
  if (!Array.isArray(value) || value.length === 0) {
    throw new Error('gpus: a preset name or a non-empty array of {utilizationPct, …}');
  }
  return value.map((item: unknown, i) => {
    const o = item as Record<string, unknown>;
    const num = (key: string, min: number, max: number, optional: boolean): void => {
      const v = o?.[key];
      if (v === undefined && optional) return;
      if (v === null && key === 'powerW') return;
      if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
        throw new Error(`gpus[${i}].${key}: a number from ${min} to ${max}`);
      }
    };
    num('utilizationPct', 0, 100, false);
    num('memoryUsedMiB', 0, 1e7, true);
    num('memoryUsedFraction', 0, 1, true);
    num('temperatureC', 0, 120, true);
    num('powerW', 0, 2000, true);
    return o as unknown as GpuFigures;
  });
}

/** The pod's figures file: a header naming the fields, then one CSV line per GPU. */
export function figuresFile(
  setting: GpuSetting,
  type: Pick<GpuTypeSpec, 'id' | 'memoryGb'>,
  count: number,
  podId: string,
): string {
  if (setting === 'noDriver') {
    return "@fail 9 NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n";
  }
  const totalMiB = Math.round(type.memoryGb * 1024);
  const limitW = powerLimitW(type.memoryGb);
  const lines = [STAND_IN_FIELDS.join(',')];
  for (let i = 0; i < count; i++) {
    const figures =
      typeof setting === 'string'
        ? PRESET_FIGURES[setting]
        : (setting[Math.min(i, setting.length - 1)] as GpuFigures);
    const usedMiB = Math.min(
      totalMiB,
      Math.round(figures.memoryUsedMiB ?? (figures.memoryUsedFraction ?? 0) * totalMiB),
    );
    const preset = typeof setting === 'string';
    // Presets give power as a share of the limit; figures in watts.
    const power =
      figures.powerW === null
        ? '[N/A]'
        : (preset ? (figures.powerW ?? 0.5) * limitW : (figures.powerW ?? 0.5 * limitW)).toFixed(2);
    const uuid = `GPU-${podId.padEnd(8, '0').slice(0, 8)}-0000-4000-8000-${String(i).padStart(12, '0')}`;
    lines.push(
      [
        i,
        type.id.startsWith('NVIDIA') ? type.id : `NVIDIA ${type.id}`,
        uuid,
        Math.round(figures.utilizationPct),
        usedMiB,
        totalMiB,
        Math.round(figures.temperatureC ?? 50),
        power,
        limitW.toFixed(2),
      ].join(','),
    );
  }
  return `${lines.join('\n')}\n`;
}

/** Writes the figures file whole (a rename: a call never reads half of it). */
export function writeFigures(path: string, text: string): void {
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, text, { mode: 0o644 });
  renameSync(temp, path);
}

/** Where the pod's figures live on the host. */
export function figuresPath(stateDir: string, podId: string): string {
  const dir = join(stateDir, 'gpus');
  mkdirSync(dir, { recursive: true });
  return join(dir, `${podId}.csv`);
}

function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/**
 * The stand-in itself, reading `figuresAt` (a host path the pod sees: the pod's mount namespace
 * shares the host's files outside its own mounts). As nvidia-smi does: an unknown field says
 * `Field "x" is not a valid field to query.` and exits 2; units (`%`, `MiB`, `W`) and a header
 * unless `nounits` / `noheader`; fields separated by `, `.
 */
export function standInScript(figuresAt: string): string {
  return [
    '#!/bin/sh',
    "# The Runpod emulator's stand-in for nvidia-smi: its pods have no GPU. It answers",
    '# --query-gpu=... --format=csv[,noheader][,nounits] (and -L) with the figures a test set.',
    `figures=${shellQuote(figuresAt)}`,
    'query=; format=; list=',
    'while [ $# -gt 0 ]; do',
    '  case $1 in',
    '    --query-gpu=*) query=${1#--query-gpu=} ;;',
    '    --query-gpu) shift; query=$1 ;;',
    '    --format=*) format=${1#--format=} ;;',
    '    --format) shift; format=$1 ;;',
    '    -L|--list-gpus) list=1 ;;',
    '    -h|--help) echo "NVIDIA System Management Interface (Runpod emulator stand-in)"; exit 0 ;;',
    '    *) echo "Invalid combination of input arguments. Please run \'nvidia-smi -h\' for help." >&2; exit 2 ;;',
    '  esac',
    '  shift',
    'done',
    'first=$(head -n 1 "$figures" 2>/dev/null)',
    'case $first in',
    '  \'@fail \'*) rest=${first#@fail }; echo "${rest#* }"; exit "${rest%% *}" ;;',
    "  '') echo 'No devices were found'; exit 6 ;;",
    'esac',
    'if [ -n "$list" ]; then',
    '  awk -F, \'NR > 1 { printf "GPU %s: %s (UUID: %s)\\n", $1, $2, $3 }\' "$figures"; exit 0',
    'fi',
    'if [ -z "$query" ]; then',
    '  awk -F, \'NR > 1 { printf "GPU %s: %s, %s %%, %s MiB / %s MiB, %s C, %s W\\n", $1, $2, $4, $5, $6, $7, $8 }\' "$figures"; exit 0',
    'fi',
    'case ,$format, in *,csv,*) ;; *) echo "Please specify a valid format: --format=csv[,noheader][,nounits]" >&2; exit 2 ;; esac',
    'header=1; units=1',
    'case ,$format, in *,noheader,*) header= ;; esac',
    'case ,$format, in *,nounits,*) units= ;; esac',
    'awk -F, -v query="$query" -v header="$header" -v units="$units" \'',
    'NR == 1 {',
    '  for (i = 1; i <= NF; i++) col[$i] = i',
    '  n = split(query, q, ",")',
    '  for (j = 1; j <= n; j++) {',
    '    gsub(/^ +| +$/, "", q[j])',
    '    if (!(q[j] in col)) { printf "Field \\"%s\\" is not a valid field to query.\\n\\n", q[j]; bad = 1; exit 2 }',
    '  }',
    '  if (header) {',
    '    line = ""',
    '    for (j = 1; j <= n; j++) line = line (j > 1 ? ", " : "") q[j] unit(q[j], 1)',
    '    print line',
    '  }',
    '  next',
    '}',
    '{',
    '  line = ""',
    '  for (j = 1; j <= n; j++) {',
    '    v = $(col[q[j]])',
    '    if (units && v !~ /^\\[/) v = v unit(q[j], 0)',
    '    line = line (j > 1 ? ", " : "") v',
    '  }',
    '  print line',
    '}',
    'function unit(f, inHeader) {',
    '  if (!units) return ""',
    '  if (f == "utilization.gpu") return inHeader ? " [%]" : " %"',
    '  if (f ~ /^memory\\./) return inHeader ? " [MiB]" : " MiB"',
    '  if (f ~ /^power\\./) return inHeader ? " [W]" : " W"',
    '  return ""',
    '}',
    '\' "$figures"',
    '',
  ].join('\n');
}

/** The init script's lines that put `binDir`'s nvidia-smi on the pod's PATH. */
export function standInMountLines(binDir: string): string[] {
  const dir = shellQuote(binDir);
  return [
    // A read-only overlay keeps the host's /usr/local/bin visible beside the stand-in.
    `if ! mount -t overlay overlay -o lowerdir=${dir}:/usr/local/bin /usr/local/bin 2>/dev/null; then`,
    `  mkdir -p /usr/local/sbin && mount --bind ${dir} /usr/local/sbin || fail gpu stand-in`,
    'fi',
  ];
}
