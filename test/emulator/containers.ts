/**
 * The emulator's pod containers: the boot delays, starting a pod's container (its env, sshd_config,
 * the published ssh port once sshd answers), restarts on exit, and stopping it.
 */
import { copyFileSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createTcpServer } from 'node:net';
import { dirname, join } from 'node:path';
import { isAbortError } from '../../src/core/clock';
import { type BindMount, Container, initScript, POD_PATHS, probeSshBanner } from './container';
import { type SshdFaultMode } from './faults';
import { MEMBER_SSH_PORT, memberAddress, PRIMARY_PORT } from './clusterNet';
import { type MemberState, type PodState, SECRET_REF, sleepReal, sshdConfig } from './state';
import { freePort } from './ports';
import { PodLogs } from './podLogs';
import {
  figuresFile,
  figuresPath,
  type GpuSetting,
  parseGpuSetting,
  standInMountLines,
  standInScript,
  writeFigures,
} from './gpus';

export abstract class PodContainers extends PodLogs {
  /** The container disk as the image has it: empty dirs, the image's /etc/ssh. */
  protected resetContainerDisk(pod: PodState): void {
    rmSync(join(pod.dirs.root, 'container'), { recursive: true, force: true });
    mkdirSync(pod.dirs.workspace, { recursive: true, mode: 0o755 });
    mkdirSync(pod.dirs.etcOverbrainer, { recursive: true, mode: 0o755 });
    mkdirSync(pod.dirs.etcSsh, { recursive: true, mode: 0o755 });
    mkdirSync(pod.dirs.rootSsh, { recursive: true, mode: 0o700 });
    mkdirSync(join(pod.dirs.rootHome, '.ssh'), { recursive: true, mode: 0o700 });
    for (const file of ['moduli', 'ssh_config']) {
      if (existsSync(join('/etc/ssh', file)))
        copyFileSync(join('/etc/ssh', file), join(pod.dirs.etcSsh, file));
    }
    for (const [rel, content] of Object.entries(this.imageFiles)) {
      const file = join(pod.dirs.workspace, rel);
      if (!file.startsWith(pod.dirs.workspace + '/'))
        throw new Error(`image file outside /workspace: ${rel}`);
      mkdirSync(dirname(file), { recursive: true, mode: 0o755 });
      writeFileSync(file, content, { mode: 0o755 });
    }
  }

  protected async delay(pod: PodState, ms: number): Promise<void> {
    if (ms > 0) await this.clock.sleep(ms, pod.abort.signal);
  }

  /**
   * Waits `beforeMs`, starts the container (STARTING), and after `startingMs` marks the pod
   * RUNNING. A container that cannot start leaves the pod in ERROR. Tracked, so `close()` can
   * wait for a start in flight and kill what it started.
   */
  protected launch(pod: PodState, gen: number, beforeMs: number, startingMs: number): void {
    const run = async (): Promise<void> => {
      try {
        await this.delay(pod, beforeMs);
        if (this.stale(pod, gen)) return;
        await this.startContainer(pod, gen);
        await this.delay(pod, startingMs);
        if (this.stale(pod, gen) || pod.status !== 'STARTING') return;
        pod.startedAtMs = this.clock.nowMs();
        this.setStatus(pod, 'RUNNING');
        this.maybePublish(pod);
      } catch (error) {
        if (isAbortError(error) || this.stale(pod, gen)) return;
        this.podLogLine(pod, `container failed to start: ${String(error)}`);
        this.dropContainer(pod);
        this.setStatus(pod, 'ERROR');
        this.releaseStock(pod);
      }
    };
    const launched = run();
    this.launches.add(launched);
    void launched.finally(() => this.launches.delete(launched));
  }

  protected has22(pod: PodState): boolean {
    return pod.ports.includes('22/tcp');
  }

  /**
   * A cluster member's network namespace, with its sshd relayed to a host port (./clusterNet.ts):
   * the emulator's cluster layer makes it.
   */
  protected abstract memberNet(pod: PodState): Promise<{ path: string; hostSshPort: number }>;

  protected async startContainer(pod: PodState, gen: number): Promise<void> {
    if (pod.member) {
      const net = await this.memberNet(pod);
      // Of the sshd faults a member plays `unpublished` (its SSH endpoint never shows).
      const fault = this.faultBook.sshdForPod(pod.id) ?? pod.sshdFault;
      const mode = fault === 'unpublished' ? fault : undefined;
      return this.startIn(pod, gen, MEMBER_SSH_PORT, net.hostSshPort, mode, net.path);
    }
    const mode = this.faultBook.sshdForPod(pod.id) ?? pod.sshdFault;
    const sshPort = await freePort(this.reservedPorts);
    this.reservedPorts.add(sshPort);
    let publishedPort = sshPort;
    if (mode === 'closed' || mode === 'silent') {
      publishedPort = await freePort(this.reservedPorts);
      this.reservedPorts.add(publishedPort);
    } else if (this.sshRelay !== null) {
      publishedPort = await this.sshRelay(pod.id, sshPort);
    }
    if (this.stale(pod, gen)) {
      this.reservedPorts.delete(sshPort);
      this.reservedPorts.delete(publishedPort);
      return;
    }
    pod.sshPort = sshPort;
    pod.publishedPort = publishedPort;
    pod.bannerSeen = false;
    if (mode === 'silent') {
      // The port answers TCP and never says a word: no SSH banner, ever.
      const server = createTcpServer((socket) => {
        pod.silentSockets.add(socket);
        socket.on('error', () => undefined);
        socket.once('close', () => pod.silentSockets.delete(socket));
      });
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(publishedPort, '127.0.0.1', () => resolve());
      });
      pod.silentServer = server;
    }
    return this.startIn(pod, gen, sshPort, publishedPort, mode, undefined);
  }

  private async startIn(
    pod: PodState,
    gen: number,
    sshPort: number,
    publishedPort: number,
    mode: SshdFaultMode | undefined,
    netnsPath: string | undefined,
  ): Promise<void> {
    if (netnsPath !== undefined && this.stale(pod, gen)) return;
    pod.sshPort = sshPort;
    pod.publishedPort = publishedPort;
    pod.bannerSeen = false;
    // A member's sshd listens on its own namespace's addresses: the cluster's members reach it.
    const listen = netnsPath === undefined ? '127.0.0.1' : '0.0.0.0';
    writeFileSync(join(pod.dirs.etcSsh, 'sshd_config'), sshdConfig(sshPort, listen), {
      mode: 0o644,
    });
    const mounts: BindMount[] = [
      { source: pod.dirs.workspace, target: POD_PATHS.workspace },
      { source: pod.dirs.etcOverbrainer, target: POD_PATHS.etcOverbrainer },
      { source: pod.dirs.etcSsh, target: POD_PATHS.etcSsh },
      { source: pod.dirs.rootHome, target: POD_PATHS.rootHome },
      { source: pod.dirs.rootSsh, target: POD_PATHS.rootSsh },
    ];
    if (pod.persistentMount) mounts.push(pod.persistentMount);
    if (pod.networkMount) mounts.push(pod.networkMount);
    const initPath = join(pod.runtimeDir, 'init.sh');
    const tmpfs =
      this.workspaceQuotaBytes === null
        ? []
        : [{ target: `${POD_PATHS.workspace}/overbrainer`, sizeBytes: this.workspaceQuotaBytes }];
    writeFileSync(initPath, initScript(mounts, tmpfs, this.gpuStandIn(pod)), { mode: 0o700 });
    pod.containerStarts++;
    pod.containerStartedAtMs = this.clock.nowMs();
    this.podLogLine(pod, `container start #${pod.containerStarts} (sshd port ${sshPort})`);
    const container = await Container.start({
      cmd: pod.cmd,
      env: this.podEnv(pod, publishedPort),
      mounts,
      initScriptPath: initPath,
      logPath: pod.dirs.log,
      ...(netnsPath === undefined ? {} : { netnsPath }),
    });
    if (this.stale(pod, gen)) {
      await container.kill();
      return;
    }
    pod.container = container;
    if (pod.status === 'PROVISIONING') this.setStatus(pod, 'STARTING');
    void container.exited.then((exit) => this.onContainerExit(pod, gen, exit));
    void this.probe(pod, gen, mode);
  }

  /**
   * The pod's nvidia-smi stand-in (./gpus.ts): written beside its init script, the figures file
   * written once with the setting in force; the init lines that put it on the pod's PATH.
   */
  protected gpuStandIn(pod: PodState): string[] {
    const figures = figuresPath(this.stateDir, pod.id);
    if (!existsSync(figures))
      this.writeGpuFigures(pod, this.gpuSettings.get(pod.id) ?? this.gpuDefault);
    const bin = join(pod.runtimeDir, 'gpu-bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'nvidia-smi'), standInScript(figures), { mode: 0o755 });
    return standInMountLines(bin);
  }

  /** A new setting for `podId`'s GPUs, or every pod's (and the later pods'). */
  protected setGpus(input: GpuSetting, podId?: string): void {
    const setting = parseGpuSetting(input);
    if (podId !== undefined) {
      const pod = this.podsById.get(podId);
      if (pod === undefined || pod.deleted) throw new Error(`no pod '${podId}'`);
      this.gpuSettings.set(podId, setting);
      this.writeGpuFigures(pod, setting);
      return;
    }
    this.gpuDefault = setting;
    this.gpuSettings.clear();
    for (const pod of this.podsById.values()) {
      if (!pod.deleted) this.writeGpuFigures(pod, setting);
    }
  }

  protected writeGpuFigures(pod: PodState, setting: GpuSetting): void {
    writeFigures(
      figuresPath(this.stateDir, pod.id),
      figuresFile(setting, pod.gpuType, pod.gpuCount, pod.id),
    );
  }

  protected podEnv(pod: PodState, publishedPort: number): Record<string, string> {
    const resolved: Record<string, string> = {};
    for (const [name, value] of Object.entries(pod.env)) {
      resolved[name] = value.replace(SECRET_REF, (_all, secret: string) => {
        const found = [...this.secrets.values()].find((s) => s.name === secret);
        if (!found) this.podLogLine(pod, `env ${name}: secret '${secret}' no longer exists`);
        return found?.value ?? '';
      });
    }
    return {
      // The image's environment: a plain system PATH, as a container image sets it (the host's
      // PATH may point into the host's home, which the pod does not see).
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      HOME: '/root',
      ...resolved,
      // Runpod's own variables win over the request's.
      RUNPOD_POD_ID: pod.id,
      RUNPOD_API_KEY: pod.apiKey,
      RUNPOD_PUBLIC_IP: '127.0.0.1',
      ...(this.has22(pod) ? { RUNPOD_TCP_PORT_22: String(publishedPort) } : {}),
      RUNPOD_GPU_COUNT: String(pod.gpuCount),
      RUNPOD_DC_ID: pod.dataCenterId,
      ...(pod.member ? memberEnv(pod.member) : {}),
    };
  }

  /** Publishes ssh.direct once the pod's sshd answers with a banner (real-time polling). */
  protected async probe(
    pod: PodState,
    gen: number,
    mode: SshdFaultMode | undefined,
  ): Promise<void> {
    if (mode === 'unpublished') return;
    if (mode === 'closed' || mode === 'silent') {
      pod.bannerSeen = true; // published as soon as RUNNING, yet nothing SSH answers there
      this.maybePublish(pod);
      return;
    }
    const startedMs = Date.now();
    while (!this.stale(pod, gen)) {
      const port = pod.publishedPort;
      if (port !== null && (await probeSshBanner(port, 1000))) {
        if (this.stale(pod, gen)) return;
        pod.bannerSeen = true;
        this.maybePublish(pod);
        return;
      }
      // Quick at first (sshd usually answers within a second), then gentler on the machine.
      await sleepReal(
        Date.now() - startedMs < 2000 ? this.probeIntervalMs : this.probeIntervalMs * 4,
      );
    }
  }

  protected maybePublish(pod: PodState): void {
    if (pod.status === 'RUNNING' && pod.bannerSeen && this.has22(pod)) pod.published = true;
  }

  protected onContainerExit(
    pod: PodState,
    gen: number,
    exit: { code: number | null; signal: string | null },
  ): void {
    if (this.stale(pod, gen)) return; // we stopped it ourselves
    this.podLogLine(
      pod,
      `container exited (code ${exit.code ?? 'none'}, signal ${exit.signal ?? 'none'})`,
    );
    this.dropContainer(pod);
    const next = this.bumpGen(pod);
    if (exit.code === 125) {
      this.setStatus(pod, 'ERROR');
      this.releaseStock(pod);
      return;
    }
    if (!this.restartOnExit) {
      this.setStatus(pod, 'EXITED');
      this.releaseStock(pod);
      return;
    }
    // Runpod restarts a container whose command ended: same disk, a new port. A command that
    // keeps ending within seconds is restarted ever more slowly (up to 64 × the restart delay).
    const livedMs = this.clock.nowMs() - pod.containerStartedAtMs;
    pod.quickExits = livedMs < 10_000 ? pod.quickExits + 1 : 0;
    this.setStatus(pod, 'STARTING');
    const backoff = 2 ** Math.min(Math.max(0, pod.quickExits - 1), 6);
    this.launch(pod, next, this.boot.restart * backoff, this.boot.starting);
  }

  /** Forgets the container's ports and silent listener (the processes are gone or going). */
  protected dropContainer(pod: PodState): void {
    pod.container = undefined;
    pod.published = false;
    pod.bannerSeen = false;
    if (pod.sshPort !== null) this.reservedPorts.delete(pod.sshPort);
    if (pod.publishedPort !== null) this.reservedPorts.delete(pod.publishedPort);
    pod.sshPort = null;
    pod.publishedPort = null;
    if (pod.silentServer) {
      for (const socket of pod.silentSockets) socket.destroy();
      pod.silentServer.close();
      pod.silentServer = undefined;
    }
  }

  /** Kills the pod's container (every process of it) and waits until none is left. */
  protected async stopContainer(pod: PodState): Promise<void> {
    this.bumpGen(pod);
    const container = pod.container;
    this.dropContainer(pod);
    if (container) await container.kill();
  }

  protected releaseStock(pod: PodState): void {
    if (!pod.holdsStock) return;
    pod.holdsStock = false;
    pod.gpuType.stock[pod.dataCenterId] = (pod.gpuType.stock[pod.dataCenterId] ?? 0) + pod.gpuCount;
  }
}

/**
 * What Runpod sets on every member of an Instant Cluster (its Instant Clusters pages): the
 * primary's address and port, this member's address and rank, the cluster's shape.
 */
export function memberEnv(member: MemberState): Record<string, string> {
  const primary = memberAddress(0);
  return {
    PRIMARY_ADDR: primary,
    PRIMARY_PORT: String(PRIMARY_PORT),
    MASTER_ADDR: primary,
    MASTER_PORT: String(PRIMARY_PORT),
    HOST_NODE_ADDR: `${primary}:${PRIMARY_PORT}`,
    NODE_ADDR: member.ip,
    NODE_RANK: String(member.rank),
    NUM_NODES: String(member.podCount),
    NUM_TRAINERS: String(member.gpuCountPerPod),
    WORLD_SIZE: String(member.podCount * member.gpuCountPerPod),
  };
}
