#!/usr/bin/python3
"""netprobe desktop guest supervisor (stands in for the benchmark image's supervisor.py).

Runs as the container's init: starts the X server (Xorg with the dummy driver, or Xvfb; env
NETPROBE_X=xorg|xvfb), waits for its socket, starts the window manager (NETPROBE_WM=openbox, the
default, or gnome-shell: then a system D-Bus and upowerd are started first and GNOME Shell runs
as an X11 compositor in a session D-Bus with software rendering, no logind) and the typing app,
reaps every child, and serves HTTP on 0.0.0.0:$NETPROBE_PORT (default 5000):
  GET /health -> 200 {"x":true,"wm":true,"app":true} when all three live, else 503.
Environment: DISPLAY (default :0), NETPROBE_GEOMETRY (WxHxD, default 1920x1080x24, Xvfb only),
GNOME_SHELL_SESSION_MODE (gnome-shell only, default "user"; the GNOME image ships "netprobe",
the user mode without the top-bar clock).
"""
import http.server
import json
import os
import subprocess
import threading
import time

DISPLAY = os.environ.get("DISPLAY", ":0")
NUM = DISPLAY.lstrip(":").split(".")[0]
SOCKET = "/tmp/.X11-unix/X" + NUM
PORT = int(os.environ.get("NETPROBE_PORT", "5000"))
KIND = os.environ.get("NETPROBE_X", "xorg")
WM = os.environ.get("NETPROBE_WM", "openbox")
GEOM = os.environ.get("NETPROBE_GEOMETRY", "1920x1080x24")
alive = {}
lock = threading.Lock()


def spawn(name, argv, **env):
    log = open("/tmp/%s.log" % name, "ab")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         env=dict(os.environ, DISPLAY=DISPLAY, **env))
    with lock:
        alive[p.pid] = name
    return p


def reaper():
    while True:
        try:
            pid, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            time.sleep(0.2)
            continue
        with lock:
            alive.pop(pid, None)


def running(name):
    with lock:
        return name in alive.values()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        state = {n: running(n) for n in ("x", "wm", "app")}
        ok = self.path == "/health" and all(state.values())
        body = json.dumps(state).encode()
        self.send_response(200 if ok else 503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def system_bus():
    """A system D-Bus (GNOME Shell 43's PowerToggle needs it) and upowerd on it."""
    os.makedirs("/run/dbus", exist_ok=True)
    # Debian's system.conf drops to the messagebus user; CRIU must then read that process's
    # rlimits across uids, which needs CAP_SYS_RESOURCE (absent on some hosts): run it as root.
    with open("/usr/share/dbus-1/system.conf") as f:
        conf = "".join(l for l in f if "<user>" not in l)
    with open("/run/netprobe-system-bus.conf", "w") as f:
        f.write(conf)
    spawn("dbus-system", ["dbus-daemon", "--config-file=/run/netprobe-system-bus.conf",
                          "--nofork", "--nopidfile"])
    deadline = time.monotonic() + 10
    while not os.path.exists("/run/dbus/system_bus_socket") and time.monotonic() < deadline:
        time.sleep(0.05)
    spawn("upower", ["/usr/libexec/upowerd"])


def gnome_shell():
    runtime = "/run/user/0"
    os.makedirs(runtime, mode=0o700, exist_ok=True)
    spawn("wm", ["dbus-run-session", "--", "gnome-shell", "--x11", "--replace"],
          XDG_SESSION_TYPE="x11", XDG_RUNTIME_DIR=runtime, LIBGL_ALWAYS_SOFTWARE="1",
          HOME="/root", XDG_CURRENT_DESKTOP="GNOME",
          GNOME_SHELL_SESSION_MODE=os.environ.get("GNOME_SHELL_SESSION_MODE", "user"))


def main():
    threading.Thread(target=reaper, daemon=True).start()
    if WM == "gnome-shell":
        system_bus()
    if KIND == "xvfb":
        spawn("x", ["Xvfb", DISPLAY, "-screen", "0", GEOM, "-nolisten", "tcp", "-noreset"])
    else:
        spawn("x", ["Xorg", DISPLAY, "-config", "/etc/X11/netprobe-dummy.conf", "-novtswitch",
                    "-sharevts", "-nolisten", "tcp", "-noreset", "-logfile", "/tmp/Xorg.log"])
    deadline = time.monotonic() + 30
    while not os.path.exists(SOCKET) and time.monotonic() < deadline and running("x"):
        time.sleep(0.05)
    if os.path.exists(SOCKET):
        if WM == "gnome-shell":
            gnome_shell()
            time.sleep(3)
        else:
            spawn("wm", ["openbox", "--sm-disable"])
            time.sleep(0.5)
        spawn("app", ["/usr/bin/python3", "/opt/netprobe/typing.py"])
    http.server.ThreadingHTTPServer(("0.0.0.0", PORT), Handler).serve_forever()


if __name__ == "__main__":
    main()
