//! What `netprobe run` starts is released on every way out — the holders it starts when the run
//! begins (one per rung that uses one), also when the run is then refused — and a signal that
//! reaches the whole process group (Ctrl-C in a terminal), which also kills the child netprobe
//! is waiting for (the runtime, `criu check`), ends the run as interrupted (exit 130;
//! `interrupted.txt` once the evidence folder exists; no `netprobe-result.json`), not as a rung
//! error with a verdict or as a host refusal. Deterministic: the runtime / CRIU is a wrapper
//! around the real one that sends SIGINT to its process group at the chosen step. This test
//! binary is the child subreaper, so a holder netprobe left behind is re-parented here and found.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::EXE;

/// Root, and this process the child subreaper (idempotent; every test calls it).
fn setup() {
    crate::common::require_root();
    assert_eq!(
        // SAFETY: prctl with an integer argument, no memory passed.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) },
        0
    );
}

/// Our children (re-parented orphans included) whose command line is netprobe's holder mode.
fn holders_reparented_here() -> Vec<String> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // pid (comm) state ppid ...
            let ppid = stat
                .rsplit_once(") ")?
                .1
                .split_whitespace()
                .nth(1)?
                .to_string();
            let cmd = String::from_utf8_lossy(&std::fs::read(e.path().join("cmdline")).ok()?)
                .replace('\0', " ");
            (ppid == me && cmd.contains("__holder")).then_some(cmd)
        })
        .collect()
}

/// An executable `name` in `dir`: a shell script that sends SIGINT to its parent's (netprobe's)
/// process group when its arguments contain `step` — what Ctrl-C in a terminal does: netprobe
/// runs every program in a process group of its own, so the terminal's SIGINT reaches netprobe
/// only, and netprobe kills the program's tree — and otherwise execs `real` with them.
fn interrupting_wrapper(dir: &Path, name: &str, real: &Path, step: &str) -> PathBuf {
    let path = dir.join(name);
    netprobe::evidence::fsio::write_executable(&path,
        format!(
            "#!/bin/sh\n\
             for a in \"$@\"; do\n\
               if [ \"$a\" = {step} ]; then kill -INT -$(cut -d' ' -f5 /proc/$PPID/stat); sleep 5; fi\n\
             done\n\
             exec {} \"$@\"\n",
            real.display()
        ), 0o755).unwrap();
    path
}

/// `netprobe ARGS` in its own process group (as a shell job: `kill -INT 0` reaches netprobe and
/// its children, not this test).
fn netprobe(args: &[&std::ffi::OsStr]) -> Output {
    netprobe_in(&std::env::temp_dir(), args)
}

/// [`netprobe`] with `TMPDIR=tmpdir`.
fn netprobe_in(tmpdir: &Path, args: &[&std::ffi::OsStr]) -> Output {
    Command::new(EXE)
        .args(args)
        .env("TMPDIR", tmpdir)
        .env_remove("CRIU_CONFIG_FILE")
        .process_group(0)
        .output()
        .expect("spawn netprobe")
}

fn text(o: &Output) -> String {
    format!(
        "{o:?}\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn early_holders_are_released_on_refusal_and_after_a_partial_run() {
    let _baton = crate::common::baton(module_path!());
    setup();
    let tmp = tempfile::tempdir().unwrap();

    // Refused after the holders were started: the evidence folder is not empty (exit 2).
    let busy = tmp.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("keep.txt"), b"operator's file\n").unwrap();
    let o = netprobe(&[
        "run".as_ref(),
        "--quiet".as_ref(),
        "--evidence".as_ref(),
        busy.as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(
        std::fs::read(busy.join("keep.txt")).unwrap(),
        b"operator's file\n"
    );
    let left = holders_reparented_here();
    assert!(left.is_empty(), "holders left after a refusal: {left:#?}");

    // The kernel and criu rungs only: their holders are used and stopped, no other is started.
    let ev = tmp.path().join("ev");
    let o = netprobe(&[
        "run".as_ref(),
        "--quiet".as_ref(),
        "--phases".as_ref(),
        "kernel,criu".as_ref(),
        "--evidence".as_ref(),
        ev.as_ref(),
    ]);
    assert!(
        o.status.code().is_some_and(|c| c == 0 || c == 1),
        "{}",
        text(&o)
    );
    let left = holders_reparented_here();
    assert!(left.is_empty(), "holders left after a run: {left:#?}");
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ev.join("netprobe-result.json")).unwrap()).unwrap();
    let status = |n: &str| {
        result["rungs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == n)
            .map(|r| r["status"].as_str().unwrap_or("").to_string())
            .unwrap()
    };
    assert_eq!(status("kernel"), "pass", "{result:#}");
    assert_eq!(status("criu"), "pass", "{result:#}");
    assert_eq!(status("oci"), "skipped");
    assert_eq!(status("external-netns"), "skipped");
}

#[test]
fn group_sigint_during_the_last_rung_is_an_interruption() {
    let _baton = crate::common::baton(module_path!());
    setup();
    let runc = netprobe::host::find_in_path(Path::new("runc"))
        .expect("runc in PATH (host/setup.sh installs it)");
    let tmp = tempfile::tempdir().unwrap();
    let wrapper = interrupting_wrapper(tmp.path(), "runc", &runc, "restore");
    let ev = tmp.path().join("ev");
    // netprobe's temporary files (the runtime's --log) go here, to be counted afterwards.
    let tmpdir = tmp.path().join("tmpdir");
    std::fs::create_dir(&tmpdir).unwrap();
    let o = netprobe_in(
        &tmpdir,
        &[
            "run".as_ref(),
            "--quiet".as_ref(),
            "--phases".as_ref(),
            "external-netns".as_ref(),
            "--runtime".as_ref(),
            wrapper.as_ref(),
            "--evidence".as_ref(),
            ev.as_ref(),
        ],
    );
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    assert!(ev.join("interrupted.txt").is_file(), "{}", text(&o));
    // The note carries the release list stderr showed (all but its own line, written last).
    let note = std::fs::read_to_string(ev.join("interrupted.txt")).unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let released: Vec<&str> = err
        .lines()
        .filter_map(|l| l.strip_prefix("netprobe:   released "))
        .filter(|l| !l.starts_with("interruption note"))
        .collect();
    assert!(!released.is_empty(), "{}", text(&o));
    assert!(note.contains("released, in order:\n"), "{note}");
    for r in released {
        assert!(note.contains(&format!("  - {r}\n")), "{r:?} not in {note}");
    }
    let temp_left: Vec<_> = std::fs::read_dir(&tmpdir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(
        temp_left.is_empty(),
        "temporary files left: {temp_left:?}\n{}",
        text(&o)
    );
    assert!(!ev.join("netprobe-result.json").exists(), "{}", text(&o));
    let left = holders_reparented_here();
    assert!(left.is_empty(), "holders left: {left:?}\n{}", text(&o));
}

/// A SIGINT that also killed `criu check` is an interruption (exit 130), not "CRIU cannot
/// checkpoint on this kernel" (exit 3).
#[test]
fn group_sigint_during_criu_check_is_not_a_refusal() {
    let _baton = crate::common::baton(module_path!());
    setup();
    let tmp = tempfile::tempdir().unwrap();
    let wrapper =
        interrupting_wrapper(tmp.path(), "criu", &netprobe::host::default_criu(), "check");
    let ev = tmp.path().join("ev");
    let o = netprobe(&[
        "run".as_ref(),
        "--quiet".as_ref(),
        "--criu".as_ref(),
        wrapper.as_ref(),
        "--evidence".as_ref(),
        ev.as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("criu check failed"),
        "{}",
        text(&o)
    );
    assert!(!ev.join("netprobe-result.json").exists());
    let left = holders_reparented_here();
    assert!(left.is_empty(), "holders left: {left:?}\n{}", text(&o));
}
