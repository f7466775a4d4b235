#!/usr/bin/env bash
# OSWorld's host-side client in a private virtual environment, for the tests that drive a
# restored slot with it (tests/gnome/osworld_client.rs) and for integrations/osworld/.
#
# Installs integrations/osworld/requirements-client.txt (desktop-env 1.0.2 and requests, every
# file pinned by sha256: pip --require-hashes --only-binary :all: --no-deps, so nothing is built
# or fetched that the file does not name) into VENV (default
# ${NETPROBE_CACHE:-/var/cache/netprobe}/osworld-client/venv), then checks that the client and
# the provider interface import. Idempotent: a venv whose recorded requirements sha256 equals
# the file's is kept (prints "cached"). Needs python3 with the venv module.
# Usage: install-osworld-client.sh [VENV]. Exit 1 when an install or the import check fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log() { printf 'install-osworld-client: %s\n' "$*" >&2; }
req=$here/../integrations/osworld/requirements-client.txt
venv=${1:-${NETPROBE_CACHE:-/var/cache/netprobe}/osworld-client/venv}
key=$(sha256sum "$req" | cut -d' ' -f1)
check() {
  "$venv/bin/python" -c 'import desktop_env.controllers.python, desktop_env.providers.base, requests' 2>/dev/null
}
if [ -f "$venv/netprobe-requirements.sha256" ] && [ "$(cat "$venv/netprobe-requirements.sha256")" = "$key" ] && check; then
  log "cached: $venv"
  exit 0
fi
mkdir -p "$(dirname "$venv")"
exec 9>"$(dirname "$venv")/.lock"
flock 9
rm -rf "$venv"
python3 -m venv "$venv" || { log "python3 -m venv failed: install python3's venv module"; exit 1; }
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-input --require-hashes \
  --only-binary :all: --no-deps -r "$req" || { log "pip install of $req failed"; exit 1; }
check || { log "the client does not import from $venv"; exit 1; }
echo "$key" >"$venv/netprobe-requirements.sha256"
log "installed: $venv ($("$venv/bin/python" -c 'import importlib.metadata as m; print("desktop-env", m.version("desktop-env"))'))"
