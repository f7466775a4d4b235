"""One call of netprobe's OSWorld provider (integrations/osworld) as OSWorld's DesktopEnv makes
it, printing the verbs' --json outcomes as one JSON document on stdout:

  python provider_verb.py start|save|revert|stop|ip PATH_TO_VM [SNAPSHOT]

Configuration from the environment (NETPROBE_BIN, NETPROBE_PROFILE, NETPROBE_PUBLISH,
NETPROBE_PROVISION_ARGS). A failed verb exits 3 with NetprobeError's message and exit code on
stderr as JSON ({"verb", "exit_code", "message"}).
Run by tests/gnome/osworld_client.rs with the private venv of host/install-osworld-client.sh.
"""
import json
import sys

from desktop_env.providers.base import Provider
from netprobe_osworld import NetprobeError, NetprobeProvider


def main():
    verb, path = sys.argv[1], sys.argv[2]
    snap = sys.argv[3] if len(sys.argv) > 3 else "init_state"
    p = NetprobeProvider()
    assert isinstance(p, Provider)
    try:
        if verb == "start":
            out = p.start_emulator(path, True, "Ubuntu")
        elif verb == "save":
            out = p.save_state(path, snap)
        elif verb == "revert":
            out = {"path_to_vm": p.revert_to_snapshot(path, snap), "outcome": p.last_outcome}
        elif verb == "stop":
            out = p.stop_emulator(path)
        elif verb == "ip":
            out = {"ip": p.get_ip_address(path)}
        else:
            sys.exit("provider_verb: unknown verb %r" % verb)
    except NetprobeError as e:
        json.dump({"verb": e.verb, "exit_code": e.exit_code, "message": e.message}, sys.stderr)
        sys.exit(3)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
