#!/usr/bin/python3
"""netprobe desktop guest supervisor (stands in for the benchmark image's supervisor.py).

Runs as the container's init: starts the X server (Xorg with the dummy driver, or Xvfb; env
NETPROBE_X=xorg|xvfb), waits for its socket, starts the window manager (NETPROBE_WM=openbox, the
default, or gnome-shell: then a system D-Bus and upowerd are started first and GNOME Shell runs
as an X11 compositor on the session D-Bus with software rendering, no logind) and the typing app,
reaps every child (but those the HTTP server waits for itself, osworld_proc.py), and serves HTTP
on 0.0.0.0:$NETPROBE_PORT (default 5000): the OSWorld-compatible API (osworld_server.py) and
  GET /health -> 200 {"x": true, "wm": true, "app": true} when all three live, else 503.
Before the window manager it starts the session's D-Bus (unix:path=/run/user/0/bus, in the
environment of everything started after it) and the AT-SPI bus launcher on it, so the GTK typing
app registers with the accessibility bus and /accessibility sees it; the app is started once the
launcher has published the bus on the root window (AT_SPI_BUS), at most 20 s after the launcher.
Environment: DISPLAY (default :0), NETPROBE_GEOMETRY (WxHxD, default 1920x1080x24, Xvfb only),
GNOME_SHELL_SESSION_MODE (gnome-shell only, default "user"; the GNOME image ships "netprobe",
the user mode without the top-bar clock).
"""
import os
import subprocess
import threading
import time

import osworld_proc
import osworld_server

DISPLAY = os.environ.get("DISPLAY", ":0")
NUM = DISPLAY.lstrip(":").split(".")[0]
SOCKET = "/tmp/.X11-unix/X" + NUM
PORT = int(os.environ.get("NETPROBE_PORT", "5000"))
KIND = os.environ.get("NETPROBE_X", "xorg")
WM = os.environ.get("NETPROBE_WM", "openbox")
GEOM = os.environ.get("NETPROBE_GEOMETRY", "1920x1080x24")
RUNTIME = "/run/user/0"
SESSION_BUS = RUNTIME + "/bus"
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
    """Reaps exited children, orphans included, but leaves the HTTP server's own children
    (osworld_proc) to the server's wait: peek (WNOWAIT), then reap only what may be reaped."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            time.sleep(0.2)
            continue
        if info is None:
            continue
        with osworld_proc.LOCK:
            mine = osworld_proc.may_reap(info.si_pid)
            if mine:
                try:
                    os.waitpid(info.si_pid, 0)
                except ChildProcessError:
                    pass
        if mine:
            with lock:
                alive.pop(info.si_pid, None)
        else:
            time.sleep(0.005)  # the server's own wait takes it


def running(name):
    with lock:
        return name in alive.values()


def health():
    return {n: running(n) for n in ("x", "wm", "app")}


def session_bus():
    """The session's D-Bus and the AT-SPI bus launcher on it; their address in os.environ."""
    os.makedirs(RUNTIME, mode=0o700, exist_ok=True)
    os.environ.update(XDG_RUNTIME_DIR=RUNTIME, DBUS_SESSION_BUS_ADDRESS="unix:path=" + SESSION_BUS)
    spawn("dbus-session", ["dbus-daemon", "--session", "--nofork", "--nopidfile",
                           "--address=unix:path=" + SESSION_BUS])
    deadline = time.monotonic() + 10
    while not os.path.exists(SESSION_BUS) and time.monotonic() < deadline:
        time.sleep(0.05)
    spawn("a11y", ["/usr/libexec/at-spi-bus-launcher", "--launch-immediately"])


def wait_a11y_bus(limit):
    """Waits (at most `limit` s) until the root window carries AT_SPI_BUS; True when it does."""
    from Xlib import X, display
    deadline = time.monotonic() + limit
    d = display.Display(DISPLAY)
    try:
        atom = d.intern_atom("AT_SPI_BUS")
        while time.monotonic() < deadline:
            if d.screen().root.get_full_property(atom, X.AnyPropertyType):
                return True
            time.sleep(0.05)
        return False
    finally:
        d.close()


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
    spawn("wm", ["gnome-shell", "--x11", "--replace"],
          XDG_SESSION_TYPE="x11", LIBGL_ALWAYS_SOFTWARE="1",
          HOME="/root", XDG_CURRENT_DESKTOP="GNOME",
          GNOME_SHELL_SESSION_MODE=os.environ.get("GNOME_SHELL_SESSION_MODE", "user"))


def main():
    os.environ.setdefault("DISPLAY", DISPLAY)
    os.environ.setdefault("HOME", "/root")
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
        session_bus()
        if WM == "gnome-shell":
            gnome_shell()
            time.sleep(3)
        else:
            spawn("wm", ["openbox", "--sm-disable"])
            time.sleep(0.5)
        if not wait_a11y_bus(20):
            print("supervisor: no AT_SPI_BUS on the root window after 20 s", flush=True)
        spawn("app", ["/usr/bin/python3", "/opt/netprobe/typing_app.py"])
    osworld_server.serve(PORT, health)


if __name__ == "__main__":
    main()
