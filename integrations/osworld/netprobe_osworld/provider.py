"""`NetprobeProvider`: OSWorld's Provider interface on the netprobe binary's slot verbs."""

import json
import os
import re
import subprocess
from dataclasses import dataclass

from desktop_env.providers.base import Provider

from .errors import NetprobeError, SlotPathError

#: OSWorld's guest ports, in the order ``get_ip_address`` reports them (server, chromium, vnc,
#: vlc): desktop_env's DesktopEnv splits ``"ip:server:chromium:vnc:vlc"``.
OSWORLD_GUEST_PORTS = (5000, 9222, 8006, 8080)

#: Phases of a slot whose container runs (nothing to start) and whose container a snapshot or
#: a failed restore stopped (start = restore). Names as netprobe's state.json writes them.
RUNNING_PHASES = {"ready", "running"}
RESTORABLE_PHASES = {"checkpointed", "restore-failed"}


@dataclass(frozen=True)
class SlotPath:
    """A slot folder ``<state_dir>/slot-<number>``: what this provider calls a "path to VM"."""

    state_dir: str
    number: int

    @classmethod
    def parse(cls, path_to_vm):
        """Parses ``<state dir>/slot-<N>``; raises `SlotPathError` naming the path otherwise."""
        path = os.path.normpath(str(path_to_vm))
        m = re.fullmatch(r"slot-([0-9]{1,9})", os.path.basename(path))
        if not m or not os.path.isabs(path):
            raise SlotPathError(
                "path_to_vm %r is not a slot folder: give an absolute <state dir>/slot-<N>, "
                "e.g. /var/lib/netprobe/slots/slot-0" % (path_to_vm,)
            )
        return cls(os.path.dirname(path), int(m.group(1)))

    def __str__(self):
        return os.path.join(self.state_dir, "slot-%d" % self.number)


class NetprobeProvider(Provider):
    """OSWorld's ``Provider`` on netprobe slots.

    Arguments (each also from the environment, in brackets):
    - ``netprobe``: the netprobe binary [NETPROBE_BIN], default ``netprobe`` on PATH;
    - ``profile``: the slot profile for provision [NETPROBE_PROFILE], e.g. profiles/gnome.toml;
    - ``publish``: ``[ADDR:]HOST_PORT:GUEST_PORT`` specs for provision [NETPROBE_PUBLISH,
      comma-separated]; the profile's ``[[network.publish]]`` apply too;
    - ``provision_args``: more provision arguments, e.g. ``["--probe-evidence", DIR]``
      [NETPROBE_PROVISION_ARGS, split like a shell would not: on whitespace];
    - ``initial_snapshot``: the snapshot a fresh slot's ``start_emulator`` takes right after
      provision (default ``"init_state"``, OSWorld's; None: none), so that
      ``revert_to_snapshot`` has one to go back to;
    - ``timeout_s``: the longest one verb may take, seconds (default 900).
    ``region`` is OSWorld's and unused.
    """

    def __init__(self, region=None, netprobe=None, profile=None, publish=None,
                 provision_args=None, initial_snapshot="init_state", timeout_s=900):
        super().__init__(region)
        env = os.environ
        self.netprobe = netprobe or env.get("NETPROBE_BIN", "netprobe")
        self.profile = profile or env.get("NETPROBE_PROFILE")
        if publish is None:
            publish = [p for p in env.get("NETPROBE_PUBLISH", "").split(",") if p]
        self.publish = list(publish)
        if provision_args is None:
            provision_args = env.get("NETPROBE_PROVISION_ARGS", "").split()
        self.provision_args = list(provision_args)
        self.initial_snapshot = initial_snapshot
        self.timeout_s = timeout_s
        self.snapshots = {}
        #: The ``--json`` outcome of the last verb that succeeded (e.g. a revert's reset).
        self.last_outcome = None

    # -- the netprobe binary -------------------------------------------------------------
    def _slot(self, verb, slot, extra=()):
        argv = [self.netprobe, "slot", verb, "--slot", str(slot.number),
                "--state-dir", slot.state_dir, "--json", *extra]
        try:
            p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                               text=True, timeout=self.timeout_s)
        except subprocess.TimeoutExpired as e:
            raise NetprobeError(verb, None, "did not finish within %s s" % self.timeout_s,
                                argv) from e
        except OSError as e:
            raise NetprobeError(verb, None, "cannot run %s: %s" % (self.netprobe, e),
                                argv) from e
        if p.returncode != 0:
            raise NetprobeError(verb, p.returncode, (p.stderr or p.stdout).strip(), argv)
        try:
            out = json.loads(p.stdout) if p.stdout.strip() else {}
        except ValueError as e:
            raise NetprobeError(verb, p.returncode,
                                "its --json output is not JSON: %s" % e, argv) from e
        self.last_outcome = out
        return out

    def status(self, path_to_vm):
        """``netprobe slot status --json`` of the slot, as a dict."""
        return self._slot("status", SlotPath.parse(path_to_vm))

    def phase(self, path_to_vm):
        """The slot's phase (``state.phase`` of ``slot status``), or None for no slot folder."""
        slot = SlotPath.parse(path_to_vm)
        if not os.path.isdir(str(slot)):
            return None
        return (self.status(path_to_vm).get("state") or {}).get("phase")

    # -- OSWorld's Provider --------------------------------------------------------------
    def start_emulator(self, path_to_vm, headless=True, os_type=None):
        """Provisions a fresh slot (then snapshots it as ``initial_snapshot`` and restores it,
        so it runs and can be reverted), restores a stopped one, or leaves a running one as it
        is. Returns the outcomes (``--json``) of the verbs it ran.

        Raises `NetprobeError` when the verb fails or the slot is in a phase no verb starts
        (e.g. ``clean``: a slot is never provisioned again in place; use a new slot number).
        """
        slot = SlotPath.parse(path_to_vm)
        phase = self.phase(path_to_vm)
        if phase is None:
            extra = []
            if self.profile:
                extra += ["--profile", self.profile]
            for spec in self.publish:
                extra += ["--publish", spec]
            out = [self._slot("provision", slot, extra + self.provision_args)]
            if self.initial_snapshot:
                out += self.save_state(path_to_vm, self.initial_snapshot)
            return out
        if phase in RUNNING_PHASES:
            return []
        if phase in RESTORABLE_PHASES:
            return [self._slot("restore", slot)]
        raise NetprobeError("start", None,
                            "slot %s is in phase %r: nothing starts it (a clean slot is never "
                            "provisioned again; give a new slot number)" % (slot, phase),
                            [])

    def get_ip_address(self, path_to_vm):
        """``"ADDR:SERVER:CHROMIUM:VNC:VLC"``: the host address and host ports published for
        guest ports 5000, 9222, 8006 and 8080 (0 for a guest port not published). Raises
        `NetprobeError` when the slot publishes no port for the guest server (5000)."""
        pub = published(self.status(path_to_vm))
        if OSWORLD_GUEST_PORTS[0] not in pub:
            raise NetprobeError("status", None,
                                "slot %s publishes no host port for the guest server (guest "
                                "port 5000): provision it with --publish 127.0.0.1:PORT:5000 or "
                                "a profile [[network.publish]]" % path_to_vm, [])
        addr = pub[OSWORLD_GUEST_PORTS[0]][0]
        ports = [str(pub[g][1]) if g in pub else "0" for g in OSWORLD_GUEST_PORTS]
        return ":".join([addr] + ports)

    def save_state(self, path_to_vm, snapshot_name):
        """``netprobe slot snapshot``, then ``slot restore``: a snapshot stops the container
        (CRIU's checkpoint), and an OSWorld VM keeps running after a snapshot. A slot holds one
        snapshot: its name is remembered so a revert to another name is refused rather than
        silently served. Returns both verbs' outcomes."""
        slot = SlotPath.parse(path_to_vm)
        snap = self._slot("snapshot", slot)
        self.snapshots[str(slot)] = snapshot_name
        return [snap, self._slot("restore", slot)]

    def revert_to_snapshot(self, path_to_vm, snapshot_name):
        """``netprobe slot reset``; returns ``path_to_vm`` (the slot does not move)."""
        slot = SlotPath.parse(path_to_vm)
        saved = self.snapshots.get(str(slot))
        if saved is not None and snapshot_name is not None and saved != snapshot_name:
            raise NetprobeError("reset", None,
                                "slot %s holds snapshot %r, not %r (one snapshot per slot)"
                                % (slot, saved, snapshot_name), [])
        self._slot("reset", slot)
        return path_to_vm

    def stop_emulator(self, path_to_vm, region=None, *args, **kwargs):
        """``netprobe slot cleanup`` (container, holder, published ports, mounts released;
        evidence kept)."""
        return self._slot("cleanup", SlotPath.parse(path_to_vm))


def published(status):
    """Guest port → (host address, host port) from a ``slot status --json`` document."""
    state = status.get("state") or {}
    out = {}
    for p in state.get("published_ports") or []:
        out[int(p["guest_port"])] = (p["host_addr"], int(p["host_port"]))
    return out
