"""Child processes of the OSWorld-compatible server that the server waits for itself.

The server runs inside the container's init (supervisor.py, pid 1), whose reaper thread reaps
every exited child, orphans included. A child the server waits for must keep its exit status
for the server's own wait, so the reaper peeks with waitid(WNOWAIT) and, holding LOCK, reaps a
pid only when it is not in PIDS (may_reap). A child is started and registered under the same
lock, so it cannot be reaped between its start and its registration.

popen(argv, **kw) -> subprocess.Popen, registered; forget(p) after waiting for it.
run(argv, timeout, merge=False, **kw) -> subprocess.CompletedProcess (stdout, stderr as UTF-8
  text, undecodable bytes replaced; merge: stderr into stdout, stderr ""); the child killed and
  subprocess.TimeoutExpired raised after `timeout` seconds; OSError when it cannot start.
"""
import subprocess
import threading

LOCK = threading.Lock()
PIDS = set()


def may_reap(pid):
    """True when pid is no child the server waits for (the caller holds LOCK)."""
    return pid not in PIDS


def popen(argv, **kw):
    with LOCK:
        p = subprocess.Popen(argv, **kw)
        PIDS.add(p.pid)
    return p


def forget(p):
    with LOCK:
        PIDS.discard(p.pid)


def run(argv, timeout, merge=False, **kw):
    p = popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
              stderr=subprocess.STDOUT if merge else subprocess.PIPE,
              encoding="utf-8", errors="replace", **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise subprocess.TimeoutExpired(argv, timeout)
    finally:
        forget(p)
    return subprocess.CompletedProcess(argv, p.returncode, out, err or "")
