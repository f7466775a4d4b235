//! A verb whose evidence could not all be written ([`super::evidence_writes`]): what its error
//! says ([`Incomplete::message`]: each file not written, the state directory's filesystem and
//! the fix), what `incomplete.txt` says ([`Incomplete::note`]), the journal's `end` detail
//! ([`Incomplete::journal_detail`]), and the verb's error itself ([`evidence_error`], exit 2).

use crate::evidence::dir::INCOMPLETE_FILE;
use crate::slot::Verb;
use crate::slot::error::SlotError;
use crate::slot::next_step;
use crate::slot::record::evidence_writes::{StateFs, Unwritten, WriteFault};
use crate::slot::record::verb_record as vrec;
use crate::slot::state::Phase;
use std::path::Path;

/// What the verb's own work came to, before its evidence could not all be written.
#[derive(Debug)]
pub(crate) enum Work<'a> {
    /// It succeeded with this summary; the slot's phase (`state.json`) after it.
    Succeeded(&'a str, Option<Phase>),
    /// It failed with this error.
    Failed(&'a SlotError),
}

/// Everything the error and the note of a verb with unwritten evidence say.
#[derive(Debug)]
pub(crate) struct Incomplete<'a> {
    /// The verb.
    pub verb: Verb,
    /// The slot number.
    pub slot: u32,
    /// The verb's evidence folder.
    pub ev: &'a Path,
    /// What was not written.
    pub unwritten: &'a [Unwritten],
    /// The state directory's filesystem.
    pub fs: &'a StateFs,
    /// What the verb's work came to.
    pub work: Work<'a>,
    /// Whether `incomplete.txt` could be written (`Err`: why not).
    pub marker: Result<(), NoteWriteError>,
}

/// Why a verb's `incomplete.txt` could not be written: `<op>: <OS error>`. Clone (the error is
/// shared), as each later [`Incomplete`] of the verb's end names the note's first failure.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{op}: {source}")]
pub(crate) struct NoteWriteError {
    /// What was done to the note (`append`, `create`).
    pub op: &'static str,
    /// The OS error.
    #[source]
    pub source: std::sync::Arc<std::io::Error>,
}

impl NoteWriteError {
    /// `op` failed with `source`.
    pub fn new(op: &'static str, source: std::io::Error) -> Self {
        NoteWriteError {
            op,
            source: std::sync::Arc::new(source),
        }
    }
}

impl Incomplete<'_> {
    /// `a (why); b (why)`.
    fn files(&self) -> String {
        self.unwritten
            .iter()
            .map(|u| format!("{} ({})", u.file, u.why))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// What the verb's work came to, and what to run once space is free.
    fn work_and_next(&self) -> (String, String) {
        let verb = self.verb.as_str();
        match &self.work {
            Work::Succeeded(summary, phase) => (
                format!(
                    "the {verb} itself succeeded ({summary}){}: that stands, only its evidence is incomplete",
                    phase.map_or_else(String::new, |p| format!(
                        "; the slot's phase is {} as state.json records",
                        Phase::name(p)
                    ))
                ),
                format!(
                    "see {} (the slot is as the {verb} left it)",
                    next_step::command("status", self.slot, &self.fs.state_dir)
                ),
            ),
            Work::Failed(e) => {
                let first = failure_line(e);
                let next = if self.verb == Verb::Provision {
                    format!(
                        "{}, then provision another slot number (a slot is never re-provisioned in place)",
                        next_step::command("cleanup", self.slot, &self.fs.state_dir)
                    )
                } else {
                    format!(
                        "run {} again (or see {})",
                        next_step::command(verb, self.slot, &self.fs.state_dir),
                        next_step::command("status", self.slot, &self.fs.state_dir)
                    )
                };
                (format!("the {verb} itself had failed: {first}"), next)
            }
        }
    }

    /// The fix each kind of refusal among the unwritten files calls for, each once
    /// ([`WriteFault::fix`]: derived from the errno, never assumed to be space).
    fn fixes(&self) -> String {
        let mut faults: Vec<WriteFault> = self.unwritten.iter().map(|u| u.fault).collect();
        faults.sort();
        faults.dedup();
        faults
            .iter()
            .map(|f| f.fix(self.fs.where_to_free(), self.ev))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The error's message (one paragraph). A verb whose work failed says that failure first
    /// (the runtime's own error, a gate's detail), then that its evidence is incomplete too.
    pub fn message(&self) -> String {
        let (work, next) = self.work_and_next();
        let marker = match &self.marker {
            Ok(()) => format!("{}/{INCOMPLETE_FILE} says so", self.ev.display()),
            Err(why) => format!(
                "{}/{INCOMPLETE_FILE} could not be written in full, it may be empty: {why}",
                self.ev.display()
            ),
        };
        let files = format!(
            "{} file(s) could not be written: {} ({marker}); {}",
            self.unwritten.len(),
            self.files(),
            self.fs.sentence(),
        );
        let fix = format!("fix: {}, then {next}", self.fixes());
        match &self.work {
            Work::Failed(e) => format!(
                "the {} failed: {}; its evidence is incomplete too: {files}; {fix}",
                self.verb.as_str(),
                failure_line(e)
            ),
            Work::Succeeded(..) => format!(
                "the evidence of this {} is incomplete: {files}; {work}; {fix}",
                self.verb.as_str(),
            ),
        }
    }

    /// The journal `end` entry's detail: the files not written (names only), whether
    /// `verb.json` was written — if not, why, and that the entry records no sha256 of it — and
    /// what the verb's work came to (its first line).
    pub fn journal_detail(&self) -> String {
        let names: Vec<&str> = self.unwritten.iter().map(|u| u.file.as_str()).collect();
        let verb_json = match self.unwritten.iter().find(|u| u.file == vrec::VERB_FILE) {
            Some(u) => format!(
                "{} could not be written ({}), so this entry records no sha256 of it",
                vrec::VERB_FILE,
                u.why
            ),
            None => format!("{} was written", vrec::VERB_FILE),
        };
        let (work, _) = self.work_and_next();
        format!(
            "the evidence of this {} is incomplete: not written: {}; {verb_json}; {work}",
            self.verb.as_str(),
            names.join(", ")
        )
    }

    /// The text appended to the folder's `incomplete.txt` (one line per file not written).
    pub fn note(&self) -> String {
        let (work, next) = self.work_and_next();
        let mut t = format!(
            "{} {} of slot {} (pid {}) could not write all of its evidence into this folder ({}): what this folder lacks proves nothing\n",
            next_step::COMMAND,
            self.verb.as_str(),
            self.slot,
            std::process::id(),
            crate::evidence::now_rfc3339()
        );
        for u in self.unwritten {
            t.push_str(&crate::evidence::dir::not_written_line(&u.file, &u.why));
        }
        t.push_str(&format!(
            "{}\n{work}\nfix: {}, then {next}\n",
            self.fs.sentence(),
            self.fixes()
        ));
        t
    }
}

/// The first line of a failed verb's error without its `slot N: ` (the verb's error says it
/// once): the runtime's own error, a gate's detail.
fn failure_line(e: &SlotError) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    first
        .strip_prefix(&format!("slot {}: ", e.slot))
        .unwrap_or(first)
        .to_string()
}

/// The verb's error for [`Incomplete`] `i` (exit 2, gate `evidence`), keeping a failed verb's
/// network diff and typed cause (its CRIU reason).
pub(crate) fn evidence_error(raw_slot: &str, i: &Incomplete) -> SlotError {
    let mut e = SlotError::evidence_incomplete(raw_slot, i.message());
    if let Work::Failed(f) = &i.work {
        e.diff = f.diff.clone();
        e.source = f.source.clone();
    }
    e
}
