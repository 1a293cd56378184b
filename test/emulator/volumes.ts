/**
 * The emulator's network volumes as the pods use them: `PATCH /v2/network-volumes/{id}` (a new
 * name, a size that only grows) and, with `volumeQuota`, each volume's host directory a tmpfs of
 * its size, mounted once and unmounted at close.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { PodContainers } from './containers';
import { problem, type Reply, volumeJson } from './state';

export abstract class NetworkVolumes extends PodContainers {
  /** `PATCH /v2/network-volumes/{id}`: a new name, or a size that only grows (400 otherwise). */
  protected updateNetworkVolume(id: string, body: { size?: number; name?: string }): Reply {
    const volume = this.catalog.networkVolumes.find((v) => v.id === id);
    if (!volume) return problem(404, 'network volume not found');
    if (body.size !== undefined && body.size < volume.sizeGb) {
      return problem(
        400,
        `network volume storage cannot be reduced: it is ${volume.sizeGb} GB, ${body.size} GB asked`,
      );
    }
    if (body.size !== undefined && body.size !== volume.sizeGb) {
      const source = join(this.stateDir, 'volumes', volume.id);
      if (this.mountedVolumes.has(source)) {
        const raised = spawnSync(
          'mount',
          ['-o', `remount,size=${this.volumeQuotaBytes(body.size)}`, source],
          { stdio: ['ignore', 'ignore', 'pipe'] },
        );
        if (raised.status !== 0) {
          return problem(500, `cannot grow the volume: ${String(raised.stderr).trim()}`);
        }
      }
      volume.sizeGb = body.size;
    }
    if (body.name !== undefined) volume.name = body.name;
    return { status: 200, body: volumeJson(volume) };
  }

  protected volumeQuotaBytes(sizeGb: number): number {
    return Math.floor(sizeGb * (this.volumeQuota?.bytesPerGb ?? 0) * 0.94);
  }

  /** With `volumeQuota`, makes the volume's host directory a tmpfs of its quota: null, or why not. */
  protected mountVolumeQuota(volumeId: string, source: string): string | null {
    if (this.volumeQuota === null || this.mountedVolumes.has(source)) return null;
    const volume = this.catalog.networkVolumes.find((v) => v.id === volumeId);
    if (!volume) return `network volume '${volumeId}' not found`;
    const mounted = spawnSync(
      'mount',
      [
        '-t',
        'tmpfs',
        '-o',
        `size=${this.volumeQuotaBytes(volume.sizeGb)},mode=0755,nosuid,nodev`,
        'tmpfs',
        source,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    if (mounted.status !== 0) {
      return `cannot mount the quota of network volume '${volumeId}': ${String(mounted.stderr).trim()}`;
    }
    this.mountedVolumes.add(source);
    return null;
  }

  protected unmountVolumes(): void {
    for (const source of this.mountedVolumes) {
      spawnSync('umount', ['-l', source], { stdio: 'ignore' });
    }
    this.mountedVolumes.clear();
  }
}
