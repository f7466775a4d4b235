"""The /setup/* file and window routes and the recording routes of the OSWorld-compatible server
(a Flask blueprint). Text bodies as OSWorld's setup controller reads them.

POST /setup/change_wallpaper {path}: gsettings org.gnome.desktop.background picture-uri; 400
  "Path not supplied!", 404 "File not found: P".
POST /setup/download_file {url, path}: 3 tries -> "File downloaded successfully: N bytes"; 400
  "Path or URL not supplied!", 500 "Failed to download U. No retries left. Error: E".
POST /setup/open_file {path}: a file through xdg-open, else a program on PATH; then waits (30 min)
  for a window whose title holds its name and activates it (wmctrl); 400, 404 "Application/file
  not found: P", 500 when it cannot be opened or no window came.
POST /setup/activate_window, /setup/close_window {window_name, strict=false, by_class=false}:
  wmctrl -a / -c (x: by class, F: strict); 400 "window_name required".
POST /start_recording: ffmpeg x11grab of the screen with the pointer to /tmp/recording.mp4 ->
  {status, message}; 400 when one runs, 500 when ffmpeg is not in the image or exits at once.
POST /end_recording: SIGINT to ffmpeg -> the mp4 as an attachment; 400 when none runs, 500 when
  it had to be killed or wrote nothing.
"""
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from flask import Blueprint, abort, jsonify, request, send_file

import osworld_proc
from osworld_proc import run

OPEN_FILE_TIMEOUT = 1800
RECORDING = "/tmp/recording.mp4"
bp = Blueprint("osworld_setup", __name__)
recording = {"process": None}


def _path(raw):
    return Path(os.path.expandvars(os.path.expanduser(raw)))


@bp.route("/setup/change_wallpaper", methods=["POST"])
def change_wallpaper():
    raw = request.json.get("path", None)
    if not raw:
        return "Path not supplied!", 400
    path = _path(raw)
    if not path.exists():
        return "File not found: %s" % path, 404
    try:
        run(["gsettings", "set", "org.gnome.desktop.background", "picture-uri",
             "file://%s" % path], 30)
        return "Wallpaper changed successfully"
    except Exception as e:
        return "Failed to change wallpaper. Error: %s" % e, 500


@bp.route("/setup/download_file", methods=["POST"])
def download_file():
    data = request.json
    url, raw = data.get("url", None), data.get("path", None)
    if not url or not raw:
        return "Path or URL not supplied!", 400
    path = _path(raw)
    path.parent.mkdir(parents=True, exist_ok=True)
    error = None
    for _ in range(3):
        try:
            with urllib.request.urlopen(url, timeout=300) as r, open(path, "wb") as f:
                shutil.copyfileobj(r, f)
            return "File downloaded successfully: %d bytes" % path.stat().st_size
        except Exception as e:
            error = e
            if path.exists():
                path.unlink()
    return "Failed to download %s. No retries left. Error: %s" % (url, error), 500


def _find_window(names):
    """The wmctrl id of a window whose title holds one of names, or None."""
    try:
        listed = run(["wmctrl", "-l"], 10).stdout
    except Exception:
        return None
    for line in listed.splitlines():
        if any(n in line for n in names):
            return line.split()[0]
    return None


@bp.route("/setup/open_file", methods=["POST"])
def open_file():
    raw = request.json.get("path", None)
    if not raw:
        return "Path not supplied!", 400
    path = _path(raw)
    is_file = path.exists()
    if not is_file and not shutil.which(raw):
        return "Application/file not found: %s" % raw, 404
    try:
        argv = ["xdg-open", str(path)] if is_file else [raw]
        subprocess.Popen(argv, stdin=subprocess.DEVNULL)  # reaped by the init
        names = {path.name, os.path.splitext(path.name)[0]} if is_file else {raw}
        deadline = time.monotonic() + OPEN_FILE_TIMEOUT
        while time.monotonic() < deadline:
            wid = _find_window(names)
            if wid:
                run(["wmctrl", "-i", "-a", wid], 10)
                return "File opened and window activated successfully"
            time.sleep(1)
        return "Failed to find window for %s within %d seconds." % (raw, OPEN_FILE_TIMEOUT), 500
    except Exception as e:
        return "Failed to open %s. Error: %s" % (raw, e), 500


def _wmctrl(action):
    data = request.json
    name = data.get("window_name", None)
    if not name:
        return None
    flags = "-%s%s%s" % ("x" if data.get("by_class", False) else "",
                         "F" if data.get("strict", False) else "", action)
    run(["wmctrl", flags, name], 30)
    return name


@bp.route("/setup/activate_window", methods=["POST"])
def activate_window():
    if _wmctrl("a") is None:
        return "window_name required", 400
    return "Window activated successfully", 200


@bp.route("/setup/close_window", methods=["POST"])
def close_window():
    if _wmctrl("c") is None:
        return "window_name required", 400
    return "Window closed successfully.", 200


@bp.route("/start_recording", methods=["POST"])
def start_recording():
    p = recording["process"]
    if p is not None and p.poll() is None:
        return jsonify({"status": "error", "message": "Recording is already in progress."}), 400
    if shutil.which("ffmpeg") is None:
        return jsonify({"status": "error",
                        "message": "Failed to start recording: this guest image has no ffmpeg"}), 500
    if os.path.exists(RECORDING):
        os.remove(RECORDING)
    import osworld_x11
    w, h = osworld_x11.screen_size()
    argv = ["ffmpeg", "-y", "-f", "x11grab", "-draw_mouse", "1", "-s", "%dx%d" % (w, h),
            "-i", osworld_x11.DISPLAY, "-c:v", "libx264", "-r", "30", RECORDING]
    p = osworld_proc.popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    recording["process"] = p
    try:
        p.wait(timeout=2)
    except subprocess.TimeoutExpired:
        return jsonify({"status": "success", "message": "Started recording successfully."})
    err = p.stderr.read()
    osworld_proc.forget(p)
    recording["process"] = None
    return jsonify({"status": "error", "message": "Failed to start recording. ffmpeg terminated "
                    "unexpectedly. Error: %s" % err}), 500


@bp.route("/end_recording", methods=["POST"])
def end_recording():
    p = recording["process"]
    recording["process"] = None
    if p is None or p.poll() is not None:
        if p is not None:
            osworld_proc.forget(p)
        return jsonify({"status": "error", "message": "No recording in progress to stop."}), 400
    try:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        return jsonify({"status": "error", "message": "Recording process was unresponsive and "
                        "had to be killed. Stderr: %s" % err}), 500
    finally:
        osworld_proc.forget(p)
    if os.path.exists(RECORDING) and os.path.getsize(RECORDING) > 0:
        return send_file(RECORDING, as_attachment=True)
    abort(500, description="Recording failed. The output file is missing or empty. ffmpeg "
          "stderr: %s" % err)
