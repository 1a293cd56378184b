/**
 * The CLI's listings as tables and as `--json` documents. The JSON field names are a stable,
 * documented interface (README, "--json fields"): snake_case, one top-level key holding the
 * array, null where a value is unknown. Pure functions, so the unit tests pin them.
 */
import {
  type DataCenter,
  type GpuType,
  type NetworkVolume,
  type Template,
  inStock,
  cell,
  type PodRow,
} from '../core/flow/pods';
import { table, type RunLine } from './format';

/**
 * The `keys` of `item` under their snake_case names (`dataCenterId` → `data_center_id`), in the
 * order given: the JSON fields that only rename a field of the listed object.
 */
export function snakeFields<T extends object, K extends keyof T & string>(
  item: T,
  keys: readonly K[],
): Record<string, T[K]> {
  return Object.fromEntries(
    keys.map((key) => [key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), item[key]]),
  );
}

/** `runs ls --json`. */
export function runsJson(lines: readonly RunLine[]): { runs: Record<string, unknown>[] } {
  return {
    runs: lines.map(({ run, pod, podProblem }) => ({
      run_id: run.id,
      state: run.state,
      target: run.target,
      created: run.created,
      message: run.message,
      pod_id: pod?.podId ?? null,
      pod_state: pod?.state ?? null,
      gpu_type: pod?.gpuType ?? null,
      pod_problem: podProblem,
    })),
  };
}

/** `pod ls --json`. */
export function podsJson(rows: readonly PodRow[]): { pods: Record<string, unknown>[] } {
  return {
    pods: rows.map((r) => ({
      ...snakeFields(r, ['runId', 'podId', 'status']),
      gpu_type: r.gpu,
      usd_per_hour: r.costPerHourUsd,
      ...snakeFields(r, ['created', 'note', 'orphan']),
      ...(r.cluster ? { cluster_id: r.cluster.id, node_rank: r.cluster.rank } : {}),
    })),
  };
}

/**
 * The GPU types offered in data center `id`, each with that data center's stock as its own
 * (`pod gpus --data-center ID`).
 */
export function gpusIn(gpus: readonly GpuType[], id: string): GpuType[] {
  return gpus.flatMap((gpu) => {
    const dc = gpu.dataCenters.find((d) => d.id === id);
    return dc === undefined ? [] : [{ ...gpu, availability: dc.availability, dataCenters: [dc] }];
  });
}

/** `pod gpus --json`. */
export function gpusJson(gpus: readonly GpuType[]): { gpus: Record<string, unknown>[] } {
  return {
    gpus: gpus.map((g) => ({
      ...snakeFields(g, ['id', 'displayName']),
      memory_gb: g.memoryInGb,
      usd_per_hour: g.securePricePerHourUsd,
      availability: g.availability,
      data_centers_in_stock: g.dataCenters.filter((d) => inStock(d.availability)).map((d) => d.id),
    })),
  };
}

/** `pod datacenters`: ID, name, region, the GPU types in stock there. */
export function dataCentersTable(dcs: readonly DataCenter[]): string[] {
  if (dcs.length === 0) return ['pod: no data center'];
  return table([
    ['ID', 'NAME', 'REGION', 'VOLUMES', 'GPU TYPES IN STOCK'],
    ...dcs.map((dc) => {
      const gpus = dc.gpuAvailability.filter((g) => inStock(g.availability)).map((g) => g.id);
      return [
        cell(dc.id),
        cell(dc.name),
        cell(dc.region ?? '-'),
        cell(dc.networkVolumeTypes.join(',')) || '-',
        cell(gpus.join(', ')) || '-',
      ];
    }),
  ]);
}

/** `pod datacenters --json`. */
export function dataCentersJson(dcs: readonly DataCenter[]): {
  data_centers: Record<string, unknown>[];
} {
  return {
    data_centers: dcs.map((dc) => ({
      ...snakeFields(dc, ['id', 'name', 'region', 'globalNetwork', 'networkVolumeTypes']),
      gpu_types_in_stock: dc.gpuAvailability
        .filter((g) => inStock(g.availability))
        .map((g) => ({ id: g.id, availability: g.availability })),
    })),
  };
}

/** `pod volumes`: ID, name, size, data center, type. */
export function volumesTable(volumes: readonly NetworkVolume[]): string[] {
  if (volumes.length === 0) return ['pod: no network volume on this Runpod account'];
  return table([
    ['ID', 'NAME', 'SIZE', 'DATA CENTER', 'TYPE'],
    ...volumes.map((v) => [
      cell(v.id),
      cell(v.name),
      `${v.sizeGb} GB`,
      cell(v.dataCenterId),
      cell(v.type ?? '-'),
    ]),
  ]);
}

/** `pod volumes --json`. */
export function volumesJson(volumes: readonly NetworkVolume[]): {
  volumes: Record<string, unknown>[];
} {
  return {
    volumes: volumes.map((v) => snakeFields(v, ['id', 'name', 'sizeGb', 'dataCenterId', 'type'])),
  };
}

/** `pod templates`: ID, name, image, public or private. */
export function templatesTable(templates: readonly Template[]): string[] {
  if (templates.length === 0) return ['pod: no pod template on this Runpod account'];
  return table([
    ['ID', 'NAME', 'IMAGE', 'PUBLIC'],
    ...templates.map((t) => [cell(t.id), cell(t.name), cell(t.image), t.isPublic ? 'yes' : 'no']),
  ]);
}

/** `pod templates --json`. */
export function templatesJson(templates: readonly Template[]): {
  templates: Record<string, unknown>[];
} {
  return {
    templates: templates.map((t) => ({
      ...snakeFields(t, ['id', 'name', 'image']),
      public: t.isPublic,
      category: t.category,
    })),
  };
}
