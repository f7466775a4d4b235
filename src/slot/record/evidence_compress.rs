//! A slot verb's large evidence stored compressed ([`crate::evidence::compressed`]), off the
//! verb's critical path and before its end record is sealed, so `verb.json`'s artifact list
//! names the stored `….zst` files with both sha256 (stored bytes, content):
//!
//! - CRIU's log of a runtime step that succeeded (`criu-work/restore.log`,
//!   `criu-work/dump.log`) is compressed on a thread of its own (at the verb's priority: at
//!   nice 19 a loaded machine starved it while the verb waited for it at its end)
//!   as soon as the step returned ([`VerbRun::compress_beside`]): no gate of the verb reads it
//!   after that (only a failed step's error reads CRIU's reason, and then nothing is
//!   compressed), and the display gates' waits run meanwhile. [`VerbRun::finish`] joins it
//!   with the other evidence written beside the verb.
//! - At the verb's end, once its outcome is decided and only when it succeeded, every other
//!   log (`*.log`) of at least [`COMPRESS_THRESHOLD`] bytes but those `report` shows or links by
//!   name ([`KEEP_PLAIN`], anything already compressed) is compressed; the captures (JSON, text)
//!   stay as written, read by name by operators and tests
//!   ([`compress_at_end`]). A failed verb's files stay as written: they are the ones read.
//!
//! With `NETPROBE_EVIDENCE_PLAIN=1` ([`PLAIN_ENV`]) nothing is compressed (the bench's A/B).
//!
//! Fact `evidence_compressed` lists each file compressed (`path`, stored `bytes`,
//! `content_bytes`); a compression that fails keeps the original (fact
//! `evidence_compression_errors`), it never fails the verb.

use super::verb_run::VerbRun;
use crate::evidence::EvidenceDir;
use crate::evidence::compressed::{COMPRESS_THRESHOLD, is_compressed};
use crate::evidence::result::Artifact;
use serde_json::{Value, json};
use std::path::Path;

/// The environment variable that, set to `1`, keeps every file of a verb as written (no
/// compression): the `retention` bench's "old code" side, alternated with the new in one run.
pub const PLAIN_ENV: &str = "NETPROBE_EVIDENCE_PLAIN";

/// Whether [`PLAIN_ENV`] asks for no compression.
fn plain() -> bool {
    std::env::var_os(PLAIN_ENV).is_some_and(|v| v == "1")
}

/// Files `report` reads or links by their name, kept as written whatever their size.
pub(crate) const KEEP_PLAIN: [&str; 10] = [
    "verb.json",
    "gates.json",
    "gates-so-far.json",
    "timings.json",
    "display-gates.json",
    "runtime.log",
    "netstate-diff.txt",
    "interrupted.txt",
    "incomplete.txt",
    "criu-lock-released.txt",
];

/// Whether the end pass compresses the folder's file `rel` of `bytes` bytes: a log (`*.log`:
/// CRIU's, strace's) of at least [`COMPRESS_THRESHOLD`] bytes. The captures (`netstate-*.json`,
/// `netfilter*.txt`, …) stay as written: operators, tests and other tools read them by name.
pub(crate) fn worth_compressing(rel: &str, bytes: u64) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    bytes >= COMPRESS_THRESHOLD
        && name.ends_with(".log")
        && !is_compressed(rel)
        && !rel.ends_with(".png")
        && !name.starts_with('.')
        && !KEEP_PLAIN.contains(&rel)
}

/// What one compression came to, as fact `evidence_compressed` lists it.
fn compressed_fact(a: &Artifact) -> Value {
    json!({
        "path": a.path,
        "bytes": a.bytes,
        "content_bytes": a.content.as_ref().map(|c| c.bytes),
    })
}

/// Compresses each of `rels` in folder `ev`; returns the facts of those compressed and the
/// errors (`path: why`) of those that were not (their originals kept).
fn compress_all(ev: &Path, rels: &[String]) -> (Vec<Value>, Vec<String>) {
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    for rel in rels {
        match EvidenceDir::open(ev).and_then(|d| d.compress(rel)) {
            Ok(a) => done.push(compressed_fact(&a)),
            Err(e) => failed.push(format!("{rel}: {e}")),
        }
    }
    (done, failed)
}

/// Appends `done` and `failed` to the verb's facts `evidence_compressed` and
/// `evidence_compression_errors`.
fn record(rec: &super::verb_record::VerbRecord, done: Vec<Value>, failed: Vec<String>) {
    let mut r = rec.lock();
    for (key, items) in [
        ("evidence_compressed", done),
        (
            "evidence_compression_errors",
            failed.into_iter().map(Value::from).collect(),
        ),
    ] {
        if items.is_empty() {
            continue;
        }
        let entry = r.facts.entry(key.to_string()).or_insert_with(|| json!([]));
        if let Some(list) = entry.as_array_mut() {
            list.extend(items);
        }
    }
}

impl VerbRun<'_> {
    /// Compresses the CRIU log `rel` (e.g. `criu-work/restore.log`) of a runtime step that
    /// succeeded, on a thread of its own, joined by [`VerbRun::finish`]. Nothing
    /// without an evidence folder, or when the log is not there.
    pub(crate) fn compress_beside(&mut self, rel: &str) {
        let Some(ev) = self.ev.clone() else { return };
        if plain() || !ev.join(rel).is_file() {
            return;
        }
        let rec = self.record_handle();
        let rels = vec![rel.to_string()];
        self.spawn_beside(&format!("{rel}.zst"), move || {
            let (done, failed) = compress_all(&ev, &rels);
            record(&rec, done, failed);
        });
    }
}

/// The end pass: compresses every file of `ev` [`worth_compressing`] (see the module docs),
/// recording the facts in `rec`. Called by [`VerbRun::finish`] for a verb that succeeded,
/// after the threads beside it were joined and before the end record is written.
pub(crate) fn compress_at_end(ev: &Path, rec: &super::verb_record::VerbRecord) {
    if plain() {
        return;
    }
    let Ok(files) = EvidenceDir::open(ev)
        .and_then(|d| d.inventory_except(&crate::evidence::enclosing::SLOT_VERB_UNLISTED))
    else {
        return;
    };
    let rels: Vec<String> = files
        .into_iter()
        .filter(|a| worth_compressing(&a.path, a.bytes))
        .map(|a| a.path)
        .collect();
    if rels.is_empty() {
        return;
    }
    let (done, failed) = compress_all(ev, &rels);
    record(rec, done, failed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_large_files_report_does_not_name_are_compressed() {
        assert!(worth_compressing("criu-work/restore.log", 952_423));
        assert!(worth_compressing("strace-restore.log", 13_258));
        assert!(!worth_compressing("netstate-after.json", 13_258));
        assert!(!worth_compressing("netstate-after.json", 1_000));
        assert!(!worth_compressing("gates.json", 12_000));
        assert!(!worth_compressing("screen-input.png", 47_000));
        assert!(!worth_compressing("criu-work/restore.log.zst", 81_000));
        assert!(!worth_compressing("criu-work/.netprobe-tmp-1-2-x", 81_000));
    }

    #[test]
    fn the_end_pass_compresses_and_records_each_file() {
        let d = tempfile::tempdir().unwrap();
        let ev = EvidenceDir::open(d.path()).unwrap();
        let big = "{\"links\": []}\n".repeat(1000);
        ev.write("netstate-after.json", big.as_bytes()).unwrap();
        ev.write("strace.log", big.as_bytes()).unwrap();
        ev.write("gates.json", big.as_bytes()).unwrap();
        ev.write("timings.json", b"{}").unwrap();
        let rec = super::super::verb_record::VerbRecord::default();
        compress_at_end(d.path(), &rec);
        let names: Vec<String> = EvidenceDir::open(d.path())
            .unwrap()
            .inventory()
            .unwrap()
            .into_iter()
            .map(|a| a.path)
            .collect();
        assert_eq!(
            names,
            [
                "gates.json",
                "netstate-after.json",
                "strace.log.zst",
                "timings.json"
            ]
        );
        let facts = rec.lock().facts.clone();
        assert_eq!(facts["evidence_compressed"][0]["path"], "strace.log.zst");
        assert_eq!(
            facts["evidence_compressed"][0]["content_bytes"],
            big.len() as u64
        );
        assert_eq!(
            crate::evidence::read_recorded(&d.path().join("netstate-after.json")).unwrap(),
            big.as_bytes()
        );
    }
}
