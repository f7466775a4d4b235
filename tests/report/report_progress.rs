//! Progress lines and the final output of each mode, captured through writers.

use crate::fixtures;

use netprobe::evidence::result::{RunResult, RungName};
use netprobe::report::progress::{Progress, ProgressMode, ladder_text};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);
impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
impl Buf {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// Drives a whole run through `mode`; returns (stderr, stdout).
fn drive(mode: ProgressMode, r: &RunResult) -> (String, String) {
    drive_into(mode, r, Path::new("/var/tmp/np-runc"))
}

/// [`drive`] with the evidence folder `dir`.
fn drive_into(mode: ProgressMode, r: &RunResult, dir: &Path) -> (String, String) {
    let (err, out) = (Buf::default(), Buf::default());
    let mut p = Progress::with_writers(mode, Box::new(err.clone()), Box::new(out.clone()));
    for rung in &r.rungs {
        p.rung_started(rung.name);
        p.step("checkpoint");
        p.rung_finished(rung);
    }
    p.finished(r, dir).unwrap();
    drop(p);
    (err.text(), out.text())
}

#[test]
fn ladder_text_names_each_rung_the_failure_and_the_verdict() {
    let _baton = crate::common::baton(module_path!());
    let t = ladder_text(&fixtures::runc_result());
    let lines: Vec<&str> = t.lines().collect();
    assert!(
        lines[0].starts_with("kernel          pass         14 ms  RTM_GETLINK answered"),
        "{t}"
    );
    assert!(lines[1].starts_with("criu            pass       1843 ms  lo UP"));
    assert_eq!(
        lines[2],
        "oci             FAIL       2311 ms  lo DOWN, no address after restore; no netns image   <- first broken rung"
    );
    assert_eq!(
        lines[3],
        "    x lo-up-after-restore: expected lo UP, 127.0.0.1/8, observed lo DOWN, no address (oci/netstate-after.json)"
    );
    assert!(
        lines[4].starts_with("    x netns-image-present: expected >= 1 netns-*.img, observed 0")
    );
    assert!(lines[5].starts_with("external-netns  pass       2633 ms  netns byte-identical"));
    assert!(lines[6].starts_with("verdict: runtime-empty-ns — runc tells CRIU"));
    assert!(lines[7].starts_with("  rests on: oci/lo-up-after-restore, "));
    assert_eq!(lines[8], "declared differences:");
    assert!(lines[9].starts_with("  - the network namespace is harness-owned"));
    assert!(t.ends_with('\n'));
}

#[test]
fn ladder_text_strips_control_characters() {
    let _baton = crate::common::baton(module_path!());
    let mut r = fixtures::runc_result();
    r.rungs[0].summary = "ok\x1b[31m red\nsecond line".into();
    r.declared_differences.clear();
    let t = ladder_text(&r);
    assert!(!t.contains('\x1b'));
    assert!(t.contains("ok [31m red second line"));
    assert!(t.contains("declared differences: none\n"));
}

#[test]
fn plain_mode_lines_on_stderr_summary_on_stdout() {
    let _baton = crate::common::baton(module_path!());
    let r = fixtures::runc_result();
    let (err, out) = drive(ProgressMode::Plain, &r);
    assert!(err.contains("netprobe: kernel started\nnetprobe: kernel: checkpoint\nkernel          pass         14 ms"), "{err}");
    assert!(err.contains("oci             FAIL       2311 ms  lo DOWN"));
    assert!(!err.contains("verdict:"));
    assert!(out.starts_with(&ladder_text(&r)), "{out}");
    assert!(out.contains("evidence: /var/tmp/np-runc/netprobe-result.json\n"));
    // Auto on a writer is plain (no spinner escape codes).
    let (err2, out2) = drive(ProgressMode::Auto, &r);
    assert_eq!((err2, out2), (err, out));
}

/// The closing `report:` line is a command to paste: an evidence folder with a space is quoted
/// (one word to the shell); a plain one prints as it is.
#[test]
fn the_report_line_quotes_an_evidence_folder_with_a_space() {
    let _baton = crate::common::baton(module_path!());
    let r = fixtures::runc_result();
    let (_, out) = drive_into(ProgressMode::Plain, &r, Path::new("/tmp/x/with space"));
    let line = out.lines().find(|l| l.starts_with("report:")).unwrap();
    assert!(
        line.ends_with(" report '/tmp/x/with space' --format html"),
        "{line}"
    );
    let (_, out) = drive(ProgressMode::Plain, &r);
    let line = out.lines().find(|l| l.starts_with("report:")).unwrap();
    assert!(
        line.ends_with(" report /var/tmp/np-runc --format html"),
        "{line}"
    );
}

#[test]
fn json_mode_prints_only_the_result_on_stdout() {
    let _baton = crate::common::baton(module_path!());
    let r = fixtures::runc_result();
    let (err, out) = drive(ProgressMode::Json, &r);
    let back: RunResult = serde_json::from_str(&out).expect("stdout is exactly the result JSON");
    assert_eq!(back, r);
    assert!(err.contains("netprobe: oci started"));
}

#[test]
fn quiet_mode_prints_only_the_verdict_code() {
    let _baton = crate::common::baton(module_path!());
    let r = fixtures::other_runtime_result();
    let (err, out) = drive(ProgressMode::Quiet, &r);
    assert_eq!(err, "");
    assert_eq!(out, "runtime-preserves-netns\n");
}

#[test]
fn step_before_any_rung_is_harmless() {
    let _baton = crate::common::baton(module_path!());
    let (err, out) = (Buf::default(), Buf::default());
    let mut p = Progress::with_writers(ProgressMode::Plain, Box::new(err.clone()), Box::new(out));
    p.step("host facts");
    p.rung_started(RungName::Kernel);
    assert_eq!(
        err.text(),
        "netprobe: -: host facts\nnetprobe: kernel started\n"
    );
}
