#!/usr/bin/env bash
# `npm start`: the demo. Installs what is missing (npm packages; Debian packages the emulated pods
# and code-server need; Node 24 and code-server), builds the extension, then scripts/start.ts
# starts the local Runpod emulator and the real VS Code in the browser on a copy of examples/tiny/
# and prints the URL. Ctrl-C stops everything, emulated pods included.
#
# `npm start -- --check` runs the same demo unattended in Chromium and exits 0 when it worked.
# Other arguments go to scripts/start.ts (--port N, --dir D, --timing-scale F, --boot-ms MS,
# --vsix FILE to run the packaged extension instead of the build).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

check=0
for arg in "$@"; do
  [ "$arg" = "--check" ] && check=1
done

# Debian packages: sshd, curl and python3 run inside every emulated pod (the bootstrap, the
# watchdog, the example trainer), util-linux gives the pods their namespaces, code-server's
# native modules build with libkrb5-dev, g++ and make; --check drives Debian's Chromium.
wanted=(sshd:openssh-server curl:curl python3:python3 unshare:util-linux setpriv:util-linux
  /usr/include/gssapi/gssapi_krb5.h:libkrb5-dev g++:g++ make:make)
[ "$check" -eq 1 ] && wanted+=(chromium:chromium)
# Installs what is missing, waiting (bounded) for the package manager's lock another install holds.
# shellcheck source=scripts/lib/apt.sh
source "$ROOT/scripts/lib/apt.sh"
ensure_debian "${wanted[@]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "the Runpod emulator's pods need root (PID and mount namespaces): run npm start as root" >&2
  exit 1
fi
# sshd refuses to start without its privilege-separation directory.
mkdir -p /run/sshd

[ -f node_modules/.package-lock.json ] || npm ci --no-audit --no-fund
bash scripts/ensure-code-server.sh
npm run --silent build
# node itself (not npx/tsx's wrapper) so a signal reaches the one process that cleans up.
exec node --import tsx scripts/start.ts "$@"
