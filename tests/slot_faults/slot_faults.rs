//! Bad input and faults: each gives a clear error naming the slot and the gate, the documented
//! exit code, loses nothing, and `cleanup` still releases everything.
use crate::common::slot_state_faults as state_faults;
use crate::common::slot_support;
use netprobe::ns::ProcessIdentity;
use netprobe::slot::{Phase, SlotLock, SlotState, Verb, run_verb};
use slot_support::*;
use std::path::{Path, PathBuf};

/// One provisioned slot walked through the faults that do not destroy it.
#[test]
fn lifecycle_faults() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![11]);
    let img = sleep_image(tmp.path());

    refusals_before_a_snapshot(&sd, &img);
    a_held_lock_and_an_edited_config_are_refused(&sd);
    let holder = snapshot_restore_and_a_changed_netns(&sd);
    a_half_written_runtime_state_is_removed(&sd);
    an_edited_snapshot_is_refused(&sd);
    a_container_the_runtime_lost_is_refused(&sd);
    let good = state_faults::an_overlay_run_out_of_step_is_refused(&sd);
    let kept = state_faults::status_without_a_readable_state(&sd, &good);
    state_faults::a_snapshot_folder_outside_the_slot_is_refused(&sd, tmp.path(), &kept);
    let stray = a_stray_in_the_netns(&holder);
    a_killed_holder_is_refused(&sd, &holder);
    cleanup_refuses_beside_the_stray_then_releases(&sd, &holder, stray);
    a_cleaned_slot_refuses_every_verb(&sd);
}

// The steps of `lifecycle_faults`, in its order, on slot 11 of the state directory `sd` (those
// on state.json are in common/slot_state_faults.rs).

/// Snapshot before provision, on a slot never provisioned, provision on an existing slot,
/// restore and reset without a complete snapshot: each refused by its gate. Provisions slot 11
/// from `img`.
fn refusals_before_a_snapshot(sd: &Path, img: &Path) {
    // Snapshot before provision.
    let e = err(&args(Verb::Snapshot, "11", sd));
    assert_gate_err(&e, "11", "state-dir", 1);
    provision_dir("11", sd, img).unwrap_or_else(|e| panic!("{e}"));
    let e = err(&args(Verb::Snapshot, "12", sd));
    assert_gate_err(&e, "12", "ownership-marker", 1);
    assert!(e.message.contains("never provisioned"), "{e}");

    // Provision on an existing, live slot: refused, with the way out: cleanup first (moving
    // the folder away would leave its container, holder and mounts running with no owner).
    let e = err(&args(Verb::Provision, "11", sd));
    assert_gate_err(&e, "11", "slot-fresh", 1);
    let cleanup = format!(
        "`netprobe slot cleanup --slot 11 --state-dir {}`",
        sd.display()
    );
    assert!(
        e.message.contains("never re-provisioned in place")
            && e.message.contains("records phase ready")
            && e.message.contains("may still be live")
            && e.message.contains(&cleanup)
            && !e.message.contains("number, or move"),
        "{e}"
    );

    // Restore / reset without a complete snapshot.
    assert_gate_err(
        &err(&args(Verb::Restore, "11", sd)),
        "11",
        "snapshot-complete",
        1,
    );
    assert_gate_err(
        &err(&args(Verb::Reset, "11", sd)),
        "11",
        "snapshot-complete",
        1,
    );
    assert_eq!(
        ok(Verb::Status, "11", sd).to_json()["live"]["container"]["status"],
        "running"
    );
}

/// Two verbs at once (the second refused, not queued), and a tampered config.json.
fn a_held_lock_and_an_edited_config_are_refused(sd: &Path) {
    // Two verbs at once: the second is refused, not queued.
    {
        let _held = SlotLock::acquire(&sd.join("slot-11/lock")).unwrap();
        for verb in [Verb::Snapshot, Verb::Cleanup] {
            assert_gate_err(&err(&args(verb, "11", sd)), "11", "slot-lock", 1);
        }
        assert_eq!(ok(Verb::Status, "11", sd).to_json()["busy"], true);
    }

    // Tampered config.json.
    let cfg = sd.join("slot-11/bundle/config.json");
    let orig = std::fs::read(&cfg).unwrap();
    let mut t = orig.clone();
    t.extend_from_slice(b" ");
    std::fs::write(&cfg, &t).unwrap();
    let e = err(&args(Verb::Snapshot, "11", sd));
    assert_gate_err(&e, "11", "config-hash", 1);
    assert!(e.evidence.as_ref().unwrap().join("gates.json").exists());
    std::fs::write(&cfg, &orig).unwrap();
}

/// Snapshot and restore, then an address added inside the namespace: the reset's net-fidelity
/// gate names it and the holder is kept; the address removed again. Returns the holder.
fn snapshot_restore_and_a_changed_netns(sd: &Path) -> ProcessIdentity {
    ok(Verb::Snapshot, "11", sd);
    // Restore while a container exists would be refused; here it is stopped by the checkpoint.
    ok(Verb::Restore, "11", sd);
    assert_gate_err(
        &err(&args(Verb::Restore, "11", sd)),
        "11",
        "container-absent",
        1,
    );

    // An address added inside the namespace between snapshot and restore.
    let holder = state(sd, 11).holder.unwrap();
    let nsenter = |op: &str| {
        let st = std::process::Command::new("nsenter")
            .arg(format!("--net=/proc/{}/ns/net", holder.pid))
            .args(["ip", "addr", op, "10.77.0.1/32", "dev", "lo"])
            .status()
            .unwrap();
        assert!(st.success());
    };
    nsenter("add");
    let e = err(&args(Verb::Reset, "11", sd));
    assert_gate_err(&e, "11", "net-fidelity", 1);
    let diff = e.diff.clone().unwrap();
    // Field paths, the way `run` prints them, not whole JSON lines with "+" and "-".
    assert!(
        diff.contains("/addresses/") && diff.contains("10.77.0.1"),
        "{diff}"
    );
    assert!(
        !diff
            .lines()
            .any(|l| l.starts_with("+ ") || l.starts_with("- ")),
        "{diff}"
    );
    assert!(e.to_string().contains("10.77.0.1"));
    assert!(
        e.evidence
            .as_ref()
            .unwrap()
            .join("netstate-diff.txt")
            .exists()
    );
    let s = state(sd, 11);
    assert_eq!(s.phase, Phase::RestoreFailed);
    holder.verify().expect("a failed restore keeps the holder");
    // Retry after the namespace is put back: works.
    nsenter("del");
    holder
}

/// runc killed mid-restore leaves its half-written state: the next restore removes it.
fn a_half_written_runtime_state_is_removed(sd: &Path) {
    // runc killed mid-restore leaves its half-written state: `<root>/<id>/criu-root` with the
    // rootfs bind-mounted and no state.json — runc then says no such container, yet refuses the
    // id. The next restore removes it (fact runtime_half_state), then restores.
    let s = state(sd, 11);
    let half = s.runtime_root.join(&s.container_id);
    let criu_root = half.join("criu-root");
    std::fs::create_dir_all(&criu_root).unwrap();
    nix::mount::mount(
        Some(&sd.join("slot-11")),
        &criu_root,
        None::<&str>,
        nix::mount::MsFlags::MS_BIND,
        None::<&str>,
    )
    .unwrap();
    // … and, killed between writing its temporary pid file and renaming it (trial 21), runc's
    // `.container.pid`: opened O_EXCL, it made every later restore fail ("file exists").
    let pid_temp = sd.join("slot-11/.container.pid");
    std::fs::write(&pid_temp, "11953").unwrap();
    let o = ok(Verb::Restore, "11", sd);
    let done = o.facts["runtime_half_state"].as_str().unwrap_or_default();
    assert!(
        done.contains("no state.json")
            && done.contains(&format!("unmounted {}", criu_root.display()))
            && done.contains(&format!(
                "runc's temporary pid file left by a killed create or restore, removed: {}",
                pid_temp.display()
            )),
        "{:?}",
        o.facts
    );
    assert!(!netprobe::slot::resources::mounts::is_mounted(&criu_root));
    assert!(!pid_temp.exists());
    ok(Verb::Reset, "11", sd);
}

/// The snapshot's saved upper or manifest edited: refused; put back, reset proves its copy.
fn an_edited_snapshot_is_refused(sd: &Path) {
    // The snapshot's saved upper or manifest edited: refused before anything changes, and a
    // copy of the upper is proven before it is mounted.
    let snap = sd.join("slot-11").join(state(sd, 11).snapshot.unwrap().dir);
    std::fs::write(snap.join("upper/evil"), b"hacked").unwrap();
    for verb in [Verb::Reset, Verb::Restore] {
        let e = err(&args(verb, "11", sd));
        assert_gate_err(&e, "11", "snapshot-complete", 1);
        assert!(
            e.message
                .contains("the saved upper changed since the snapshot"),
            "{e}"
        );
        assert!(
            e.message
                .contains("against manifest.json's listing: added ./evil)"),
            "{e}"
        );
    }
    std::fs::remove_file(snap.join("upper/evil")).unwrap();
    let manifest = snap.join("manifest.json");
    let orig_manifest = std::fs::read(&manifest).unwrap();
    let edited = String::from_utf8(orig_manifest.clone()).unwrap().replacen(
        "\"upper_run\"",
        "\"edited\": 1, \"upper_run\"",
        1,
    );
    std::fs::write(&manifest, edited).unwrap();
    let e = err(&args(Verb::Reset, "11", sd));
    assert_gate_err(&e, "11", "snapshot-complete", 1);
    assert!(
        e.message
            .contains("the manifest changed since the snapshot"),
        "{e}"
    );
    std::fs::write(&manifest, &orig_manifest).unwrap();
    // A checkpoint image rewritten: a byte changed is named by digest; the same bytes put back
    // pass by a re-hash (its ctime moved, so its recorded stat no longer proves it).
    let img = snap.join("checkpoint/inventory.img");
    let orig_img = std::fs::read(&img).unwrap();
    let mut flipped = orig_img.clone();
    flipped[0] ^= 0xff;
    std::fs::write(&img, &flipped).unwrap();
    let e = err(&args(Verb::Reset, "11", sd));
    assert_gate_err(&e, "11", "snapshot-complete", 1);
    assert!(
        e.message.contains("(blake3): changed inventory.img ("),
        "{e}"
    );
    std::fs::write(&img, &orig_img).unwrap();
    let o = ok(Verb::Reset, "11", sd);
    let g = gate(&o, "snapshot-complete");
    assert!(
        g.proven
            && g.detail.contains("(blake3 as recorded)")
            && !g.detail.contains("not re-hashed"),
        "{g:?}"
    );
    assert!(gate(&o, "upper-copy").proven);
    assert!(gate(&o, "cgroup-empty").proven);
    assert!(gate(&o, "netns-empty").proven);
}

/// The runtime loses track of the running container: restore and reset refuse (cgroup-empty,
/// then netns-empty once its init left its cgroups) and status names it; then put back.
fn a_container_the_runtime_lost_is_refused(sd: &Path) {
    // The runtime loses track of the running container (its root entry moved away): restore
    // and reset refuse to bring up a second one beside it, naming its pid.
    let s = state(sd, 11);
    let entry = s.runtime_root.join(&s.container_id);
    let aside = s.runtime_root.join("aside");
    std::fs::rename(&entry, &aside).unwrap();
    let init = std::fs::read_to_string(sd.join("slot-11/container.pid")).unwrap();
    for verb in [Verb::Restore, Verb::Reset] {
        let e = err(&args(verb, "11", sd));
        assert_gate_err(&e, "11", "cgroup-empty", 1);
        assert!(
            e.message
                .contains(&format!("processes {} still run", init.trim())),
            "{e}"
        );
    }
    let moved = a_lost_init_outside_its_cgroups_is_refused(sd, &s, &init);
    status_names_the_lost_container(sd, &init);
    for d in &moved {
        std::fs::write(d.join("cgroup.procs"), init.trim()).unwrap();
    }
    std::fs::rename(&aside, &entry).unwrap();
}

/// The lost container's init (pid `init`) moved to each hierarchy's root cgroup: netns-empty
/// refuses. Returns the container's cgroup folders it was moved out of.
fn a_lost_init_outside_its_cgroups_is_refused(
    sd: &Path,
    s: &SlotState,
    init: &str,
) -> Vec<PathBuf> {
    // The lost container's init moved out of its cgroups too (to each hierarchy's root):
    // the cgroup is empty, but the process still shares the holder's network namespace and
    // its port: `netns-empty` refuses, naming it.
    let own = std::fs::read_to_string(format!("/proc/{}/cgroup", init.trim())).unwrap();
    let dirs = s
        .cgroup
        .as_ref()
        .and_then(|c| c.last_readback.as_ref())
        .unwrap()
        .container_dirs()
        .unwrap();
    let mut moved = Vec::new();
    for d in &dirs {
        let rel = own
            .lines()
            .filter_map(|l| l.splitn(3, ':').nth(2))
            .map(|p| p.trim_start_matches('/'))
            .find(|p| !p.is_empty() && d.ends_with(p))
            .unwrap_or_else(|| panic!("{} is not in {own}", d.display()));
        let root = d
            .ancestors()
            .nth(std::path::Path::new(rel).components().count())
            .unwrap();
        std::fs::write(root.join("cgroup.procs"), init.trim()).unwrap();
        moved.push(d.clone());
    }
    for verb in [Verb::Restore, Verb::Reset] {
        let e = err(&args(verb, "11", sd));
        assert_gate_err(&e, "11", "netns-empty", 1);
        assert!(
            e.message.contains(&format!("processes {} (", init.trim()))
                && e.message.contains("beside the holder"),
            "{e}"
        );
    }
    moved
}

/// `slot status` names the lost container (its init `init` beside the holder) and what to do;
/// while a verb holds the lock, it names no processes.
fn status_names_the_lost_container(sd: &Path, init: &str) {
    // `slot status` names the lost container: its process left beside the holder, and says
    // what to do.
    let doc = ok(Verb::Status, "11", sd).to_json();
    assert_valid(&slot_state_validator(), &doc);
    let left = &doc["live"]["left_processes"];
    assert_eq!(doc["live"]["container"]["status"], "absent", "{doc:#}");
    assert_eq!(left["cgroup"]["none"], true, "{left:#}");
    assert_eq!(left["netns"]["none"], false, "{left:#}");
    assert!(
        left["netns"]["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("processes {} (", init.trim())),
        "{left:#}"
    );
    let advice = doc["advice"].as_str().unwrap_or_default();
    assert!(
        advice.contains("phase running") && advice.contains("live.left_processes"),
        "{doc:#}"
    );
    // While a verb holds the slot lock, its own processes look like a lost container: status
    // says a verb runs, and names no processes to kill.
    {
        let _held = SlotLock::acquire(&sd.join("slot-11/lock")).unwrap();
        let doc = ok(Verb::Status, "11", sd).to_json();
        assert_eq!(doc["busy"], true, "{doc:#}");
        assert!(doc["live"]["left_processes"].is_null(), "{doc:#}");
        let advice = doc["advice"].as_str().unwrap_or_default();
        assert!(
            advice.contains(
                "a verb is running on this slot (its lock is held by this netprobe process"
            ) && !advice.contains("kill -9"),
            "{doc:#}"
        );
    }
}

/// A process started in the slot's network namespace (of `holder`) outside the container;
/// returned once it is in the namespace.
fn a_stray_in_the_netns(holder: &ProcessIdentity) -> KillOnDrop {
    // A process started in the slot's network namespace outside the container (what a lost
    // container amounts to), then the holder killed: cleanup stops the container it knows,
    // then refuses before unmounting anything while the stray keeps the namespace — named,
    // with the way on.
    let stray = KillOnDrop(
        std::process::Command::new("nsenter")
            .arg(format!("--net=/proc/{}/ns/net", holder.pid))
            .args(["sleep", "1000"])
            .spawn()
            .unwrap(),
    );
    let in_ns = || {
        std::fs::read_link(format!("/proc/{}/ns/net", stray.0.id()))
            .is_ok_and(|l| l.to_string_lossy() == format!("net:[{}]", holder.netns_inode))
            && std::fs::read_to_string(format!("/proc/{}/comm", stray.0.id()))
                .is_ok_and(|c| c.trim() == "sleep")
    };
    let t0 = std::time::Instant::now();
    while !in_ns() {
        assert!(
            t0.elapsed().as_secs() < 5,
            "nsenter did not enter the slot's netns"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    stray
}

/// The holder killed: every verb but cleanup refuses (holder-identity).
fn a_killed_holder_is_refused(sd: &Path, holder: &ProcessIdentity) {
    // Killed holder.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(holder.pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let t0 = std::time::Instant::now();
    while netprobe::ns::ProcessIdentity::read(holder.pid).is_ok() {
        assert!(
            t0.elapsed().as_secs() < 10,
            "the killed holder is still there"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for verb in [Verb::Snapshot, Verb::Restore, Verb::Reset] {
        let e = err(&args(verb, "11", sd));
        assert_gate_err(&e, "11", "holder-identity", 1);
    }
}

/// With `stray` in the namespace of the killed `holder`: cleanup refuses before unmounting;
/// the stray killed, cleanup releases everything and removes an interrupted snapshot's folder.
fn cleanup_refuses_beside_the_stray_then_releases(
    sd: &Path,
    holder: &ProcessIdentity,
    mut stray: KillOnDrop,
) {
    // An interrupted snapshot's folder (never evidence) is removed by cleanup, which says so.
    let stale = sd.join("slot-11/snapshot.tmp-20250101T000000.000Z-dead");
    std::fs::create_dir_all(stale.join("checkpoint")).unwrap();
    std::fs::write(stale.join("netstate.json"), b"{}").unwrap();
    let listed = ok(Verb::Status, "11", sd).to_json()["stale_snapshot_tmp"].clone();
    assert_eq!(
        listed,
        serde_json::json!([stale.file_name().unwrap().to_str().unwrap()])
    );
    let holders = holder_pids(sd);
    // nsenter execs sleep: same pid, now in the namespace.
    let e = err(&args(Verb::Cleanup, "11", sd));
    assert_gate_err(&e, "11", "netns-empty", 1);
    assert!(
        e.message
            .contains(&format!("processes {} (sleep)", stray.0.id()))
            && e.message
                .contains(&format!("whose holder (pid {}) is gone", holder.pid))
            && e.message.contains(&format!("kill -9 {}", stray.0.id())),
        "{e}"
    );
    assert!(
        netprobe::slot::resources::mounts::is_mounted(&state(sd, 11).overlay.unwrap().merged),
        "nothing is unmounted under the stray"
    );
    stray.0.kill().unwrap();
    stray.0.wait().unwrap();
    let c = ok(Verb::Cleanup, "11", sd);
    assert!(gate(&c, "released").proven);
    assert!(
        c.summary
            .contains("removed the interrupted snapshot folder(s) snapshot.tmp-"),
        "{}",
        c.summary
    );
    assert!(!stale.exists(), "stale snapshot.tmp-* left by cleanup");
    let doc = ok(Verb::Status, "11", sd).to_json();
    assert_eq!(doc["stale_snapshot_tmp"], serde_json::json!([]), "{doc}");
    assert!(
        netprobe::slot::record::journal::journal_read(&sd.join("slot-11/journal.jsonl"))
            .iter()
            .any(|j| j.verb == "cleanup" && j.detail.contains("snapshot.tmp-20250101T000000")),
        "cleanup journals the removal"
    );
    assert_released(sd, &holders);
}

/// Cleanup again is harmless; every later verb refuses, saying what to do.
fn a_cleaned_slot_refuses_every_verb(sd: &Path) {
    // Cleanup again is harmless; every later verb refuses cleanly, saying the slot was cleaned
    // up and what to do (not a bare holder-identity failure).
    ok(Verb::Cleanup, "11", sd);
    for verb in [Verb::Snapshot, Verb::Restore, Verb::Reset] {
        let e = err(&args(verb, "11", sd));
        assert_gate_err(&e, "11", "slot-not-clean", 1);
        assert!(
            e.message.contains("state.json records phase clean")
                && e.message.contains("provision a new slot number")
                && e.message.contains(&format!(
                    "remove the slot folder {}",
                    sd.join("slot-11").display()
                ))
                && e.message.contains("keeping its evidence"),
            "{e}"
        );
    }
    assert_eq!(
        state(sd, 11).phase,
        Phase::Clean,
        "a refused verb changes nothing"
    );
    let e = err(&args(Verb::Provision, "11", sd));
    assert_gate_err(&e, "11", "slot-fresh", 1);
    assert_way_out(&e, sd, 11);
}

/// A refused re-provision of a clean slot names the way out: another slot number, or move the
/// folder away after keeping its evidence.
fn assert_way_out(e: &netprobe::slot::SlotError, sd: &std::path::Path, slot: u32) {
    let dir = sd.join(format!("slot-{slot}"));
    assert!(
        e.message.contains("never re-provisioned in place")
            && e.message.contains("another slot number")
            && e.message.contains(&format!("move {} away", dir.display()))
            && e.message.contains("keeping its evidence"),
        "{e}"
    );
}

/// Runtime and CRIU binaries swapped after provision: refused; cleanup works with the original.
#[test]
fn binary_swapped_after_provision() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![13]);
    let img = sleep_image(tmp.path());
    let bins = tmp.path().join("bins");
    let rt = private_copy(&bins, "runc", "/usr/bin/runc".as_ref());
    let cr = private_copy(&bins, "criu", &netprobe::host::default_criu());
    let mut a = args(Verb::Provision, "13", &sd);
    a.image = Some(img);
    a.runtime = Some(rt.clone());
    a.criu = Some(cr.clone());
    run_verb(&a).unwrap_or_else(|e| panic!("{e}"));

    // CRIU swapped.
    let orig_criu = std::fs::read(&cr).unwrap();
    std::fs::write(&cr, b"#!/bin/sh\nexit 0\n").unwrap();
    assert_gate_err(
        &err(&args(Verb::Snapshot, "13", &sd)),
        "13",
        "criu-binary",
        1,
    );
    netprobe::evidence::fsio::write_executable(&cr, &orig_criu, 0o755).unwrap();
    ok(Verb::Snapshot, "13", &sd);

    // Runtime swapped.
    std::fs::copy("/bin/true", &rt).unwrap();
    netprobe::evidence::fsio::wait_no_writer(&rt, netprobe::evidence::fsio::NO_WRITER_WAIT)
        .unwrap();
    for verb in [Verb::Restore, Verb::Reset, Verb::Cleanup] {
        let e = err(&args(verb, "13", &sd));
        assert_gate_err(&e, "13", "runtime-binary", 1);
        assert!(e.message.contains("swapped"), "{e}");
    }
    // The next run's upper, copied while the gates ran, is removed when a gate fails: only the
    // live run's folders are left.
    let mut left: Vec<String> = std::fs::read_dir(sd.join("slot-13/overlay"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["upper-1", "work-1"], "after refused restore/reset");
    // The original binary (same sha256 as the provisioned copy) is accepted.
    let mut c = args(Verb::Restore, "13", &sd);
    c.runtime = Some("/usr/bin/runc".into());
    run_verb(&c).unwrap_or_else(|e| panic!("{e}"));
    let holders = holder_pids(&sd);
    let mut c = args(Verb::Cleanup, "13", &sd);
    c.runtime = Some("/usr/bin/runc".into());
    run_verb(&c).unwrap_or_else(|e| panic!("{e}"));
    assert_released(&sd, &holders);
}

/// The holder's pid re-used by another process (`ns_last_pid`): refused; the impostor is never
/// signalled by cleanup.
#[test]
fn holder_replaced_by_another_process() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![14]);
    let img = sleep_image(tmp.path());
    provision_dir("14", &sd, &img).unwrap_or_else(|e| panic!("{e}"));
    let h = state(&sd, 14).holder.unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(h.pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    while netprobe::ns::ProcessIdentity::read(h.pid).is_ok() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // Through the library the holder is this test's child: reap it so its pid is free.
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(h.pid), None);
    // Start an impostor at the same pid.
    let mut impostor = None;
    for _ in 0..50 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", format!("{}", h.pid - 1)).unwrap();
        let c = std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .unwrap();
        if c.id() as i32 == h.pid {
            impostor = Some(c);
            break;
        }
        let mut c = c;
        let _ = c.kill();
        let _ = c.wait();
    }
    let mut impostor = impostor.expect("could not re-use the holder's pid");
    for verb in [Verb::Snapshot, Verb::Restore, Verb::Reset] {
        let e = err(&args(verb, "14", &sd));
        assert_gate_err(&e, "14", "holder-identity", 1);
    }
    let e = err(&args(Verb::Snapshot, "14", &sd));
    assert!(
        e.message.contains("another process") || e.message.contains("netns inode"),
        "{e}"
    );
    ok(Verb::Cleanup, "14", &sd);
    assert!(
        impostor.try_wait().unwrap().is_none(),
        "cleanup must not signal the impostor"
    );
    let _ = impostor.kill();
    let _ = impostor.wait();
    assert_released(&sd, &[]);
}

/// A child killed and reaped when dropped (a test that fails leaves no process behind).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
