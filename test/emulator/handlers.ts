/**
 * The emulator's API operations: the dispatch from an operation id to its handler, and the list
 * operations (pods, billing, GPU types, data centers).
 */
import {
  availabilityLevel,
  type AvailabilityLevel,
  bestLevel,
  type CloudType,
  compareCuda,
  cudaAtLeast,
} from './catalog';
import { type JsonObject } from './extensions';
import { type DeletedBy } from './ledger';
import {
  billingWindow,
  bucketStart,
  type CreatePodBody,
  problem,
  type Reply,
  roundUsd,
  volumeJson,
} from './state';
import { Clusters, type CreateClusterBody } from './clusters';

/** The document's 409 for a pod call on a cluster member. */
const MEMBER_409 =
  'Pod belongs to a cluster and cannot be terminated via the pod endpoints: delete the cluster via DELETE /v2/clusters/{id}';

export abstract class Handlers extends Clusters {
  protected async handle(
    operationId: string,
    params: Record<string, string>,
    query: Record<string, unknown>,
    body: unknown,
    caller: { kind: 'account' } | { kind: 'pod'; podId: string },
  ): Promise<Reply> {
    const deletedBy: DeletedBy = caller.kind;
    switch (operationId) {
      case 'createPod':
        return this.createPod(body as CreatePodBody);
      case 'listPods':
        return this.listPods(query);
      case 'getPod': {
        const pod = this.podsById.get(params.id ?? '');
        return pod ? { status: 200, body: this.podJson(pod) } : problem(404, 'pod not found');
      }
      case 'deletePod': {
        const pod = this.podsById.get(params.id ?? '');
        if (!pod) return problem(404, 'pod not found');
        if (pod.member) return problem(409, MEMBER_409);
        void this.deletePod(pod, deletedBy);
        return { status: 204 };
      }
      case 'podAction': {
        const pod = this.podsById.get(params.id ?? '');
        if (!pod) return problem(404, 'pod not found');
        if (pod.member) return problem(409, MEMBER_409);
        return this.podAction(pod, String((body as { action: string }).action), deletedBy);
      }
      case 'createCluster':
        return this.createCluster(body as CreateClusterBody);
      case 'listClusters':
        return this.listClusters();
      case 'getCluster':
      case 'updateCluster':
      case 'deleteCluster':
      case 'listClusterPods': {
        const cluster = this.clustersById.get(params.id ?? '');
        if (!cluster) return problem(404, 'cluster not found');
        if (operationId === 'listClusterPods') return this.listClusterPods(cluster);
        if (operationId === 'updateCluster') cluster.name = (body as { name: string }).name;
        if (operationId !== 'deleteCluster')
          return { status: 200, body: this.clusterJson(cluster) };
        this.deleteClusterAnswering(cluster, deletedBy);
        return { status: 204 };
      }
      case 'listClusterBilling':
        return this.listClusterBilling(query);
      case 'listGpuTypes':
        return this.listGpuTypes(query);
      case 'listDataCenters':
        return this.listDataCenters(query);
      case 'listNetworkVolumes':
        return {
          status: 200,
          body: { networkVolumes: this.catalog.networkVolumes.map((v) => volumeJson(v)) },
        };
      case 'getNetworkVolume': {
        const volume = this.catalog.networkVolumes.find((v) => v.id === params.id);
        return volume
          ? { status: 200, body: volumeJson(volume) }
          : problem(404, 'network volume not found');
      }
      case 'updateNetworkVolume':
        return this.updateNetworkVolume(params.id ?? '', body as { size?: number; name?: string });
      case 'listTemplates':
        return { status: 200, body: { templates: this.catalog.templates } };
      case 'listSecrets': {
        const name = query.name;
        const list = [...this.secrets.values()].filter(
          (s) => name === undefined || s.name === name,
        );
        return { status: 200, body: { secrets: list.map((s) => this.secretJson(s)) } };
      }
      case 'createSecret': {
        const b = body as { name: string; value: string; description?: string };
        if ([...this.secrets.values()].some((s) => s.name === b.name)) {
          return problem(
            409,
            `a secret named '${b.name}' exists: update it with PATCH /v2/account/secrets/{id}`,
          );
        }
        const secret = this.putSecret(b.name, b.value, b.description);
        return { status: 201, body: this.secretJson(secret) };
      }
      case 'updateSecret': {
        const secret = this.secrets.get(params.id ?? '');
        if (!secret) return problem(404, 'secret not found');
        const b = body as { value?: string; description?: string };
        if (b.value !== undefined) secret.value = b.value;
        if (b.description !== undefined) secret.description = b.description;
        secret.updatedAtMs = this.clock.nowMs();
        return { status: 200, body: this.secretJson(secret) };
      }
      case 'deleteSecret': {
        if (!this.secrets.delete(params.id ?? '')) return problem(404, 'secret not found');
        return { status: 204 };
      }
      case 'listPodBilling':
        return this.listPodBilling(query);
      default:
        return problem(501, `the Runpod emulator does not implement ${operationId}`);
    }
  }

  protected listPods(query: Record<string, unknown>): Reply {
    const firstPage = typeof query.cursor !== 'string';
    const all = [...this.podsById.values()]
      .filter((p) => !p.deleted)
      // Runpod lists a cluster's members only when asked.
      .filter((p) => p.member === undefined || query.includeClusterPods === true)
      .filter((p) => {
        const hidden = this.unlisted.get(p.id);
        if (hidden === undefined) return true;
        if (firstPage) {
          if (hidden <= 1) this.unlisted.delete(p.id);
          else this.unlisted.set(p.id, hidden - 1);
        }
        return false;
      })
      .sort((a, b) => a.createdAtMs - b.createdAtMs || a.id.localeCompare(b.id));
    const limit = Math.min(
      typeof query.limit === 'number' ? query.limit : this.maxPageSize,
      this.maxPageSize,
    );
    let start = 0;
    if (typeof query.cursor === 'string') {
      const decoded = Buffer.from(query.cursor, 'base64url').toString('utf8');
      const m = /^(\d+):([a-z0-9]+)$/.exec(decoded);
      if (!m)
        return problem(400, 'invalid cursor: pass pagination.nextCursor of the previous page');
      const afterMs = Number(m[1]);
      const afterId = m[2] ?? '';
      start = all.findIndex(
        (p) => p.createdAtMs > afterMs || (p.createdAtMs === afterMs && p.id > afterId),
      );
      if (start < 0) start = all.length;
    }
    const page = all.slice(start, start + limit);
    const last = page[page.length - 1];
    const hasNextPage = start + limit < all.length;
    return {
      status: 200,
      body: {
        pods: page.map((p) => this.podJson(p)),
        pagination: {
          hasNextPage,
          nextCursor:
            hasNextPage && last
              ? Buffer.from(`${last.createdAtMs}:${last.id}`).toString('base64url')
              : null,
        },
      },
    };
  }

  /**
   * `GET /v2/billing/pods` from the ledger: one record per pod per bucket it existed in, the
   * amounts it was charged in that bucket (GPU rate while running, disks while stopped). The
   * window is snapped to bucket boundaries (start down, end up) as the document says; `lastN`
   * is the last N buckets ending with the current one and excludes startTime/endTime.
   */
  protected listPodBilling(query: Record<string, unknown>): Reply {
    const window = billingWindow(query, this.clock.nowMs());
    if ('status' in window) return window;
    const { bucketSize, startMs, endMs } = window;
    const podId = query.podId as string | undefined;
    // A cluster's members are billed as the cluster's (`GET /v2/billing/clusters`).
    const ids = this.ledgerBook
      .ids()
      .filter((id) => podId === undefined || id === podId)
      .filter((id) => this.ledgerBook.entry(id)?.clusterId === undefined);
    const records: JsonObject[] = [];
    const totals = { totalAmount: 0, gpuAmount: 0, cpuAmount: 0, diskAmount: 0 };
    const pods = new Set<string>();
    for (let b = startMs; b < endMs; b = bucketStart(b, bucketSize, 1)) {
      const bEnd = bucketStart(b, bucketSize, 1);
      for (const id of ids) {
        const charged = this.ledgerBook.chargedBetween(id, b, bEnd);
        if (charged === null) continue;
        const gpu = roundUsd(charged.gpuUsd);
        const disk = roundUsd(charged.diskUsd);
        const total = roundUsd(charged.gpuUsd + charged.diskUsd);
        records.push({
          startTime: new Date(b).toISOString(),
          endTime: new Date(bEnd).toISOString(),
          podId: id,
          totalAmount: total,
          gpuAmount: gpu,
          cpuAmount: 0,
          diskAmount: disk,
        });
        totals.totalAmount += charged.gpuUsd + charged.diskUsd;
        totals.gpuAmount += charged.gpuUsd;
        totals.diskAmount += charged.diskUsd;
        pods.add(id);
      }
    }
    return {
      status: 200,
      body: {
        records,
        metadata: {
          query: {
            startTime: new Date(startMs).toISOString(),
            endTime: new Date(endMs).toISOString(),
            bucketSize,
            podId: podId ?? null,
          },
          recordCount: records.length,
          uniquePodCount: pods.size,
          totals: {
            totalAmount: roundUsd(totals.totalAmount),
            gpuAmount: roundUsd(totals.gpuAmount),
            cpuAmount: 0,
            diskAmount: roundUsd(totals.diskAmount),
          },
        },
      },
    };
  }

  protected listGpuTypes(query: Record<string, unknown>): Reply {
    const include = query.include as string[] | undefined;
    const withAvailability = include?.includes('AVAILABILITY') ?? false;
    const product = query.product as string[] | undefined;
    if (withAvailability && !product) {
      return problem(
        400,
        'product is required with include=AVAILABILITY (for example product=POD)',
      );
    }
    for (const name of [
      'product',
      'count',
      'cloud',
      'countryCodes',
      'cudaVersions',
      'minCudaVersion',
    ]) {
      if (query[name] !== undefined && !withAvailability) {
        return problem(400, `${name} is valid only with include=AVAILABILITY`);
      }
    }
    if (query.cudaVersions !== undefined && query.minCudaVersion !== undefined) {
      return problem(400, 'cudaVersions and minCudaVersion are mutually exclusive');
    }
    const count = typeof query.count === 'number' ? query.count : 1;
    const cloud = (query.cloud as CloudType | undefined) ?? 'SECURE';
    const countries = query.countryCodes as string[] | undefined;
    const exact = query.cudaVersions as string[] | undefined;
    const floor = query.minCudaVersion as string | undefined;
    const gpus: JsonObject[] = [];
    for (const type of this.catalog.gpuTypes) {
      const gpu: JsonObject = {
        id: type.id,
        name: type.name,
        pool: type.pool,
        manufacturer: type.manufacturer,
        memory: type.memoryGb,
        secure: type.secure,
        community: type.community,
        price: {
          secure: type.priceSecureUsdPerHour,
          community: type.priceCommunityUsdPerHour,
        },
        maxCount: { secure: type.maxCount.secure, community: type.maxCount.community },
      };
      if (withAvailability) {
        const dcs = Object.entries(type.stock).filter(([dc]) => {
          const code = this.catalog.dataCenters.find((d) => d.id === dc)?.countryCode;
          return !countries || (code !== undefined && countries.includes(code));
        });
        if (countries && dcs.length === 0) continue;
        const offered =
          (cloud === 'SECURE' ? type.secure : type.community) &&
          count <= (cloud === 'SECURE' ? type.maxCount.secure : type.maxCount.community);
        const versions = type.cudaVersions
          .filter((v) => (exact ? exact.includes(v) : floor ? cudaAtLeast(v, floor) : true))
          .sort(compareCuda);
        const levels = dcs.map(([dc, free]) => ({
          id: dc,
          name: this.dcName(dc),
          availability: (offered && versions.length > 0
            ? availabilityLevel(free, count)
            : 'NONE') as AvailabilityLevel,
        }));
        const overall = bestLevel(levels.map((l) => l.availability));
        gpu.availability = overall;
        if (overall !== 'NONE') gpu.dataCenters = levels;
        if (versions.length > 0) {
          const anyFree = offered && dcs.some(([, free]) => free >= count);
          gpu.cudaVersions = versions.map((version) => ({ version, available: anyFree }));
        }
      }
      gpus.push(gpu);
    }
    return { status: 200, body: { gpus } };
  }

  protected listDataCenters(query: Record<string, unknown>): Reply {
    const include = (query.include as string[] | undefined) ?? [];
    const regions = query.regions as string[] | undefined;
    const volumeTypes = query.networkVolumeTypes as string[] | undefined;
    const compliance = query.compliance as string[] | undefined;
    const globalNetwork = query.globalNetwork as boolean | undefined;
    const dataCenters: JsonObject[] = [];
    for (const dc of this.catalog.dataCenters) {
      if (regions && !regions.includes(dc.region)) continue;
      if (volumeTypes && !volumeTypes.every((t) => dc.networkVolumeTypes.includes(t as never)))
        continue;
      if (compliance && !compliance.every((c) => dc.compliance.includes(c))) continue;
      if (globalNetwork !== undefined && dc.globalNetwork !== globalNetwork) continue;
      const out: JsonObject = {
        id: dc.id,
        name: dc.name,
        region: dc.region,
        globalNetwork: dc.globalNetwork,
        networkVolumeTypes: [...dc.networkVolumeTypes],
        compliance: [...dc.compliance],
      };
      if (include.includes('GPU_AVAILABILITY')) {
        const offered = this.catalog.gpuTypes.filter((t) => dc.id in t.stock);
        if (offered.length > 0) {
          out.gpuAvailability = offered.map((t) => ({
            id: t.id,
            name: t.name,
            availability: availabilityLevel(t.stock[dc.id] ?? 0, 1),
          }));
        }
      }
      // CPU_AVAILABILITY: this emulator offers no CPU flavors, so the array is omitted.
      dataCenters.push(out);
    }
    return { status: 200, body: { dataCenters } };
  }
}
