/**
 * The emulator's HTTP layer: reading requests, bearer keys, the quota window, request faults,
 * the strict contract check of every request and reply, and the admin routes.
 */
import { type IncomingMessage, type ServerResponse } from 'node:http';
import { type Fault, type FaultEffect, type FaultHit } from './faults';
import { type GpuSetting } from './gpus';
import { type RequestLogEntry } from './types';
import { IMPLEMENTED, isObject, MAX_BODY_BYTES, problem, type Reply } from './state';
import { Handlers } from './handlers';

export abstract class HttpLayer extends Handlers {
  protected write(res: ServerResponse, reply: Reply): void {
    // As Runpod's: when the answer was made, to the second. Node's own is a copy refreshed by a
    // timer, which a busy process runs late: its Date could be seconds before the answer.
    const headers: Record<string, string> = {
      date: new Date(this.clock.nowMs()).toUTCString(),
      ...reply.headers,
    };
    let payload: string | undefined;
    if (reply.body !== undefined) {
      payload = JSON.stringify(reply.body);
      headers['content-type'] ??=
        reply.status >= 400 ? 'application/problem+json' : 'application/json';
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    res.writeHead(reply.status, headers);
    res.end(payload);
  }

  protected async readBody(req: IncomingMessage): Promise<string> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      const buffer = chunk as Buffer;
      size += buffer.length;
      if (size > MAX_BODY_BYTES) throw new Error('too large');
      chunks.push(buffer);
    }
    return Buffer.concat(chunks).toString('utf8');
  }

  protected async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname === '/_emulator' || url.pathname.startsWith('/_emulator/')) {
      await this.admin(req, res, url);
      return;
    }
    const startedMs = this.clock.nowMs();
    const entry: RequestLogEntry = {
      seq: ++this.seq,
      method: req.method ?? 'GET',
      path: url.pathname + url.search,
      route: null,
      status: 0,
      atMs: startedMs,
      durationMs: 0,
      key: 'none',
    };
    this.log.push(entry);
    const finish = (reply: Reply, operationId: string | null): void => {
      entry.status = reply.status;
      entry.durationMs = this.clock.nowMs() - startedMs;
      if (operationId) this.selfCheck(entry, operationId, reply);
      this.write(res, reply);
    };

    let text: string;
    try {
      text = await this.readBody(req);
    } catch {
      finish(problem(413, `request body larger than ${MAX_BODY_BYTES} bytes`), null);
      return;
    }
    const match = this.contract.match(entry.method, url.pathname);
    if (match.kind === 'no-path') {
      finish(problem(404, `no route for ${entry.method} ${url.pathname}`), null);
      return;
    }
    if (match.kind === 'method-not-allowed') {
      finish(
        {
          ...problem(405, 'The requested method is not allowed for this path.'),
          headers: { allow: match.allow.join(', ') },
        },
        null,
      );
      return;
    }
    const operationId = match.operationId;
    entry.route = operationId;

    // Authentication: the account key, or a live pod's own key.
    const header = req.headers.authorization;
    const token = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '')?.[1];
    let caller: { kind: 'account' } | { kind: 'pod'; podId: string };
    if (header === undefined || header === '') {
      finish(problem(401, 'missing bearer token'), operationId);
      return;
    } else if (token === this.accountKey) {
      caller = { kind: 'account' };
      entry.key = 'account';
    } else if (token !== undefined && this.podKeys.has(token)) {
      const podId = this.podKeys.get(token) ?? '';
      caller = { kind: 'pod', podId };
      entry.key = `pod:${podId}`;
    } else {
      entry.key = 'invalid';
      finish(
        problem(401, token ? 'invalid bearer token' : 'malformed Authorization header'),
        operationId,
      );
      return;
    }
    if (caller.kind === 'account' && this.quota !== null) {
      const leftMs = this.quota.resetAtMs - this.clock.nowMs();
      if (leftMs > 0) {
        const reply = problem(429, `rate limit exceeded for the ${this.quota.window} window`);
        reply.headers = {
          'retry-after': String(Math.ceil(leftMs / 1000)),
          ...this.quotaHeaders(),
        };
        finish(reply, operationId);
        return;
      }
      this.quota = null;
    }

    // The body, parsed (validated further down).
    const declared = this.contract.hasRequestBody(operationId);
    let body: unknown;
    if (declared.declared && text.trim() !== '') {
      const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
      if (type !== 'application/json') {
        finish(
          problem(415, `send the body as application/json (got '${type ?? ''}')`),
          operationId,
        );
        return;
      }
      try {
        body = JSON.parse(text);
      } catch {
        finish(problem(400, 'request body is not valid JSON'), operationId);
        return;
      }
    }
    const podId = match.pathParams.id;
    const action = isObject(body) && typeof body.action === 'string' ? body.action : undefined;

    // A pod-scoped key reads, stops and terminates its own pod, and nothing else; a member's
    // reads its cluster, and deletes it only where the emulator plays that answer.
    if (caller.kind === 'pod') {
      const own = podId === caller.podId;
      const cluster = this.clusterOf(caller.podId);
      const ownCluster =
        cluster !== undefined &&
        podId === cluster.id &&
        ['getCluster', 'listClusterPods', 'deleteCluster'].includes(operationId);
      const allowed =
        (own &&
          (operationId === 'getPod' ||
            operationId === 'deletePod' ||
            (operationId === 'podAction' &&
              (action === undefined || action === 'stop' || action === 'terminate')))) ||
        (ownCluster && (operationId !== 'deleteCluster' || this.memberKeyDeletesCluster));
      if (!allowed) {
        finish(
          problem(
            403,
            ownCluster
              ? `access denied: a pod-scoped key may not delete its cluster (${podId ?? ''})`
              : `access denied: a pod-scoped key may only read, stop and terminate its own pod (${caller.podId})`,
          ),
          operationId,
        );
        return;
      }
    }
    if (!IMPLEMENTED.has(operationId)) {
      finish(problem(501, `the Runpod emulator does not implement ${operationId}`), operationId);
      return;
    }

    const gpuId =
      isObject(body) && isObject(body.gpu) && typeof body.gpu.id === 'string'
        ? body.gpu.id
        : undefined;
    const hit = this.faultBook.onCall({
      route: operationId,
      key: caller.kind,
      podId,
      gpuId,
      action,
    });
    if (hit) entry.faultId = hit.faultId;
    if (
      hit &&
      !hit.applied &&
      hit.effect.type !== 'quotaSpent' &&
      hit.effect.type !== 'dropStream'
    ) {
      this.applyEffect(hit, req, res, entry, finish, operationId);
      return;
    }

    const query = this.contract.validateQuery(operationId, url.searchParams);
    if (query.errors.length > 0) {
      finish(problem(422, 'Request validation failed.', query.errors), operationId);
      return;
    }
    if (declared.declared || body !== undefined) {
      const errors = this.contract.validateRequestBodyOf(operationId, body);
      if (errors.length > 0) {
        finish(problem(422, 'Request validation failed.', errors), operationId);
        return;
      }
    }

    if (operationId === 'getPodLogs') {
      const dropAfter = hit?.effect.type === 'dropStream' ? hit.effect.afterEvents : undefined;
      const lastEventId = req.headers['last-event-id'];
      const reply = this.streamPodLogs(
        podId ?? '',
        query.values,
        typeof lastEventId === 'string' ? lastEventId : undefined,
        res,
        dropAfter,
      );
      if (reply) finish(reply, operationId);
      else entry.status = 200;
      return;
    }
    const reply = await this.handle(operationId, match.pathParams, query.values, body, caller);
    if (hit && hit.effect.type === 'quotaSpent' && reply.status < 300) {
      this.quota = {
        window: hit.effect.window ?? 'minute',
        resetAtMs: this.clock.nowMs() + hit.effect.resetS * 1000,
      };
      reply.headers = { ...reply.headers, ...this.quotaHeaders() };
      finish(reply, operationId);
      return;
    }
    if (hit && hit.applied && reply.status < 300) {
      const made = isObject(reply.body) ? reply.body.id : undefined;
      if (hit.unlistedFor !== undefined && typeof made === 'string')
        this.unlisted.set(made, hit.unlistedFor);
      this.applyEffect(hit, req, res, entry, finish, operationId);
      return;
    }
    finish(reply, operationId);
  }

  /** `RateLimit` and `RateLimit-Policy` as Runpod's document shows them, for the spent quota. */
  protected quotaHeaders(): Record<string, string> {
    if (this.quota === null) return {};
    const t = Math.max(0, Math.ceil((this.quota.resetAtMs - this.clock.nowMs()) / 1000));
    const windows = { minute: [60, 60], hour: [3000, 3600], day: [50000, 86400] } as const;
    const members = (Object.keys(windows) as (keyof typeof windows)[]).map((w) =>
      w === this.quota?.window
        ? `"${w}";r=0;t=${t}`
        : `"${w}";r=${windows[w][0] - 1};t=${windows[w][1]}`,
    );
    const policy = (Object.keys(windows) as (keyof typeof windows)[]).map(
      (w) => `"${w}";q=${windows[w][0]};w=${windows[w][1]}`,
    );
    return { ratelimit: members.join(', '), 'ratelimit-policy': policy.join(', ') };
  }

  protected applyEffect(
    hit: FaultHit,
    req: IncomingMessage,
    res: ServerResponse,
    entry: RequestLogEntry,
    finish: (reply: Reply, operationId: string | null) => void,
    operationId: string,
  ): void {
    const effect: FaultEffect = hit.effect;
    if (effect.type === 'status') {
      const reply = problem(effect.status, effect.detail);
      if (effect.status === 422 && isObject(reply.body)) {
        reply.body.errors = ['$: rejected by an injected fault'];
      }
      if (effect.status === 429) {
        reply.headers = { 'retry-after': String(effect.retryAfterS ?? 1) };
      }
      finish(reply, operationId);
    } else if (effect.type === 'drop') {
      entry.status = 'dropped';
      req.socket.destroy();
    } else {
      entry.status = 'hung';
      this.hanging.add(res);
      res.once('close', () => this.hanging.delete(res));
    }
  }

  protected selfCheck(entry: RequestLogEntry, operationId: string, reply: Reply): void {
    const body = reply.body === undefined ? undefined : JSON.parse(JSON.stringify(reply.body));
    const contentType =
      reply.headers?.['content-type'] ??
      (reply.body === undefined
        ? undefined
        : reply.status >= 400
          ? 'application/problem+json'
          : 'application/json');
    const errors = this.contract.validateResponseOf(operationId, {
      status: reply.status,
      contentType,
      retryAfter: reply.headers?.['retry-after'],
      body,
    });
    for (const error of errors) {
      this.violations.push(`${entry.method} ${entry.path} → ${reply.status}: ${error}`);
    }
  }

  /**
   * The admin routes (ledger, request log, pods, faults): the account key only, as for the API
   * itself. Any process of the machine reaches the port, the emulated pods' jobs included; a
   * pod's own key is refused too (a job could otherwise install faults or read the request log).
   */
  protected async admin(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const route = `${req.method} ${url.pathname.replace(/\/$/, '')}`;
    const token = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];
    if (token !== this.accountKey) {
      req.resume();
      this.write(
        res,
        problem(401, 'the admin routes need the account key: Authorization: Bearer <account key>'),
      );
      return;
    }
    let text: string;
    try {
      text = await this.readBody(req);
    } catch {
      this.write(res, problem(413, 'body too large'));
      return;
    }
    try {
      switch (route) {
        case 'GET /_emulator/ledger':
          this.write(res, { status: 200, body: this.ledgerBook.snapshot() });
          return;
        case 'GET /_emulator/requests':
          this.write(res, { status: 200, body: { requests: this.log } });
          return;
        case 'GET /_emulator/violations':
          this.write(res, { status: 200, body: { violations: this.violations } });
          return;
        case 'GET /_emulator/pods':
          this.write(res, {
            status: 200,
            // Without the pod keys: those stay in code (`emulator.pod(id).apiKey`).
            body: {
              pods: [...this.podsById.values()].map((p) => ({
                ...this.internals(p),
                apiKey: undefined,
              })),
            },
          });
          return;
        case 'GET /_emulator/faults':
          this.write(res, { status: 200, body: { faults: this.faultBook.pending() } });
          return;
        case 'DELETE /_emulator/faults':
          this.faultBook.clear();
          this.write(res, { status: 204 });
          return;
        case 'POST /_emulator/faults': {
          let parsed: unknown;
          try {
            parsed = JSON.parse(text);
          } catch {
            this.write(res, problem(400, 'send a fault (or an array of faults) as JSON'));
            return;
          }
          const list = Array.isArray(parsed) ? parsed : [parsed];
          const ids: string[] = [];
          for (const fault of list) ids.push(await this.addFault(fault as Fault));
          this.write(res, { status: 200, body: { ids } });
          return;
        }
        case 'POST /_emulator/gpus': {
          // {"gpus": "idle"} or {"gpus": [{"utilizationPct": 3, …}], "podId": "…"}
          let parsed: { gpus?: unknown; podId?: unknown };
          try {
            parsed = JSON.parse(text) as { gpus?: unknown; podId?: unknown };
          } catch {
            this.write(
              res,
              problem(400, 'send {"gpus": <preset or figures>, "podId"?: …} as JSON'),
            );
            return;
          }
          if (parsed.podId !== undefined && typeof parsed.podId !== 'string') {
            this.write(res, problem(400, 'podId: a pod id'));
            return;
          }
          this.setGpus(parsed.gpus as GpuSetting, parsed.podId);
          this.write(res, { status: 204 });
          return;
        }
        default:
          this.write(
            res,
            problem(
              404,
              `no admin route ${route}; try GET /_emulator/ledger, /requests, /pods, /violations, GET|POST|DELETE /_emulator/faults, POST /_emulator/gpus`,
            ),
          );
      }
    } catch (error) {
      this.write(res, problem(400, error instanceof Error ? error.message : String(error)));
    }
  }
}
