/**
 * A cluster's private network, as Runpod's Instant Clusters have one: each member in a network
 * namespace of its own, with one interface `ens1` (the name Runpod's configuration page gives the
 * cluster interface) on a bridge that lives in a namespace of the cluster's own. Every address is
 * inside those namespaces (10.65.0.0/16, as Runpod's document shows): the host's network never
 * gets an address, a route or a packet of it, and a member has no way out but its relays.
 *
 *   [cluster ns: br0] ─ veth ─ [member 0 ns: lo, ens1 10.65.0.2] ─ relay ─ host
 *                     ─ veth ─ [member 1 ns: lo, ens1 10.65.0.3] ─ relay ─ host
 *
 * The host reaches a member only through two relays that meet in Unix sockets (which belong to
 * the filesystem, not to a network namespace): the member's sshd (127.0.0.1:22 in its namespace)
 * published on a host loopback port, and the emulator's API (the watchdog's calls) on 127.0.0.1 at
 * the emulator's port inside the member's namespace.
 *
 * Every namespace is held by a process (`unshare --net sleep infinity`) that dies with the
 * emulator (`--pdeathsig`), so a crashed emulator leaves no namespace, interface or relay behind.
 * Needs root and iproute2 (`ip`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';

/** The cluster network (the document's example CIDR); member `rank` is `.rank+2`. */
export const CLUSTER_CIDR = '10.65.0.0/16';
export const CLUSTER_IFNAME = 'ens1';
/** The port the primary offers for the rendezvous (`PRIMARY_PORT`): torch's usual one. */
export const PRIMARY_PORT = 29500;
/** Where sshd listens inside a member's namespace (its own: no other pod shares it). */
export const MEMBER_SSH_PORT = 22;

export function memberAddress(rank: number): string {
  return `10.65.0.${rank + 2}`;
}

/** A process that holds a new network namespace; `path` names it for nsenter. */
interface Holder {
  child: ChildProcess;
  path: string;
}

function sleepReal(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function run(args: string[], input?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(args[0] ?? 'false', args.slice(1), {
      stdio: [input === undefined ? 'ignore' : 'pipe', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0
        ? resolve()
        : reject(new Error(`${args.join(' ')} failed (${code}): ${stderr.trim()}`)),
    );
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(input);
  });
}

async function holdNamespace(): Promise<Holder> {
  const child = spawn(
    'setpriv',
    ['--pdeathsig', 'KILL', '--', 'unshare', '--net', '--', 'sleep', 'infinity'],
    { stdio: 'ignore', detached: true },
  );
  const pid = child.pid;
  if (pid === undefined) throw new Error('cannot start a network namespace holder');
  const own = readlinkSync('/proc/self/ns/net');
  for (let i = 0; i < 500; i++) {
    try {
      if (readlinkSync(`/proc/${pid}/ns/net`) !== own)
        return { child, path: `/proc/${pid}/ns/net` };
    } catch {
      // not there yet
    }
    if (child.exitCode !== null) break;
    await sleepReal(2);
  }
  child.kill('SIGKILL');
  throw new Error('the network namespace holder did not enter a namespace of its own');
}

/** `ip` commands (one a line, as `ip -batch` reads them) in the namespace at `path`: one process. */
function ipIn(path: string, commands: string[]): Promise<void> {
  return run(['nsenter', `--net=${path}`, '--', 'ip', '-batch', '-'], `${commands.join('\n')}\n`);
}

/** Relays each connection to `listen` on to `target` (both: a TCP address or a Unix socket). */
const RELAY_SCRIPT = `
const net = require('net');
const at = (s) => s.startsWith('unix:') ? { path: s.slice(5) } : { host: s.split(':')[1], port: Number(s.split(':')[2]) };
let left = process.argv.length - 1;
for (const rule of process.argv.slice(1)) {
  const [from, to] = rule.split('=');
  net.createServer((c) => {
    const u = net.connect(at(to));
    c.pipe(u); u.pipe(c);
    c.on('error', () => u.destroy()); u.on('error', () => c.destroy());
    c.on('close', () => u.destroy()); u.on('close', () => c.destroy());
  }).listen(at(from), () => { if (--left === 0) process.stdout.write('ready\\n'); });
}
`;

/** One member's namespace and relays. */
export class MemberNet {
  private relay: ChildProcess | undefined;
  private readonly servers: Server[] = [];
  private readonly sockets = new Set<Socket>();

  constructor(
    readonly rank: number,
    private readonly holder: Holder,
    readonly sshSocket: string,
    readonly apiSocket: string,
  ) {}

  /** `/proc/<pid>/ns/net` of the member's namespace (for `nsenter --net=`). */
  get path(): string {
    return this.holder.path;
  }

  get address(): string {
    return memberAddress(this.rank);
  }

  /**
   * Starts the relays: the member's sshd on a host loopback port (`hostSshPort`, already free),
   * and the emulator's API (`apiPort` on the host) at 127.0.0.1:`apiPort` inside the member.
   */
  async relays(hostSshPort: number, apiPort: number): Promise<void> {
    const relay = spawn(
      'setpriv',
      [
        '--pdeathsig',
        'KILL',
        '--',
        'nsenter',
        `--net=${this.path}`,
        '--',
        process.execPath,
        '-e',
        RELAY_SCRIPT,
        `unix:${this.sshSocket}=tcp:127.0.0.1:${MEMBER_SSH_PORT}`,
        `tcp:127.0.0.1:${apiPort}=unix:${this.apiSocket}`,
      ],
      { stdio: ['ignore', 'pipe', 'ignore'], detached: true },
    );
    this.relay = relay;
    await new Promise<void>((resolve, reject) => {
      let out = '';
      relay.stdout?.on('data', (chunk: Buffer) => {
        out += chunk.toString('utf8');
        if (out.includes('ready')) resolve();
      });
      relay.once('error', reject);
      relay.once('exit', (code) => reject(new Error(`the member's relay ended (${code})`)));
    });
    this.servers.push(
      await this.serve({ port: hostSshPort, host: '127.0.0.1' }, { path: this.sshSocket }),
      await this.serve({ path: this.apiSocket }, { port: apiPort, host: '127.0.0.1' }),
    );
  }

  private serve(
    listen: { port: number; host: string } | { path: string },
    target: { port: number; host: string } | { path: string },
  ): Promise<Server> {
    const server = createServer((client) => {
      const upstream = createConnection(target);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.once('close', () => this.sockets.delete(s));
      }
      client.pipe(upstream);
      upstream.pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(listen, () => resolve(server));
    });
  }

  /** Ends the relays and the namespace (its interfaces go with it). */
  close(): void {
    for (const socket of this.sockets) socket.destroy();
    for (const server of this.servers) server.close();
    this.relay?.kill('SIGKILL');
    this.holder.child.kill('SIGKILL');
  }
}

/** A cluster's network: the bridge's namespace and each member's. */
export class ClusterNet {
  private constructor(
    private readonly bridge: Holder,
    readonly members: MemberNet[],
  ) {}

  /**
   * Makes the bridge and `count` members joined to it, their sockets under `runtimeDir`: every
   * member at once (as Runpod provisions a cluster's members), none waiting for another's.
   */
  static async create(count: number, runtimeDir: string): Promise<ClusterNet> {
    const members: MemberNet[] = [];
    const holders: Holder[] = [];
    const hold = async (): Promise<Holder> => {
      const holder = await holdNamespace();
      holders.push(holder);
      return holder;
    };
    const bridge = hold().then(async (holder) => {
      await ipIn(holder.path, ['link add br0 type bridge', 'link set br0 up']);
      return holder;
    });
    const made = await Promise.allSettled([
      bridge,
      ...Array.from({ length: count }, async (_, rank) => {
        const holder = await hold();
        members[rank] = new MemberNet(
          rank,
          holder,
          join(runtimeDir, `ssh-${rank}.sock`),
          join(runtimeDir, `api-${rank}.sock`),
        );
        const veth = `v${rank}`;
        await ipIn((await bridge).path, [
          `link add ${veth} type veth peer name ${CLUSTER_IFNAME} netns ${holder.child.pid}`,
          `link set ${veth} master br0 up`,
        ]);
        await ipIn(holder.path, [
          'link set lo up',
          `addr add ${memberAddress(rank)}/16 dev ${CLUSTER_IFNAME}`,
          `link set ${CLUSTER_IFNAME} up`,
        ]);
      }),
    ]);
    const failed = made.find((m): m is PromiseRejectedResult => m.status === 'rejected');
    if (failed) {
      // Every namespace made goes (all settled: none is still being made).
      for (const holder of holders) holder.child.kill('SIGKILL');
      throw failed.reason;
    }
    return new ClusterNet(await bridge, members);
  }

  /** Ends every relay and namespace of the cluster (synchronous: fit for process exit). */
  close(): void {
    for (const member of this.members) member.close();
    this.bridge.child.kill('SIGKILL');
  }
}
