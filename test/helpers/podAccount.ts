/**
 * A small scripted Runpod account on a loopback port for the pod ls / pod rm unit tests: its
 * pods, their wire shape, and the real clock shifted by a settable offset.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { systemClock, type Clock } from '../../src/core/clock';

export const HOST_KEY =
  'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOv1kJg2b3q4c5d6e7f8g9h0i1j2k3l4m5n6o7p8q9r0';
export const API_KEY = 'rpa_UNITTESTKEY0123456789';

/**
 * The real clock, shifted by `offsetMs` (so records can be made hours old); `freeze()` stops its
 * reading where it is (waits stay real), for a figure that must not depend on the machine's load.
 */
export class ShiftedClock implements Clock {
  offsetMs = 0;
  private frozenAtMs: number | null = null;
  nowMs(): number {
    return this.frozenAtMs ?? Date.now() + this.offsetMs;
  }
  freeze(): void {
    this.frozenAtMs = this.nowMs();
  }
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return systemClock.sleep(ms, signal);
  }
}

export interface FakePod {
  id: string;
  name: string;
  status: string;
  cost: number;
  gpu: string;
  marker: string | null;
  createdAt: string;
  /** DELETE answers 204 but the pod stays. */
  sticky?: boolean;
  /** GET of this pod answers 500. */
  broken?: boolean;
  /** The next N GETs of this pod answer 404 although it exists. */
  phantom404?: number;
  /** Left out of the account's list (a list that lags behind). */
  unlisted?: boolean;
}

/** A scripted Runpod account: pods, their GET/DELETE, the list, the secrets. */
export class FakeAccount {
  readonly pods = new Map<string, FakePod>();
  readonly secrets = new Map<string, string>();
  readonly requests: string[] = [];
  baseUrl = '';
  private server: http.Server | null = null;

  add(pod: Partial<FakePod> & { id: string }): FakePod {
    const full: FakePod = {
      name: `overbrainer-${pod.marker ?? 'x'}-1`,
      status: 'RUNNING',
      cost: 0.53,
      gpu: 'NVIDIA A40',
      marker: null,
      createdAt: '2026-09-29T11:00:00Z',
      ...pod,
    };
    this.pods.set(full.id, full);
    return full;
  }

  deletes(): string[] {
    return this.requests.filter((r) => r.startsWith('DELETE /v2/pods/')).map((r) => r.slice(16));
  }

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      this.requests.push(`${req.method} ${url.pathname}`);
      const send = (status: number, body?: unknown): void => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(body === undefined ? '' : JSON.stringify(body));
      };
      const notFound = (): void =>
        send(404, { title: 'Not Found', status: 404, detail: 'pod not found' });
      req.resume();
      req.on('end', () => {
        const one = /^\/v2\/pods\/([A-Za-z0-9]+)$/.exec(url.pathname);
        if (req.method === 'GET' && url.pathname === '/v2/pods') {
          return send(200, { pods: [...this.pods.values()].filter((p) => !p.unlisted).map(wire) });
        }
        if (one && req.method === 'GET') {
          const pod = this.pods.get(one[1] ?? '');
          if (pod?.broken) return send(500, { title: 'Internal', status: 500, detail: 'boom' });
          if (pod && (pod.phantom404 ?? 0) > 0) {
            pod.phantom404 = (pod.phantom404 ?? 0) - 1;
            return notFound();
          }
          return pod ? send(200, wire(pod)) : notFound();
        }
        if (one && req.method === 'DELETE') {
          const pod = this.pods.get(one[1] ?? '');
          if (!pod) return notFound();
          if (!pod.sticky) this.pods.delete(pod.id);
          return send(204);
        }
        if (req.method === 'GET' && url.pathname === '/v2/account/secrets') {
          const name = url.searchParams.get('name');
          const secrets = [...this.secrets.entries()]
            .filter(([, n]) => name === null || n === name)
            .map(([id, n]) => ({ id, name: n }));
          return send(200, { secrets });
        }
        const secret = /^\/v2\/account\/secrets\/(.+)$/.exec(url.pathname);
        if (secret && req.method === 'DELETE') {
          return this.secrets.delete(secret[1] ?? '') ? send(204) : notFound();
        }
        send(404, { title: 'Not Found', status: 404, detail: 'no route' });
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    const { port } = this.server.address() as AddressInfo;
    this.baseUrl = `http://127.0.0.1:${port}/v2`;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}

export function wire(pod: FakePod): unknown {
  return {
    id: pod.id,
    name: pod.name,
    status: pod.status,
    cost: pod.cost,
    gpu: { id: pod.gpu, count: 1 },
    env: pod.marker === null ? {} : { OVERBRAINER_RUN_ID: pod.marker, OTHER: 'never read' },
    createdAt: pod.createdAt,
  };
}
