//! Renders the HTML report in headless Chromium: the DOM must hold the ladder SVG and the verdict,
//! and a screenshot must be produced. A missing chromium is a failure (install it with
//! `host/install-test-deps.sh`), never a skip. Chromium is killed (its whole process group) on
//! timeout. Set `NETPROBE_REPORT_SCREENSHOT=/path.png` to keep the screenshot (and the page as
//! `/path.png.html`).

use crate::fixtures;

use netprobe::report::{Format, write_report};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(90);

fn chromium() -> PathBuf {
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let p = Path::new(dir).join("chromium");
        if p.is_file() {
            return p;
        }
    }
    panic!(
        "chromium not found on PATH: run `sudo host/install-test-deps.sh` (installs Debian's chromium) and re-run the tests"
    );
}

/// Runs chromium headless with `extra` args on `url`; returns stdout. Kills the process group on
/// timeout and panics.
fn run_chromium(extra: &[String], url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out_file = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .args(extra)
    .arg(url)
    .stdin(Stdio::null())
    .stdout(out_file.reopen().unwrap())
    .stderr(Stdio::null())
    .process_group(0);
    let mut child = cmd.spawn().expect("spawn chromium");
    let pgid = child.id() as i32;
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > TIMEOUT {
            // SAFETY: kill(2) on the process group we created for chromium; no memory involved.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = child.wait();
            panic!("chromium did not finish within {TIMEOUT:?} on {url}; killed its process group");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Reap helpers (zygote, renderer) left in the group, if any.
    // SAFETY: as above; ESRCH when the group is already gone is fine.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    assert!(status.success(), "chromium exited with {status} on {url}");
    std::fs::read_to_string(out_file.path()).unwrap()
}

#[test]
fn chromium_renders_the_ladder_and_the_verdict() {
    let _baton = crate::common::baton(module_path!());
    let t = tempfile::tempdir().unwrap();
    fixtures::write_evidence(t.path(), &fixtures::runc_result());
    let report = write_report(t.path(), Format::Html).unwrap();
    let url = format!("file://{}", report.display());

    let dom = run_chromium(&["--dump-dom".into()], &url);
    assert!(
        dom.contains("<svg id=\"ladder\""),
        "no ladder SVG in the rendered DOM:\n{dom}"
    );
    assert!(dom.contains(r#"<span id="verdict">runtime-empty-ns</span>"#));
    assert!(dom.contains("Verdict: runtime-empty-ns"));
    assert!(dom.contains(r#"data-rung="oci" data-status="fail""#));
    assert!(!dom.contains("<script"));

    let png = t.path().join("report.png");
    run_chromium(
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1200,1400".into(),
            "--hide-scrollbars".into(),
        ],
        &url,
    );
    let bytes = std::fs::read(&png).expect("chromium wrote no screenshot");
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "screenshot is not a PNG"
    );
    assert!(
        bytes.len() > 10_000,
        "screenshot suspiciously small: {} bytes",
        bytes.len()
    );
    if let Ok(keep) = std::env::var("NETPROBE_REPORT_SCREENSHOT") {
        std::fs::copy(&png, &keep).unwrap();
        std::fs::copy(&report, format!("{keep}.html")).unwrap();
    }
}
