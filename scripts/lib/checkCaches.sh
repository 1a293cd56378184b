# shellcheck shell=bash
# The caches of lint and typecheck for `npm test` (scripts/test.sh), sourced from the clone's root.
#
# `npm run lint` and `npm run typecheck` keep their caches in .cache/checks/ (eslint's and
# prettier's keyed by each file's content, tsc's incremental state keyed by each file's hash), so
# only what changed is checked again. A fresh clone has none: restore_check_caches copies in
# eslint's and tsc's kept per machine, save_check_caches keeps the clone's afterwards, in
#   ${OVERBRAINER_TEST_CACHE:-~/.cache/overbrainer-test}/checks/
# eslint names each file by its absolute path: the kept copy holds a placeholder for the
# clone's root instead. Prettier's cannot move: it hashes each file's options, its absolute path
# among them, so a clone elsewhere missed every file (measured: 30 CPU-s with the copy, 2 CPU-s
# in the clone that wrote it); it stays the clone's own. Every tool checks its own cache (its version, its configuration,
# each file's content) and checks again whatever does not match, so a stale or foreign copy costs
# time, never a missed error. A save writes a temporary file and renames it: two clones saving at
# once each leave a whole copy.

CHECK_CACHES=(eslint tsc.tsbuildinfo tsc-media.tsbuildinfo)
CHECK_CACHE_ROOT_MARK='@@OVERBRAINER_CLONE_ROOT@@'

check_caches_kept_dir() {
  local home_dir
  home_dir="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
  echo "${OVERBRAINER_TEST_CACHE:-${XDG_CACHE_HOME:-${home_dir:-/root}/.cache}/overbrainer-test}/checks"
}

# check_cache_copy FROM TO SEARCH REPLACE: copies FROM to TO (through TO.tmp.<pid> and a rename),
# every SEARCH replaced by REPLACE.
check_cache_copy() {
  node -e '
    const fs = require("fs");
    const [from, to, search, replace] = process.argv.slice(1);
    const tmp = `${to}.tmp.${process.pid}`;
    fs.writeFileSync(tmp, fs.readFileSync(from, "utf8").split(search).join(replace));
    fs.renameSync(tmp, to);
  ' "$1" "$2" "$3" "$4"
}

restore_check_caches() {
  local kept name
  kept="$(check_caches_kept_dir)"
  mkdir -p .cache/checks
  for name in "${CHECK_CACHES[@]}"; do
    if [ -f "$kept/$name" ] && [ ! -f ".cache/checks/$name" ]; then
      check_cache_copy "$kept/$name" ".cache/checks/$name" "$CHECK_CACHE_ROOT_MARK/" "$PWD/" ||
        rm -f ".cache/checks/$name"
    fi
  done
}

save_check_caches() {
  local kept name
  kept="$(check_caches_kept_dir)"
  mkdir -p "$kept" || return 0
  for name in "${CHECK_CACHES[@]}"; do
    if [ -f ".cache/checks/$name" ]; then
      check_cache_copy ".cache/checks/$name" "$kept/$name" "$PWD/" "$CHECK_CACHE_ROOT_MARK/" || true
    fi
  done
}
