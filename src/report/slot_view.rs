//! The report of a slot's evidence (`netprobe report SLOT_DIR` or `netprobe report
//! SLOT_DIR/evidence/NNNN-verb`, issue 13): the data `templates/slot.{md,html}` see.
//!
//! Source, per verb folder `evidence/NNNN-verb/` (written by the slot driver, ARCHITECTURE.md
//! section 5): `verb.json` (outcome, gates with their facts, timings, facts), and the display
//! gates' records (`facts.display_gates` of `verb.json`, else `display-gates.json`) with the PNGs
//! they name. Pictures are referenced by their path relative to the report's folder, never
//! copied; each PNG is hashed again and compared with the sha256 its gate recorded. The slot
//! folder's layout (`owner.json`, `state.json`, `evidence/`) is the one `src/slot/layout.rs`
//! writes; this module reads the files and imports nothing of `slot`. Plain text only: the
//! templates escape it on output.

use crate::x11::{GateRecord, PixelDiff, PngArtifact};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// A verb's outcome document in its evidence folder.
pub(crate) const VERB_FILE: &str = crate::evidence::enclosing::SLOT_VERB_FILE;
/// The slot's ownership marker (a slot folder holds it).
pub(crate) const OWNER_FILE: &str = crate::evidence::enclosing::SLOT_OWNER_FILE;
/// The state directory's marker (a state directory holds it).
pub(crate) const STATE_DIR_MARKER: &str = crate::evidence::enclosing::SLOT_STATE_DIR_MARKER;
/// The display gates' records in a verb's evidence folder.
const DISPLAY_FILE: &str = "display-gates.json";
/// Files of a verb folder linked from the report when present.
const VERB_FILES: [&str; 12] = [
    VERB_FILE,
    "gates.json",
    "gates-so-far.json",
    "timings.json",
    DISPLAY_FILE,
    "runtime.log",
    "netstate-diff.txt",
    crate::evidence::dir::INTERRUPTED_FILE,
    "criu-lock-released-before-capture.txt",
    "criu-lock-released-before-restore.txt",
    "criu-lock-released-after-failure.txt",
    "criu-lock-released-on-signal.txt",
];

/// The first line of the verb folder's `interrupted.txt` (which the verb's release writes on a
/// signal), when it is readable and not empty.
fn note_line(verb_dir: &Path) -> Option<String> {
    let note =
        crate::evidence::read_recorded_text(&verb_dir.join(crate::evidence::dir::INTERRUPTED_FILE));
    match note {
        Ok(t) if !t.trim().is_empty() => {
            Some(t.lines().next().unwrap_or_default().trim().to_string())
        }
        _ => None,
    }
}

/// The note a verb leaves when it could not write all of its evidence.
const INCOMPLETE_NOTE: &str = crate::evidence::dir::INCOMPLETE_FILE;

/// The first line of the verb folder's `incomplete.txt` (which a verb that could not write
/// all of its evidence leaves), when it has one.
fn incomplete_line(verb_dir: &Path) -> Option<String> {
    let p = verb_dir.join(INCOMPLETE_NOTE);
    if !p.is_file() {
        return None;
    }
    let line = crate::evidence::dir::note_first_line(&p);
    Some(match line.as_str() {
        "(empty)" => "(empty: the disk took no byte of it)".to_string(),
        _ => line,
    })
}

/// Why a verb folder has no readable `verb.json`: interrupted (outcome `interrupted`, the first
/// line of its `interrupted.txt`: [`note_line`]), else `incomplete` — with the first line of
/// its `incomplete.txt` when it has one (a verb that could not write all of its evidence) —
/// and the read error.
fn unfinished(verb_dir: &Path, why: String) -> (&'static str, String) {
    match (note_line(verb_dir), incomplete_line(verb_dir)) {
        (Some(line), _) => ("interrupted", line),
        (None, Some(line)) => (
            "incomplete",
            format!(
                "the verb could not write its {VERB_FILE} (its {INCOMPLETE_NOTE}: {line}); {why}"
            ),
        ),
        (None, None) => ("incomplete", why),
    }
}

/// What a folder given to `netprobe report` is, for the slot report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotSource {
    /// A slot folder (`<state dir>/slot-N`: `owner.json` and `evidence/`): every verb.
    Slot,
    /// One verb's evidence folder (it holds `verb.json`).
    Verb,
}

impl SlotSource {
    /// `Some` when `dir` is a slot folder or a verb's evidence folder.
    pub(crate) fn detect(dir: &Path) -> Option<SlotSource> {
        if dir.join(VERB_FILE).is_file() {
            Some(SlotSource::Verb)
        } else if dir.join(OWNER_FILE).is_file() && dir.join("evidence").is_dir() {
            Some(SlotSource::Slot)
        } else {
            None
        }
    }
}

/// One evaluated gate as `verb.json` carries it (the slot's `Gate` row).
#[derive(Debug, Deserialize)]
struct GateDoc {
    name: String,
    fact: String,
    proven: bool,
    detail: String,
    blocking: bool,
    class: String,
}

/// `verb.json`, the fields the report shows.
#[derive(Debug, Deserialize)]
struct VerbDoc {
    verb: String,
    slot: u32,
    ok: bool,
    summary: Option<String>,
    error: Option<Value>,
    started_at: String,
    finished_at: String,
    #[serde(default)]
    timings_ms: BTreeMap<String, u64>,
    #[serde(default)]
    gates: Vec<GateDoc>,
    #[serde(default)]
    facts: BTreeMap<String, Value>,
    phase: Option<String>,
    #[serde(default)]
    declared_differences: Vec<String>,
    /// An interrupted verb's signal (absent from a finished verb's `verb.json`).
    #[serde(default)]
    interrupted: Option<InterruptedDoc>,
    /// A finished verb's other files (path, bytes, sha256; absent from an interrupted verb's
    /// and from those written before netprobe listed them).
    #[serde(default)]
    artifacts: Option<Vec<crate::evidence::result::Artifact>>,
}

/// The `interrupted` object of an interrupted verb's `verb.json`, the field the report shows.
#[derive(Debug, Deserialize)]
struct InterruptedDoc {
    signal: crate::ns::cleanup::InterruptSignal,
    exit_code: i32,
}

/// The slot page.
#[derive(Debug, Serialize)]
pub(crate) struct SlotPage {
    /// The slot number (from `verb.json`; `None` when no verb could be read).
    pub slot: Option<u32>,
    /// The slot's phase now (`state.json`), when the report is of a slot folder.
    pub phase: Option<String>,
    /// The slot profile's name (`state.json`), if any.
    pub profile: Option<String>,
    /// The verbs, oldest first.
    pub verbs: Vec<VerbView>,
    /// Declared differences of the last readable verb.
    pub declared: Vec<String>,
    /// What differs from what the slot recorded when each verb ended (`name: detail`): a
    /// `verb.json` against the journal's sha256, a file against `verb.json`'s artifacts, a
    /// journal line that is not an entry, a `verb.json` whose `ok` its own gates contradict
    /// ([`outcome_contradiction`]), a verb folder the journal records that is gone and was not
    /// pruned; the page says NOT VERIFIED when any.
    pub differs: Vec<String>,
    /// Verbs whose folders `slot prune` removed, with the `verb.json` sha256 it recorded.
    pub pruned: Vec<super::slot_journal::PrunedRow>,
}

/// One verb's evidence folder.
#[derive(Debug, Serialize)]
pub(crate) struct VerbView {
    /// Folder name, e.g. `0003-restore`.
    pub name: String,
    /// The folder relative to the report's folder (`evidence/0003-restore`, or `` for a
    /// report written into the verb's own folder).
    pub folder: String,
    /// `provision`, `snapshot`, `restore`, …
    pub verb: String,
    /// `ok`, `FAILED`, `interrupted` (its `verb.json` says so, or it has none and an
    /// `interrupted.txt`), `incomplete` (no readable `verb.json`) or `MISMATCH` (its
    /// `verb.json` records `ok` while one of its blocking gates is not proven:
    /// [`outcome_contradiction`]).
    pub outcome: &'static str,
    /// The verb's summary (success) or error message (failure), or why `verb.json` is unreadable;
    /// for an interrupted verb the first line of `interrupted.txt` (`from_note`), else the
    /// signal `verb.json` names.
    pub text: String,
    /// `text` is the first line of `interrupted.txt`.
    pub from_note: bool,
    /// The gate an error names, if any.
    pub failed_gate: Option<String>,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339.
    pub finished_at: String,
    /// Whole verb, milliseconds (`timings_ms.total`).
    pub total_ms: Option<u64>,
    /// Phase after the verb.
    pub phase: Option<String>,
    /// Gates in evaluation order.
    pub gates: Vec<GateRow>,
    /// Display gates with their pictures.
    pub display: Vec<DisplayRow>,
    /// Named step timings, milliseconds, longest first.
    pub timings: Vec<(String, u64)>,
    /// Evidence files present, relative to the report's folder.
    pub files: Vec<String>,
    /// `verb.json` against the journal's `end` entry for this folder ([`super::slot_journal::journal_check`]).
    pub journal: super::slot_journal::JournalCheck,
    /// The folder's other files against the artifacts `verb.json` lists
    /// ([`super::slot_artifacts::check`]).
    pub artifacts: super::slot_artifacts::ArtifactCheck,
    /// Why the outcome `verb.json` records is not the one its gates give
    /// ([`outcome_contradiction`]), when it is not.
    pub contradiction: Option<String>,
}

/// One gate row.
#[derive(Debug, Serialize)]
pub(crate) struct GateRow {
    pub name: String,
    pub fact: String,
    pub proven: bool,
    /// `blocking` or `recorded`.
    pub kind: &'static str,
    /// `gate` (exit 1) or `host` (exit 3).
    pub class: String,
    pub detail: String,
}

/// One display gate.
#[derive(Debug, Serialize)]
pub(crate) struct DisplayRow {
    pub gate: String,
    pub passed: bool,
    pub detail: String,
    /// Differing pixels, of `total`, when a diff was computed.
    pub differing: Option<u64>,
    pub total: Option<u64>,
    /// The differing pixels' bounding box (`x 30 y 5, 20x10`), when any differ.
    pub bbox: Option<String>,
    pub pictures: Vec<Picture>,
}

/// One PNG a display gate wrote.
#[derive(Debug, Serialize)]
pub(crate) struct Picture {
    /// What the picture shows, e.g. `before (the snapshot's screen)`.
    pub role: String,
    /// Path relative to the report's folder.
    pub path: String,
    /// sha256 recorded by the gate.
    pub sha256: String,
    /// `matches`, `missing` or `DIFFERS: <sha256 on disk>`.
    pub check: String,
    /// True when the file exists with the recorded sha256.
    pub ok: bool,
}

/// The role of a display gate's PNG, from the names `src/slot/display.rs` and `src/x11/gates.rs`
/// give them.
fn role(file: &str) -> String {
    match file {
        "screen-snapshot.png" => "before (the snapshot's screen)".into(),
        "screen-after.png" => "after (the screen after the restore)".into(),
        "screen-after-diff.png" => "diff (differing pixels red, the rest dimmed)".into(),
        "screen-input.png" => "after the key press (input gate)".into(),
        "screen.png" => "the snapshot's reference screen (before)".into(),
        "screen-quiescent-1.png" => "quiescence, first screenshot".into(),
        "screen-quiescent-2.png" => "quiescence, second screenshot".into(),
        other => other.to_string(),
    }
}

/// `rel` joined under `prefix` (`""` or `evidence/0003-restore`).
fn under(prefix: &str, rel: &str) -> String {
    if prefix.is_empty() {
        rel.to_string()
    } else {
        format!("{prefix}/{rel}")
    }
}

/// A display gate's PNG kept by reference (`<file>.ref`, [`crate::evidence::reference`]): the
/// check of the referenced file against the gate's sha256, and its `stored_in`; `None` when the
/// file is stored in the folder or no `.ref` is there.
fn referred(verb_dir: &Path, a: &PngArtifact) -> Option<(String, bool, Option<String>)> {
    let here = verb_dir.join(&a.file);
    if here.symlink_metadata().is_ok() || !super::is_inside(&a.file) || a.file.contains('/') {
        return None;
    }
    let r = crate::evidence::reference::ref_path(&here);
    r.symlink_metadata().ok()?;
    let (target, doc) = match crate::evidence::reference::target_of(&r) {
        Ok(t) => t,
        Err(e) => return Some((format!("unreadable reference: {e}"), false, None)),
    };
    let check = match crate::evidence::sha256_recorded(&target) {
        Ok((sha, _)) if sha == a.sha256 => (format!("matches ({})", doc.stored_in), true),
        Ok((sha, _)) => (format!("DIFFERS: {sha} in {}", doc.stored_in), false),
        Err(e) => (format!("unreadable: {}: {e}", doc.stored_in), false),
    };
    Some((check.0, check.1, Some(doc.stored_in)))
}

fn picture(verb_dir: &Path, prefix: &str, a: &PngArtifact) -> Picture {
    // A name from the record that would leave the folder is shown, never opened.
    let (check, ok) = if !super::is_inside(&a.file) || a.file.contains('/') {
        (
            "not a file name inside the verb's folder; not opened".into(),
            false,
        )
    } else {
        match crate::evidence::sha256_recorded(&verb_dir.join(&a.file)) {
            Ok((sha, _)) if sha == a.sha256 => ("matches".into(), true),
            Ok((sha, _)) => (format!("DIFFERS: {sha} on disk"), false),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match referred(verb_dir, a) {
                Some((check, ok, _)) => (check, ok),
                None => ("missing".into(), false),
            },
            Err(e) => (format!("unreadable: {e}"), false),
        }
    };
    // A picture kept by reference links to the sibling folder that stores it
    // (`evidence/0003-restore/…` from `evidence/0011-reset`).
    let path = match (referred(verb_dir, a), prefix.rsplit_once('/')) {
        (Some((_, _, Some(stored_in))), Some((parent, _))) => {
            under(parent, stored_in.trim_start_matches("../"))
        }
        (Some((_, _, Some(stored_in))), None) => under(prefix, &stored_in),
        _ => under(prefix, &a.file),
    };
    Picture {
        role: role(&a.file),
        path,
        sha256: a.sha256.clone(),
        check,
        ok,
    }
}

fn display_row(verb_dir: &Path, prefix: &str, r: GateRecord) -> DisplayRow {
    let (differing, total, bbox) = match &r.diff {
        Some(PixelDiff {
            differing,
            total,
            bbox,
        }) => (Some(*differing), Some(*total), bbox.map(|b| b.to_string())),
        None => (None, None, None),
    };
    DisplayRow {
        pictures: r
            .pngs
            .iter()
            .map(|a| picture(verb_dir, prefix, a))
            .collect(),
        gate: r.gate,
        passed: r.passed,
        detail: r.detail,
        differing,
        total,
        bbox,
    }
}

/// The display gates' records: `facts.display_gates` of `verb.json` (the last and fullest), else
/// `display-gates.json`. Unreadable records are skipped (the gates table still shows them).
fn display_records(verb_dir: &Path, doc: Option<&VerbDoc>) -> Vec<GateRecord> {
    let from_facts = doc
        .and_then(|d| d.facts.get("display_gates"))
        .and_then(|v| serde_json::from_value::<Vec<GateRecord>>(v.clone()).ok());
    from_facts
        .or_else(|| {
            let bytes = crate::evidence::read_recorded(&verb_dir.join(DISPLAY_FILE)).ok()?;
            serde_json::from_slice(&bytes).ok()
        })
        .unwrap_or_default()
}

fn gate_row(g: GateDoc) -> GateRow {
    GateRow {
        name: g.name,
        fact: g.fact,
        proven: g.proven,
        kind: if g.blocking { "blocking" } else { "recorded" },
        class: g.class,
        detail: g.detail,
    }
}

/// The view of the verb folder `verb_dir` (named `name`), its paths under `prefix`; the
/// parsed `verb.json` is returned too (for the page's slot number and declared differences).
fn verb_view(
    verb_dir: &Path,
    name: &str,
    prefix: &str,
    journal: &[crate::slot::layout::JournalEntry],
) -> (VerbView, Option<VerbDoc>) {
    let (doc, why) = match read_verb_doc(verb_dir) {
        Ok(d) => (Some(d), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let display = display_records(verb_dir, doc.as_ref())
        .into_iter()
        .map(|r| display_row(verb_dir, prefix, r))
        .collect();
    let files = VERB_FILES
        .iter()
        .filter(|f| verb_dir.join(f).is_file())
        .map(|f| under(prefix, f))
        .collect();
    let fallback_verb = name.split_once('-').map_or(name, |(_, v)| v).to_string();
    let (outcome, text) = match why {
        Some(why) => unfinished(verb_dir, why),
        None => ("incomplete", String::new()),
    };
    let from_note = outcome == "interrupted";
    let mut v = VerbView {
        name: name.to_string(),
        folder: prefix.to_string(),
        verb: fallback_verb,
        outcome,
        text,
        from_note,
        failed_gate: None,
        started_at: String::new(),
        finished_at: String::new(),
        total_ms: None,
        phase: None,
        gates: Vec::new(),
        display,
        timings: Vec::new(),
        files,
        journal: super::slot_journal::journal_check(verb_dir, name, journal),
        artifacts: super::slot_artifacts::check(
            verb_dir,
            doc.as_ref().and_then(|d| d.artifacts.as_deref()),
        ),
        contradiction: None,
    };
    if v.journal.state == "DIFFERS"
        && let Some(line) = incomplete_line(verb_dir)
    {
        // The verb said, when it ended, what it could not write (its journal end among them).
        v.journal
            .detail
            .push_str(&format!(" (its {INCOMPLETE_NOTE} says: {line})"));
    }
    let Some(d) = doc else { return (v, None) };
    let d = fill_from_doc(&mut v, verb_dir, d);
    (v, Some(d))
}

/// Reads and parses `verb_dir/verb.json`. The error names the file and, when the folder also has
/// no incomplete.txt, says the verb did not finish.
fn read_verb_doc(verb_dir: &Path) -> Result<VerbDoc, super::slot_journal::VerbDocError> {
    use super::slot_journal::VerbDocError;
    // A verb that could not write its verb.json said so in incomplete.txt: it did finish.
    let unfinished = !verb_dir.join(INCOMPLETE_NOTE).is_file();
    crate::evidence::read_recorded(&verb_dir.join(VERB_FILE))
        .map_err(|source| VerbDocError::Unreadable { source, unfinished })
        .and_then(|b| serde_json::from_slice::<VerbDoc>(&b).map_err(VerbDocError::NotVerbDoc))
}

/// Fills `v` from the verb's parsed verb.json `d`: verb, outcome and its text (an interrupted
/// verb's from its interrupted.txt), failed gate, times, phase, timings (longest first, without
/// the total) and gate rows. Returns `d` without its gates (moved into `v`).
fn fill_from_doc(v: &mut VerbView, verb_dir: &Path, d: VerbDoc) -> VerbDoc {
    let err = d.error.as_ref();
    v.verb = d.verb.clone();
    v.outcome = if d.ok { "ok" } else { "FAILED" };
    v.text = match (&d.summary, err) {
        (Some(s), _) if d.ok => s.clone(),
        (_, Some(e)) => e["message"].as_str().unwrap_or_default().to_string(),
        _ => String::new(),
    };
    if let (false, Some(i)) = (d.ok, &d.interrupted) {
        v.outcome = "interrupted";
        let line = note_line(verb_dir);
        v.from_note = line.is_some();
        v.text = line.unwrap_or_else(|| {
            format!(
                "verb.json: interrupted by {} (exit {}); no readable interrupted.txt",
                i.signal.name(),
                i.exit_code
            )
        });
    }
    v.failed_gate = err.and_then(|e| e["gate"].as_str()).map(str::to_string);
    v.started_at = d.started_at.clone();
    v.finished_at = d.finished_at.clone();
    v.total_ms = d.timings_ms.get("total").copied();
    v.phase = d.phase.clone();
    let mut t: Vec<(String, u64)> = d
        .timings_ms
        .iter()
        .filter(|(k, _)| k.as_str() != "total")
        .map(|(k, ms)| (k.clone(), *ms))
        .collect();
    t.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.timings = t;
    let mut d = d;
    v.gates = std::mem::take(&mut d.gates)
        .into_iter()
        .map(gate_row)
        .collect();
    if let Some(why) = outcome_contradiction(&v.name, d.ok, &v.gates) {
        // The success is re-derived from the gates: the recorded `ok` is not shown as one.
        v.outcome = "MISMATCH";
        v.text = format!(
            "NOT VERIFIED: {why}; the summary verb.json records: {}",
            v.text
        );
        v.contradiction = Some(why);
    }
    d
}

/// The verb's success re-derived from its gates against the `ok` its `verb.json` (folder
/// `name`) records: a verb with a blocking gate not proven fails closed (`src/slot/gate.rs`),
/// so `ok: true` beside such a gate is a contradiction — the sentence naming the folder, the
/// first such gate and the recorded `ok`. `None` when they agree (a failed verb may have every
/// gate proven: it failed at a step after them).
pub(super) fn outcome_contradiction(name: &str, ok: bool, gates: &[GateRow]) -> Option<String> {
    let g = gates
        .iter()
        .find(|g| g.kind == "blocking" && !g.proven)
        .filter(|_| ok)?;
    Some(format!(
        "{name}/{VERB_FILE} records ok: true, but its blocking gate `{}` ({}) is NOT PROVEN; a verb with a blocking gate not proven fails, so the evidence gives FAILED",
        g.name, g.fact
    ))
}

/// The verb folders of `evidence/` (`NNNN-verb`), oldest first.
fn verb_folders(evidence: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(evidence)
        .map(|r| {
            r.flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    n.split_once('-').is_some_and(|(seq, _)| {
                        !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit())
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// `phase` and `profile.name` of the slot folder's `state.json`, when readable.
fn slot_state(dir: &Path) -> (Option<String>, Option<String>) {
    let v: Option<Value> = crate::evidence::read_recorded(&dir.join("state.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let get = |p: &str| {
        v.as_ref()
            .and_then(|v| v.pointer(p))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    (get("/phase"), get("/profile/name"))
}

impl SlotPage {
    /// The page of `dir`, a slot folder or one verb's evidence folder (`source`).
    pub(crate) fn new(dir: &Path, source: SlotSource) -> SlotPage {
        let (folders, (phase, profile)) = match source {
            SlotSource::Verb => {
                let name = dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                (vec![(dir.to_path_buf(), name, String::new())], (None, None))
            }
            SlotSource::Slot => {
                let ev = dir.join("evidence");
                let f = verb_folders(&ev)
                    .into_iter()
                    .map(|n| (ev.join(&n), n.clone(), format!("evidence/{n}")))
                    .collect();
                (f, slot_state(dir))
            }
        };
        // The slot's journal: beside `evidence/` (a slot folder), or two levels up (a verb folder).
        let journal_path = match source {
            SlotSource::Slot => dir.join("journal.jsonl"),
            SlotSource::Verb => dir
                .parent()
                .and_then(Path::parent)
                .map(|p| p.join("journal.jsonl"))
                .unwrap_or_default(),
        };
        let journal = crate::slot::layout::journal_read(&journal_path);
        let mut page = SlotPage {
            slot: None,
            phase,
            profile,
            verbs: Vec::new(),
            declared: Vec::new(),
            differs: Vec::new(),
            pruned: Vec::new(),
        };
        let bad = crate::slot::layout::journal_bad_lines(&journal_path);
        if !bad.is_empty() {
            page.differs.push(format!(
                "journal.jsonl: line(s) {} are not journal entries (netprobe writes one whole entry per line; only a last line cut by a crash may be partial): the journal was edited",
                bad.iter().map(usize::to_string).collect::<Vec<_>>().join(" ")
            ));
        }
        if source == SlotSource::Slot {
            let names: Vec<String> = folders.iter().map(|(_, n, _)| n.clone()).collect();
            let (rows, missing) = super::slot_journal::pruned(&journal, &names);
            page.pruned = rows;
            page.differs.extend(missing);
        }
        for (path, name, prefix) in folders {
            let (v, doc) = verb_view(&path, &name, &prefix, &journal);
            if v.journal.state == "DIFFERS" {
                page.differs
                    .push(format!("{}: {}", v.name, v.journal.detail));
            }
            for m in &v.artifacts.mismatches {
                page.differs.push(format!("{}: {m}", v.name));
            }
            if let Some(why) = &v.contradiction {
                page.differs.push(why.clone());
            }
            if let Some(d) = doc {
                page.slot = Some(d.slot);
                page.declared = d.declared_differences;
            }
            page.verbs.push(v);
        }
        page
    }
}

#[cfg(test)]
mod tests {
    use super::{GateRow, outcome_contradiction};

    fn gate(name: &str, proven: bool, blocking: bool) -> GateRow {
        GateRow {
            name: name.into(),
            fact: format!("{name} holds"),
            proven,
            kind: if blocking { "blocking" } else { "recorded" },
            class: "gate".into(),
            detail: String::new(),
        }
    }

    #[test]
    fn ok_beside_an_unproven_blocking_gate_is_a_contradiction() {
        let gates = [
            gate("slot-lock", true, true),
            gate("criu-config", false, false),
            gate("snapshot-complete", false, true),
        ];
        let why = outcome_contradiction("0004-restore", true, &gates).expect("a contradiction");
        for part in [
            "0004-restore/verb.json",
            "ok: true",
            "`snapshot-complete`",
            "NOT PROVEN",
        ] {
            assert!(why.contains(part), "{part}: {why}");
        }
        // A failed verb, or an ok one whose unproven gates are only recorded: no contradiction.
        assert_eq!(outcome_contradiction("0004-restore", false, &gates), None);
        assert_eq!(
            outcome_contradiction("0004-restore", true, &gates[..2]),
            None
        );
    }
}
