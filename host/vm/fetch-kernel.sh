#!/usr/bin/env bash
# Put another Debian suite's kernel into the VM image (the kernel column):
#   bash host/vm/fetch-kernel.sh SUITE TREE OUT
# Run by build-image.sh as an mmdebstrap customize hook (TREE is the image's root, with /proc,
# /sys and /dev mounted). Fetches SUITE's linux-image-amd64 (its versioned dependency) through a
# private apt configuration under OUT (the machine's own apt sources and state are never
# changed; the archive URI is the one already in the machine's sources; the index is verified
# with Debian's archive keyring, the .deb against the index by apt), unpacks it into TREE,
# runs depmod and the image's mkinitramfs for it, and writes OUT/vmlinuz-SUITE,
# OUT/initrd-SUITE and OUT/kernel-version-SUITE.
set -euo pipefail
suite=${1:?suite}; tree=${2:?tree}; out=${3:?out}
log() { printf 'fetch-kernel: %s\n' "$*" >&2; }
unset APT_CONFIG  # mmdebstrap exports its own for hooks; this fetch uses only the options below
apt=$out/apt-$suite
mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/etc"
uri=""
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources)
fi
if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
  uri=$(awk '$1=="deb"{for(i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//){print $i; exit}}' /etc/apt/sources.list)
fi
[ -n "$uri" ] || { log "no archive URI in the machine's apt sources"; exit 3; }
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $suite main" >"$apt/etc/sources.list"
opts=(-o "Dir::Etc::sourcelist=$apt/etc/sources.list" -o Dir::Etc::sourceparts=-
  -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache::Archives=$apt/archives"
  -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Get::List-Cleanup=0
  -o Debug::NoLocking=1)
apt-get "${opts[@]}" update -qq
pkg=$(apt-cache "${opts[@]}" depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
[ -n "$pkg" ] || { log "no versioned linux-image in $suite"; exit 4; }
(cd "$apt" && apt-get "${opts[@]}" download "$pkg" >/dev/null)
deb=$(ls "$apt"/"${pkg}"_*.deb)
ver=${pkg#linux-image-}
ver=${ver%-unsigned}
log "$suite: $pkg ($(basename "$deb")), kernel $ver"
dpkg-deb -x "$deb" "$tree"
chroot "$tree" depmod "$ver"
chroot "$tree" mkinitramfs -o "/boot/initrd.img-$ver" "$ver"
cp "$tree/boot/vmlinuz-$ver" "$out/vmlinuz-$suite"
cp "$tree/boot/initrd.img-$ver" "$out/initrd-$suite"
echo "$ver" >"$out/kernel-version-$suite"
rm -rf "$apt"
