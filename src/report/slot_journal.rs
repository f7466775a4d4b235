//! A slot verb's `verb.json` against the slot journal (`journal.jsonl`, written by
//! `src/slot/record/journal.rs`): the sha256 the journal recorded at the verb's end, compared with the
//! file now ([`journal_check`]), for the slot report ([`super::slot_view`]).

use super::slot_view::VERB_FILE;
use crate::slot::JournalEvent;
use serde::Serialize;
use std::path::Path;

/// How a verb's `verb.json` compares with the sha256 the slot journal (`journal.jsonl`)
/// recorded when the verb ended.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct JournalCheck {
    /// `matches`, `DIFFERS` or `unchecked`.
    pub state: &'static str,
    /// The sentence the report shows.
    pub detail: String,
}

/// `verb.json` in `verb_dir` (folder name `name`) against the `end` entry the journal `journal`
/// holds for that folder: `matches` (same sha256), `DIFFERS` (another sha256, another outcome,
/// `verb.json` missing where the journal recorded one, or a `verb.json` whose folder the
/// journal does not name at all: journal missing, emptied or cut), or `unchecked` (no end
/// entry with a hash for a folder the journal names: a verb interrupted before it or its note
/// wrote `verb.json`, or one recorded before netprobe kept hashes). The journal is the slot's own append-only record; it is
/// not a signature — both files are root's to edit.
pub(super) fn journal_check(
    verb_dir: &Path,
    name: &str,
    journal: &[crate::slot::record::journal::JournalEntry],
) -> JournalCheck {
    let end = journal
        .iter()
        .rev()
        .find(|e| e.event == JournalEvent::End && e.evidence.as_deref() == Some(name));
    let differs = |detail: String| JournalCheck {
        state: "DIFFERS",
        detail,
    };
    let Some((end, want)) = end.and_then(|e| e.verb_sha256.as_ref().map(|h| (e, h))) else {
        // The verb's start is journalled (`evidence <path>`); an end by the same process after
        // it (without a hash: written before netprobe kept them) leaves it unchecked, none at
        // all while a verb.json is there means the journal's end line is missing.
        let start = journal.iter().position(|e| {
            e.event == JournalEvent::Start && e.detail.ends_with(&format!("/{name}"))
        });
        let ended = start.is_some_and(|i| {
            journal[i + 1..].iter().any(|e| {
                e.event == JournalEvent::End && e.pid == journal[i].pid && e.verb == journal[i].verb
            })
        });
        if start.is_some() && !ended && verb_dir.join(VERB_FILE).is_file() {
            return differs(
                "journal.jsonl records this verb's start but no end, yet verb.json is there: it cannot be shown to be the one the verb wrote (the journal's end line is missing)".into(),
            );
        }
        // Every verb journals its start before it writes anything into its folder: a verb.json
        // whose folder the journal does not name at all (journal.jsonl missing, emptied, or
        // its lines removed) cannot be shown to be the one the verb wrote.
        let named = end.is_some()
            || start.is_some()
            || journal.iter().any(|e| e.evidence.as_deref() == Some(name));
        if !named && verb_dir.join(VERB_FILE).is_file() {
            return differs(
                "journal.jsonl has no record of this verb (neither its start nor its end: the journal is missing, emptied, or its lines were removed), yet verb.json is there: it cannot be shown to be the one the verb wrote".into(),
            );
        }
        return JournalCheck {
            state: "unchecked",
            detail: "journal.jsonl records no end of this folder with a verb.json sha256".into(),
        };
    };
    match crate::evidence::sha256_recorded(&verb_dir.join(VERB_FILE)) {
        Ok((now, _)) if now == *want => JournalCheck {
            state: "matches",
            detail: format!(
                "verb.json has the sha256 journal.jsonl recorded at the verb's end ({}…, {} at {})",
                &want[..want.len().min(12)],
                end_word(end),
                end.at
            ),
        },
        Ok((now, _)) => differs(format!(
            "verb.json sha256 {}… is not the {}… journal.jsonl recorded at the verb's end ({} at {}): the file was changed after the verb wrote it",
            &now[..now.len().min(12)],
            &want[..want.len().min(12)],
            end_word(end),
            end.at
        )),
        Err(e) => differs(format!(
            "journal.jsonl recorded a verb.json (sha256 {}…) at the verb's end, but it cannot be read now: {e}",
            &want[..want.len().min(12)]
        )),
    }
}

/// A verb whose folder `slot prune` removed, as the journal recorded it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PrunedRow {
    /// The folder's name (`0004-reset`).
    pub name: String,
    /// The verb (from the folder's name).
    pub verb: String,
    /// sha256 of its `verb.json` the prune recorded (`None`: it had none).
    pub verb_sha256: Option<String>,
    /// When it was pruned.
    pub at: String,
    /// The prune's words: what it removed and why.
    pub detail: String,
}

/// The verbs of the slot's `journal` whose folders are not among `on_disk`: those `slot prune`
/// removed (its `pruned` entry: "pruned (hash recorded)"), and — as mismatches — those whose
/// `end` the journal records with a folder that is gone and was never pruned.
pub(super) fn pruned(
    journal: &[crate::slot::record::journal::JournalEntry],
    on_disk: &[String],
) -> (Vec<PrunedRow>, Vec<String>) {
    let gone = |name: &str| !on_disk.iter().any(|n| n == name);
    let rows: Vec<PrunedRow> = journal
        .iter()
        .filter(|e| e.event == crate::slot::verb::prune::PRUNED_EVENT)
        .filter_map(|e| {
            let name = e.evidence.clone()?;
            gone(&name).then(|| PrunedRow {
                verb: name.split_once('-').map_or("", |(_, v)| v).to_string(),
                name,
                verb_sha256: e.verb_sha256.clone(),
                at: e.at.clone(),
                detail: e.detail.clone(),
            })
        })
        .collect();
    let mut missing = Vec::new();
    for e in journal.iter().filter(|e| e.event == JournalEvent::End) {
        let Some(name) = e.evidence.as_deref() else {
            continue;
        };
        if gone(name)
            && !rows.iter().any(|r| r.name == name)
            && !missing
                .iter()
                .any(|m: &String| m.starts_with(&format!("{name}: ")))
        {
            missing.push(format!(
                "{name}: journal.jsonl records this verb's end ({} at {}{}), but its folder is gone and was not pruned (`netprobe slot prune` records each folder it removes): removed outside netprobe",
                end_word(e),
                e.at,
                e.verb_sha256
                    .as_deref()
                    .map(|h| format!(", verb.json sha256 {}…", &h[..h.len().min(12)]))
                    .unwrap_or_default()
            ));
        }
    }
    (rows, missing)
}

/// How a journal `end` entry ended, in one word: `ok`, `interrupted` (its detail begins as an
/// interruption note's end does), else `failed`.
fn end_word(end: &crate::slot::record::journal::JournalEntry) -> &'static str {
    match (
        end.ok,
        end.detail
            .starts_with(crate::slot::record::interruption::INTERRUPTED_END_PREFIX),
    ) {
        (true, _) => "ok",
        (false, true) => "interrupted",
        (false, false) => "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::end_word;
    use crate::slot::record::journal::JournalEntry;

    #[test]
    fn a_journal_end_says_ok_interrupted_or_failed() {
        let end = |ok: bool, detail: &str| JournalEntry {
            at: "2026-12-05T00:00:00Z".into(),
            pid: 1,
            verb: "restore".into(),
            event: crate::slot::JournalEvent::End,
            ok,
            detail: detail.into(),
            evidence: None,
            verb_sha256: None,
        };
        assert_eq!(end_word(&end(true, "restored")), "ok");
        assert_eq!(
            end_word(&end(false, "interrupted by SIGINT")),
            "interrupted"
        );
        assert_eq!(end_word(&end(false, "gate net-fidelity failed")), "failed");
    }
}

/// Why a verb folder's `verb.json` cannot be read for the slot report.
#[derive(Debug, thiserror::Error)]
pub(crate) enum VerbDocError {
    /// The file cannot be read; `unfinished` when the folder has no `incomplete.txt` either
    /// (a verb that could not write its `verb.json` says so there: it did finish).
    #[error("{VERB_FILE}: {source}{}", if *.unfinished { " (the verb did not finish)" } else { "" })]
    Unreadable {
        /// The read error.
        #[source]
        source: std::io::Error,
        /// No `incomplete.txt` beside it.
        unfinished: bool,
    },
    /// The file is not the verb document.
    #[error("{VERB_FILE}: {0}")]
    NotVerbDoc(#[source] serde_json::Error),
}
