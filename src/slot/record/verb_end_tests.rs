use super::*;
use crate::slot::Verb;
use crate::slot::gate::GateId;
use std::path::PathBuf;

fn no_runtime(
    _: &Path,
    _: &Path,
    _: &Path,
    _: crate::oci::RuntimeKind,
    _: bool,
    _: &str,
) -> Box<dyn crate::oci::RuntimeOps> {
    panic!("these tests build no runtime: a verb under test asked for one")
}

/// A fresh slot 1 in `tmp/state`, its lock held by `run`'s caller, and evidence folder
/// `0001-reset` for a reset run.
fn slot(tmp: &Path) -> (crate::slot::SlotPaths, PathBuf) {
    let sd = tmp.join("state");
    crate::slot::resources::state_dir::check_state_dir(
        &sd,
        crate::slot::resources::state_dir::StateDirUse::Create,
    )
    .unwrap();
    let paths = crate::slot::SlotPaths::new(&sd, 1);
    crate::slot::resources::slot_dir::create_slot(&paths).unwrap();
    let ev = paths.evidence().join("0001-reset");
    std::fs::create_dir_all(&ev).unwrap();
    (paths, ev)
}

/// Runs a reset's end in a fresh slot after `during` (what the verb wrote), with `res` as
/// what its steps came to; returns the outcome, the folder and the journal's end entry
/// (and the temporary folder holding the slot).
fn end_of(
    before: impl FnOnce(&Path),
    during: impl FnOnce(&mut VerbRun),
    res: VerbResult,
) -> (
    Result<crate::slot::SlotOutcome, SlotError>,
    PathBuf,
    super::super::journal::JournalEntry,
    tempfile::TempDir,
) {
    let tmp = tempfile::tempdir().unwrap();
    let (paths, ev) = slot(tmp.path());
    before(&ev);
    let env = super::super::verb_run::SlotEnv {
        make_runtime: &no_runtime,
        require_root: false,
        trace: None,
        proc_root: "/proc".into(),
    };
    let args = crate::slot::SlotArgs::new(Verb::Reset, "1", &paths.state_dir);
    let mut run = VerbRun::new(&args, "1".into(), paths.clone(), &env);
    run.lock = Some(crate::slot::SlotLock::acquire(&paths.lock()).unwrap());
    run.ev = Some(ev.clone());
    during(&mut run);
    let out = run.finish(res);
    let end = super::super::journal::journal_read(&paths.journal())
        .into_iter()
        .rfind(|e| e.event == crate::slot::JournalEvent::End)
        .unwrap();
    (out, ev, end, tmp)
}

/// Every file the verb wrote before `verb.json` is listed in it with its sha256, and the
/// journal's end records `verb.json`'s sha256: report finds nothing to say against it.
#[test]
fn a_verb_whose_evidence_was_all_written_lists_it_in_verb_json() {
    let (out, ev, end, _tmp) = end_of(
        |_| {},
        |run| {
            run.ev_write("netstate-after.json", b"{}");
            run.rt_log::<()>("restore", Ok(&()));
            run.ev_write_beside("netfilter.txt", b"filters nothing".to_vec());
        },
        Ok(("reset done".into(), None)),
    );
    let o = out.unwrap();
    assert_eq!(o.summary, "reset done");
    let bytes = std::fs::read(ev.join("verb.json")).unwrap();
    assert_eq!(end.verb_sha256, Some(crate::evidence::sha256_hex(&bytes)));
    assert!(end.ok);
    let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let paths: Vec<&str> = doc["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "gates.json",
            "netfilter.txt",
            "netstate-after.json",
            "runtime.log",
            "timings.json"
        ]
    );
    assert_slot_reports_no_mismatch(&ev);
    assert!(!ev.join(INCOMPLETE_FILE).exists());
}

/// Two steps of one verb that write the same evidence name (a restore that removed a stale
/// CRIU lock before the runtime restore, then failed and removed the lock again) never
/// collide: the second write is qualified (`-2`), both are kept and listed, the rename is a
/// fact, and the verb does not fail for it.
#[test]
fn a_second_write_of_a_name_is_qualified_never_refused() {
    let (out, ev, end, _tmp) = end_of(
        |_| {},
        |run| {
            run.ev_write("lock.txt", b"first");
            run.ev_write("lock.txt", b"second");
            run.ev_write_beside("lock.txt", b"third".to_vec());
        },
        Ok(("reset done".into(), None)),
    );
    let o = out.unwrap();
    assert!(end.ok);
    assert_eq!(std::fs::read(ev.join("lock.txt")).unwrap(), b"first");
    assert_eq!(std::fs::read(ev.join("lock-2.txt")).unwrap(), b"second");
    assert_eq!(std::fs::read(ev.join("lock-3.txt")).unwrap(), b"third");
    assert_eq!(
        o.facts[vrec::RENAMED_FACT],
        serde_json::json!(["lock.txt → lock-2.txt", "lock.txt → lock-3.txt"])
    );
    assert!(!ev.join(INCOMPLETE_FILE).exists());
    assert_slot_reports_no_mismatch(&ev);
}

/// `gates.json`, a file written beside the verb and `verb.json` cannot be written (a
/// directory of that name is in the way): the verb fails with exit 2 naming each, its work
/// said as it was, `incomplete.txt` names them, and the journal's end records no sha256 of a
/// `verb.json` that was never written — so report raises no alarm about it.
#[test]
fn a_verb_whose_evidence_could_not_be_written_fails_naming_each_file() {
    let (out, ev, end, _tmp) = end_of(
        |ev| {
            for d in ["gates.json", "verb.json", "sysctls.json"] {
                std::fs::create_dir(ev.join(d)).unwrap();
            }
        },
        |run| {
            run.ev_write("netstate-after.json", b"{}");
            run.ev_write_beside("sysctls.json", b"{}".to_vec());
        },
        Ok(("reset done".into(), None)),
    );
    let e = out.unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    let s = e.to_string();
    for needle in [
        "the evidence of this reset is incomplete: 3 file(s) could not be written: sysctls.json (a file or folder of that name is already there",
        "gates.json (a file or folder of that name",
        "verb.json (a file or folder of that name",
        "incomplete.txt says so",
        "the reset itself succeeded (reset done): that stands",
        // Folders in the way (EEXIST): not a matter of space.
        "fix: nothing to free: a file or folder of that name was already in ",
        "then see `netprobe slot status --slot 1 --state-dir ",
    ] {
        assert!(s.contains(needle), "{needle:?} not in {s}");
    }
    assert_eq!(e.evidence.as_deref(), Some(ev.as_path()));
    let note = std::fs::read_to_string(ev.join(INCOMPLETE_FILE)).unwrap();
    for f in ["sysctls.json", "gates.json", "verb.json"] {
        assert!(note.contains(&format!("not written: {f} (")), "{f}: {note}");
    }
    assert!(!end.ok);
    assert_eq!(end.verb_sha256, None);
    assert!(
        end.detail.contains(
            "verb.json could not be written (a file or folder of that name is already there"
        ) && end.detail.contains("so this entry records no sha256 of it"),
        "{}",
        end.detail
    );
    assert_slot_reports_no_mismatch(&ev);
}

/// A verb that succeeded stores CRIU's log (compressed beside it) and its other large logs
/// compressed before `verb.json` lists them with both sha256 (captures stay as written);
/// report proves them,
/// and notices a stored file whose content was swapped for another valid zstd stream.
#[test]
fn a_succeeded_verb_lists_its_large_files_compressed_and_report_proves_them() {
    let log: String = (0..5000)
        .map(|i| format!("({i:06}) restoring task {i}\n"))
        .collect();
    let state = "{\"links\": []}\n".repeat(1000);
    let (out, ev, end, _tmp) = end_of(
        |ev| {
            std::fs::create_dir(ev.join("criu-work")).unwrap();
            std::fs::write(ev.join("criu-work/restore.log"), &log).unwrap();
        },
        |run| {
            run.compress_beside("criu-work/restore.log");
            run.ev_write("netstate-after.json", state.as_bytes());
            run.ev_write("strace-restore.log", state.as_bytes());
        },
        Ok(("reset done".into(), None)),
    );
    let o = out.unwrap();
    assert!(end.ok);
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ev.join("verb.json")).unwrap()).unwrap();
    let arts = doc["artifacts"].as_array().unwrap();
    let zlog = arts
        .iter()
        .find(|a| a["path"] == "criu-work/restore.log.zst")
        .unwrap();
    let stored = std::fs::read(ev.join("criu-work/restore.log.zst")).unwrap();
    assert_eq!(zlog["sha256"], crate::evidence::sha256_hex(&stored));
    assert_eq!(zlog["content"]["encoding"], "zstd");
    assert_eq!(
        zlog["content"]["sha256"],
        crate::evidence::sha256_hex(log.as_bytes())
    );
    assert!(arts.iter().any(|a| a["path"] == "strace-restore.log.zst"));
    assert!(arts.iter().any(|a| a["path"] == "netstate-after.json"));
    assert!(!ev.join("criu-work/restore.log").exists());
    let facts = o.facts["evidence_compressed"].as_array().unwrap().len();
    assert_eq!(facts, 2, "{:#?}", o.facts);
    assert_slot_reports_no_mismatch(&ev);
    // The log's readers read it through its old name.
    let n = crate::assert::scan_log(
        &ev.join("criu-work/restore.log"),
        &[crate::assert::LogQuery::new("restoring task")],
    )
    .unwrap();
    assert_eq!(n, [5000]);
    // Another log, compressed: a valid stream, but not the content verb.json lists.
    let other = zstd::encode_all(&b"(00.000001) forged\n"[..], 3).unwrap();
    std::fs::remove_file(ev.join("criu-work/restore.log.zst")).unwrap();
    std::fs::write(ev.join("criu-work/restore.log.zst"), other).unwrap();
    let slot_dir = ev.parent().unwrap().parent().unwrap();
    let m = crate::report::slot_mismatches(slot_dir);
    assert!(
        m.iter()
            .any(|l| l.contains("criu-work/restore.log.zst: sha256")),
        "{m:#?}"
    );
}

/// `netprobe report` of the slot holding evidence folder `ev` finds no mismatch.
fn assert_slot_reports_no_mismatch(ev: &std::path::Path) {
    let slot_dir = ev.parent().unwrap().parent().unwrap();
    assert_eq!(
        crate::report::slot_mismatches(slot_dir),
        Vec::<String>::new()
    );
}

/// Only a file before `verb.json` missing: `verb.json` is written and says the verb failed
/// (exit 2, the verb's own failure kept in the text), listing the files that were written;
/// the journal records its sha256.
#[test]
fn a_failed_verb_with_a_file_missing_records_both_in_verb_json() {
    let gate = SlotError::gate_failed("1", GateId::UpperCopy, "cp -a: No space left");
    let (out, ev, end, _tmp) = end_of(
        |ev| std::fs::create_dir(ev.join("timings.json")).unwrap(),
        |_| {},
        Err(gate),
    );
    let e = out.unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(
        e.to_string()
            .starts_with("slot 1: the reset failed: gate `upper-copy` failed"),
        "{e}"
    );
    let bytes = std::fs::read(ev.join("verb.json")).unwrap();
    assert_eq!(end.verb_sha256, Some(crate::evidence::sha256_hex(&bytes)));
    let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["error"]["exit_code"], 2);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("timings.json (a file or folder of that name"),
        "{doc:#}"
    );
    assert_eq!(doc["artifacts"][0]["path"], "gates.json");
    assert_eq!(doc["artifacts"].as_array().unwrap().len(), 1, "{doc:#}");
    assert_slot_reports_no_mismatch(&ev);
}

/// An evidence folder that cannot be created (here `evidence` is a file) ends the verb
/// before it does anything with exit 2, as one netprobe cannot write into, naming the
/// folder, the filesystem and the fix (it was exit 4, "step evidence could not run").
#[test]
fn an_evidence_folder_that_cannot_be_created_exits_2_before_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let (paths, _) = slot(tmp.path());
    std::fs::remove_dir_all(paths.evidence()).unwrap();
    std::fs::write(paths.evidence(), "not a folder").unwrap();
    let env = super::super::verb_run::SlotEnv {
        make_runtime: &no_runtime,
        require_root: false,
        trace: None,
        proc_root: "/proc".into(),
    };
    let args = crate::slot::SlotArgs::new(Verb::Reset, "1", &paths.state_dir);
    let mut run = VerbRun::new(&args, "1".into(), paths.clone(), &env);
    let e = run.enter_slot().unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    let s = e.to_string();
    for needle in [
        format!(
            "slot 1: cannot create the evidence folder {}: ",
            paths.evidence().display()
        ),
        "the reset stopped before any of its steps (every verb writes its evidence there first)"
            .into(),
        format!(
            "the state directory {} is on the ",
            paths.state_dir.display()
        ),
        // A file where the folder goes (EEXIST): not a matter of space.
        "File exists (os error 17)".into(),
        format!(
            "fix: nothing to free: a file or folder of that name was already in {} (EEXIST)",
            paths.root.display()
        ),
        "then run it again".into(),
    ] {
        assert!(s.contains(&needle), "{needle:?} not in {s}");
    }
    assert!(run.ev.is_none());
}

#[test]
fn the_marker_is_appended_to_never_replaced() {
    let d = tempfile::tempdir().unwrap();
    mark_incomplete(d.path(), "one\n").unwrap();
    mark_incomplete(d.path(), "two\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(d.path().join(INCOMPLETE_FILE)).unwrap(),
        "one\ntwo\n"
    );
    // Never through a symlink.
    let e = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(d.path().join("x"), e.path().join(INCOMPLETE_FILE)).unwrap();
    assert!(mark_incomplete(e.path(), "x").is_err());
    assert!(!d.path().join("x").exists());
}
