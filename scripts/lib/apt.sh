# Debian packages for the scripts (sourced by scripts/test.sh and scripts/start.sh): install what
# is missing, waiting for the package manager's locks when another apt-get, dpkg or an unattended
# upgrade holds them (a newcomer's machine is often busy installing) instead of failing at once.
#
# The wait is bounded: OVERBRAINER_APT_LOCK_WAIT_S seconds in all (default 600), said in one line
# when it starts. apt-get's own DPkg::Lock::Timeout waits for dpkg's locks (lock-frontend, lock);
# `apt-get update` takes the package lists' lock (/var/lib/apt/lists/lock), which that option does
# not cover (apt 2.6 fails at once), so a run that failed on a lock is tried again until the bound.
# Needs bash; `set -euo pipefail` in the caller is fine.

apt_updated=0

# apt_get ARGS...: `apt-get ARGS` (noninteractive), waiting for its locks within the bound. The
# first try does not wait (so a held lock is known, and said, at once); the next ones let apt wait
# for dpkg's locks itself (DPkg::Lock::Timeout: the time left), and are tried again after a second
# for a lock apt does not wait for.
apt_get() {
  local wait_s="${OVERBRAINER_APT_LOCK_WAIT_S:-600}"
  local deadline_s=$(($(date +%s) + wait_s))
  local timeout_s=0 said=0 errors rc line lock held
  errors="$(mktemp)"
  while :; do
    rc=0
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$timeout_s" "$@" 2>"$errors" ||
      rc=$?
    line="$(grep -m 1 -E 'Could not get lock|Unable to (acquire|lock)' "$errors" || true)"
    if [ "$rc" -eq 0 ] || [ -z "$line" ]; then
      cat "$errors" >&2
      break
    fi
    # "Could not get lock PATH. It is held by process N (NAME)", or "... lock (PATH), is ...".
    if [[ "$line" == *'Could not get lock '* ]]; then
      lock="${line#*Could not get lock }"
      held="${lock#*. }"
      lock="${lock%%. *}"
      [[ "$held" == 'It is held by'* ]] && held=", ${held#It is }" || held=""
    else
      lock="${line#*(}"
      lock="${lock%%)*}"
      held=""
    fi
    if [ "$(date +%s)" -ge "$deadline_s" ]; then
      cat "$errors" >&2
      echo "gave up after ${wait_s} s waiting for the package manager's lock ${lock}${held}" >&2
      echo "hint: let the other install finish (or stop it) and re-run; OVERBRAINER_APT_LOCK_WAIT_S sets the wait" >&2
      break
    fi
    if [ "$said" -eq 0 ]; then
      echo "waiting up to ${wait_s} s for the package manager's lock ${lock}${held}" >&2
      said=1
    fi
    [ "$timeout_s" -eq 0 ] || sleep 1
    timeout_s=$((deadline_s - $(date +%s)))
    [ "$timeout_s" -gt 0 ] || timeout_s=1
  done
  rm -f "$errors"
  return "$rc"
}

# apt_install PACKAGES...: `apt-get update` once per script, then install without recommends.
apt_install() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages: $*; install them (as root: apt-get install -y $*) and re-run." >&2
    exit 1
  fi
  if [ "$apt_updated" -eq 0 ]; then
    apt_get update -qq
    apt_updated=1
  fi
  apt_get install -y -qq --no-install-recommends "$@"
}

# ensure_debian TEST:PACKAGE...: installs each package whose test fails. A test is a command name
# (looked up on PATH and in /usr/sbin) or a path.
ensure_debian() {
  local missing=()
  local pair check pkg
  for pair in "$@"; do
    check="${pair%%:*}"
    pkg="${pair#*:}"
    if [[ "$check" == /* ]]; then
      [ -e "$check" ] && continue
    else
      command -v "$check" >/dev/null 2>&1 && continue
      [ -x "/usr/sbin/$check" ] && continue
    fi
    [[ " ${missing[*]-} " == *" $pkg "* ]] || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing Debian packages: ${missing[*]}"
    apt_install "${missing[@]}"
  fi
}
