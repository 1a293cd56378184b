/**
 * `npm run reliability`: runs the reliability matrix (every
 * test/integration/reliability.*.integration.test.ts, issue #7) with mocha's JSON reporter, sums
 * what the cases recorded (test/helpers/reliability.ts: faults injected, pods created and leaked
 * from the emulator's ledgers, verified results kept or lost), and writes docs/RELIABILITY.md:
 * the safety model, the bounds on billed time when the client disappears at each step (from the
 * production values of src/core/timing.ts), and the matrix's figures.
 *
 *   npm run reliability                  # run the matrix, write docs/RELIABILITY.md
 *   npm run reliability -- --no-write    # run and print the figures only
 *   npm run reliability -- crash api     # only the files whose name holds one of these words
 *   npm run reliability -- --figures budget recoveryDeaths
 *                                        # rewrite only the doc's "Figures" from these files
 *
 * Needs what the integration tier needs (root, sshd, util-linux: see scripts/test.sh). Exits 1
 * when a case failed, a pod leaked or a result was lost.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PRODUCTION_TIMING } from '../src/core/timing';
import type { ReliabilityRecord } from '../test/helpers/reliability';
import { RELIABILITY_LOG_ENV } from '../test/helpers/reliability';
import { FIXES_SECTION } from './reliabilityFixes';

const ROOT = path.join(__dirname, '..');
const TESTS = path.join(ROOT, 'test', 'integration');
const DOC = path.join(ROOT, 'docs', 'RELIABILITY.md');

interface MochaTest {
  title: string;
  fullTitle: string;
  file?: string;
  duration?: number;
  err?: { message?: string };
}

interface MochaReport {
  stats: { tests: number; passes: number; failures: number; pending: number; duration: number };
  passes: MochaTest[];
  failures: MochaTest[];
  pending: MochaTest[];
}

export interface Figures {
  files: { file: string; cases: number; passed: number; failed: number; seconds: number }[];
  cases: number;
  passed: number;
  failed: number;
  pending: number;
  seconds: number;
  faults: number;
  faultKinds: Map<string, number>;
  podsCreated: number;
  podsLeaked: number;
  resultsVerified: number;
  resultsLost: number;
  /** The figure lines the cases recorded, by section, in order. */
  figureLines: Map<string, string[]>;
  failures: { title: string; message: string }[];
}

function matrixFiles(): string[] {
  return fs
    .readdirSync(TESTS)
    .filter((f) => /^reliability\..+\.integration\.test\.ts$/.test(f))
    .sort()
    .map((f) => path.join('test', 'integration', f));
}

function run(files: string[]): { report: MochaReport; records: ReliabilityRecord[] } {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'reliability-'));
  const log = path.join(tmp, 'records.jsonl');
  const out = path.join(tmp, 'mocha.json');
  try {
    const ran = spawnSync(
      'npx',
      [
        'mocha',
        '--node-option',
        'import=tsx',
        '--timeout',
        '240000',
        '--reporter',
        'json',
        '--reporter-option',
        `output=${out}`,
        ...files,
      ],
      {
        cwd: ROOT,
        env: { ...process.env, [RELIABILITY_LOG_ENV]: log },
        stdio: ['ignore', 'inherit', 'inherit'],
      },
    );
    if (!fs.existsSync(out)) {
      throw new Error(`mocha wrote no report (exit ${ran.status ?? ran.signal})`);
    }
    const report = JSON.parse(fs.readFileSync(out, 'utf8')) as MochaReport;
    const records = fs.existsSync(log)
      ? fs
          .readFileSync(log, 'utf8')
          .split('\n')
          .filter((l) => l.trim() !== '')
          .map((l) => JSON.parse(l) as ReliabilityRecord)
      : [];
    return { report, records };
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

export function figuresOf(report: MochaReport, records: ReliabilityRecord[]): Figures {
  const byFile = new Map<string, Figures['files'][number]>();
  const fileOf = (t: MochaTest): string => path.relative(ROOT, t.file ?? '(unknown)');
  const row = (t: MochaTest) => {
    const file = fileOf(t);
    let r = byFile.get(file);
    if (!r) {
      r = { file, cases: 0, passed: 0, failed: 0, seconds: 0 };
      byFile.set(file, r);
    }
    return r;
  };
  for (const t of report.passes) {
    const r = row(t);
    r.cases++;
    r.passed++;
    r.seconds += (t.duration ?? 0) / 1000;
  }
  for (const t of report.failures) {
    // Hook failures ("before all" hook) are failures too, but not cases of their own.
    const r = row(t);
    if (!/"(before|after) (all|each)" hook/.test(t.fullTitle)) r.cases++;
    r.failed++;
  }
  const faultKinds = new Map<string, number>();
  let faults = 0;
  let podsCreated = 0;
  let podsLeaked = 0;
  let resultsVerified = 0;
  let resultsLost = 0;
  const figureLines = new Map<string, string[]>();
  for (const rec of records) {
    if (rec.type === 'fault') {
      faults += rec.count;
      faultKinds.set(rec.kind, (faultKinds.get(rec.kind) ?? 0) + rec.count);
    } else if (rec.type === 'ledger') {
      podsCreated += rec.podsCreated;
      podsLeaked += rec.podsLeaked;
    } else if (rec.type === 'figure') {
      figureLines.set(rec.section, [...(figureLines.get(rec.section) ?? []), rec.line]);
    } else {
      resultsVerified += rec.verified;
      resultsLost += rec.lost;
    }
  }
  const files = [...byFile.values()].sort((a, b) => (a.file < b.file ? -1 : 1));
  return {
    files,
    cases: files.reduce((s, f) => s + f.cases, 0),
    passed: report.stats.passes,
    failed: report.stats.failures,
    pending: report.stats.pending,
    seconds: report.stats.duration / 1000,
    faults,
    faultKinds,
    figureLines,
    podsCreated,
    podsLeaked,
    resultsVerified,
    resultsLost,
    failures: report.failures.map((t) => ({
      title: t.fullTitle,
      message: (t.err?.message ?? '').split('\n')[0] ?? '',
    })),
  };
}

/** A duration in words: 15 min, 60 s, 5 min. */
function dur(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${ms / 1000} s`;
}

export function render(f: Figures, when: Date): string {
  const t = PRODUCTION_TIMING;
  const tick = dur(t.watchdogIntervalS * 1000);
  const ttl = dur(t.leaseTtlMs);
  const margin = dur(t.deadlineMarginMs);
  const kinds = [...f.faultKinds.entries()]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([k, n]) => `\`${k}\` ${n}`)
    .join(', ');
  const lines = [
    '# Reliability',
    '',
    '<!-- Written by `npm run reliability` (scripts/reliability.ts). Edit the script, not this file. -->',
    '',
    'Overbrainer never leaves a pod billing past the bounds below, never loses a verified result,',
    'and never leaves `runs/` inconsistent, whatever the client, the network, Runpod or the pod',
    'does. This page states the safety model, the bounds, and the figures of the test matrix that',
    'checks them against the Runpod emulator (real pods running the real bootstrap, watchdog and',
    'sshd). Rerun it with `npm run reliability` (root, as the integration tier).',
    '',
    '## Safety model: who deletes a pod, and when',
    '',
    '1. **The client, after a verified retrieval.** When the job ended, the client downloads the',
    "   results and checks every file against the pod's SHA-256 manifest. Only then it writes the",
    '   retrieved marker (`.pod/retrieved`) on the pod, then deletes the pod and looks until Runpod',
    `   answers 404 (up to ${dur(t.deleteConfirmMs)}). A failed or unverified download deletes nothing: the`,
    '   pod waits for `train attach` (or its retrieve grace).',
    `2. **The lease.** While a client follows a job that makes progress (a metric within ${dur(t.stallMs)}),`,
    `   it renews a lease file on the pod every ${dur(t.leaseRenewMs)}; a renewal holds the`,
    `   \`max_hours\` deadline off for ${ttl}. A stalled job, or a client that is gone, stops renewing.`,
    '   Only one client follows a run: the run lock (`runs/<id>/.lock`) is held by the follower; a',
    '   second client is told who follows and changes nothing.',
    `3. **The client guard.** A following client deletes the pod itself at the deadline + ${margin} when`,
    `   no lease renewal succeeded within ${ttl} (the watchdog should have deleted it by then), and`,
    '   at the cost cap (creation + `max_cost_usd` / rate), whatever the lease; the run fails',
    '   `max_hours reached…` or `max_cost_usd reached…`.',
    `4. **The watchdog** on the pod, every ${tick}, with the pod's own API key, deletes its pod by the`,
    '   first rule that matches: the bootstrap failed; (kept: never); past the cost cap; past the',
    `   deadline (\`max_hours\` after the create) with the lease stale (no renewal for ${ttl}); the`,
    '   retrieved marker exists; the job ended `retrieve_grace_minutes` ago (default 60, at least',
    '   1); no job `boot_grace_minutes` after the container started (default 30, at least 5). A pod',
    "   whose watchdog cannot reach Runpod's API is refused by the client before any job starts and",
    '   deleted by it.',
    '5. **Never when kept.** A pod kept at creation (`--keep-pod`) or at runtime (Keep Pod) is',
    '   deleted by nothing but `pod rm` (or Remove Pod). Released after its results were retrieved,',
    "   it is deleted at once; released before, the watchdog's rules apply again, from a fresh lease",
    '   the release writes before it clears the keep marker (a follower renews it while the pod is',
    '   kept); a released pod whose job ended while nobody followed is collected by the release',
    '   (results retrieved and verified, then the pod deleted).',
    '',
    'Ambiguous creates (answered 5xx, or never) are reconciled by listing the pods carrying the',
    'run marker, so one run never has two billing pods: a create is never sent again while that',
    `list fails (it is retried, up to ${dur(t.reconcileListLimitMs)}), and every way out of the GPU walk looks the`,
    "run's pods up once more and deletes them. A pod that cannot be confirmed gone is a stray;",
    'when the pods cannot be listed at all, pod.json says so (`unconfirmed_create`) and never',
    '`deleted`, and the keys stay until `pod rm` finds them. A pod is only recorded gone after',
    `${t.goneLooks} looks ${dur(t.goneIntervalMs)} apart answer 404, and a 404 alone never triggers a delete.`,
    'What a dead client leaves is cleaned at the next start: runs left `preparing` lose their pods',
    "and fail `interrupted before the job started`, and ended runs' host-key secrets are deleted;",
    "`pod rm RUN_ID --force` finds a run's pods by marker even when its records are damaged.",
    '',
    '**Training is saved before a limit deletes it.** Before the watchdog deletes for a limit, the',
    "job is asked for a snapshot (`snapshot.request`): at the cost cap's snapshot time (the earlier",
    `of 95 % of the cap and ${dur(t.snapshotLeadS * 1000)} before it; the following client asks too), ${dur(t.snapshotLeadS * 1000)} before`,
    '`max_hours` when no client holds the lease, and when the disk is nearly full (97 %, or 92 % when',
    'nobody follows; a followed run grows its network volume first). The trainer saves a checkpoint',
    `at its next step end and exits; the deadline delete waits up to ${dur(t.snapshotWaitS * 1000)} for it, and a pod whose`,
    'job stopped so stays until the deadline plus the retrieve grace, so `train attach` brings the',
    'checkpoint home; the run ends `stopped` and `train --resume-from` continues it. `train stop`',
    'asks for the same snapshot by hand.',
    '',
    '### The run dir on the pod',
    '',
    'What the watchdog (`src/core/pod/scripts/watchdog.sh`) reads and writes in the run dir; all',
    'but the verdict, its log and its own snapshot requests are written by others:',
    '',
    '```',
    '  job.pid            the job started (its process group id; written by the job wrapper)',
    '  exit_code, cancelled   the job ended (as does its process group being gone)',
    '  snapshot.request   a snapshot is requested: one line, its reason (requested, deadline, cost',
    '                     or disk), written by the client or by the watchdog as a temp file',
    "                     (the watchdog's: .snapshot.request.<pid>.wd.tmp) then `ln` (which fails",
    '                     when the name exists: a request is never replaced)',
    '  snapshot.json      the trainer saved its snapshot (it then stops and the job ends)',
    '  .pod/lease         touched (temp + mv) by the client while it follows the job: its mtime,',
    "                     on the pod's clock, is the lease",
    '  .pod/retrieved     the client verified the results: delete at once',
    '  .pod/keep          runtime keep marker: the client writes it to keep a running pod',
    '                     ("Keep Pod" while the job runs or awaits retrieval) and removes it to',
    '                     release the pod. While it exists the pod counts as kept (as with',
    '                     OVERBRAINER_KEEP_POD=1), except after a failed bootstrap.',
    '  .pod/deadline      unix s, written by `train release` of a pod kept at its creation: its',
    '                     deadline from then on (OVERBRAINER_KEEP_POD no longer holds; .pod/keep',
    '                     still does); a job that ended before it counts as ended at the release',
    '  .pod/snapshot_at   unix s; once past it a `cost` snapshot is requested (before cost_cap_at)',
    '  .pod/cost_cap_at   unix s; once past it the pod is deleted (max_cost_usd)',
    "  .pod/volume_gb     the network volume's size in GB (10^9 bytes), rewritten by the client",
    '                     when it grows the volume',
    "  .pod/bootstrap_failed  the bootstrap's failure reason (one line)",
    '  .pod/watchdog      the verdict, written atomically, one line: "ready", "failed missing_key",',
    '                     "failed no_curl", "failed unreachable", "failed http_<code>",',
    '                     "failed bootstrap: <reason>"',
    '  .pod/watchdog.log  the watchdog\'s log: "<UTC ts> <msg>" lines, also on stdout (the pod\'s logs)',
    '```',
    '',
    '## Bounds on billed time when the client disappears',
    '',
    'Production values (src/core/timing.ts). D = the deadline (create + `max_hours`), B = the boot',
    `grace, R = the retrieve grace, T = the lease TTL (${ttl}), W = the snapshot wait (${dur(t.snapshotWaitS * 1000)}), tick = the`,
    `watchdog's interval (${tick}),`,
    '"kill" = the moment the client vanished (SIGKILL, crash, laptop closed). The delete itself',
    'takes one API call from the pod (seconds). `train attach` at any time ends the wait: it',
    'finishes the run (follows, retrieves, verifies, deletes) or cleans up (deletes the pods of a',
    'run whose job never started and fails it `interrupted before the job started`).',
    '',
    '| the client disappears…                         | the pod is deleted by           | at the latest                                    |',
    '| ---------------------------------------------- | ------------------------------- | ------------------------------------------------ |',
    '| before the first create                        | (no pod exists)                 | nothing bills                                    |',
    '| right after a create was sent (no answer)      | its watchdog (no job)           | min(container start + B, D) + tick               |',
    '| while waiting for SSH                          | its watchdog (no job)           | min(container start + B, D) + tick               |',
    '| before the job starts (upload)                 | its watchdog (no job)           | min(container start + B, D) + tick               |',
    '| mid-job, the job ends on its own               | its watchdog                    | min(max(D, kill + T), job end + R) + tick        |',
    "| mid-job, the deadline's snapshot stops the job | its watchdog                    | min(D, job end) + R + tick                       |",
    '| mid-job, the job ignores the snapshot request  | its watchdog                    | max(D, kill + T + W) + tick                      |',
    '| mid-download (job ended, results not verified) | its watchdog                    | min(max(D, kill + T), job end + R) + tick        |',
    '| after the retrieved marker, before the delete  | its watchdog (retrieved marker) | kill + tick                                      |',
    '| mid-delete                                     | Runpod (delete sent) / watchdog | kill + tick                                      |',
    '| any step, pod kept                             | nobody: `pod rm`                | never (kept pods bill until removed or released) |',
    '',
    `With the defaults (B = 30 min, R = 60 min, tick = ${tick}) and \`max_hours = 6\`: a pod whose job`,
    'never started bills at most ~31 min after its container started; a client killed mid-job',
    `leaves the pod at most max(6 h after the create, ${ttl} after the kill) + ${tick}, or 61 min after the job`,
    "ended, whichever comes first; a job the deadline's snapshot stopped keeps its pod R after it",
    'ended (at most R past D), for `train attach` to bring the checkpoint home. A container that',
    'never starts (no watchdog runs) is deleted by',
    `the client within its readiness limit (${dur(t.readyTimeoutMs)}); if the client is gone too, Runpod bills it until`,
    '`train attach` or `pod rm` (which find it by its run marker).',
    '',
    '## Promises and their tests',
    '',
    'Every sentence of the README that promises something about money, secrets, limits or exit codes,',
    "and the test that fails if it stops being true (file under `test/`, and the test's title).",
    '',
    '| the README promises                                                                                     | file                                                    | test                                                                                                                                                                                   |',
    '| ------------------------------------------------------------------------------------------------------- | ------------------------------------------------------- | -------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------- |',
    '| no pod left billing by mistake, even when VS Code crashes                                               | `integration/reliability.crash.integration.test.ts`     | reliability: the client killed with SIGKILL at every step (every case)                                                                                                                 |',
    '| the client deletes the pod after verified retrieval and confirms it is gone                             | `integration/lifecycle.integration.test.ts`             | 1. a successful run: results verified on disk, pod deleted and confirmed, keys forgotten                                                                                               |',
    "| results are checked file by file against the pod's SHA-256 manifest; the pod is deleted only after that | `integration/retrieval.corruption.integration.test.ts`  | a big file whose bytes were … fails verification, named, and nothing is moved                                                                                                          |",
    '| a watchdog on the pod deletes the pod by itself: results retrieved                                      | `integration/watchdog.integration.test.ts`              | proves it can reach the API (verdict ready), then deletes at once on the retrieved marker                                                                                              |',
    '| … the deadline, held off by a lease only while the job makes progress                                   | `integration/watchdog.integration.test.ts`              | max_hours: a fresh lease holds the deadline off, each renewal extends it, then it deletes                                                                                              |',
    '| … abandoned results: `retrieve_grace_minutes` + 1 tick                                                  | `integration/watchdog.integration.test.ts`              | abandoned: the retrieve grace after the job ended (exit code, cancelled, group gone)                                                                                                   |',
    '| … no job: `boot_grace_minutes` + 1 tick                                                                 | `integration/watchdog.integration.test.ts`              | never_started: no job within the boot grace                                                                                                                                            |',
    '| stop is only the watchdog\'s last fallback, logged as "volume keeps billing"                             | `integration/watchdog.integration.test.ts`              | delete fallbacks: terminate, then stop (still billing), the next tick, runpodctl                                                                                                       |',
    '| the watchdog proves at start it can delete its own pod, or the pod is never used                        | `integration/reliability.pod.integration.test.ts`       | the watchdog cannot reach the API; a bootstrap failure read over SSH; no GPU type placed; max_cost_usd: each refused or ended with pod.json terminal                                   |',
    "| the client's guards: at the deadline + 5 min without a lease renewal                                    | `integration/lifecycle.guards.integration.test.ts`      | 6. max_hours: the client's guard deletes a stalled job's pod its watchdog failed to; the watchdog deletes it when no client follows                                                    |",
    "| `max_cost_usd` caps the spend, lease or not                                                             | `integration/lifecycle.guards.integration.test.ts`      | 6b. max_cost_usd: the client's guard deletes the pod once its cap is spent, whatever the lease, when its watchdog could not                                                            |",
    '| worst case with no client at all: `max_hours` + 62.5 min, as quoted                                     | `unit/readme.unit.test.ts`                              | states the worst case the quote computes: max_hours and what the watchdog does past the deadline                                                                                       |',
    '| an ambiguous create is reconciled by the run marker, never re-sent                                      | `integration/reliability.create.integration.test.ts`    | a create answered 500 while the pod lists fail too: the list is retried until it answers, the create is never sent again, the pod is adopted                                           |',
    '| `gpu_types` are tried in order; a refused type moves on                                                 | `integration/lifecycle.integration.test.ts`             | 2. capacity fallback: an out-of-stock type is recorded unavailable, the next one is created                                                                                            |',
    "| a refused request (402, 422) stops at once                                                              | —                                                       | no test yet at the walk's level (the client's errors: `unit/client.create.unit.test.ts`)                                                                                               |",
    '| a kept pod: only Remove Pod / `pod rm` deletes it                                                       | `integration/watchdog.integration.test.ts`              | kept with a job: never deleted (retrieved, ended, boot grace, cost cap all ignored)                                                                                                    |',
    '| `train --dry-run` prints the quote and creates nothing                                                  | `integration/cli.spend.integration.test.ts`             | train --dry-run prints the plan and the quote without earlier runs, and creates nothing                                                                                                |',
    '| the expected cost, from earlier runs of the same target: their shortest −20 % to their longest +20 %    | `integration/cli.spend.integration.test.ts`             | train --dry-run after a run quotes from it: ±20 % of its duration                                                                                                                      |',
    '| a run whose worst case would pass what is left of the budget is refused before anything is created      | `integration/budget.integration.test.ts`                | refuses a run whose worst case passes what is left, with the figures and the next action, creating nothing                                                                             |',
    '| two trains started at the same moment cannot spend the same dollars                                     | `integration/budget.integration.test.ts`                | two trains started at the same moment never count the same dollars: one starts with what is left as its cap, the other is refused                                                      |',
    '| `fit_runs_to_budget = true` gives the run a `max_cost_usd` that fits, and says so                       | `integration/budget.integration.test.ts`                | with fit_runs_to_budget gives the run a max_cost_usd that fits, says so, and arms it on the pod                                                                                        |',
    '| every pod started under a budget gets min(`max_cost_usd`, what is left) as its cost cap, on the pod     | `integration/budget.integration.test.ts`                | a run that fits gets what is left as its cost cap on the pod (min of max_cost_usd and what is left)                                                                                    |',
    '| the budget can be passed by at most max(1 %, $0.50) plus one watchdog tick of every live pod            | `integration/reliability.budgetDay.integration.test.ts` | holds a daily budget over a scripted day of runs with the client killed at seeded random points: overspend within max(1 %, $0.50) + one tick per pod, no pod billing                   |',
    '| the estimate is never under the bill; `spend` flags a difference over 1 %                               | `integration/reliability.budget.integration.test.ts`    | estimates every run within 1 % of the ledger, and each run with earlier runs of its config finishes inside its quote                                                                   |',
    '| after a pod ends, what Runpod billed is recorded beside the estimate                                    | `integration/cli.spend.integration.test.ts`             | spend --json reads a missing bill, saves it in pod.json and lists estimate, bill and difference                                                                                        |',
    '| limits ask for a snapshot first: the cost cap                                                           | `integration/reliability.snapshot.integration.test.ts`  | max_cost_usd: the job is asked for a cost snapshot before the cap; the run ends stopped with its checkpoint home and the pod deleted before the cap                                    |',
    '| … and `max_hours` when nobody follows                                                                   | `integration/reliability.limits.integration.test.ts`    | max_hours with nobody following: the watchdog asks for a `deadline` snapshot, the trainer saves and stops, the pod stays past its deadline until train attach brings the snapshot home |',
    '| `max_recoveries` bounds the recoveries; with too little time left the run is not recovered              | `integration/reliability.recovery.integration.test.ts`  | recovery exhausted: with max_recoveries = 1 the second pod dies too, and the run fails naming both deaths                                                                              |',
    '| every pod log line is redacted before it is shown or kept; `pod.log` is capped                          | `integration/podLogs.integration.test.ts`               | the capture file is redacted (API key, bearer token, private key), 0600, capped with one line saying so, its cursor beside it                                                          |',
    "| the pod's watchdog and bootstrap logs come home redacted, their last 4 MiB                              | `integration/podLogCopy.integration.test.ts`            | watchdog.log and bootstrap.log come home redacted (keys, tokens, the host key), cut to their last 4 MiB, never through a link on the pod or here                                       |",
    '| Set Runpod API Key: secret storage only                                                                 | `e2e/activation.e2e.test.ts`                            | stores the Runpod API key typed into a password box, never echoing it                                                                                                                  |',
    "| Show Logs: no key ever reaches the extension's log                                                      | `e2e/activation.e2e.test.ts`                            | Show Logs opens the Overbrainer log channel, with the key redacted                                                                                                                     |",
    '| per run its own key pair and host key: the client key and the host-key secret are gone after the run    | `integration/cli.integration.test.ts`                   | trains: results verified on disk, pod deleted and confirmed, client key and host-key secret gone; runs ls                                                                              |',
    "| Runpod's rate limit is honoured on the run's calls                                                      | `integration/reliability.apiLimits.integration.test.ts` | 429 with Retry-After on the create and on the delete: each is honoured, one pod is made and it is deleted                                                                              |",
    "| read-only commands wait out Runpod's rate limit, said on stderr                                         | `integration/cli.readOnly.integration.test.ts`          | pod ls waits out a 429 whose Retry-After is longer than the old 10 s limit, saying so, then lists the pods (exit 0)                                                                    |",
    '| … 30 s at most in all; a longer wait fails at once, saying when to run it again                         | `integration/cli.readOnly.integration.test.ts`          | pod gpus: a Retry-After past the 30 s a read-only command waits fails at once, saying when to run it again (exit 1)                                                                    |',
    '| … counted down in place on a terminal                                                                   | `integration/cli.readOnly.integration.test.ts`          | on a terminal, the wait is counted down in place, and gone once the listing is printed                                                                                                 |',
    '| a refused connection fails at once, an API that does not answer after 8 s; both name the base URL       | `integration/cli.readOnly.integration.test.ts`          | pod ls and pod gpus fail fast on an API that cannot be reached, naming its base URL: a refused connection at once, never retried; an address that never answers after the 8 s limit    |',
    '| … `runs logs --pod` read from the API too                                                               | `integration/podLogs.integration.test.ts`               | runs logs --pod from the API, without --follow, is a read-only command: a 429 is waited out and said, then the stream is read; a refused connection fails at once naming the base URL  |',
    '| exit 2: a usage or configuration error; nothing was started                                             | `integration/cli.integration.test.ts`                   | refuses bad configuration and usage with exit 2, before any call to Runpod                                                                                                             |',
    '| exit 1: a failed run                                                                                    | `integration/cli.commands.integration.test.ts`          | exits 1 for a failed run and says so on its final line                                                                                                                                 |',
    '| exit 1: a cancelled run (`train cancel` itself 0)                                                       | `integration/cli.runControl.integration.test.ts`        | train cancel while another CLI follows: the follower collects the cancelled run and deletes the pod                                                                                    |',
    '| exit 1: a stopped run (`train stop` itself 0)                                                           | `integration/cli.runControl.integration.test.ts`        | exit codes of a stopped run: train stop exits 0 once the snapshot is asked for; the train following the run brings it home and exits 1 (stopped)                                       |',
    "| the exit-code table says what the CLI's help says                                                       | `unit/readme.unit.test.ts`                              | the exit-code table says what the CLI's own help says: a failed, stopped or cancelled run exits 1                                                                                      |",
    "| Ctrl-C before a run's job starts deletes its pod; a pod delete is never interrupted                     | `integration/cli.runControl.integration.test.ts`        | Ctrl-C while the pod is provisioning deletes the pod and fails the run                                                                                                                 |",
    '| once the job runs, Ctrl-C only stops following                                                          | `integration/cli.runControl.integration.test.ts`        | Ctrl-C once the job runs only stops following; train cancel then cancels it and deletes the pod                                                                                        |',
    '| notifications come from "Overbrainer"                                                                   | `e2e/activation.e2e.test.ts`                            | stores the Runpod API key typed into a password box, never echoing it                                                                                                                  |',
    "| a job's secrets (the HF token, `[training] secrets`) reach it over SSH: no file, argument or event holds one | `integration/jobSecrets.integration.test.ts`            | reaches the job as HF_TOKEN and WANDB_API_KEY; no file, argument or event holds a value                                                                                                |",
    '| … a missing one stops the run before anything is created, naming it and its fix                         | `integration/jobSecrets.integration.test.ts`            | a missing secret stops the run before anything is created, naming it and its fix                                                                                                       |',
    '| a GPU idle while the pod bills is named once, with what it wastes per hour                              | `integration/gpu.integration.test.ts`                   | an idle GPU is named once, with what it wastes; the samples are in the records and runs show                                                                                           |',
    '| every error names the next action                                                                       | `unit/errors.unit.test.ts`                              | every error class of src/ carries a next action: each declares a hint of its own or takes one that every `new` gives                                                                   |',
    '| `hub_model_id`: the result lands on the Hub byte for byte, its revision recorded; the token in no file or event | `integration/hubPush.integration.test.ts` | pushes output/ with its bytes (regular, LFS, multipart LFS) and records the revision |',
    '| … a refused push keeps the run succeeded and its results home, and says what failed | `integration/hubPush.integration.test.ts` | a push the Hub refuses: the run succeeded, its results came home, it says what failed |',
    '| `gpu_types = "auto"` reads the catalog again at each walk, in stock first | `integration/gpuAuto.integration.test.ts` | a type out of stock since the last walk is not tried; the next cheapest in stock is |',
    "| a sweep's budget is a hard limit: no trial starts whose worst case would pass it | `integration/sweepScheduler.integration.test.ts` | trials that spend their worst case: a budget of 3 worst cases runs 3 and ends saying so |",
    '| … on real pods: what is started never passes the budget | `integration/sweepBudget.integration.test.ts` | a budget of 3 worst cases starts 3 trials at once; a 4th only once an end gave room back |',
    '| a sweep resumed after its client died runs no trial twice and loses none | `integration/sweep.integration.test.ts` | a client killed mid-sweep is resumed from its records: no trial twice, none lost |',
    "| a pruned trial's job is cancelled, its results come home, its pod is deleted | `integration/sweep.integration.test.ts` | Optuna's pruner stops trials on their pods: the job cancelled, its results home, its pod deleted |",
    "| a prune that comes after the trial's job ended stops nothing: the trial counts complete, with its value | `integration/sweepScheduler.integration.test.ts` | a trial the pruner stops after its job ended is complete with its value (its run succeeded); one it stops is pruned |",
    "| a sweep is run by one client at a time: another's attach is refused naming it, and takes the sweep over once that client died | `integration/sweepAttach.integration.test.ts` | attach is refused while the client running the sweep lives, and takes it over once it was killed |",
    '| … `sweep stop` asks the client running it: no new trial, running ones stopped, results home, pods deleted, the sweep recorded stopped | `integration/sweepAttach.integration.test.ts` | stop asks the client running the sweep: no new trial, running ones stopped, results home, pods deleted |',
    '| … with no client running the sweep, `sweep stop` stops the trials itself | `integration/sweepAttach.integration.test.ts` | stop with no client running the sweep (its client killed) stops the trials itself |',
    "| … a trial followed again by attach whose pod dies is recovered with its own params, not the sweep's raw command | `integration/sweepAttach.integration.test.ts` | a trial followed again by attach whose pod dies goes on on a new pod with its own params |",
    "| a trial's params reach its job as `OVERBRAINER_PARAM_<NAME>` on every pod | `integration/sweepParams.integration.test.ts` | a command without placeholders gets each param as OVERBRAINER_PARAM_<NAME> |",
    "| … the axolotl trainer's own YAML gets them at dotted keys; a key under a list is refused before any pod | `integration/sweepParams.integration.test.ts` | the axolotl trainer's own YAML gets the trial's values at dotted keys; a key under a list is refused before any pod |",
    '| … two params that would be one environment variable are a config error, placed, with what to write | `unit/config.sweep.unit.test.ts` | two parameters that are one environment variable: placed, with what to write |',
    "| a run on N nodes: rank 0's results verified, then the whole cluster deleted and confirmed; spend counts every member | `integration/cluster.train.integration.test.ts` | runs examples/ddp on 2 nodes to verified results, then deletes the whole cluster |",
    '| … a member that never gets ready, or a node killed with `max_recoveries = 0`, fails the run naming it; the whole cluster deleted | `integration/cluster.train.integration.test.ts` | a node killed mid-run with max_recoveries = 0 fails the run naming it; the whole cluster deleted, nothing billing |',
    "| … a node that dies mid-run: the whole cluster deleted, the run completes on a new cluster from its newest verified checkpoint; 0 leaked; each attempt's estimate within 1 % of the ledger, never under | `integration/cluster.recovery.integration.test.ts` | a member dies (EXITED): the whole cluster deleted, the run completes on a new cluster from its newest verified checkpoint; 0 leaked; each attempt within 1 % of the ledger, never under |",
    '| … a node whose host stops answering is found within 2 minutes (production timing) | `unit/clusterFollow.unit.test.ts` | is found within 2 minutes with the production timing |',
    "| … a member's refused cluster delete is recorded in run.json and said once while a client follows | `integration/cluster.train.integration.test.ts` | a member's watchdog refused its cluster delete while the client follows: run.json records it and a warning says what still ends the cluster |",
    '| … spend counts the members of a cluster replaced after a node died | `unit/clusterRecord.unit.test.ts` | a cluster replaced after a node died: run.json keeps it in earlier_clusters, and the spend counts its members too |',
    "| … the run page's spend of a cluster run is N × the member rate; rank 0's metrics drive its ETA | `unit/uiRunSeries.unit.test.ts` | a cluster run (no pod.json): rank 0's metrics drive the ETA, its spend is N × the member rate |",
    "| … Remove on a member's row in the Pods view names the whole cluster and its nodes | `unit/uiCommands.unit.test.ts` | Remove on a cluster member's row (Pods view) asks to delete the whole cluster, naming it and its nodes; declining deletes nothing |",
    '| … `max_cost_usd` holds for the whole cluster while a client follows | `integration/cluster.train.integration.test.ts` | max_cost_usd reached for the whole cluster while the client follows: the client deletes it |',
    "| … with nobody following, where Runpod lets a member's key delete its cluster: a member's watchdog deletes the whole cluster at its limit | `integration/cluster.watchdog.integration.test.ts` | member key allowed: the watchdog deletes the whole cluster at the cap with no client; the ledger stops |",
    '| … where Runpod refuses: the watchdog says so on its pod, the cluster bills on; `pod ls` lists its members, `pod rm CLUSTER_ID` deletes it whole | `integration/cluster.watchdog.integration.test.ts` | member key refused: the watchdog tries and says so on its pod; the cluster bills on, pod ls lists it, pod rm CLUSTER_ID deletes it whole |',
    "| … a member's watchdog deletes only its cluster, never a pod; a refusal is said once and retried each tick; its key in no argument | `integration/watchdog.integration.test.ts` | a cluster member: its delete is its whole cluster's (allowed: once; refused: said once, tried each tick) |",
    "| … `spend` reads the cluster's bill, split in equal shares that sum to it | `unit/clusterRecord.unit.test.ts` | the cluster's bill (GET /billing/clusters) in equal shares that sum to it; spend's row beside the estimate |",
    '| … a follow aborted once the job runs (a VS Code window closing or reloading, Ctrl-C) stops following only: the cluster trains on and attach follows it again | `integration/cluster.attach.integration.test.ts` | a follow aborted once the job runs (a VS Code window closing, Ctrl-C) stops following only: the cluster trains on, and attach brings the run to verified results |',
    "| … attach names a member whose host went silent after 3 failed SSH connects (45 s in production), then deletes the whole cluster | `integration/cluster.unfollowed.integration.test.ts` | a member's host stopped answering while no client followed: attach names it after 3 missed looks, not readyTimeoutMs, and deletes the whole cluster; nothing billing |",
    '| … cancel of a cluster run no client follows deletes the whole cluster, confirmed | `integration/cluster.unfollowed.integration.test.ts` | cancel of a cluster run no client follows: the whole cluster deleted and confirmed, the run cancelled; nothing billing |',
    '| … a dead member is estimated as Runpod bills it: its GPU until the look that found it stopped, its disk after | `unit/clusterDeadMember.unit.test.ts` | bills its GPU until the look that found it stopped, then its disk until the delete |',
    "| … `runs show` and the tooltip give a cluster run its spend lines: in all, and a line per attempt's cluster | `unit/clusterSpendLines.unit.test.ts` | a recovered run that ended: in all over both clusters, each attempt on its line with its bill where read |",
    '| … a 3-node run to verified results, the whole cluster deleted | `integration/cluster.threeNodes.integration.test.ts` | runs examples/ddp on 3 nodes to verified results, then deletes the whole cluster; nothing billing |',
    "| a sweep's ledger total stays within `budget_usd` with its client SIGKILLed and never restarted; no pod left billing | `integration/sweepFigures.integration.test.ts` | measures all three figures, the budget met with its client killed |",
    '| `train --dry-run` quotes N nodes: N × the pod rate, the worst case of all N | `unit/config.nodes.unit.test.ts` | quotes N nodes: N × the pod rate, the worst case of all N, the self-serve limit above 8 |',
    '| `kind = "ssh"`: a machine whose host key known_hosts does not list is refused before anything is sent | `integration/sshTarget.integration.test.ts` | refuses a machine whose host key the known_hosts does not list, before anything is sent |',
    '| … results come home verified and nothing is deleted on the machine | `integration/sshTarget.integration.test.ts` | trains on the machine: files uploaded, job followed, results home verified, nothing deleted there |',
    '| … a run left preparing by a killed client is settled by attach and at the next start: no job left, its half upload removed | `integration/sshTarget.integration.test.ts` | a run left preparing (its client killed before the job started) is settled by attach and at the next start: failed, no job left, its half-uploaded directory removed |',
    '| … a Hub push from the machine records the revision; the token in no file | `integration/sshTarget.integration.test.ts` | hub_model_id: the job pushes from the machine, the run records the revision the Hub answered |',
    '| … `stop` with no client following brings the snapshot home | `integration/sshTarget.integration.test.ts` | stop with no client following: stop follows the job to its snapshot, brings it home, the run ends stopped |',
    "| … Open SSH Terminal and `runs ssh`: the user's ssh and SSH config, no key or secret handed over | `integration/sshTarget.shell.integration.test.ts` | Open SSH Terminal on a run of the machine: the user's ssh with their SSH config in the run's directory (and builtin), no key or secret in what it is given |",
    '| an upload cut midway is sent again from what the pod has, verified on the pod | `integration/exec.upload.integration.test.ts` | sends again what the pod does not have when the connection drops midway, and says so |',
    "| … over a distant link too, while a big file's ranges go at once | `integration/exec.upload.integration.test.ts` | sends again what the pod does not have when the connection drops while the ranges go |",
    '| a small file of a download comes home whole, hashed over all its bytes | `unit/exec.download.unit.test.ts` | writes a small file handed over in pieces whole, with the hash of all its bytes, whatever its size |',
    '| the integration tier runs six files at a time                                                           | `unit/readme.unit.test.ts`                              | says how many integration files run at a time as scripts/test.sh runs them                                                                                                             |',
    '',
    ...FIXES_SECTION,
    '## The matrix',
    '',
    `Last run: ${when.toISOString().replace(/\.\d+Z$/, 'Z')}, ${f.seconds.toFixed(0)} s.`,
    '',
    '| figure                          | value |',
    '| ------------------------------- | ----- |',
    `| cases                           | ${f.cases} |`,
    `| passed                          | ${f.passed} |`,
    `| failed                          | ${f.failed} |`,
    `| faults injected                 | ${f.faults} |`,
    `| pods created (emulator ledgers) | ${f.podsCreated} |`,
    `| pods leaked (still billing)     | ${f.podsLeaked} |`,
    `| verified results checked        | ${f.resultsVerified} |`,
    `| results lost                    | ${f.resultsLost} |`,
    '',
    `Faults by kind: ${kinds || '(none recorded)'}.`,
    '',
    '| file | cases | passed | failed |',
    '| ---- | ----- | ------ | ------ |',
    ...f.files.map((r) => `| ${r.file} | ${r.cases} | ${r.passed} | ${r.failed} |`),
    '',
  ];
  if (f.failures.length > 0) {
    lines.push('Failures:', '');
    for (const x of f.failures) lines.push(`- ${x.title}: ${x.message}`);
    lines.push('');
  }
  lines.push(
    "Each case asserts on run.json, pod.json, the files on disk and the emulator's ledger; a case",
    'records its figures through test/helpers/reliability.ts (`OVERBRAINER_RELIABILITY_LOG`). A',
    'leaked pod is one still billing at the end of its case that was not kept on purpose.',
    '',
  );
  lines.push(...figuresSection(f));
  return lines.join('\n');
}

/** The doc's "Figures" section: what the figure cases recorded, by section (none: empty). */
function figuresSection(f: Pick<Figures, 'figureLines'>): string[] {
  if (f.figureLines.size === 0) return [];
  const lines = ['## Figures', '', 'What the figure cases printed in their last run.', ''];
  for (const [section, figureLines] of f.figureLines) {
    lines.push(`### ${section}`, '', ...figureLines.map((l) => `- ${l}`), '');
  }
  return lines;
}

/** The doc as it is, with its "Figures" section (the last one) replaced by `f`'s. */
function withFigures(doc: string, f: Pick<Figures, 'figureLines'>): string {
  const at = doc.indexOf('\n## Figures\n');
  const kept = at < 0 ? doc : doc.slice(0, at + 1);
  return [kept.trimEnd(), '', ...figuresSection(f)].join('\n');
}

function main(): number {
  const write = !process.argv.includes('--no-write');
  const figuresOnly = process.argv.includes('--figures');
  const words = process.argv.slice(2).filter((a) => !a.startsWith('--'));
  const files = matrixFiles().filter(
    (f) => words.length === 0 || words.some((w) => path.basename(f).includes(w)),
  );
  if (files.length === 0) {
    process.stderr.write('reliability: no test/integration/reliability.*.integration.test.ts\n');
    return 1;
  }
  process.stderr.write(`reliability: running ${files.length} files: ${files.join(' ')}\n`);
  const { report, records } = run(files);
  const figures = figuresOf(report, records);
  const summary =
    `reliability: ${figures.cases} cases, ${figures.passed} passed, ${figures.failed} failed; ` +
    `${figures.faults} faults injected; pods created ${figures.podsCreated}, leaked ${figures.podsLeaked}; ` +
    `results verified ${figures.resultsVerified}, lost ${figures.resultsLost}; ${figures.seconds.toFixed(0)} s`;
  process.stdout.write(`${summary}\n`);
  if (write) {
    fs.mkdirSync(path.dirname(DOC), { recursive: true });
    fs.writeFileSync(
      DOC,
      figuresOnly && fs.existsSync(DOC)
        ? withFigures(fs.readFileSync(DOC, 'utf8'), figures)
        : render(figures, new Date()),
    );
    // The doc is checked by `npm run lint` (prettier --check): write it formatted.
    spawnSync('npx', ['prettier', '--write', DOC], { cwd: ROOT, stdio: 'ignore' });
    process.stdout.write(`reliability: wrote ${path.relative(ROOT, DOC)}\n`);
  }
  return figures.failed === 0 && figures.podsLeaked === 0 && figures.resultsLost === 0 ? 0 : 1;
}

if (require.main === module) process.exit(main());
