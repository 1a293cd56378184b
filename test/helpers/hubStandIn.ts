/**
 * A loopback stand-in for the Hugging Face Hub, answering exactly the calls the job's push makes
 * (python/overbrainer_hub.py), on a free 127.0.0.1 port, recording each call; it can fail a route
 * on demand. What it checks: the bearer token on the API calls (never on the LFS upload URLs, as
 * the real ones are presigned), each LFS object's sha256 against its bytes, every committed LFS
 * file against an uploaded object. What it leaves out of the real Hub: real accounts and tokens'
 * scopes, its LFS size limits and storage, rate limits (429), branches and pull requests, and
 * the real upload-mode rule (here: `lfsFromBytes`).
 *
 * Routes (as the Hub's commit API):
 *   POST /api/repos/create                          {name, organization, private} → 200 | 409
 *   POST /api/models/<ns>/<name>/preupload/<rev>    {files: [{path, size, sample}]} → uploadMode
 *   POST /<ns>/<name>.git/info/lfs/objects/batch    {objects: [{oid, size}]} → upload actions
 *   PUT  /lfs/<oid>                                 one object's bytes (basic transfer)
 *   PUT  /lfs/<oid>/part/<n>                        a multipart part (answers an ETag)
 *   POST /lfs/<oid>                                 a multipart completion {oid, parts}
 *   POST /lfs-verify                                {oid, size}
 *   POST /api/models/<ns>/<name>/commit/<rev>       application/x-ndjson → {commitOid, commitUrl}
 */
import { createHash, randomBytes } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export type HubRoute =
  | 'create_repo'
  | 'preupload'
  | 'lfs_batch'
  | 'lfs_put'
  | 'lfs_part'
  | 'lfs_complete'
  | 'lfs_verify'
  | 'commit';

export interface HubCall {
  method: string;
  path: string;
  route: HubRoute | 'unknown';
  status: number;
  /** Whether the call carried `Authorization: Bearer <the token>`. */
  authorized: boolean;
  /** The raw Authorization header was present (on an LFS URL it must not be). */
  hadAuthorization: boolean;
}

export interface HubStandInOptions {
  /** The token the API calls must carry. */
  token: string;
  /** Files of at least this many bytes are `lfs` in the preupload's answer (default 10 MB). */
  lfsFromBytes?: number;
  /** LFS objects of at least this many bytes go multipart, in parts of `partBytes`. */
  multipartFromBytes?: number;
  partBytes?: number;
}

export interface HubStandIn {
  /** `http://127.0.0.1:<port>`: the job's HF_ENDPOINT. */
  url: string;
  calls: HubCall[];
  /** Repositories created (`ns/name`). */
  repos: Set<string>;
  /** Each repository's files at its last commit, by path. */
  files(repoId: string): Map<string, Buffer>;
  /** The revisions committed to `repoId`, oldest first. */
  revisions(repoId: string): string[];
  /** The next `times` calls of `route` answer `status` with `{error: message}`. */
  fail(route: HubRoute, status: number, message?: string, times?: number): void;
  close(): Promise<void>;
}

interface Fault {
  status: number;
  message: string;
  left: number;
}

export async function startHubStandIn(options: HubStandInOptions): Promise<HubStandIn> {
  const lfsFrom = options.lfsFromBytes ?? 10 * 1024 * 1024;
  const multipartFrom = options.multipartFromBytes ?? Infinity;
  const partBytes = options.partBytes ?? 5 * 1024 * 1024;
  const calls: HubCall[] = [];
  const repos = new Set<string>();
  const trees = new Map<string, Map<string, Buffer>>();
  const revisions = new Map<string, string[]>();
  const objects = new Map<string, Buffer>();
  const parts = new Map<string, Map<number, Buffer>>();
  const faults = new Map<HubRoute, Fault>();
  let base = '';

  const routeOf = (method: string, path: string): { route: HubRoute; repo?: string } | null => {
    let m: RegExpExecArray | null;
    if (method === 'POST' && path === '/api/repos/create') return { route: 'create_repo' };
    if (method === 'POST' && (m = /^\/api\/models\/([^/]+\/[^/]+)\/preupload\/[^/]+$/.exec(path)))
      return { route: 'preupload', repo: m[1] };
    if (method === 'POST' && (m = /^\/([^/]+\/[^/]+)\.git\/info\/lfs\/objects\/batch$/.exec(path)))
      return { route: 'lfs_batch', repo: m[1] };
    if (method === 'PUT' && /^\/lfs\/[0-9a-f]{64}$/.test(path)) return { route: 'lfs_put' };
    if (method === 'PUT' && /^\/lfs\/[0-9a-f]{64}\/part\/\d+$/.test(path))
      return { route: 'lfs_part' };
    if (method === 'POST' && /^\/lfs\/[0-9a-f]{64}$/.test(path)) return { route: 'lfs_complete' };
    if (method === 'POST' && path === '/lfs-verify') return { route: 'lfs_verify' };
    if (method === 'POST' && (m = /^\/api\/models\/([^/]+\/[^/]+)\/commit\/[^/]+$/.exec(path)))
      return { route: 'commit', repo: m[1] };
    return null;
  };
  const needsToken = (route: HubRoute): boolean =>
    !['lfs_put', 'lfs_part', 'lfs_complete'].includes(route);

  const answer = (
    route: HubRoute,
    body: Buffer,
    repo: string | undefined,
    path: string,
  ): { status: number; json?: unknown; headers?: Record<string, string> } => {
    const json = (): Record<string, unknown> => JSON.parse(body.toString('utf8')) as never;
    switch (route) {
      case 'create_repo': {
        const { name, organization } = json() as { name: string; organization: string | null };
        const id = `${organization ?? 'me'}/${name}`;
        if (repos.has(id))
          return { status: 409, json: { error: 'You already created this model repo' } };
        repos.add(id);
        return { status: 200, json: { url: `${base}/${id}` } };
      }
      case 'preupload': {
        if (!repos.has(repo!)) return { status: 404, json: { error: 'Repository not found' } };
        const files = (json().files as { path: string; size: number }[]).map((f) => ({
          path: f.path,
          uploadMode: f.size >= lfsFrom ? 'lfs' : 'regular',
          shouldIgnore: false,
        }));
        return { status: 200, json: { files } };
      }
      case 'lfs_batch': {
        const objs = (json().objects as { oid: string; size: number }[]).map(({ oid, size }) => {
          if (objects.has(oid)) return { oid, size };
          const href = `${base}/lfs/${oid}`;
          const header: Record<string, string> = {};
          if (size >= multipartFrom) {
            header.chunk_size = String(partBytes);
            for (let n = 1; (n - 1) * partBytes < size; n++)
              header[String(n)] = `${href}/part/${n}`;
          }
          return {
            oid,
            size,
            actions: {
              upload: { href, header },
              verify: { href: `${base}/lfs-verify`, header: {} },
            },
          };
        });
        return { status: 200, json: { transfer: 'basic', objects: objs } };
      }
      case 'lfs_put': {
        const oid = path.slice('/lfs/'.length);
        if (createHash('sha256').update(body).digest('hex') !== oid)
          return { status: 400, json: { error: 'the bytes do not hash to the oid' } };
        objects.set(oid, body);
        return { status: 200 };
      }
      case 'lfs_part': {
        const [, , oid, , n] = path.split('/');
        const got = parts.get(oid!) ?? new Map<number, Buffer>();
        got.set(Number(n), body);
        parts.set(oid!, got);
        return {
          status: 200,
          headers: { ETag: `"${createHash('md5').update(body).digest('hex')}"` },
        };
      }
      case 'lfs_complete': {
        const oid = path.slice('/lfs/'.length);
        const listed = json().parts as { partNumber: number; etag: string }[];
        const got = parts.get(oid) ?? new Map<number, Buffer>();
        const whole = Buffer.concat(listed.map((p) => got.get(p.partNumber) ?? Buffer.alloc(0)));
        const etagsOk = listed.every(
          (p) =>
            p.etag ===
            `"${createHash('md5')
              .update(got.get(p.partNumber) ?? '')
              .digest('hex')}"`,
        );
        if (!etagsOk || createHash('sha256').update(whole).digest('hex') !== oid)
          return { status: 400, json: { error: 'the parts do not make the object' } };
        objects.set(oid, whole);
        return { status: 200 };
      }
      case 'lfs_verify': {
        const { oid, size } = json() as { oid: string; size: number };
        const object = objects.get(oid);
        if (object?.length !== size) return { status: 404, json: { error: 'object not found' } };
        return { status: 200 };
      }
      case 'commit': {
        if (!repos.has(repo!)) return { status: 404, json: { error: 'Repository not found' } };
        const lines = body
          .toString('utf8')
          .split('\n')
          .filter((line) => line.trim() !== '')
          .map((line) => JSON.parse(line) as { key: string; value: Record<string, unknown> });
        if (lines[0]?.key !== 'header') return { status: 400, json: { error: 'no header line' } };
        const tree = new Map(trees.get(repo!) ?? []);
        for (const { key, value } of lines.slice(1)) {
          const at = value.path as string;
          if (key === 'file') tree.set(at, Buffer.from(value.content as string, 'base64'));
          else if (key === 'lfsFile') {
            const object = objects.get(value.oid as string);
            if (object === undefined)
              return { status: 400, json: { error: `LFS object of ${at} was never uploaded` } };
            tree.set(at, object);
          } else return { status: 400, json: { error: `unknown key ${key}` } };
        }
        trees.set(repo!, tree);
        const oid = randomBytes(20).toString('hex');
        revisions.set(repo!, [...(revisions.get(repo!) ?? []), oid]);
        return {
          status: 200,
          json: { commitOid: oid, commitUrl: `${base}/${repo!}/commit/${oid}` },
        };
      }
    }
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0]!;
      const method = req.method ?? 'GET';
      const found = routeOf(method, path);
      const auth = req.headers.authorization;
      const authorized = auth === `Bearer ${options.token}`;
      let status: number;
      let json: unknown;
      let headers: Record<string, string> = {};
      const fault = found === null ? undefined : faults.get(found.route);
      if (found === null) {
        status = 404;
        json = { error: `no route ${method} ${path}` };
      } else if (needsToken(found.route) && !authorized) {
        status = 401;
        json = { error: 'Invalid credentials in Authorization header' };
      } else if (fault !== undefined && fault.left > 0) {
        fault.left--;
        status = fault.status;
        json = { error: fault.message };
      } else {
        try {
          const got = answer(found.route, Buffer.concat(chunks), found.repo, path);
          status = got.status;
          json = got.json;
          headers = got.headers ?? {};
        } catch (error) {
          status = 400;
          json = { error: `bad request: ${String(error)}` };
        }
      }
      calls.push({
        method,
        path,
        route: found?.route ?? 'unknown',
        status,
        authorized,
        hadAuthorization: auth !== undefined,
      });
      const text = json === undefined ? '' : JSON.stringify(json);
      res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: base,
    calls,
    repos,
    files: (repoId) => trees.get(repoId) ?? new Map(),
    revisions: (repoId) => revisions.get(repoId) ?? [],
    fail: (route, status, message = `the stand-in fails ${route}`, times = 1) => {
      faults.set(route, { status, message, left: times });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
