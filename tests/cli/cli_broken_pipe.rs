//! A closed stdout (`netprobe … | head` once head has exited) ends every stdout-writing command
//! quietly (issue 11, point 5): no panic, no backtrace, the command's own exit code. The pipe's
//! read end is closed before netprobe starts, so its first write gets EPIPE.

use std::process::{Command, Stdio};

use crate::common::EXE;

/// Runs netprobe with `args` twice: stdout a pipe whose read end is closed, and stdout a normal
/// pipe. Returns (exit code closed, stderr closed, exit code open).
fn closed_vs_open(args: &[&str]) -> (Option<i32>, String, Option<i32>) {
    let (r, w) = nix::unistd::pipe().unwrap();
    drop(r);
    let closed = Command::new(EXE)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(w))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let open = Command::new(EXE)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        closed.status.code(),
        String::from_utf8_lossy(&closed.stderr).into_owned(),
        open.status.code(),
    )
}

#[test]
fn closed_stdout_is_quiet_for_every_printing_command() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let sd = tmp.path().join("no-such-state-dir");
    let sd = sd.to_string_lossy().to_string();
    // An images folder holding only an inventory (INVENTORY_MAGIC): `netprobe images` decodes it.
    let imgs = tmp.path().join("images");
    std::fs::create_dir(&imgs).unwrap();
    std::fs::write(imgs.join("inventory.img"), [0x16u8, 0x31, 0x31, 0x58]).unwrap();
    let imgs = imgs.to_string_lossy().to_string();
    let cases: Vec<Vec<&str>> = vec![
        vec!["completions", "bash"],
        vec!["man"],
        vec![
            "slot",
            "status",
            "--slot",
            "0",
            "--state-dir",
            &sd,
            "--json",
        ],
        vec!["slot", "status", "--slot", "0", "--state-dir", &sd],
        vec!["--help"],
        vec!["images", &imgs],
        vec!["images", &imgs, "--json"],
    ];
    for args in cases {
        let (code, err, open_code) = closed_vs_open(&args);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.contains("Broken pipe"), "{args:?}: {err}");
        assert_eq!(code, open_code, "{args:?}: {err}");
    }
}
