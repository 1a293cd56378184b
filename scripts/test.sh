#!/usr/bin/env bash
# `npm test`: installs whatever is missing on a fresh Debian machine (run as root), then runs
#   build → (unit ∥ the first e2e window) → (integration ∥ the other e2e windows ∥ (lint →
#   typecheck → benchmarks, quick mode)) → the load test
# failing fast, with a header per step and the time each took. Steps in one group run side by
# side (each one's output is printed whole when it ends); the groups run one after another.
#
# `bash scripts/test.sh unit|integration|e2e` (npm run test:unit, …) runs one tier alone, after
# installing what that tier needs (e2e also builds first, since it runs the bundles).
#
# What gets installed, only when missing:
#   - npm packages: when node_modules is absent or differs from package-lock.json, a copy of the
#     node_modules kept per machine for that lockfile (~/.cache/overbrainer-test/node_modules-<fp>/),
#     else `npm ci`, whose result is kept there (scripts/lib/npmDeps.sh);
#   - Debian packages (apt-get update once, then install -y; each waits up to 10 minutes for the
#     package manager's lock another install holds: scripts/lib/apt.sh), per tier: unit needs
#     busybox, dash, python3, openssh-client; integration adds openssh-server, curl, iproute2
#     (the emulator's cluster networks), python3-torch (torchrun and gloo for the multi-node
#     tests) and python3-optuna (the sweep's study, under /usr/bin/python3); e2e needs
#     all of those (its journeys train on real emulated pods) plus chromium, and libkrb5-dev, g++,
#     make for code-server's native modules;
#   - Node 24 and code-server for the e2e tier (scripts/ensure-code-server.sh), once per machine into
#     ~/.cache/overbrainer-test/code-server-<pins>/ (or $OVERBRAINER_TEST_CACHE), linked from
#     test/e2e/vscode/; later clones reuse it.
# In `npm test` the npm packages install beside the Debian ones, and code-server's install runs in
# the background while the build and the unit tier run (ensure_all_deps).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

TIER="${1:-all}"
case "$TIER" in
  all | unit | integration | e2e) ;;
  *)
    echo "usage: scripts/test.sh [all|unit|integration|e2e]" >&2
    exit 2
    ;;
esac

started_all_s=$(date +%s)
step_started_s=0
step_name=""

# step_cpu_init, step_cpu_begin, step_cpu_end, step_cpu_total, step_cpu_finish: each step's
# CPU seconds beside its wall time, where control groups can be made.
# shellcheck source=scripts/lib/stepCpu.sh
source "$ROOT/scripts/lib/stepCpu.sh"
step_cpu_init

finish_step() {
  if [ -n "$step_name" ]; then
    step_cpu_end
    echo "---- $step_name: ok ($(($(date +%s) - step_started_s)) s$STEP_CPU_USED)"
  fi
}

step() {
  finish_step
  step_name="$1"
  step_started_s=$(date +%s)
  step_cpu_begin "$step_name"
  echo
  echo "==== $step_name ===="
}

on_exit() {
  local code=$?
  step_cpu_finish
  if [ -n "${E2E_BUILD_DIR:-}" ]; then rm -rf "$E2E_BUILD_DIR"; fi
  # A background code-server install left running (a step failed first) leaves no stamp when
  # stopped: the next run starts it over.
  if [ -n "${CODE_SERVER_PID:-}" ]; then kill -- "-$CODE_SERVER_PID" 2>/dev/null || true; fi
  if [ -n "${CODE_SERVER_LOG:-}" ]; then rm -f "$CODE_SERVER_LOG"; fi
  if [ "$code" -ne 0 ] && [ -n "$step_name" ]; then
    echo
    echo "==== FAILED: $step_name (exit $code) ====" >&2
  fi
}
trap on_exit EXIT

# ---------------------------------------------------------------------------------------------
# Prerequisites

# apt_install and ensure_debian: they wait (bounded) for the package manager's lock.
# shellcheck source=scripts/lib/apt.sh
source "$ROOT/scripts/lib/apt.sh"

# ensure_npm_deps: npm ci, or on a warm machine a copy of the node_modules kept for this lockfile.
# shellcheck source=scripts/lib/npmDeps.sh
source "$ROOT/scripts/lib/npmDeps.sh"

# restore_check_caches, save_check_caches: lint and typecheck check only what changed.
# shellcheck source=scripts/lib/checkCaches.sh
source "$ROOT/scripts/lib/checkCaches.sh"

# The unit tier runs the pod scripts and the job launcher under dash and busybox sh, busybox tar,
# ssh-keygen and the Python trainer plugins: a fresh machine has none of them for sure.
UNIT_DEBS=(busybox:busybox dash:dash python3:python3 ssh-keygen:openssh-client)
# ip: the emulator's cluster networks (a network namespace per member on a bridge);
# torchrun: the multi-node tests' real PyTorch launcher with gloo on CPU (Debian's 1.13, for
# /usr/bin/python3: PyPI is not reachable from these machines); Optuna (Debian's 3.1) for the
# sweep's study tests under /usr/bin/python3, as users run 5.x.
INTEGRATION_DEBS=(sshd:openssh-server curl:curl ip:iproute2 /usr/bin/torchrun:python3-torch
  /usr/lib/python3/dist-packages/optuna/__init__.py:python3-optuna)
# Chromium for the windows; libkrb5-dev, g++ and make for code-server's native modules.
E2E_DEBS=(chromium:chromium /usr/include/gssapi/gssapi_krb5.h:libkrb5-dev g++:g++ make:make)

ensure_unit_deps() {
  ensure_debian "${UNIT_DEBS[@]}"
}

ensure_integration_deps() {
  ensure_debian "${UNIT_DEBS[@]}" "${INTEGRATION_DEBS[@]}"
  # sshd refuses to start without its privilege-separation directory.
  mkdir -p /run/sshd 2>/dev/null || true
}

ensure_e2e_deps() {
  ensure_integration_deps
  ensure_debian "${E2E_DEBS[@]}"
  bash scripts/ensure-code-server.sh
}

# Everything `npm test` needs, with the slow parts of a cold machine side by side: the npm
# packages beside the Debian ones (one apt-get install for all tiers), and code-server's install
# (minutes of compiling its native modules, once per machine) in the background while the build
# and the unit tier run: the e2e steps run scripts/ensure-code-server.sh again, which waits on the
# install's lock and then finds it done (wait_code_server). On a warm machine each part is a check.
ensure_all_deps() {
  local npm_log npm_code=0
  npm_log="$(mktemp)"
  ensure_npm_deps >"$npm_log" 2>&1 &
  local npm_pid=$!
  ensure_debian "${UNIT_DEBS[@]}" "${INTEGRATION_DEBS[@]}" "${E2E_DEBS[@]}"
  mkdir -p /run/sshd 2>/dev/null || true
  wait "$npm_pid" || npm_code=$?
  cat "$npm_log"
  rm -f "$npm_log"
  [ "$npm_code" -eq 0 ] || return "$npm_code"
  CODE_SERVER_LOG="$(mktemp)"
  # Its CPU in a group of its own (said by reap_code_server); in a session of its own, so that a
  # stop (a step failed first) reaches its npm and compilers.
  (
    step_cpu_begin "$CODE_SERVER_STEP"
    exec setsid bash scripts/ensure-code-server.sh >"$CODE_SERVER_LOG" 2>&1
  ) &
  CODE_SERVER_PID=$!
}
CODE_SERVER_STEP="code-server install (background)"

# After the e2e step that waited for it: the background install has ended (or is ending).
reap_code_server() {
  [ -n "${CODE_SERVER_PID:-}" ] || return 0
  wait "$CODE_SERVER_PID" || true
  # Its time is in its own log's "installed in N s" (printed by the e2e step that waited for it).
  echo "---- $CODE_SERVER_STEP: ok (ended$(step_cpu_of "$CODE_SERVER_STEP" "$CODE_SERVER_PID"))"
  CODE_SERVER_PID=""
}

# In an e2e step: code-server ready (waiting for a background install through its lock), and
# what that install said.
wait_code_server() {
  bash scripts/ensure-code-server.sh
  if [ -n "${CODE_SERVER_LOG:-}" ] && [ -s "$CODE_SERVER_LOG" ]; then
    echo "(code-server's install in the background said:)"
    cat "$CODE_SERVER_LOG"
    : >"$CODE_SERVER_LOG"
  fi
}

# ---------------------------------------------------------------------------------------------
# Steps

# Both check only what changed since the caches this machine kept (scripts/lib/checkCaches.sh).
run_lint() {
  step "lint (eslint + prettier --check)"
  restore_check_caches
  npm run --silent lint
  save_check_caches
}

run_typecheck() {
  step "typecheck (tsc: extension + webview)"
  restore_check_caches
  npm run --silent typecheck
  save_check_caches
}

run_build() {
  step "build (esbuild)"
  npm run --silent build
}

# The unit files two at a time (mocha --parallel, a worker per file, the 2 cores): a few of them
# wait on child processes (esbuild, python3's unittest, the pod scripts under each shell, lock
# races between processes). Side by side on 2026-12-07 under a load of 12-21, the same 1,101
# tests took 140 s two at a time against 199 s in one process, for the same CPU (45 CPU-s).
run_unit() {
  step "unit tests"
  npx mocha --config .mocharc.unit.json --parallel --jobs 2
}

# The integration files run eight at a time (mocha --parallel, one worker process per file):
# most of their time is spent waiting on pods, sshd and scaled timers (deadlines, leases, the
# watchdog's ticks), not on the CPU. On 2026-12-06, on a machine other work kept at a load of
# 20-35, six at a time ran the 60 files in 747 s (their walls summed 4,191 s: the workers were
# busy 93 % of it) where four at a time had run them in 1,143 s (4,395 s summed): the tier's
# length is its summed walls over the count. A file keeps about a tenth of a core busy (the
# tier's 430 CPU-s, counted in a cgroup per file, over those 4,191 s; the slow files timed alone
# on 2026-12-07 under a load of 20-40: 10-30 CPU-s each for 150-320 s of wall), so eight add
# under a core beside the e2e windows. Every lab has its own emulator, ports
# and temp dirs, so files share nothing. The load test (20 runs followed for a simulated hour,
# leases on a 1/120 clock) measures the client under load of its own making: it runs after them
# (beside nothing), so another file's load cannot make it miss a renewal.
LOAD_TEST=test/integration/reliability.load.integration.test.ts
# The 100 pod deaths of the recovery figure keep 10 pods training at once for about 4 min: beside
# other files on 2 cores that load starves their scaled timers (a release test missed its lease
# in CI). It is a figure, not a gate: `npm run reliability` runs it (docs/RELIABILITY.md), and
# reliability.recovery keeps every recovery path in the suite.
RECOVERY_FIGURE=test/integration/reliability.recoveryDeaths.integration.test.ts
# A worker takes a whole file, so a long file started last is the tier's tail: these start
# first, longest first, by their walls six at a time in the suite on an idle machine
# (2026-12-07: reliability.recovery 265 s, cli 260, reliability.runSpend 223, reliability.crash
# 197, reliability.api 196, reliability.release 194, lifecycle.guards 163,
# reliability.spendPastEnd 147, cluster.train 139, reliability.budgetDay 128, cli.podCommands
# 120; cli.commands, 241 s then, starts its independent CLIs four at a time since), against
# 70 s or less for most of the rest. cluster.train had been left to start among the others.
# 2026-12-07 (CI under a load of 20-35): reliability.api 435 s, cli 391, reliability.recovery
# 347, cluster.train 329, cluster.deaths 314 (new; it had been left to start among the others);
# reliability.spendPastEnd's watchdog-deleted pod now lives 4.5 min.
# 2026-12-07 13:00 (CI at a load of 30-56): sweep 532 s, sweepFigures 527, sweepAttach 514 and
# cluster.attach 482 were among the ten slowest, and had been left to start among the others.
# 2026-12-08 (main's idle CI: the step 730 s): reliability.recovery 350 s, sweep 336,
# reliability.spendPastEnd 299, sweepAttach 275, cli 267, sweepFigures 266. Files whose cases
# ran one after another for longer than that were cut at a seam (recovery → + recoveryHost,
# sweep → + sweepBudget, sweepAttach → + sweepStop, cli → + cli.runControl), and
# reliability.spendPastEnd starts first: its one case waits about 4.5 minutes for a watchdog's
# delete past a deadline (the 1 % it checks needs a pod that long), whatever the load.
LONG_FIRST=(reliability.spendPastEnd cluster.deaths reliability.api sweep cluster.attach cluster.train
  sweepAttach reliability.recoveryHost reliability.recovery reliability.runSpend reliability.crash
  cli cli.runControl sweepBudget sweepFigures reliability.release cli.commands lifecycle.guards
  cluster.recovery reliability.budgetDay cli.podCommands reliability.ssh reliability.disk lifecycle
  sweepStop reliability.input exec.upload reliability.budget retrieval podLogs cli.readOnly
  reliability.apiLimits cli.tty reliability.records reliability.snapshot emulator.cli)
INTEGRATION_JOBS=8
# OVERBRAINER_INTEGRATION_JOBS overrides it for one run (to measure another count).
INTEGRATION_JOBS="${OVERBRAINER_INTEGRATION_JOBS:-$INTEGRATION_JOBS}"

# The integration files to run, the long ones first, without the load test and the figure.
integration_files() {
  local name file listed=" "
  for name in "${LONG_FIRST[@]}"; do
    file="test/integration/$name.integration.test.ts"
    if [ -f "$file" ]; then
      echo "$file"
      listed+="$file "
    fi
  done
  for file in test/integration/*.integration.test.ts; do
    case "$listed" in *" $file "*) continue ;; esac
    if [ "$file" != "$LOAD_TEST" ] && [ "$file" != "$RECOVERY_FIGURE" ]; then echo "$file"; fi
  done
}

run_integration_files() {
  step "integration tests ($INTEGRATION_JOBS files at a time, without the load test and the recovery figure)"
  local times code=0 files
  times="$(mktemp)"
  mapfile -t files < <(integration_files)
  OVERBRAINER_FILE_TIMES="$times" npx mocha --config .mocharc.integration.json --parallel \
    --jobs "$INTEGRATION_JOBS" "${files[@]}" || code=$?
  echo "slowest integration files (wall s, $INTEGRATION_JOBS at a time):"
  sort -rn "$times" | head -12 | sed 's/^/  /'
  rm -f "$times"
  return "$code"
}

# The load test's bound is a lease's age against its time to live (15 min, renewed every 5, the
# production timing). OVERBRAINER_LOAD_SCALE divides that timing: 120 by default (5 s of slack for a
# renewal, against event loop delays of 75 ms alone and 152 ms beside the quick benchmarks; a
# simulated hour in about a minute). Beside the e2e windows it once needed 1/10 (at 1/20 it
# missed by 4–7 s twice in CI with event loop delays of 8–11 s: see docs/TESTING.md), which made
# it 6–11 minutes: away from them it is shorter and as strict.
run_load_test() {
  step "integration: the load test (lease clock 1/${OVERBRAINER_LOAD_SCALE:-120})"
  npx mocha --node-option import=tsx --timeout 120000 "$LOAD_TEST"
}

run_integration() {
  run_integration_files
  run_load_test
}

# Repeats a failed step's mocha failure reports (from "N failing" on, each cut to its first
# lines), or its last lines when it failed elsewhere, under a header naming the step.
print_failures() {
  local name="$1" log="$2"
  echo
  echo "==== what failed in $name ===="
  if grep -qE '^  [0-9]+ failing' "$log"; then
    # Each failure's title and the first lines of its error, so that several fit in a tail.
    sed -n '/^  [0-9]* failing/,$p' "$log" |
      awk '/^  [0-9]+\) /{n=0} {n++} n<=12' | head -n 120
  else
    tail -n 40 "$log"
  fi
}

# Runs each named function in the background, its output in a file of its own; prints each
# output whole (in the order given) and fails, after all have ended, if any failed.
run_group() {
  finish_step
  step_name=""
  local dir names=("$@") pids=() name i failed=() group_started_s
  dir="$(mktemp -d)"
  group_started_s=$(date +%s)
  echo
  echo "==== side by side: ${names[*]} ===="
  for name in "${names[@]}"; do
    (
      set -euo pipefail
      step_name=""
      STEP_CPU_DIR=""
      "$name"
      finish_step
    ) >"$dir/$name.log" 2>&1 &
    pids+=("$!")
  done
  for i in "${!names[@]}"; do
    if ! wait "${pids[$i]}"; then failed+=("${names[$i]}"); fi
    cat "$dir/${names[$i]}.log"
  done
  if [ "${#failed[@]}" -gt 0 ]; then
    # Whoever reads only the tail of the log (a CI page) sees what failed without scrolling
    # back through the other steps' output.
    for name in "${failed[@]}"; do print_failures "$name" "$dir/$name.log"; done
    rm -rf "$dir"
    step_name="side by side: ${failed[*]}"
    return 1
  fi
  rm -rf "$dir"
  echo "---- side by side (${names[*]}): ok ($(($(date +%s) - group_started_s)) s)"
}

# lint, typecheck and the quick benchmarks, one after another: CPU-bound, bounded by no wall
# time, and gating nothing the tests need, they fill the CPU the integration files and the e2e
# windows leave idle while they wait on pods (see docs/TESTING.md, "Where the time goes"), one
# process at a time so they add one CPU-bound neighbour, not three.
run_checks_bench() {
  run_lint
  run_typecheck
  run_bench_quick
}

E2E_FIRST=test/e2e/activation.e2e.test.ts
# The other e2e files run two at a time (mocha --parallel, a worker per job, each file its own
# code-server, emulator, workspace and browser context; a worker's files borrow one Chromium,
# test/e2e/sharedChromium.ts): a journey mostly waits on its pods, its
# extension host and the page (the tier alone kept the machine about 0.4 cores busy on average,
# 2026-12-06). The long files start first, longest first, so that none is left for last.
E2E_JOBS=2
# 2026-12-07: train's journeys are newUser's, then sweep's (257 s alone at a load of 12-17);
# spend, logs, recovery and crash are journeys' (315 s); trees, webview and chart are views' (203
# s); demo 129 s; trust is package's window's (97 s).
E2E_LONG_FIRST=(journeys newUser views demo package)

# The e2e files after the first window, the long ones first.
e2e_rest_files() {
  local name file listed=" "
  for name in "${E2E_LONG_FIRST[@]}"; do
    file="test/e2e/$name.e2e.test.ts"
    if [ -f "$file" ]; then
      echo "$file"
      listed+="$file "
    fi
  done
  for file in test/e2e/*.e2e.test.ts; do
    case "$listed" in *" $file "*) continue ;; esac
    [ "$file" = "$E2E_FIRST" ] || echo "$file"
  done
}

# A copy of the build for the e2e windows, made once right after the build (test/e2e/build.ts):
# the demo and package journeys rebuild dist/ while the other files' windows start and reload.
stage_e2e_build() {
  E2E_BUILD_DIR="$(mktemp -d "${TMPDIR:-/tmp}/overbrainer-e2e-build-XXXXXX")"
  cp -r package.json dist media "$E2E_BUILD_DIR/"
  export OVERBRAINER_E2E_BUILD="$E2E_BUILD_DIR"
}

run_e2e() {
  run_e2e_first
  run_e2e_rest
}

# The suite's first window starts code-server cold (its caches empty): beside the load test
# booting its 20 pods it twice never activated the extension (its page took a minute to load,
# its extension host lost its connection once and never scanned the extensions). It runs before
# the rest of the journeys go beside the integration files (in `npm test`, beside the unit tier).
run_e2e_first() {
  step "e2e tests: the first window"
  wait_code_server
  npx mocha --config .mocharc.e2e.json "$E2E_FIRST"
}

run_e2e_rest() {
  step "e2e tests (code-server + Chromium), the rest, $E2E_JOBS files at a time"
  local files
  mapfile -t files < <(e2e_rest_files)
  npx mocha --config .mocharc.e2e.json --parallel --jobs "$E2E_JOBS" "${files[@]}"
}

# The benchmarks (issue 8) in quick mode: tiny sizes, one repetition, no timing assertion — only
# that each still runs. `npm run bench` is the full run that writes docs/BENCHMARKS.md.
run_bench_quick() {
  step "benchmarks, quick mode (they still run)"
  npx tsx bench/run.ts --quick
}

step "prerequisites ($TIER)"
case "$TIER" in
  all)
    ensure_all_deps
    run_build
    stage_e2e_build
    # The first code-server window (see run_e2e_first) beside the unit tier: one CPU-bound
    # process, the kind of neighbour the suite must stand anyway (CI stays green with two busy
    # loops beside it), not the load test's 20 booting pods that once kept it from activating.
    run_group run_unit run_e2e_first
    reap_code_server
    # Then the integration files beside the other e2e journeys: both mostly wait on pods and
    # scaled timers (together they kept the 2 cores about 60 % busy, 2026-12-06), so lint,
    # typecheck and the quick benchmarks (no figure judged) run in that idle CPU, one at a time.
    run_group run_integration_files run_e2e_rest run_checks_bench
    # The load test, the one case bounded by the event loop's delays, last and alone on its own
    # clock: beside the quick benchmarks its oldest lease was 2.6 s of 7.5 and its event loop's
    # longest delay 152 ms (alone: 2.5 s and 75 ms); the e2e windows once stalled it 8–11 s.
    run_load_test
    ;;
  unit)
    ensure_npm_deps
    ensure_unit_deps
    run_unit
    ;;
  integration)
    ensure_npm_deps
    ensure_integration_deps
    # cli.tty spawns the built CLI (dist/cli.js) under a pseudo-terminal.
    run_build
    run_integration
    ;;
  e2e)
    # The journeys train on the emulator's real pods: sshd, curl and python3 run inside them.
    ensure_npm_deps
    ensure_e2e_deps
    run_build
    stage_e2e_build
    run_e2e
    ;;
esac
finish_step
step_name=""
echo
echo "==== all steps passed ($TIER) in $(($(date +%s) - started_all_s)) s$(step_cpu_total) ===="
