#!/bin/sh
# The VM as one host of a fleet (tests/common/fleet_play.rs, run by tests/vm/vm.rs): run by host/vm/run.sh --ssh-port PORT
#   sh /io/in/fleet-guest.sh /io/in/KEY.pub [BOUND_S]
# Brings up the user-mode NIC (10.0.2.15/24, qemu's gateway 10.0.2.2), authorises the public
# key made by the test for root, starts sshd, and waits until the controller asks it to stop
# (`touch /run/netprobe-fleet-done` over SSH) or BOUND_S seconds (default 1200) have passed;
# then stops sshd and ends (run.sh's unit powers the VM off).
set -u
KEY=${1:?usage: fleet-guest.sh KEY.pub [BOUND_S]}
BOUND=${2:-1200}
say() { echo "fleet-guest: $*" >/dev/console; echo "$*"; }
nic=$(ls /sys/class/net | grep -v '^lo$' | head -1)
[ -n "$nic" ] || { say "no network interface (run.sh without --ssh-port?)"; exit 4; }
ip link set lo up
ip link set "$nic" up
ip addr add 10.0.2.15/24 dev "$nic"
ip route add default via 10.0.2.2
mkdir -p /root/.ssh
chmod 700 /root/.ssh
install -m 600 "$KEY" /root/.ssh/authorized_keys
ssh-keygen -A >/dev/null
systemctl start ssh || { say "sshd did not start"; systemctl status ssh --no-pager; exit 4; }
say "sshd up on $nic ($(uname -r))"
i=0
while [ ! -e /run/netprobe-fleet-done ] && [ "$i" -lt "$BOUND" ]; do
  sleep 1
  i=$((i + 1))
done
systemctl stop ssh
if [ -e /run/netprobe-fleet-done ]; then say "stopped by the controller after ${i}s"; exit 0; fi
say "no stop from the controller within ${BOUND}s"
exit 4
