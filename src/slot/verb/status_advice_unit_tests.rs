use super::*;

fn paths() -> SlotPaths {
    SlotPaths::new(Path::new("/var/lib/np"), 3)
}

#[test]
fn each_unfinished_phase_names_a_command_that_applies_now() {
    let last = || {
        Some((
            "reset".to_string(),
            "was interrupted",
            "/e/0004-reset".to_string(),
        ))
    };
    let a = |ph, c, s| advice(ph, &paths(), c, Some(1234), s, last()).unwrap();
    let r = a(Phase::Restoring, Container::Absent, true);
    assert!(
        r.contains("phase restoring") && r.contains("reset, was interrupted"),
        "{r}"
    );
    assert!(
        r.contains("`netprobe slot restore --slot 3 --state-dir /var/lib/np`"),
        "{r}"
    );
    let r = a(Phase::RestoreFailed, Container::Running, true);
    assert!(r.contains("netprobe slot reset --slot 3"), "{r}");
    let r = a(Phase::Restoring, Container::Absent, false);
    assert!(
        r.contains("netprobe slot cleanup") && r.contains("another slot number"),
        "{r}"
    );
    let r = a(Phase::Snapshotting, Container::Running, true);
    assert!(r.contains("netprobe slot snapshot --slot 3"), "{r}");
    let r = a(Phase::SnapshotFailed, Container::Absent, true);
    assert!(
        r.contains("previous complete snapshot") && r.contains("slot restore"),
        "{r}"
    );
    let r = a(Phase::SnapshotFailed, Container::Absent, false);
    assert!(r.contains("slot cleanup"), "{r}");
    // A checkpoint killed before it thawed the container: resume it, then snapshot again.
    assert_eq!(Container::from_status("paused"), Container::Paused);
    let r = a(Phase::Snapshotting, Container::Paused, false);
    assert!(
        r.contains("is paused")
            && r.contains("resume netprobe-slot-3")
            && r.contains("netprobe slot snapshot --slot 3"),
        "{r}"
    );
    let r = a(Phase::Cleaning, Container::Other, false);
    assert!(
        r.contains("slot cleanup --slot 3") && r.contains("again"),
        "{r}"
    );
    let r = a(Phase::Provisioning, Container::Other, false);
    assert!(r.contains("never re-provisioned in place"), "{r}");
    for ph in [
        Phase::Ready,
        Phase::Checkpointed,
        Phase::Running,
        Phase::Clean,
    ] {
        assert_eq!(
            advice(ph, &paths(), Container::Running, Some(1234), true, last()),
            None
        );
    }
}

#[test]
fn a_container_the_runtime_lost_is_named_in_every_phase_that_expects_one() {
    let last = || Some(("reset".to_string(), "failed", "/e/0004-reset".to_string()));
    let a = |ph, c, s| advice(ph, &paths(), c, Some(1234), s, last());
    // Phase running, the runtime has none, nothing left: restore (or give up).
    let r = a(Phase::Running, Container::Absent, true).unwrap();
    assert!(r.contains("phase running says the container runs"), "{r}");
    assert!(
        r.contains("reset, failed") && r.contains("slot restore --slot 3"),
        "{r}"
    );
    let r = a(Phase::Ready, Container::Absent, false).unwrap();
    assert!(r.contains("slot cleanup --slot 3"), "{r}");
    // Processes left: named as a lost container, whatever the phase.
    for ph in [
        Phase::Running,
        Phase::Ready,
        Phase::Checkpointed,
        Phase::RestoreFailed,
        Phase::SnapshotFailed,
    ] {
        let r = a(ph, Container::AbsentWithLeft, true).unwrap();
        assert!(
            r.contains("live.left_processes") && r.contains("netns-empty"),
            "{ph:?}: {r}"
        );
    }
    assert_eq!(a(Phase::Checkpointed, Container::Absent, true), None);
    assert_eq!(a(Phase::Clean, Container::AbsentWithLeft, true), None);
}

#[test]
fn states_the_user_must_act_on_get_advice() {
    let d = tempfile::tempdir().unwrap();
    let failed_at = |verb: &str, gate: &str| {
        let dir = d.path().join(format!("0009-{verb}"));
        std::fs::create_dir_all(&dir).unwrap();
        let doc = serde_json::json!({"ok": false, "error": {"gate": gate}});
        std::fs::write(dir.join("verb.json"), doc.to_string()).unwrap();
        Some((verb.to_string(), "failed", dir.display().to_string()))
    };
    // (phase, container, holder alive, snapshot complete, last verb) -> advice
    let at = |ph, c, holder: bool, snap, last| {
        advice(ph, &paths(), c, holder.then_some(1234), snap, last).unwrap()
    };
    let has = |r: &str, words: &[&str]| {
        assert!(words.iter().all(|w| r.contains(w)), "{words:?}: {r}");
    };
    // The holder gone: only cleanup, whatever the phase.
    let r = at(Phase::Running, Container::Running, false, true, None);
    has(&r, &["the holder is gone", "slot cleanup --slot 3"]);
    // The container's init exited: reset.
    let r = at(Phase::Running, Container::Stopped, true, true, None);
    has(&r, &["it has stopped", "slot reset --slot 3"]);
    // Paused (frozen by hand, or by a tool): resume, or reset.
    let r = at(Phase::Running, Container::Paused, true, true, None);
    has(
        &r,
        &[
            "it is paused",
            "resume netprobe-slot-3",
            "slot reset --slot 3",
        ],
    );
    // Checkpointed with no complete snapshot: nothing to restore.
    let r = at(Phase::Checkpointed, Container::Absent, true, false, None);
    has(&r, &["snapshot is not complete", "slot cleanup"]);
    // A cleanup stopped at a gate: do what it says first.
    let last = failed_at("cleanup", "netns-empty");
    let r = at(Phase::Cleaning, Container::Absent, true, true, last);
    has(&r, &["stopped at gate netns-empty"]);
    // A reset whose stop was not proven: nothing restored, reset again.
    let last = failed_at("reset", "container-stopped");
    let r = at(Phase::RestoreFailed, Container::Running, true, true, last);
    has(
        &r,
        &[
            "gate container-stopped",
            "nothing was restored",
            "slot reset --slot 3",
        ],
    );
    assert!(!r.contains("the restore's gates did not all pass"), "{r}");
    // A restore that met a changed network state: restoring again meets it again.
    let last = failed_at("reset", "net-fidelity");
    let r = at(Phase::RestoreFailed, Container::Absent, true, true, last);
    has(
        &r,
        &[
            "net-fidelity",
            "undo it in the namespace",
            "/proc/1234/ns/net",
        ],
    );
}

#[test]
fn left_processes_turn_an_absent_container_into_a_lost_one() {
    let facts = |v: serde_json::Value| -> super::super::status_doc::LiveFacts {
        serde_json::from_value(v).unwrap()
    };
    let live = |none_cg: bool, none_ns: bool| {
        facts(serde_json::json!({"container": {"status": "absent"},
            "left_processes": {"cgroup": {"none": none_cg}, "netns": {"none": none_ns}}}))
    };
    assert_eq!(Container::from_live(&live(true, true)), Container::Absent);
    assert_eq!(
        Container::from_live(&live(true, false)),
        Container::AbsentWithLeft
    );
    assert_eq!(
        Container::from_live(&live(false, true)),
        Container::AbsentWithLeft
    );
    // Not told: fail closed.
    let untold = facts(serde_json::json!({"container": {"status": "absent"}}));
    assert_eq!(Container::from_live(&untold), Container::AbsentWithLeft);
    let running =
        facts(serde_json::json!({"container": {"status": "running"}, "left_processes": null}));
    assert_eq!(Container::from_live(&running), Container::Running);
}

#[test]
fn the_newest_verb_folder_says_how_it_ended() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(last_verb(&d.path().join("none")), None);
    let mk = |n: &str| {
        let p = d.path().join(n);
        std::fs::create_dir_all(&p).unwrap();
        p
    };
    let p = mk("0001-provision");
    std::fs::write(p.join("verb.json"), r#"{"ok":true}"#).unwrap();
    assert_eq!(last_verb(d.path()).unwrap().1, "finished");
    let p = mk("0002-snapshot");
    std::fs::write(p.join("verb.json"), r#"{"ok":false}"#).unwrap();
    let (verb, how, _) = last_verb(d.path()).unwrap();
    assert_eq!((verb.as_str(), how), ("snapshot", "failed"));
    let p = mk("0003-reset");
    std::fs::write(p.join("interrupted.txt"), "SIGINT").unwrap();
    assert_eq!(last_verb(d.path()).unwrap().1, "was interrupted");
    mk("0004-cleanup");
    assert_eq!(last_verb(d.path()).unwrap().1, "did not record its end");
    // An interrupted verb's verb.json says so, also when interrupted.txt is missing.
    let p = mk("0005-restore");
    let doc = r#"{"ok":false,"error":null,"interrupted":{"signal":"SIGTERM","exit_code":143}}"#;
    std::fs::write(p.join("verb.json"), doc).unwrap();
    assert_eq!(last_verb(d.path()).unwrap().1, "was interrupted");
}
