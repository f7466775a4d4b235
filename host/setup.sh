#!/usr/bin/env bash
# netprobe host set-up: the one entry point called by the README's first command and by .ci/run.
#
# Installs what the probes need from Debian 12's packages (iptables for CRIU's default network
# lock and the captured netfilter state, nftables for `nft list ruleset` in the captured state and
# the `--netns rich` content, busybox-static for the embedded rootfs, iproute2, strace, runc as the default OCI runtime,
# e2fsprogs/fuse3/qemu-utils for qcow2 images), then CRIU 4.1.1 into /opt/criu-4.1.1
# (install-criu.sh). Never writes a CRIU config file. Idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log() { printf 'setup: %s\n' "$*" >&2; }

[ "$(id -u)" = 0 ] || { log "must run as root (packages, /opt, namespaces)"; exit 3; }

PKGS=(iptables nftables busybox-static iproute2 strace runc e2fsprogs fuse3 qemu-utils util-linux
  procps curl ca-certificates xz-utils)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing: ${missing[*]}"
  flock /var/lock/netprobe-apt.lock apt-get update -qq
  mkdir -p /var/lib && touch /var/lib/netprobe-apt-updated
  DEBIAN_FRONTEND=noninteractive flock /var/lock/netprobe-apt.lock apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

bash "$here/install-criu.sh"
# Today's pins from Debian's binary packages (CRIU 4.3, runc 1.4.3 and 1.3.6, crun 1.28), each in
# its own /opt prefix with its suite's libraries.
bash "$here/install-pins.sh"

# --test-deps: also what the test suite needs beyond the probes (headless Chromium for the HTML
# report test).
if [ "${1:-}" = "--test-deps" ]; then
  bash "$here/install-test-deps.sh"
fi

for f in /etc/criu/default.conf /etc/criu/runc.conf "$HOME/.criu/default.conf"; do
  if [ -e "$f" ]; then
    log "WARNING: CRIU config file $f exists; netprobe refuses to run while it does (move it away)"
  fi
done
log "done: CRIU 4.3 at /opt/criu-4.3 (default), 4.2.1 at /opt/criu-4.2.1, 4.1.1 at /opt/criu-4.1.1; runc 1.4.3 at /opt/runc-1.4.3 (default), 1.3.6 at /opt/runc-1.3.6, $(runc --version | head -1) at $(command -v runc); crun 1.28 at /opt/crun-1.28"
log "runc 1.5.2 (the seed's pin) is not in Debian: bring its release and run host/install-runc.sh --release-dir DIR"
