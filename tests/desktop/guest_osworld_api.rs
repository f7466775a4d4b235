//! The desktop guest's OSWorld-compatible server (host/desktop-image/files/osworld_server.py),
//! called the way OSWorld's `PythonController` calls it: the desktop guest provisioned once
//! through the slot CLI (slot 70, profiles/desktop.toml, real runc), every request made from
//! inside the slot's network namespace (the holder's, entered with setns) to 127.0.0.1:5000, and
//! OSWorld's response shapes and status codes asserted: /screenshot a 1920x1080 PNG, /execute
//! running `python -c "import pyautogui; ..."` on the guest's display, pyautogui typing into the
//! GTK typing app and /accessibility showing the app's label with what was typed, /run_python,
//! /run_bash_script, /terminal, /screen_size, /window_size, /cursor_position, /platform,
//! /desktop_path, /list_directory, /file, /setup/upload, and upstream's statuses for bad
//! requests. Cleanup leaves nothing behind.

use crate::common;
use crate::common::slot_support;

use serde_json::{Value, json};
use slot_support::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

const SLOT: &str = "70";

/// One HTTP/1.0 exchange with the guest server (HTTP/1.0: the body is never chunked).
struct Reply {
    status: u16,
    content_type: String,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: status {} body {}", self.status, self.text()))
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// `method path` with an optional (content type, body); called inside the slot's netns.
fn http(method: &str, path: &str, body: Option<(&str, &[u8])>) -> Reply {
    let mut s = TcpStream::connect("127.0.0.1:5000").expect("connect to the guest's :5000");
    s.set_read_timeout(Some(Duration::from_secs(150))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.0\r\nHost: guest\r\n").into_bytes();
    if let Some((ct, b)) = body {
        req.extend(format!("Content-Type: {ct}\r\nContent-Length: {}\r\n", b.len()).bytes());
        req.extend(b"\r\n");
        req.extend(b);
    } else {
        req.extend(b"Content-Length: 0\r\n\r\n");
    }
    s.write_all(&req).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("{method} {path}: no header end in {raw:?}"));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type:")
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default();
    Reply {
        status,
        content_type,
        body: raw[split + 4..].to_vec(),
    }
}

fn post_json(path: &str, v: &Value) -> Reply {
    http(
        "POST",
        path,
        Some(("application/json", v.to_string().as_bytes())),
    )
}

fn post_form(path: &str, form: &str) -> Reply {
    http(
        "POST",
        path,
        Some(("application/x-www-form-urlencoded", form.as_bytes())),
    )
}

/// OSWorld's `execute_python_command(cmd)`: `python -c` with its prefix, through /execute.
fn python_command(cmd: &str) -> Value {
    let code = format!("import pyautogui; import time; pyautogui.FAILSAFE = False; {cmd}");
    let r = post_json(
        "/execute",
        &json!({"command": ["python", "-c", code], "shell": false}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn screenshot_and_execute(tmp: &Path) {
    let r = http("GET", "/screenshot", None);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.content_type, "image/png");
    assert!(r.body.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let p = tmp.join("screenshot.png");
    std::fs::write(&p, &r.body).unwrap();
    let shot = netprobe::x11::Screenshot::read_png(&p).unwrap();
    assert_eq!((shot.width, shot.height), (1920, 1080));

    let v = python_command("print(pyautogui.size())");
    assert_eq!(v["status"], "success", "{v}");
    assert_eq!(v["output"], "Size(width=1920, height=1080)\n", "{v}");
    assert_eq!(v["returncode"], 0, "{v}");
    // OSWorld's get_vm_platform goes through /execute too.
    let v = python_command("import platform; print(platform.system())");
    assert_eq!(v["output"], "Linux\n", "{v}");
    // A command string without a shell is split; the exit status is the command's own.
    let r = post_json("/execute", &json!({"command": "sh -c 'exit 3'"}));
    assert_eq!(
        (r.status, r.json()["returncode"].clone()),
        (200, json!(3)),
        "{}",
        r.text()
    );
    let r = post_json(
        "/execute",
        &json!({"command": "echo $DISPLAY", "shell": true}),
    );
    assert_eq!(r.json()["output"], ":0\n");
    // A program that cannot start: 500 {status: error, message}.
    let r = post_json("/execute", &json!({"command": ["/nonexistent"]}));
    assert_eq!(r.status, 500);
    assert_eq!(r.json()["status"], "error");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("No such file")
    );
    // Malformed JSON, a wrong method, an unknown path: Flask's statuses, as upstream's.
    let r = http("POST", "/execute", Some(("application/json", b"{bad")));
    assert_eq!(r.status, 400);
    assert_eq!(http("GET", "/execute", None).status, 405);
    assert_eq!(http("POST", "/screenshot", None).status, 405);
    assert_eq!(http("GET", "/no-such-endpoint", None).status, 404);
}

fn typing_and_accessibility() {
    let v = python_command("pyautogui.typewrite('osw'); pyautogui.hotkey('shift', 'k')");
    assert_eq!(
        (v["status"].clone(), v["returncode"].clone()),
        (json!("success"), json!(0))
    );
    let r = http("GET", "/accessibility", None);
    assert_eq!(r.status, 200, "{}", r.text());
    let at = r.json()["AT"].as_str().unwrap().to_string();
    assert!(at.starts_with("<desktop-frame "), "{at}");
    assert!(
        at.contains("<application name=\"netprobe-typing\"")
            && at.contains("<frame name=\"netprobe-typing\""),
        "{at}"
    );
    assert!(at.contains(">typed: osw&lt;Shift_L&gt;K</label>"), "{at}");
    assert!(at.contains("cp:screencoord=\""), "{at}");
    let r = http("GET", "/terminal", None);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!({"output": null, "status": "success"}));
}

fn scripts() {
    let r = post_json(
        "/run_bash_script",
        &json!({"script": "echo out; echo err >&2; pwd; exit 4", "timeout": 30, "working_dir": "/opt"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"status": "error", "output": "out\nerr\n/opt\n", "error": "", "returncode": 4})
    );
    let r = post_json("/run_bash_script", &json!({"script": "true"}));
    assert_eq!(r.json()["status"], "success");
    let r = post_json("/run_bash_script", &json!({}));
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["returncode"], -1);
    let r = post_json(
        "/run_bash_script",
        &json!({"script": "sleep 5", "timeout": 1}),
    );
    assert_eq!(r.status, 500);
    assert_eq!(
        r.json()["output"],
        "Script execution timed out after 1 seconds"
    );

    let r = post_json("/run_python", &json!({"code": "print(6 * 7)"}));
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(
        (
            v["status"].clone(),
            v["output"].clone(),
            v["return_code"].clone()
        ),
        (json!("success"), json!("42\n"), json!(0)),
        "{v}"
    );
    assert_eq!(v["need_more"], false);
    let v = post_json("/run_python", &json!({"code": "import sys; sys.exit(3)"})).json();
    assert_eq!(
        (v["status"].clone(), v["error"].clone()),
        (json!("error"), json!("Process exited with code 3"))
    );
    assert_eq!(post_json("/run_python", &json!({})).status, 400);
}

fn display_and_files() {
    let r = http("POST", "/screen_size", None);
    assert_eq!(r.json(), json!({"width": 1920, "height": 1080}));
    python_command("pyautogui.moveTo(123, 456)");
    let r = http("GET", "/cursor_position", None);
    assert_eq!(r.json(), json!([123, 456]));
    let r = http("GET", "/platform", None);
    assert_eq!((r.status, r.text()), (200, "Linux".to_string()));
    let r = post_form("/window_size", "app_class_name=netprobe-typing");
    assert_eq!(
        r.json(),
        json!({"width": 900, "height": 240}),
        "{}",
        r.text()
    );
    assert_eq!(post_form("/window_size", "").status, 400);
    let r = http("POST", "/desktop_path", None);
    assert_eq!(r.json(), json!({"desktop_path": "/root/Desktop"}));

    let r = post_json("/list_directory", &json!({"path": "/opt/netprobe"}));
    assert_eq!(r.status, 200, "{}", r.text());
    let tree = &r.json()["directory_tree"];
    assert_eq!(
        (tree["type"].clone(), tree["name"].clone()),
        (json!("directory"), json!("netprobe"))
    );
    assert!(
        tree["children"]
            .as_array()
            .unwrap()
            .contains(&json!({"type": "file", "name": "osworld_server.py"})),
        "{tree}"
    );
    let r = post_json("/list_directory", &json!({"path": "/no/such/dir"}));
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json(),
        json!({"error": "The provided path is not a directory"})
    );
    assert_eq!(post_json("/list_directory", &json!({})).status, 400);

    let r = post_form("/file", "file_path=/etc/debian_version");
    assert_eq!(r.status, 200);
    assert!(r.text().starts_with("12."), "{}", r.text());
    assert_eq!(post_form("/file", "file_path=/no/such/file").status, 404);
    assert_eq!(post_form("/file", "").status, 400);
    let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"file_path\"\r\n\r\n/tmp/up/a.txt\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file_data\"; filename=\"a.txt\"\r\n\r\nhello\r\n--XyZ--\r\n";
    let r = http(
        "POST",
        "/setup/upload",
        Some(("multipart/form-data; boundary=XyZ", body)),
    );
    assert_eq!(
        (r.status, r.text()),
        (200, "File Uploaded: 5 bytes".to_string())
    );
    let r = post_form("/file", "file_path=/tmp/up/a.txt");
    assert_eq!(r.text(), "hello");
    // Recording needs ffmpeg, which the image does not carry (README "OSWorld-compatible").
    assert_eq!(http("POST", "/start_recording", None).status, 500);
    assert_eq!(http("POST", "/end_recording", None).status, 400);
    let r = http("GET", "/health", None);
    assert_eq!(
        (r.status, r.json()),
        (200, json!({"x": true, "wm": true, "app": true}))
    );
}

#[test]
fn desktop_guest_serves_osworld_api() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let img = common::desktop_image();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let prof = common::shipped_profile("desktop", &img, tmp.path());
    let p = prof.to_string_lossy().to_string();
    let (code, out, err) = cli_slot(
        "provision",
        SLOT,
        &sd,
        &[
            "--profile",
            &p,
            "--no-probe-gate",
            "--reason",
            "osworld api test",
            "--json",
        ],
    );
    let holders = holder_pids(&sd);
    let result = std::panic::catch_unwind(|| {
        assert_eq!(code, Some(0), "provision: {out}\n{err}");
        let o: Value = serde_json::from_str(&out).unwrap();
        let pid = o["facts"]["provision_container_pid"].as_i64().unwrap();
        let sock = netprobe::slot::gate::display_gates::socket_of(pid as i32, 0);
        let d = netprobe::x11::Display::connect(&sock, Duration::from_secs(30)).unwrap();
        common::settle_desktop(
            &d,
            Duration::from_millis(500),
            Duration::from_secs(90),
            || common::guest_logs(pid),
        );
        let netns = PathBuf::from(format!("/proc/{}/ns/net", holders[0]));
        let dir = tmp.path().to_path_buf();
        netprobe::ns::run_in_netns(&netns, move || {
            screenshot_and_execute(&dir);
            typing_and_accessibility();
            scripts();
            display_and_files();
        })
        .unwrap();
    });
    let (code, out, err) = cli_slot("cleanup", SLOT, &sd, &[]);
    assert_eq!(code, Some(0), "cleanup: {out}\n{err}");
    assert_released(&sd, &holders);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
