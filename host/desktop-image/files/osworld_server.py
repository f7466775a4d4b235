"""netprobe's OSWorld-compatible guest server: the HTTP API that OSWorld's host-side client
(desktop_env.controllers.python.PythonController, and its setup controller) calls in the guest,
written here from the documented request and response shapes, plus netprobe's GET /health.

Started by supervisor.py (the container's init) through serve(port, health) on 0.0.0.0:port.
Flask (Debian's python3-flask), because OSWorld's own server is Flask: request parsing and the
error statuses it produces (415 for a body that is not JSON, 400 for malformed JSON, 405 for a
wrong method, 404 for an unknown path, 500 for an unexpected error) are then the same.

Endpoints (JSON bodies unless said; status 200 unless said):
  GET  /health            -> health(): 200 when every value is true, else 503 (supervisor.py)
  POST /execute, /setup/execute  {command: list|str, shell=false} -> {status, output, error,
       returncode}; 120 s limit; any failure (timeout, no such program) -> 500 {status, message}
  POST /execute_with_verification (and /setup/...) {command, shell, verification:
       {window_exists?, command_success?}, max_wait_time=10, check_interval=1}
  POST /setup/launch {command, shell} -> text "<command> launched successfully"; 500 on failure
  GET  /screenshot        -> image/png, the whole screen with the cursor (osworld_x11.py)
  GET  /accessibility     -> {"AT": xml} (osworld_a11y.py, AT-SPI); 500 {status, message}
  GET  /terminal          -> {output: str|null, status: "success"}; 500 {status, message}
  POST /screen_size       -> {width, height}
  POST /window_size form app_class_name -> {width, height}; 400 without it; 500 no such window
  POST /desktop_path      -> {desktop_path}; 404 {error} when ~/Desktop is missing
  POST /wallpaper         -> the GNOME background file (image/png); 404 none set, 500 unreadable
  POST /list_directory {path} -> {directory_tree}; 400 {error} no path / not a directory
  POST /file form file_path -> the file as an attachment; 400 without it, 404 missing
  POST /setup/upload form file_path + file file_data -> text "File Uploaded: N bytes"; 400, 500
  GET  /platform          -> text "Linux";  GET /cursor_position -> [x, y]
  POST /setup/change_wallpaper {path}, /setup/download_file {url, path}, /setup/open_file {path},
       /setup/activate_window {window_name, strict, by_class}, /setup/close_window (same) -> text
  POST /start_recording, /end_recording -> ffmpeg x11grab to /tmp/recording.mp4 (500 when the
       image has no ffmpeg; 400 when already recording / nothing recorded)
  POST /run_python {code} -> {status, message, need_more, output, error, return_code}; 30 s
  POST /run_bash_script {script, timeout=100, working_dir} -> {status, output, error, returncode}
Commands run as the server's user with its environment (DISPLAY of the guest's display, HOME).
Children the server waits for are started through osworld_proc, so the init's reaper leaves them
to their own wait and their exit status is the real one. /setup/* and the recording routes are in
osworld_setup.py, /run_python and /run_bash_script in osworld_scripts.py.
"""
import json
import os
import shlex
import subprocess
import time
from pathlib import Path

from flask import Flask, Response, abort, jsonify, request, send_file

import osworld_scripts
import osworld_setup
from osworld_proc import run

HERE = os.path.dirname(os.path.abspath(__file__))
EXECUTE_TIMEOUT = 120
A11Y_TIMEOUT = 60

app = Flask("osworld_server")


def command_of(data):
    """OSWorld's {command, shell}: a string without shell is split like a shell would; "~/"
    arguments are expanded. -> (command, shell)."""
    shell = data.get("shell", False)
    command = data.get("command", "" if shell else [])
    if isinstance(command, str) and not shell:
        command = shlex.split(command)
    if isinstance(command, list):
        command = [os.path.expanduser(a) if isinstance(a, str) and a.startswith("~/") else a
                   for a in command]
    return command, shell


def _execute(data):
    command, shell = command_of(data)
    return run(command, EXECUTE_TIMEOUT, shell=shell)


@app.route("/health", methods=["GET"])
def health():
    state = app.config["HEALTH"]()
    return Response(json.dumps(state), status=200 if all(state.values()) else 503,
                    mimetype="application/json")


@app.route("/execute", methods=["POST"])
@app.route("/setup/execute", methods=["POST"])
def execute():
    data = request.json
    try:
        r = _execute(data)
    except Exception as e:
        return jsonify({"status": "error", "message": str(e)}), 500
    return jsonify({"status": "success", "output": r.stdout, "error": r.stderr,
                    "returncode": r.returncode})


def _verified(verification):
    if "window_exists" in verification:
        try:
            listed = run(["wmctrl", "-l"], 10).stdout.lower()
        except Exception:
            return False
        if verification["window_exists"].lower() not in listed:
            return False
    if "command_success" in verification:
        try:
            if run(verification["command_success"], 5, shell=True).returncode != 0:
                return False
        except Exception:
            return False
    return True


@app.route("/execute_with_verification", methods=["POST"])
@app.route("/setup/execute_with_verification", methods=["POST"])
def execute_with_verification():
    data = request.json
    verification = data.get("verification", {})
    max_wait = data.get("max_wait_time", 10)
    interval = data.get("check_interval", 1)
    try:
        r = _execute(data)
        body = {"status": "success", "output": r.stdout, "error": r.stderr,
                "returncode": r.returncode}
        if not verification:
            return jsonify(body)
        start = time.time()
        while time.time() - start < max_wait:
            if _verified(verification):
                return jsonify(dict(body, verification="passed", wait_time=time.time() - start))
            time.sleep(interval)
        return jsonify(dict(body, status="verification_failed", verification="failed",
                            wait_time=max_wait)), 500
    except Exception as e:
        return jsonify({"status": "error", "message": str(e)}), 500


@app.route("/setup/launch", methods=["POST"])
def launch():
    data = request.json
    command, shell = command_of(data)
    try:
        # Not registered: nobody waits for it; the init's reaper reaps it when it exits.
        subprocess.Popen(command, shell=shell, stdin=subprocess.DEVNULL)
    except Exception as e:
        return jsonify({"status": "error", "message": str(e)}), 500
    return "{} launched successfully".format(command if shell else " ".join(command))


@app.route("/screenshot", methods=["GET"])
def screenshot():
    import osworld_x11
    return Response(osworld_x11.screenshot_png(), mimetype="image/png")


def _a11y(mode):
    r = run(["/usr/bin/python3", os.path.join(HERE, "osworld_a11y.py"), mode], A11Y_TIMEOUT)
    if r.returncode != 0:
        raise RuntimeError("osworld_a11y.py %s exited %d: %s" % (mode, r.returncode,
                                                                 r.stderr.strip()[-2000:]))
    return r.stdout


@app.route("/accessibility", methods=["GET"])
def accessibility():
    try:
        return jsonify({"AT": _a11y("tree")})
    except Exception as e:
        return jsonify({"status": "error", "message": str(e)}), 500


@app.route("/terminal", methods=["GET"])
def terminal():
    try:
        return jsonify({"output": json.loads(_a11y("terminal")), "status": "success"})
    except Exception as e:
        return jsonify({"status": "error", "message": str(e)}), 500


@app.route("/screen_size", methods=["POST"])
def screen_size():
    import osworld_x11
    w, h = osworld_x11.screen_size()
    return jsonify({"width": w, "height": h})


@app.route("/window_size", methods=["POST"])
def window_size():
    if "app_class_name" not in request.form:
        return jsonify({"error": "app_class_name is required"}), 400
    import osworld_x11
    found = osworld_x11.window_size(request.form["app_class_name"])
    if found is None:
        return jsonify({"error": "no window of class %s" % request.form["app_class_name"]}), 500
    return jsonify({"width": found[0], "height": found[1]})


@app.route("/desktop_path", methods=["POST"])
def desktop_path():
    path = os.path.join(str(Path.home()), "Desktop")
    if os.path.exists(path):
        return jsonify(desktop_path=path)
    return jsonify(error="Unsupported operating system or desktop path not found"), 404


@app.route("/wallpaper", methods=["POST"])
def wallpaper():
    try:
        out = run(["gsettings", "get", "org.gnome.desktop.background", "picture-uri"], 10)
        path = out.stdout.strip().replace("file://", "").replace("'", "") if out.returncode == 0 else ""
    except Exception:
        path = ""
    if not path:
        abort(404, description="Wallpaper file not found")
    try:
        return send_file(path, mimetype="image/png")
    except Exception:
        abort(500, description="Unable to serve the wallpaper file")


def _tree(directory):
    node = {"type": "directory", "name": os.path.basename(directory), "children": []}
    try:
        for entry in os.listdir(directory):
            full = os.path.join(directory, entry)
            node["children"].append(_tree(full) if os.path.isdir(full)
                                    else {"type": "file", "name": entry})
    except OSError as e:
        return {"error": str(e)}
    return node


@app.route("/list_directory", methods=["POST"])
def list_directory():
    data = request.get_json()
    if "path" not in data:
        return jsonify(error="Missing 'path' parameter"), 400
    if not os.path.isdir(data["path"]):
        return jsonify(error="The provided path is not a directory"), 400
    return jsonify(directory_tree=_tree(data["path"]))


@app.route("/file", methods=["POST"])
def get_file():
    if "file_path" not in request.form:
        return jsonify({"error": "file_path is required"}), 400
    path = os.path.expandvars(os.path.expanduser(request.form["file_path"]))
    if not os.path.exists(path):
        return jsonify({"error": "File not found"}), 404
    try:
        return send_file(path, as_attachment=True)
    except Exception as e:
        return jsonify({"error": "Failed to serve file: %s" % e}), 500


@app.route("/setup/upload", methods=["POST"])
def upload():
    if "file_path" not in request.form or "file_data" not in request.files:
        return jsonify({"error": "file_path and file_data are required"}), 400
    path = os.path.expandvars(os.path.expanduser(request.form["file_path"]))
    try:
        if os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        request.files["file_data"].save(path)
        return "File Uploaded: %d bytes" % os.path.getsize(path)
    except Exception as e:
        if os.path.exists(path):
            os.remove(path)
        return jsonify({"error": "Failed to upload file: %s" % e}), 500


@app.route("/platform", methods=["GET"])
def platform_name():
    return os.uname().sysname


@app.route("/cursor_position", methods=["GET"])
def cursor_position():
    import osworld_x11
    x, y = osworld_x11.pointer()
    return jsonify(x, y)


def serve(port, health):
    """Serves the API on 0.0.0.0:port until the process ends; health() -> {name: bool}."""
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_request(self, *args, **kwargs):
            pass

    app.config["HEALTH"] = health
    app.register_blueprint(osworld_setup.bp)
    app.register_blueprint(osworld_scripts.bp)
    make_server("0.0.0.0", port, app, threaded=True, request_handler=Quiet).serve_forever()
