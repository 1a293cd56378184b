/**
 * Issue 37's figure "over at least 20 injected member deaths at random moments: at least 95 % of
 * runs complete on a new cluster from their newest verified checkpoint; 0 leaked clusters or pods;
 * the estimate of every attempt within 1 % of the ledger and never under it", measured on the real
 * emulator: 2-node Instant Clusters of namespaced members with the real bootstrap, watchdog and
 * sshd, torchrun launching the step trainer (test/helpers/clusterStepTrainer.py: examples/ddp's
 * arguments and files, its ranks in lockstep, no torch import) on both, the product's train flow.
 *
 * Each run dies once: a seeded PRNG (the seed is printed; OVERBRAINER_CLUSTER_DEATHS_SEED replays
 * it) draws, before anything starts, the step of rank 0 after which a node dies (any step of the
 * job but its last few, before or after the first checkpoint is home), which node, and how: its pod
 * EXITED (podDies), its pod gone (podVanishes), its host silent while the API lists it RUNNING
 * (hostLost), or the whole cluster gone (clusterVanishes). What is checked per run, from its
 * records and the emulator: it succeeded on a second cluster (attempts `node_failed` then the
 * end), resumed from a checkpoint at least as new as the newest one home and verified when the
 * node died, one curve of every step to the last; per attempt, the estimate in run.json against
 * what the ledger billed that cluster's members, and where it is over (./clusterOverParts.ts): each
 * member's start (before the create's bytes left the client, or after them inside the second of
 * Runpod's createdAt, which no client can know), its end (a dead member to the look that found it,
 * the others to the delete's answer), the rounding. Then nothing may be left: no cluster, no
 * member billing.
 *
 *   npx tsx bench/run.ts --only clusterDeaths --runs 1 --no-write [--json FILE]
 *   OVERBRAINER_CLUSTER_DEATHS=N (default 20) runs, OVERBRAINER_CLUSTER_DEATHS_AT_ONCE=K (default 2)
 *
 * Skipped by --quick (CI): test/integration/cluster.deaths and cluster.recovery keep each kind of
 * death in the suite; this is a figure, not a gate.
 */
import * as fs from 'node:fs';
import { loadavg } from 'node:os';
import * as path from 'node:path';
import { train } from '../src/core/flow';
import { MISSES_ALLOWED } from '../src/core/flow/clusterFollow';
import type { OverbrainerConfig } from '../src/core/config/types';
import type { RunCluster } from '../src/core/runs/clusterRecord';
import { memberUsd } from '../src/core/runs/clusterSpend';
import { estimateResolutionUsd } from '../src/core/runs/spend';
import { PRODUCTION_TIMING } from '../src/core/timing';
import { waitFor } from '../test/emulator/testing';
import {
  checkpointHome,
  ddpLab,
  ledgerUsdOf,
  loggedSteps,
  recordOf,
  type DdpJob,
} from '../test/helpers/clusterRun';
import { GPU, TIMING_FACTOR, type Lab } from '../test/helpers/lifecycle';
import { seededRandom } from '../test/helpers/reliability';
import { ClusterCalls, describeOver, overParts, type OverParts } from './clusterOverParts';
import type { BenchOptions, BenchReport } from './lib';

const STEPS = 100;
const JOB: DdpJob = { steps: STEPS, stepSeconds: 0.3, saveEvery: 10, trainer: 'steps' };
/** A death comes after rank 0 logged a step in 1..LAST_KILL_STEP (the job's last steps spared). */
const LAST_KILL_STEP = STEPS - 10;

type Kind = 'podDies' | 'podVanishes' | 'hostLost' | 'clusterVanishes';

interface Plan {
  kind: Kind;
  rank: number;
  afterStep: number;
}

interface AttemptFigure {
  estimatedUsd: number | null;
  /**
   * The same attempt by the rule before 2026-12-07 evening, side by side: every member from the
   * create's send to the cluster's delete, rounded up to $0.0001.
   */
  formerUsd: number | null;
  ledgerUsd: number;
  /** Its cluster's members (the estimate's resolution is per member). */
  members: number;
  usdPerHour: number;
  /** Its longest member's life in the ledger, seconds. */
  ledgerS: number;
  /** Where the estimate is over the ledger, in seconds of one member's rate (./clusterOverParts.ts). */
  over: OverParts;
}

/** The ledger's own rounding (each member's cost to the micro-dollar), summed over two members. */
const UNDER_TOLERANCE_USD = 1e-6;

const overUsd = (a: AttemptFigure): number => a.estimatedUsd! - a.ledgerUsd;
/** `memberS` seconds of one member's rate, in USD. */
const usdOf = (a: AttemptFigure, memberS: number): number => (memberS * a.usdPerHour) / 3600;

function formerUsd(cluster: RunCluster): number | null {
  const untilMs = Date.parse(cluster.deletedAt ?? '');
  if (!Number.isFinite(untilMs)) return null;
  const usd = cluster.nodes.reduce(
    (sum, { gpuStoppedAt }) =>
      sum + (memberUsd(cluster, gpuStoppedAt ? { gpuStoppedAt } : {}, untilMs) ?? 0),
    0,
  );
  return Math.ceil(Math.round(usd * 1e8) / 1e4) / 1e4;
}

interface RunFigure {
  plan: Plan;
  runId: string;
  ok: boolean;
  why: string;
  /** The newest checkpoint home, verified, when the node died (null: none yet). */
  homeAtDeath: number | null;
  resumedFrom: number | null;
  attempts: AttemptFigure[];
  wallMs: number;
}

const pct = (n: number, of: number): string =>
  of === 0 ? 'n/a' : `${((100 * n) / of).toFixed(1)} %`;

function drawPlans(seed: number, runs: number): Plan[] {
  const rng = seededRandom(seed);
  return Array.from({ length: runs }, () => {
    const draw = rng();
    const kind: Kind =
      draw < 0.35
        ? 'podDies'
        : draw < 0.6
          ? 'podVanishes'
          : draw < 0.85
            ? 'hostLost'
            : 'clusterVanishes';
    return { kind, rank: rng() < 0.5 ? 0 : 1, afterStep: 1 + Math.floor(rng() * LAST_KILL_STEP) };
  });
}

async function kill(l: Lab, plan: Plan, clusterId: string, members: string[]): Promise<void> {
  const member = members[plan.rank]!;
  if (plan.kind === 'podDies') await l.emulator.faults.podDies(member);
  else if (plan.kind === 'podVanishes') await l.emulator.faults.podVanishes(member);
  else if (plan.kind === 'hostLost') await l.emulator.faults.hostLost(member);
  else await l.emulator.faults.clusterVanishes(clusterId);
}

/** One run: trained until rank 0 logged `plan.afterStep`, a node killed, followed to its end. */
async function driveRun(
  l: Lab,
  config: OverbrainerConfig,
  plan: Plan,
  calls: ClusterCalls,
): Promise<RunFigure> {
  const startedMs = Date.now();
  let runId = '';
  let seen = 0;
  const sub = l.bus.on((event) => {
    if (event.type === 'metric' && event.runId === runId) seen = Math.max(seen, event.metric.step);
  });
  const figure: RunFigure = {
    plan,
    runId: '',
    ok: false,
    why: '',
    homeAtDeath: null,
    resumedFrom: null,
    attempts: [],
    wallMs: 0,
  };
  const training = l.track(train(l.deps, config, l.workspace, { onRun: (r) => (runId = r.id) }));
  const ended = training.then(
    (r) => r,
    (error: unknown) => error,
  );
  let done = false;
  void ended.then(() => (done = true));
  try {
    await waitFor(
      () => `run ${runId}: rank 0 at step ${plan.afterStep}`,
      () => (done || (runId !== '' && seen >= plan.afterStep) ? true : undefined),
      600_000,
      100,
    );
    figure.runId = runId;
    if (done) {
      figure.why = `the run ended before its death: ${String(await ended)}`;
      return figure;
    }
    const clusterId = recordOf(l, runId).cluster?.id;
    const members = l.emulator.clusters().find((c) => c.id === clusterId)?.memberIds ?? [];
    if (clusterId === undefined || members.length !== 2) {
      figure.why = `no 2-member cluster to kill: ${JSON.stringify(l.emulator.clusters())}`;
      return figure;
    }
    figure.homeAtDeath = checkpointHome(l, runId);
    await kill(l, plan, clusterId, members);
    const outcome = await ended;
    const record = recordOf(l, runId);
    const attempts = record.attempts ?? [];
    const second = attempts[1];
    figure.resumedFrom = second?.resumedFromStep ?? null;
    const clusters: RunCluster[] = [...(record.earlierClusters ?? [])];
    if (record.cluster) clusters.push(record.cluster);
    figure.attempts = clusters.map((cluster, i) => {
      const ids = new Set(cluster.nodes.map((n) => n.podId));
      const entries = l.emulator.ledger().pods.filter((p) => ids.has(p.id));
      return {
        estimatedUsd: attempts[i]?.costUsd ?? null,
        formerUsd: formerUsd(cluster),
        ledgerUsd: ledgerUsdOf(l, cluster),
        members: cluster.nodes.length,
        usdPerHour: entries[0]?.gpuUsdPerHour ?? 0,
        ledgerS: Math.max(
          0,
          ...entries.map((p) => ((p.deletedAtMs ?? Date.now()) - p.createdAtMs) / 1000),
        ),
        over: overParts(cluster, entries, calls, attempts[i]?.costUsd ?? null),
      };
    });
    const problems: string[] = [];
    if (outcome instanceof Error || record.state !== 'succeeded') {
      problems.push(
        `${record.state}: ${outcome instanceof Error ? outcome.message : record.message}`,
      );
    }
    const reasons = attempts.map((a) => a.reason);
    if (JSON.stringify(reasons) !== JSON.stringify(['node_failed', null])) {
      problems.push(`attempts ${JSON.stringify(reasons)}`);
    }
    if ((figure.resumedFrom ?? 0) < (figure.homeAtDeath ?? 0)) {
      problems.push(`resumed from ${figure.resumedFrom}, behind ${figure.homeAtDeath} home`);
    }
    if (clusters.length !== 2 || clusters[0]!.id === clusters[1]!.id) {
      problems.push(`clusters ${clusters.map((c) => c.id).join(', ')}`);
    }
    if (record.state === 'succeeded') {
      const out = JSON.parse(
        fs.readFileSync(path.join(l.runDir(runId), 'output', 'result.json'), 'utf8'),
      ) as { started_at: number; steps: number };
      if (out.started_at !== (figure.resumedFrom ?? 0) || out.steps !== STEPS) {
        problems.push(`result.json ${JSON.stringify(out)}`);
      }
      const steps = loggedSteps(l, runId);
      if (steps.length !== STEPS || steps.some((s, i) => s !== i + 1)) {
        problems.push(`logged steps not one curve 1..${STEPS} (${steps.length} lines)`);
      }
    }
    figure.ok = problems.length === 0;
    figure.why = problems.join('; ');
    return figure;
  } catch (error) {
    figure.why = String(error);
    await ended;
    return figure;
  } finally {
    sub.dispose();
    figure.wallMs = Date.now() - startedMs;
  }
}

export async function clusterDeathsBench(options: BenchOptions): Promise<BenchReport> {
  const title = '9. A cluster node dies at a random moment (issue 37)';
  const baseline = "none: the figures are the issue's targets";
  if (options.quick) {
    return {
      title,
      baseline,
      rows: [],
      notes: ['skipped by --quick: cluster.deaths and cluster.recovery keep each death in CI'],
    };
  }
  const runs = Number(process.env.OVERBRAINER_CLUSTER_DEATHS ?? 20);
  const atOnce = Number(process.env.OVERBRAINER_CLUSTER_DEATHS_AT_ONCE ?? 2);
  const seed = Number(process.env.OVERBRAINER_CLUSTER_DEATHS_SEED ?? Date.now() % 2 ** 31);
  console.log(`clusterDeaths: seed ${seed} (OVERBRAINER_CLUSTER_DEATHS_SEED=${seed} replays it)`);
  const plans = drawPlans(seed, runs);
  // Each look at a silent host waits at most this long: 3 missed looks in a row name it.
  const { l, config } = await ddpLab(JOB, { requestTimeoutMs: 5_000 });
  const calls = new ClusterCalls();
  const figures: RunFigure[] = [];
  let leakedClusters: number;
  let leakedPods = 0;
  const startedMs = Date.now();
  const loadAtStart = loadavg()[0]!;
  try {
    // Room for every run's clusters at once, the dying one and its replacement.
    await l.emulator.faults.setStock(GPU.rtx4090, atOnce * 4 + 2);
    for (let first = 0; first < plans.length; first += atOnce) {
      const batch = plans.slice(first, first + atOnce);
      const done = await Promise.all(batch.map((plan) => driveRun(l, config, plan, calls)));
      for (const f of done) {
        console.log(
          `  ${f.ok ? 'ok  ' : 'FAIL'} ${f.runId} ${f.plan.kind} rank ${f.plan.rank} after step ${f.plan.afterStep}: home ${f.homeAtDeath}, resumed ${f.resumedFrom}; ${f.attempts.map((a) => `$${a.estimatedUsd} vs ledger $${a.ledgerUsd.toFixed(5)} (over: ${describeOver(a.over)})`).join(', ')}; ${(f.wallMs / 1000).toFixed(0)} s${f.why ? `; ${f.why}` : ''}`,
        );
      }
      figures.push(...done);
    }
    leakedClusters = l.emulator.clusters().length;
    leakedPods = l.emulator.ledger().pods.filter((p) => p.billing).length;
  } finally {
    calls.dispose();
    const billing = await l.close();
    leakedPods = Math.max(leakedPods, billing.length);
  }
  const wallS = (Date.now() - startedMs) / 1000;
  const completed = figures.filter((f) => f.ok).length;
  const attempts = figures.flatMap((f) => f.attempts);
  const estimated = attempts.filter((a) => a.estimatedUsd !== null);
  const under = estimated.filter((a) => a.estimatedUsd! < a.ledgerUsd - UNDER_TOLERANCE_USD);
  const within1 = estimated.filter((a) => !under.includes(a) && overUsd(a) <= 0.01 * a.ledgerUsd);
  // What the issue's figure can mean: within 1 % beyond what no client can know, each member's
  // create after its bytes left this client, inside the whole second of its createdAt.
  const within1Known = estimated.filter(
    (a) => !under.includes(a) && overUsd(a) - usdOf(a, a.over.startInFlightS) <= 0.01 * a.ledgerUsd,
  );
  // The product's own rule where 1 % is less than what one estimate can resolve: each member's
  // 2 s of its price and the $0.0001 rounding (src/core/runs/spend.ts estimateResolutionUsd).
  const withinRule = estimated.filter(
    (a) =>
      !under.includes(a) &&
      overUsd(a) <= Math.max(0.01 * a.ledgerUsd, a.members * estimateResolutionUsd(a.usdPerHour)),
  );
  const former = attempts.filter((a) => a.formerUsd !== null);
  const formerWithin1 = former.filter(
    (a) => a.formerUsd! >= a.ledgerUsd - 0.0001 && a.formerUsd! - a.ledgerUsd <= 0.01 * a.ledgerUsd,
  );
  const formerPct = former.map((a) => (100 * (a.formerUsd! - a.ledgerUsd)) / a.ledgerUsd);
  const overPct = estimated.map((a) => (100 * (a.estimatedUsd! - a.ledgerUsd)) / a.ledgerUsd);
  // The same, as seconds of the whole cluster's rate: an estimate is over by a fixed time (from
  // before the create is sent to the delete's answer), so 1 % holds only for attempts of minutes.
  const overS = estimated.map(
    (a) => (a.estimatedUsd! - a.ledgerUsd) / ((a.members * a.usdPerHour) / 3600),
  );
  const spread = (xs: number[], unit: string): string => {
    if (xs.length === 0) return 'n/a';
    const sorted = [...xs].sort((a, b) => a - b);
    const f = (x: number): string => x.toFixed(2);
    return `${f(sorted[0]!)} / ${f(sorted[Math.floor(sorted.length / 2)]!)} / ${f(sorted.at(-1)!)}${unit}`;
  };
  const kinds = (['podDies', 'podVanishes', 'hostLost', 'clusterVanishes'] as Kind[])
    .map((k) => `${k} ${figures.filter((f) => f.plan.kind === k).length}`)
    .join(', ');
  const beforeHome = figures.filter((f) => f.homeAtDeath === null).length;
  // Which end of the over-1 % attempts is off: the largest of the three parts of each.
  const overOne = estimated.filter((a) => !within1.includes(a));
  const largest = (a: AttemptFigure): 'startS' | 'endS' | 'roundS' =>
    (['startS', 'endS', 'roundS'] as const).reduce((m, k) => (a.over[k] > a.over[m] ? k : m));
  const named = { startS: 'start', endS: 'end', roundS: 'rounding' } as const;
  const parts = (['startS', 'endS', 'roundS'] as const)
    .map(
      (k) =>
        `${named[k]} ${spread(
          estimated.map((a) => a.over[k]),
          ' s',
        )} (largest in ${overOne.filter((a) => largest(a) === k).length} of the ${overOne.length} over 1 %)`,
    )
    .join('; ');
  const sub = (k: keyof OverParts): string =>
    spread(
      estimated.map((a) => a.over[k]),
      ' s',
    );
  // Each attempt over 1 %, named, with where its over comes from.
  const overOneLines = figures.flatMap((f) =>
    f.attempts
      .map((a, i) => ({ a, i }))
      .filter(({ a }) => overOne.includes(a))
      .map(
        ({ a, i }) =>
          `over 1 %: run ${f.runId} attempt ${i + 1} of ${f.attempts.length} (${f.plan.kind} of rank ${f.plan.rank}; ${a.ledgerS.toFixed(1)} s, +${((100 * overUsd(a)) / a.ledgerUsd).toFixed(2)} %, ${((100 * (overUsd(a) - usdOf(a, a.over.startInFlightS))) / a.ledgerUsd).toFixed(2)} % beyond what no client can know): ${describeOver(a.over)}`,
      ),
  );
  const lookMs = l.timing.statusPollMs;
  const verdict = (met: boolean, why: string): string => (met ? 'met' : `NOT met (${why})`);
  return {
    title,
    baseline,
    rows: [
      {
        measure: `runs completed on a new cluster from their newest verified checkpoint, over ${figures.length} member deaths at random moments`,
        baseline: '',
        ours: `${completed} / ${figures.length} (${pct(completed, figures.length)})`,
        ratio: '',
        target: '≥ 95 %',
        verdict: verdict(
          completed >= 0.95 * figures.length && figures.length >= 20,
          `${figures.length - completed} failed`,
        ),
      },
      {
        measure: 'clusters or member pods left (leaked) at the end',
        baseline: '',
        ours: `${leakedClusters} clusters, ${leakedPods} pods billing`,
        ratio: '',
        target: '0',
        verdict: verdict(leakedClusters === 0 && leakedPods === 0, 'leaked'),
      },
      {
        measure: "attempts' estimates never under the ledger",
        baseline: '',
        ours: `${estimated.length - under.length} / ${attempts.length}`,
        ratio: '',
        target: 'all',
        verdict: verdict(
          under.length === 0 && estimated.length === attempts.length,
          `${under.length} under, ${attempts.length - estimated.length} without an estimate`,
        ),
      },
      {
        measure:
          "attempts' estimates within 1 % of the ledger (over it by, min / median / max, in % and in seconds of the cluster's rate)",
        baseline: `${formerWithin1.length} / ${attempts.length} (${spread(formerPct, ' %')})`,
        ours: `${within1.length} / ${attempts.length} (${spread(overPct, ' %')}; ${spread(overS, ' s')} of the cluster's rate)`,
        ratio: '',
        target: 'all',
        verdict: verdict(
          within1.length === attempts.length,
          `${attempts.length - within1.length} over 1 %; within 1 % or each member's 2 s resolution: ${withinRule.length} / ${attempts.length}`,
        ),
      },
      {
        measure:
          "attempts' estimates within 1 % of the ledger beyond what no client can know: each member's create after its bytes left the client, inside the whole second of Runpod's createdAt (min / median / max member-seconds)",
        baseline: '',
        ours: `${within1Known.length} / ${attempts.length} (${sub('startInFlightS')})`,
        ratio: '',
        target: 'all',
        verdict: verdict(
          within1Known.length === attempts.length,
          `${attempts.length - within1Known.length} over 1 % beyond it`,
        ),
      },
    ],
    notes: [
      "the baseline of the 1 % row: the same attempts by the former rule (every member from the create's send to the cluster's delete, to $0.0001), side by side",
      `where each attempt's estimate is over the ledger, in seconds of one member's rate summed over its members (min / median / max): ${parts}`,
      `the start's over split (min / median / max member-seconds): before the create's bytes left this client (undici's sendHeaders; the product counts from its request's onConnect, the same tick) ${sub('startBeforeBytesS')}; after them, inside the second of the member's createdAt (no client can know when in it Runpod made the member) ${sub('startInFlightS')}`,
      `the end's over split: a dead member counted to the look that found it ${sub('foundS')}, of which waiting for that look to be sent ${sub('waitLookS')} (the cluster's pods are looked at every ${lookMs} ms here plus the nodes' SSH looks, and at once when a node's look or job fails; ${PRODUCTION_TIMING.statusPollMs} ms in production, over attempts ${TIMING_FACTOR} times as long); the live members to the delete's answer ${sub('deleteS')}`,
      ...overOneLines,
      `seed ${seed}; deaths: ${kinds}; ${beforeHome} before the first checkpoint was home; ${atOnce} runs at once in one emulator; ${STEPS} steps of ${JOB.stepSeconds} s, a checkpoint every ${JOB.saveEvery}; ${wallS.toFixed(0)} s in all; load average ${loadAtStart.toFixed(1)} at the start, ${loadavg()[0]!.toFixed(1)} at the end`,
      ...figures
        .filter((f) => !f.ok)
        .map(
          (f) =>
            `run ${f.runId} (${f.plan.kind}, rank ${f.plan.rank}, after step ${f.plan.afterStep}): ${f.why}`,
        ),
    ],
    bounds:
      `each run is two real clusters (four members with sshd, the bootstrap, the watchdog and torchrun) in one emulator on this machine; a death is found by the next look at the cluster's pods (EXITED, gone, the cluster gone) or by ${MISSES_ALLOWED} missed SSH looks (a host gone silent), then the whole cluster is deleted and confirmed and a new one made ready from the newest checkpoint home. ` +
      `Each member's estimate counts from its own createdAt, never before the create's bytes left the client (its request's onConnect, on the connected socket), to its own end (the look that found it gone or EXITED, else the delete's answer), rounded up to the micro-dollar. ` +
      `Runpod's createdAt is whole seconds, so a member made within the second the create was sent in counts from when its bytes left (${sub('startBeforeBytesS')} of members' time before undici's sendHeaders here); ` +
      `what is left after the bytes left (the create's way to the API and in its hands, ${sub('startInFlightS')} of members' time here, in a process whose event loop the clients, the emulator and the SSH sessions share) no client can narrow, and it does not shrink with the test's timing: it is a larger share of an attempt ${TIMING_FACTOR} times shorter than production's. ` +
      `A dead member's end is the look that found it: at once when a node's SSH look or job failed, else at most one turn of the look loop after the ledger stopped it (${lookMs} ms of pause here plus the looks themselves; ${PRODUCTION_TIMING.statusPollMs} ms in production).`,
    raw: { seed, figures, leakedClusters, leakedPods },
  };
}
