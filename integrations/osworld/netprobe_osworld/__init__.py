"""netprobe as an OSWorld provider: a slot of netprobe's OCI reference arm is the "VM".

`NetprobeProvider` implements `desktop_env.providers.base.Provider` and `NetprobeVMManager`
implements `desktop_env.providers.base.VMManager` (desktop-env 1.0.2) on the netprobe binary:

- ``start_emulator``: ``netprobe slot provision`` of a fresh slot (then its ``init_state``
  snapshot), ``slot restore`` of a slot whose container a snapshot stopped, nothing for a slot
  already running;
- ``save_state``: ``slot snapshot`` then ``slot restore`` (the VM keeps running);
  ``revert_to_snapshot``: ``slot reset``;
- ``get_ip_address``: ``"ADDR:SERVER:CHROMIUM:VNC:VLC"`` from the slot's published ports;
- ``stop_emulator``: ``slot cleanup``.

A "path to VM" is a slot folder, ``<state dir>/slot-<N>``. A verb that fails raises
`NetprobeError` with netprobe's own message and exit code; its evidence stays in the slot.
"""

from .errors import NetprobeError, SlotPathError
from .manager import NetprobeVMManager
from .provider import NetprobeProvider, SlotPath
from .desktop import install_factory

__all__ = [
    "NetprobeError",
    "NetprobeProvider",
    "NetprobeVMManager",
    "SlotPath",
    "SlotPathError",
    "install_factory",
]
