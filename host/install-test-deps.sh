#!/usr/bin/env bash
# netprobe test dependencies: what the test suite needs beyond host/setup.sh.
#
# Installs Debian 12's `chromium` (used headless by tests/report/report_html_chromium.rs to render the
# HTML report and check its DOM), `xvfb` (the host X server of tests/desktop/x11_xvfb.rs), the tools of
# host/build-desktop-image.sh (mmdebstrap, gdisk, dosfstools; the desktop guest image the tests
# build, cached), and for the test host in a VM (host/vm/, tests/vm/vm.rs) `qemu-system-x86` (boots
# it) and `e2fsprogs` (mkfs.ext4 -d, debugfs); `podman` with `netavark` and `aardvark-dns` (rootful,
# runc; tests/criu_oci/archive_podman.rs exports and restores checkpoint archives with it); `ansible-core` and
# `openssh-client` (deploy/ansible/'s playbook against this machine and the VM over SSH,
# tests/common/fleet_play.rs, run by tests/vm/vm.rs); OSWorld's client in a private venv
# (host/install-osworld-client.sh). Installing Debian 12's qemu-system-x86 removes a
# backported qemu-utils; qemu-utils (qemu-img, qemu-storage-daemon: the slot's qcow2 path) is
# then installed again in the matching version. Idempotent: does nothing when every package is
# installed, and
# runs `apt-get update` only when a package is missing. Needs root. Exit 3 when not root.
set -euo pipefail
log() { printf 'install-test-deps: %s\n' "$*" >&2; }

PKGS=(chromium xvfb mmdebstrap gdisk dosfstools qemu-system-x86 qemu-utils e2fsprogs podman netavark aardvark-dns
  ansible-core openssh-client)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# OSWorld's client (pinned desktop-env wheel + requests, by sha256) in a private venv, for
# tests/gnome/osworld_client.rs and integrations/osworld.
bash "$(dirname "$0")/install-osworld-client.sh"
if [ ${#missing[@]} -eq 0 ]; then
  log "already installed: ${PKGS[*]}"
  exit 0
fi
[ "$(id -u)" = 0 ] || { log "must run as root to install: ${missing[*]}"; exit 3; }
log "installing: ${missing[*]}"
flock /var/lock/netprobe-apt.lock apt-get update -qq
DEBIAN_FRONTEND=noninteractive flock /var/lock/netprobe-apt.lock apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# qemu-system-x86 (bookworm) can remove a backported qemu-utils: put back the matching one.
if ! command -v qemu-storage-daemon >/dev/null || ! command -v qemu-img >/dev/null; then
  log "qemu-utils was removed by qemu-system-x86; installing the matching qemu-utils"
  DEBIAN_FRONTEND=noninteractive flock /var/lock/netprobe-apt.lock apt-get install -y -qq --no-install-recommends qemu-utils >/dev/null
fi
for t in qemu-img qemu-storage-daemon qemu-system-x86_64 mmdebstrap Xvfb ansible-playbook ssh ssh-keygen; do
  command -v "$t" >/dev/null || { log "$t still not on PATH after install"; exit 1; }
done
command -v chromium >/dev/null || { log "chromium still not on PATH after install"; exit 1; }
command -v Xvfb >/dev/null || { log "Xvfb still not on PATH after install"; exit 1; }
command -v podman >/dev/null || { log "podman still not on PATH after install"; exit 1; }
log "done: $(chromium --version 2>/dev/null || echo 'chromium installed')"
