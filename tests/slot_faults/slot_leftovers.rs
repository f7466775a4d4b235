//! What a slot verb killed with SIGKILL leaves, and whose it is (root, real runc and CRIU,
//! through the binary):
//! - a first `slot snapshot` killed while CRIU dumps: the runtime and CRIU finish the dump
//!   without netprobe, so the container is gone, no snapshot is complete and CRIU's network lock
//!   stays in the holder's netns. `slot status` names the lock (`live.criu_network_lock`) and its
//!   advice says so; the killed verb's CRIU PATH folder (`/tmp/netprobe-criu-path-<pid>-…`)
//!   carries the slot's owner tag, so another slot's `cleanup` leaves it (and does not list
//!   it), and the slot's own `cleanup` takes it and records the lock it found.
//! - a lock left in phase `running` (planted twice, as a killed dump and a killed restore leave
//!   it: more jumps than CRIU's own unlock removes): `slot reset` removes it before its runtime
//!   restore (gate `no-criu-lock`) and passes `net-fidelity`; in phase `checkpointed` the dump's
//!   own lock is CRIU's to unlock and is left to it.
use crate::common::slot_support;
use netprobe::slot::{SlotLock, Verb};
use slot_support::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `slot status --json` of `slot`, validated against the slot-state schema.
fn status(v: &jsonschema::Validator, slot: &str, sd: &Path) -> serde_json::Value {
    let (code, out, err) = cli_slot("status", slot, sd, &["--json"]);
    assert_eq!(code, Some(0), "status: {err}{out}");
    let doc = json(&out);
    assert_valid(v, &doc);
    doc
}

/// The entries of the temporary folder named `netprobe-criu-path-<pid>-…`.
fn criu_path_dirs_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("netprobe-criu-path-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// The `verb.json` of the newest `verb` folder of slot folder `slot_dir`.
fn verb_json(slot_dir: &Path, verb: &str) -> serde_json::Value {
    let p = newest(slot_dir, verb).join("verb.json");
    json(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

/// Starts `slot snapshot` of `slot` (output discarded) and kills it with SIGKILL once CRIU has
/// locked the network (`Lock network` in the dump log) while its CRIU PATH folder exists; then
/// waits until the runtime and CRIU it left have let go of the slot lock. Returns the killed
/// verb's pid.
fn kill_snapshot_while_dumping(slot: &str, sd: &Path) -> u32 {
    let slot_dir = sd.join(format!("slot-{slot}"));
    let mut child = std::process::Command::new(EXE)
        .args(["slot", "snapshot", "--slot", slot, "--state-dir"])
        .arg(sd)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let locked = || {
        std::fs::read_dir(slot_dir.join("evidence"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with("-snapshot"))
            .any(|e| {
                netprobe::evidence::read_recorded_text(&e.path().join("criu-work/dump.log"))
                    .is_ok_and(|l| l.contains("Lock network"))
            })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !locked() || criu_path_dirs_of(pid).is_empty() {
        assert!(Instant::now() < deadline, "CRIU never locked the network");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the snapshot finished before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while SlotLock::acquire(&slot_dir.join("lock")).is_err() {
        assert!(Instant::now() < deadline, "lock never released");
        std::thread::sleep(Duration::from_millis(50));
    }
    pid
}

#[test]
fn killed_first_snapshot_leftovers_stay_with_their_slot_and_status_names_criu_lock() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let v = slot_state_validator();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![91, 92]);
    let (a, b) = (sd.join("slot-91"), sd.join("slot-92"));
    for slot in ["91", "92"] {
        let (code, out, err) = cli_slot(
            "provision",
            slot,
            &sd,
            &["--no-probe-gate", "--reason", "leftovers test"],
        );
        assert_eq!(code, Some(0), "provision {slot}: {err}{out}");
    }
    let owner_a = state(&sd, 91).owner_id;

    let killed = kill_snapshot_while_dumping("91", &sd);
    let left = criu_path_dirs_of(killed);
    assert!(!left.is_empty(), "the SIGKILL left no CRIU PATH folder");
    for d in &left {
        assert!(
            d.to_string_lossy()
                .contains(&format!("-{killed}-slot-{owner_a}-")),
            "not tagged with slot 91's owner id {owner_a}: {}",
            d.display()
        );
    }

    // The runtime and CRIU finished the dump: no container, no complete snapshot, CRIU's lock
    // in the holder's netns — named by status, and by its advice beside cleanup.
    let doc = status(&v, "91", &sd);
    assert_eq!(doc["state"]["phase"], "snapshotting", "{doc:#}");
    assert_eq!(doc["live"]["container"]["status"], "absent", "{doc:#}");
    assert_eq!(doc["snapshot"]["complete"], false, "{doc:#}");
    let lock = &doc["live"]["criu_network_lock"];
    assert_eq!(lock["status"], "present", "{doc:#}");
    assert!(
        lock["detail"]
            .as_str()
            .unwrap()
            .contains("chain CRIU in table filter"),
        "{lock}"
    );
    let advice = doc["advice"].as_str().unwrap_or_default();
    assert!(
        advice.contains("slot cleanup")
            && advice.contains("CRIU's network lock is in the holder's network namespace")
            && advice.contains("phase snapshotting"),
        "{advice}"
    );
    // Slot 92 has no lock, and no advice.
    let doc = status(&v, "92", &sd);
    assert_eq!(
        doc["live"]["criu_network_lock"]["status"], "absent",
        "{doc:#}"
    );
    assert!(doc["advice"].is_null(), "{doc:#}");

    // Another slot's cleanup leaves slot 91's leftovers alone and does not list them.
    let holders = holder_pids(&sd);
    let (code, out, err) = cli_slot("cleanup", "92", &sd, &[]);
    assert_eq!(code, Some(0), "cleanup 92: {err}{out}");
    let doc92 = verb_json(&b, "cleanup").to_string();
    for d in &left {
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        assert!(d.exists(), "slot 92's cleanup removed {}", d.display());
        assert!(
            !out.contains(&name),
            "slot 92's cleanup names {name}: {out}"
        );
        assert!(!doc92.contains(&name), "slot 92's verb.json names {name}");
    }
    assert_eq!(
        verb_json(&b, "cleanup")["facts"]["criu_network_lock_at_cleanup"]["status"],
        "absent"
    );

    // Its own cleanup takes them, names them, and records the lock it found.
    let (code, out, err) = cli_slot("cleanup", "91", &sd, &[]);
    assert_eq!(code, Some(0), "cleanup 91: {err}{out}");
    assert_eq!(criu_path_dirs_of(killed), Vec::<PathBuf>::new(), "{out}");
    for d in &left {
        assert!(
            out.contains(d.to_string_lossy().as_ref()),
            "not named: {}: {out}",
            d.display()
        );
    }
    assert!(
        out.contains("CRIU's network lock was in the holder's netns at cleanup"),
        "{out}"
    );
    let doc = verb_json(&a, "cleanup");
    let fact = &doc["facts"]["criu_network_lock_at_cleanup"];
    assert_eq!(fact["status"], "present", "{doc:#}");
    assert!(
        doc["facts"]["stale_criu_path_dirs_removed"]
            .to_string()
            .contains(left[0].to_string_lossy().as_ref()),
        "{doc:#}"
    );
    assert_released(&sd, &holders);
}

#[test]
fn reset_removes_a_lock_left_in_phase_running_before_its_restore() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let v = slot_state_validator();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![93]);
    let slot = sd.join("slot-93");
    ok(Verb::Provision, "93", &sd);
    let h = state(&sd, 93).holder.unwrap();
    assert_eq!(
        status(&v, "93", &sd)["live"]["criu_network_lock"]["status"],
        "absent"
    );

    // Checkpointed: the dump's own lock, which the restore of that snapshot unlocks; status
    // names it without advice, and the restore leaves it to CRIU.
    ok(Verb::Snapshot, "93", &sd);
    let doc = status(&v, "93", &sd);
    assert_eq!(
        doc["live"]["criu_network_lock"]["status"], "present",
        "{doc:#}"
    );
    assert!(doc["advice"].is_null(), "{doc:#}");
    let r = ok(Verb::Restore, "93", &sd);
    assert!(
        r.facts["criu_lock_before_restore"]
            .as_str()
            .unwrap()
            .starts_with("not looked for: phase checkpointed"),
        "{:?}",
        r.facts
    );
    assert!(!r.gates.iter().any(|g| g.name == "no-criu-lock"), "{r:?}");
    assert!(gate(&r, "net-fidelity").proven);
    assert_eq!(lock_in(&h), Vec::<String>::new());

    // Running, with a lock a killed dump and a killed restore left (two jumps per chain).
    plant_lock(&h);
    plant_lock(&h);
    let mut doc = status(&v, "93", &sd);
    assert_eq!(
        doc["live"]["criu_network_lock"]["status"], "present",
        "{doc:#}"
    );
    let advice = doc["advice"].as_str().unwrap_or_default();
    assert!(
        advice.contains("CRIU's network lock is in the holder's network namespace")
            && advice.contains("phase running")
            && advice.contains("gate no-criu-lock"),
        "{advice}"
    );
    // The schema holds the field to its three words.
    doc["live"]["criu_network_lock"]["status"] = "maybe".into();
    assert!(!v.is_valid(&doc), "the schema accepts status \"maybe\"");

    let r = ok(Verb::Reset, "93", &sd);
    let g = gate(&r, "no-criu-lock");
    assert!(
        g.proven
            && g.detail.contains("before the restore (phase running)")
            && g.detail
                .contains("removed iptables: chain CRIU in table filter"),
        "{g:?}"
    );
    assert!(gate(&r, "net-fidelity").proven);
    let ev = std::fs::read_to_string(
        newest(&slot, "reset").join("criu-lock-released-before-restore.txt"),
    )
    .unwrap();
    assert!(
        ev.contains("found: iptables: chain CRIU in table filter"),
        "{ev}"
    );
    assert_eq!(lock_in(&h), Vec::<String>::new());
    assert_eq!(
        status(&v, "93", &sd)["live"]["criu_network_lock"]["status"],
        "absent"
    );

    let holders = holder_pids(&sd);
    let c = ok(Verb::Cleanup, "93", &sd);
    assert_eq!(c.facts["criu_network_lock_at_cleanup"]["status"], "absent");
    assert!(status(&v, "93", &sd)["live"]["criu_network_lock"].is_null());
    assert_released(&sd, &holders);
}
