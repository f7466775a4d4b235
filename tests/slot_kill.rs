//! netprobe killed with SIGKILL in the middle of a snapshot, then every verb run again: the
//! interrupted snapshot is never used, the previous complete one still restores, cleanup releases
//! everything. The killed process is this test binary re-executed on `child_snapshot` (the same
//! library code path as `netprobe slot snapshot`).
mod slot_support;
use netprobe::slot::{SlotLock, Verb};
use slot_support::*;
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "NETPROBE_SLOT_TEST_CHILD_STATE_DIR";

#[test]
fn child_snapshot() {
    if let Some(sd) = std::env::var_os(CHILD_ENV) {
        let _ = run(Verb::Snapshot, "31", std::path::Path::new(&sd));
    }
}

#[test]
fn sigkill_mid_snapshot_then_every_verb() {
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![31]);
    let img = sleep_image(tmp.path());
    provision_dir("31", &sd, &img).unwrap_or_else(|e| panic!("{e}"));
    ok(Verb::Snapshot, "31", &sd);
    ok(Verb::Restore, "31", &sd);
    let good = state(&sd, 31).snapshot.unwrap();
    let slot = sd.join("slot-31");

    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_snapshot",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(CHILD_ENV, &sd)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = false;
    while Instant::now() < deadline && !seen {
        seen = std::fs::read_dir(&slot)
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("snapshot.tmp-"));
        if !seen {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    assert!(seen, "the child never started its snapshot");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let st = child.wait().unwrap();
    assert!(!st.success());

    // Status works at once; the runtime/CRIU the killed verb started keep the slot locked until
    // they exit (the lock is inherited), then the lock is free again.
    let s = ok(Verb::Status, "31", &sd).to_json();
    let deadline = Instant::now() + Duration::from_secs(60);
    while SlotLock::acquire(&slot.join("lock")).is_err() {
        assert!(Instant::now() < deadline, "lock never released");
        std::thread::sleep(Duration::from_millis(50));
    }
    let s2 = ok(Verb::Status, "31", &sd).to_json();
    let tmps = s2["stale_snapshot_tmp"].as_array().unwrap();
    let referenced = state(&sd, 31).snapshot.unwrap();
    // The interrupted snapshot is never used: either still the old one, or (if the kill landed
    // after the rename) a complete one that passed its manifest check.
    if referenced == good {
        assert!(!tmps.is_empty() || s["stale_snapshot_tmp"].as_array().is_some());
    }
    assert_eq!(s2["snapshot"]["complete"], true, "{s2}");

    // Every verb again.
    for verb in [Verb::Snapshot, Verb::Restore] {
        match run(verb, "31", &sd) {
            Ok(_) => {}
            Err(e) => assert_eq!(e.exit_code(), 1, "{} after SIGKILL: {e}", verb.as_str()),
        }
    }
    for _ in 0..2 {
        let r = ok(Verb::Reset, "31", &sd);
        assert!(gate(&r, "net-fidelity").proven);
    }
    let holders = holder_pids(&sd);
    ok(Verb::Cleanup, "31", &sd);
    assert_released(&sd, &holders);
    // Nothing half-deleted: evidence and the complete snapshot are kept.
    assert!(
        slot.join(state(&sd, 31).snapshot.unwrap().dir)
            .join("manifest.json")
            .exists()
    );
    assert!(slot.join("journal.jsonl").exists());
}
