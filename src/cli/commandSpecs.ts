/**
 * Every CLI command as data: its words, the options it accepts (for `node:util` parseArgs), its
 * synopsis, what it does and one example. The parser (./args.ts) and the help (./help.ts) both
 * read this table, so a command cannot be accepted without being documented, nor the other way.
 */

export interface OptionSpec {
  type: 'string' | 'boolean';
  /** The value's placeholder in the help (`GB`, `RUN_ID`). */
  value?: string;
  help: string;
}

export interface CommandSpec {
  /** The command's words after `overbrainer`: `train`, `pod rm`. */
  name: string;
  /** The positional arguments in the synopsis (`RUN_ID`), empty for none. */
  args: string;
  /** What the command does: one line for the command list, more lines for its help. */
  summary: string;
  details?: string[];
  options: Record<string, OptionSpec>;
  example: string;
}

/** A boolean option. */
const flag = (help: string): OptionSpec => ({ type: 'boolean', help });

/** An option taking a value (`value`: its placeholder in the help). */
const valued = (value: string, help: string): OptionSpec => ({ type: 'string', value, help });

const JSON_OPTION = flag(
  'print a JSON document instead of the table (fields: see README, "--json fields")',
);

const RUN_ID_ONLY = (name: string, summary: string, details: string[] = []): CommandSpec => ({
  name,
  args: 'RUN_ID',
  summary,
  details,
  options: {},
  example: `overbrainer ${name} tiny_20261204-060000`,
});

/** A listing: no argument, a table or with --json a JSON document. */
const LISTING = (name: string, summary: string, example = `overbrainer ${name}`): CommandSpec => ({
  name,
  args: '',
  summary,
  options: { '--json': JSON_OPTION },
  example,
});

export const COMMAND_SPECS: readonly CommandSpec[] = [
  {
    name: 'init',
    args: '',
    summary: 'write a commented overbrainer.toml here, and say how to set the API key',
    details: ['An existing overbrainer.toml is never overwritten unless --force is given.'],
    options: { '--force': flag('overwrite an existing overbrainer.toml') },
    example: 'overbrainer init',
  },
  {
    name: 'train',
    args: '',
    summary: 'start a run on its target and follow it to its end',
    details: [
      "Ctrl-C before the job starts deletes the run's pod; once the job runs it only stops",
      'following (follow it again with `overbrainer train attach RUN_ID`).',
    ],
    options: {
      '--target': valued('NAME', 'the [targets.NAME] to run on'),
      '--keep-pod': flag('keep the pod once the job ends (only `overbrainer pod rm` deletes it)'),
      '--resume-from': valued('RUN_ID', "start from a stopped run's snapshot"),
      '--dry-run': flag('print the quote and the plan; create nothing'),
    },
    example: 'overbrainer train --target pod',
  },
  RUN_ID_ONLY('train attach', 'follow a run again; retrieve its results and end its pod'),
  RUN_ID_ONLY(
    'train stop',
    "stop a run's job with a snapshot, retrieve it and the results, end its pod",
    ['Resume it later with `overbrainer train --resume-from RUN_ID`.'],
  ),
  RUN_ID_ONLY('train cancel', "cancel a run's job, retrieve what it wrote, end its pod"),
  RUN_ID_ONLY(
    'train keep',
    "keep a run's pod once its job ends (only `overbrainer pod rm` deletes it)",
  ),
  RUN_ID_ONLY(
    'train release',
    'release a kept pod (even kept with --keep-pod): its deadline and graces apply, then it is retrieved and deleted as any run',
  ),
  LISTING('runs ls', "list this project's runs (no API call)", 'overbrainer runs ls --json'),
  {
    name: 'runs show',
    args: 'RUN_ID',
    summary: 'one run: state, target, pod, spend, steps, loss, ETA or outcome, what to do next',
    options: { '--json': JSON_OPTION },
    example: 'overbrainer runs show tiny_20261204-060000',
  },
  {
    name: 'runs ssh',
    args: 'RUN_ID',
    summary: "open a shell on a run's pod (a kept one, or one still running), or on your machine",
    details: [
      'With the target\'s ssh_client: "openssh" runs the system ssh with every option on its',
      'command line and no configuration file (`runs show` prints that command); "builtin" uses',
      "Overbrainer's own SSH client. The host key is the one pinned when the pod was created.",
      'A run folder Overbrainer did not write (not private to you) is refused.',
      'A run of a kind = "ssh" target opens in its directory on your machine: your ssh with your',
      'SSH config, agent and known_hosts ("builtin": its own client, trusting the same).',
    ],
    options: {},
    example: 'overbrainer runs ssh tiny_20261204-060000',
  },
  {
    name: 'runs logs',
    args: 'RUN_ID',
    summary: "the job's log (runs/RUN_ID/job.log), or with --pod the pod's log",
    details: [
      "The pod's log is kept in runs/RUN_ID/.pod/pod.log, else read from the API;",
      '--follow streams it from the API until the pod is gone.',
    ],
    options: {
      '--tail': valued('N', 'the last N lines (0 to 5000, default 100)'),
      '--pod': flag("the pod's log instead of the job's"),
      '--source': valued(
        'container|system',
        "only the container's or the system's lines (with --pod)",
      ),
      '--follow': flag('stream new lines until the pod is gone (with --pod)'),
      '--node': valued('R', "a cluster run's node R: its job log, kept at the run's end"),
    },
    example: 'overbrainer runs logs tiny_20261204-060000 --pod --follow',
  },
  {
    name: 'spend',
    args: '',
    summary: "each run's estimated spend beside what Runpod billed; over 1 % apart is flagged",
    options: {
      '--since': valued('DATE', 'only runs created since DATE (2026-09-01)'),
      '--json': JSON_OPTION,
    },
    example: 'overbrainer spend --since 2026-09-01',
  },
  LISTING('pod ls', "list the account's overbrainer pods, matched with runs/"),
  {
    name: 'pod rm',
    args: 'RUN_ID',
    summary: "delete a run's pods, or POD_ID: one pod that pod ls lists (a stray, an orphan)",
    details: ['A run still in progress needs --force (it is then marked failed).'],
    options: { '--force': flag('delete the pod of a run in progress too') },
    example: 'overbrainer pod rm tiny_20261204-060000',
  },
  {
    name: 'pod gpus',
    args: '',
    summary: 'list Secure-cloud GPU types, cheapest first',
    options: {
      '--min-vram': valued('GB', 'at least GB of GPU memory'),
      '--max-price': valued('P', 'at most P US dollars per GPU-hour'),
      '--in-stock': flag('only the GPU types in stock'),
      '--data-center': valued('ID', 'only the GPU types offered in data center ID, with its stock'),
      '--json': JSON_OPTION,
    },
    example: 'overbrainer pod gpus --min-vram 24 --in-stock',
  },
  LISTING(
    'pod datacenters',
    'list the data centers, with the GPU types in stock in each',
    'overbrainer pod datacenters --json',
  ),
  LISTING('pod volumes', "list the account's network volumes (for network_volume_id)"),
  LISTING('pod templates', "list the account's pod templates"),
  {
    name: 'sweep start',
    args: '',
    summary: 'run the sweep of [sweep] (an Optuna study, each trial a run) under its budget',
    details: [
      'A sweep already started is resumed from runs/sweeps/NAME/: no trial runs twice.',
      "Ctrl-C stops following; running trials go on under their pods' watchdogs.",
      'The Python with Optuna: OVERBRAINER_SWEEP_PYTHON, else python3.',
      '`overbrainer sweep` alone does the same.',
      'Exit 0: ended with a best trial; 1: failed, no complete trial, or stopped following.',
    ],
    options: { '--dry-run': flag("print the quote against the sweep's budget; create nothing") },
    example: 'overbrainer sweep start --dry-run',
  },
  {
    name: 'sweep',
    args: '',
    summary: 'the same as `sweep start`',
    options: { '--dry-run': flag("print the quote against the sweep's budget; create nothing") },
    example: 'overbrainer sweep --dry-run',
  },
  {
    name: 'sweep attach',
    args: 'NAME',
    summary:
      'follow a sweep whose client stopped: its live trials to their end, then new ones while trials and budget remain',
    details: [
      'Refused while another live client runs the sweep; taken over once that one died.',
      'A sweep that ended is shown as it is.',
      'Exit codes as `sweep start`.',
    ],
    options: {},
    example: 'overbrainer sweep attach lr-rank',
  },
  {
    name: 'sweep stop',
    args: 'NAME',
    summary:
      'stop a sweep: no new trial; running trials stopped, their results brought home, their pods deleted',
    details: [
      'The client running the sweep (another window or process) is asked to, and this waits for it;',
      'with none running it, this client stops the trials itself.',
      'Exit 0 once the sweep ended (stopped, or it had ended before); 1 otherwise.',
    ],
    options: {},
    example: 'overbrainer sweep stop lr-rank',
  },
  LISTING('sweep ls', 'list the sweeps of runs/sweeps/, with their best value and spend'),
  {
    name: 'sweep show',
    args: 'NAME',
    summary: "a sweep's trials (state, value, cost, run), its best trial and its money",
    options: { '--json': JSON_OPTION },
    example: 'overbrainer sweep show lr-rank',
  },
];

/** The spec named `name` (`pod rm`), if any. */
export function commandSpec(name: string): CommandSpec | undefined {
  return COMMAND_SPECS.find((spec) => spec.name === name);
}

/** The subcommands of a group (`pod` → ls, rm, gpus, …), in the table's order. */
export function subcommands(group: string): string[] {
  return COMMAND_SPECS.filter((s) => s.name.startsWith(`${group} `)).map(
    (s) => s.name.split(' ')[1] ?? '',
  );
}
