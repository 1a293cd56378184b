/**
 * The emulator's Instant Clusters: `POST/GET /v2/clusters`, `GET/PATCH/DELETE /v2/clusters/{id}`,
 * `GET /v2/clusters/{id}/pods` and `GET /v2/billing/clusters`, as the document describes them. A
 * cluster is `podCount` real pods (./pods.ts: the same containers, bootstrap, watchdog and ledger
 * entries as any pod, one per member), placed together in one data center with room for all of
 * them, each in a network namespace of its own on the cluster's private network
 * (./clusterNet.ts), with Runpod's cluster variables in its env (./containers.ts `memberEnv`).
 * Deleting the cluster deletes every member; the pod calls refuse to (409).
 */
import { mkdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { rfc3339 } from '../../src/core/clock';
import { CLUSTER_CIDR, ClusterNet, memberAddress } from './clusterNet';
import { type JsonObject } from './extensions';
import { type DeletedBy } from './ledger';
import { Pods } from './pods';
import {
  billingWindow,
  bucketStart,
  type CreatePodBody,
  type PodState,
  problem,
  randomId,
  type Reply,
  roundUsd,
} from './state';
import { freePort } from './ports';
import { NO_CAPACITY_DETAIL } from './types';

/** `CreateClusterRequest` as validated by the document. */
export interface CreateClusterBody {
  name: string;
  type: string;
  compute: { gpuTypeId: string; gpuCountPerPod: number; podCount: number };
  image?: string;
  args?: string;
  disk?: number;
  ports?: string[];
  env?: Record<string, string>;
  dataCenterIds?: string[];
  mounts?: CreatePodBody['mounts'];
  startJupyter?: boolean;
  startSsh?: boolean;
}

export interface ClusterState {
  id: string;
  name: string;
  type: string;
  gpuTypeId: string;
  gpuCountPerPod: number;
  podCount: number;
  dataCenterId: string;
  createdAtMs: number;
  /** Member pod ids by rank. */
  memberIds: string[];
  runtimeDir: string;
  /** The private network, made while the members provision. */
  net: Promise<ClusterNet>;
  /** Each member's relays, started once (its sshd's host port stays for the member's life). */
  relays: Map<number, Promise<{ path: string; hostSshPort: number }>>;
  deleting: boolean;
}

/** The cluster types the emulator offers (SLURM and RAY assign roles it does not play). */
const OFFERED_TYPES = ['TRAINING', 'APPLICATION'];

export abstract class Clusters extends Pods {
  protected readonly clustersById = new Map<string, ClusterState>();
  /** Nets made and not yet closed, so `killAllNow` can end them on process exit. */
  protected readonly clusterNets = new Set<ClusterNet>();

  protected async createCluster(body: CreateClusterBody): Promise<Reply> {
    if (!OFFERED_TYPES.includes(body.type)) {
      return problem(400, `the Runpod emulator offers ${OFFERED_TYPES.join(' and ')} clusters`);
    }
    const { gpuTypeId, gpuCountPerPod, podCount } = body.compute;
    const type = this.catalog.gpuTypes.find((t) => t.id === gpuTypeId);
    if (!type)
      return problem(400, `GPU type '${gpuTypeId}' does not exist: see GET /v2/catalog/gpus`);
    if (type.maxCount.secure > 0 && gpuCountPerPod > type.maxCount.secure) {
      return problem(
        400,
        `at most ${type.maxCount.secure} GPUs of type '${type.id}' fit one pod in the SECURE cloud`,
      );
    }
    const requested = body.dataCenterIds ?? [];
    for (const dc of requested) {
      if (!this.catalog.dataCenters.some((d) => d.id === dc)) {
        return problem(400, `unknown data center '${dc}': see GET /v2/catalog/datacenters`);
      }
    }
    let candidates =
      requested.length > 0
        ? [...requested]
        : Object.keys(type.stock).sort((a, b) => (type.stock[b] ?? 0) - (type.stock[a] ?? 0));
    const volumeId = body.mounts?.network?.[0]?.volumeId;
    if (volumeId !== undefined) {
      const volume = this.catalog.networkVolumes.find((v) => v.id === volumeId);
      if (!volume) return problem(400, `network volume '${volumeId}' not found`);
      candidates = candidates.filter((dc) => dc === volume.dataCenterId);
    }
    // Every member in one data center, all placed at once or none.
    const needed = podCount * gpuCountPerPod;
    const dataCenterId = candidates.find((dc) => (type.stock[dc] ?? 0) >= needed);
    if (!type.secure || type.maxCount.secure === 0 || dataCenterId === undefined) {
      return problem(400, NO_CAPACITY_DETAIL);
    }

    const id = this.newClusterId();
    const runtimeDir = join(this.stateDir, 'runtime', `cluster-${id}`);
    mkdirSync(runtimeDir, { recursive: true, mode: 0o700 });
    const cluster: ClusterState = {
      id,
      name: body.name,
      type: body.type,
      gpuTypeId,
      gpuCountPerPod,
      podCount,
      dataCenterId,
      createdAtMs: this.clock.nowMs(),
      memberIds: [],
      runtimeDir,
      net: ClusterNet.create(podCount, runtimeDir),
      relays: new Map(),
      deleting: false,
    };
    // Made while the members provision; each member's container waits for it (memberNet).
    cluster.net.then(
      (net) => (this.closed || cluster.deleting ? net.close() : this.clusterNets.add(net)),
      () => undefined,
    );
    this.clustersById.set(id, cluster);
    for (let rank = 0; rank < podCount; rank++) {
      const made = await this.createPod(
        {
          name: `${body.name}-${rank}`,
          ...(body.image === undefined ? {} : { image: body.image }),
          ...(body.args === undefined ? {} : { args: body.args }),
          ...(body.disk === undefined ? {} : { disk: body.disk }),
          ports: body.ports ?? [],
          env: body.env ?? {},
          cloud: 'SECURE',
          gpu: { id: gpuTypeId, count: gpuCountPerPod },
          dataCenterIds: [dataCenterId],
          ...(body.mounts === undefined ? {} : { mounts: body.mounts }),
          ...(body.startJupyter === undefined ? {} : { startJupyter: body.startJupyter }),
        },
        { clusterId: id, rank, ip: memberAddress(rank), podCount, gpuCountPerPod },
      );
      const podId = (made.body as { id?: unknown } | undefined)?.id;
      if (made.status !== 201 || typeof podId !== 'string') {
        // Nothing of a refused cluster stays (a missing secret refuses the first member).
        await this.deleteCluster(cluster, 'account');
        return made;
      }
      cluster.memberIds.push(podId);
    }
    return { status: 201, body: this.clusterJson(cluster) };
  }

  protected newClusterId(): string {
    for (;;) {
      const id = randomId(14);
      if (!this.clustersById.has(id)) return id;
    }
  }

  /** The member's namespace, its relays started once (see ./clusterNet.ts). */
  protected memberNet(pod: PodState): Promise<{ path: string; hostSshPort: number }> {
    const member = pod.member;
    const cluster = member ? this.clustersById.get(member.clusterId) : undefined;
    if (!member || !cluster || cluster.deleting) {
      return Promise.reject(new Error(`pod ${pod.id} has no cluster network`));
    }
    let relays = cluster.relays.get(member.rank);
    if (!relays) {
      relays = (async () => {
        const net = await cluster.net;
        const node = net.members[member.rank];
        if (!node) throw new Error(`cluster ${cluster.id} has no member ${member.rank}`);
        const hostSshPort = await freePort(this.reservedPorts);
        this.reservedPorts.add(hostSshPort);
        await node.relays(hostSshPort, this.port);
        return { path: node.path, hostSshPort };
      })();
      cluster.relays.set(member.rank, relays);
    }
    return relays;
  }

  /** The live members, by rank. */
  protected members(cluster: ClusterState): PodState[] {
    return cluster.memberIds
      .map((id) => this.podsById.get(id))
      .filter((pod): pod is PodState => pod !== undefined && !pod.deleted);
  }

  /** The cluster whose member `podId` is, if it is one. */
  protected clusterOf(podId: string): ClusterState | undefined {
    const member = this.podsById.get(podId)?.member;
    return member ? this.clustersById.get(member.clusterId) : undefined;
  }

  /** Deletes every member (as the pods' delete does, billing ends now), then the network. */
  protected async deleteCluster(cluster: ClusterState, by: DeletedBy): Promise<void> {
    if (cluster.deleting) return;
    cluster.deleting = true;
    await Promise.all(this.members(cluster).map((pod) => this.deletePod(pod, by)));
    await this.tearDownCluster(cluster);
  }

  /**
   * `DELETE /clusters/{id}`'s part before its answer, as the pod delete's: every member's billing
   * ends and the cluster is gone (404) now; the members' processes and files, then the network,
   * go after the answer (tracked: close() waits for them), so a client that counts the members'
   * cost to that answer is not charged for the teardown.
   */
  protected deleteClusterAnswering(cluster: ClusterState, by: DeletedBy): void {
    if (cluster.deleting) return;
    cluster.deleting = true;
    const members = this.members(cluster).map((pod) => this.deletePod(pod, by));
    this.clustersById.delete(cluster.id);
    const teardown: Promise<void> = Promise.all(members)
      .then(() => this.tearDownCluster(cluster))
      .catch(() => undefined)
      .finally(() => this.teardowns.delete(teardown));
    this.teardowns.add(teardown);
  }

  private async tearDownCluster(cluster: ClusterState): Promise<void> {
    const net = await cluster.net.catch(() => undefined);
    if (net) {
      net.close();
      this.clusterNets.delete(net);
    }
    for (const relays of cluster.relays.values()) {
      const made = await relays.catch(() => undefined);
      if (made) this.reservedPorts.delete(made.hostSshPort);
    }
    this.clustersById.delete(cluster.id);
    await rm(cluster.runtimeDir, { recursive: true, force: true });
  }

  protected clusterJson(cluster: ClusterState): JsonObject {
    const members = this.members(cluster);
    const byStatus: Record<string, number> = {};
    for (const pod of members) byStatus[pod.status] = (byStatus[pod.status] ?? 0) + 1;
    const primary = members.find((pod) => pod.member?.rank === 0);
    const port = primary?.published ? primary.publishedPort : null;
    return {
      id: cluster.id,
      name: cluster.name,
      type: cluster.type,
      compute: {
        gpuTypeId: cluster.gpuTypeId,
        gpuCountPerPod: cluster.gpuCountPerPod,
        podCount: cluster.podCount,
      },
      dataCenterId: cluster.dataCenterId,
      pods: { total: members.length, byStatus },
      network: { cidr: CLUSTER_CIDR },
      ...(primary
        ? {
            primary: {
              podId: primary.id,
              status: primary.status,
              ...(port !== null ? { sshEndpoint: `127.0.0.1:${port}` } : {}),
            },
          }
        : {}),
      createdAt: rfc3339(cluster.createdAtMs),
    };
  }

  protected listClusters(): Reply {
    const clusters = [...this.clustersById.values()].sort(
      (a, b) => a.createdAtMs - b.createdAtMs || a.id.localeCompare(b.id),
    );
    return { status: 200, body: { clusters: clusters.map((c) => this.clusterJson(c)) } };
  }

  protected listClusterPods(cluster: ClusterState): Reply {
    return { status: 200, body: { pods: this.members(cluster).map((pod) => this.podJson(pod)) } };
  }

  /**
   * `GET /v2/billing/clusters` from the ledger: per cluster and bucket, what its members were
   * charged (GPU while provisioning or running, disks while stopped); no networking charge here.
   */
  protected listClusterBilling(query: Record<string, unknown>): Reply {
    const window = billingWindow(query, this.clock.nowMs());
    if ('status' in window) return window;
    const { bucketSize, startMs, endMs } = window;
    const wanted = query.clusterId as string | undefined;
    const byCluster = new Map<string, string[]>();
    for (const id of this.ledgerBook.ids()) {
      const clusterId = this.ledgerBook.entry(id)?.clusterId;
      if (clusterId === undefined || (wanted !== undefined && clusterId !== wanted)) continue;
      byCluster.set(clusterId, [...(byCluster.get(clusterId) ?? []), id]);
    }
    const records: JsonObject[] = [];
    const totals = { totalAmount: 0, gpuAmount: 0, diskAmount: 0 };
    const billed = new Set<string>();
    for (let b = startMs; b < endMs; b = bucketStart(b, bucketSize, 1)) {
      const bEnd = bucketStart(b, bucketSize, 1);
      for (const [clusterId, ids] of byCluster) {
        let gpuUsd = 0;
        let diskUsd = 0;
        let any = false;
        for (const id of ids) {
          const charged = this.ledgerBook.chargedBetween(id, b, bEnd);
          if (charged === null) continue;
          any = true;
          gpuUsd += charged.gpuUsd;
          diskUsd += charged.diskUsd;
        }
        if (!any) continue;
        records.push({
          startTime: new Date(b).toISOString(),
          endTime: new Date(bEnd).toISOString(),
          clusterId,
          totalAmount: roundUsd(gpuUsd + diskUsd),
          gpuAmount: roundUsd(gpuUsd),
          diskAmount: roundUsd(diskUsd),
          networkingAmount: 0,
        });
        totals.totalAmount += gpuUsd + diskUsd;
        totals.gpuAmount += gpuUsd;
        totals.diskAmount += diskUsd;
        billed.add(clusterId);
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
            clusterId: wanted ?? null,
          },
          recordCount: records.length,
          uniqueClusterCount: billed.size,
          totals: {
            totalAmount: roundUsd(totals.totalAmount),
            gpuAmount: roundUsd(totals.gpuAmount),
            diskAmount: roundUsd(totals.diskAmount),
            networkingAmount: 0,
          },
        },
      },
    };
  }

  /** Process exit: every cluster network's relays and namespaces, now. */
  protected closeClusterNetsNow(): void {
    for (const net of this.clusterNets) net.close();
    this.clusterNets.clear();
  }
}
