#!/usr/bin/env bash
# Build CRIU from the source Debian publishes, into private prefixes (system libraries are never
# replaced, no CRIU config file is written):
#   /opt/criu-4.2.1  from Debian forky (or sid): the default. CRIU 4.2 handles kernels >= 6.16,
#                    where SO_PASSCRED/SO_PASSSEC became unix/netlink-only and CRIU 4.1 fails to
#                    dump any process holding an inet socket ("Can't get 1:16 opt").
#   /opt/criu-4.1.1  from Debian trixie: kept for regression comparisons (`--criu`).
# Why not Debian 12's criu: 3.17.1 fails on this kernel ("vdso: Unexpected rt vDSO area bounds").
#
# Trust chain for each source: the suite's InRelease is checked with gpgv against Debian's
# archive keyring, the Sources index against the SHA-256 InRelease lists, and the orig tarball
# against the SHA-256 the index lists AND the pin below, before anything is unpacked. The archive
# URI is taken from this machine's apt sources (never a hard-coded mirror). `apt-get source` is
# tried first (in a private apt configuration); the tarball is fetched from the pool otherwise.
# Idempotent: a prefix whose `criu check` passes is left alone. Ends with `criu check`.
set -euo pipefail

log() { printf 'install-criu: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

BUILD_DEPS=(protobuf-c-compiler libprotobuf-c-dev libprotobuf-dev protobuf-compiler libnl-3-dev
  libnet1-dev libcap-dev libbsd-dev libgnutls28-dev libnftables-dev uuid-dev pkg-config
  build-essential python3 xz-utils curl ca-certificates gpgv debian-archive-keyring)
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

# The Debian archive URI of this machine (first deb822 or one-line entry ending in /debian).
archive_uri() {
  local uri
  uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' \
    | grep -E '/debian/?$' | head -1 || true)
  if [ -z "$uri" ]; then
    uri=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' \
      | grep -E '/debian/?$' | head -1 || true)
  fi
  [ -n "$uri" ] || die "no Debian archive URI in /etc/apt/sources.list{,.d}; add one and retry"
  printf '%s\n' "${uri%/}"
}

deps_installed=""
install_deps() {
  [ -z "$deps_installed" ] || return 0
  local missing=()
  for p in "${BUILD_DEPS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    flock /var/lock/netprobe-apt.lock apt-get update -qq
    DEBIAN_FRONTEND=noninteractive flock /var/lock/netprobe-apt.lock apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  deps_installed=1
}

# verified_sources_index URI SUITE OUT: the suite's main/source/Sources, verified through the
# signed InRelease, decompressed into OUT. Returns 1 when the suite is not served.
verified_sources_index() {
  local uri=$1 suite=$2 out=$3 dir
  dir=$(dirname "$out")
  curl -fsSL "$uri/dists/$suite/InRelease" -o "$dir/InRelease" || return 1
  gpgv --keyring "$KEYRING" "$dir/InRelease" 2>"$dir/gpgv.log" \
    || die "$suite InRelease: bad signature against $KEYRING (see $dir/gpgv.log)"
  local want got
  want=$(awk '/^SHA256:/{s=1; next} /^[^ ]/{s=0} s && $3=="main/source/Sources.xz"{print $1}' "$dir/InRelease")
  [ -n "$want" ] || die "$suite InRelease lists no main/source/Sources.xz"
  curl -fsSL "$uri/dists/$suite/main/source/Sources.xz" -o "$dir/Sources.xz"
  got=$(sha256sum "$dir/Sources.xz" | awk '{print $1}')
  [ "$got" = "$want" ] || die "$suite Sources.xz has sha256 $got, InRelease lists $want"
  xz -dc "$dir/Sources.xz" > "$out"
}

# build_criu VERSION ORIG_SHA256 SUITE...: build CRIU VERSION into /opt/criu-VERSION.
build_criu() {
  local version=$1 pin=$2; shift 2
  local prefix=/opt/criu-$version orig=criu_${version}.orig.tar.xz
  if [ -x "$prefix/sbin/criu" ] && "$prefix/sbin/criu" check >/dev/null 2>&1; then
    log "CRIU $version at $prefix passes 'criu check'; nothing to do"
    return 0
  fi
  install_deps
  local uri work suite listed="" pool=""
  uri=$(archive_uri)
  work=$(mktemp -d /var/tmp/netprobe-criu-build.XXXXXX)
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  for suite in "$@"; do
    mkdir -p "$work/$suite"
    if ! verified_sources_index "$uri" "$suite" "$work/$suite/Sources"; then
      log "$uri does not serve $suite; trying the next suite"
      continue
    fi
    listed=$(awk -v f="$orig" '
      /^Package: /{pkg=$2} /^Directory: /{dir=$2}
      /^Checksums-Sha256:/{insha=1; next} /^[^ ]/{insha=0}
      insha && pkg=="criu" && $3==f {print $1, dir}' "$work/$suite/Sources" | head -1)
    if [ -n "$listed" ]; then
      log "$suite lists $orig (Sources index verified through its signed InRelease)"
      break
    fi
    log "$suite does not list $orig; trying the next suite"
  done
  [ -n "$listed" ] || die "no suite of ($*) lists $orig any more; update the pin in host/install-criu.sh"
  local listed_sha=${listed%% *}
  pool=${listed#* }
  [ "$listed_sha" = "$pin" ] || die "$suite lists $orig with sha256 $listed_sha, pinned $pin; refusing"

  cd "$work"
  # 1. apt-get source through a temporary deb-src entry (a private apt configuration).
  mkdir -p apt/lists/partial apt/sources.list.d
  printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
    "$uri" "$suite" "$KEYRING" > apt/sources.list.d/src.sources
  local apt_opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work/apt/sources.list.d"
    -o "Dir::State::Lists=$work/apt/lists" -o "APT::Get::List-Cleanup=0")
  if apt-get "${apt_opts[@]}" update -qq >/dev/null 2>&1 \
    && apt-get "${apt_opts[@]}" source --download-only -qq "criu=${version}-1" >/dev/null 2>&1; then
    log "apt-get source criu=${version}-1 succeeded"
  else
    log "apt-get source criu=${version}-1 not served; fetching $orig from the pool"
  fi
  # 2. The orig tarball, verified against the index and the pin before unpacking.
  [ -f "$orig" ] || curl -fsSL "$uri/$pool/$orig" -o "$orig"
  local got
  got=$(sha256sum "$orig" | awk '{print $1}')
  [ "$got" = "$pin" ] || die "$orig has sha256 $got, expected $pin; refusing to unpack"
  log "$orig verified: sha256 $got"
  tar -xf "$orig"
  local src
  src=$(find . -maxdepth 1 -type d -name "criu-$version" | head -1)
  [ -n "$src" ] || die "no criu-$version directory in $orig"
  log "building CRIU $version (make -j$(nproc) criu)"
  (cd "$src" && make -j"$(nproc)" criu) >"$work/build.log" 2>&1 || { tail -40 "$work/build.log" >&2; exit 1; }
  install -d "$prefix/sbin"
  install -m 0755 "$src/criu/criu" "$prefix/sbin/criu"
  printf '%s  %s (Debian %s)\n' "$pin" "$orig" "$suite" > "$prefix/SOURCE.sha256"
  cd /
  "$prefix/sbin/criu" --version
  "$prefix/sbin/criu" check || die "CRIU $version at $prefix: 'criu check' fails"
  log "CRIU $version installed at $prefix/sbin/criu; 'criu check' passes"
}

build_criu 4.1.1 f80a66cb3726bb2116266d4759ce3bcbfab7abdb6b6d430bf20dd41911717afe trixie
build_criu 4.2.1 29ec0ee09e296479fe7048c80980e8ef1d0684d0b0204c2b101dfea19f6725b9 forky sid
