#!/usr/bin/env bash
# netprobe test dependencies: what the test suite needs beyond host/setup.sh.
#
# Installs Debian 12's `chromium` (used headless by tests/report_html_chromium.rs to render the
# HTML report and check its DOM). Idempotent: does nothing when every package is installed, and
# runs `apt-get update` only when a package is missing. Needs root. Exit 3 when not root.
set -euo pipefail
log() { printf 'install-test-deps: %s\n' "$*" >&2; }

PKGS=(chromium)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  log "already installed: ${PKGS[*]}"
  exit 0
fi
[ "$(id -u)" = 0 ] || { log "must run as root to install: ${missing[*]}"; exit 3; }
log "installing: ${missing[*]}"
mkdir -p /tmp/np; flock /tmp/np/apt.lock apt-get update -qq
DEBIAN_FRONTEND=noninteractive flock /tmp/np/apt.lock apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
command -v chromium >/dev/null || { log "chromium still not on PATH after install"; exit 1; }
log "done: $(chromium --version 2>/dev/null || echo 'chromium installed')"
