# shellcheck shell=bash
# The extension's npm packages for `npm test` (scripts/test.sh), sourced from the clone's root.
#
# ensure_npm_deps: nothing when node_modules holds exactly what package-lock.json pins; else a
# copy of node_modules kept once per machine for that lockfile, Node's version and the platform
#   ${OVERBRAINER_TEST_CACHE:-~/.cache/overbrainer-test}/node_modules-<fingerprint>/node_modules
# (cp -a: about 3 CPU-s and 9 s for the 250 MB); else `npm ci`, whose result is then kept there
# for the next clone. A fresh clone on a warm machine thus skips npm ci (about 45 CPU-s and 80 s,
# most of it unpacking 17,000 files and compiling ssh2's native addons). The copy is the clone's
# own (no file is shared with the cache), and is checked against the lockfile like any install;
# one that does not match is removed and npm ci runs. Two clones saving at once take turns on a
# lock (flock); a copy is complete only once it has its stamp.

# True when node_modules holds exactly what package-lock.json pins (npm's hidden lockfile is
# written by every install, so comparing the two finds a stale or partial install).
npm_deps_current() {
  [ -f node_modules/.package-lock.json ] || return 1
  node -e '
    const fs = require("fs");
    const want = JSON.parse(fs.readFileSync("package-lock.json", "utf8")).packages;
    const have = JSON.parse(fs.readFileSync("node_modules/.package-lock.json", "utf8")).packages;
    for (const [name, entry] of Object.entries(want)) {
      if (name === "" || entry.optional || entry.extraneous) continue;
      if (!have[name] || have[name].version !== entry.version) process.exit(1);
    }
  '
}

# The cache folder for this lockfile, Node version and platform (native addons are built for
# one Node ABI).
npm_deps_cache_dir() {
  local home_dir root fingerprint
  home_dir="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
  root="${OVERBRAINER_TEST_CACHE:-${XDG_CACHE_HOME:-${home_dir:-/root}/.cache}/overbrainer-test}"
  fingerprint="$(
    {
      cat package-lock.json
      node -p 'process.version + " " + process.platform + " " + process.arch'
    } | sha256sum | cut -c1-16
  )"
  echo "$root/node_modules-$fingerprint"
}

# --prefer-offline: what npm's cache holds is taken as it is (a package-lock.json pins every
# tarball by its hash), so a warm machine does not ask the registry again for the 440 package
# documents and tarballs of the tree (on 2026-12-07, two fresh clones one after the other: 84 s
# and 78 s against 99 s and 95 s without it, 45 CPU-s against 53); what the cache lacks is
# fetched as before.
ensure_npm_deps() {
  npm_deps_current && return 0
  local cache
  cache="$(npm_deps_cache_dir)"
  if [ -f "$cache/complete" ]; then
    echo "node_modules is missing or differs from package-lock.json: copying the one kept in $cache"
    rm -rf node_modules
    if cp -a "$cache/node_modules" node_modules && npm_deps_current; then return 0; fi
    echo "the kept node_modules does not match package-lock.json: npm ci"
    rm -f "$cache/complete"
  else
    echo "node_modules is missing or differs from package-lock.json: npm ci"
  fi
  npm ci --no-audit --no-fund --prefer-offline
  npm_deps_keep "$cache"
}

# How many kept copies (250 MB each) a machine holds: the newest, one per lockfile.
NPM_DEPS_KEPT_MAX=3

# Keeps a copy of the fresh node_modules in "$1" (once; a failure to keep it fails nothing), and
# removes the oldest copies beyond NPM_DEPS_KEPT_MAX (a clone copying one meanwhile falls back to
# npm ci).
npm_deps_keep() {
  local cache="$1"
  mkdir -p "$(dirname "$cache")" || return 0
  (
    flock 9
    [ -f "$cache/complete" ] && exit 0
    rm -rf "$cache"
    mkdir -p "$cache" &&
      cp -a node_modules "$cache/node_modules" &&
      touch "$cache/complete" &&
      echo "node_modules kept in $cache for the next clone"
  ) 9>"$cache.lock" || echo "could not keep node_modules in $cache (the next clone runs npm ci)"
  local old
  # shellcheck disable=SC2012 # names are node_modules-<hex>: ls -t sorts them by age
  for old in $(ls -1td "$(dirname "$cache")"/node_modules-*/ 2>/dev/null | tail -n +$((NPM_DEPS_KEPT_MAX + 1))); do
    rm -rf "${old%/}" "${old%/}.lock"
  done
}
