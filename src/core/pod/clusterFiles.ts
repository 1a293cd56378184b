/**
 * A cluster run's files to every member with the user's link carrying them once (issue 37): the
 * client sends them to rank 0 only, as one verified upload, and rank 0 passes the stream on to
 * every other member over the cluster's private network while it arrives (`tee` into `ssh` to
 * each member's private address, `cluster.ip`, as an image with OpenSSH and GNU tar does it), so
 * that the members' copies land with rank 0's, not after it. The key for it is the run's,
 * one-shot: made here, its public half authorized on each other member as soon as it answers
 * SSH, for one use (`restrict` and a forced command that removes its own line and unpacks the
 * archive into the run's directory), its private half on rank 0's stdin ahead of the archive,
 * into a private temporary directory that goes with the command, never an argument or a log
 * line; rank 0 checks each member's host key against the run's pinned one, as the client does.
 * Each member's copy is then checked by SHA-256 against the hashes this machine made of the bytes
 * it sent (`sha256sum -c` on the member, beside rank 0's own check), before any job starts.
 *
 * Bounded: a member whose host stops answering drops out within ssh's ServerAlive limit (15 s),
 * and once the last byte reached rank 0 each member's copy is given {@link COPY_BASE_S} plus its
 * bytes at {@link COPY_MIN_BYTES_PER_S}; the upload itself is bounded as a single pod's. A member
 * whose copy fails, times out or does not verify throws a PodError naming it, before any job
 * starts: the caller deletes the whole cluster, as for any member that fails to come up. A
 * connection to rank 0 that drops sends everything again with a new key (up to
 * {@link FEED_ATTEMPTS} in all): the members' copies may be partial.
 */
import { describeError } from '../errors';
import { ExecError, type ExecResult } from '../exec/executor';
import { excerpt } from '../exec/failures';
import { shQuote } from '../exec/shell';
import { generateEd25519KeyPair, type Ed25519KeyPair } from '../exec/sshKeys';
import { checkOnTarget, uploadVerified, type UploadRelay } from '../exec/sshUpload';
import type { TransferCallback } from '../transferProgress';
import type { ClusterMember } from './cluster';
import { log, type PodCtx } from './context';
import { PodError } from './podError';

/** Seconds every member's copy is given once the last byte reached rank 0 (connect, start, check). */
export const COPY_BASE_S = 60;
/** The slowest copy over the cluster network allowed past the base (its data centers' links are 10 to 3,200 Gb/s). */
export const COPY_MIN_BYTES_PER_S = 8 * 1024 * 1024;
/** Uploads to rank 0 sent in all when its connection drops (as a single pod's, ../exec/ssh.ts). */
export const FEED_ATTEMPTS = 3;
/** The alias rank 0 pins the members' host key under. */
const HOST_ALIAS = 'overbrainer-member';

export interface FeedPlan {
  runId: string;
  localDir: string;
  remoteDir: string;
  /** Top-level names of the local run directory that never leave this machine. */
  exclude: readonly string[];
  /** The members' pinned host public key (OpenSSH line). */
  hostPublicKey: string;
  /** The cluster's nodes, rank 0 included. */
  nodes: number;
  /** The upload around its progress callback (the run's `transfer` events, as a single pod's). */
  reported: (send: (onProgress: TransferCallback) => Promise<unknown>) => Promise<unknown>;
  /** Told about what the upload left out or sent again. */
  onWarning: (message: string) => void;
}

/**
 * The files of one attempt's cluster: hand {@link onConnected} to the cluster's start (each
 * member's key is set as it answers SSH, and the upload to rank 0 goes as soon as rank 0 and
 * every other member are there, beside the watchdogs' verdicts), then await {@link done}.
 */
export class ClusterFeed {
  private key: Ed25519KeyPair;
  private readonly members = new Map<number, ClusterMember>();
  private readonly authorized = new Map<number, Promise<void>>();
  private sending: Promise<void> | null = null;

  constructor(
    private readonly ctx: Pick<PodCtx, 'bus'>,
    private readonly plan: FeedPlan,
    private readonly signal?: AbortSignal,
  ) {
    this.key = peerKey(plan.runId);
  }

  /** A member answered SSH: its key for the copy set now; the upload once all are there. */
  readonly onConnected = (member: ClusterMember): void => {
    this.members.set(member.rank, member);
    if (member.rank !== 0) this.authorize(member);
    if (this.sending === null && this.members.size === this.plan.nodes) {
      this.sending = this.send();
      this.sending.catch(() => undefined); // awaited by done(); a start that failed drops it
    }
  };

  /**
   * Every member's copy in place and verified. Throws a PodError naming the member whose copy
   * failed, or the upload's own error (rank 0's).
   */
  async done(members: readonly ClusterMember[]): Promise<void> {
    for (const member of members) {
      if (this.members.get(member.rank) !== member) this.onConnected(member);
    }
    for (let attempt = 1; ; attempt++) {
      try {
        await (this.sending ??= this.send());
        return;
      } catch (error) {
        const dropped = error instanceof ExecError && error.kind === 'connection';
        if (!dropped || attempt >= FEED_ATTEMPTS || this.signal?.aborted) throw error;
        this.plan.onWarning(
          `the connection to node 0 dropped during the upload (${error.message}); sending the run's files again (attempt ${attempt + 1} of ${FEED_ATTEMPTS})`,
        );
        this.key = peerKey(this.plan.runId);
        for (const member of this.members.values()) {
          if (member.rank !== 0) this.authorize(member);
        }
        this.sending = this.send();
      }
    }
  }

  private authorize(member: ClusterMember): void {
    const set = authorize(member, this.key.publicKey, this.plan, this.signal);
    set.catch(() => undefined); // awaited by send()
    this.authorized.set(member.rank, set);
  }

  private async send(): Promise<void> {
    const rank0 = this.members.get(0);
    if (rank0 === undefined) throw new PodError('exec', 'the cluster has no node 0');
    const others = [...this.members.values()]
      .filter((m) => m.rank !== 0)
      .sort((a, b) => a.rank - b.rank);
    await Promise.all(others.map((m) => this.authorized.get(m.rank)));
    const relay = relayTo(this.ctx, rank0, others, this.key.privateKey, this.plan);
    let bytes = 0;
    await this.plan.reported((onProgress) =>
      uploadVerified(
        rank0.executor,
        this.plan.localDir,
        this.plan.remoteDir,
        {
          exclude: this.plan.exclude,
          signal: this.signal,
          onWarning: this.plan.onWarning,
          onProgress: (counts) => {
            bytes = counts.bytesTotal ?? bytes;
            onProgress(counts);
          },
        },
        relay,
      ),
    );
    log(
      this.ctx,
      'info',
      `the run's files (${(bytes / 1048576).toFixed(1)} MiB) went to node 0 over your link, and on to node${others.length > 1 ? 's' : ''} ${others.map((m) => m.rank).join(', ')} from node 0 over the cluster network as they arrived, verified on each`,
    );
  }
}

function peerKey(runId: string): Ed25519KeyPair {
  return generateEd25519KeyPair(`overbrainer-peer-${runId}`);
}

function notFed(member: ClusterMember, why: string): PodError {
  return new PodError(
    'exec',
    `node ${member.rank} (pod ${member.pod.id}) did not get the run's files from node 0 ${why}: the whole cluster is deleted`,
    'Train again. If it fails again the same way, check that the image has OpenSSH (ssh, sshd) and GNU tar: the nodes copy the run’s files between them over SSH.',
  );
}

/**
 * The one-shot key's line on `member` (in place of any earlier one of the run's): the key may
 * only run one command, which removes its own line (one use) and unpacks the archive into the
 * run's directory (its exit says how that went).
 */
async function authorize(
  member: ClusterMember,
  publicKey: string,
  plan: Pick<FeedPlan, 'runId' | 'remoteDir'>,
  signal?: AbortSignal,
): Promise<void> {
  const dir = shQuote(plan.remoteDir);
  const forced = [
    'umask 077; f="$HOME/.ssh/authorized_keys"',
    `{ grep -v -F -e ${shQuote(keyBody(publicKey))} "$f" >"$f.peer" || :; } && mv -f "$f.peer" "$f"`,
    `mkdir -p -- ${dir} && tar -x -f - -C ${dir}`,
  ].join('; ');
  // One line; sshd reads `\"` in a quoted option as `"`, and every other character as it is.
  if (/[\n\r]/.test(forced))
    throw notFed(member, '(its run directory has a line break in its path)');
  const line = `restrict,command="${forced.replace(/"/g, '\\"')}" ${publicKey}`;
  const result = await member.executor
    .exec(
      'umask 077 && mkdir -p "$HOME/.ssh" && f="$HOME/.ssh/authorized_keys" && IFS= read -r l && ' +
        `{ grep -v -F -e ${shQuote(`overbrainer-peer-${plan.runId}`)} "$f" >"$f.peer" 2>/dev/null || :; } && ` +
        'mv -f "$f.peer" "$f" && printf \'%s\\n\' "$l" >>"$f"',
      { stdin: `${line}\n`, signal, maxOutputBytes: 8 * 1024 },
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
 * Rank 0's side of the upload: the key and the pinned host key from the head of its stdin into a
 * private temporary directory, an `ssh` to every other member reading a FIFO each, and the rest
 * of stdin (the archive) through `tee` into those FIFOs and into rank 0's own unpack. A member
 * whose `ssh` ends early leaves the others and rank 0 to go on (`tee` ignores SIGPIPE). Prints
 * `rc <rank> <code>` and `<rank>| <line>` of what each member said; exits with the unpack's
 * status. The directory goes whatever happens.
 */
function relayTo(
  ctx: Pick<PodCtx, 'bus'>,
  rank0: ClusterMember,
  others: readonly ClusterMember[],
  privateKey: string,
  plan: Pick<FeedPlan, 'hostPublicKey' | 'remoteDir'>,
): UploadRelay {
  let seconds = COPY_BASE_S;
  return {
    preamble: `${Buffer.from(privateKey).toString('base64')}\n${plan.hostPublicKey}\n`,
    command: (unpack, bytes) => {
      seconds = Math.ceil(COPY_BASE_S + bytes / COPY_MIN_BYTES_PER_S);
      return relayScript(unpack, others, seconds);
    },
    onResult: (result) => {
      if (result.code === 97) {
        throw new PodError(
          'exec',
          `node 0 (pod ${rank0.pod.id}) could not start passing the run's files on to the other nodes (exit 97): ${excerpt(result.stderr)}: the whole cluster is deleted`,
          'Train again. If it fails again the same way, check that the image has mktemp, mkfifo, base64, OpenSSH and GNU tar.',
        );
      }
      const exits = memberExits(result);
      for (const member of others) {
        const exit = exits.get(member.rank);
        if (exit?.code === 0) continue;
        const why =
          exit === undefined
            ? 'node 0 did not say how its copy ended'
            : exit.code === 124
              ? `it did not finish within ${seconds} s of the last byte`
              : `exit ${exit.code}${exit.text ? `: ${exit.text}` : ''}`;
        throw notFed(member, `over the cluster network (${why})`);
      }
    },
    verify: async (sums, signal) => {
      log(
        ctx,
        'debug',
        `the run's files reached node${others.length > 1 ? 's' : ''} ${others.map((m) => m.rank).join(', ')} from node 0: checking them against this machine's SHA-256s`,
      );
      await Promise.all(
        others.map((member) =>
          checkOnTarget(member.executor, plan.remoteDir, sums, signal).catch((error: unknown) => {
            throw notFed(member, `over the cluster network (${describeError(error)})`);
          }),
        ),
      );
    },
  };
}

function relayScript(unpack: string, others: readonly ClusterMember[], seconds: number): string {
  const ssh = [
    'ssh -F /dev/null -p 22 -i "$d/key" -o IdentitiesOnly=yes -o BatchMode=yes',
    '-o StrictHostKeyChecking=yes -o UserKnownHostsFile="$d/known"',
    `-o HostKeyAlias=${HOST_ALIAS} -o ConnectTimeout=10 -o ServerAliveInterval=5`,
    '-o ServerAliveCountMax=3 -o LogLevel=ERROR',
    // AES-GCM first: the CPU's AES instructions, several times chacha20's speed on one core.
    '-o Ciphers=aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com',
  ].join(' ');
  const lines = [
    'umask 077',
    'd=$(mktemp -d) || exit 97',
    `trap 'rm -rf "$d"' EXIT`,
    `IFS= read -r k && printf '%s' "$k" | base64 -d >"$d/key" || exit 97`,
    `IFS= read -r h && printf '${HOST_ALIAS} %s\\n' "$h" >"$d/known" || exit 97`,
  ];
  for (const member of others) {
    if (member.ip === null)
      throw notFed(member, '(Runpod gave it no address on the cluster network)');
    const to = shQuote(`${member.pod.sshDirect?.username ?? 'root'}@${member.ip}`);
    const r = member.rank;
    lines.push(
      `mkfifo "$d/f${r}" || exit 97`,
      `${ssh} ${to} <"$d/f${r}" >"$d/out${r}" 2>&1 & p${r}=$!`,
      // Its bound, counted from the last byte in (the user's link sets the pace until then).
      `(n=0; while kill -0 $p${r} 2>/dev/null; do sleep 1; [ -e "$d/sent" ] && n=$((n+1)); ` +
        `if [ $n -ge ${seconds} ]; then : >"$d/late${r}"; kill $p${r} 2>/dev/null; fi; done) ` +
        '</dev/null >/dev/null 2>&1 &',
    );
  }
  const fifos = others.map(({ rank }) => `"$d/f${rank}"`).join(' ');
  lines.push(
    `(trap '' PIPE; exec tee -- ${fifos}) | { ${unpack}; }`,
    't=$?',
    ': >"$d/sent"',
    ...others.map(
      ({ rank: r }) =>
        `wait $p${r}; c=$?; [ -e "$d/late${r}" ] && c=124; echo "rc ${r} $c"; ` +
        `tail -c 2000 "$d/out${r}" | sed 's/^/${r}| /'`,
    ),
    'exit $t',
  );
  return lines.join('\n');
}

/** The `rc <rank> <code>` and `<rank>| <line>` lines of the relay's output, by rank. */
function memberExits(result: ExecResult): Map<number, { code: number; text: string }> {
  const exits = new Map<number, { code: number; text: string }>();
  for (const line of result.stdout.toString('utf8').split(/\r?\n/)) {
    const rc = /^rc (\d+) (\d+)$/.exec(line);
    if (rc) exits.set(Number(rc[1]), { code: Number(rc[2]), text: '' });
    const said = /^(\d+)\| (.*)$/.exec(line);
    const exit = said ? exits.get(Number(said[1])) : undefined;
    if (said && exit) exit.text = excerpt(`${exit.text}\n${said[2]}`);
  }
  return exits;
}
