#!/usr/bin/env bash
# `npm start`: the demo. Installs what is missing (npm packages, Node 24 and code-server),
# builds the extension, and starts the real VS Code in the browser with examples/tiny/ opened.
# Extra arguments go to scripts/start.ts (--port N, --folder PATH). Ctrl-C stops everything.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[ -d node_modules ] || npm ci --no-audit --no-fund
bash scripts/ensure-code-server.sh
npm run --silent build
exec npx tsx scripts/start.ts "$@"
