//! `slot status` advice and the interruption note's next step, without root: what a slot a
//! verb left unfinished, or one changed by other hands, is told to do.

use crate::slot::JournalEvent;
use crate::slot::Verb;
use crate::slot::record::interruption;
use crate::slot::record::journal;
use crate::slot::resources::slot_dir::{self, SlotPaths};
use crate::slot::resources::state_dir::{self, StateDirUse};
use crate::slot::state::*;
use crate::slot::tests::{assert_refused, destructive, drive};
use std::fs;
use std::path::Path;

#[test]
fn a_slot_whose_provision_stopped_before_its_state_says_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let sd = tmp.path().join("state");
    state_dir::check_state_dir(&sd, StateDirUse::Create).unwrap();
    let paths = SlotPaths::new(&sd, 1);
    slot_dir::create_slot(&paths).unwrap();
    journal::journal_append(
        &paths.journal(),
        "provision",
        JournalEvent::End,
        false,
        "interrupted by SIGINT",
    )
    .unwrap();
    for verb in [Verb::Cleanup, Verb::Restore] {
        let (r, trace) = drive(verb, &sd, None, |_| {});
        let e = r.unwrap_err();
        assert_refused(&e, 1, "slot-state");
        let m = e.to_string();
        assert!(
            m.contains("slot 1 has no state: its provision ended at")
                && m.contains("(interrupted by SIGINT) before recording anything")
                && m.contains("provision another slot number"),
            "{m}"
        );
        assert!(!trace.iter().any(|e| destructive(e)), "{trace:#?}");
    }
}

/// `state.json` removed after a provision that ended ok (its container, holder and mounts may
/// be live): every verb refuses without a runtime change and says the journal records a
/// provisioned slot and to ask `slot status` what to release by hand — never "nothing to
/// release, move the folder away", which would leak them; status and the interruption note
/// agree.
#[test]
fn a_provisioned_slot_whose_state_was_removed_is_not_told_nothing_is_left() {
    let tmp = tempfile::tempdir().unwrap();
    let sd = tmp.path().join("state");
    state_dir::check_state_dir(&sd, StateDirUse::Create).unwrap();
    let paths = SlotPaths::new(&sd, 1);
    slot_dir::create_slot(&paths).unwrap();
    let j = |event: &str, ok: bool, detail: &str| {
        journal::journal_append(&paths.journal(), "provision", event, ok, detail).unwrap()
    };
    j("start", true, "evidence 0001-provision");
    j("step", true, "state written: provisioning");
    j(
        "end",
        true,
        "provisioned: container netprobe-slot-1 running in holder pid 4242",
    );
    for verb in [Verb::Snapshot, Verb::Restore, Verb::Reset, Verb::Cleanup] {
        let (r, trace) = drive(verb, &sd, None, |_| {});
        let e = r.unwrap_err();
        assert_refused(&e, 1, "slot-state");
        let m = e.to_string();
        assert!(
            m.contains("state.json is missing although the journal records a provisioned slot")
                && m.contains("holder pid 4242")
                && m.contains("no verb can run on this slot")
                && m.contains("`netprobe slot status --slot 1 --state-dir ")
                && !m.contains("nothing to release")
                && !m.contains("has no state"),
            "{verb:?}: {m}"
        );
        assert!(!trace.iter().any(|e| destructive(e)), "{trace:#?}");
    }
    let nothing =
        unrecorded(serde_json::json!({"holder": {"alive": false}, "mounts_under_slot": []}));
    let a = crate::slot::verb::status::unreadable_state_advice(&paths, "missing", &nothing);
    assert!(
        a.contains("release by hand") && !a.contains("has no state"),
        "{a}"
    );
    let next = interruption::interruption_next(true, &paths);
    assert!(!next.contains("has no state"), "{next}");
}

/// An interrupted provision that had not written `state.json` (and left nothing live) is told
/// the same as the `slot-state` gate tells its cleanup — nothing to release, move the folder,
/// another slot number — not to run a cleanup that refuses; once `state.json` exists (or
/// something is live), the cleanup / release-by-hand advice.
#[test]
fn a_provision_stopped_before_its_state_is_told_nothing_is_left() {
    let tmp = tempfile::tempdir().unwrap();
    let p = SlotPaths::new(tmp.path(), 5);
    fs::create_dir_all(&p.root).unwrap();
    let next = interruption::interruption_next(true, &p);
    assert!(
        next.contains("slot 5 has no state")
            && next.contains("provision another slot number")
            && !next.contains("netprobe slot cleanup"),
        "{next}"
    );
    let nothing =
        unrecorded(serde_json::json!({"holder": {"alive": false}, "mounts_under_slot": []}));
    let a = crate::slot::verb::status::unreadable_state_advice(&p, "missing", &nothing);
    assert!(
        a.contains("slot 5 has no state") && !a.contains("delete -f"),
        "{a}"
    );
    let mounted =
        unrecorded(serde_json::json!({"holder": {"alive": false}, "mounts_under_slot": ["/x"]}));
    let a = crate::slot::verb::status::unreadable_state_advice(&p, "missing", &mounted);
    assert!(a.contains("release by hand"), "{a}");
    assert!(
        a.contains("`<runtime> --root") && a.contains("no provision's verb.json"),
        "{a}"
    );
    // The runtime the newest provision recorded is named, with the file that names it.
    for (n, rt) in [("0001", "/opt/old/runc"), ("0003", "/opt/new/runc")] {
        let d = p.evidence().join(format!("{n}-provision"));
        fs::create_dir_all(&d).unwrap();
        let doc = serde_json::json!({"facts": {"runtime": {"path": rt}}});
        fs::write(d.join("verb.json"), doc.to_string()).unwrap();
    }
    let a = crate::slot::verb::status::unreadable_state_advice(&p, "missing", &mounted);
    let want = format!(
        "`/opt/new/runc --root {} delete -f {}` (the runtime provision recorded: {})",
        p.runtime_root().display(),
        p.container_id(),
        p.evidence().join("0003-provision/verb.json").display()
    );
    assert!(a.contains(&want), "{a}");
    // No entry for the container under the runtime root: nothing to delete, and no runtime
    // command is given for it.
    let entry = p.runtime_root().join(p.container_id());
    let gone = unrecorded(
        serde_json::json!({"holder": {"alive": false}, "mounts_under_slot": ["/x"],
        "runtime_state_entry": {"path": entry.display().to_string(), "exists": false}}),
    );
    let a = crate::slot::verb::status::unreadable_state_advice(&p, "missing", &gone);
    assert!(
        a.contains(&format!(
            "the container (none: the runtime root holds no {}",
            entry.display()
        )) && !a.contains("delete -f"),
        "{a}"
    );
    fs::write(p.state(), b"{}").unwrap();
    let next = interruption::interruption_next(true, &p);
    assert!(next.contains("netprobe slot cleanup --slot 5"), "{next}");
    let next = interruption::interruption_next(false, &p);
    assert!(
        next.starts_with("`netprobe slot status --slot 5 --state-dir ")
            && next.contains("`advice`"),
        "{next}"
    );
}

/// `slot status` of an overlay remounted by other hands (`live.overlay_volatile.agrees` false)
/// says what the mount table and state.json each say, and what the next restore does; nothing
/// when they agree or no overlay is mounted.
#[test]
fn an_overlay_remounted_by_other_hands_gets_advice() {
    let live = |v: serde_json::Value| facts(serde_json::json!({ "overlay_volatile": v }));
    let note = crate::slot::verb::status::overlay_volatile_note;
    let a = note(&live(
        serde_json::json!({"recorded": true, "mounted": false, "agrees": false}),
    ))
    .unwrap();
    assert!(
        a.contains("mounted without `volatile` but state.json records it with `volatile`")
            && a.contains("next `slot restore` or `slot reset`"),
        "{a}"
    );
    let agree = serde_json::json!({"recorded": true, "mounted": true, "agrees": true});
    assert_eq!(note(&live(agree)), None);
    assert_eq!(note(&live(serde_json::Value::Null)), None);
}

/// `slot status` of a slot whose overlay was unmounted by other hands while the phase says the
/// container runs on it: the snapshot gate that will refuse, and reset (or cleanup without a
/// complete snapshot).
#[test]
fn an_overlay_unmounted_by_other_hands_gets_advice() {
    let p = SlotPaths::new(Path::new("/var/lib/np"), 4);
    let note = crate::slot::verb::status::overlay_unmounted_note;
    let gone = facts(serde_json::json!({"overlay_mounted": false}));
    let a = note(&p, Phase::Running, &gone, true).unwrap();
    assert!(
        a.contains("gate overlay-mounted")
            && a.contains(
                "`netprobe slot reset --slot 4 --state-dir /var/lib/np` mounts a new overlay run"
            ),
        "{a}"
    );
    let a = note(&p, Phase::Ready, &gone, false).unwrap();
    assert!(a.contains("`netprobe slot cleanup --slot 4"), "{a}");
    assert_eq!(note(&p, Phase::Checkpointed, &gone, true), None);
    let there = facts(serde_json::json!({"overlay_mounted": true}));
    assert_eq!(note(&p, Phase::Running, &there, true), None);
}

/// `slot status` with CRIU's network lock in the holder's netns (`live.criu_network_lock`
/// present): a note naming it and the phase, in every phase but `checkpointed` (there it is the
/// complete snapshot's dump's, which the restore unlocks); nothing when absent or unknown.
#[test]
fn criu_lock_left_in_the_holder_netns_gets_a_note_outside_checkpointed() {
    let live = |status: &str| {
        facts(
            serde_json::json!({"criu_network_lock": {"status": status, "detail": "iptables: chain CRIU in table filter in the netns of holder pid 7 (…)"}}),
        )
    };
    let note = crate::slot::verb::status::criu_lock_note;
    let a = note(Phase::Snapshotting, &live("present")).unwrap();
    assert!(
        a.contains("(`live.criu_network_lock`: iptables: chain CRIU in table filter")
            && a.contains("in phase snapshotting, so it is not a complete snapshot's")
            && a.contains("gate no-criu-lock")
            && a.contains("fact criu_network_lock_at_cleanup"),
        "{a}"
    );
    assert_eq!(note(Phase::Checkpointed, &live("present")), None);
    assert_eq!(note(Phase::Running, &live("absent")), None);
    assert_eq!(note(Phase::Running, &live("unknown")), None);
    assert_eq!(note(Phase::Clean, &facts(serde_json::json!({}))), None);
}

/// `provision` refused at `slot-fresh` says what applies to the slot's state: while anything of
/// it may be live (any phase but clean) `slot cleanup` first, and moving the folder away never
/// as an alternative that leaks; only phase clean offers the move; an unreadable `state.json`
/// gets the `slot-state` gate's words. The unfinished provision's advice offers no move either.
#[test]
fn a_refused_re_provision_offers_a_move_only_once_the_slot_is_clean() {
    let f = crate::slot::tests::existing(true, Phase::Running);
    let p = &f.paths;
    let cleanup = format!(
        "`netprobe slot cleanup --slot 1 --state-dir {}`",
        p.state_dir.display()
    );
    let move_it = format!("move {} away", p.root.display());
    for phase in [Phase::Running, Phase::Restoring, Phase::ProvisionFailed] {
        f.edit(|st| st.phase = phase);
        let w = crate::slot::verb::status::existing_slot_way_out(p);
        assert!(
            w.contains(&format!("records phase {}", phase.name()))
                && w.contains("may still be live")
                && w.contains(&cleanup)
                && w.contains("once it is clean, move")
                && !w.contains(&format!("number, or {move_it}")),
            "{w}"
        );
    }
    f.edit(|st| st.phase = Phase::Clean);
    let w = crate::slot::verb::status::existing_slot_way_out(p);
    assert!(
        w.contains("records phase clean") && w.contains(&move_it) && !w.contains(&cleanup),
        "{w}"
    );
    // state.json removed after a provision that ended ok: status, never a move.
    fs::remove_file(p.state()).unwrap();
    journal::journal_append(
        &p.journal(),
        "provision",
        JournalEvent::End,
        true,
        "provisioned",
    )
    .unwrap();
    let w = crate::slot::verb::status::existing_slot_way_out(p);
    assert!(
        w.contains("cannot be read")
            && w.contains("do not move the slot folder away")
            && w.contains("netprobe slot status --slot 1"),
        "{w}"
    );
    let a = crate::slot::verb::status::unfinished_provision_advice(p);
    assert!(
        a.contains(&cleanup) && a.contains("do not move") && !a.contains("number, or move"),
        "{a}"
    );
}

/// The interruption note's first sentence says only what the release list shows: no process
/// tree killed when none was (a reset interrupted during its gates after the runtime restore),
/// how many releases ran, and that a FAILED one leaves its thing unproven.
#[test]
fn the_interruption_note_says_only_what_its_releases_did() {
    use interruption::what_the_release_did;
    let lock = "CRIU's network lock in the netns of holder pid 6777: none found".to_string();
    let s = what_the_release_did(std::slice::from_ref(&lock));
    assert!(
        s.contains("no step's process was running") && s.contains("1 release(s)"),
        "{s}"
    );
    assert!(
        !s.contains("process tree was killed") && !s.contains("FAILED"),
        "{s}"
    );
    let s = what_the_release_did(&[
        "killed the process tree of /proc/1/fd/8 (pid 2)".into(),
        "container netprobe-slot-1: FAILED: runtime state still says running".into(),
        lock,
    ]);
    assert!(
        s.contains("the running step's process tree was killed")
            && s.contains("2 release(s)")
            && s.contains("may still be live, its state unproven"),
        "{s}"
    );
    let s = what_the_release_did(&[]);
    assert!(
        s.contains("nothing the verb had started was registered"),
        "{s}"
    );
}
/// The commands `slot status` advises, and the interruption note's, quote a state directory
/// with a space (as a shell needs: pasted unquoted, `--state-dir` would get only its first
/// word); the runtime root in the resume hint too.
#[test]
fn advised_commands_quote_a_state_dir_with_a_space() {
    use super::status_advice::{Container, advice};
    let p = SlotPaths::new(Path::new("/tmp/x/with space/s"), 61);
    let a = advice(
        Phase::RestoreFailed,
        &p,
        Container::Running,
        Some(1),
        true,
        None,
    )
    .unwrap();
    assert!(
        a.contains("`netprobe slot reset --slot 61 --state-dir '/tmp/x/with space/s'`"),
        "{a}"
    );
    let a = advice(
        Phase::Snapshotting,
        &p,
        Container::Paused,
        Some(1),
        false,
        None,
    )
    .unwrap();
    assert!(
        a.contains("`--root '/tmp/x/with space/s/slot-61/runc-root' resume netprobe-slot-61`"),
        "{a}"
    );
    let gone = facts(serde_json::json!({"overlay_mounted": false}));
    let a =
        crate::slot::verb::status::overlay_unmounted_note(&p, Phase::Running, &gone, true).unwrap();
    assert!(
        a.contains("`netprobe slot reset --slot 61 --state-dir '/tmp/x/with space/s'`"),
        "{a}"
    );
    let a = interruption::interruption_next(false, &p);
    assert!(
        a.contains("`netprobe slot status --slot 61 --state-dir '/tmp/x/with space/s'`"),
        "{a}"
    );
    let a = crate::slot::verb::status::unfinished_provision_advice(&p);
    assert!(
        a.contains("`netprobe slot cleanup --slot 61 --state-dir '/tmp/x/with space/s'`"),
        "{a}"
    );
}

/// A slot folder whose `owner.json` was removed is refused (nothing touched); the way out offers
/// moving it away at once only when its `state.json` records nothing live (phase clean, or no
/// readable state): any other phase names what it records as possibly live, to be released by
/// hand first.
#[test]
fn a_missing_owner_marker_offers_the_move_only_when_nothing_is_recorded_live() {
    let f = crate::slot::tests::existing(false, Phase::Running);
    let p = &f.paths;
    fs::remove_file(p.owner()).unwrap();
    let (exists, w) = slot_dir::check_owner(p).unwrap_err();
    assert!(exists);
    // A re-provision refused at slot-fresh says the same, not `slot cleanup` (which refuses a
    // folder without its marker).
    assert_eq!(crate::slot::verb::status::existing_slot_way_out(p), w);
    assert!(
        w.contains("records phase running")
            && w.contains(&format!("container {}", p.container_id()))
            && w.contains("holder pid ")
            && w.contains("release those by hand first")
            && !w.contains(&format!(
                "says so: keep what you need, move {}",
                p.root.display()
            )),
        "{w}"
    );
    f.edit(|st| st.phase = Phase::Clean);
    let (_, w) = slot_dir::check_owner(p).unwrap_err();
    assert!(
        w.contains(&format!(
            "keep what you need, move {} away",
            p.root.display()
        )) && !w.contains("release those by hand"),
        "{w}"
    );
    fs::remove_file(p.state()).unwrap();
    let (_, w) = slot_dir::check_owner(p).unwrap_err();
    assert!(w.contains("move ") && !w.contains("records phase"), "{w}");
}

/// A `live` of a slot whose `state.json` was read, from (part of) its JSON.
fn facts(v: serde_json::Value) -> super::status_doc::LiveFacts {
    serde_json::from_value(v).unwrap()
}

/// A `live` of a slot whose `state.json` cannot be read, from (part of) its JSON.
fn unrecorded(v: serde_json::Value) -> super::status_doc::UnrecordedLive {
    serde_json::from_value(v).unwrap()
}
