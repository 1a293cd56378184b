#!/bin/bash
# overbrainer pod bootstrap (bash).
#
# The pod's `cmd` is `bash -c` of this file, then a `write_watchdog` function (a quoted heredoc
# holding watchdog.sh), then `bootstrap_main` (src/core/pod/podScripts.ts builds it). It runs
# after the image's entrypoint, which must end with `exec "$@"`. It makes the pod reachable by
# the client only (its pinned host key, its one authorized key), then execs the watchdog, which
# becomes the container's main process and deletes the pod by itself when nobody needs it.
#
# Steps: 1. claim the run dir (.claim, created exclusively, holds OVERBRAINER_CLAIM: the same
# owner is this pod restarting; another owner means another pod uses the dir: refuse, in
# OVERBRAINER_REFUSED_DIR); 2. remove a stale verdict; 3. install the host key;
# 4. authorized_keys; 5. write the watchdog; 6. job.env; 7. unset the key vars, start sshd, exec
# the watchdog. (The host key and the client's key come before the rest so that a later failure
# can still be read by the client over SSH.)
# Any failure: `fail <reason>` logs it, writes .pod/bootstrap_failed and execs the watchdog
# with OVERBRAINER_BOOT_FAILED=1, which publishes "failed bootstrap: <reason>" and deletes the
# pod, kept or not. When the run dir is this pod's and its pinned host key and the client's key
# are installed, the failure starts sshd first (OVERBRAINER_BOOT_FAILED_SSH=1): the client reads
# the verdict over SSH, refuses the run at once (no other GPU type would fare better) and deletes
# the pod; the watchdog waits OVERBRAINER_FAIL_GRACE for that before it deletes the pod itself.
# Otherwise (the host key or the client's key is bad, the run dir is another pod's, sshd cannot
# start) no sshd runs: the watchdog deletes the pod at once, and the client, which sees its pod
# deleted while starting, reports the failed bootstrap. No job is ever started on a failed pod:
# the client starts one only after a "ready" verdict.
#
# Env (the create call's): OVERBRAINER_RUN_DIR, OVERBRAINER_WORKDIR, OVERBRAINER_CLAIM,
# OVERBRAINER_HOST_KEY (base64 of the OpenSSH private host key), OVERBRAINER_AUTHORIZED_KEY,
# OVERBRAINER_RUN_ID, OVERBRAINER_VERSION, and the watchdog's. Never the account API key.
# Paths, production defaults first; the overrides exist for this script's own tests:
#   OVERBRAINER_ETC_DIR      /etc/overbrainer                 watchdog.sh, job.env
#   OVERBRAINER_SSH_ETC      /etc/ssh                         ssh_host_ed25519_key(.pub)
#   OVERBRAINER_ROOT_SSH     /root/.ssh                       authorized_keys
#   OVERBRAINER_REFUSED_DIR  /root/overbrainer-refused-run    run dir of a refused claim
#   OVERBRAINER_CUDA_ENV     /workspace/axolotl/scripts/cuda13_env.sh   sourced for job.env
#   OVERBRAINER_SSHD_START   service ssh restart              how sshd starts
# Log: stdout (the pod's Runpod logs) and <run dir>/.pod/bootstrap.log, "<UTC ts> <msg>" lines.
# Secrets (the host key) are never logged, and the Runpod key never reaches sshd.

set -eu
umask 077

BS_LOG_FILE=
BS_EARLY=
BS_WATCHDOG_WRITTEN=0
BS_CLAIMED=0
BS_HOST_KEY_OK=0
BS_AUTH_OK=0
BS_ETC=${OVERBRAINER_ETC_DIR:-/etc/overbrainer}
BS_SSH_ETC=${OVERBRAINER_SSH_ETC:-/etc/ssh}
BS_ROOT_SSH=${OVERBRAINER_ROOT_SSH:-/root/.ssh}
BS_REFUSED=${OVERBRAINER_REFUSED_DIR:-/root/overbrainer-refused-run}
BS_RUN_DIR=${OVERBRAINER_RUN_DIR:-}

# bash's printf stamps a line without a `date` process (the pod's cmd runs this under bash).
bs_clock=0
bs_ts=
printf -v bs_ts '%(%s)T' -1 >/dev/null 2>&1 || true
case $bs_ts in '' | *[!0-9]*) ;; *) bs_clock=1 ;; esac

bs_log() {
  if [ "$bs_clock" = 1 ]; then
    TZ=UTC0 printf -v bs_ts '%(%Y-%m-%dT%H:%M:%SZ)T' -1
  else
    bs_ts=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  fi
  bs_line="$bs_ts $*"
  printf '%s\n' "$bs_line"
  if [ -n "$BS_LOG_FILE" ]; then
    printf '%s\n' "$bs_line" >>"$BS_LOG_FILE" 2>/dev/null || true
  else
    # Until the run dir is ours, lines wait here (another pod's dir must not get them).
    BS_EARLY="$BS_EARLY$bs_line
"
  fi
}

# Logging into "$1"/.pod/bootstrap.log from now on, with the lines logged so far.
bs_log_into() {
  mkdir -p "$1/.pod"
  BS_LOG_FILE="$1/.pod/bootstrap.log"
  printf '%s' "$BS_EARLY" >>"$BS_LOG_FILE" 2>/dev/null || true
  BS_EARLY=
}

# Single-quotes "$1" for a shell (' becomes '\'').
bs_quote() {
  printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

# The watchdog to $BS_ETC/watchdog.sh, atomically (temp + mv).
bs_write_watchdog() {
  command -v write_watchdog >/dev/null 2>&1 || return 1
  bs_tmp="$BS_ETC/.watchdog.sh.$$"
  mkdir -p "$BS_ETC" &&
    write_watchdog >"$bs_tmp" &&
    chmod 700 "$bs_tmp" &&
    mv -f "$bs_tmp" "$BS_ETC/watchdog.sh" &&
    BS_WATCHDOG_WRITTEN=1
}

fail() {
  trap - ERR
  set +e
  bs_log "bootstrap failed: $1"
  [ -n "$BS_RUN_DIR" ] || BS_RUN_DIR=$BS_REFUSED
  [ -n "$BS_LOG_FILE" ] || bs_log_into "$BS_RUN_DIR"
  mkdir -p "$BS_RUN_DIR/.pod"
  printf '%s\n' "$1" >"$BS_RUN_DIR/.pod/bootstrap_failed"
  unset OVERBRAINER_HOST_KEY OVERBRAINER_AUTHORIZED_KEY
  export OVERBRAINER_RUN_DIR="$BS_RUN_DIR" OVERBRAINER_BOOT_FAILED=1
  unset OVERBRAINER_BOOT_FAILED_SSH
  if [ "$BS_CLAIMED" = 1 ] && [ "$BS_HOST_KEY_OK" = 1 ] && [ "$BS_AUTH_OK" = 1 ] &&
    [ "${BS_SSHD_FAILED:-0}" != 1 ]; then
    # The verdict is readable by the client (and only by it: its key, the pinned host key).
    if (unset RUNPOD_API_KEY && eval "${OVERBRAINER_SSHD_START:-service ssh restart}") >/dev/null 2>&1 </dev/null; then
      bs_log "sshd started so the client can read the verdict"
      export OVERBRAINER_BOOT_FAILED_SSH=1
    else
      bs_log "sshd did not start: the client cannot read the verdict"
    fi
  fi
  [ "$BS_WATCHDOG_WRITTEN" = 1 ] || bs_write_watchdog
  if [ -f "$BS_ETC/watchdog.sh" ]; then
    bs_log "exec watchdog (bootstrap failed)"
    exec bash "$BS_ETC/watchdog.sh"
  fi
  # No file for it: run the watchdog from its text, so the pod still deletes itself.
  if command -v write_watchdog >/dev/null 2>&1; then
    bs_log "exec watchdog from memory (cannot write $BS_ETC/watchdog.sh)"
    exec bash -c "$(write_watchdog)" overbrainer-watchdog
  fi
  bs_log "no watchdog to run: the pod stays until the client deletes it"
  exit 1
}

# 1. Claim the run dir.
bs_claim() {
  bs_claim_owner=${OVERBRAINER_CLAIM:-}
  if [ -z "$BS_RUN_DIR" ]; then
    fail "missing OVERBRAINER_RUN_DIR"
  fi
  case $bs_claim_owner in
    '' | *'
'*)
      BS_RUN_DIR=$BS_REFUSED
      fail "OVERBRAINER_CLAIM must be one non-empty line"
      ;;
  esac
  BS_RUN_DIR=${BS_RUN_DIR%/}
  if ! mkdir -p "$BS_RUN_DIR"; then
    BS_RUN_DIR=$BS_REFUSED
    fail "cannot create the run dir"
  fi
  if (set -C && printf '%s\n' "$bs_claim_owner" >"$BS_RUN_DIR/.claim") 2>/dev/null; then
    BS_CLAIMED=1
    bs_log_into "$BS_RUN_DIR"
    bs_log "claimed $BS_RUN_DIR"
    return 0
  fi
  bs_claim_found=$(cat "$BS_RUN_DIR/.claim" 2>/dev/null) || bs_claim_found=
  if [ "$bs_claim_found" = "$bs_claim_owner" ]; then
    BS_CLAIMED=1
    bs_log_into "$BS_RUN_DIR"
    bs_log "run dir already claimed by this pod: $BS_RUN_DIR"
    return 0
  fi
  bs_log "$BS_RUN_DIR is claimed by another pod: refusing it"
  BS_RUN_DIR=$BS_REFUSED
  mkdir -p "$BS_RUN_DIR/.pod"
  rm -f "$BS_RUN_DIR/.pod/watchdog"
  fail "run dir claimed by another pod"
}

# 3. The pinned host key, the only one sshd may offer.
bs_host_key() {
  case ${OVERBRAINER_HOST_KEY:-} in
    '') fail "missing OVERBRAINER_HOST_KEY" ;;
    '{{'*) fail "OVERBRAINER_HOST_KEY is an unresolved secret reference" ;;
  esac
  mkdir -p "$BS_SSH_ETC"
  rm -f "$BS_SSH_ETC"/ssh_host_*
  bs_key_file="$BS_SSH_ETC/ssh_host_ed25519_key"
  # printf is a bash builtin: the key never becomes a process argument.
  if ! printf '%s' "$OVERBRAINER_HOST_KEY" | base64 -d >"$bs_key_file" 2>/dev/null; then
    rm -f "$bs_key_file"
    fail "OVERBRAINER_HOST_KEY is not base64"
  fi
  chmod 600 "$bs_key_file"
  if ! ssh-keygen -y -f "$bs_key_file" >"$bs_key_file.pub" 2>/dev/null; then
    rm -f "$bs_key_file" "$bs_key_file.pub"
    fail "OVERBRAINER_HOST_KEY is not an OpenSSH private key"
  fi
  case $(cat "$bs_key_file.pub") in
    'ssh-ed25519 '*) ;;
    *)
      rm -f "$bs_key_file" "$bs_key_file.pub"
      fail "OVERBRAINER_HOST_KEY is not an ed25519 key"
      ;;
  esac
  chmod 644 "$bs_key_file.pub"
  BS_HOST_KEY_OK=1
  bs_log "host key installed: $(cut -d ' ' -f 1-2 "$bs_key_file.pub" | cut -c 1-40)..."
}

# 4. The client's public key, the only one that may log in.
bs_authorized_key() {
  bs_ak=${OVERBRAINER_AUTHORIZED_KEY:-}
  case $bs_ak in
    '' | *'
'*) fail "OVERBRAINER_AUTHORIZED_KEY must be one public key line" ;;
    'ssh-'* | 'ecdsa-'*) ;;
    *) fail "OVERBRAINER_AUTHORIZED_KEY is not an OpenSSH public key" ;;
  esac
  mkdir -p "$BS_ROOT_SSH"
  chmod 700 "$BS_ROOT_SSH"
  printf '%s\n' "$bs_ak" >"$BS_ROOT_SSH/.authorized_keys.tmp"
  chmod 600 "$BS_ROOT_SSH/.authorized_keys.tmp"
  mv -f "$BS_ROOT_SSH/.authorized_keys.tmp" "$BS_ROOT_SSH/authorized_keys"
  BS_AUTH_OK=1
  bs_log "authorized_keys written"
}

# 6. job.env: what the job's shell needs of the image's environment (and, on a cluster member,
#    Runpod's cluster variables); never a key.
bs_job_env() {
  bs_workdir=${OVERBRAINER_WORKDIR:-}
  [ -n "$bs_workdir" ] || bs_workdir=$(dirname "$BS_RUN_DIR")
  bs_env_tmp="$BS_ETC/.job.env.$$"
  mkdir -p "$BS_ETC"
  (
    # The image's CUDA script may reference unset variables or fail: it only adds to the
    # environment, in this subshell, with no secret in it.
    set +eu
    unset OVERBRAINER_HOST_KEY OVERBRAINER_AUTHORIZED_KEY RUNPOD_API_KEY
    bs_cuda=${OVERBRAINER_CUDA_ENV:-/workspace/axolotl/scripts/cuda13_env.sh}
    if [ -f "$bs_cuda" ]; then
      . "$bs_cuda" >/dev/null 2>&1 </dev/null
    fi
    printf 'export PATH=%s\n' "$(bs_quote "$PATH")"
    if [ -n "${LD_LIBRARY_PATH:-}" ]; then
      printf 'export LD_LIBRARY_PATH=%s\n' "$(bs_quote "$LD_LIBRARY_PATH")"
    fi
    printf 'export HF_HOME=%s\n' "$(bs_quote "$bs_workdir/.hf-cache")"
    # On a member of an Instant Cluster, what Runpod tells it of the cluster: torchrun's launch
    # line reads them in the job's shell, which an SSH session starts without.
    for bs_v in PRIMARY_ADDR PRIMARY_PORT MASTER_ADDR MASTER_PORT NODE_ADDR NODE_RANK \
      NUM_NODES NUM_TRAINERS HOST_NODE_ADDR WORLD_SIZE; do
      eval "bs_val=\${$bs_v:-}"
      [ -z "$bs_val" ] || printf 'export %s=%s\n' "$bs_v" "$(bs_quote "$bs_val")"
    done
  ) >"$bs_env_tmp" || true
  if ! grep -q '^export HF_HOME=' "$bs_env_tmp" 2>/dev/null; then
    rm -f "$bs_env_tmp"
    fail "cannot write $BS_ETC/job.env"
  fi
  chmod 600 "$bs_env_tmp"
  mv -f "$bs_env_tmp" "$BS_ETC/job.env"
  bs_log "job.env written"
}

# 7. sshd, without the Runpod key in its environment.
bs_sshd() {
  bs_start=${OVERBRAINER_SSHD_START:-service ssh restart}
  bs_out="$BS_RUN_DIR/.pod/.sshd_start.out"
  bs_log "starting sshd: $bs_start"
  if (unset RUNPOD_API_KEY && eval "$bs_start") >"$bs_out" 2>&1 </dev/null; then
    bs_rc=0
  else
    bs_rc=$?
  fi
  while IFS= read -r bs_l || [ -n "$bs_l" ]; do
    bs_log "sshd: $bs_l"
  done <"$bs_out"
  rm -f "$bs_out"
  if [ "$bs_rc" != 0 ]; then
    BS_SSHD_FAILED=1
    fail "cannot start sshd (exit $bs_rc)"
  fi
}

bootstrap_main() {
  # Anything failing that no step checked still ends in `fail` (bash's ERR trap, kept in
  # functions by errtrace).
  set -E
  trap 'fail "unexpected error at line $LINENO"' ERR
  bs_log "bootstrap overbrainer/${OVERBRAINER_VERSION:-unknown} run=${OVERBRAINER_RUN_ID:-unknown} run_dir=${BS_RUN_DIR:-none}"
  bs_claim
  # 2. A verdict left on the volume by an earlier pod must not pass for this pod's.
  rm -f "$BS_RUN_DIR/.pod/watchdog" "$BS_RUN_DIR/.pod/bootstrap_failed"
  bs_host_key
  bs_authorized_key
  bs_write_watchdog || fail "cannot write $BS_ETC/watchdog.sh"
  bs_log "watchdog written to $BS_ETC/watchdog.sh"
  bs_job_env
  unset OVERBRAINER_HOST_KEY OVERBRAINER_AUTHORIZED_KEY
  bs_sshd
  trap - ERR
  export OVERBRAINER_RUN_DIR="$BS_RUN_DIR"
  unset OVERBRAINER_BOOT_FAILED
  bs_log "exec watchdog"
  exec bash "$BS_ETC/watchdog.sh"
}

# podScripts.ts appends `write_watchdog() { cat <<'…' <watchdog.sh> … }` and `bootstrap_main`.
