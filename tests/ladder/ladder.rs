//! The whole ladder on real runc and real CRIU (root): the `runtime-empty-ns` verdict and every
//! fact it rests on, `--expect`, `verify` (without root, and on tampered evidence), bad input
//! with its exit codes, and that nothing is left behind — also after a rung fails.

use crate::common;
use crate::common::ladder as ladder_support;
use common::cli::{EXE, netprobe, text};
use ladder_support::*;
use netprobe::evidence::result::{RunResult, RungName, Status, VerdictCode};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

#[test]
fn full_ladder_on_runc_is_runtime_empty_ns_with_every_fact() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let ev = evidence_dir(&tmp, "ev");
    let o = netprobe(&[
        "run",
        "--evidence",
        ev.to_str().unwrap(),
        "--expect",
        "runtime-empty-ns",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("verdict: runtime-empty-ns"), "{}", text(&o));
    let r = read_result(&ev);
    assert_eq!(r.verdict.code, VerdictCode::RuntimeEmptyNs);
    let st = |n: RungName| r.rung(n).unwrap().status;
    assert_eq!(st(RungName::Kernel), Status::Pass);
    assert_eq!(st(RungName::Criu), Status::Pass);
    assert_eq!(st(RungName::Oci), Status::Fail);
    assert_eq!(st(RungName::ExternalNetns), Status::Pass);
    kernel_rung_facts(&ev);
    criu_rung_facts(&ev);
    let restore = oci_rung_facts(&ev);
    external_netns_rung_facts(&ev, &r);
    binaries_pins_and_declared_differences(&r);
    assert_nothing_left(&r);
    verify_reproduces_the_verdict(&ev);
    verify_catches_tampered_evidence(&ev, &restore);
}

// The steps of `full_ladder_on_runc_is_runtime_empty_ns_with_every_fact` after the rung facts
// (those are in common/ladder.rs), in its order, on its evidence folder `ev` and result `r`.

/// Binaries, pins and declared differences.
fn binaries_pins_and_declared_differences(r: &RunResult) {
    assert!(r.host.runtime.as_ref().unwrap().sha256.len() == 64);
    assert!(r.pins.iter().any(|p| p.name == "runtime" && !p.matches));
    assert!(
        r.declared_differences
            .iter()
            .any(|d| d.contains("not the pinned runc 1.5.2"))
    );
    assert!(
        r.declared_differences
            .iter()
            .any(|d| d.contains("HARNESS-OWNED"))
    );
    assert!(
        r.declared_differences
            .iter()
            .any(|d| d.contains("NOT inside the container's cgroup"))
    );
    assert!(
        r.rung(RungName::Oci)
            .unwrap()
            .timings_ms
            .contains_key("checkpoint")
    );
    assert!(
        r.rung(RungName::Oci)
            .unwrap()
            .timings_ms
            .contains_key("restore")
    );
}

/// The evidence alone reaches the same verdict, without root, and with a report beside it.
fn verify_reproduces_the_verdict(ev: &Path) {
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            EXE,
            "verify",
        ])
        .arg(ev)
        .arg("--expect")
        .arg("runtime-empty-ns")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "verify as nobody: {}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("verdict from the evidence: runtime-empty-ns")
    );

    // A report written into the folder is derived, not evidence: verify still reproduces.
    let o = netprobe(&["report", ev.to_str().unwrap(), "--format", "html"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = netprobe(&["verify", ev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// An emptied artifact list, and a log edited after the fact (`restore`: the oci rung's
/// restore.log as written), are caught by verify.
fn verify_catches_tampered_evidence(ev: &Path, restore: &str) {
    // An emptied artifact list cannot hide files: every file must be listed.
    let result_path = ev.join("netprobe-result.json");
    let original = std::fs::read(&result_path).unwrap();
    let mut v: Value = serde_json::from_slice(&original).unwrap();
    v["artifacts"] = Value::Array(vec![]);
    std::fs::write(&result_path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let o = netprobe(&["verify", ev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("not among the recorded artifacts"),
        "{}",
        text(&o)
    );
    std::fs::write(&result_path, &original).unwrap();

    // Tampered evidence: a log edited after the fact is caught, naming the artifact.
    let log = ev.join("oci/restore.log");
    let edited = restore.replace("No netns-", "No xxxxx-");
    std::fs::write(&log, edited).unwrap();
    let o = netprobe(&["verify", ev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("artifact oci/restore.log changed"), "{out}");
    assert!(out.contains("oci/restore-no-netns-image"), "{out}");
}

#[test]
fn expect_mismatch_exits_1_and_cheap_phases_are_inconclusive() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let ev = evidence_dir(&tmp, "ev");
    let o = netprobe(&[
        "run",
        "--phases",
        "kernel,criu",
        "--strace",
        "--evidence",
        ev.to_str().unwrap(),
        "--expect",
        "runtime-preserves-netns",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "inconclusive");
    let r = read_result(&ev);
    assert_eq!(r.verdict.code, VerdictCode::Inconclusive);
    assert!(
        r.verdict
            .reason
            .as_deref()
            .unwrap()
            .contains("external-netns was not run")
    );
    assert_eq!(r.rung(RungName::Oci).unwrap().status, Status::Skipped);
    assert_eq!(r.rung(RungName::Criu).unwrap().status, Status::Pass);
    assert!(ev.join("criu/strace-dump.txt").metadata().unwrap().len() > 0);
    assert_nothing_left(&r);
}

#[test]
fn json_prints_only_the_result() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let ev = evidence_dir(&tmp, "ev");
    let o = netprobe(&[
        "run",
        "--phases",
        "kernel",
        "--json",
        "--evidence",
        ev.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("stdout is the result JSON");
    assert_eq!(v["rungs"][0]["status"], "pass");
}

#[test]
fn bad_input_is_refused_with_the_right_exit_code_and_nothing_lost() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    an_existing_folder_is_refused_untouched(&tmp);
    bad_phases_and_runtimes_are_refused(&tmp);
    bad_rootfs_is_refused(&tmp);
    a_criu_config_missing_criu_or_no_root_is_refused(&tmp);
    // An unknown --expect verdict: usage (2).
    let o = netprobe(&["run", "--expect", "maybe"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // verify on a folder without a result: usage (2), naming it.
    let o = netprobe(&["verify", tmp.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

// The steps of `bad_input_is_refused_with_the_right_exit_code_and_nothing_lost`, in its order,
// each run with a new evidence folder in `tmp` ([`fresh`]) unless it says otherwise.

/// `n` in `tmp`, as a string for the command line.
fn fresh(tmp: &tempfile::TempDir, n: &str) -> String {
    evidence_dir(tmp, n).to_str().unwrap().to_string()
}

/// An existing, non-empty evidence folder: refused (2), its content untouched.
fn an_existing_folder_is_refused_untouched(tmp: &tempfile::TempDir) {
    let ev = evidence_dir(tmp, "used");
    std::fs::create_dir_all(&ev).unwrap();
    std::fs::write(ev.join("keep.txt"), b"precious").unwrap();
    let o = netprobe(&[
        "run",
        "--phases",
        "kernel",
        "--evidence",
        ev.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("already exists and is not empty"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read(ev.join("keep.txt")).unwrap(), b"precious");
    assert_eq!(std::fs::read_dir(&ev).unwrap().count(), 1);
}

/// Unknown phase or wrong order: usage (2); a missing or not-OCI runtime: host refused (3).
fn bad_phases_and_runtimes_are_refused(tmp: &tempfile::TempDir) {
    let fresh = |n: &str| fresh(tmp, n);
    // Unknown phase, wrong order: usage (2).
    let o = netprobe(&["run", "--phases", "kernel,crui", "--evidence", &fresh("a")]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("unknown phase \"crui\""));
    let o = netprobe(&["run", "--phases", "oci,kernel", "--evidence", &fresh("b")]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("kernel comes before oci"));
    // A missing runtime binary: host refused (3), naming it.
    let o = netprobe(&[
        "run",
        "--phases",
        "oci",
        "--runtime",
        "/nonexistent/runc",
        "--evidence",
        &fresh("c"),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("/nonexistent/runc"));
    // Not an OCI runtime.
    let o = netprobe(&[
        "run",
        "--phases",
        "oci",
        "--runtime",
        "/bin/true",
        "--evidence",
        &fresh("d"),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
}

/// A rootfs without sleep, or one that does not exist: usage (2).
fn bad_rootfs_is_refused(tmp: &tempfile::TempDir) {
    let fresh = |n: &str| fresh(tmp, n);
    // A rootfs without sleep: usage (2).
    let empty = tmp.path().join("emptyroot");
    std::fs::create_dir_all(&empty).unwrap();
    let o = netprobe(&[
        "run",
        "--phases",
        "oci",
        "--rootfs",
        empty.to_str().unwrap(),
        "--evidence",
        &fresh("e"),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("has no sleep"), "{}", text(&o));
    // A rootfs that does not exist: usage (2), naming it.
    let o = netprobe(&[
        "run",
        "--phases",
        "oci",
        "--rootfs",
        "/nonexistent/rootfs",
        "--evidence",
        &fresh("e2"),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("/nonexistent/rootfs"), "{}", text(&o));
}

/// A CRIU config file through `$CRIU_CONFIG_FILE`, a missing CRIU, or no root: host refused (3);
/// without root nothing is written.
fn a_criu_config_missing_criu_or_no_root_is_refused(tmp: &tempfile::TempDir) {
    let fresh = |n: &str| fresh(tmp, n);
    // A CRIU config file requested through $CRIU_CONFIG_FILE: refused (3), naming it.
    let conf = tmp.path().join("criu.conf");
    std::fs::write(&conf, b"tcp-established\n").unwrap();
    let o = Command::new(EXE)
        .args(["run", "--phases", "kernel", "--evidence", &fresh("f")])
        .env("CRIU_CONFIG_FILE", &conf)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains(conf.to_str().unwrap()), "{}", text(&o));
    // A missing CRIU: host refused (3), naming it.
    let o = netprobe(&[
        "run",
        "--phases",
        "kernel",
        "--criu",
        "/nonexistent/criu",
        "--evidence",
        &fresh("g"),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("/nonexistent/criu"), "{}", text(&o));
    // Not root: host refused (3) before anything is written.
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            EXE,
            "run",
            "--phases",
            "kernel",
            "--evidence",
        ])
        .arg(tmp.path().join("h"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("root"), "{}", text(&o));
    assert!(
        !tmp.path().join("h").exists(),
        "nothing written when refused"
    );
}

/// A runtime whose checkpoint fails: the oci rung errors (exit 4), the evidence gathered so far
/// is kept, and the container and holder are gone.
#[test]
fn a_failing_rung_keeps_evidence_and_leaves_nothing_behind() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let wrapper = tmp.path().join("runc");
    let real = netprobe::host::find_in_path(Path::new("runc")).expect("runc in PATH");
    netprobe::evidence::fsio::write_executable(&wrapper,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = checkpoint ] && {{ echo 'checkpoint refused by test wrapper' >&2; exit 1; }}; done\nexec {} \"$@\"\n",
            real.display()
        ), 0o755).unwrap();
    let ev = evidence_dir(&tmp, "ev");
    let o = netprobe(&[
        "run",
        "--phases",
        "oci,external-netns",
        "--runtime",
        wrapper.to_str().unwrap(),
        "--evidence",
        ev.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let r = read_result(&ev);
    for n in [RungName::Oci, RungName::ExternalNetns] {
        let rung = r.rung(n).unwrap();
        assert_eq!(rung.status, Status::Error, "{n}");
        assert!(
            rung.error
                .as_deref()
                .unwrap()
                .contains("runtime checkpoint"),
            "{:?}",
            rung.error
        );
        assert!(
            ev.join(n.as_str()).join("netstate-before.json").exists(),
            "kept"
        );
    }
    assert_eq!(r.verdict.code, VerdictCode::Inconclusive);
    assert!(ev.join("external-netns/holder.json").exists());
    assert_nothing_left(&r);
}

/// `netprobe run` with no options at all, from a fresh working folder: the default evidence
/// folder is relative (`./evidence/<time>-<pid>`), and the verdict is `runtime-empty-ns`.
#[test]
fn run_with_no_options_uses_a_relative_default_folder() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(EXE)
        .arg("run")
        .current_dir(tmp.path())
        .env_remove("CRIU_CONFIG_FILE")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let dirs: Vec<_> = std::fs::read_dir(tmp.path().join("evidence"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let r = read_result(&dirs[0]);
    assert_eq!(r.verdict.code, VerdictCode::RuntimeEmptyNs);
    assert_nothing_left(&r);
    // A relative --evidence path too (runc changes directory before it opens paths).
    let o = Command::new(EXE)
        .args(["run", "--phases", "oci", "--evidence", "rel/ev"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        read_result(&tmp.path().join("rel/ev"))
            .rung(RungName::Oci)
            .unwrap()
            .status,
        Status::Fail
    );
}

/// Two runs given the same new folder at the same time: exactly one writes it, the other is
/// refused as usage (exit 2) without touching it.
#[test]
fn two_runs_never_share_an_evidence_folder() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let ev = evidence_dir(&tmp, "same");
    let spawn = || {
        Command::new(EXE)
            .args(["run", "--phases", "kernel,criu", "--quiet", "--evidence"])
            .arg(&ev)
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (spawn(), spawn());
    let (ca, cb) = (a.wait().unwrap().code(), b.wait().unwrap().code());
    let mut codes = [ca, cb];
    codes.sort();
    assert_eq!(
        codes,
        [Some(0), Some(2)],
        "one run wins, the other is refused"
    );
    let r = read_result(&ev);
    assert_eq!(r.rung(RungName::Criu).unwrap().status, Status::Pass);
    let o = netprobe(&["verify", ev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// SIGINT / SIGTERM in the middle of a run (in different rungs): netprobe releases every holder,
/// restored process, container and work area it started, leaves a note beside the evidence so
/// far, and exits 128 + signal.
#[test]
fn an_interrupted_run_releases_everything_it_started() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    for (i, (sig, after_ms)) in [
        (nix::sys::signal::Signal::SIGINT, 150u64),
        (nix::sys::signal::Signal::SIGTERM, 700),
        (nix::sys::signal::Signal::SIGINT, 1200),
        (nix::sys::signal::Signal::SIGTERM, 1500),
        (nix::sys::signal::Signal::SIGINT, 1800),
        (nix::sys::signal::Signal::SIGTERM, 2100),
    ]
    .into_iter()
    .enumerate()
    {
        let tag = format!("{}-{i}", std::process::id());
        let ev = tmp.path().join(format!("ev{i}"));
        let child = Command::new(EXE)
            .args(["run", "--evidence"])
            .arg(&ev)
            .env("NETPROBE_TEST_TAG", &tag)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        std::thread::sleep(std::time::Duration::from_millis(after_ms));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        if code == Some(0) {
            // The run finished before the signal landed: nothing to release.
            continue;
        }
        assert_eq!(
            code,
            Some(128 + sig as i32),
            "{sig} after {after_ms} ms:\n{stderr}"
        );
        assert!(stderr.contains("interrupted by"), "{stderr}");
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            tagged_processes(&tag).is_empty(),
            "{sig} after {after_ms} ms left: {:?}\n{stderr}",
            tagged_processes(&tag)
        );
        assert!(
            container_cgroups(pid).is_empty(),
            "{sig} after {after_ms} ms left containers: {:?}\n{stderr}",
            container_cgroups(pid)
        );
        // No mount below the evidence or below a work area this run released (other tests
        // run their own work areas at the same time, so only ours are checked).
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(
            !mounts.contains(ev.to_str().unwrap()),
            "{sig} after {after_ms} ms left mounts:\n{mounts}"
        );
        for work in stderr
            .lines()
            .filter_map(|l| l.trim().strip_prefix("netprobe:   released work area "))
        {
            assert!(!mounts.contains(work), "{work} still has mounts:\n{mounts}");
            assert!(!Path::new(work).exists(), "{work} was not removed");
        }
        if ev.exists() {
            assert!(ev.join("interrupted.txt").exists(), "{stderr}");
            assert!(!ev.join("netprobe-result.json").exists());
        }
    }
}

/// `--strace` on a runtime rung: the runtime and its forks at checkpoint and restore, and the
/// runtime's `criu swrk` at checkpoint, each in its own trace in the rung's folder.
#[test]
fn strace_covers_the_runtime_and_its_criu() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let ev = evidence_dir(&tmp, "ev");
    let o = netprobe(&[
        "run",
        "--phases",
        "oci",
        "--strace",
        "--quiet",
        "--evidence",
        ev.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let read = |f: &str| std::fs::read_to_string(ev.join("oci").join(f)).unwrap_or_default();
    assert!(
        read("strace-checkpoint.txt").contains("checkpoint"),
        "runc checkpoint traced"
    );
    assert!(
        read("strace-restore.txt").contains("restore"),
        "runc restore traced"
    );
    let swrk = read("strace-criu-checkpoint.txt");
    assert!(
        swrk.contains("\"swrk\""),
        "criu swrk traced: {}",
        &swrk[..swrk.len().min(300)]
    );
    assert!(read("criu-strace-wrapper.sh").starts_with("#!/bin/sh"));
    assert_nothing_left(&read_result(&ev));
}
