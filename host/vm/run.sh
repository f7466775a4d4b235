#!/usr/bin/env bash
# Boot netprobe's test-host VM, run one shell command inside as root, bring its output back.
#
#   bash host/vm/run.sh --out DIR [--image DIR] [--put PATH]... [--timeout SECS]
#                       [--kernel SUITE] [--accel auto|tcg|kvm] [--ssh-port PORT] -- 'COMMAND'
#
# The command runs in the guest by /bin/sh with its working directory /io/out; files put with
# --put are under /io/in (read-only by convention). When it ends, DIR (which must not exist)
# holds everything the command left in /io/out plus: stdout, stderr, rc (its exit code),
# started/finished (epoch seconds), journal.txt (the guest's journal of that boot),
# console.log (the serial console), vm.json (how the VM was run).
#
# The VM: qemu-system-x86_64 -smp 2 -m 2048, TCG (KVM only when `--accel kvm`, or with `auto`
# when a short boot probe on this host, remembered per boot id, has proven it works), -kernel/
# -initrd from the image, root disk read-only through snapshot=on (writes go to a deleted
# temporary file, the cached image never changes), a second raw ext4 disk made with
# `mkfs.ext4 -d` carries the command in and the results out (read back with debugfs rdump: no
# loop device, no mount on the host), no network device — unless --ssh-port PORT: then one
# user-mode NIC (10.0.2.15/24 in the guest, no route out but qemu's own) whose guest port 22 is
# forwarded from 127.0.0.1:PORT on the host, for a command that starts sshd
# (host/vm/fleet-guest.sh; tests/common/fleet_play.rs, run by tests/vm/vm.rs).
#
# A guest kernel panic before the command reports (TCG is an emulator; it happened once in CI)
# boots the VM again, at most NETPROBE_VM_PANIC_RETRIES (default 1) more times; each panicked
# attempt's console and output are kept in DIR/attempt-N/ and counted in vm.json.
#
# Always stops the VM: the boot is bounded by --timeout (default 600 s); a guest that does not
# power off by then is killed (SIGTERM, then SIGKILL) and reported. On exit, also on error or
# signal, the qemu process and the temporary directory (io disk, console log) are gone.
#
# Exit: the command's exit code when it ran; 3 host refused (not root, tool or image missing);
# 4 the VM did not boot, hung, was killed (the signal named, and its sender when qemu says) or
# did not report (the reason on stderr, the console's tail too).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log() { printf 'vm-run: %s\n' "$*" >&2; }
die() { log "$2"; exit "$1"; }

OUT="" IMAGE="" TIMEOUT=600 KERNEL="" ACCEL=${NETPROBE_VM_ACCEL:-auto} SSH_PORT=
PUTS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --image) IMAGE=$2; shift 2 ;;
    --put) PUTS+=("$2"); shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --kernel) KERNEL=$2; shift 2 ;;
    --accel) ACCEL=$2; shift 2 ;;
    --ssh-port) SSH_PORT=$2; shift 2 ;;
    --) shift; break ;;
    *) die 2 "unknown option $1 (see the header of host/vm/run.sh)" ;;
  esac
done
[ $# -ge 1 ] || die 2 "no command given: run.sh --out DIR -- 'COMMAND'"
CMD=$*
[ -n "$OUT" ] || die 2 "--out DIR is required"
[ ! -e "$OUT" ] || die 2 "--out $OUT exists: results are never written over"
[ "$(id -u)" = 0 ] || die 3 "must run as root"
case "$ACCEL" in auto|tcg|kvm) ;; *) die 2 "--accel must be auto, tcg or kvm" ;; esac
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] || die 2 "--timeout must be whole seconds"
NIC=(-nic none)
if [ -n "$SSH_PORT" ]; then
  [[ "$SSH_PORT" =~ ^[0-9]+$ ]] && [ "$SSH_PORT" -ge 1024 ] && [ "$SSH_PORT" -le 65535 ] \
    || die 2 "--ssh-port must be a port number from 1024 to 65535"
  NIC=(-nic "user,model=virtio-net-pci,restrict=on,hostfwd=tcp:127.0.0.1:$SSH_PORT-:22")
fi
for t in qemu-system-x86_64 mkfs.ext4 debugfs timeout; do
  command -v "$t" >/dev/null || die 3 "missing $t: apt-get install -y qemu-system-x86 e2fsprogs"
done
if [ -z "$IMAGE" ]; then
  IMAGE=$(bash "$here/build-image.sh") || die $? "image build failed"
fi
[ -f "$IMAGE/done" ] && [ -f "$IMAGE/root.img" ] || die 3 "$IMAGE is not a built image (no done marker)"
vmlinuz=$IMAGE/vmlinuz initrd=$IMAGE/initrd.img
if [ -n "$KERNEL" ]; then
  vmlinuz=$IMAGE/vmlinuz-$KERNEL initrd=$IMAGE/initrd-$KERNEL
  [ -f "$vmlinuz" ] || die 3 "no kernel $KERNEL in $IMAGE: build with build-image.sh --suite-kernel $KERNEL"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/netprobe-vm.XXXXXX")
QPID=""
cleanup() {
  if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then
    kill -TERM "$QPID" 2>/dev/null || true
    sleep 1
    kill -KILL "$QPID" 2>/dev/null || true
    wait "$QPID" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# boot IMG_ACCEL IODIR BOUND CONSOLE: boot once; sets BOOT_RC (qemu's exit, 124 when the bound hit).
boot() {
  local accel=$1 io=$2 bound=$3 console=$4 size
  size=$(( $(du -sm "$io" | cut -f1) + 768 ))
  mkfs.ext4 -q -F -L netprobe-io -d "$io" "$work/io.img" "${size}M" >/dev/null
  # TCG runs both vCPUs on one host thread (thread=single): under multi-threaded TCG a guest
  # kernel's cross-CPU code patching (text_poke_bp's int3) was seen executed stale on the other
  # vCPU, "Oops: int3" in __schedule during CRIU's dump (trixie's 6.12 kernel, twice in one CI
  # run). One thread runs one vCPU at a time, so a patch is seen by the next block translated.
  local acc=(-accel "$accel")
  [ "$accel" = kvm ] && acc+=(-cpu host)
  [ "$accel" = tcg ] && acc=(-accel tcg,thread=single)
  QEMU_ACCEL=$(IFS=' '; echo "${acc[*]}")
  qemu-system-x86_64 "${acc[@]}" -smp 2 -m 2048 -nodefaults -display none \
    -no-reboot -serial "file:$console" -monitor none "${NIC[@]}" \
    -kernel "$vmlinuz" -initrd "$initrd" \
    -append "root=/dev/vda rw console=ttyS0 panic=-1 systemd.show_status=1" \
    -drive "file=$IMAGE/root.img,format=raw,if=virtio,snapshot=on" \
    -drive "file=$work/io.img,format=raw,if=virtio" 2>"$work/qemu-stderr.txt" &
  QPID=$!
  local waited=0
  while kill -0 "$QPID" 2>/dev/null && [ "$waited" -lt "$bound" ]; do
    sleep 1; waited=$((waited + 1))
  done
  if kill -0 "$QPID" 2>/dev/null; then
    kill -TERM "$QPID" 2>/dev/null || true
    sleep 2
    kill -KILL "$QPID" 2>/dev/null || true
    wait "$QPID" 2>/dev/null || true
    BOOT_RC=124
  else
    BOOT_RC=0
    wait "$QPID" || BOOT_RC=$?
  fi
  QPID=""
  BOOT_SECONDS=$waited
}

# KVM only where a short boot probe proved it here (remembered per boot id in the cache).
choose_accel() {
  accel=$ACCEL
  [ "$ACCEL" != auto ] && return
  accel=tcg
  [ -c /dev/kvm ] || return
  local cache=${NETPROBE_VM_CACHE:-/var/cache/netprobe/vm} bid memo
  bid=$(cat /proc/sys/kernel/random/boot_id)
  memo="$cache/kvm-probe-$bid"
  if [ ! -f "$memo" ]; then
    mkdir -p "$work/probe/out"
    printf 'true\n' >"$work/probe/cmd.sh"
    boot kvm "$work/probe" 30 "$work/probe-console.log"
    if [ "$BOOT_RC" = 0 ] && debugfs -R "cat /out/rc" "$work/io.img" 2>/dev/null | grep -qx 0; then
      echo kvm >"$memo"
    else
      { echo "tcg (kvm probe: qemu exit $BOOT_RC after ${BOOT_SECONDS}s)"; tail -5 "$work/qemu-stderr.txt"; } >"$memo"
    fi
    rm -f "$work/io.img"
  fi
  accel=$(head -1 "$memo" | cut -d' ' -f1)
}

choose_accel
mkdir -p "$work/io/in" "$work/io/out"
for p in "${PUTS[@]}"; do cp -a "$p" "$work/io/in/"; done
printf '%s\n' "$CMD" >"$work/io/cmd.sh"
kver_file=$IMAGE/kernel-version
[ -n "$KERNEL" ] && kver_file=$IMAGE/kernel-version-$KERNEL
kver=$(cat "$kver_file" 2>/dev/null || echo unknown)

# The guest's own kernel can die under TCG before the command reports (seen in CI under multi-threaded TCG: a 6.12
# guest, "Kernel panic - not syncing: Fatal exception in interrupt" in __schedule during CRIU's
# dump). That is the emulator's or the guest kernel's failure, not the command's: boot again, at
# most PANIC_RETRIES more times, and keep every failed attempt's console and output beside the
# result (attempt-N/), named in vm.json. Anything else that stops the command is not retried.
PANIC_RETRIES=${NETPROBE_VM_PANIC_RETRIES:-1}
[[ "$PANIC_RETRIES" =~ ^[0-9]+$ ]] || die 2 "NETPROBE_VM_PANIC_RETRIES must be a whole number"
attempt=0 panics=0 QEMU_ACCEL=""
mkdir -p "$work/attempts"
while :; do
  attempt=$((attempt + 1))
  log "booting $(basename "$vmlinuz") ($kver) with $accel, bound ${TIMEOUT}s (attempt $attempt)"
  rm -f "$work/console.log"
  boot "$accel" "$work/io" "$TIMEOUT" "$work/console.log"
  rm -rf "$work/result"
  mkdir -p "$work/result"
  debugfs -R "rdump /out $work/result" "$work/io.img" >"$work/debugfs.log" 2>&1 || true
  if [ -f "$work/result/out/rc" ] || [ "$BOOT_RC" = 124 ] \
    || ! grep -q 'Kernel panic - not syncing' "$work/console.log"; then
    break
  fi
  panics=$((panics + 1))
  keep=$work/attempts/attempt-$attempt
  mkdir -p "$keep"
  [ -d "$work/result/out" ] && mv "$work/result/out" "$keep/out"
  cp "$work/console.log" "$keep/console.log"
  cp "$work/qemu-stderr.txt" "$keep/qemu-stderr.txt" 2>/dev/null || true
  log "the guest kernel panicked before the command reported (attempt $attempt):"
  grep -m1 -B2 -A12 -E 'BUG:|Oops|general protection|Kernel panic' "$work/console.log" \
    | sed 's/^/vm-run:   /' >&2 || true
  [ "$panics" -le "$PANIC_RETRIES" ] || break
  log "booting again: a guest kernel panic is not the command's result (kept in attempt-$attempt/)"
done

mkdir -p "$(dirname "$OUT")"
if [ -d "$work/result/out" ]; then mv "$work/result/out" "$OUT"; else mkdir "$OUT"; fi
cp "$work/console.log" "$OUT/console.log" 2>/dev/null || true
cp "$work/qemu-stderr.txt" "$OUT/qemu-stderr.txt" 2>/dev/null || true
for a in "$work"/attempts/attempt-*; do [ -d "$a" ] && mv "$a" "$OUT/"; done
printf '{"accel":"%s","qemu_accel":"%s","kernel":"%s","kernel_version":"%s","image":"%s","timeout_s":%s,"seconds":%s,"qemu_exit":%s,"attempts":%s,"guest_kernel_panics":%s}\n' \
  "$accel" "$QEMU_ACCEL" "$(basename "$vmlinuz")" "$kver" "$IMAGE" "$TIMEOUT" "$BOOT_SECONDS" "$BOOT_RC" "$attempt" "$panics" >"$OUT/vm.json"
if [ "$BOOT_RC" = 124 ]; then
  tail -20 "$OUT/console.log" >&2 || true
  die 4 "the guest did not power off within ${TIMEOUT}s: killed (console tail above, all in $OUT/console.log)"
fi
if [ ! -f "$OUT/rc" ]; then
  tail -20 "$OUT/console.log" >&2 || true
  if [ "$panics" -gt 0 ]; then
    die 4 "the guest kernel panicked in each of $attempt boot(s) before the command reported (consoles in $OUT/attempt-*/ and $OUT/console.log)"
  fi
  # qemu ended by a signal: SIGKILL shows as wait's 128+N; SIGTERM/SIGINT/SIGHUP make qemu
  # itself end (exit 0) after saying "terminating on signal N from pid P (COMM)" on stderr.
  said=$(grep -o 'terminating on signal [0-9]* from pid [0-9]*\( ([^)]*)\)\?' "$OUT/qemu-stderr.txt" 2>/dev/null | head -1 || true)
  sig=""
  if [ "$BOOT_RC" -gt 128 ]; then sig=$((BOOT_RC - 128)); fi
  if [ -n "$said" ]; then sig=$(echo "$said" | awk '{print $4}'); fi
  if [ -n "$sig" ]; then
    by="by a process run.sh does not know (qemu cannot say who sends SIGKILL)"
    [ "$sig" != 9 ] && by="by a sender qemu did not name"
    [ -n "$said" ] && by="by pid ${said#*from pid }"
    die 4 "qemu was killed by signal $sig (SIG$(kill -l "$sig" 2>/dev/null || echo '?')) $by after ${BOOT_SECONDS}s, before the command reported: the guest did not power off (qemu exit $BOOT_RC; console tail above)"
  fi
  die 4 "the guest powered off without running the command (qemu exit $BOOT_RC; console tail above)"
fi
rc=$(cat "$OUT/rc")
log "command exit $rc after ${BOOT_SECONDS}s of VM; results in $OUT"
exit "$rc"
