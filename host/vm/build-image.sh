#!/usr/bin/env bash
# Build (or reuse) netprobe's test-host VM image from Debian's packages.
#
#   bash host/vm/build-image.sh [--suite-kernel SUITE|""]   prints the image directory on stdout
#
# The image: Debian 12 (bookworm) by mmdebstrap with linux-image-amd64, systemd as pid 1, udev,
# dbus (runc's systemd cgroup driver talks to systemd over the system bus), runc, iptables, nftables (the
# netfilter capture runs `nft`), iproute2, busybox-static, strace, and the host's CRIU build (/opt/criu-4.2.1) copied in with the
# Debian packages of the libraries it links (found with ldd + dpkg -S at build time). The root
# filesystem is a raw ext4 disk made with `mkfs.ext4 -d` (no loop mount); the kernel and initrd are
# copied out of the tree's /boot for qemu's -kernel/-initrd. In the guest a oneshot unit
# (netprobe-vm.service) mounts the second disk (/dev/vdb) at /io, runs /io/cmd.sh with its
# stdout/stderr/exit code written to /io/out, unmounts and powers the machine off. serial-getty on
# ttyS0 and systemd-firstboot are masked (the getty's vhangup swallows console output; firstboot
# would prompt). No network is configured in the guest. openssh-server and python3 are in the
# image for the fleet test (tests/common/fleet_play.rs, run by tests/vm/vm.rs: Ansible over SSH);
# ssh.service is disabled at boot and started by the command that needs it
# (host/vm/fleet-guest.sh).
#
# Cached by content hash: the hash covers this script, the guest unit + runner, the package list,
# the apt sources file, the CRIU tree and the optional kernel suite. A finished image lives in
# $NETPROBE_VM_CACHE/<hash>/ (default /var/cache/netprobe/vm) with a `done` marker; a build goes
# to a temporary directory beside it and is renamed into place, so an interrupted build leaves no
# half image that a later run would use. Builds are serialised with flock.
#
# --suite-kernel SUITE (default trixie, or $NETPROBE_VM_SUITE_KERNEL; "" for none): also put that
# suite's linux-image-amd64 into the same image (fetch-kernel.sh: a private apt configuration,
# the machine's own sources are never changed), its vmlinuz/initrd beside the image as
# vmlinuz-SUITE / initrd-SUITE, for the kernel column (run.sh --kernel SUITE).
#
# Exit: 0 built or reused; 3 host refused (not root, a tool missing); 4 the build failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log() { printf 'vm-image: %s\n' "$*" >&2; }
die() { log "$2"; exit "$1"; }

[ "$(id -u)" = 0 ] || die 3 "must run as root (mmdebstrap in root mode, mkfs)"
SUITE_KERNEL=${NETPROBE_VM_SUITE_KERNEL-trixie}
if [ "${1:-}" = "--suite-kernel" ]; then SUITE_KERNEL=${2?--suite-kernel needs a suite (or "" for none)}; fi

CRIU_DIR=${NETPROBE_VM_CRIU:-/opt/criu-4.2.1}
CACHE=${NETPROBE_VM_CACHE:-/var/cache/netprobe/vm}
SOURCES=/etc/apt/sources.list.d/debian.sources
[ -f "$SOURCES" ] || SOURCES=/etc/apt/sources.list
[ -f "$SOURCES" ] || die 3 "no apt sources file (/etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list)"
for t in mmdebstrap mkfs.ext4 dpkg-query ldd sha256sum flock; do
  command -v "$t" >/dev/null || die 3 "missing $t: run 'apt-get install -y mmdebstrap e2fsprogs' (host/vm/README.md)"
done
[ -x "$CRIU_DIR/sbin/criu" ] || die 3 "no CRIU at $CRIU_DIR/sbin/criu: run 'bash host/setup.sh' first"

# The Debian packages that ship CRIU's libraries (same suite as the guest: the host is bookworm).
criu_lib_pkgs() {
  ldd "$CRIU_DIR/sbin/criu" | awk '/=> \//{print $3}' | while read -r lib; do
    real=$(readlink -f "$lib")
    dpkg -S "$real" 2>/dev/null || dpkg -S "$lib" 2>/dev/null || dpkg -S "/usr$lib" 2>/dev/null || true
  done | cut -d: -f1 | sort -u
}
mapfile -t LIBPKGS < <(criu_lib_pkgs)
[ ${#LIBPKGS[@]} -gt 0 ] || die 3 "could not map CRIU's libraries to Debian packages (ldd/dpkg -S)"
PKGS=(linux-image-amd64 systemd systemd-sysv udev dbus kmod runc iptables nftables iproute2 busybox-static
  strace procps util-linux e2fsprogs openssh-server python3 "${LIBPKGS[@]}")

hash=$( {
  cat "$0" "$here/guest/netprobe-vm.service" "$here/guest/netprobe-vm-run"
  [ -z "$SUITE_KERNEL" ] || cat "$here/fetch-kernel.sh"
  printf '%s\n' "${PKGS[@]}" "suite-kernel=$SUITE_KERNEL"
  cat "$SOURCES"
  (cd "$CRIU_DIR" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
} | sha256sum | cut -c1-16)
out="$CACHE/$hash"
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
if [ -f "$out/done" ]; then
  log "reusing $out"
  echo "$out"
  exit 0
fi

tmp=$(mktemp -d "$CACHE/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tree="$tmp/tree"
t0=$(date +%s)
log "building bookworm image into $tmp (packages: ${PKGS[*]})"
inc=$(IFS=,; echo "${PKGS[*]}")
extra=()
if [ -n "$SUITE_KERNEL" ]; then
  extra=(--customize-hook="bash $here/fetch-kernel.sh $SUITE_KERNEL \"\$1\" $tmp")
fi
if ! mmdebstrap --variant=apt --include="$inc" \
  --customize-hook="mkdir -p \"\$1$CRIU_DIR\" && cp -a $CRIU_DIR/. \"\$1$CRIU_DIR/\"" \
  --customize-hook="install -m 0644 $here/guest/netprobe-vm.service \"\$1/etc/systemd/system/\"" \
  --customize-hook="install -m 0755 $here/guest/netprobe-vm-run \"\$1/usr/local/sbin/\"" \
  --customize-hook='chroot "$1" systemctl enable netprobe-vm.service' \
  --customize-hook='chroot "$1" systemctl mask serial-getty@ttyS0.service getty@tty1.service systemd-firstboot.service' \
  --customize-hook='chroot "$1" systemctl disable ssh.service' \
  --customize-hook='echo netprobe-vm > "$1/etc/hostname"; printf "%s\n" 7e1f0e2c4b5a49d3a1c2b3d4e5f60718 > "$1/etc/machine-id"' \
  --customize-hook='printf "/dev/vda / ext4 rw,errors=remount-ro 0 1\n" > "$1/etc/fstab"' \
  "${extra[@]}" \
  bookworm "$tree" "$SOURCES" >"$tmp/mmdebstrap.log" 2>&1; then
  tail -30 "$tmp/mmdebstrap.log" >&2
  die 4 "mmdebstrap failed (log above)"
fi
kver=$(dpkg-query --admindir="$tree/var/lib/dpkg" -W -f='${Depends}' linux-image-amd64 | sed -n 's/.*linux-image-\([0-9][^ ,]*\).*/\1/p')
[ -f "$tree/boot/vmlinuz-$kver" ] || die 4 "no /boot/vmlinuz-$kver in the image"
cp "$tree/boot/vmlinuz-$kver" "$tmp/vmlinuz"
cp "$tree/boot/initrd.img-$kver" "$tmp/initrd.img"
echo "$kver" >"$tmp/kernel-version"

size_mb=$(( $(du -sm "$tree" | cut -f1) + 1024 ))
if ! mkfs.ext4 -q -F -L netprobe-root -d "$tree" "$tmp/root.img" "${size_mb}M" >"$tmp/mkfs.log" 2>&1; then
  cat "$tmp/mkfs.log" >&2
  die 4 "mkfs.ext4 -d failed"
fi
rm -rf "$tree"
printf 'suite=bookworm\nkernel=%s\npackages=%s\nbuild_seconds=%s\n' "$kver" "${PKGS[*]}" \
  "$(( $(date +%s) - t0 ))" >"$tmp/manifest"
touch "$tmp/done"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
# Keep the three newest images (older ones were built by older versions of these scripts).
ls -1dt "$CACHE"/*/ 2>/dev/null | tail -n +4 | while read -r old; do
  [ -f "$old/done" ] && rm -rf "$old"
done
log "built $out in $(( $(date +%s) - t0 )) s (kernel $kver)"
echo "$out"
