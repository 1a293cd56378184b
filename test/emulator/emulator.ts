/**
 * A local Runpod: the Runpod API v2 calls the client makes, on 127.0.0.1, with the shapes,
 * status codes and problem+json errors of openapi-v2.json (plus ./extensions.ts), bearer keys
 * (the account key and one pod-scoped key per pod), and pods that are real: each runs its `cmd`
 * in its own PID and mount namespaces (./container.ts), gets Runpod's env, an sshd_config as an
 * image ships it, and `ssh.direct` once its sshd really answers. A ledger bills every pod; faults
 * make every documented failure happen on demand (./faults.ts).
 *
 * A fake that checks: every request is validated strictly against the document (unknown or
 * invalid fields: 422 with `errors[]`), and every response the emulator sends is validated too
 * (`contractViolations()` lists any breach of its own; tests assert it stays empty).
 *
 * The server is built in layers, one file each (see ./base.ts for the order); this file holds
 * the top one: the handle a test gets, the injected faults and shutdown.
 */
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type Fault, parseFault } from './faults';
import { type Emulator, type EmulatorOptions, type FaultsApi } from './types';
import { checkPrerequisites, sleepReal } from './state';
import { live } from './base';
import { HttpLayer } from './http';

export async function startEmulator(options: EmulatorOptions = {}): Promise<Emulator> {
  checkPrerequisites();
  const emulator = new EmulatorServer(options);
  await emulator.listen(options.port ?? 0);
  return emulator.api();
}

class EmulatorServer extends HttpLayer {
  api(): Emulator {
    const origin = `http://127.0.0.1:${this.port}`;
    const add = (fault: Fault): Promise<string> => this.addFault(fault);
    const faults: FaultsApi = {
      add,
      clear: () => this.faultBook.clear(),
      pending: () => this.faultBook.pending(),
      failCall: (route, status, opts) =>
        add({
          kind: 'request',
          route,
          nth: opts?.nth,
          times: opts?.times,
          effect: { type: 'status', status, detail: opts?.detail },
        }),
      dropCall: (route, opts) =>
        add({
          kind: 'request',
          route,
          nth: opts?.nth,
          applied: opts?.applied,
          effect: { type: 'drop' },
        }),
      createThenFail: (status = 500) =>
        add({
          kind: 'request',
          route: 'createPod',
          applied: true,
          effect: { type: 'status', status },
        }),
      createThenHang: () =>
        add({ kind: 'request', route: 'createPod', applied: true, effect: { type: 'hang' } }),
      rateLimit: (route, retryAfterS, times = 1) =>
        add({
          kind: 'request',
          route,
          times,
          effect: { type: 'status', status: 429, retryAfterS },
        }),
      transientNotFound: (podId, looks) =>
        add({
          kind: 'request',
          route: 'getPod',
          podId,
          times: looks,
          effect: { type: 'status', status: 404 },
        }),
      setStock: (gpuId, stock, dataCenterId) => add({ kind: 'stock', gpuId, stock, dataCenterId }),
      slowBoot: (delays, pods) => add({ kind: 'slowBoot', ...delays, pods }),
      sshdNeverStarts: (mode, podId) => add({ kind: 'sshd', mode, podId }),
      podDies: (podId) => add({ kind: 'podDies', podId }),
      podCrash: (podId) => add({ kind: 'podCrash', podId }),
      podVanishes: (podId) => add({ kind: 'podVanishes', podId }),
      clusterVanishes: (clusterId) => add({ kind: 'clusterVanishes', clusterId }),
      hostLost: (podId, exitAfterMs) => add({ kind: 'hostLost', podId, exitAfterMs }),
      memberKeyDeletesCluster: (allowed) => add({ kind: 'memberKey', deletesCluster: allowed }),
      unreachable: (forMs, mode) => add({ kind: 'unreachable', forMs, mode }),
      reachable: () => this.reachable(),
    };
    return {
      baseUrl: `${origin}/v2`,
      origin,
      apiKey: this.accountKey,
      port: this.port,
      stateDir: this.stateDir,
      catalog: this.catalog,
      ledger: () => this.ledgerBook.snapshot(),
      requests: () => this.log.map((e) => ({ ...e })),
      faults,
      contractViolations: () => [...this.violations],
      pods: () =>
        [...this.podsById.values()].filter((p) => !p.deleted).map((p) => this.internals(p)),
      clusters: () =>
        [...this.clustersById.values()]
          .filter((c) => !c.deleting)
          .map((c) => ({ id: c.id, name: c.name, memberIds: [...c.memberIds] })),
      pod: (id) => {
        const pod = this.podsById.get(id);
        return pod ? this.internals(pod) : undefined;
      },
      podLog: (id) => {
        try {
          return readFileSync(join(this.stateDir, 'logs', `${id}.log`), 'utf8');
        } catch {
          return '';
        }
      },
      setSecret: (name, value) => this.putSecret(name, value),
      setGpus: (setting, podId) => this.setGpus(setting, podId),
      close: () => this.close(),
    };
  }

  protected async addFault(input: Fault): Promise<string> {
    const fault = parseFault(input);
    switch (fault.kind) {
      case 'request':
        return this.faultBook.addRequestFault(fault);
      case 'stock': {
        const type = this.catalog.gpuTypes.find((t) => t.id === fault.gpuId);
        if (!type) throw new Error(`no GPU type '${fault.gpuId}' in the catalog`);
        if (fault.dataCenterId !== undefined) {
          if (!this.catalog.dataCenters.some((dc) => dc.id === fault.dataCenterId)) {
            throw new Error(`no data center '${fault.dataCenterId}' in the catalog`);
          }
          type.stock[fault.dataCenterId] = fault.stock;
        } else {
          for (const dc of Object.keys(type.stock)) type.stock[dc] = fault.stock;
        }
        return this.faultBook.newId();
      }
      case 'slowBoot':
        return this.faultBook.addSlowBoot(
          { provisioningMs: fault.provisioningMs, startingMs: fault.startingMs },
          fault.pods ?? 1,
        );
      case 'sshd':
        if (fault.podId !== undefined) this.livePod(fault.podId);
        return this.faultBook.addSshd(fault.mode, fault.podId, fault.pods ?? 1);
      case 'podDies': {
        const pod = this.livePod(fault.podId);
        await this.stopContainer(pod);
        this.releaseStock(pod);
        this.setStatus(pod, 'EXITED');
        this.podLogLine(pod, 'the pod died (injected fault): EXITED');
        return this.faultBook.newId();
      }
      case 'podCrash': {
        const pod = this.livePod(fault.podId);
        if (!pod.container) throw new Error(`pod '${pod.id}' has no running container to crash`);
        pod.container.killNow();
        this.podLogLine(pod, "the pod's main process was killed (injected fault)");
        return this.faultBook.newId();
      }
      case 'hostLost': {
        const pod = this.livePod(fault.podId);
        if (!pod.container) throw new Error(`pod '${pod.id}' has no running container to freeze`);
        const frozen = pod.container;
        frozen.freeze();
        this.podLogLine(pod, "the pod's host stopped answering (injected fault)");
        if (fault.exitAfterMs !== undefined) {
          this.clock
            .sleep(fault.exitAfterMs, this.closing.signal)
            .then(async () => {
              // Deleted or restarted meanwhile: that pod is no longer the frozen one.
              if (pod.deleted || pod.container !== frozen) return;
              await this.stopContainer(pod);
              this.releaseStock(pod);
              this.setStatus(pod, 'EXITED');
              this.podLogLine(pod, "the lost host's pod is EXITED (injected fault)");
            })
            .catch(() => undefined);
        }
        return this.faultBook.newId();
      }
      case 'memberKey':
        this.memberKeyDeletesCluster = fault.deletesCluster;
        return this.faultBook.newId();
      case 'podVanishes': {
        const pod = this.livePod(fault.podId);
        await this.deletePod(pod, 'provider');
        return this.faultBook.newId();
      }
      case 'clusterVanishes': {
        const cluster = this.clustersById.get(fault.clusterId);
        if (!cluster) throw new Error(`no cluster '${fault.clusterId}'`);
        // Gone (404) at once, as the API's delete; its members' teardown follows.
        this.deleteClusterAnswering(cluster, 'provider');
        return this.faultBook.newId();
      }
      case 'unreachable': {
        await this.setUnreachable(fault.mode);
        const episode = ++this.unreachableEpisode;
        this.clock
          .sleep(fault.forMs, this.closing.signal)
          // A later unreachable fault (or `reachable()`) owns the outage from then on.
          .then(() => (episode === this.unreachableEpisode ? this.reachable() : undefined))
          .catch(() => undefined);
        return this.faultBook.newId();
      }
    }
  }

  protected async setUnreachable(mode: 'refuse' | 'reset'): Promise<void> {
    this.unreachableMode = mode;
    for (const res of this.hanging) res.destroy();
    if (mode === 'reset') {
      for (const socket of this.sockets) socket.resetAndDestroy();
      return;
    }
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const socket of this.sockets) socket.destroy();
    });
  }

  protected async reachable(): Promise<void> {
    this.unreachableEpisode++;
    const mode = this.unreachableMode;
    this.unreachableMode = undefined;
    if (mode !== 'refuse' || this.closed) return;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.listen(this.port);
        return;
      } catch (error) {
        if (attempt >= 40) {
          this.violations.push(`could not listen on port ${this.port} again: ${String(error)}`);
          return;
        }
        await sleepReal(50);
      }
    }
  }

  /** Process exit: SIGKILL every container now (no awaiting possible). */
  killAllNow(): void {
    for (const pod of this.podsById.values()) pod.container?.killNow();
    this.closeClusterNetsNow();
    this.unmountVolumes();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.closing.abort();
    const pods = [...this.podsById.values()];
    await Promise.all(
      pods.map(async (pod) => {
        const container = pod.container;
        this.bumpGen(pod);
        this.dropContainer(pod);
        if (container) await container.kill();
      }),
    );
    // A container still being spawned is killed by its launch as soon as it exists.
    await Promise.allSettled([...this.launches]);
    await Promise.allSettled([...this.teardowns]);
    for (const cluster of this.clustersById.values()) {
      cluster.deleting = true;
      (await cluster.net.catch(() => undefined))?.close();
    }
    this.closeClusterNetsNow();
    for (const res of this.hanging) res.destroy();
    await new Promise<void>((resolve) => {
      if (!this.server.listening) {
        resolve();
        return;
      }
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
    live.delete(this);
    this.unmountVolumes();
    if (this.ownsStateDir) await rm(this.stateDir, { recursive: true, force: true });
  }
}

export type { Fault, PendingFault, SshdFaultMode } from './faults';
export type { LedgerEntry, LedgerSnapshot } from './ledger';
export { NO_CAPACITY_DETAIL } from './types';
export type {
  BootDelaysMs,
  Emulator,
  EmulatorOptions,
  FaultsApi,
  PodDirs,
  PodInternals,
  PodStatus,
  RequestLogEntry,
} from './types';
