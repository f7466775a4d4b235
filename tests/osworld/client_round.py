"""One round of OSWorld's own client (desktop_env.controllers.python.PythonController from the
pinned desktop-env wheel, unchanged) against a slot's published guest server, as an agent
would act: screen size, a screenshot, the pointer, a computer_13 sequence (click into the
typing app, type a word, a hotkey), a screenshot after it, the accessibility tree, a bash
script. Writes OUT/before.png, OUT/after.png, OUT/a11y.xml and OUT/round.json; exits 1 naming
the call that returned nothing (the client logs its own errors and returns None).

Usage: python client_round.py --port HOST_PORT --out DIR --word WORD --click X,Y
Run by tests/gnome/osworld_client.rs with the private venv of host/install-osworld-client.sh.
"""
import argparse
import json
import os
import sys
import time

import requests
from desktop_env.controllers.python import PythonController


def need(what, value):
    if value is None:
        sys.exit("client_round: %s returned nothing (see the client's log above)" % what)
    return value


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--word", required=True)
    ap.add_argument("--click", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    c = PythonController("127.0.0.1", a.port)
    res = {"server": c.http_server}
    res["screen_size"] = need("get_vm_screen_size", c.get_vm_screen_size())
    res["platform"] = need("get_vm_platform", c.get_vm_platform())
    with open(os.path.join(a.out, "before.png"), "wb") as f:
        f.write(need("get_screenshot (before)", c.get_screenshot()))
    # The pointer the server drew into that screenshot (OSWorld's GET /cursor_position).
    res["cursor_before"] = requests.get(c.http_server + "/cursor_position", timeout=10).json()
    x, y = (int(v) for v in a.click.split(","))
    t = time.monotonic()
    for action in (
        {"action_type": "CLICK", "parameters": {"button": "left", "x": x, "y": y, "num_clicks": 1}},
        {"action_type": "TYPING", "parameters": {"text": a.word}},
        {"action_type": "HOTKEY", "parameters": {"keys": ["shift", "z"]}},
    ):
        c.execute_action(action)
    res["actions_ms"] = int((time.monotonic() - t) * 1000)
    time.sleep(1.0)
    with open(os.path.join(a.out, "after.png"), "wb") as f:
        f.write(need("get_screenshot (after)", c.get_screenshot()))
    res["cursor_after"] = requests.get(c.http_server + "/cursor_position", timeout=10).json()
    tree = need("get_accessibility_tree", c.get_accessibility_tree())
    with open(os.path.join(a.out, "a11y.xml"), "w") as f:
        f.write(tree)
    res["bash"] = need("run_bash_script", c.run_bash_script("echo netprobe-$((6 * 7))"))
    res["terminal"] = c.get_terminal_output()
    with open(os.path.join(a.out, "round.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
