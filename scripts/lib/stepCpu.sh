# shellcheck shell=bash
# CPU time per step of `npm test` (scripts/test.sh), sourced from the clone's root.
#
# The suite's length on 2 cores is bounded by its CPU as much as by its waits, so each step says
# both: every step runs in a control group of its own (the kernel counts the CPU of every process
# it starts, pods and daemons included, even those that outlive the step), under one group for
# the whole run. Where control groups cannot be made (no cgroup v1 cpuacct or v2 hierarchy, not
# root, a container that does not delegate them), the figures are left out and nothing else
# changes.

STEP_CPU_TOP=""
STEP_CPU_KIND=""

# step_cpu_init: the run's group, or nothing.
step_cpu_init() {
  local base kind
  if [ -w /sys/fs/cgroup/cpuacct/cgroup.procs ] && [ -f /sys/fs/cgroup/cpuacct/cpuacct.usage ]; then
    base=/sys/fs/cgroup/cpuacct kind=v1
  elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    base="/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup 2>/dev/null)" kind=v2
    base="${base%/}"
  else
    return 0
  fi
  STEP_CPU_TOP="$base/overbrainer-test-$$"
  if mkdir -p "$STEP_CPU_TOP" 2>/dev/null && echo "$BASHPID" >"$STEP_CPU_TOP/cgroup.procs" 2>/dev/null; then
    STEP_CPU_KIND=$kind
  else
    rmdir "$STEP_CPU_TOP" 2>/dev/null
    STEP_CPU_TOP=""
  fi
}

# step_cpu_group_s DIR: the CPU seconds the group has used so far, or nothing.
step_cpu_group_s() {
  case "$STEP_CPU_KIND" in
    v1) awk '{ printf "%.0f", $1 / 1e9 }' "$1/cpuacct.usage" 2>/dev/null ;;
    v2) awk '$1 == "usage_usec" { printf "%.0f", $2 / 1e6 }' "$1/cpu.stat" 2>/dev/null ;;
  esac
}

# Both are called in the step's own shell, never in a $(…): that would move the subshell.
STEP_CPU_DIR=""
STEP_CPU_USED=""

# step_cpu_begin NAME: moves this shell (and so what it starts from now on) into a group of the
# step's own, named in STEP_CPU_DIR (empty when none could be made).
step_cpu_begin() {
  STEP_CPU_DIR=""
  [ -n "$STEP_CPU_TOP" ] || return 0
  local dir
  dir="$STEP_CPU_TOP/$(printf '%s' "$1" | tr -c 'A-Za-z0-9' '-' | cut -c1-60)-$BASHPID"
  if mkdir -p "$dir" 2>/dev/null && echo "$BASHPID" >"$dir/cgroup.procs" 2>/dev/null; then
    STEP_CPU_DIR=$dir
  fi
}

# step_cpu_end: this shell back in the run's group; STEP_CPU_USED is ", N CPU-s" for the step
# that ends, or empty.
step_cpu_end() {
  STEP_CPU_USED=""
  [ -n "$STEP_CPU_DIR" ] || return 0
  local used
  echo "$BASHPID" >"$STEP_CPU_TOP/cgroup.procs" 2>/dev/null
  used="$(step_cpu_group_s "$STEP_CPU_DIR")"
  # A daemon the step left behind keeps its group until the run's end (step_cpu_finish).
  rmdir "$STEP_CPU_DIR" 2>/dev/null || true
  STEP_CPU_DIR=""
  [ -z "$used" ] || STEP_CPU_USED=", $used CPU-s"
}

# step_cpu_of NAME PID: ", N CPU-s" for the group step_cpu_begin NAME made in the shell PID,
# which is then removed (once its processes ended), or nothing.
step_cpu_of() {
  [ -n "$STEP_CPU_TOP" ] || return 0
  local dir used
  dir="$STEP_CPU_TOP/$(printf '%s' "$1" | tr -c 'A-Za-z0-9' '-' | cut -c1-60)-$2"
  [ -d "$dir" ] || return 0
  used="$(step_cpu_group_s "$dir")"
  rmdir "$dir" 2>/dev/null || true
  [ -z "$used" ] || printf ', %s CPU-s' "$used"
}

# step_cpu_total: ", N CPU-s" for the whole run so far, or nothing.
step_cpu_total() {
  [ -n "$STEP_CPU_TOP" ] || return 0
  local used
  used="$(step_cpu_group_s "$STEP_CPU_TOP")"
  [ -n "$used" ] && printf ', %s CPU-s' "$used"
}

# step_cpu_finish: this shell back where it was; the groups removed once their processes ended.
step_cpu_finish() {
  [ -n "$STEP_CPU_TOP" ] || return 0
  local parent dir
  local pid
  parent="$(dirname "$STEP_CPU_TOP")"
  for dir in "$STEP_CPU_TOP"/*/ "$STEP_CPU_TOP/"; do
    [ -f "$dir/cgroup.procs" ] || continue
    while read -r pid; do echo "$pid" >"$parent/cgroup.procs" 2>/dev/null; done <"$dir/cgroup.procs"
    [ "$dir" = "$STEP_CPU_TOP/" ] || rmdir "$dir" 2>/dev/null
  done
  rmdir "$STEP_CPU_TOP" 2>/dev/null
  return 0
}
