#!/usr/bin/env bash
# netprobe desktop guest image: Debian 12 packages (host/desktop-image/packages.txt, fetched and
# verified by apt through mmdebstrap from the machine's own apt sources) + netprobe's files
# (host/desktop-image/files: supervisor.py as init on :5000 with the OSWorld-compatible server
# osworld_*.py, the GTK 3 typing app, the Xorg dummy config) + pyautogui and its pure-Python
# dependencies (desktop-image/pyautogui-requirements.txt: versions and sha256 pinned, installed by
# the host's Debian pip into /usr/local/lib/python3.11/dist-packages), packed like operators'
# images: a qcow2 DISK with a GPT partition table (1: "EFI" FAT32 ESP, 2: "root" ext4), built
# without loop devices (sgdisk on a raw file, mkfs.ext4 -d into a separate file, dd at the
# partition offset, qemu-img convert).
#
# Usage: build-desktop-image.sh [--gnome] [OUT_DIR]
#   default OUT_DIR ${NETPROBE_CACHE:-/var/cache/netprobe}/desktop (with --gnome: .../gnome)
#   --gnome adds desktop-image/packages-gnome.txt (GNOME Shell 43, D-Bus, upower, Mesa) and
#   desktop-image/gnome/ (the "netprobe" GNOME Shell session mode without the top-bar clock, and a
#   gschema override stopping animations, cursor blink and idle blanking: a screen that changes
#   by itself can never pass the pixels-equal gate): the GNOME guest, image gnome.qcow2.
# Output: OUT_DIR/NAME.qcow2 (NAME = desktop or gnome), OUT_DIR/NAME.qcow2.sha256 (sha256sum
# format: the pin a profile references), OUT_DIR/rootfs/ (the unpacked root, for tests),
# OUT_DIR/packages.lock (name=version of every installed package, then pypi:name==version of
# the pip-installed ones), OUT_DIR/build-key.
#
# Cache: the build key is the sha256 of this script + packages.txt + files/* +
# pyautogui-requirements.txt. When OUT_DIR/build-key equals it and the image's sha256 still matches, nothing is rebuilt (prints "cached").
# Pinning: the rootfs is built with SOURCE_DATE_EPOCH, fixed partition/filesystem UUIDs and
# E2FSPROGS_FAKE_TIME, but it is NOT promised bit-reproducible (package versions move with the
# archive; mkfs.ext4 -d allocates inodes in readdir order). So each build writes its own sha256
# beside the image and the shipped profile names that file (image.sha256_file): the pin guards the
# image between build and use, and packages.lock says what was in it.
# fontconfig's cache is built in the image (without SOURCE_DATE_EPOCH: with it, fc-cache writes
# nothing), else the first Tk window waits for a font scan at run time (over 90 s under load here).
# Needs root (mmdebstrap --mode=root, ownership in the image). Exit 3 when not root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log() { printf 'build-desktop-image: %s\n' "$*" >&2; }
[ "$(id -u)" = 0 ] || { log "must run as root (mmdebstrap --mode=root)"; exit 3; }

name=desktop
lists=("$here/desktop-image/packages.txt")
extra=()
if [ "${1:-}" = "--gnome" ]; then
  name=gnome
  lists+=("$here/desktop-image/packages-gnome.txt")
  extra=("$here"/desktop-image/gnome/*)
  shift
fi
out=${1:-${NETPROBE_CACHE:-/var/cache/netprobe}/$name}
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9

reqs=$here/desktop-image/pyautogui-requirements.txt
key=$( (echo "$name"; cat "$0" "${lists[@]}" "$here"/desktop-image/files/* "$reqs" "${extra[@]}") | sha256sum | cut -d' ' -f1)
img=$name.qcow2
if [ -f "$out/build-key" ] && [ "$(cat "$out/build-key")" = "$key" ] && [ -f "$out/$img.sha256" ] \
  && (cd "$out" && sha256sum --quiet -c "$img.sha256") && [ -f "$out/rootfs/etc/os-release" ]; then
  log "cached: $out/$img ($(cut -d' ' -f1 "$out/$img.sha256"))"
  exit 0
fi

# Its own tools, from Debian 12's packages (as host/setup.sh does for the probes').
need=()
for pair in mmdebstrap:mmdebstrap sgdisk:gdisk mkfs.ext4:e2fsprogs mkfs.vfat:dosfstools qemu-img:qemu-utils; do
  command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
done
# pip with setuptools and wheel of the host's Debian python3 build the pinned source distributions
# (pyautogui has no wheel); no build isolation, so nothing unpinned is fetched.
/usr/bin/python3 -c 'import setuptools, wheel, pip' 2>/dev/null || need+=(python3-pip python3-setuptools python3-wheel)
if [ ${#need[@]} -gt 0 ]; then
  log "installing: ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

t0=$(date +%s)
rm -rf "$out/rootfs" "$out/build"
mkdir -p "$out/build"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1700000000}

# The machine's own apt sources (no archive host named here): one "deb URI SUITE main" per suite.
apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(TARGET_OF)' \
  | awk '$3 == "deb" { print "deb " $1 " " $2 " main" }' | sort -u >"$out/build/sources.list"
grep -q . "$out/build/sources.list" || { log "no apt sources (run apt-get update)"; exit 3; }

pkgs=$(cat "${lists[@]}" | grep -v '^\s*#' | xargs | tr ' ' ',')
# The GNOME guest's settings (nothing for the desktop guest): the session mode and the schema
# override, compiled into the image's gschemas.compiled.
gnome_hooks=()
if [ "$name" = gnome ]; then
  gnome_hooks=(
    --customize-hook='mkdir -p "$1/usr/share/gnome-shell/modes"'
    --customize-hook="copy-in $here/desktop-image/gnome/netprobe.json /usr/share/gnome-shell/modes"
    --customize-hook="copy-in $here/desktop-image/gnome/90_netprobe.gschema.override /usr/share/glib-2.0/schemas"
    --customize-hook='chroot "$1" glib-compile-schemas --strict /usr/share/glib-2.0/schemas'
  )
fi
# pyautogui & co. into the image's site directory for /usr/local (Debian's python3 reads it).
export NETPROBE_REQS=$reqs NETPROBE_PIP_LOG=$out/build/pip.log
pip_hook='PIP_CONFIG_FILE=/dev/null /usr/bin/python3 -m pip install --isolated --disable-pip-version-check --no-cache-dir --no-deps --require-hashes --no-build-isolation --no-binary :all: --no-compile --target "$1/usr/local/lib/python3.11/dist-packages" -r "$NETPROBE_REQS" >"$NETPROBE_PIP_LOG" 2>&1 && sed -n "s/^\([a-z0-9-]*==[^ ]*\) .*/pypi:\1/p" "$NETPROBE_REQS" >> "$1/opt/netprobe/packages.lock"'
# What the server and OSWorld's client need must import in the image, and scrot be on PATH.
check_hook='chroot "$1" python -c "import flask, lxml.etree, PIL.Image, Xlib.ext.xfixes, pyatspi, gi; gi.require_version(\"Gtk\", \"3.0\"); import pytweening, pymsgbox, pyscreeze" && chroot "$1" sh -c "command -v scrot && test -d /usr/local/lib/python3.11/dist-packages/pyautogui"'
files=("$here"/desktop-image/files/*.py)
# Downloaded .debs are kept between builds (apt re-verifies them against the signed indices).
debs=${NETPROBE_CACHE:-/var/cache/netprobe}/debs
mkdir -p "$debs"
mmdebstrap --mode=root --variant=apt --include="$pkgs" --skip=download/empty \
  --setup-hook='mkdir -p "$1"/var/cache/apt/archives' \
  --setup-hook="sync-in $debs /var/cache/apt/archives" \
  --aptopt='Acquire::Languages "none"' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook='mkdir -p "$1/opt/netprobe"' \
  --customize-hook="copy-in ${files[*]} /opt/netprobe" \
  --customize-hook="copy-in $here/desktop-image/files/xorg-dummy.conf /etc/X11" \
  --customize-hook='mv "$1/etc/X11/xorg-dummy.conf" "$1/etc/X11/netprobe-dummy.conf"; chmod 755 "$1"/opt/netprobe/*.py' \
  "${gnome_hooks[@]}" \
  --customize-hook='chroot "$1" env -u SOURCE_DATE_EPOCH fc-cache -s' \
  --customize-hook='chroot "$1" dpkg-query -W -f "\${Package}=\${Version}\n" > "$1/opt/netprobe/packages.lock"' \
  --customize-hook="$pip_hook" \
  --customize-hook="$check_hook" \
  --customize-hook='mkdir -p "$1/root/Desktop"' \
  --customize-hook="sync-out /var/cache/apt/archives $debs" \
  --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/*' \
  bookworm "$out/rootfs" "$out/build/sources.list" 2>"$out/build/mmdebstrap.log" \
  || { tail -20 "$out/build/mmdebstrap.log" "$out/build/pip.log" >&2; log "mmdebstrap failed (log: $out/build/mmdebstrap.log)"; exit 1; }
cp "$out/rootfs/opt/netprobe/packages.lock" "$out/packages.lock"
t1=$(date +%s)

# Sizes in MiB: ESP 32; root = used * 1.25 + 128.
used=$(du -sm "$out/rootfs" | cut -f1)
root_mb=$(( used * 5 / 4 + 128 ))
esp_mb=32
disk_mb=$(( 1 + esp_mb + root_mb + 1 ))
export E2FSPROGS_FAKE_TIME=$SOURCE_DATE_EPOCH
mkfs.ext4 -q -F -L root -U 6e657470-726f-6265-0000-726f6f746673 -E root_owner=0:0,hash_seed=6e657470-726f-6265-0000-000000000001 \
  -d "$out/rootfs" "$out/build/root.ext4" "${root_mb}M"
mkfs.vfat -C -n EFI -i 6e657470 "$out/build/esp.vfat" $(( esp_mb * 1024 )) >/dev/null
truncate -s "${disk_mb}M" "$out/build/disk.raw"
sgdisk -U 6E657470-726F-6265-0000-6469736B0000 \
  -n 1:1M:+${esp_mb}M -t 1:EF00 -c 1:EFI -u 1:6E657470-726F-6265-0000-657370000001 \
  -n 2:0:+${root_mb}M -t 2:8300 -c 2:root -u 2:6E657470-726F-6265-0000-726F6F740002 \
  "$out/build/disk.raw" >/dev/null
dd if="$out/build/esp.vfat" of="$out/build/disk.raw" bs=1M seek=1 conv=notrunc,sparse status=none
dd if="$out/build/root.ext4" of="$out/build/disk.raw" bs=1M seek=$(( 1 + esp_mb )) conv=notrunc,sparse status=none
qemu-img convert -f raw -O qcow2 "$out/build/disk.raw" "$out/$img.tmp"
mv "$out/$img.tmp" "$out/$img"
parts=$(partx -g -o NR "$out/build/disk.raw" | xargs)
[ "$parts" = "1 2" ] || { log "partition table check failed: partitions '$parts', expected '1 2'"; exit 1; }
(cd "$out" && sha256sum "$img" >"$img.sha256")
rm -rf "$out/build"
echo "$key" >"$out/build-key"
t2=$(date +%s)
log "built $out/$img ($(du -m "$out/$img" | cut -f1) MiB, rootfs ${used} MiB) sha256 $(cut -d' ' -f1 "$out/$img.sha256"); mmdebstrap $((t1 - t0)) s, packing $((t2 - t1)) s"
