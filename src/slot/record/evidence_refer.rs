//! A reset's evidence kept once ([`crate::evidence::reference`]): at the end of a `reset` that
//! succeeded, before its end record is sealed, each file directly in its folder of at least
//! [`COMPRESS_THRESHOLD`] bytes whose bytes equal a file stored in a *base* folder is recorded as
//! `<name>.ref` instead of a second copy. The bases are the evidence folder of the snapshot in
//! use (the newest `snapshot` that ended ok in the journal: its `screen.png`, which the
//! `pixels-equal` gate compared the restored screen with by sha256, `netstate-before.json`,
//! `sysctls-other.json`) and the first `restore` or `reset` that ended ok after it (the screen
//! after the input gate's key, …). A GNOME reset so keeps its three 1920x1080 PNGs, its network
//! captures and the sysctls CRIU does not save once per snapshot instead of once per reset.
//!
//! Not referenced: the files `report` reads by name ([`crate::slot::record::evidence_compress::KEEP_PLAIN`]),
//! hidden and compressed files, files in sub-folders. A reference is written only once both
//! files hashed equal ([`crate::evidence::EvidenceDir::store_as_reference`]); `report` hashes
//! the referenced file again, and `slot prune` keeps every folder a kept folder refers to.
//! With `NETPROBE_EVIDENCE_PLAIN=1` ([`crate::slot::record::evidence_compress::PLAIN_ENV`]) nothing is
//! referenced. Fact `evidence_referenced` lists each file (`path`, `stored_in`, `bytes`); one
//! that could not be referenced stays as written (fact `evidence_reference_errors`), it never
//! fails the verb.

use crate::evidence::compressed::{COMPRESS_THRESHOLD, is_compressed};
use crate::evidence::reference::is_reference;
use crate::evidence::{EvidenceDir, sha256_recorded};
use crate::slot::JournalEvent;
use crate::slot::record::journal::JournalEntry;
use crate::slot::record::verb_record::VerbRecord;
use crate::slot::resources::slot_dir::SlotPaths;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

/// The base folders of a reset whose folder is `current` (see the module docs): the newest
/// snapshot that ended ok, then the first restore or reset that ended ok after it. Names of
/// folders the journal's `end` entries give, oldest first.
pub(crate) fn bases(journal: &[JournalEntry], current: &str) -> Vec<String> {
    let ended_ok = |e: &JournalEntry, verbs: &[&str]| {
        e.event == JournalEvent::End
            && e.ok
            && verbs.contains(&e.verb.as_str())
            && e.evidence.as_deref().is_some_and(|f| f != current)
    };
    let Some(i) = journal.iter().rposition(|e| ended_ok(e, &["snapshot"])) else {
        return Vec::new();
    };
    let mut out: Vec<String> = journal[i].evidence.clone().into_iter().collect();
    if let Some(r) = journal[i + 1..]
        .iter()
        .find(|e| ended_ok(e, &["restore", "reset"]))
    {
        out.extend(r.evidence.clone());
    }
    out
}

/// Whether the file `name` directly in a reset's folder, of `bytes` bytes, may be kept by
/// reference.
fn candidate(name: &str, bytes: u64) -> bool {
    bytes >= COMPRESS_THRESHOLD
        && !name.starts_with('.')
        && !is_compressed(name)
        && !is_reference(name)
        && !crate::slot::record::evidence_compress::KEEP_PLAIN.contains(&name)
}

/// The regular files directly in `dir` with their sizes (sorted by name).
fn files_of(dir: &Path) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let m = e.path().symlink_metadata().ok()?;
            m.is_file()
                .then(|| (e.file_name().to_string_lossy().into_owned(), m.len()))
        })
        .collect();
    v.sort();
    v
}

/// Why file `name` is kept by reference to `stored_in` (`base_file` in folder `base`).
fn why(name: &str, base: &str, base_file: &str, sha: &str, snapshot: bool) -> String {
    let proof = match (snapshot, base_file, name) {
        (true, "screen.png", "screen-after.png" | "screen-snapshot.png") => {
            "; gate pixels-equal compared the restored screen with that file by sha256"
        }
        _ => "",
    };
    format!(
        "{name} has the same bytes (sha256 {sha}) as {base_file} stored in evidence/{base}, the {}{proof}; kept there once: `slot prune` keeps a folder while a kept one refers to it",
        if snapshot {
            "snapshot's folder"
        } else {
            "first restore after that snapshot"
        }
    )
}

/// The end pass of a reset that succeeded (see the module docs): the files of `ev` equal to
/// one of the base folders' recorded as references, with the facts in `rec`.
pub(crate) fn refer_at_end(paths: &SlotPaths, ev: &Path, rec: &VerbRecord) {
    if std::env::var_os(crate::slot::record::evidence_compress::PLAIN_ENV).is_some_and(|v| v == "1")
    {
        return;
    }
    let Some(current) = ev.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    let journal = crate::slot::record::journal::journal_read(&paths.journal());
    let bases = bases(&journal, &current);
    let evidence = paths.evidence();
    // Stored files of the bases by size: (folder, file, is the snapshot's), hashed lazily.
    let mut by_size: BTreeMap<u64, Vec<(String, String, bool)>> = BTreeMap::new();
    for (i, b) in bases.iter().enumerate() {
        for (f, n) in files_of(&evidence.join(b)) {
            if !f.starts_with('.') && !is_reference(&f) && !is_compressed(&f) {
                by_size.entry(n).or_default().push((b.clone(), f, i == 0));
            }
        }
    }
    let mut hashes: BTreeMap<(String, String), Option<String>> = BTreeMap::new();
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    for (name, n) in files_of(ev) {
        let Some(same_size) = by_size.get(&n).filter(|_| candidate(&name, n)) else {
            continue;
        };
        let Ok((sha, _)) = sha256_recorded(&ev.join(&name)) else {
            continue;
        };
        let found = same_size.iter().find(|(b, f, _)| {
            let h = hashes
                .entry((b.clone(), f.clone()))
                .or_insert_with(|| sha256_recorded(&evidence.join(b).join(f)).ok().map(|x| x.0));
            h.as_deref() == Some(sha.as_str())
        });
        let Some((b, f, snap)) = found else { continue };
        let stored_in = format!("../{b}/{f}");
        let why = why(&name, b, f, &sha, *snap);
        match EvidenceDir::open(ev).and_then(|d| d.store_as_reference(&name, &stored_in, &why)) {
            Ok(_) => done.push(json!({"path": name, "stored_in": stored_in, "bytes": n})),
            Err(e) => failed.push(Value::from(format!("{name}: {e}"))),
        }
    }
    let mut r = rec.lock();
    for (key, items) in [
        ("evidence_referenced", done),
        ("evidence_reference_errors", failed),
    ] {
        if !items.is_empty() {
            r.facts.insert(key.to_string(), Value::Array(items));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(verb: &str, folder: &str, ok: bool) -> JournalEntry {
        JournalEntry {
            at: String::new(),
            pid: 1,
            verb: verb.into(),
            event: JournalEvent::End,
            ok,
            detail: String::new(),
            evidence: Some(folder.into()),
            verb_sha256: None,
        }
    }

    #[test]
    fn the_bases_are_the_last_snapshot_and_its_first_restore() {
        let j = [
            end("provision", "0001-provision", true),
            end("snapshot", "0002-snapshot", true),
            end("restore", "0003-restore", true),
            end("snapshot", "0004-snapshot", false),
            end("reset", "0005-reset", false),
            end("reset", "0006-reset", true),
            end("reset", "0007-reset", true),
        ];
        assert_eq!(bases(&j, "0008-reset"), ["0002-snapshot", "0003-restore"]);
        let j2 = [
            end("snapshot", "0002-snapshot", true),
            end("snapshot", "0003-snapshot", true),
            end("reset", "0004-reset", false),
            end("reset", "0005-reset", true),
        ];
        assert_eq!(bases(&j2, "0006-reset"), ["0003-snapshot", "0005-reset"]);
        // The first reset after a snapshot has only the snapshot as base.
        assert_eq!(bases(&j2[..3], "0005-reset"), ["0003-snapshot"]);
        assert!(bases(&j[..1], "0002-reset").is_empty());
    }

    #[test]
    fn a_resets_files_equal_to_its_bases_are_kept_by_reference() {
        use crate::slot::resources::slot_dir;
        use crate::slot::resources::state_dir::{self, StateDirUse};
        let tmp = tempfile::tempdir().unwrap();
        let sd = tmp.path().join("state");
        state_dir::check_state_dir(&sd, StateDirUse::Create).unwrap();
        let paths = SlotPaths::new(&sd, 72);
        slot_dir::create_slot(&paths).unwrap();
        let ev = paths.evidence();
        let screen = vec![7u8; 20_000];
        let input = vec![8u8; 20_000];
        let files: [(&str, &str, &[u8]); 7] = [
            ("0002-snapshot", "screen.png", &screen),
            ("0003-restore", "screen-input.png", &input),
            ("0004-reset", "screen-after.png", &screen),
            ("0004-reset", "screen-input.png", &input),
            ("0004-reset", "netstate-after.json", &[1u8; 20_000]),
            ("0004-reset", "gates.json", &screen),
            ("0004-reset", "small.png", b"tiny"),
        ];
        for (dir, f, bytes) in files {
            std::fs::create_dir_all(ev.join(dir)).unwrap();
            std::fs::write(ev.join(dir).join(f), bytes).unwrap();
        }
        for (verb, dir) in [("snapshot", "0002-snapshot"), ("restore", "0003-restore")] {
            let e =
                super::super::verb_record::end_entry(verb, true, "ok", Some(&ev.join(dir)), None);
            super::super::journal::journal_append_entry(&paths.journal(), &e).unwrap();
        }
        let rec = VerbRecord::default();
        let reset = ev.join("0004-reset");
        refer_at_end(&paths, &reset, &rec);
        let facts = rec.lock().facts.clone();
        let done: Vec<(String, String)> = facts["evidence_referenced"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["path"].as_str().unwrap().to_string(),
                    v["stored_in"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            done,
            [
                (
                    "screen-after.png".into(),
                    "../0002-snapshot/screen.png".into()
                ),
                (
                    "screen-input.png".into(),
                    "../0003-restore/screen-input.png".into()
                ),
            ]
        );
        // What report reads by name, what differs and what is small stay as written.
        for f in ["gates.json", "netstate-after.json", "small.png"] {
            assert!(reset.join(f).is_file(), "{f}");
        }
        let r = crate::evidence::reference::read_reference(&reset.join("screen-after.png.ref"))
            .unwrap();
        assert!(r.why.contains("gate pixels-equal"), "{}", r.why);
        assert_eq!(
            crate::evidence::read_recorded(&reset.join("screen-input.png")).unwrap(),
            input
        );
    }

    #[test]
    fn only_large_files_report_does_not_read_by_name_are_referenced() {
        assert!(candidate("screen-after.png", 46_393));
        assert!(candidate("netstate-after.json", 13_258));
        assert!(!candidate("screen-after.png", 4_000));
        assert!(!candidate("verb.json", 20_000));
        assert!(!candidate("display-gates.json", 20_000));
        assert!(!candidate("x.png.ref", 20_000));
        assert!(!candidate(".netprobe-tmp-x", 20_000));
    }
}
