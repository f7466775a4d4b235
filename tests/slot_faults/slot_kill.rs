//! `netprobe slot snapshot` killed with SIGKILL in the middle of its checkpoint, driven through
//! the real binary, then every verb run again (through the binary): the interrupted snapshot is
//! never used, the previous complete one still restores, `status --json` stays valid, and
//! `cleanup` releases everything.
use crate::common::slot_support;
use netprobe::slot::SlotLock;
use slot_support::*;
use std::time::{Duration, Instant};

/// `netprobe slot VERB --slot N --state-dir SD` started with its output discarded (to be killed).
fn spawn_quiet(verb: &str, slot: &str, sd: &std::path::Path) -> std::process::Child {
    std::process::Command::new(EXE)
        .args(["slot", verb, "--slot", slot, "--state-dir"])
        .arg(sd)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn sigkill_mid_snapshot_then_every_verb() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![31]);
    let v = slot_state_validator();
    let slot = sd.join("slot-31");

    let (code, out, err) = cli_slot(
        "provision",
        "31",
        &sd,
        &["--no-probe-gate", "--reason", "SIGKILL test", "--json"],
    );
    assert_eq!(code, Some(0), "provision: {err}{out}");
    assert!(gate_proven(&json(&out), "guest-http"), "{out}");
    for verb in ["snapshot", "restore"] {
        let (code, out, err) = cli_slot(verb, "31", &sd, &[]);
        assert_eq!(code, Some(0), "{verb}: {err}{out}");
    }
    let good = state(&sd, 31).snapshot.unwrap();

    // Kill `netprobe slot snapshot` once it has created the checkpoint image directory, i.e.
    // while the runtime checkpoint is starting or running.
    let mut child = spawn_quiet("snapshot", "31", &sd);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = false;
    while Instant::now() < deadline && !seen {
        seen = std::fs::read_dir(&slot).unwrap().flatten().any(|e| {
            e.file_name().to_string_lossy().starts_with("snapshot.tmp-")
                && e.path().join("checkpoint").exists()
        });
        if !seen {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the snapshot finished before it could be killed"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    assert!(seen, "the child never started its checkpoint");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let st = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(libc::SIGKILL)
    );
    // A SIGKILL runs no clean-up: the CRIU PATH folder of the killed verb's runtime call (if the
    // kill came after the call made it) is left in the temporary folder until `cleanup` sweeps
    // it (its process no longer exists).
    let killed_path_dirs = || -> Vec<String> {
        let prefix = format!("netprobe-criu-path-{}-", child.id());
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&prefix))
            .collect()
    };
    let left = killed_path_dirs();

    // Status works at once and validates; the runtime/CRIU the killed verb started keep the
    // slot locked until they exit (the lock is inherited), then the lock is free again.
    let (code, out, err) = cli_slot("status", "31", &sd, &["--json"]);
    assert_eq!(code, Some(0), "{err}");
    assert_valid(&v, &json(&out));
    let deadline = Instant::now() + Duration::from_secs(60);
    while SlotLock::acquire(&slot.join("lock")).is_err() {
        assert!(Instant::now() < deadline, "lock never released");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, out, _) = cli_slot("status", "31", &sd, &["--json"]);
    let s2 = json(&out);
    assert_valid(&v, &s2);
    assert_eq!(s2["state"]["phase"], "snapshotting", "{s2}");
    let tmps = s2["stale_snapshot_tmp"].as_array().unwrap().clone();
    assert!(
        !tmps.is_empty(),
        "the interrupted snapshot is left visible: {s2}"
    );
    // The interrupted snapshot is never used: the complete one is still referenced.
    assert_eq!(state(&sd, 31).snapshot.unwrap(), good);
    assert_eq!(s2["snapshot"]["complete"], true, "{s2}");

    // Every verb again, through the binary. A snapshot that completes removes the folder the
    // killed one left (never used), and says so.
    let mut removed_by = String::new();
    for verb in ["snapshot", "restore"] {
        let (code, out, err) = cli_slot(verb, "31", &sd, &[]);
        if verb == "snapshot" && code == Some(0) {
            removed_by = out.clone();
        }
        assert!(
            code == Some(0) || code == Some(1),
            "{verb} after SIGKILL: exit {code:?}: {err}{out}"
        );
        if code == Some(1) {
            assert!(err.contains("slot 31") && err.contains("gate"), "{err}");
        }
    }
    for i in 0..2 {
        let (code, out, err) = cli_slot("reset", "31", &sd, &["--json"]);
        assert_eq!(code, Some(0), "reset {i}: {err}{out}");
        let doc = json(&out);
        assert!(gate_proven(&doc, "net-fidelity"), "{doc}");
        assert!(gate_proven(&doc, "guest-http"), "{doc}");
    }
    let (_, out, _) = cli_slot("status", "31", &sd, &["--json"]);
    assert_valid(&v, &json(&out));
    let holders = holder_pids(&sd);
    let (code, out, err) = cli_slot("cleanup", "31", &sd, &[]);
    assert_eq!(code, Some(0), "cleanup: {err}{out}");
    assert_released(&sd, &holders);
    assert_eq!(killed_path_dirs(), Vec::<String>::new(), "swept by cleanup");
    for d in &left {
        assert!(
            out.contains(d.as_str()),
            "cleanup output does not name {d}: {out}"
        );
    }
    // The interrupted snapshot's folder is removed (never evidence) by the next snapshot that
    // completes, else by cleanup; the verb that removed it says so in its output and in the
    // journal.
    let (verb, said) = match removed_by.is_empty() {
        true => ("\"cleanup\"", out.clone()),
        false => ("\"snapshot\"", removed_by.clone()),
    };
    let journal = std::fs::read_to_string(slot.join("journal.jsonl")).unwrap();
    for t in &tmps {
        let t = t.as_str().unwrap();
        assert!(!slot.join(t).exists(), "{t} left after cleanup");
        assert!(said.contains(t), "{verb} output does not name {t}: {said}");
        assert!(
            journal
                .lines()
                .any(|l| l.contains(verb) && l.contains(t) && l.contains("removed")),
            "journal does not record the removal of {t} by {verb}"
        );
    }
    let (_, out, _) = cli_slot("status", "31", &sd, &["--json"]);
    let doc = json(&out);
    assert_valid(&v, &doc);
    assert_eq!(doc["state"]["phase"], "clean");
    assert_eq!(doc["stale_snapshot_tmp"], serde_json::json!([]), "{doc}");
    // Nothing half-deleted: evidence and the complete snapshot are kept.
    assert!(
        slot.join(state(&sd, 31).snapshot.unwrap().dir)
            .join("manifest.json")
            .exists()
    );
    assert!(slot.join("journal.jsonl").exists());
}

/// `netprobe slot reset` killed with SIGKILL while CRIU restores: the runtime and CRIU finish the
/// restore on their own, so a container runs that no restore gate checked (phase `restoring`).
/// A snapshot must not take it (gate `container-gated`, naming `slot reset`): it would replace
/// the last proven snapshot. The snapshot is kept; reset brings it back through every gate, and
/// a snapshot is taken again after it.
#[test]
fn sigkill_mid_restore_then_snapshot_refuses_the_ungated_container() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![32]);
    let slot = sd.join("slot-32");
    let (code, out, err) = cli_slot(
        "provision",
        "32",
        &sd,
        &["--no-probe-gate", "--reason", "SIGKILL test"],
    );
    assert_eq!(code, Some(0), "provision: {err}{out}");
    let (code, out, err) = cli_slot("snapshot", "32", &sd, &[]);
    assert_eq!(code, Some(0), "snapshot: {err}{out}");
    let good = state(&sd, 32).snapshot.unwrap();

    let mut child = spawn_quiet("reset", "32", &sd);
    // Killed once CRIU has started writing its restore log.
    let deadline = Instant::now() + Duration::from_secs(60);
    let restoring = || {
        std::fs::read_dir(slot.join("evidence"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with("-reset"))
            .any(|e| {
                // Stored compressed once the restore succeeded.
                e.path().join("criu-work/restore.log").exists()
                    || e.path().join("criu-work/restore.log.zst").exists()
            })
    };
    while !restoring() {
        assert!(
            Instant::now() < deadline,
            "the reset never reached CRIU's restore"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the reset finished before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while SlotLock::acquire(&slot.join("lock")).is_err() {
        assert!(Instant::now() < deadline, "lock never released");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, out, _) = cli_slot("status", "32", &sd, &["--json"]);
    let doc = json(&out);
    assert_eq!(doc["state"]["phase"], "restoring", "{doc}");
    assert_eq!(
        doc["live"]["container"]["status"], "running",
        "runc and CRIU finish the restore without netprobe: {doc}"
    );

    let (code, out, err) = cli_slot("snapshot", "32", &sd, &["--json"]);
    assert_eq!(code, Some(1), "{err}{out}");
    assert!(
        err.contains("gate `container-gated` failed")
            && err.contains("phase restoring")
            && err.contains("netprobe slot reset --slot 32"),
        "{err}"
    );
    assert_eq!(
        state(&sd, 32).snapshot.unwrap(),
        good,
        "the proven snapshot is kept"
    );
    assert!(slot.join(&good.dir).join("manifest.json").exists());

    let (code, out, err) = cli_slot("reset", "32", &sd, &["--json"]);
    assert_eq!(code, Some(0), "reset: {err}{out}");
    assert!(gate_proven(&json(&out), "net-fidelity"), "{out}");
    let (code, out, err) = cli_slot("snapshot", "32", &sd, &["--json"]);
    assert_eq!(code, Some(0), "snapshot after reset: {err}{out}");
    assert!(gate_proven(&json(&out), "container-gated"), "{out}");
    let holders = holder_pids(&sd);
    let (code, out, err) = cli_slot("cleanup", "32", &sd, &[]);
    assert_eq!(code, Some(0), "cleanup: {err}{out}");
    assert_released(&sd, &holders);
}
