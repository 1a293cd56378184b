#!/bin/sh
# overbrainer pod watchdog. POSIX sh: runs under bash, dash and busybox sh.
#
# The pod's last, long-lived process: the bootstrap execs it, so it lives as long as the
# container. It proves once that it can reach Runpod's API with the pod's own key (its verdict,
# which the client reads before it starts a job), then every OVERBRAINER_INTERVAL seconds it
# deletes its own pod by the first delete rule that matches, so no pod keeps billing once
# nobody needs it, even when the client is gone. It never exits while the pod should live
# (Runpod restarts a container whose main process ends); it exits 0 once its pod is deleted
# (or stopped), and on TERM/INT.
#
# Env (numbers are whole seconds; a missing or malformed number takes the default):
#   RUNPOD_POD_ID, RUNPOD_API_KEY  set by Runpod; the key is the pod-scoped one. It reaches curl
#                                  only on stdin (-H @-): never argv, a file, the log, or the env
#                                  of any child process.
#   OVERBRAINER_RUN_DIR            the run dir on the pod (<workdir>/<run-id>)
#   OVERBRAINER_DEADLINE           unix s of max_hours; absent for a kept pod (see .pod/deadline)
#   OVERBRAINER_BOOT_GRACE         1800: delete when no job started this long after start
#   OVERBRAINER_RETRIEVE_GRACE     3600: delete this long after the job ended, unretrieved
#   OVERBRAINER_KEEP_POD           1: never delete once a job started (--keep-pod)
#   OVERBRAINER_LEASE_TTL          900: a lease renewal holds the deadline off this long
#   OVERBRAINER_INTERVAL           60: seconds between ticks
#   OVERBRAINER_PROBE_TRIES        5: API tries of the startup proof
#   OVERBRAINER_PROBE_WAIT         10: seconds between those tries
#   OVERBRAINER_API_URL            https://api.runpod.io/v2
#   OVERBRAINER_VERSION            sent as User-Agent overbrainer-watchdog/<version>
#   OVERBRAINER_BOOT_FAILED        1: the bootstrap failed; its reason is in .pod/bootstrap_failed
#   OVERBRAINER_BOOT_FAILED_SSH    1: ... and it started sshd so the client can read the verdict
#   OVERBRAINER_FAIL_GRACE         180: then wait this long for the client's own delete (it reads
#                                  the verdict within its preflight limit) before deleting
#   OVERBRAINER_SNAPSHOT_LEAD      900: the deadline's snapshot is requested this long before it
#   OVERBRAINER_SNAPSHOT_WAIT      900: the deadline delete waits this long for the snapshot
#                                  requested for it, while the job runs
#   OVERBRAINER_VOLUME_DIR         where the network volume is mounted, when there is one
#   OVERBRAINER_DISK_ACT           92: disk use (%) that requests a snapshot while the lease is stale
#   OVERBRAINER_DISK_BACKSTOP      97: disk use (%) that requests one whatever the lease
#
# Files in the run dir: job.pid, exit_code, cancelled, snapshot.request, snapshot.json and, in
# .pod/, lease, retrieved, keep, deadline, snapshot_at, cost_cap_at, volume_gb, bootstrap_failed,
# cluster, cluster_delete, watchdog (the verdict) and watchdog.log: who writes each and what it means is in
# docs/RELIABILITY.md ("The run dir on the pod").
#
# The release of a pod kept at its creation (OVERBRAINER_KEEP_POD=1, no OVERBRAINER_DEADLINE):
# the client writes .pod/deadline (unix s). Read every tick, it is the deadline from then on
# (unreadable: passed), OVERBRAINER_KEEP_POD no longer holds (the keep marker still does), and a
# job that ended before the file was written counts as ended when it was (rule 6 gives the
# release its retrieve grace).
#
# Snapshot requests, every tick before the delete rules, while a job runs (started, not ended)
# and no snapshot.json exists (never after a failed bootstrap); the first that matches is written
# (log "snapshot requested reason=<r>"), unless a request exists already (it is kept):
#   a. not kept, past .pod/snapshot_at                             -> cost
#   b. not kept, past the deadline - SNAPSHOT_LEAD, lease stale    -> deadline
#   c. disk use >= DISK_BACKSTOP, or >= DISK_ACT while the lease is stale (kept or not;
#      a following client runs the finer disk policy itself)      -> disk
#      Disk use: with OVERBRAINER_VOLUME_DIR and a size in .pod/volume_gb, `du -sk` of the
#      volume dir against 94 % of that size (Runpod's quota refuses writes before the nominal
#      size); otherwise `df -P` of the run dir, the larger of used/size and used/(used+available).
#
# Delete rules, first match wins, once per tick:
#   1. the bootstrap failed                        -> bootstrap_failed (even a kept pod; after
#                                                     OVERBRAINER_FAIL_GRACE when sshd serves
#                                                     the verdict, else at once)
#   2. kept (env or .pod/keep) and a job started   -> never deleted
#   3. past .pod/cost_cap_at                       -> cost_cap (whatever the job does)
#   4. past the deadline and the lease stale       -> deadline; held while the job runs within
#                                                     SNAPSHOT_WAIT of the deadline's snapshot
#                                                     request (b, or a request pending then);
#                                                     once a snapshot ended the job, held until
#                                                     the deadline + retrieve grace (5 and 6
#                                                     still apply)
#   5. the retrieved marker exists                 -> retrieved
#   6. the job ended >= retrieve grace ago         -> abandoned
#   7. no job >= boot grace after start            -> never_started
# Delete: DELETE /pods/<id> (200/202/204/404 done), else POST /pods/<id>/action terminate, else
# stop (logged: the volume keeps billing), else `runpodctl pod delete`; all failed: next tick.
# On a member of an Instant Cluster (the probe's answer names its `cluster.id`, or the client
# wrote it to .pod/cluster) Runpod refuses the pod calls: the delete is DELETE /clusters/<id>,
# which ends every member (200/202/204/404 done). Whether a member's key may send it is not
# settled by Runpod: refused (401/403), it is logged once, written to .pod/cluster_delete, and
# tried again every tick; the run is then ended only by its client or `pod rm`.

# Every tick's own work forks nothing under bash, the shell the bootstrap execs this with: the
# clock is printf's %(%s)T, the wait a `read -t` on a FIFO nobody writes, numbers and files are
# read by builtins, and the lease's mtime is looked at (`stat`) only when a rule needs it. Under
# dash and busybox sh a tick forks `date` and `sleep` (and `df` while a job runs, every tick).

# Sets wd_now_s to the time (unix s): bash's printf builtin, else `date +%s`.
wd_now() {
  if [ "$wd_builtin_clock" = 1 ]; then
    printf -v wd_now_s '%(%s)T' -1
  else
    wd_now_s=$(date +%s)
  fi
}

# Sets wd_n to "$1" as a non-negative integer without leading zeros (shells read 010 as
# octal), or to "$2": wd_num without a subshell.
wd_numv() {
  case $1 in
    '' | *[!0-9]*) wd_n=$2 ;;
    *)
      wd_n=$1
      while :; do
        case $wd_n in
          0?*) wd_n=${wd_n#0} ;;
          *) break ;;
        esac
      done
      ;;
  esac
}

# A non-negative integer without leading zeros, or "$2" (printed: for the settings read once).
wd_num() {
  wd_numv "$1" "$2"
  printf '%s\n' "$wd_n"
}

# A log line, stamped in UTC: by bash's printf builtin where it has one (no `date` process).
wd_log() {
  if [ "${wd_builtin_clock:-0}" = 1 ]; then
    TZ=UTC0 printf -v wd_ts '%(%Y-%m-%dT%H:%M:%SZ)T' -1
  else
    wd_ts=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  fi
  wd_line="$wd_ts $*"
  printf '%s\n' "$wd_line"
  printf '%s\n' "$wd_line" >>"$WD_LOG" 2>/dev/null
}

# Sets wd_m to the mtime (unix s) of "$1", or to nothing: GNU and busybox stat know -c %Y;
# date -r is the fallback.
wd_mtime() {
  wd_m=$(stat -c %Y "$1" 2>/dev/null) || wd_m=$(date -r "$1" +%s 2>/dev/null) || wd_m=
  case $wd_m in
    '' | *[!0-9]*) wd_m= ;;
  esac
}

# A sleep the TERM/INT trap can interrupt (a foreground sleep would delay it to its end). Under
# bash, a `read -t` on fd 9, a FIFO held open for reading and writing and never written, so
# the read always times out (see the main part); else a `sleep` process.
wd_sleep() {
  [ "$1" -gt 0 ] 2>/dev/null || return 0
  if [ "$wd_builtin_wait" = 1 ]; then
    read -r -t "$1" wd_x <&9
    [ $? -gt 128 ] && return 0
    # Not a timeout (the FIFO gave data or an end): never again, `sleep` from now on.
    wd_builtin_wait=0
  fi
  sleep "$1" &
  wd_sleeper=$!
  wait "$wd_sleeper" 2>/dev/null
  wd_sleeper=
}

wd_stop() {
  trap '' TERM INT
  [ -n "${wd_sleeper:-}" ] && kill "$wd_sleeper" 2>/dev/null
  wd_log "stopping"
  exit 0
}

# wd_http METHOD PATH [JSON]: prints the HTTP status, 000 when nothing answered. The key goes
# to curl on stdin only (printf is a builtin in every shell this runs under, so it never shows
# up as an argument of a process); redirects are not followed.
wd_http() {
  if [ -n "${3:-}" ]; then
    wd_c=$(printf 'Authorization: Bearer %s\n' "$wd_key" |
      curl -sS -o /dev/null -w '%{http_code}' --connect-timeout 10 --max-time 30 \
        -A "$WD_UA" -H @- -H 'Content-Type: application/json' -X "$1" --data "$3" \
        "$WD_API$2" 2>/dev/null)
  else
    wd_c=$(printf 'Authorization: Bearer %s\n' "$wd_key" |
      curl -sS -o /dev/null -w '%{http_code}' --connect-timeout 10 --max-time 30 \
        -A "$WD_UA" -H @- -X "$1" "$WD_API$2" 2>/dev/null)
  fi
  case $wd_c in
    [0-9][0-9][0-9]) printf '%s\n' "$wd_c" ;;
    *) printf '000\n' ;;
  esac
}

# wd_get PATH: sets wd_code (as wd_http) and wd_body, the answer's body (kept in this shell
# only: never written to a file or the log).
wd_get() {
  wd_out=$(printf 'Authorization: Bearer %s\n' "$wd_key" |
    curl -sS -w ' %{http_code}' --connect-timeout 10 --max-time 30 \
      -A "$WD_UA" -H @- "$WD_API$1" 2>/dev/null)
  wd_code=${wd_out##* }
  wd_body=${wd_out% *}
  case $wd_code in
    [0-9][0-9][0-9]) ;;
    *) wd_code=000 ;;
  esac
}

# A cluster ID as a path segment allows it, or nothing.
wd_cluster_id() {
  case $1 in
    '' | *[!A-Za-z0-9_-]*) ;;
    *) printf '%s\n' "$1" ;;
  esac
}

# The cluster this pod is a member of: `cluster.id` of the probe's answer (a pod's `cluster`
# object holds no nested object), else .pod/cluster (the client writes it once ready).
wd_find_cluster() {
  [ -n "$wd_cluster" ] && return 0
  wd_raw=$(printf '%s' "${wd_body:-}" | tr -d '\r\n' |
    sed -n 's/.*"cluster"[[:space:]]*:[[:space:]]*{[^}]*"id"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p')
  wd_body=
  if [ -z "$wd_raw" ] && [ -f "$WD_CLUSTER_FILE" ]; then
    read -r wd_raw <"$WD_CLUSTER_FILE" 2>/dev/null
  fi
  wd_cluster=$(wd_cluster_id "$wd_raw")
  [ -n "$wd_cluster" ] && wd_log "member of cluster $wd_cluster: its delete is DELETE /clusters/$wd_cluster"
  return 0
}

wd_verdict() {
  wd_tmp="$WD_VERDICT.tmp.$$"
  if printf '%s\n' "$1" >"$wd_tmp" 2>/dev/null && mv -f "$wd_tmp" "$WD_VERDICT" 2>/dev/null; then
    wd_log "verdict $1"
  else
    rm -f "$wd_tmp" 2>/dev/null
    wd_log "verdict $1 (cannot write $WD_VERDICT)"
  fi
}

# The startup proof: sets wd_result to the verdict.
wd_probe() {
  if [ -z "$wd_key" ] || [ -z "$wd_pod" ]; then
    wd_result="failed missing_key"
    return
  fi
  if ! command -v curl >/dev/null 2>&1; then
    wd_result="failed no_curl"
    return
  fi
  wd_try=1
  while :; do
    wd_get "/pods/$wd_pod"
    wd_log "probe GET /pods/$wd_pod $wd_code (try $wd_try/$WD_PROBE_TRIES)"
    case $wd_code in
      200)
        wd_find_cluster
        wd_result=ready
        return
        ;;
      000 | 408 | 429 | 5??)
        if [ "$wd_try" -ge "$WD_PROBE_TRIES" ]; then
          if [ "$wd_code" = 000 ]; then wd_result="failed unreachable"; else wd_result="failed http_$wd_code"; fi
          return
        fi
        ;;
      *)
        wd_result="failed http_$wd_code"
        return
        ;;
    esac
    wd_try=$((wd_try + 1))
    wd_sleep "$WD_PROBE_WAIT"
  done
}

wd_deleted() {
  wd_log "deleted"
  exit 0
}

# Deletes the pod for reason "$1"; exits 0 once it is gone (or stopped), returns when every
# way failed (the next tick tries again).
wd_delete() {
  wd_log "delete reason=$1"
  wd_find_cluster
  if [ -n "$wd_cluster" ]; then
    wd_delete_cluster
    return
  fi
  if [ -n "$wd_key" ] && [ -n "$wd_pod" ] && command -v curl >/dev/null 2>&1; then
    wd_code=$(wd_http DELETE "/pods/$wd_pod")
    wd_log "DELETE $wd_code"
    case $wd_code in 200 | 202 | 204 | 404) wd_deleted ;; esac
    wd_code=$(wd_http POST "/pods/$wd_pod/action" '{"action":"terminate"}')
    wd_log "terminate $wd_code"
    case $wd_code in 200 | 202 | 204 | 404) wd_deleted ;; esac
    wd_code=$(wd_http POST "/pods/$wd_pod/action" '{"action":"stop"}')
    wd_log "stop $wd_code"
    case $wd_code in
      200 | 202 | 204)
        wd_log "stopped, volume keeps billing"
        exit 0
        ;;
    esac
  fi
  if [ -n "$wd_pod" ] && command -v runpodctl >/dev/null 2>&1; then
    # runpodctl reads the key from its env: a child's env, never its arguments.
    if [ -n "$wd_key" ]; then
      RUNPOD_API_KEY=$wd_key runpodctl pod delete "$wd_pod" >/dev/null 2>&1
    else
      runpodctl pod delete "$wd_pod" >/dev/null 2>&1
    fi
    wd_rc=$?
    wd_log "runpodctl pod delete exit $wd_rc"
    [ "$wd_rc" = 0 ] && wd_deleted
  fi
  wd_log "delete failed, retrying in ${WD_INTERVAL}s"
}

# A member's delete: its whole cluster (the pod calls refuse a member); see the header.
wd_delete_cluster() {
  if [ -n "$wd_key" ] && command -v curl >/dev/null 2>&1; then
    wd_code=$(wd_http DELETE "/clusters/$wd_cluster")
    wd_log "DELETE /clusters/$wd_cluster $wd_code"
    case $wd_code in
      200 | 202 | 204 | 404) wd_deleted ;;
      401 | 403)
        if [ "$wd_cluster_refused" != 1 ]; then
          wd_cluster_refused=1
          printf 'refused http_%s\n' "$wd_code" >"$WD_RUN/.pod/cluster_delete" 2>/dev/null
          wd_log "this member's key may not delete its cluster (http_$wd_code): only the run's client (its deadline, cost cap and lease) or pod rm can end it"
        fi
        ;;
    esac
  fi
  wd_log "cluster delete failed, retrying in ${WD_INTERVAL}s"
}

# Sets wd_n to the first whole number on the first line of "$1", or to nothing.
wd_read_num() {
  wd_raw=
  [ -f "$1" ] && read -r wd_raw <"$1" 2>/dev/null
  wd_numv "$wd_raw" ""
}

# Disk use: sets wd_use and wd_cap (the same unit; compare wd_use * 100 with wd_cap * percent)
# and wd_where, or leaves wd_cap empty when it cannot be measured.
wd_disk() {
  wd_use=
  wd_cap=
  wd_where=
  wd_gb=
  if [ -n "$WD_VOLUME_DIR" ]; then
    wd_read_num "$WD_VOLUME_GB"
    wd_gb=$wd_n
  fi
  if [ -n "$wd_gb" ] && [ "$wd_gb" -gt 0 ]; then
    # du -sk against 94 % of the volume's GB (10^9 bytes) in KiB: gb * 10^9 * 94 / (100 * 1024).
    wd_du=$(du -sk "$WD_VOLUME_DIR" 2>/dev/null | tail -n 1)
    wd_numv "${wd_du%%[!0-9]*}" ""
    wd_use=$wd_n
    [ -n "$wd_use" ] || return 0
    wd_cap=$((wd_gb * 1000000000 * 94 / 102400))
    wd_where="volume $WD_VOLUME_DIR (du, 94% of ${wd_gb} GB)"
    return 0
  fi
  # df -P: "<fs> <size> <used> <available> <n>% <mount>"; the fs name or the mount point may
  # hold blanks, so the numbers are the first three numeric fields before a "<n>%" one.
  # Its last line, without a `tail` process.
  wd_df=$(df -P "$WD_RUN" 2>/dev/null)
  wd_df=${wd_df##*"$WD_NL"}
  set -f
  # shellcheck disable=SC2086
  set -- $wd_df
  set +f
  while [ $# -ge 4 ]; do
    case $2$3$4 in
      '' | *[!0-9]*) ;;
      *)
        case $5 in
          *%)
            wd_numv "$2" ""
            wd_size=$wd_n
            wd_numv "$3" ""
            wd_use=$wd_n
            wd_numv "$4" ""
            wd_free=$wd_n
            # What a writer can fill: the size, or less on a filesystem that reserves blocks.
            wd_cap=$wd_size
            if [ $((wd_use + wd_free)) -lt "$wd_cap" ]; then wd_cap=$((wd_use + wd_free)); fi
            [ "$wd_cap" -gt 0 ] || wd_cap=
            wd_where="$WD_RUN (df)"
            return 0
            ;;
        esac
        ;;
    esac
    shift
  done
  wd_use=
  return 0
}

# Writes the snapshot request "$1" as the client does (temp file, then ln: never replaces one).
wd_request() {
  wd_tmp="$WD_RUN/.snapshot.request.$$.wd.tmp"
  if printf '%s\n' "$1" >"$wd_tmp" 2>/dev/null && ln "$wd_tmp" "$WD_REQUEST" 2>/dev/null; then
    rm -f "$wd_tmp" 2>/dev/null
    wd_req_noted=1
    wd_log "snapshot requested reason=$1"
    return 0
  fi
  rm -f "$wd_tmp" 2>/dev/null
  [ -f "$WD_REQUEST" ] && return 0
  [ "$wd_req_failed" = 1 ] || wd_log "cannot write $WD_REQUEST (reason=$1): retrying next tick"
  wd_req_failed=1
  return 1
}

# The snapshot requests (a, b, c of the header), before the delete rules.
wd_snapshot() {
  [ "$WD_BOOT_FAILED" = 1 ] && return 0
  [ "$wd_started" = 1 ] && [ "$wd_ended" = 0 ] || return 0
  [ -f "$WD_SNAPSHOT_JSON" ] && return 0
  wd_reason=
  wd_for_deadline=0
  # a. cost: past .pod/snapshot_at.
  wd_read_num "$WD_SNAPSHOT_AT"
  wd_snap_at=$wd_n
  if [ -n "$wd_snap_at" ] && [ "$wd_t" -ge "$wd_snap_at" ]; then
    if [ "$wd_kept" = 1 ]; then
      [ "$wd_kept_cost_noted" = 1 ] || wd_log "no snapshot for reason=cost: the pod is kept"
      wd_kept_cost_noted=1
    else
      wd_reason=cost
    fi
  fi
  # b. deadline: its lead reached and nobody renews the lease.
  if [ -n "$wd_deadline" ] && [ $((wd_t + WD_SNAPSHOT_LEAD)) -ge "$wd_deadline" ] &&
    wd_lease && [ "$wd_fresh" = 0 ]; then
    if [ "$wd_kept" = 1 ]; then
      [ "$wd_kept_deadline_noted" = 1 ] || wd_log "no snapshot for reason=deadline: the pod is kept"
      wd_kept_deadline_noted=1
    else
      wd_for_deadline=1
      [ -n "$wd_reason" ] || wd_reason=deadline
    fi
  fi
  if [ -f "$WD_REQUEST" ]; then
    if [ "$wd_req_noted" = 0 ]; then
      wd_raw=
      read -r wd_raw <"$WD_REQUEST" 2>/dev/null
      case $wd_raw in requested | deadline | cost | disk) ;; *) wd_raw=requested ;; esac
      wd_log "snapshot already requested reason=$wd_raw: kept"
      wd_req_noted=1
    fi
  else
    # c. disk, only measured while no request exists.
    if [ -z "$wd_reason" ]; then
      wd_disk
      if [ -n "$wd_cap" ]; then
        wd_pct=$((wd_use * 100 / wd_cap))
        if [ $((wd_use * 100)) -ge $((wd_cap * WD_DISK_BACKSTOP)) ]; then
          wd_reason=disk
        elif [ $((wd_use * 100)) -ge $((wd_cap * WD_DISK_ACT)) ]; then
          wd_lease
          if [ "$wd_fresh" = 0 ]; then
            wd_reason=disk
          elif [ "$wd_disk_noted" != 1 ]; then
            wd_log "disk ${wd_pct}% used: $wd_where; the following client acts on it (backstop at ${WD_DISK_BACKSTOP}%)"
            wd_disk_noted=1
          fi
        else
          wd_disk_noted=0
        fi
        [ "$wd_reason" = disk ] && wd_log "disk ${wd_pct}% used: $wd_where"
      elif [ "$wd_disk_failed" != 1 ]; then
        wd_log "cannot measure the disk use of ${WD_VOLUME_DIR:-$WD_RUN}: no disk rule this tick"
        wd_disk_failed=1
      fi
    fi
    [ -n "$wd_reason" ] || return 0
    wd_request "$wd_reason" || return 0
  fi
  # The deadline delete waits for the snapshot asked for then (written now or pending).
  if [ "$wd_for_deadline" = 1 ] && [ -z "$wd_snap_deadline_at" ]; then
    wd_snap_deadline_at=$wd_t
  fi
  return 0
}

# Logs "$2" once while the deadline is held for the reason "$1".
wd_hold() {
  [ "$wd_held" = "$1" ] || wd_log "$2"
  wd_held=$1
}

# Sets wd_fresh once a tick, when a rule asks: 1 while .pod/lease was touched less than the TTL
# ago, else 0. Only the rules that need it look, so a tick with no deadline near and the disk
# not nearly full starts no `stat`.
wd_lease() {
  [ -n "$wd_fresh" ] && return 0
  wd_fresh=0
  [ -f "$WD_LEASE" ] || return 0
  wd_mtime "$WD_LEASE"
  if [ -n "$wd_m" ] && [ $((wd_t - wd_m)) -lt "$WD_LEASE_TTL" ]; then wd_fresh=1; fi
  return 0
}

wd_tick() {
  wd_now
  wd_t=$wd_now_s
  case $wd_t in '' | *[!0-9]*) wd_t=0 ;; esac

  # The job: started = job.pid; ended = exit_code or cancelled, or its process group gone.
  wd_started=0
  wd_ended=0
  if [ -f "$WD_RUN/job.pid" ]; then
    wd_started=1
    wd_raw=
    read -r wd_raw <"$WD_RUN/job.pid" 2>/dev/null
    wd_numv "$wd_raw" ""
    wd_pid=$wd_n
    if [ "$wd_pid" != "$wd_seen_pid" ] || [ "$wd_seen_job" = 0 ]; then
      wd_seen_job=1
      wd_seen_pid=$wd_pid
      wd_ended_at=
      wd_log "job started${wd_pid:+ pid=$wd_pid}"
    fi
    if [ -f "$WD_RUN/exit_code" ]; then
      wd_ended=1
      wd_end_file="$WD_RUN/exit_code"
    elif [ -f "$WD_RUN/cancelled" ]; then
      wd_ended=1
      wd_end_file="$WD_RUN/cancelled"
    elif [ -n "$wd_pid" ] && [ "$wd_pid" -gt 1 ] && ! kill -0 "-$wd_pid" 2>/dev/null; then
      # pid 0/1 are never a job's group: only a real group counts as gone.
      wd_ended=1
      wd_end_file=
    fi
    if [ "$wd_ended" = 1 ] && [ -z "$wd_ended_at" ]; then
      if [ -n "$wd_end_file" ]; then
        wd_mtime "$wd_end_file"
        wd_ended_at=$wd_m
      fi
      [ -n "$wd_ended_at" ] || wd_ended_at=$wd_t
      wd_log "job ended"
    fi
    [ "$wd_ended" = 0 ] && wd_ended_at=
  fi

  # The lease: looked at by wd_lease when a rule needs it.
  wd_fresh=

  # A release: its deadline replaces the env's and lifts the env's keep (see the header).
  wd_deadline=$WD_DEADLINE
  wd_kept=$WD_KEEP
  if [ -f "$WD_DEADLINE_FILE" ]; then
    wd_read_num "$WD_DEADLINE_FILE"
    wd_deadline=$wd_n
    [ -n "$wd_deadline" ] || wd_deadline=0
    wd_kept=0
    if [ "$wd_released" != "$wd_deadline" ]; then
      wd_log "released: deadline=$wd_deadline (.pod/deadline)"
      wd_released=$wd_deadline
    fi
    if [ "$wd_ended" = 1 ]; then
      wd_mtime "$WD_DEADLINE_FILE"
      if [ -n "$wd_m" ] && [ "$wd_ended_at" -lt "$wd_m" ]; then wd_ended_at=$wd_m; fi
    fi
  fi
  if [ -f "$WD_KEEP_MARKER" ]; then
    wd_kept=1
    [ "$wd_keep_marker" = 1 ] || wd_log "keep marker seen: the pod is kept"
    wd_keep_marker=1
  elif [ "$wd_keep_marker" = 1 ]; then
    wd_keep_marker=0
    wd_log "keep marker removed: the pod is released"
  fi

  wd_snapshot

  # 1. bootstrap failed: delete, even a kept pod; when sshd serves the verdict, once the client
  # had its preflight limit to read it and delete the pod itself.
  if [ "$WD_BOOT_FAILED" = 1 ]; then
    if [ "$WD_FAIL_SSH" = 1 ] && [ $((wd_t - WD_START)) -lt "$WD_FAIL_GRACE" ]; then
      [ "$wd_fail_noted" = 1 ] || wd_log "bootstrap failed: sshd serves the verdict to the client; deleting in ${WD_FAIL_GRACE}s unless it does"
      wd_fail_noted=1
      return
    fi
    wd_delete bootstrap_failed
    return
  fi
  # 2. kept with a job: never.
  if [ "$wd_kept" = 1 ] && [ "$wd_started" = 1 ]; then
    return
  fi
  # 3. cost cap.
  if [ -f "$WD_COST_CAP" ]; then
    wd_raw=
    read -r wd_raw <"$WD_COST_CAP" 2>/dev/null
    wd_numv "$wd_raw" ""
    wd_cap=$wd_n
    if [ -n "$wd_cap" ] && [ "$wd_t" -ge "$wd_cap" ]; then
      wd_delete cost_cap
      return
    fi
  fi
  # 4. deadline, unless the client holds the lease, the job is saving the snapshot asked for
  # the deadline, or a snapshot ended the job (then it waits for its retrieval).
  if [ -n "$wd_deadline" ] && [ "$wd_t" -ge "$wd_deadline" ]; then
    wd_lease
    if [ "$wd_fresh" = 1 ]; then
      wd_hold "lease" "deadline passed, lease held by the client"
    elif [ "$wd_ended" = 1 ] && [ -f "$WD_SNAPSHOT_JSON" ]; then
      if [ "$wd_t" -ge $((wd_deadline + WD_RETRIEVE_GRACE)) ]; then
        wd_held=
        wd_delete deadline
        return
      fi
      wd_hold "snapshot_taken" "deadline passed, the job ended with a snapshot: kept for its retrieval until $((wd_deadline + WD_RETRIEVE_GRACE))"
    elif [ "$wd_ended" = 0 ] && [ -n "$wd_snap_deadline_at" ] &&
      [ $((wd_t - wd_snap_deadline_at)) -lt "$WD_SNAPSHOT_WAIT" ]; then
      wd_hold "snapshot_wait" "deadline passed, waiting for the snapshot until $((wd_snap_deadline_at + WD_SNAPSHOT_WAIT))"
    else
      wd_held=
      wd_delete deadline
      return
    fi
  else
    wd_held=
  fi
  # 5. retrieved: at once.
  if [ -f "$WD_RETRIEVED" ]; then
    wd_log "retrieved marker seen"
    wd_delete retrieved
    return
  fi
  # 6. abandoned: ended, unretrieved for the retrieve grace.
  if [ "$wd_ended" = 1 ] && [ $((wd_t - wd_ended_at)) -ge "$WD_RETRIEVE_GRACE" ]; then
    wd_delete abandoned
    return
  fi
  # 7. never started within the boot grace (a job seen once counts as started for good: a
  # relaunch removes job.pid for a moment).
  if [ "$wd_seen_job" = 0 ] && [ $((wd_t - WD_START)) -ge "$WD_BOOT_GRACE" ]; then
    wd_delete never_started
    return
  fi
}

# --- main -------------------------------------------------------------------------------

# The key lives in an unexported shell variable from here on: no child process inherits it.
wd_key=${RUNPOD_API_KEY:-}
unset RUNPOD_API_KEY
wd_pod=${RUNPOD_POD_ID:-}
case $wd_pod in *[!A-Za-z0-9_-]*) wd_pod= ;; esac

WD_INTERVAL=$(wd_num "${OVERBRAINER_INTERVAL:-}" 60)
[ "$WD_INTERVAL" -ge 1 ] || WD_INTERVAL=1
WD_PROBE_TRIES=$(wd_num "${OVERBRAINER_PROBE_TRIES:-}" 5)
[ "$WD_PROBE_TRIES" -ge 1 ] || WD_PROBE_TRIES=1
WD_PROBE_WAIT=$(wd_num "${OVERBRAINER_PROBE_WAIT:-}" 10)
WD_BOOT_GRACE=$(wd_num "${OVERBRAINER_BOOT_GRACE:-}" 1800)
WD_RETRIEVE_GRACE=$(wd_num "${OVERBRAINER_RETRIEVE_GRACE:-}" 3600)
WD_LEASE_TTL=$(wd_num "${OVERBRAINER_LEASE_TTL:-900}" 900)
WD_KEEP=0
[ "${OVERBRAINER_KEEP_POD:-0}" = 1 ] && WD_KEEP=1
WD_DEADLINE=
wd_deadline_note=
if [ -n "${OVERBRAINER_DEADLINE:-}" ]; then
  WD_DEADLINE=$(wd_num "$OVERBRAINER_DEADLINE" "")
  if [ -z "$WD_DEADLINE" ]; then
    # A deadline that cannot be read must not keep a pod forever: it counts as passed.
    WD_DEADLINE=0
    wd_deadline_note=" (OVERBRAINER_DEADLINE unreadable: treated as passed)"
  fi
fi
WD_SNAPSHOT_LEAD=$(wd_num "${OVERBRAINER_SNAPSHOT_LEAD:-}" 900)
WD_SNAPSHOT_WAIT=$(wd_num "${OVERBRAINER_SNAPSHOT_WAIT:-}" 900)
WD_DISK_ACT=$(wd_num "${OVERBRAINER_DISK_ACT:-}" 92)
WD_DISK_BACKSTOP=$(wd_num "${OVERBRAINER_DISK_BACKSTOP:-}" 97)
WD_VOLUME_DIR=${OVERBRAINER_VOLUME_DIR:-}
WD_VOLUME_DIR=${WD_VOLUME_DIR%/}
WD_API=${OVERBRAINER_API_URL:-https://api.runpod.io/v2}
WD_API=${WD_API%/}
WD_VERSION=${OVERBRAINER_VERSION:-unknown}
WD_UA="overbrainer-watchdog/$WD_VERSION"

WD_BOOT_FAILED=0
[ "${OVERBRAINER_BOOT_FAILED:-0}" = 1 ] && WD_BOOT_FAILED=1
WD_FAIL_SSH=0
[ "${OVERBRAINER_BOOT_FAILED_SSH:-0}" = 1 ] && WD_FAIL_SSH=1
WD_FAIL_GRACE=$(wd_num "${OVERBRAINER_FAIL_GRACE:-}" 180)
wd_fail_noted=0
WD_RUN=${OVERBRAINER_RUN_DIR:-}
wd_boot_reason=
if [ -z "$WD_RUN" ]; then
  # Without its run dir the pod can run no job: the same as a failed bootstrap.
  WD_RUN=/root/overbrainer-refused-run
  WD_BOOT_FAILED=1
  wd_boot_reason="missing OVERBRAINER_RUN_DIR"
fi
WD_RUN=${WD_RUN%/}
mkdir -p "$WD_RUN/.pod" 2>/dev/null
WD_LOG="$WD_RUN/.pod/watchdog.log"
WD_VERDICT="$WD_RUN/.pod/watchdog"
WD_LEASE="$WD_RUN/.pod/lease"
WD_RETRIEVED="$WD_RUN/.pod/retrieved"
WD_KEEP_MARKER="$WD_RUN/.pod/keep"
WD_DEADLINE_FILE="$WD_RUN/.pod/deadline"
WD_COST_CAP="$WD_RUN/.pod/cost_cap_at"
WD_SNAPSHOT_AT="$WD_RUN/.pod/snapshot_at"
WD_VOLUME_GB="$WD_RUN/.pod/volume_gb"
WD_REQUEST="$WD_RUN/snapshot.request"
WD_SNAPSHOT_JSON="$WD_RUN/snapshot.json"
WD_CLUSTER_FILE="$WD_RUN/.pod/cluster"
wd_cluster=
wd_cluster_refused=0
wd_body=

wd_sleeper=
wd_seen_job=0
wd_seen_pid=
wd_ended_at=
wd_held=
wd_keep_marker=0
wd_released=
wd_deadline=$WD_DEADLINE
wd_snap_deadline_at=
wd_req_noted=0
wd_req_failed=0
wd_kept_cost_noted=0
wd_kept_deadline_noted=0
wd_disk_noted=0
wd_disk_failed=0
trap wd_stop TERM INT

# The clock and the wait without a process (see the top), where the shell has them.
wd_builtin_clock=0
wd_now_s=
printf -v wd_now_s '%(%s)T' -1 >/dev/null 2>&1
case $wd_now_s in '' | *[!0-9]*) ;; *) wd_builtin_clock=1 ;; esac
wd_builtin_wait=0
if [ -n "${BASH_VERSION:-}" ]; then
  wd_fifo="$WD_RUN/.pod/.watchdog.wait.$$"
  # Opened for reading and writing, the FIFO never ends and nobody writes it; the name goes at
  # once, fd 9 stays (a name taken already fails mkfifo: then `sleep`). (The open is tried in a subshell first: a failed `exec` redirection
  # would end a shell in POSIX mode.)
  if mkfifo -m 600 "$wd_fifo" 2>/dev/null && (exec 9<>"$wd_fifo") 2>/dev/null; then
    exec 9<>"$wd_fifo"
    wd_builtin_wait=1
  fi
  rm -f "$wd_fifo" 2>/dev/null
fi
WD_NL='
'

wd_now
WD_START=$wd_now_s
case $WD_START in '' | *[!0-9]*) WD_START=0 ;; esac
wd_log "start $WD_UA pod=${wd_pod:-none} run_dir=$WD_RUN interval=${WD_INTERVAL}s deadline=${WD_DEADLINE:-none}$wd_deadline_note keep=$WD_KEEP lease_ttl=${WD_LEASE_TTL}s boot_grace=${WD_BOOT_GRACE}s retrieve_grace=${WD_RETRIEVE_GRACE}s snapshot_lead=${WD_SNAPSHOT_LEAD}s snapshot_wait=${WD_SNAPSHOT_WAIT}s disk=${WD_DISK_ACT}%/${WD_DISK_BACKSTOP}%${WD_VOLUME_DIR:+ volume=$WD_VOLUME_DIR} api=$WD_API"

if [ "$WD_BOOT_FAILED" = 1 ]; then
  if [ -z "$wd_boot_reason" ] && [ -f "$WD_RUN/.pod/bootstrap_failed" ]; then
    wd_boot_reason=$(head -n 1 "$WD_RUN/.pod/bootstrap_failed" 2>/dev/null | tr -cd ' -~' | cut -c 1-200)
  fi
  wd_verdict "failed bootstrap: ${wd_boot_reason:-unknown}"
else
  wd_probe
  wd_verdict "$wd_result"
fi

while :; do
  wd_tick
  wd_sleep "$WD_INTERVAL"
done
