"""/run_python and /run_bash_script of the OSWorld-compatible server (a Flask blueprint).

POST /run_python {code}: the code written to /tmp/python_exec_<hex>.py and run by
  /usr/bin/python3 (30 s) -> {status: success|error, message: stdout + stderr, need_more: false,
  output: stdout, error: stderr (or "Process exited with code N"), return_code}; 400 {status,
  message} without code; 500 {status, message, error, need_more, output: null} on a timeout or
  when it cannot run.
POST /run_bash_script {script, timeout=100, working_dir}: "#!/bin/bash" put first when the script
  lacks it, run by /bin/bash with stderr merged into stdout -> {status: success|error, output,
  error: "", returncode}; 400 (same shape, returncode -1) without a script or with a missing
  working_dir; 500 (same shape) on a timeout or when it cannot run.
"""
import os
import subprocess
import tempfile
import traceback
import uuid

from flask import Blueprint, jsonify, request

from osworld_proc import run

RUN_PYTHON_TIMEOUT = 30
bp = Blueprint("osworld_scripts", __name__)


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass


@bp.route("/run_python", methods=["POST"])
def run_python():
    code = request.json.get("code", None)
    if not code:
        return jsonify({"status": "error", "message": "Code not supplied!"}), 400
    path = "/tmp/python_exec_%s.py" % uuid.uuid4().hex
    try:
        with open(path, "w") as f:
            f.write(code)
        r = run(["/usr/bin/python3", path], RUN_PYTHON_TIMEOUT)
    except subprocess.TimeoutExpired:
        return jsonify({"status": "error", "message": "Execution timeout: Code took too long to execute",
                        "error": "TimeoutExpired", "need_more": False, "output": None}), 500
    except Exception as e:
        return jsonify({"status": "error", "message": "Execution error: %s" % e,
                        "error": traceback.format_exc(), "need_more": False, "output": None}), 500
    finally:
        _remove(path)
    out, err = r.stdout, r.stderr
    message = out + (("\n" + err) if out else err) if err else out
    if r.returncode != 0 and not err:
        err = "Process exited with code %d" % r.returncode
        message = message + "\n" + err if message else err
    return jsonify({"status": "success" if r.returncode == 0 else "error", "message": message,
                    "need_more": False, "output": out, "error": err,
                    "return_code": r.returncode})


def _bash_error(output, status):
    return jsonify({"status": "error", "output": output, "error": "", "returncode": -1}), status


@bp.route("/run_bash_script", methods=["POST"])
def run_bash_script():
    data = request.json
    script = data.get("script", None)
    timeout = data.get("timeout", 100)
    working_dir = data.get("working_dir", None)
    if not script:
        return _bash_error("Script not supplied!", 400)
    if working_dir:
        working_dir = os.path.expanduser(working_dir)
        if not os.path.exists(working_dir):
            return _bash_error("Working directory does not exist: %s" % working_dir, 400)
    if "#!/bin/bash" not in script:
        script = "#!/bin/bash\n\n" + script
    fd, path = tempfile.mkstemp(suffix=".sh")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(script)
        os.chmod(path, 0o755)
        r = run(["/bin/bash", path], timeout, merge=True, cwd=working_dir)
    except subprocess.TimeoutExpired:
        return _bash_error("Script execution timed out after %s seconds" % timeout, 500)
    except Exception as e:
        return _bash_error("Failed to execute script: %s" % e, 500)
    finally:
        _remove(path)
    return jsonify({"status": "success" if r.returncode == 0 else "error", "output": r.stdout,
                    "error": "", "returncode": r.returncode})
