use super::*;
use crate::slot::record::verb_record;

/// A slot 7 in `tmp/state` with verb folders `names`, each with a `verb.json` and a journal
/// `end` (ok unless its name is in `failed`) recording that file's sha256.
fn slot(tmp: &Path, names: &[&str], failed: &[&str]) -> SlotPaths {
    let sd = tmp.join("state");
    state_dir::check_state_dir(&sd, StateDirUse::Create).unwrap();
    let paths = SlotPaths::new(&sd, 7);
    slot_dir::create_slot(&paths).unwrap();
    for n in names {
        let d = paths.evidence().join(n);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("gates.json"), "[]").unwrap();
        let doc = format!("{{\"ok\": {}}}\n", !failed.contains(n));
        std::fs::write(d.join("verb.json"), &doc).unwrap();
        let verb = n.split_once('-').unwrap().1;
        let e = verb_record::end_entry(
            verb,
            !failed.contains(n),
            "done",
            Some(&d),
            Some(crate::evidence::sha256_hex(doc.as_bytes())),
        );
        journal::journal_append_entry(&paths.journal(), &e).unwrap();
    }
    paths
}

const FOLDERS: [&str; 7] = [
    "0001-provision",
    "0002-snapshot",
    "0003-restore",
    "0004-reset",
    "0005-reset",
    "0006-reset",
    "0007-reset",
];

#[test]
fn the_oldest_folders_beyond_keep_go_with_their_hash_recorded_and_the_protected_stay() {
    let tmp = tempfile::tempdir().unwrap();
    let p = slot(tmp.path(), &FOLDERS, &["0004-reset"]);
    let want_sha = crate::evidence::sha256_recorded(&p.evidence().join("0003-restore/verb.json"))
        .unwrap()
        .0;
    let o = prune(&p.state_dir, "7", NonZeroU32::new(2).unwrap(), false).unwrap();
    let removed: Vec<&str> = o.removed.iter().map(|r| r.folder.as_str()).collect();
    assert_eq!(removed, ["0003-restore", "0005-reset"]);
    let kept: Vec<&str> = o.kept_beyond.iter().map(|r| r.folder.as_str()).collect();
    assert_eq!(kept, ["0001-provision", "0002-snapshot", "0004-reset"]);
    assert_eq!(o.remaining, 5);
    assert_eq!(
        verb_folders(&p.evidence()).unwrap(),
        [
            "0001-provision",
            "0002-snapshot",
            "0004-reset",
            "0006-reset",
            "0007-reset"
        ]
    );
    let j = journal::journal_read(&p.journal());
    let pruned: Vec<&JournalEntry> = j.iter().filter(|e| e.event == PRUNED_EVENT).collect();
    assert_eq!(pruned.len(), 2);
    assert_eq!(pruned[0].evidence.as_deref(), Some("0003-restore"));
    assert_eq!(pruned[0].verb_sha256.as_deref(), Some(want_sha.as_str()));
    assert!(
        pruned[0].detail.contains("beyond --keep 2"),
        "{}",
        pruned[0].detail
    );
    // The report proves the kept ones and lists the pruned ones with their hash.
    assert_eq!(
        crate::report::slot_mismatches(&p.root),
        Vec::<String>::new()
    );
    let md = crate::report::slot_report(&p.root, crate::report::Format::Markdown);
    assert!(
        md.contains("0003-restore") && md.contains("pruned (hash recorded)"),
        "{md}"
    );
    assert!(md.contains(&want_sha), "{md}");
    // With --include-failed the failed one goes too; the provision and last snapshot stay.
    let o = prune(&p.state_dir, "7", NonZeroU32::new(1).unwrap(), true).unwrap();
    let removed: Vec<&str> = o.removed.iter().map(|r| r.folder.as_str()).collect();
    assert_eq!(removed, ["0004-reset", "0006-reset"]);
    assert_eq!(
        crate::report::slot_mismatches(&p.root),
        Vec::<String>::new()
    );
}

#[test]
fn a_folder_removed_without_prune_is_a_mismatch() {
    let tmp = tempfile::tempdir().unwrap();
    let p = slot(tmp.path(), &FOLDERS[..3], &[]);
    std::fs::remove_dir_all(p.evidence().join("0003-restore")).unwrap();
    let m = crate::report::slot_mismatches(&p.root);
    assert_eq!(m.len(), 1, "{m:#?}");
    assert!(
        m[0].starts_with("0003-restore: journal.jsonl records this verb's end")
            && m[0].contains("not pruned"),
        "{m:#?}"
    );
}

#[test]
fn a_verb_json_that_no_longer_matches_its_journal_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let p = slot(tmp.path(), &FOLDERS[..5], &[]);
    std::fs::write(p.evidence().join("0003-restore/verb.json"), "{\"ok\": 1}").unwrap();
    let o = prune(&p.state_dir, "7", NonZeroU32::new(1).unwrap(), false).unwrap();
    let removed: Vec<&str> = o.removed.iter().map(|r| r.folder.as_str()).collect();
    assert_eq!(removed, ["0004-reset"]);
    assert!(o.kept_beyond.iter().any(|k| {
        k.folder == "0003-restore"
            && k.why
                .contains("no longer has the sha256 the journal recorded")
    }));
    assert!(p.evidence().join("0003-restore").is_dir());
}

#[test]
fn bad_keep_values_are_refused() {
    for (raw, why) in [
        ("0", "0 would remove"),
        ("-3", "negative"),
        ("x", "not a whole number"),
        ("", "not a whole number"),
        ("2.5", "not a whole number"),
        ("99999999999", "too large"),
    ] {
        let e = parse_keep(raw).unwrap_err();
        assert_eq!(e.exit_class(), ExitClass::Usage);
        assert!(e.to_string().contains(why), "{raw}: {e}");
        assert!(e.to_string().contains("nothing removed"), "{e}");
    }
    assert_eq!(parse_keep("20").unwrap().get(), 20);
}

#[test]
fn a_prune_while_the_lock_is_held_is_refused_naming_the_holder_and_removes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let p = slot(tmp.path(), &FOLDERS, &[]);
    // Another open file description holds the lock (as a verb in another process would).
    let f = std::fs::File::open(p.lock())
        .or_else(|_| std::fs::File::create(p.lock()))
        .unwrap();
    assert_eq!(
        // SAFETY: flock on a descriptor we own.
        unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&f),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        },
        0
    );
    let e = prune(&p.state_dir, "7", NonZeroU32::new(1).unwrap(), true).unwrap_err();
    assert!(matches!(e, PruneError::Locked { .. }), "{e}");
    assert_eq!(e.exit_class(), ExitClass::Usage);
    let s = e.to_string();
    assert!(
        s.contains("prune refused, nothing removed") && s.contains("is held by"),
        "{s}"
    );
    assert_eq!(verb_folders(&p.evidence()).unwrap().len(), FOLDERS.len());
    drop(f);
}

#[test]
fn a_slot_netprobe_did_not_make_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let p = slot(tmp.path(), &FOLDERS[..1], &[]);
    let e = prune(&p.state_dir, "8", NonZeroU32::new(1).unwrap(), false).unwrap_err();
    assert!(matches!(e, PruneError::Slot { .. }), "{e}");
    let e = prune(&p.state_dir, "07", NonZeroU32::new(1).unwrap(), false).unwrap_err();
    assert_eq!(e.exit_class(), ExitClass::Usage, "{e}");
}

#[test]
fn a_folder_a_kept_one_refers_to_is_kept_and_the_profile_keep_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let p = slot(tmp.path(), &FOLDERS, &[]);
    // 0007-reset keeps a file by reference to 0003-restore (as a reset's end pass does).
    let ev = p.evidence();
    std::fs::write(ev.join("0003-restore/screen-input.png"), b"pixels").unwrap();
    std::fs::write(ev.join("0007-reset/screen-input.png"), b"pixels").unwrap();
    crate::evidence::EvidenceDir::open(&ev.join("0007-reset"))
        .unwrap()
        .store_as_reference(
            "screen-input.png",
            "../0003-restore/screen-input.png",
            "same",
        )
        .unwrap();
    let _lock = SlotLock::acquire(&p.lock()).unwrap();
    let cause = PruneCause::Profile {
        after: "0007-reset",
    };
    let o = prune_locked(&p, "7", NonZeroU32::new(2).unwrap(), false, cause).unwrap();
    let removed: Vec<&str> = o.removed.iter().map(|r| r.folder.as_str()).collect();
    assert_eq!(removed, ["0004-reset", "0005-reset"]);
    let kept = o
        .kept_beyond
        .iter()
        .find(|k| k.folder == "0003-restore")
        .unwrap();
    assert!(
        kept.why.contains("evidence/0007-reset refers to"),
        "{}",
        kept.why
    );
    let j = journal::journal_read(&p.journal());
    let pruned: Vec<&JournalEntry> = j.iter().filter(|e| e.event == PRUNED_EVENT).collect();
    assert!(
        pruned[0]
            .detail
            .contains("beyond [evidence] keep = 2 of the slot's profile (after 0007-reset)"),
        "{}",
        pruned[0].detail
    );
    // The referenced file still reads through the reset's own name.
    assert_eq!(
        crate::evidence::read_recorded(&ev.join("0007-reset/screen-input.png")).unwrap(),
        b"pixels"
    );
}
