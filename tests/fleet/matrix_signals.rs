//! `netprobe matrix` stopped: a cell that hangs is stopped and the others kept; SIGTERM or
//! SIGINT (to the matrix alone or its process group) stops it and its running parts; a matrix
//! killed with SIGKILL is told as unfinished (root, real runtimes and CRIUs).

use crate::common::matrix_support;
use matrix_support::*;
use netprobe::evidence::result::VerdictCode;
use std::process::Command;

#[test]
fn a_hanging_cell_is_stopped_and_the_others_are_kept() {
    let _baton = crate::common::baton(module_path!());
    crate::common::require_root();
    let tmp = tempfile::tempdir().unwrap();
    // A runc whose checkpoint hangs (its sleep's pid is written down so the test can end it).
    let pidfile = tmp.path().join("hang.pid");
    let wrapper = tmp.path().join("runc");
    netprobe::evidence::fsio::write_executable(&wrapper,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = checkpoint ] && {{ sleep 600 & echo $! > {}; wait; }}; done\nexec {RUNC} \"$@\"\n",
            pidfile.display()
        ), 0o755).unwrap();
    let mx = tmp.path().join("mx");
    let o = netprobe(&[
        "matrix",
        "--runtime",
        wrapper.to_str().unwrap(),
        "--criu",
        CRIU_4_3,
        "--cell-timeout",
        "8",
        "--evidence",
        mx.to_str().unwrap(),
    ]);
    if let Ok(p) = std::fs::read_to_string(&pidfile) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p.trim().parse().unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let m = load(&mx);
    let cell = &m.cells[0];
    assert_eq!(cell.verdict, VerdictCode::Inconclusive);
    assert!(
        cell.summary.contains("did not finish within 8 s"),
        "{cell:?}"
    );
    let hung = m.parts.iter().find(|p| p.runtime.is_some()).unwrap();
    assert_eq!(hung.exit_code, None, "{hung:?}");
    // How it was stopped, as done (trial 21: "then SIGKILL after 30 s" read as sent): the part
    // released what it started on SIGTERM and exited well within the 30 s.
    let err = hung.error.as_deref().unwrap_or_default();
    assert!(
        err.contains("stopped (SIGTERM; it exited after ") && !err.contains("SIGKILL"),
        "{hung:?}"
    );
    // The kernel and criu parts' evidence is complete and verifies.
    for p in m.parts.iter().filter(|p| p.runtime.is_none()) {
        assert_eq!(p.exit_code, Some(0), "{p:?}");
        let v = netprobe(&["verify", mx.join(&p.folder).to_str().unwrap()]);
        assert_eq!(v.status.code(), Some(0), "{}", text(&v));
    }
    // The stopped part kept what it had gathered.
    assert!(mx.join(&hung.folder).join("oci/config.json").is_file());
}

/// SIGTERM to a matrix while a part hangs (its runtime's checkpoint): the matrix stops that
/// part (SIGTERM; the part releases what it started: the hung checkpoint's tree is gone),
/// starts nothing new, leaves `interrupted.txt` and no `matrix.json`, and exits 143; `verify`
/// of the folder quotes the note (exit 2).
#[test]
fn a_signal_stops_the_matrix_and_its_running_parts() {
    let _baton = crate::common::baton(module_path!());
    require(&[RUNC, CRIU_4_3]);
    stop_matrix(false);
    // Ctrl-C's way: the signal to the whole process group, so the parts get it directly and may
    // end before the matrix has stopped: it must stop all the same, not record them.
    stop_matrix(true);
}

/// One matrix whose cell part hangs in its checkpoint, sent SIGTERM (to its process group when
/// `group`); see [`a_signal_stops_the_matrix_and_its_running_parts`].
fn stop_matrix(group: bool) {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let pidfile = tmp.path().join("hang.pid");
    let wrapper = tmp.path().join("runc");
    netprobe::evidence::fsio::write_executable(
        &wrapper,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = checkpoint ] && {{ sleep 600 & echo $! > {}; wait; }}; done\nexec {RUNC} \"$@\"\n",
            pidfile.display()
        ),
        0o755,
    )
    .unwrap();
    let mx = tmp.path().join("mx");
    let errf = tmp.path().join("stderr.txt");
    let mut child = Command::new(cli::EXE)
        .args([
            "matrix",
            "--runtime",
            wrapper.to_str().unwrap(),
            "--criu",
            CRIU_4_3,
        ])
        .args(["--jobs", "1", "--evidence", mx.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&errf).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !pidfile.is_file() {
        assert!(
            t0.elapsed().as_secs() < 120,
            "the cell never hung: {}",
            std::fs::read_to_string(&errf).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let sleep_pid: i32 = loop {
        if let Ok(p) = std::fs::read_to_string(&pidfile)
            .unwrap_or_default()
            .trim()
            .parse()
        {
            break p;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(if group {
            -(child.id() as i32)
        } else {
            child.id() as i32
        }),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let t1 = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t1.elapsed().as_secs() > 60 {
            let _ = child.kill();
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(sleep_pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("the matrix did not stop within 60 s of SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let err = std::fs::read_to_string(&errf).unwrap();
    assert_eq!(status.code(), Some(143), "group {group}: {err}");
    // Sent to the matrix alone, its part is stopped by the matrix's release (to the group, the
    // part may have ended by itself first).
    assert!(
        group || (err.contains("released matrix part cell-") && err.contains("sent SIGTERM")),
        "group {group}: {err}"
    );
    // Each stopped part's line says what its folder holds, read from the folder.
    for l in err.lines().filter(|l| l.contains("released matrix part")) {
        assert!(
            l.contains("its folder holds its result, ")
                || l.contains("its folder keeps its interrupted.txt, ")
                || l.contains("holds neither a result nor interrupted.txt"),
            "{l}"
        );
    }
    let note = std::fs::read_to_string(mx.join("interrupted.txt")).unwrap();
    assert!(
        note.contains("netprobe matrix was interrupted by SIGTERM"),
        "{note}"
    );
    assert!(
        !mx.join("matrix.json").exists(),
        "a matrix.json after the interruption"
    );
    // The hung checkpoint's process was released by the part's own release.
    let gone = |pid: i32| {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        s.is_empty() || s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z'))
    };
    let t2 = std::time::Instant::now();
    while !gone(sleep_pid) && t2.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        gone(sleep_pid),
        "the hung checkpoint's sleep {sleep_pid} is left"
    );
    let v = netprobe(&["verify", mx.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(2), "{}", text(&v));
    assert!(
        text(&v).contains("netprobe matrix was interrupted"),
        "{}",
        text(&v)
    );
    // As a baseline it is refused (2) as an interrupted matrix, quoting its note.
    let o = matrix_against(RUNC, &mx, &mx.with_extension("next"));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("is a matrix that was interrupted")
            && text(&o).contains("says: netprobe matrix was interrupted by SIGTERM"),
        "{}",
        text(&o)
    );
}

/// A matrix killed with SIGKILL leaves `incomplete.txt` (its first file, removed once
/// `matrix.json` is written): `verify` says the matrix did not finish, not that a run's result
/// is missing.
#[test]
fn a_matrix_killed_with_sigkill_is_told_as_unfinished() {
    let _baton = crate::common::baton(module_path!());
    require(&[RUNC, CRIU_4_3]);
    let tmp = tempfile::tempdir().unwrap();
    let mk = tmp.path().join("mk");
    let mut child = Command::new(crate::common::EXE)
        .args([
            "matrix",
            "--runtime",
            RUNC,
            "--criu",
            CRIU_4_3,
            "--evidence",
        ])
        .arg(&mk)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !mk.join("incomplete.txt").is_file() {
        assert!(t0.elapsed().as_secs() < 30, "no incomplete.txt");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // Its parts die with it (SIGTERM as it dies: each releases what it started and keeps its
    // interrupted.txt; tests/fleet/matrix_kill.rs proves what they leave).
    let mks = mk.display().to_string();
    let parts_running = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&mks))
        })
    };
    while parts_running() {
        assert!(t0.elapsed().as_secs() < 120, "parts still running");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!mk.join("matrix.json").exists());
    let v = netprobe(&["verify", mk.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(2), "{}", text(&v));
    assert!(
        text(&v).contains("incomplete.txt says: netprobe matrix (pid ")
            && text(&v).contains("has not finished"),
        "{}",
        text(&v)
    );
}
