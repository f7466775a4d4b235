#!/usr/bin/env bash
# Build CRIU 4.1.1 from the source Debian 13 (trixie) publishes into a private prefix.
#
# Why: Debian 12's criu 3.17.1 fails on kernels >= 6.13 ("vdso: Unexpected rt vDSO area bounds").
# Where: /opt/criu-4.1.1 (override with CRIU_PREFIX). System libraries are never replaced.
# Idempotent: when "$PREFIX/sbin/criu check" already passes, nothing is done.
# Source: the deb-src URI is taken from this machine's apt sources (never a hard-coded mirror);
# when `apt-get source` cannot get the .dsc, the orig tarball is fetched from the same archive and
# verified against the SHA-256 listed in trixie's Sources index before it is unpacked.
set -euo pipefail

VERSION=4.1.1
PREFIX=${CRIU_PREFIX:-/opt/criu-$VERSION}
ORIG_SHA256=f80a66cb3726bb2116266d4759ce3bcbfab7abdb6b6d430bf20dd41911717afe
ORIG=criu_${VERSION}.orig.tar.xz
BUILD_DEPS=(protobuf-c-compiler libprotobuf-c-dev libprotobuf-dev protobuf-compiler libnl-3-dev
  libnet1-dev libcap-dev libbsd-dev libgnutls28-dev libnftables-dev uuid-dev pkg-config
  build-essential python3 xz-utils curl ca-certificates)

log() { printf 'install-criu: %s\n' "$*" >&2; }

if [ -x "$PREFIX/sbin/criu" ] && "$PREFIX/sbin/criu" check >/dev/null 2>&1; then
  log "CRIU $("$PREFIX/sbin/criu" --version | head -1) at $PREFIX passes 'criu check'; nothing to do"
  exit 0
fi

# The Debian archive URI of this machine (first deb.sources/sources.list entry naming /debian).
archive_uri() {
  local uri
  uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' \
    | grep -E '/debian/?$' | head -1 || true)
  if [ -z "$uri" ]; then
    uri=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' \
      | grep -E '/debian/?$' | head -1 || true)
  fi
  [ -n "$uri" ] || { log "no Debian archive URI in /etc/apt/sources.list{,.d}; add one and retry"; exit 1; }
  printf '%s\n' "${uri%/}"
}

URI=$(archive_uri)
log "Debian archive from apt sources: $URI"

apt_updated=/var/lib/netprobe-apt-updated
if [ ! -e "$apt_updated" ] || [ -n "${NETPROBE_APT_UPDATE:-}" ]; then
  apt-get update -qq
  mkdir -p "$(dirname "$apt_updated")" && touch "$apt_updated"
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${BUILD_DEPS[@]}" >/dev/null

WORK=$(mktemp -d /var/tmp/netprobe-criu-build.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

# Trixie's Sources index tells the pool directory and the orig tarball's SHA-256.
fetch_sources_index() {
  local idx
  for comp in Sources.xz Sources.gz; do
    if curl -fsSL "$URI/dists/trixie/main/source/$comp" -o "$comp"; then
      case "$comp" in
        *.xz) xz -dc "$comp" > Sources ;;
        *.gz) gzip -dc "$comp" > Sources ;;
      esac
      return 0
    fi
  done
  return 1
}

src_dir=""
# 1. apt-get source through a temporary deb-src entry (only inside this build's own apt config).
mkdir -p apt/lists/partial apt/sources.list.d
cat > apt/sources.list.d/trixie-src.sources <<SRC
Types: deb-src
URIs: $URI
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
APT_OPTS=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$WORK/apt/sources.list.d"
  -o "Dir::State::Lists=$WORK/apt/lists" -o "APT::Get::List-Cleanup=0")
if apt-get "${APT_OPTS[@]}" update -qq >/dev/null 2>&1 \
  && apt-get "${APT_OPTS[@]}" source --download-only -qq "criu=${VERSION}-1" >/dev/null 2>&1; then
  log "apt-get source criu=${VERSION}-1 succeeded"
fi

# 2. Verify (or fetch) the orig tarball against trixie's Sources index.
if ! fetch_sources_index; then
  log "cannot read $URI/dists/trixie/main/source/Sources.{xz,gz}; check the network to the Debian archive"
  exit 1
fi
listed=$(awk -v f="$ORIG" '
  /^Package: /{pkg=$2} /^Version: /{ver=$2} /^Directory: /{dir=$2}
  /^Checksums-Sha256:/{insha=1; next} /^[^ ]/{insha=0}
  insha && pkg=="criu" && $3==f {print $1, dir}' Sources | head -1)
[ -n "$listed" ] || { log "trixie's Sources index does not list $ORIG"; exit 1; }
listed_sha=${listed%% *}
pool_dir=${listed#* }
if [ "$listed_sha" != "$ORIG_SHA256" ]; then
  log "trixie lists $ORIG with sha256 $listed_sha, expected $ORIG_SHA256; refusing"
  exit 1
fi
if [ ! -f "$ORIG" ]; then
  curl -fsSL "$URI/$pool_dir/$ORIG" -o "$ORIG"
fi
got=$(sha256sum "$ORIG" | awk '{print $1}')
if [ "$got" != "$ORIG_SHA256" ]; then
  log "$ORIG has sha256 $got, expected $ORIG_SHA256 (from trixie's Sources index); refusing to unpack"
  exit 1
fi
log "$ORIG verified: sha256 $got"
tar -xf "$ORIG"
src_dir=$(find . -maxdepth 1 -type d -name 'criu-*' | head -1)
[ -n "$src_dir" ] || { log "no criu-* directory in $ORIG"; exit 1; }

cd "$src_dir"
log "building CRIU $VERSION in $WORK/$src_dir (make -j$(nproc))"
make -j"$(nproc)" criu >"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log" >&2; exit 1; }
install -d "$PREFIX/sbin"
install -m 0755 criu/criu "$PREFIX/sbin/criu"
printf '%s\n' "$ORIG_SHA256  $ORIG" > "$PREFIX/SOURCE.sha256"

"$PREFIX/sbin/criu" --version
"$PREFIX/sbin/criu" check
log "CRIU $VERSION installed at $PREFIX/sbin/criu; 'criu check' passes"
