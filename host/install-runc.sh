#!/usr/bin/env bash
# Install a runc release an operator brought (runc 1.5.x is not in Debian; the seed pins 1.5.2):
#   install-runc.sh --release-dir DIR [--prefix-root /opt]
# DIR holds what the release page and the tagged repository publish:
#   runc.amd64 (or runc)   the binary
#   runc.sha256sum         "<sha256>  runc.amd64" lines
#   runc.amd64.asc         the detached signature of the binary
#   runc.keyring           the maintainers' keys from the tagged repository (armored or binary)
# Nothing runs the binary before the signature (gpgv, or sqv when gpgv is missing) verifies
# against runc.keyring AND its sha256 equals the runc.sha256sum line. Then it is installed as
# <prefix-root>/runc-<version>/sbin/runc with netprobe-install.json (source, sha256, version).
# Idempotent: the same binary already installed is left alone. Exit 1 on any failed check.
set -euo pipefail
log() { printf 'install-runc: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

dir="" root=/opt
while [ $# -gt 0 ]; do
  case "$1" in
    --release-dir) dir=${2:?--release-dir needs a directory}; shift 2;;
    --prefix-root) root=${2:?--prefix-root needs a directory}; shift 2;;
    *) die "unknown argument '$1' (usage: install-runc.sh --release-dir DIR [--prefix-root DIR])";;
  esac
done
[ -n "$dir" ] || die "usage: install-runc.sh --release-dir DIR [--prefix-root DIR]"
[ -d "$dir" ] || die "--release-dir $dir is not a directory"

bin=""
for b in runc.amd64 runc; do [ -f "$dir/$b" ] && { bin=$b; break; }; done
[ -n "$bin" ] || die "$dir holds no runc.amd64 (or runc) binary"
for f in runc.sha256sum "$bin.asc" runc.keyring; do
  [ -f "$dir/$f" ] || die "$dir lacks $f (the release's checksum file, detached signature and the tag's runc.keyring are all required)"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
keyring=$tmp/runc.keyring.gpg
if grep -q -- '-----BEGIN PGP PUBLIC KEY BLOCK-----' "$dir/runc.keyring"; then
  command -v gpg >/dev/null || die "gpg is needed to read the armored $dir/runc.keyring"
  gpg --batch --quiet --dearmor -o "$keyring" "$dir/runc.keyring" \
    || die "$dir/runc.keyring: not a readable OpenPGP keyring"
else
  cp "$dir/runc.keyring" "$keyring"
fi

# 1. The detached signature, against the tag's keyring only.
if command -v gpgv >/dev/null; then
  gpgv --keyring "$keyring" "$dir/$bin.asc" "$dir/$bin" 2>"$tmp/gpgv.log" || {
    cat "$tmp/gpgv.log" >&2
    die "$dir/$bin: signature $bin.asc does not verify against runc.keyring"
  }
elif command -v sqv >/dev/null; then
  sqv --keyring "$dir/runc.keyring" "$dir/$bin.asc" "$dir/$bin" >/dev/null 2>"$tmp/gpgv.log" || {
    cat "$tmp/gpgv.log" >&2
    die "$dir/$bin: signature $bin.asc does not verify against runc.keyring"
  }
else
  die "neither gpgv nor sqv is installed (apt-get install gpgv)"
fi
log "signature of $bin verifies against runc.keyring"

# 2. The checksum line for this binary.
want=$(awk -v b="$bin" '{f=$2; sub(/^\*/, "", f)} f==b {print $1}' "$dir/runc.sha256sum" | head -1)
[ -n "$want" ] || die "$dir/runc.sha256sum has no line for $bin"
got=$(sha256sum "$dir/$bin" | awk '{print $1}')
[ "$got" = "$want" ] || die "$dir/$bin has sha256 $got; runc.sha256sum lists $want"
log "sha256 $got matches runc.sha256sum"

# 3. Only now run it: its version names the prefix.
cp "$dir/$bin" "$tmp/runc"
chmod 0755 "$tmp/runc"
version=$("$tmp/runc" --version | awk '/^runc version/{print $3; exit}')
[ -n "$version" ] || die "$dir/$bin --version printed no 'runc version' line"
version=${version%%+*}
prefix=$root/runc-$version
if [ -f "$prefix/netprobe-install.json" ] && grep -q "\"binary_sha256\": \"$got\"" "$prefix/netprobe-install.json"; then
  log "runc $version (sha256 $got) already installed at $prefix; nothing to do"
  exit 0
fi
stage=$(mktemp -d "$root/.runc-stage.XXXXXX")
mkdir -p "$stage/sbin"
cp "$tmp/runc" "$stage/sbin/runc"
printf '{\n  "pin": "operator-release",\n  "package": "runc",\n  "pinned_version": "%s",\n  "installed_version": "%s",\n  "suite": "release",\n  "sha256": "%s",\n  "binary": "%s",\n  "binary_sha256": "%s",\n  "debs": []\n}\n' \
  "$version" "$version" "$got" "$prefix/sbin/runc" "$got" > "$stage/netprobe-install.json"
rm -rf "$prefix.old"
[ -e "$prefix" ] && mv "$prefix" "$prefix.old"
mv "$stage" "$prefix"
rm -rf "$prefix.old"
log "runc $version installed at $prefix/sbin/runc"
