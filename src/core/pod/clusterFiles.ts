/**
 * A cluster run's files to every member with the user's link carrying them once (issue 37): the
 * client uploads them to rank 0 only (the single-pod upload, verified there, sent as soon as rank
 * 0 answers SSH), then rank 0 sends them to every other member at once over the cluster's private
 * network: `tar` into `ssh` to each member's private address (`cluster.ip`), as an image with
 * OpenSSH and GNU tar does it. The key for it is the run's, one-shot: made here, its public half
 * authorized on the other members for one use (`restrict` and a forced command that removes its
 * own line, unpacks the archive into the run's directory and checks it), its private half on rank
 * 0's stdin into a temporary file that the copy removes, never an argument or a log line; rank 0
 * checks each member's host key against the run's pinned one, as the client does. Each member
 * checks its copy by SHA-256 against the client's own hashes of the files (sent to it by the
 * client beside the key, as a single pod's upload is checked), before any job starts.
 *
 * Bounded: each member's copy is given {@link COPY_BASE_S} plus its bytes at
 * {@link COPY_MIN_BYTES_PER_S} (`timeout` on rank 0, the client's own bound behind it). A member
 * whose copy fails, times out or does not verify throws a PodError naming it, before any job
 * starts: the caller deletes the whole cluster, as for any member that fails to come up.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { join } from 'node:path';
import { describeError } from '../errors';
import { excerpt } from '../exec/failures';
import { shQuote } from '../exec/shell';
import { generateEd25519KeyPair } from '../exec/sshKeys';
import { regularFiles } from '../exec/sshUpload';
import type { ClusterMember } from './cluster';
import { log, type PodCtx } from './context';
import { PodError } from './podError';

/** Seconds every member's copy from rank 0 is given, whatever its size (connect, start, check). */
export const COPY_BASE_S = 60;
/** The slowest copy over the cluster network allowed past the base (its data centers' links are 10 to 3,200 Gb/s). */
export const COPY_MIN_BYTES_PER_S = 8 * 1024 * 1024;
/** The alias rank 0 pins the members' host key under. */
const HOST_ALIAS = 'overbrainer-member';

/** The files of the run directory that go to every member: their SHA-256 (hex) by path, and bytes. */
export interface RunManifest {
  sums: Map<string, string>;
  bytes: number;
}

export interface MemberFeed {
  runId: string;
  localDir: string;
  remoteDir: string;
  /** Top-level names of the local run directory that never leave this machine. */
  exclude: readonly string[];
  /** The members' pinned host public key (OpenSSH line). */
  hostPublicKey: string;
  /** Rank 0's upload (sent as it answered SSH, or now): every file there, verified. */
  rank0Uploaded: Promise<void>;
}

/** Hashes the files of `localDir` that an upload sends (minus `exclude`; links never followed). */
export async function localManifest(
  localDir: string,
  exclude: readonly string[],
  signal?: AbortSignal,
): Promise<RunManifest> {
  const sizes = new Map<string, number>();
  const files = await regularFiles(localDir, exclude, sizes);
  const sums = new Map<string, string>();
  for (const file of files) {
    const hash = createHash('sha256');
    for await (const chunk of createReadStream(join(localDir, file), {
      highWaterMark: 256 * 1024,
      signal,
    })) {
      hash.update(chunk as Buffer);
    }
    sums.set(file, hash.digest('hex'));
  }
  return { sums, bytes: [...sizes.values()].reduce((a, b) => a + b, 0) };
}

/**
 * Every member but rank 0 gets the run's files from rank 0 (see the file comment), once rank 0's
 * upload is done; each copy checked on arrival. Throws a PodError naming the first member that
 * failed.
 */
export async function feedMembers(
  ctx: Pick<PodCtx, 'bus'>,
  members: readonly ClusterMember[],
  feed: MemberFeed,
  signal?: AbortSignal,
): Promise<void> {
  const rank0 = members.find((m) => m.rank === 0);
  const others = members.filter((m) => m.rank !== 0);
  if (rank0 === undefined) throw new PodError('exec', 'the cluster has no node 0');
  if (others.length === 0) return feed.rank0Uploaded;
  const key = generateEd25519KeyPair(`overbrainer-peer-${feed.runId}`);
  const hashed = localManifest(feed.localDir, feed.exclude, signal);
  const [manifest] = await Promise.all([
    hashed,
    feed.rank0Uploaded,
    ...others.map(async (member) => authorize(member, key.publicKey, feed, await hashed, signal)),
  ]);
  const seconds = Math.ceil(COPY_BASE_S + manifest.bytes / COPY_MIN_BYTES_PER_S);
  const exits = await copyFromRank0(rank0, others, key.privateKey, feed, manifest, seconds, signal);
  for (const member of others) {
    const exit = exits.get(member.rank);
    if (exit?.code === 0) continue;
    const why =
      exit === undefined
        ? 'node 0 did not say how its copy ended'
        : exit.code === 124 || exit.code === 137
          ? `it did not finish within ${seconds} s`
          : `exit ${exit.code}${exit.text ? `: ${exit.text}` : ''}`;
    throw notFed(member, `over the cluster network (${why})`);
  }
  log(
    ctx,
    'info',
    `the run's files (${(manifest.bytes / 1048576).toFixed(1)} MiB) went to node 0 over your link, and to node${others.length > 1 ? 's' : ''} ${others.map((m) => m.rank).join(', ')} from node 0 over the cluster network, verified on each`,
  );
}

function notFed(member: ClusterMember, why: string): PodError {
  return new PodError(
    'exec',
    `node ${member.rank} (pod ${member.pod.id}) did not get the run's files from node 0 ${why}: the whole cluster is deleted`,
    'Train again. If it fails again the same way, check that the image has OpenSSH (ssh, sshd) and GNU tar: the nodes copy the run’s files between them over SSH.',
  );
}

/**
 * The one-shot key's line on `member`, and beside it the client's SHA-256s of the files: the key
 * may only run one command, which removes its own line (one use), unpacks the archive into the
 * run's directory and checks every file against those hashes (its exit says how that went).
 */
async function authorize(
  member: ClusterMember,
  publicKey: string,
  feed: MemberFeed,
  manifest: RunManifest,
  signal?: AbortSignal,
): Promise<void> {
  const dir = shQuote(feed.remoteDir);
  const sums = `"$HOME/.overbrainer-peer-${feed.runId}.sha256"`;
  const forced = [
    'umask 077; f="$HOME/.ssh/authorized_keys"',
    `{ grep -v -F -e ${shQuote(keyBody(publicKey))} "$f" >"$f.peer" || :; } && mv -f "$f.peer" "$f"`,
    `mkdir -p -- ${dir} && tar -x -f - -C ${dir} && cd -- ${dir} || exit 98`,
    `[ -s ${sums} ] || { rm -f ${sums}; exit 0; }`,
    `o=$(sha256sum -c - <${sums} 2>&1); r=$?; rm -f ${sums}`,
    `printf '%s\\n' "$o" | grep -v ': OK$' | head -c 4000 >&2; exit $r`,
  ].join('; ');
  // One line; sshd reads `\"` in a quoted option as `"`, and every other character as it is.
  if (/[\n\r]/.test(forced))
    throw notFed(member, '(its run directory has a line break in its path)');
  const line = `restrict,command="${forced.replace(/"/g, '\\"')}" ${publicKey}`;
  const lines = [...manifest.sums]
    .filter(([file]) => !/[\\\n\r]/.test(file))
    .map(([file, sum]) => `${sum}  ${file}\n`);
  const result = await member.executor
    .exec(
      `umask 077 && mkdir -p "$HOME/.ssh" && IFS= read -r l && cat >${sums} && printf '%s\\n' "$l" >>"$HOME/.ssh/authorized_keys"`,
      { stdin: `${line}\n${lines.join('')}`, signal, maxOutputBytes: 8 * 1024 },
    )
    .catch((error: unknown) => {
      throw notFed(member, `(its key for the copy could not be set: ${describeError(error)})`);
    });
  if (result.code !== 0) {
    throw notFed(member, `(its key for the copy could not be set: ${excerpt(result.stderr)})`);
  }
}

/** The base64 part of an OpenSSH public key line (what finds its authorized_keys line). */
function keyBody(publicKey: string): string {
  return publicKey.split(' ')[1] ?? publicKey;
}

/**
 * One command on rank 0: the key and the pinned host key from stdin into a private temporary
 * directory, then `tar` of the run's files into `ssh` to every other member at once, each under
 * `timeout`; prints `rc <rank> <code>` and `<rank>| <line>` of what each said. The directory goes
 * whatever happens.
 */
async function copyFromRank0(
  rank0: ClusterMember,
  others: readonly ClusterMember[],
  privateKey: string,
  feed: MemberFeed,
  manifest: RunManifest,
  seconds: number,
  signal?: AbortSignal,
): Promise<Map<number, { code: number | null; text: string }>> {
  const ssh = [
    'ssh -F /dev/null -p 22 -i "$d/key" -o IdentitiesOnly=yes -o BatchMode=yes',
    '-o StrictHostKeyChecking=yes -o UserKnownHostsFile="$d/known"',
    `-o HostKeyAlias=${HOST_ALIAS} -o ConnectTimeout=10 -o ServerAliveInterval=5`,
    '-o ServerAliveCountMax=3 -o LogLevel=ERROR',
    // AES-GCM first: the CPU's AES instructions, several times chacha20's speed on one core.
    '-o Ciphers=aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com',
  ].join(' ');
  const sends = others.map((member) => {
    if (member.ip === null)
      throw notFed(member, '(Runpod gave it no address on the cluster network)');
    const to = shQuote(`${member.pod.sshDirect?.username ?? 'root'}@${member.ip}`);
    const r = member.rank;
    return `(tar -c -f - --null -T "$d/list" | timeout -k 5 ${seconds} ${ssh} ${to}) >"$d/out.${r}" 2>&1 & p${r}=$!`;
  });
  const waits = others.map(
    ({ rank: r }) =>
      `wait $p${r}; echo "rc ${r} $?"; tail -c 2000 "$d/out.${r}" | sed 's/^/${r}| /'`,
  );
  const script = [
    'umask 077',
    'd=$(mktemp -d) || exit 97',
    `trap 'rm -rf "$d"' EXIT`,
    `IFS= read -r k && printf '%s' "$k" | base64 -d >"$d/key" || exit 97`,
    `IFS= read -r h && printf '${HOST_ALIAS} %s\\n' "$h" >"$d/known" || exit 97`,
    'cat >"$d/list"',
    `cd -- ${shQuote(feed.remoteDir)} || exit 98`,
    ...sends,
    ...waits,
  ].join('\n');
  const list = [...manifest.sums.keys()].map((file) => `${file}\0`).join('');
  const result = await rank0.executor
    .exec(script, {
      stdin: `${Buffer.from(privateKey).toString('base64')}\n${feed.hostPublicKey}\n${list}`,
      signal,
      timeoutMs: (seconds + 30) * 1000,
      maxOutputBytes: 64 * 1024,
    })
    .catch((error: unknown) => {
      throw new PodError(
        'exec',
        `node 0 (pod ${rank0.pod.id}) could not send the run's files to the other nodes: ${describeError(error)}: the whole cluster is deleted`,
        'Train again; another GPU type or data center may fare better.',
        { cause: error },
      );
    });
  const exits = new Map<number, { code: number | null; text: string }>();
  const lines = result.stdout.toString('utf8').split(/\r?\n/);
  for (const line of lines) {
    const rc = /^rc (\d+) (\d+)$/.exec(line);
    if (rc) exits.set(Number(rc[1]), { code: Number(rc[2]), text: '' });
    const said = /^(\d+)\| (.*)$/.exec(line);
    const exit = said ? exits.get(Number(said[1])) : undefined;
    if (said && exit) exit.text = excerpt(`${exit.text}\n${said[2]}`);
  }
  if (result.code !== 0 && exits.size === 0) {
    throw new PodError(
      'exec',
      `node 0 (pod ${rank0.pod.id}) could not start sending the run's files to the other nodes (exit ${result.code}): ${excerpt(result.stderr)}: the whole cluster is deleted`,
      'Train again. If it fails again the same way, check that the image has mktemp, base64, timeout, OpenSSH and GNU tar.',
    );
  }
  return exits;
}
