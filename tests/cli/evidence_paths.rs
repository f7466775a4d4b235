//! Where evidence may go and what `verify` takes, through the netprobe binary (root, for `run`):
//! - `run --evidence` / `matrix --evidence` inside a folder netprobe wrote (a run's evidence,
//!   an unfinished or interrupted one, a matrix folder, a slot state directory or a slot's
//!   evidence) is refused (exit 2) naming the path, the folder and the fix, and nothing is
//!   written there: the folder still verifies;
//! - `run --evidence` at a symlink is refused saying symlinks are not followed, with the real
//!   path;
//! - `verify` of a file (e.g. one inside an evidence folder) says it takes an evidence folder
//!   and names the one to pass;
//! - `cgroup --evidence` refused for its folder exits 2 too;
//! - `run --part-of-matrix DIR` (what `netprobe matrix` passes its parts) from a process that is
//!   not the part of a matrix running in DIR is refused (exit 2), and nothing is created.

use crate::common;
use common::cli::{netprobe, text};
use std::path::Path;

/// `netprobe run --quiet --phases kernel --evidence DIR`.
fn run_kernel(dir: &Path) -> std::process::Output {
    netprobe(&[
        "run",
        "--quiet",
        "--phases",
        "kernel",
        "--evidence",
        dir.to_str().unwrap(),
    ])
}

/// `o` is a refusal (exit 2) of `input` for lying inside `folder`, marked by `marker`.
fn assert_inside(o: &std::process::Output, input: &Path, folder: &Path, marker: &str) {
    let t = text(o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    let folder = std::fs::canonicalize(folder).unwrap();
    for needle in [
        format!("--evidence {}", input.display()),
        format!("{} (it holds {marker})", folder.display()),
        "choose a folder outside it".to_string(),
    ] {
        assert!(t.contains(&needle), "{needle:?} not in {t}");
    }
}

#[test]
fn a_new_evidence_folder_inside_one_netprobe_wrote_is_refused() {
    let _baton = crate::common::baton(module_path!());
    common::require_root();
    let tmp = tempfile::tempdir().unwrap();
    let ev = tmp.path().join("ev");
    let o = run_kernel(&ev);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Deep inside, through `..`, and through a symlink into it: refused, nothing created.
    std::os::unix::fs::symlink(ev.join("kernel"), tmp.path().join("link")).unwrap();
    for inside in [
        ev.join("kernel/sub"),
        ev.join("new/deeper"),
        tmp.path().join("ev/kernel/../kernel/x"),
        tmp.path().join("link/x"),
    ] {
        let o = run_kernel(&inside);
        assert_inside(&o, &inside, &ev, "netprobe-result.json");
    }
    assert!(!ev.join("kernel/sub").exists() && !ev.join("new").exists());
    let o = netprobe(&["verify", ev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "still verifies: {}", text(&o));
    // `matrix --evidence` too, before anything runs.
    let m = ev.join("kernel/m");
    let o = netprobe(&[
        "matrix",
        "--runtime",
        "/usr/sbin/runc",
        "--criu",
        "/opt/criu-4.3/sbin/criu",
        "--evidence",
        m.to_str().unwrap(),
    ]);
    assert_inside(&o, &m, &ev, "netprobe-result.json");
    assert!(!m.exists());
    // Every other kind of folder netprobe writes, marked by its file.
    for (marker, extra) in [
        ("incomplete.txt", None),
        ("interrupted.txt", None),
        ("matrix.json", None),
        (".netprobe-state-dir", None),
        ("verb.json", None),
        ("owner.json", Some("evidence")),
    ] {
        let folder = tmp.path().join(format!("kind{marker}"));
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join(marker), b"netprobe matrix (pid 0) started\n").unwrap();
        if let Some(d) = extra {
            std::fs::create_dir(folder.join(d)).unwrap();
        }
        let inside = folder.join("sub/x");
        assert_inside(&run_kernel(&inside), &inside, &folder, marker);
        assert!(!folder.join("sub").exists());
    }
    // A sibling is fine.
    let o = run_kernel(&tmp.path().join("ev2"));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn a_symlinked_evidence_folder_is_refused_with_its_real_path() {
    let _baton = crate::common::baton(module_path!());
    common::require_root();
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = tmp.path().join("linkdir");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let o = run_kernel(&link);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(!t.contains("is not a directory"), "{t}");
    for needle in [
        format!("evidence path {} is a symlink", link.display()),
        "does not follow symlinks".to_string(),
        format!("give the real path (here {})", real.display()),
    ] {
        assert!(t.contains(&needle), "{needle:?} not in {t}");
    }
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);
}

#[test]
fn verify_of_a_file_asks_for_the_evidence_folder() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let ev = tmp.path().join("ev");
    std::fs::create_dir_all(ev.join("kernel")).unwrap();
    std::fs::write(ev.join("netprobe-result.json"), b"{}").unwrap();
    std::fs::write(ev.join("kernel/kernel.log"), b"x").unwrap();
    let lone = tmp.path().join("lone.txt");
    std::fs::write(&lone, b"x").unwrap();
    for (file, fix) in [
        (
            ev.join("kernel/kernel.log"),
            format!("pass the evidence folder that holds it, {}", ev.display()),
        ),
        (
            lone.clone(),
            "pass the folder a `netprobe run --evidence` wrote".to_string(),
        ),
    ] {
        let o = netprobe(&["verify", file.to_str().unwrap()]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{t}");
        assert!(!t.contains("choose a new --evidence folder"), "{t}");
        assert!(
            t.contains(&format!(
                "{} is not a directory: it must be an evidence folder (a directory holding \
                 netprobe-result.json)",
                file.display()
            )),
            "{t}"
        );
        assert!(t.contains(&fix), "{fix:?} not in {t}");
    }
}

/// `cgroup --evidence` refused for its folder is a usage error (exit 2), as for `run`: a
/// non-empty folder, and one inside a folder netprobe wrote. Nothing runs.
#[test]
fn cgroup_evidence_refusals_exit_2() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let full = tmp.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("x"), b"x").unwrap();
    let o = netprobe(&["cgroup", "--evidence", full.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("already exists and is not empty"),
        "{}",
        text(&o)
    );
    let run = tmp.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::write(run.join("netprobe-result.json"), b"{}").unwrap();
    let inner = run.join("sub");
    let o = netprobe(&["cgroup", "--evidence", inner.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!inner.exists());
}

/// A folder's name, its files with their text, a part path in it, and why it is refused.
type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str, &'a str);

/// A run that names a folder as its matrix by hand (`--part-of-matrix`, the matrix's own option
/// for its parts) cannot pass for a part: a finished run's folder, a finished matrix's, a
/// matrix folder whose matrix is not this run's parent (here: the note of a dead matrix), a
/// plain folder, and a part path not directly in the named folder are each refused (exit 2)
/// saying why, and nothing is created.
#[test]
fn a_run_cannot_pass_for_a_matrix_part() {
    let _baton = crate::common::baton(module_path!());
    common::require_root();
    let tmp = tempfile::tempdir().unwrap();
    let dead =
        "netprobe matrix (pid 999999999) started at 2025-01-01T00:00:00Z and has not finished\n";
    // (folder, its files with their text, the part path in it, why it is refused)
    let cases: [Case; 5] = [
        (
            "run",
            &[("netprobe-result.json", "{}")],
            "kernel",
            "it holds netprobe-result.json",
        ),
        (
            "done",
            &[("incomplete.txt", dead), ("matrix.json", "{}")],
            "kernel",
            "it holds matrix.json",
        ),
        (
            "dead",
            &[("incomplete.txt", dead)],
            "kernel",
            "does not name this process's parent",
        ),
        ("plain", &[], "kernel", "it holds no incomplete.txt"),
        (
            "deep",
            &[("incomplete.txt", dead)],
            "kernel/x",
            "is not directly in it",
        ),
    ];
    for (name, files, part, why) in cases {
        let m = tmp.path().join(name);
        std::fs::create_dir(&m).unwrap();
        for (f, text) in files {
            std::fs::write(m.join(f), text).unwrap();
        }
        let ev = m.join(part);
        let o = netprobe(&[
            "run",
            "--quiet",
            "--phases",
            "kernel",
            "--part-of-matrix",
            m.to_str().unwrap(),
            "--evidence",
            ev.to_str().unwrap(),
        ]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {t}");
        for needle in [
            format!(
                "--evidence {} --part-of-matrix {}: ",
                ev.display(),
                m.display()
            ),
            why.to_string(),
            "leave it out".to_string(),
        ] {
            assert!(t.contains(&needle), "{name}: {needle:?} not in {t}");
        }
        assert!(!m.join("kernel").exists(), "{name}: a folder was created");
    }
}
