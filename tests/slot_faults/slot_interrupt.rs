//! Interrupting slot verbs through the binary (root, real runc and CRIU, wrappers that hang a
//! chosen step: [`flagged_wrapper`]):
//! - SIGINT while `provision` of a qcow2 image hangs in `runc create`: the overlay, the image
//!   mount, the loop device and the FUSE export are released with the container and the holder,
//!   `interrupted.txt` and `slot status` say `slot cleanup` then another slot number (a slot is
//!   never re-provisioned in place), and that cleanup works.
//! - CRIU's network lock in the holder's netns (the dump's, plus CRIU's exact lock planted again
//!   as a restore killed after its own lock leaves it): an interrupted restore and a failed one
//!   each remove it once the container is stopped (named in the release list and the evidence),
//!   and the next restore succeeds at its first attempt.
//! - SIGINT during a checkpoint that left the container paused: it is resumed on the way out.
//! - Every interrupted verb's folder holds, beside `interrupted.txt` (which names them), the
//!   step timings so far (`timings.json`) and `verb.json` (not ok, `interrupted` by SIGINT, exit
//!   130, the gates and timings so far), whose sha256 the journal's `end` entry records.
use crate::common::slot_support;
use netprobe::ns::ProcessIdentity;
use netprobe::slot::resources::criu_net_lock::LockStep;
use slot_support::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The interrupted verb's folder `ev` (slot folder `slot`) holds `timings.json` (with `total`)
/// and `verb.json` (a finished verb's shape; not ok, interrupted by SIGINT, exit 130; the same
/// timings, and the gates of `gates-so-far.json`), both named in `interrupted.txt`; the
/// journal's `end` entry for the folder records `verb.json`'s sha256.
fn assert_interrupted_end(slot: &Path, ev: &Path) {
    let read =
        |f: &str| std::fs::read(ev.join(f)).unwrap_or_else(|e| panic!("{}/{f}: {e}", ev.display()));
    let timings: std::collections::BTreeMap<String, u64> =
        serde_json::from_slice(&read("timings.json")).unwrap();
    assert!(
        timings.contains_key("total") && timings.len() > 1,
        "{timings:?}"
    );
    let bytes = read("verb.json");
    let verb: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let name = ev.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(verb["verb"], name.split_once('-').unwrap().1, "{verb:#}");
    assert_eq!(verb["ok"], false, "{verb:#}");
    assert!(
        verb["summary"].is_null() && verb["error"].is_null(),
        "{verb:#}"
    );
    let i: netprobe::slot::record::verb_record::Interrupted =
        serde_json::from_value(verb["interrupted"].clone()).unwrap();
    assert_eq!(i.signal, netprobe::ns::cleanup::InterruptSignal::Sigint);
    assert_eq!(i.exit_code, 130);
    assert!(
        i.released
            .iter()
            .any(|r| r.starts_with("killed the process tree of ")),
        "{i:?}"
    );
    assert_eq!(verb["timings_ms"], serde_json::to_value(&timings).unwrap());
    let so_far: serde_json::Value = serde_json::from_slice(&read("gates-so-far.json")).unwrap();
    assert_eq!(verb["gates"], so_far, "{verb:#}");
    for key in [
        "started_at",
        "finished_at",
        "facts",
        "declared_differences",
        "tool_version",
    ] {
        assert!(!verb[key].is_null(), "{key}: {verb:#}");
    }
    let note = String::from_utf8(read("interrupted.txt")).unwrap();
    // Any verb but provision: where it stopped decides the next step, which status gives.
    if !name.ends_with("-provision") {
        assert!(
            note.contains("`netprobe slot status --slot ") && note.contains("gives the next step"),
            "{note}"
        );
    }
    assert!(
        note.contains("the step timings measured so far are in timings.json (ms)")
            && note.contains("its outcome (interrupted by SIGINT, not ok) is in verb.json"),
        "{note}"
    );
    let journal = std::fs::read_to_string(slot.join("journal.jsonl")).unwrap();
    let end: serde_json::Value = journal
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "end" && e["evidence"] == name.as_str())
        .unwrap_or_else(|| panic!("no end entry for {name}: {journal}"));
    assert_eq!(end["ok"], false, "{end}");
    assert_eq!(end["detail"], "interrupted by SIGINT", "{end}");
    // The report of the verb's folder says how the journal saw it end: interrupted.
    let md = std::fs::read_to_string(
        netprobe::report::write_report(ev, netprobe::report::Format::Markdown).unwrap(),
    )
    .unwrap();
    assert!(md.contains(", interrupted at "), "{md}");
    std::fs::remove_file(ev.join("report.md")).unwrap();
    assert_eq!(
        end["verb_sha256"],
        netprobe::evidence::sha256_hex(&bytes).as_str(),
        "{end}"
    );
}

#[test]
fn interrupted_provision_releases_its_mounts_and_says_cleanup_then_another_slot() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![74]);
    let (img, sha) = build_qcow2(tmp.path());
    let wdir = tmp.path().join("wrappers");
    std::fs::create_dir(&wdir).unwrap();
    let runc = netprobe::host::find_in_path(Path::new("runc")).expect("runc in PATH");
    let rw = flagged_wrapper(&wdir, "runc", &runc);
    let (rw, img) = (rw.to_string_lossy(), img.to_string_lossy());
    let extra = [
        "--no-probe-gate",
        "--reason",
        "interrupt test",
        "--runtime",
        &rw,
        "--allow-script-binaries",
        "a wrapper that hangs runc create on purpose",
        "--image",
        &img,
        "--image-sha256",
        &sha,
    ];
    let (code, _, err) = interrupt_hung(
        &wdir,
        &sd,
        ("74", &extra),
        ("provision", "runc", "create"),
        libc::SIGINT,
        30,
        || {},
    );
    assert_eq!(code, Some(130), "{err}");
    for what in [
        "released overlay ",
        "released image mount ",
        "released loop device /dev/loop",
        "released FUSE export ",
        "released holder pid ",
    ] {
        assert!(
            err.contains(what),
            "{what:?} not in the release list: {err}"
        );
    }
    assert!(!err.contains("FAILED"), "{err}");
    // Nothing of the slot is left: mounts, FUSE export, loop device, container, holder.
    assert_released(&sd, &holder_pids(&sd));

    let slot = sd.join("slot-74");
    assert_interrupted_end(&slot, &newest(&slot, "provision"));
    let note = std::fs::read_to_string(newest(&slot, "provision").join("interrupted.txt")).unwrap();
    let cleanup = format!(
        "netprobe slot cleanup --slot 74 --state-dir {}",
        sd.display()
    );
    for said in [
        "interrupted by SIGINT",
        cleanup.as_str(),
        "provision another slot number",
    ] {
        assert!(
            note.contains(said),
            "{said:?} not in interrupted.txt: {note}"
        );
    }
    assert!(!note.contains("run the verb again"), "{note}");
    let (code, out, err) = cli_slot("status", "74", &sd, &["--json"]);
    assert_eq!(code, Some(0), "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_valid(&slot_state_validator(), &doc);
    let advice = doc["advice"].as_str().unwrap_or_default();
    assert!(
        advice.contains(&cleanup) && advice.contains("provision another slot number"),
        "{doc:#}"
    );
    assert!(!out.contains("re-provision the slot"), "{out}");
    // What the note says works: cleanup, and the slot is clean.
    let (code, out, err) = cli_slot("cleanup", "74", &sd, &[]);
    assert_eq!(code, Some(0), "cleanup: {err}{out}");
    assert_eq!(state(&sd, 74).phase, netprobe::slot::state::Phase::Clean);
    let (_, out, _) = cli_slot("status", "74", &sd, &["--json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(doc["advice"].is_null(), "{doc:#}");
}

fn holder(sd: &Path, slot: u32) -> ProcessIdentity {
    state(sd, slot).holder.expect("a holder recorded")
}

/// The lock evidence file of removal step `step` ([`LockStep::file`]) in the newest `verb`
/// evidence folder names the lock removed.
fn assert_lock_evidence_of(slot: &Path, verb: &str, step: LockStep) {
    let ev = newest(slot, verb);
    let t = std::fs::read_to_string(ev.join(step.file()))
        .unwrap_or_else(|e| panic!("{}: {e}", ev.display()));
    assert!(
        t.contains("found: iptables: chain CRIU in table filter")
            && t.contains("ran: iptables-restore -w --noflush")
            && t.contains("result: removed"),
        "{t}"
    );
}

/// As [`assert_lock_evidence_of`] for `restore`.
fn assert_lock_evidence(slot: &Path, step: LockStep) {
    assert_lock_evidence_of(slot, "restore", step);
}

/// A state dir in `tmp` with slot `slot` provisioned (no probe gate) with a CRIU wrapper that
/// hangs on request ([`flagged_wrapper`] in `<tmp>/wrappers`): the state dir, its cleanup
/// guard, the wrappers' folder and the slot's holder.
fn provisioned_with_criu_wrapper(
    tmp: &tempfile::TempDir,
    slot: u32,
) -> (PathBuf, CleanupOnDrop, PathBuf, ProcessIdentity) {
    let sd = state_dir(tmp);
    let c = CleanupOnDrop(sd.clone(), vec![slot]);
    let wdir = tmp.path().join("wrappers");
    std::fs::create_dir(&wdir).unwrap();
    let cw = flagged_wrapper(&wdir, "criu", &netprobe::host::default_criu());
    let cw = cw.to_string_lossy();
    let (code, out, err) = cli_slot(
        "provision",
        &slot.to_string(),
        &sd,
        &[
            "--no-probe-gate",
            "--reason",
            "interrupt test",
            "--allow-script-binaries",
            "a wrapper that hangs on request",
            "--criu",
            &cw,
        ],
    );
    assert_eq!(code, Some(0), "provision: {err}{out}");
    let h = holder(&sd, slot);
    (sd, c, wdir, h)
}

#[test]
fn interrupted_or_failed_restore_removes_criu_lock_and_the_retry_succeeds() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let (sd, _c, wdir, h) = provisioned_with_criu_wrapper(&tmp, 75);
    let slot = sd.join("slot-75");

    // A checkpoint interrupted while the container is frozen (CRIU hangs in `swrk`; the
    // container paused as the runtime's freeze for CRIU leaves it): the interruption thaws it
    // (named in the release list), so the snapshot can simply be taken again.
    let paths = netprobe::slot::SlotPaths::new(&sd, 75);
    let runc = |verb: &str| {
        Command::new("runc")
            .arg("--root")
            .arg(paths.runtime_root())
            .args([verb, &paths.container_id()])
            .output()
            .unwrap()
    };
    let (code, _, err) = interrupt_hung(
        &wdir,
        &sd,
        ("75", &[]),
        ("snapshot", "criu", "swrk"),
        libc::SIGINT,
        30,
        || assert!(runc("pause").status.success()),
    );
    assert_eq!(code, Some(130), "{err}");
    assert!(
        err.contains("left paused by the interrupted checkpoint: resumed (running again)"),
        "{err}"
    );
    let st = String::from_utf8_lossy(&runc("state").stdout).to_string();
    assert!(st.contains("\"status\": \"running\""), "{st}");

    // Interrupted: SIGINT while CRIU hangs in the restore, after a killed restore's lock was
    // added to the dump's (two jumps per chain: more than CRIU's own unlock removes).
    let (code, out, err) = cli_slot("snapshot", "75", &sd, &[]);
    assert_eq!(code, Some(0), "snapshot: {err}{out}");
    let (code, _, err) = interrupt_hung(
        &wdir,
        &sd,
        ("75", &[]),
        ("restore", "criu", "swrk"),
        libc::SIGINT,
        30,
        || plant_lock(&h),
    );
    assert_eq!(code, Some(130), "{err}");
    let line = format!(
        "released CRIU's network lock in the netns of holder pid {}: removed iptables: chain CRIU in table filter",
        h.pid
    );
    assert!(err.contains(&line), "{err}");
    let container = err.find("released container").expect("container released");
    assert!(
        container < err.find(&line).unwrap(),
        "container first: {err}"
    );
    assert_eq!(lock_in(&h), Vec::<String>::new());
    assert_lock_evidence(&slot, LockStep::OnSignal);
    assert_interrupted_end(&slot, &newest(&slot, "restore"));
    // `slot status` says which verb did not finish and the command that applies now.
    let (_, out, _) = cli_slot("status", "75", &sd, &["--json"]);
    let advice = serde_json::from_str::<serde_json::Value>(&out).unwrap()["advice"]
        .as_str()
        .unwrap_or_else(|| panic!("advice after an interrupted restore: {out}"))
        .to_string();
    assert!(
        advice.contains("the last verb, restore, was interrupted")
            && advice.contains(&format!(
                "`netprobe slot restore --slot 75 --state-dir {}`",
                sd.display()
            )),
        "{advice}"
    );
    let (code, out, err) = cli_slot("restore", "75", &sd, &[]);
    assert_eq!(code, Some(0), "the retry after the interrupt: {err}{out}");
    let (_, out, _) = cli_slot("status", "75", &sd, &["--json"]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["advice"],
        serde_json::Value::Null,
        "{out}"
    );

    // Failed: the restore's CRIU hangs past a 6 s bound, with the lock planted beforehand.
    let (code, out, err) = cli_slot("snapshot", "75", &sd, &[]);
    assert_eq!(code, Some(0), "snapshot: {err}{out}");
    plant_lock(&h);
    std::fs::write(wdir.join("criu.hang"), "swrk").unwrap();
    let (code, out, err) = cli_slot_env(
        "restore",
        "75",
        &sd,
        &[],
        &[("NETPROBE_STEP_TIMEOUT_S", "6")],
    );
    std::fs::remove_file(wdir.join("criu.hang")).unwrap();
    assert_ne!(code, Some(0), "{out}{err}");
    assert_eq!(lock_in(&h), Vec::<String>::new(), "{err}");
    assert_lock_evidence(&slot, LockStep::AfterFailure);
    let (code, out, err) = cli_slot("restore", "75", &sd, &[]);
    assert_eq!(code, Some(0), "the retry after the failure: {err}{out}");

    let holders = holder_pids(&sd);
    let (code, out, err) = cli_slot("cleanup", "75", &sd, &[]);
    assert_eq!(code, Some(0), "cleanup: {err}{out}");
    assert_released(&sd, &holders);
}

/// A checkpoint that does not finish leaves CRIU's network lock (the dump locks the namespace;
/// planted here while CRIU hangs, as a killed dump leaves it): an interrupted snapshot and a
/// timed-out one each remove it, and a snapshot that finds it (left by a verb killed with
/// SIGKILL) removes it before recording the network state, so no snapshot records it and the
/// restore passes net-fidelity.
#[test]
fn a_snapshot_that_does_not_finish_removes_criu_lock_and_none_records_it() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let (sd, _c, wdir, h) = provisioned_with_criu_wrapper(&tmp, 76);
    let slot = sd.join("slot-76");

    // Interrupted while CRIU's dump "holds" the lock.
    let (code, _, err) = interrupt_hung(
        &wdir,
        &sd,
        ("76", &[]),
        ("snapshot", "criu", "swrk"),
        libc::SIGINT,
        30,
        || plant_lock(&h),
    );
    assert_eq!(code, Some(130), "{err}");
    assert!(
        err.contains(&format!(
            "released CRIU's network lock in the netns of holder pid {}: removed iptables: chain CRIU in table filter",
            h.pid
        )),
        "{err}"
    );
    assert_eq!(lock_in(&h), Vec::<String>::new());
    assert_lock_evidence_of(&slot, "snapshot", LockStep::OnSignal);
    // interrupted.txt lists what was released, in order, as stderr did; the gates the verb
    // had evaluated are kept (gates.json is written only at a verb's end).
    let ev = newest(&slot, "snapshot");
    assert_interrupted_end(&slot, &ev);
    let so_far = std::fs::read_to_string(ev.join("gates-so-far.json")).unwrap();
    let so_far: Vec<netprobe::slot::gate::Gate> = serde_json::from_str(&so_far).unwrap();
    let names: Vec<&str> = so_far.iter().map(|g| g.name.as_str()).collect();
    assert!(
        names.contains(&"container-running") && names.contains(&"no-criu-lock"),
        "{names:?}"
    );
    let note = std::fs::read_to_string(ev.join("interrupted.txt")).unwrap();
    assert!(
        note.contains(&format!(
            "the {} gate(s) it had evaluated ({} proven) are in gates-so-far.json",
            so_far.len(),
            so_far.len()
        )),
        "{note}"
    );
    assert!(
        note.contains("released, in order:\n")
            && note.contains(&format!(
                "  - CRIU's network lock in the netns of holder pid {}: removed",
                h.pid
            )),
        "{note}"
    );

    // Timed out (6 s bound) while CRIU hangs with the lock in place.
    let _ = std::fs::remove_file(wdir.join("gc.pid"));
    std::fs::write(wdir.join("criu.hang"), "swrk").unwrap();
    let planter = {
        let gc = wdir.join("gc.pid");
        std::thread::spawn(move || {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while !gc.is_file() && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            plant_lock(&h);
        })
    };
    let (code, out, err) = cli_slot_env(
        "snapshot",
        "76",
        &sd,
        &[],
        &[("NETPROBE_STEP_TIMEOUT_S", "6")],
    );
    planter.join().unwrap();
    std::fs::remove_file(wdir.join("criu.hang")).unwrap();
    assert_ne!(code, Some(0), "{out}{err}");
    assert!(err.contains("6000 ms"), "{err}");
    assert_eq!(lock_in(&h), Vec::<String>::new(), "{err}");
    assert_lock_evidence_of(&slot, "snapshot", LockStep::AfterFailure);

    // Left by a verb that could release nothing (SIGKILL): removed before the capture.
    plant_lock(&h);
    let stale = netprobe::slot::gate::pure_checks::stale_tmp(&slot);
    assert!(
        !stale.is_empty(),
        "the snapshots that did not finish left their folders"
    );
    let (code, out, err) = cli_slot("snapshot", "76", &sd, &[]);
    assert_eq!(code, Some(0), "snapshot: {err}{out}");
    assert_lock_evidence_of(&slot, "snapshot", LockStep::BeforeCapture);
    // ... which the snapshot that completes removes, and says so.
    assert!(netprobe::slot::gate::pure_checks::stale_tmp(&slot).is_empty());
    assert!(
        out.contains("removed the interrupted snapshot folder(s) ") && out.contains(&stale[0]),
        "{out}"
    );
    let ev = newest(&slot, "snapshot");
    let gates = std::fs::read_to_string(ev.join("gates.json")).unwrap();
    assert!(
        gates.contains("\"no-criu-lock\"") && gates.contains("captured again"),
        "{gates}"
    );
    // The first capture's side files keep the lock they saw; the second's are beside them.
    let first = std::fs::read_to_string(ev.join("netfilter.txt")).unwrap();
    assert!(first.contains("CRIU"), "{first}");
    let second = std::fs::read_to_string(ev.join("netfilter-unlocked.txt")).unwrap();
    assert!(!second.contains(":CRIU"), "{second}");
    let verb = std::fs::read_to_string(ev.join("verb.json")).unwrap();
    assert!(verb.contains("criu_lock_released_before_capture"), "{verb}");
    let recorded = std::fs::read_to_string(ev.join("netstate-before.json")).unwrap();
    assert!(!recorded.contains("CRIU"), "{recorded}");
    let (code, out, err) = cli_slot("restore", "76", &sd, &[]);
    assert_eq!(code, Some(0), "restore: {err}{out}");

    let holders = holder_pids(&sd);
    let (code, out, err) = cli_slot("cleanup", "76", &sd, &[]);
    assert_eq!(code, Some(0), "cleanup: {err}{out}");
    assert_released(&sd, &holders);
}

/// A restore interrupted after its runtime restore, during the gates after it (`iptables-save`
/// of the network-state capture hangs once: a rule in the holder's netns makes the capture run
/// the tools): the restored, ungated container is stopped by the release, proven gone by
/// `runtime state` (named in the release list and `interrupted.txt`), never left running looking
/// like a slot in service; `slot status` then says the container is gone and `slot restore`
/// brings the snapshot back, which works.
#[test]
fn a_restore_interrupted_during_its_gates_stops_the_restored_container_proven() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![61]);
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let real = netprobe::host::find_in_path(Path::new("iptables-save")).expect("iptables-save");
    let flag = bin.join("hang");
    netprobe::evidence::fsio::write_executable(
        &bin.join("iptables-save"),
        format!(
            "#!/bin/sh\nif [ -e {f} ]; then rm -f {f}; sleep 1000 & echo $! > {d}/gc.pid; wait; fi\nexec {r} \"$@\"\n",
            f = flag.display(),
            d = bin.display(),
            r = real.display()
        ),
        0o755,
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = [("PATH", path.as_str())];
    let (code, out, err) = cli_slot_env(
        "provision",
        "61",
        &sd,
        &["--no-probe-gate", "--reason", "interrupt test"],
        &env,
    );
    assert_eq!(code, Some(0), "provision: {err}{out}");
    let h = holder(&sd, 61);
    let ns = format!("--net=/proc/{}/ns/net", h.pid);
    let st = Command::new("nsenter")
        .args([
            ns.as_str(),
            "iptables",
            "-A",
            "INPUT",
            "-p",
            "tcp",
            "--dport",
            "9",
        ])
        .args(["-j", "ACCEPT"])
        .status()
        .unwrap();
    assert!(st.success());
    let (code, out, err) = cli_slot_env("snapshot", "61", &sd, &[], &env);
    assert_eq!(code, Some(0), "snapshot: {err}{out}");

    std::fs::write(&flag, "").unwrap();
    let errf = tmp.path().join("restore-stderr.txt");
    let mut child = Command::new(EXE)
        .args(["slot", "restore", "--slot=61", "--state-dir"])
        .arg(&sd)
        .env("PATH", &path)
        .env_remove("NETPROBE_STEP_TIMEOUT_S")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&errf).unwrap())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !bin.join("gc.pid").is_file() {
        assert!(
            std::time::Instant::now() < until,
            "iptables-save never hung"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let code = child.wait().unwrap().code();
    let err = std::fs::read_to_string(&errf).unwrap();
    assert_eq!(code, Some(130), "{err}");
    let line = "released container netprobe-slot-61: killed and deleted; runtime state: does not exist (proven gone)";
    assert!(err.contains(line), "{err}");
    let slot = sd.join("slot-61");
    let ev = newest(&slot, "restore");
    let note = std::fs::read_to_string(ev.join("interrupted.txt")).unwrap();
    assert!(
        note.contains("the running step's process tree was killed")
            && note.contains(line.trim_start_matches("released "))
            && !note.contains("FAILED"),
        "{note}"
    );
    // Nothing of the restored container is left running.
    let paths = netprobe::slot::SlotPaths::new(&sd, 61);
    let o = Command::new("runc")
        .arg("--root")
        .arg(paths.runtime_root())
        .args(["state", &paths.container_id()])
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let (_, out, _) = cli_slot("status", "61", &sd, &["--json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let advice = doc["advice"].as_str().unwrap_or_default();
    assert!(
        doc["live"]["container"]["status"] == "absent"
            && advice.contains("the last verb, restore, was interrupted")
            && advice.contains("the container is gone")
            && advice.contains("`netprobe slot restore --slot 61"),
        "{doc:#}"
    );
    let (code, out, err) = cli_slot_env("restore", "61", &sd, &[], &env);
    assert_eq!(code, Some(0), "the retry after the interrupt: {err}{out}");
    let holders = holder_pids(&sd);
    let (code, out, err) = cli_slot("cleanup", "61", &sd, &[]);
    assert_eq!(code, Some(0), "cleanup: {err}{out}");
    assert_released(&sd, &holders);
}
