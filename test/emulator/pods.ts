/**
 * The emulator's pods as the API sees them: create (validation, placement, stock, mounts), the
 * start/stop/restart/terminate actions, delete, the pod JSON (network volumes: ./volumes.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { rfc3339 } from '../../src/core/clock';
import {
  type CatalogSpec,
  type CloudType,
  compareCuda,
  cudaAtLeast,
  gpuPriceUsdPerHour,
} from './catalog';
import { type BindMount } from './container';
import { type JsonObject } from './extensions';
import { type DeletedBy } from './ledger';
import { NO_CAPACITY_DETAIL, type PodDirs, type PodInternals } from './types';
import {
  ACTIONS_BY_STATUS,
  type CreatePodBody,
  type MemberState,
  type PodState,
  problem,
  randomApiKey,
  randomId,
  type Reply,
  round6,
  SECRET_REF,
} from './state';
import { NetworkVolumes } from './volumes';

export abstract class Pods extends NetworkVolumes {
  protected async createPod(body: CreatePodBody, member?: MemberState): Promise<Reply> {
    // Rules of the document that JSON Schema cannot state answer 400, as Runpod's handler does.
    if (body.gpu && body.cpu) return problem(400, 'set exactly one of gpu or cpu, not both');
    if (body.cpu) return problem(400, 'the Runpod emulator offers GPU pods only: set gpu, not cpu');
    if (!body.gpu) return problem(400, 'set exactly one of gpu or cpu');
    let template: CatalogSpec['templates'][number] | undefined;
    if (body.templateId !== undefined) {
      template = this.catalog.templates.find((t) => t.id === body.templateId);
      if (!template) return problem(404, `template '${body.templateId}' not found`);
      if (template.serverless) {
        return problem(422, 'Request validation failed.', [
          `$.templateId: template '${template.id}' is a serverless template`,
        ]);
      }
    }
    const image = body.image ?? template?.image ?? '';
    const args = body.args ?? template?.args ?? '';
    const disk = body.disk ?? template?.disk ?? 50;
    const ports = body.ports ?? template?.ports ?? [];
    const env: Record<string, string> = { ...(template?.env ?? {}), ...(body.env ?? {}) };
    const mounts: CreatePodBody['mounts'] =
      body.mounts ??
      (template?.mounts.persistent ? { persistent: template.mounts.persistent } : {});
    const gpu = body.gpu;
    const cudaSent = gpu.allowedCudaVersions !== undefined || gpu.minCudaVersion !== undefined;
    const allowedCuda = cudaSent
      ? (gpu.allowedCudaVersions ?? [])
      : (template?.allowedCudaVersions ?? []);
    if (allowedCuda.length > 0 && gpu.minCudaVersion !== undefined) {
      return problem(400, 'gpu.allowedCudaVersions and gpu.minCudaVersion are mutually exclusive');
    }
    if (mounts?.persistent && mounts.network && mounts.network.length > 0) {
      return problem(400, 'mounts.persistent and mounts.network are mutually exclusive');
    }
    const seenPorts = new Set<string>();
    for (const port of ports) {
      const m = /^(\d{1,5})\/(tcp|http)$/.exec(port);
      if (!m || Number(m[1]) < 1 || Number(m[1]) > 65535) {
        return problem(400, `invalid port '${port}': use <port>/tcp or <port>/http`);
      }
      if (seenPorts.has(m[1] ?? '')) return problem(400, `port ${m[1]} is listed twice`);
      seenPorts.add(m[1] ?? '');
    }
    if (body.globalNetworking === true) {
      return problem(400, 'global networking is not offered by the Runpod emulator');
    }
    if (typeof body.registry === 'string') {
      return problem(400, `container registry credential '${body.registry}' not found`);
    }
    for (const [name, value] of Object.entries(env)) {
      for (const ref of value.matchAll(SECRET_REF)) {
        if (![...this.secrets.values()].some((s) => s.name === ref[1])) {
          return problem(
            400,
            `env ${name} references secret '${ref[1]}', which does not exist: create it with POST /v2/account/secrets`,
          );
        }
      }
    }
    if (body.startJupyter === true && env.JUPYTER_PASSWORD === undefined) {
      env.JUPYTER_PASSWORD = randomId(16);
    }
    const type = this.catalog.gpuTypes.find((t) => t.id === gpu.id);
    if (!type) return problem(400, `GPU type '${gpu.id}' does not exist: see GET /v2/catalog/gpus`);
    const count = gpu.count ?? 1;
    const cloud: CloudType = body.cloud ?? 'SECURE';
    const maxCount = cloud === 'SECURE' ? type.maxCount.secure : type.maxCount.community;
    if (maxCount > 0 && count > maxCount) {
      return problem(
        400,
        `at most ${maxCount} GPUs of type '${type.id}' fit one pod in the ${cloud} cloud`,
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
    let networkMountTarget: { volumeId: string; path: string } | undefined;
    const network = mounts?.network?.[0];
    if (network) {
      const volume = this.catalog.networkVolumes.find((v) => v.id === network.volumeId);
      if (!volume) return problem(400, `network volume '${network.volumeId}' not found`);
      if (requested.length > 0 && !requested.includes(volume.dataCenterId)) {
        return problem(
          400,
          `network volume '${volume.id}' is in ${volume.dataCenterId}, which dataCenterIds does not allow`,
        );
      }
      candidates = [volume.dataCenterId];
      networkMountTarget = network;
      const source = join(this.stateDir, 'volumes', volume.id);
      mkdirSync(source, { recursive: true, mode: 0o755 });
      const quota = this.mountVolumeQuota(volume.id, source);
      if (quota !== null) return problem(500, quota);
    }
    const versions = type.cudaVersions
      .filter((v) => (allowedCuda.length > 0 ? allowedCuda.includes(v) : true))
      .filter((v) => (gpu.minCudaVersion ? cudaAtLeast(v, gpu.minCudaVersion) : true))
      .sort(compareCuda);
    const cloudOffered = cloud === 'SECURE' ? type.secure : type.community;
    const dataCenterId = candidates.find((dc) => (type.stock[dc] ?? 0) >= count);
    const cudaVersion = versions[versions.length - 1];
    if (!cloudOffered || maxCount === 0 || !cudaVersion || dataCenterId === undefined) {
      return problem(400, NO_CAPACITY_DETAIL);
    }

    // Placed: the pod exists and bills from now on.
    type.stock[dataCenterId] = (type.stock[dataCenterId] ?? 0) - count;
    const id = this.newPodId();
    const root = join(this.stateDir, 'pods', id);
    const dirs: PodDirs = {
      root,
      workspace: join(root, 'container', 'workspace'),
      etcOverbrainer: join(root, 'container', 'etc-overbrainer'),
      etcSsh: join(root, 'container', 'etc-ssh'),
      rootHome: join(root, 'container', 'root-home'),
      rootSsh: join(root, 'container', 'root-ssh'),
      volume: mounts?.persistent ? join(root, 'volume') : null,
      log: join(this.stateDir, 'logs', `${id}.log`),
    };
    if (dirs.volume) mkdirSync(dirs.volume, { recursive: true, mode: 0o755 });
    const runtimeDir = join(this.stateDir, 'runtime', id);
    mkdirSync(runtimeDir, { recursive: true, mode: 0o700 });
    let networkMount: BindMount | undefined;
    if (networkMountTarget) {
      const source = join(this.stateDir, 'volumes', networkMountTarget.volumeId);
      mkdirSync(source, { recursive: true, mode: 0o755 });
      networkMount = { source, target: networkMountTarget.path };
    }
    const apiKey = randomApiKey();
    const gpuUsdPerHour = round6(gpuPriceUsdPerHour(type, cloud) * count);
    const pod: PodState = {
      id,
      name: body.name,
      apiKey,
      image,
      args,
      disk,
      ports: [...ports],
      env,
      cmd: body.cmd ?? (args.trim() !== '' ? ['bash', '-c', args] : ['sleep', 'infinity']),
      mounts: (mounts ?? {}) as JsonObject,
      gpuType: type,
      gpuCount: count,
      cloud,
      dataCenterId,
      cudaVersion,
      gpuUsdPerHour,
      createdAtMs: this.clock.nowMs(),
      startedAtMs: null,
      status: 'PROVISIONING',
      gen: 0,
      abort: new AbortController(),
      container: undefined,
      containerStarts: 0,
      containerStartedAtMs: 0,
      quickExits: 0,
      sshPort: null,
      publishedPort: null,
      bannerSeen: false,
      published: false,
      silentServer: undefined,
      silentSockets: new Set(),
      sshdFault: this.faultBook.takeSshdForCreate(),
      holdsStock: true,
      deleted: false,
      dirs,
      runtimeDir,
      networkMount,
      persistentMount:
        dirs.volume && mounts?.persistent
          ? { source: dirs.volume, target: mounts.persistent.path }
          : undefined,
      member,
    };
    this.resetContainerDisk(pod);
    writeFileSync(dirs.log, '');
    this.podsById.set(id, pod);
    this.podKeys.set(apiKey, id);
    this.ledgerBook.open(
      {
        id,
        name: pod.name,
        runId: env.OVERBRAINER_RUN_ID ?? null,
        gpuTypeId: type.id,
        gpuCount: count,
        dataCenterId,
        cloud,
        gpuUsdPerHour,
        diskGb: disk + (mounts?.persistent?.size ?? 0),
        diskUsdPerGbMonth: this.catalog.stoppedDiskUsdPerGbMonth,
        ...(member ? { clusterId: member.clusterId } : {}),
      },
      'PROVISIONING',
      pod.createdAtMs,
    );
    // PROVISIONING (the image pull) → STARTING → RUNNING.
    const slow = this.faultBook.takeSlowBoot();
    this.launch(
      pod,
      pod.gen,
      slow?.provisioningMs ?? this.boot.provisioning,
      slow?.startingMs ?? this.boot.starting,
    );
    return { status: 201, body: this.podJson(pod) };
  }

  protected newPodId(): string {
    for (;;) {
      const id = randomId(14);
      if (!this.podsById.has(id) && !this.ledgerBook.entry(id)) return id;
    }
  }

  /**
   * Deletes `pod` as a DELETE does: billing and the pod's key end at once and it reads TERMINATED;
   * its processes and files go after, in the teardown returned (tracked: close() waits for it),
   * so an answer need not wait on killing processes and removing hundreds of MiB, and a client
   * that counts a pod's cost to that answer is not charged for the teardown. Once nothing of the
   * pod is left it answers 404. A pod already deleted: nothing to wait for.
   */
  protected deletePod(pod: PodState, by: DeletedBy): Promise<void> {
    if (pod.deleted) return Promise.resolve();
    this.endBilling(pod, by);
    const teardown: Promise<void> = this.tearDown(pod, by)
      .catch((error: unknown) => this.podLogLine(pod, `teardown failed: ${String(error)}`))
      .finally(() => this.teardowns.delete(teardown));
    this.teardowns.add(teardown);
    return teardown;
  }

  private endBilling(pod: PodState, by: DeletedBy): void {
    pod.deleted = true;
    // Billing and the pod's key end now. While its processes are being killed the pod reads as
    // TERMINATED (and is out of the list); once none is left it answers 404, so a client that
    // sees the 404 can rely on no process of the pod running.
    this.podKeys.delete(pod.apiKey);
    this.ledgerBook.close(pod.id, by);
    pod.status = 'TERMINATED';
    pod.published = false;
    // Its GPUs are free for the next create as soon as the delete is answered.
    this.releaseStock(pod);
  }

  private async tearDown(pod: PodState, by: DeletedBy): Promise<void> {
    await this.stopContainer(pod);
    this.podsById.delete(pod.id);
    this.podLogLine(pod, `deleted by ${by}`);
    // Not rmSync: a pod's files can be hundreds of MiB, and every lab of this process waits.
    await rm(pod.dirs.root, { recursive: true, force: true });
    await rm(pod.runtimeDir, { recursive: true, force: true });
  }

  protected async podAction(pod: PodState, action: string, by: DeletedBy): Promise<Reply> {
    if (!ACTIONS_BY_STATUS[pod.status].includes(action)) {
      return problem(409, `action '${action}' is not valid for a pod in status ${pod.status}`);
    }
    switch (action) {
      case 'terminate':
        await this.deletePod(pod, by);
        return { status: 204 };
      case 'stop':
        await this.stopContainer(pod);
        this.releaseStock(pod);
        this.setStatus(pod, 'EXITED');
        this.podLogLine(pod, `stopped by ${by}`);
        return { status: 200, body: this.podJson(pod) };
      case 'start': {
        const free = pod.gpuType.stock[pod.dataCenterId] ?? 0;
        if (!pod.holdsStock && free < pod.gpuCount) {
          return problem(
            400,
            'There are not enough free GPUs on the host machine to start this pod. Try again later or deploy a new pod.',
          );
        }
        if (!pod.holdsStock) {
          pod.gpuType.stock[pod.dataCenterId] = free - pod.gpuCount;
          pod.holdsStock = true;
        }
        // A stopped pod lost its container disk; its volumes remain.
        this.resetContainerDisk(pod);
        return this.restartInPlace(pod);
      }
      case 'restart':
        await this.stopContainer(pod);
        return this.restartInPlace(pod);
      default:
        return problem(422, 'Request validation failed.', [`$.action: unknown action '${action}'`]);
    }
  }

  protected restartInPlace(pod: PodState): Reply {
    const gen = this.bumpGen(pod);
    this.setStatus(pod, 'STARTING');
    this.launch(pod, gen, 0, this.boot.starting);
    return { status: 200, body: this.podJson(pod) };
  }

  protected podJson(pod: PodState): JsonObject {
    const running = pod.status === 'RUNNING';
    const port = pod.published ? pod.publishedPort : null;
    const billingGpu = pod.status === 'PROVISIONING' || pod.status === 'STARTING' || running;
    return {
      id: pod.id,
      name: pod.name,
      image: pod.image,
      args: pod.args,
      disk: pod.disk,
      ports: [...pod.ports],
      env: { ...pod.env },
      registry: null,
      status: pod.status,
      actions: [...ACTIONS_BY_STATUS[pod.status]],
      mounts: structuredClone(pod.mounts),
      gpu: { id: pod.gpuType.id, count: pod.gpuCount },
      cloud: pod.cloud,
      dataCenterId: pod.dataCenterId,
      cudaVersion: pod.cudaVersion,
      ssh: {
        // No Runpod SSH proxy here: only the direct mapping exists.
        proxy: null,
        direct:
          port !== null
            ? {
                host: '127.0.0.1',
                port,
                username: 'root',
                command: `ssh root@127.0.0.1 -p ${port}`,
              }
            : null,
      },
      template: null,
      cost: billingGpu ? pod.gpuUsdPerHour : 0,
      locked: false,
      globalNetworking: { enabled: false },
      runtime: running
        ? {
            uptime: Math.max(
              0,
              Math.floor((this.clock.nowMs() - (pod.startedAtMs ?? pod.createdAtMs)) / 1000),
            ),
            ports: pod.ports.map((p) => {
              const [privatePort, type] = p.split('/');
              const isSsh = p === '22/tcp';
              return {
                private: Number(privatePort),
                public: isSsh ? port : null,
                type: type ?? 'tcp',
                ip: isSsh && port !== null ? '127.0.0.1' : null,
              };
            }),
          }
        : null,
      createdAt: rfc3339(pod.createdAtMs),
      startedAt: pod.startedAtMs !== null ? rfc3339(pod.startedAtMs) : null,
      ...(pod.member
        ? { cluster: { id: pod.member.clusterId, rank: pod.member.rank, ip: pod.member.ip } }
        : {}),
    };
  }

  protected internals(pod: PodState): PodInternals {
    return {
      id: pod.id,
      name: pod.name,
      status: pod.status,
      apiKey: pod.apiKey,
      sshPort: pod.sshPort,
      publishedPort: pod.publishedPort,
      dirs: { ...pod.dirs },
      pidNamespace: pod.container?.pidNamespace ?? null,
      unsharePid: pod.container?.unsharePid ?? null,
      initPid: pod.container?.initPid ?? null,
      processes: pod.container?.processes() ?? [],
      containerStarts: pod.containerStarts,
      member: pod.member
        ? { clusterId: pod.member.clusterId, rank: pod.member.rank, ip: pod.member.ip }
        : null,
    };
  }
}
