/**
 * The launch line of a `launcher = "torchrun"` job: PyTorch's own launcher. On one pod it runs
 * standalone (its rendezvous on the pod itself), one process per GPU of the pod. On a multi-node
 * cluster it runs on every node, with the rendezvous on the cluster's primary node. The node's rank, the number of nodes,
 * the processes per node and the primary's address and port are the variables Runpod sets on
 * every member of an Instant Cluster (`NODE_RANK`, `NUM_NODES`, `NUM_TRAINERS`, `PRIMARY_ADDR`,
 * `PRIMARY_PORT`), which the pod's bootstrap writes into the job's environment file; the line
 * reads them when it runs, on each node, and fails at once naming the one that is missing.
 *
 * The collective traffic must go over the cluster's own network, not the management one: NCCL
 * (GPUs) and gloo (CPU) are told its interface (Runpod's Instant Clusters configuration page:
 * `NCCL_SOCKET_IFNAME=ens1`).
 */

/** The cluster network's interface on every member (Runpod's Instant Clusters configuration). */
export const CLUSTER_IFNAME = 'ens1';

/** Runpod's variables the launch line reads, with torchrun's flag for each. */
export const TORCHRUN_FLAGS: readonly (readonly [flag: string, variable: string])[] = [
  ['--nnodes', 'NUM_NODES'],
  ['--nproc_per_node', 'NUM_TRAINERS'],
  ['--node_rank', 'NODE_RANK'],
  ['--master_addr', 'PRIMARY_ADDR'],
  ['--master_port', 'PRIMARY_PORT'],
];

/** `value` as one word of a POSIX shell command line. */
function shellWord(value: string): string {
  return /^[A-Za-z0-9_./=:@%+-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}

export interface TorchrunOptions {
  /** The cluster network's interface (default {@link CLUSTER_IFNAME}). */
  ifname?: string;
  /** The torchrun program (default `torchrun`, from the job's PATH). */
  torchrun?: string;
}

/**
 * The POSIX sh line that starts `script` with its `args` under torchrun on this node (it `exec`s
 * torchrun: the job's exit status is torchrun's). `--redirects 1 --tee 1` keeps each process's
 * stdout in torchrun's log directory and on the job's own output: Debian's torchrun 1.13 fails at
 * launch with its default redirection.
 */
export function torchrunLine(
  script: string,
  args: readonly string[],
  options: TorchrunOptions = {},
): string {
  return torchrunCommand([script, ...args].map(shellWord).join(' '), options);
}

/**
 * {@link torchrunLine} for a configured command (`launcher = "torchrun"`): `command` is the
 * script and its arguments as shell words, written as the user wrote them after torchrun's flags.
 */
export function torchrunCommand(command: string, options: TorchrunOptions = {}): string {
  const ifname = options.ifname ?? CLUSTER_IFNAME;
  const flags = TORCHRUN_FLAGS.map(
    ([flag, variable]) =>
      `${flag}="\${${variable}:?is not set: this node is not a member of an Instant Cluster}"`,
  );
  const nics = `NCCL_SOCKET_IFNAME=${shellWord(ifname)} GLOO_SOCKET_IFNAME=${shellWord(ifname)}`;
  return `export ${nics}; ${execTorchrun(flags, command, options)}`;
}

/**
 * The line that starts a configured command (`launcher = "torchrun"`) on one pod of `gpus` GPUs:
 * one node, one process per GPU, its rendezvous on the pod itself on a port the system picks
 * (`--standalone` takes 29400, which hangs the job if anything else there holds it); gloo or
 * NCCL pick the pod's own interfaces.
 */
export function torchrunStandaloneCommand(
  command: string,
  gpus: number,
  options: TorchrunOptions = {},
): string {
  const flags = [
    '--nnodes=1',
    `--nproc_per_node=${gpus}`,
    '--rdzv_backend=c10d',
    '--rdzv_endpoint=localhost:0',
    '--rdzv_id=standalone',
  ];
  return execTorchrun(flags, command, options);
}

/**
 * `exec torchrun FLAGS --redirects 1 --tee 1 COMMAND`: each process's stdout kept in torchrun's
 * log directory and on the job's own output (Debian's torchrun 1.13 fails at launch with its
 * default redirection); the job's exit status is torchrun's.
 */
function execTorchrun(flags: string[], command: string, options: TorchrunOptions): string {
  const torchrun = shellWord(options.torchrun ?? 'torchrun');
  return ['exec', torchrun, ...flags, '--redirects', '1', '--tee', '1', command.trim()].join(' ');
}
