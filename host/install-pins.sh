#!/usr/bin/env bash
# Install today's pins from Debian's binary packages into private prefixes under /opt:
#   CRIU 4.3 (criu 4.3-1~exp2 + libcompel1/libcriu2, experimental)  -> /opt/criu-4.3/sbin/criu
#   runc 1.4.3 (1.4.3+ds1-1, experimental)                          -> /opt/runc-1.4.3/sbin/runc
#   runc 1.3.6 (1.3.6+ds1-1, sid/forky)                             -> /opt/runc-1.3.6/sbin/runc
#   crun 1.28 (1.28-1, sid/forky; + libcriu2 of the CRIU pin)       -> /opt/crun-1.28/bin/crun
# The pins are the [debian.*] tables of host/pins.toml. These binaries need libc >= 2.38
# (bookworm has 2.36): each prefix gets its own lib/ folder holding its suite's libraries (libc6,
# libseccomp2, libnl, libnet, libnftables, libprotobuf-c, gnutls, …, all from the archive), and the
# binary's interpreter and DT_RPATH are set with Debian's patchelf (`--force-rpath`: a RUNPATH
# would not apply to transitive libraries). System libraries are never replaced.
#
# Trust chain, per suite and per .deb: the suite's InRelease is checked with gpgv against the
# installed Debian archive keyring; Packages.xz against the SHA-256 InRelease lists; every .deb
# against the SHA-256 that verified index lists, and the main package's version against the pin.
# Dependency closure and downloads use a private apt configuration under $NETPROBE_APT_DIR
# (default /var/lib/netprobe/apt), built from the archive URI of this machine's apt sources,
# which are never changed. apt/dpkg calls are serialised with `flock /var/lock/netprobe-apt.lock`.
#
# When a suite no longer serves a pinned version, set-up says so and installs the newest version
# that suite serves (verified the same way); <prefix>/netprobe-install.json records both versions,
# and netprobe lists the mismatch in declared_differences.
# The record also names the installed binary's own sha256 (after patchelf), `binary_sha256`:
# netprobe matches a pin without a sha256 of its own (CRIU's) only by it, never by --version.
# Idempotent: a prefix whose record names the same .deb sha256, and the sha256 its binary has,
# and whose binary runs is left alone.
# Usage: install-pins.sh [NAME…]   (NAME = a [debian.NAME] table; default: all)
# Environment (for tests): NETPROBE_PINS_TOML (default host/pins.toml), NETPROBE_OPT_ROOT
# (default /opt), NETPROBE_APT_DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log() { printf 'install-pins: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
APT_DIR=${NETPROBE_APT_DIR:-/var/lib/netprobe/apt}
LOCK=/var/lock/netprobe-apt.lock
ARCH=amd64
PINS=${NETPROBE_PINS_TOML:-$here/pins.toml}
OPT=${NETPROBE_OPT_ROOT:-/opt}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
mkdir -p "$(dirname "$LOCK")"

locked() { flock "$LOCK" "$@"; }

# The Debian archive URI of this machine (first deb822 or one-line entry ending in /debian).
archive_uri() {
  local uri
  uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' \
    | grep -E '/debian/?$' | head -1 || true)
  if [ -z "$uri" ]; then
    uri=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | sed -E 's/\[[^]]*\] *//' \
      | awk '{print $2}' | grep -E '/debian/?$' | head -1 || true)
  fi
  [ -n "$uri" ] || die "no Debian archive URI in /etc/apt/sources.list{,.d}; add one and retry"
  printf '%s\n' "${uri%/}"
}

# Host tools this script needs (bookworm packages).
ensure_tools() {
  local need=() p
  for p in patchelf gpgv debian-archive-keyring xz-utils curl binutils; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
  done
  [ ${#need[@]} -eq 0 ] && return 0
  log "installing host tools: ${need[*]}"
  locked apt-get update -qq
  DEBIAN_FRONTEND=noninteractive locked apt-get install -y -qq --no-install-recommends \
    "${need[@]}" >/dev/null
}

# pin_field NAME FIELD: one field of [debian.NAME] (lists space-separated; empty when absent).
pin_field() {
  "$PY" - "$PINS" "$1" "$2" <<'PY'
import sys, tomllib
pins = tomllib.load(open(sys.argv[1], "rb")).get("debian", {})
if sys.argv[2] not in pins:
    sys.exit(f"host/pins.toml has no [debian.{sys.argv[2]}] table")
v = pins[sys.argv[2]].get(sys.argv[3], "")
print(" ".join(v) if isinstance(v, list) else v)
PY
}
pin_names() {
  "$PY" -c 'import sys,tomllib; print(" ".join(tomllib.load(open(sys.argv[1],"rb")).get("debian",{})))' \
    "$PINS"
}

APT_OPTS=()
# Private apt configuration: sources for forky, sid and experimental from this machine's URI,
# its own lists, cache and (empty) dpkg status, so `apt-get -s install` yields the whole closure.
setup_private_apt() {
  local uri=$1 s
  mkdir -p "$APT_DIR/etc/sources.list.d" "$APT_DIR/etc/preferences.d" "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" "$APT_DIR/index"
  : > "$APT_DIR/etc/sources.list.new"
  for s in forky sid experimental; do
    echo "deb [arch=$ARCH signed-by=$KEYRING] $uri $s main" >> "$APT_DIR/etc/sources.list.new"
  done
  mv "$APT_DIR/etc/sources.list.new" "$APT_DIR/etc/sources.list"
  [ -e "$APT_DIR/status" ] || : > "$APT_DIR/status"
  APT_OPTS=(-o "Dir::Etc::sourcelist=$APT_DIR/etc/sources.list" -o "Dir::Etc::sourceparts=$APT_DIR/etc/sources.list.d"
    -o "Dir::Etc::preferencesparts=$APT_DIR/etc/preferences.d"
    -o "Dir::Etc::preferences=$APT_DIR/etc/preferences" -o "APT::Sandbox::User=root" -o "Dir::State::Lists=$APT_DIR/lists"
    -o "Dir::Cache=$APT_DIR/cache" -o "Dir::State::status=$APT_DIR/status"
    -o "APT::Install-Recommends=0" -o "APT::Architecture=$ARCH" -o "Debug::NoLocking=1")
  log "updating the private apt lists in $APT_DIR"
  locked apt-get "${APT_OPTS[@]}" update -qq
}

# verify_suite URI SUITE: InRelease (gpgv) -> Packages.xz (sha256) -> $APT_DIR/index/SUITE.
verify_suite() {
  local uri=$1 suite=$2 d="$APT_DIR/index" want got
  curl -fsSL "$uri/dists/$suite/InRelease" -o "$d/$suite.InRelease" \
    || die "$suite: InRelease not served by the archive"
  gpgv --keyring "$KEYRING" "$d/$suite.InRelease" 2>"$d/$suite.gpgv.log" \
    || die "$suite InRelease: bad signature against $KEYRING (see $d/$suite.gpgv.log)"
  want=$(awk -v f="main/binary-$ARCH/Packages.xz" \
    '/^SHA256:/{s=1; next} /^[^ ]/{s=0} s && $3==f {print $1}' "$d/$suite.InRelease")
  [ -n "$want" ] || die "$suite InRelease lists no main/binary-$ARCH/Packages.xz"
  curl -fsSL "$uri/dists/$suite/main/binary-$ARCH/Packages.xz" -o "$d/$suite.Packages.xz"
  got=$(sha256sum "$d/$suite.Packages.xz" | awk '{print $1}')
  [ "$got" = "$want" ] || die "$suite Packages.xz has sha256 $got, InRelease lists $want"
  xz -dc "$d/$suite.Packages.xz" > "$d/$suite.Packages"
  log "$suite: InRelease signature good, Packages.xz sha256 $got matches"
}

# index_field SUITE PACKAGE VERSION FIELD: FIELD of that stanza in the verified index.
index_field() {
  awk -v p="$2" -v v="$3" -v f="$4:" '
    /^$/ { if (pk==p && ve==v && val!="") { done=1; exit } pk=""; ve=""; val="" }
    $1=="Package:" {pk=$2} $1=="Version:" {ve=$2} $1==f {val=$2}
    END { if (pk==p && ve==v && val!="") print val }' "$APT_DIR/index/$1.Packages"
}

# newest_version SUITE PACKAGE: the highest version of PACKAGE in the verified index.
newest_version() {
  local best="" v
  for v in $(awk -v p="$2" '$1=="Package:"{pk=$2} $1=="Version:" && pk==p {print $2}' \
    "$APT_DIR/index/$1.Packages"); do
    if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then best=$v; fi
  done
  printf '%s\n' "$best"
}

# The upstream part of a Debian version: 1:4.3-1~exp2 -> 4.3, 1.4.3+ds1-1 -> 1.4.3.
upstream() { local v=${1#*:}; v=${v%-*}; v=${v%%+*}; v=${v%%~*}; printf '%s\n' "$v"; }

# fetch_verified SUITE... -- PKG=VER...: download into $APT_DIR/cache/archives and check every .deb
# against the sha256 of the verified index of the suite that lists it. Prints the .deb paths.
fetch_verified() {
  local suites=() specs=() s spec pkg ver sum got deb found
  while [ "$1" != "--" ]; do suites+=("$1"); shift; done; shift
  specs=("$@")
  (cd "$APT_DIR/cache/archives" && locked apt-get "${APT_OPTS[@]}" download -qq "${specs[@]}") \
    >&2 || die "apt-get download ${specs[*]} failed"
  for spec in "${specs[@]}"; do
    pkg=${spec%%=*}; ver=${spec#*=}; sum=""
    for s in "${suites[@]}"; do
      sum=$(index_field "$s" "$pkg" "$ver" SHA256); [ -n "$sum" ] && break
    done
    [ -n "$sum" ] || die "$pkg $ver is in none of the verified indexes (${suites[*]})"
    found=""
    for deb in "$APT_DIR/cache/archives/${pkg}_"*.deb; do
      [ -e "$deb" ] || continue
      [ "$(dpkg-deb -f "$deb" Version)" = "$ver" ] || continue
      got=$(sha256sum "$deb" | awk '{print $1}')
      [ "$got" = "$sum" ] || die "$deb has sha256 $got; the signed index lists $sum"
      found=$deb
    done
    [ -n "$found" ] || die "apt-get download left no .deb for $pkg $ver"
    printf '%s\n' "$found"
  done
}

# closure SPEC...: PKG=VER of every package `apt-get install SPEC…` would install on an empty
# system (Depends and Pre-Depends, no Recommends).
closure() {
  apt-get "${APT_OPTS[@]}" -s install "$@" 2>&1 | awk '/^Inst /{gsub(/[()]/,""); print $2"="$3}' \
    | grep . || { apt-get "${APT_OPTS[@]}" -s install "$@" >&2 || true; die "no closure for $*"; }
}

declare -A CHOSEN=()
STAGES=()
trap 'for s in "${STAGES[@]}"; do rm -rf "$s"; done' EXIT

# install_pin NAME: resolve, verify, install and record one [debian.NAME] pin.
install_pin() {
  local name=$1 pkg pinned suite with prefix_base binary dest want ver prefix
  pkg=$(pin_field "$name" package); pinned=$(pin_field "$name" version)
  suite=$(pin_field "$name" suite); with=$(pin_field "$name" with)
  prefix_base=$(pin_field "$name" prefix); binary=$(pin_field "$name" binary)
  dest=$(pin_field "$name" dest)
  ver=$pinned
  if [ -z "$(index_field "$suite" "$pkg" "$pinned" SHA256)" ]; then
    ver=$(newest_version "$suite" "$pkg")
    [ -n "$ver" ] || die "$suite serves no $pkg at all (pin $pinned in host/pins.toml)"
    log "PIN MISMATCH: $suite no longer serves $pkg $pinned (host/pins.toml); installing the newest $suite version, $ver"
  fi
  CHOSEN[$name]=$ver
  prefix=$OPT/$prefix_base-$(upstream "$ver")
  local sum
  sum=$(index_field "$suite" "$pkg" "$ver" SHA256)
  # A record without binary_sha256 (a set-up before it was recorded), or one whose binary no
  # longer hashes to it, is installed again: netprobe matches a pin by that sha256.
  if [ -f "$prefix/netprobe-install.json" ] && grep -q "\"sha256\": \"$sum\"" "$prefix/netprobe-install.json" \
    && [ -f "$prefix/$dest" ] \
    && grep -q "\"binary_sha256\": \"$(sha256sum "$prefix/$dest" | awk '{print $1}')\"" "$prefix/netprobe-install.json" \
    && "$prefix/$dest" --version >/dev/null 2>&1; then
    log "$pkg $ver at $prefix already installed and runs; nothing to do"
    return 0
  fi
  local specs=("$pkg=$ver") w extra_pin
  for w in $with; do specs+=("$w=$ver"); done
  extra_pin=$(pin_field "$name" with_pin)
  if [ -n "$extra_pin" ]; then
    [ -n "${CHOSEN[$extra_pin]:-}" ] || die "[debian.$name] needs [debian.$extra_pin] installed first"
    for w in $(pin_field "$name" with_pin_packages); do specs+=("$w=${CHOSEN[$extra_pin]}"); done
  fi
  local all=() s
  closure "${specs[@]}" > "$APT_DIR/closure.txt" || exit 1
  mapfile -t all < "$APT_DIR/closure.txt"
  # Only the named packages and libraries go into the prefix (no other programs).
  local keep=()
  for s in "${all[@]}"; do
    case "${s%%=*}" in "$pkg"|lib*) keep+=("$s");; esac
  done
  local debs=()
  fetch_verified forky sid experimental -- "${keep[@]}" > "$APT_DIR/debs.txt" || exit 1
  mapfile -t debs < "$APT_DIR/debs.txt"
  local stage
  stage=$(mktemp -d "$OPT/.${prefix_base}-stage.XXXXXX")
  STAGES+=("$stage")
  local x="$stage/x" out="$stage/out" d
  mkdir -p "$x" "$out/lib" "$out/$(dirname "$dest")"
  for d in "${debs[@]}"; do dpkg-deb -x "$d" "$x"; done
  cp -a "$x/$binary" "$out/$dest"
  for d in "$x/lib/x86_64-linux-gnu" "$x/usr/lib/x86_64-linux-gnu"; do
    [ -d "$d" ] && find "$d" -maxdepth 1 \( -name '*.so*' -o -name 'ld-linux*' \) \
      -exec cp -a -t "$out/lib" {} +
  done
  [ -e "$out/lib/ld-linux-x86-64.so.2" ] || die "$name: no ld-linux-x86-64.so.2 among the libraries"
  patchelf --set-interpreter "$prefix/lib/ld-linux-x86-64.so.2" --force-rpath \
    --set-rpath "$prefix/lib" "$out/$dest"
  # Every library the binary needs must resolve inside the prefix (checked once installed).
  {
    printf '{\n  "pin": "%s",\n  "package": "%s",\n  "pinned_version": "%s",\n' "$name" "$pkg" "$pinned"
    printf '  "installed_version": "%s",\n  "suite": "%s",\n  "sha256": "%s",\n' "$ver" "$suite" "$sum"
    printf '  "binary": "%s",\n  "binary_sha256": "%s",\n  "debs": [\n' "$prefix/$dest" \
      "$(sha256sum "$out/$dest" | awk '{print $1}')"
    local i=0
    for d in "${debs[@]}"; do
      [ $i -gt 0 ] && printf ',\n'
      printf '    {"package": "%s", "version": "%s", "sha256": "%s"}' \
        "$(dpkg-deb -f "$d" Package)" "$(dpkg-deb -f "$d" Version)" "$(sha256sum "$d" | awk '{print $1}')"
      i=$((i + 1))
    done
    printf '\n  ]\n}\n'
  } > "$out/netprobe-install.json"
  rm -rf "$prefix.old"
  [ -e "$prefix" ] && mv "$prefix" "$prefix.old"
  mv "$out" "$prefix"
  rm -rf "$prefix.old" "$stage"
  if "$prefix/lib/ld-linux-x86-64.so.2" --list "$prefix/$dest" | grep -q 'not found'; then
    "$prefix/lib/ld-linux-x86-64.so.2" --list "$prefix/$dest" >&2
    die "$prefix/$dest: libraries missing from $prefix/lib"
  fi
  "$prefix/$dest" --version >/dev/null || die "$prefix/$dest --version failed"
  log "$pkg $ver ($suite, sha256 $sum) installed at $prefix: $("$prefix/$dest" --version | head -1)"
}

# all_current NAME…: every pin's prefix holds its pinned version, records its binary's sha256
# (which still holds) and its binary runs (no network).
all_current() {
  local n prefix
  for n in "$@"; do
    prefix=$OPT/$(pin_field "$n" prefix)-$(upstream "$(pin_field "$n" version)")
    grep -q "\"installed_version\": \"$(pin_field "$n" version)\"" "$prefix/netprobe-install.json" \
      2>/dev/null || return 1
    # The installed binary's sha256 is recorded (netprobe matches a pin by it) and still holds.
    grep -q "\"binary_sha256\": \"$(sha256sum "$prefix/$(pin_field "$n" dest)" 2>/dev/null | awk '{print $1}')\"" \
      "$prefix/netprobe-install.json" 2>/dev/null || return 1
    "$prefix/$(pin_field "$n" dest)" --version >/dev/null 2>&1 || return 1
  done
}

main() {
  [ "$(id -u)" = 0 ] || die "must run as root (/opt, dpkg)"
  local want=("$@")
  [ ${#want[@]} -gt 0 ] || read -r -a want <<< "$(pin_names)"
  if all_current "${want[@]}"; then
    log "every pin (${want[*]}) is installed at its pinned version and runs; nothing to do"
    return 0
  fi
  ensure_tools
  local uri names s
  uri=$(archive_uri)
  setup_private_apt "$uri"
  for s in forky sid experimental; do verify_suite "$uri" "$s"; done
  names=("$@")
  [ ${#names[@]} -gt 0 ] || read -r -a names <<< "$(pin_names)"
  # A pin named by another's with_pin is resolved first.
  local n
  for n in "${names[@]}"; do
    local wp
    wp=$(pin_field "$n" with_pin)
    if [ -n "$wp" ] && [ -z "${CHOSEN[$wp]:-}" ]; then install_pin "$wp"; fi
    [ -n "${CHOSEN[$n]:-}" ] || install_pin "$n"
  done
}
main "$@"
