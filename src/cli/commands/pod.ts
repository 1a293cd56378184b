/**
 * `pod …`: the account's pods (ls, rm) and the Runpod catalog a target is written from (gpus,
 * datacenters, volumes, templates). The catalog commands need only the API key, never a
 * config, and are read-only within the read-only time limit; an empty listing prints one line.
 */
import { listPods, podTable, removeRunOrPod } from '../../core/flow/pods';
import type { Command } from '../args';
import { filterGpus, gpusTable, removedLine } from '../format';
import {
  dataCentersJson,
  dataCentersTable,
  gpusIn,
  gpusJson,
  podsJson,
  templatesJson,
  templatesTable,
  volumesJson,
  volumesTable,
} from '../listings';
import { EXIT_OK, Interrupts, printJson, type Session } from '../session';

function printLines(s: Session, lines: readonly string[]): number {
  for (const line of lines) s.io.stdout(line);
  return EXIT_OK;
}

/** `pod ls`: the account's overbrainer pods, matched with runs/. */
export async function podLs(s: Session, json: boolean): Promise<number> {
  s.config(false);
  const client = s.api(true)!;
  const rows = await s.readOnly(client, (api, signal) =>
    listPods(s.workspace, { client: api, signal }),
  );
  if (json) return printJson(s, podsJson(rows));
  if (rows.length === 0) {
    s.io.stdout('pod: no overbrainer pod on this Runpod account');
    return EXIT_OK;
  }
  for (const line of podTable(rows)) s.io.stdout(line);
  return EXIT_OK;
}

export async function podRm(s: Session, runId: string, force: boolean): Promise<number> {
  s.config(false);
  s.api(true); // no key: a configuration error, before anything runs
  // Every delete is shielded: Ctrl-C is only noted.
  s.interrupts = new Interrupts(s.io, s.renderer, null);
  const removal = await removeRunOrPod(s.workspace, runId, { force });
  if (removal.removed.length === 0 && removal.error === null) {
    s.io.stdout(`pod: no pod for run ${runId}`);
  }
  // Every deleted pod is printed, even when the command fails overall.
  for (const pod of removal.removed) s.io.stdout(removedLine(pod));
  if (removal.error !== null) return s.fail(removal.error);
  return EXIT_OK;
}

/** `pod gpus`: Secure-cloud GPU types, cheapest first; `--data-center ID` with that one's stock. */
export async function podGpus(
  s: Session,
  command: Extract<Command, { kind: 'pod_gpus' }>,
): Promise<number> {
  s.config(false);
  const client = s.api(true)!;
  const gpus = await s.readOnly(client, (api, signal) =>
    api.listGpuTypes({ count: 1, cloud: 'SECURE', includeAvailability: true, signal }),
  );
  const offered = command.dataCenter === undefined ? gpus : gpusIn(gpus, command.dataCenter);
  const matching = filterGpus(offered, {
    minVramGb: command.minVramGb,
    maxPricePerHourUsd: command.maxPricePerHourUsd,
    inStockOnly: command.inStock,
  });
  if (command.json) return printJson(s, gpusJson(matching));
  if (matching.length === 0) {
    s.io.stdout(
      command.dataCenter === undefined
        ? 'pod: no GPU type matches'
        : `pod: no GPU type matches in data center ${command.dataCenter} (overbrainer pod datacenters lists them)`,
    );
    return EXIT_OK;
  }
  return printLines(s, gpusTable(matching));
}

/** `pod datacenters` (`GET /catalog/datacenters?include=GPU_AVAILABILITY`). */
export async function podDataCenters(s: Session, json: boolean): Promise<number> {
  s.config(false);
  const client = s.api(true)!;
  const dcs = await s.readOnly(client, (api, signal) => api.listDataCenters({ signal }));
  return json ? printJson(s, dataCentersJson(dcs)) : printLines(s, dataCentersTable(dcs));
}

/** `pod volumes` (`GET /network-volumes`). */
export async function podVolumes(s: Session, json: boolean): Promise<number> {
  s.config(false);
  const client = s.api(true)!;
  const volumes = await s.readOnly(client, (api, signal) => api.listNetworkVolumes({ signal }));
  return json ? printJson(s, volumesJson(volumes)) : printLines(s, volumesTable(volumes));
}

/** `pod templates` (`GET /templates`, pod templates only). */
export async function podTemplates(s: Session, json: boolean): Promise<number> {
  s.config(false);
  const client = s.api(true)!;
  const templates = await s.readOnly(client, (api, signal) => api.listTemplates({ signal }));
  return json ? printJson(s, templatesJson(templates)) : printLines(s, templatesTable(templates));
}
