#!/bin/sh
# netprobe's tests inside the VM (run by host/vm/run.sh; tests/vm/vm.rs drives it):
#   sh /io/in/suite.sh /io/in/netprobe
# Each step writes steps/NAME.rc, steps/NAME.out, steps/NAME.err in the working directory
# (/io/out); evidence goes to ev-NAME/. The cgroup tree and systemd's units are listed before
# and after, so the host can prove nothing was left behind.
NP=${1:?usage: suite.sh NETPROBE}
mkdir -p steps
step() {
  name=$1; shift
  echo "step $name: $*" >/dev/console
  "$@" >"steps/$name.out" 2>"steps/$name.err" </dev/null
  echo $? >"steps/$name.rc"
}
facts() {
  {
    echo "pid1=$(cat /proc/1/comm)"
    echo "uname=$(uname -r)"
    grep -E ' - cgroup2? ' /proc/self/mountinfo | sed 's/^/mount=/'
    echo "controllers=$(cat /sys/fs/cgroup/cgroup.controllers)"
    echo "runc=$(runc --version | head -1)"
    echo "criu=$(/opt/criu-4.2.1/sbin/criu --version | head -1)"
  } >facts.txt
}
snapshot() {
  find /sys/fs/cgroup -type d | sort >"cgroups-$1.txt"
  systemctl list-units --all --no-legend --plain 'netprobe*' | awk '{print $1}' | sort >"units-$1.txt"
}
facts
snapshot before
step ladder "$NP" run --evidence ev-ladder --expect runtime-empty-ns
step cgroup-systemd "$NP" cgroup --driver systemd --daemon-reload --evidence ev-cgroup-systemd
step cgroup-default "$NP" cgroup --evidence ev-cgroup-default
step cgroup-cgroupfs "$NP" cgroup --driver cgroupfs --evidence ev-cgroup-cgroupfs
# The slot's whole cycle with the systemd driver on cgroup v2 (state under /io/out/slots, kept
# as evidence; CRIU 4.2.1 is the slot's default).
for v in provision snapshot restore reset cleanup; do
  extra=""
  [ "$v" = provision ] && extra="--cgroup-driver systemd --no-probe-gate --reason vm-slot-cycle"
  # shellcheck disable=SC2086
  step "slot-$v" "$NP" slot "$v" --slot 0 --state-dir /io/out/slots $extra --json
done
snapshot after
exit 0
