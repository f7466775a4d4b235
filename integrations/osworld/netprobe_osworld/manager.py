"""`NetprobeVMManager`: OSWorld's VMManager over netprobe slot folders.

The registry is a JSON file beside the state directory (``<state dir>.osworld.json``, never
inside it: the state directory is netprobe's), ``{"<slot path>": <pid or null>}``, read and
written under an exclusive ``flock`` and replaced atomically.
"""

import contextlib
import fcntl
import json
import os
import tempfile

from desktop_env.providers.base import VMManager

from .provider import SlotPath


def _alive(pid):
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class NetprobeVMManager(VMManager):
    """Hands out slot folders ``<state_dir>/slot-<N>`` (state_dir from the argument or
    NETPROBE_STATE_DIR, default /var/lib/netprobe/osworld-slots), one per live process."""

    def __init__(self, state_dir=None, first_slot=0):
        self.state_dir = os.path.abspath(
            state_dir or os.environ.get("NETPROBE_STATE_DIR", "/var/lib/netprobe/osworld-slots"))
        self.first_slot = first_slot
        self.registry = self.state_dir.rstrip("/") + ".osworld.json"

    @contextlib.contextmanager
    def _locked(self):
        os.makedirs(os.path.dirname(self.registry), exist_ok=True)
        with open(self.registry + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                with open(self.registry) as f:
                    reg = json.load(f)
            except FileNotFoundError:
                reg = {}
            before = dict(reg)
            yield reg
            if reg != before:
                fd, tmp = tempfile.mkstemp(dir=os.path.dirname(self.registry), prefix=".osworld.")
                with os.fdopen(fd, "w") as f:
                    json.dump(reg, f, indent=1, sort_keys=True)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.registry)

    def initialize_registry(self, **kwargs):
        with self._locked():
            pass

    def add_vm(self, vm_path, **kwargs):
        path = str(SlotPath.parse(vm_path))
        with self._locked() as reg:
            reg.setdefault(path, None)

    def delete_vm(self, vm_path, **kwargs):
        with self._locked() as reg:
            reg.pop(str(SlotPath.parse(vm_path)), None)

    def occupy_vm(self, vm_path, pid, **kwargs):
        with self._locked() as reg:
            reg[str(SlotPath.parse(vm_path))] = int(pid)

    def list_free_vms(self, **kwargs):
        with self._locked() as reg:
            return sorted(p for p, pid in reg.items() if not _alive(pid) and not os.path.exists(p))

    def check_and_clean(self, **kwargs):
        """Forgets slots whose process is gone and whose folder was never made."""
        with self._locked() as reg:
            for p in [p for p, pid in reg.items() if not _alive(pid) and not os.path.exists(p)]:
                del reg[p]

    def get_vm_path(self, **kwargs):
        """A slot folder no live process holds and no slot uses yet (the lowest number from
        ``first_slot``), registered and occupied by this process. A slot folder that exists is
        never handed out again: netprobe provisions a slot only once."""
        with self._locked() as reg:
            n = self.first_slot
            while True:
                path = str(SlotPath(self.state_dir, n))
                if not os.path.exists(path) and not _alive(reg.get(path)):
                    reg[path] = os.getpid()
                    return path
                n += 1
