//! A slot verb's end, each write checked ([`VerbRun::write_end`], called by
//! [`VerbRun::finish`](super::verb_run::VerbRun::finish)): `gates.json`, `timings.json`, the folder
//! listed and hashed for `verb.json`'s `artifacts`, `verb.json`, the journal's `end`; when
//! anything of the verb's own record was not written ([`super::evidence_writes`]), the folder's
//! `incomplete.txt` ([`mark_incomplete`]) and the verb's outcome become
//! [`evidence_error`]: exit 2, the journal's `end` not ok and with `verb.json`'s sha256 only
//! for a `verb.json` that was written.

use super::end_writer::EndWriter;
use super::verb_run::{VerbResult, VerbRun};
use crate::evidence::EvidenceDir;
use crate::evidence::dir::INCOMPLETE_FILE;
use crate::evidence::enclosing::SLOT_VERB_UNLISTED;
use crate::slot::error::SlotError;
use crate::slot::record::evidence_writes::{StateFs, Unwritten};
use crate::slot::record::incomplete_evidence::{Incomplete, NoteWriteError, Work, evidence_error};
use crate::slot::record::verb_record::{self as vrec, Ending, Recorded};
use crate::slot::state::SlotState;
use std::path::Path;

impl VerbRun<'_> {
    /// The verb's end evidence in `ev`, each write checked (see the module docs): `gates.json`
    /// and `timings.json` from `rec`; the folder listed and hashed (every file but
    /// [`SLOT_VERB_UNLISTED`]: `verb.json`'s `artifacts`); when anything of the verb's record
    /// was not written, `incomplete.txt` and [`evidence_error`] as the outcome `verb.json`
    /// records; `verb.json`; the journal's `end` — ok only when all was written, `verb.json`'s
    /// sha256 only when it was (else the detail says why not). Returns `res`, or the evidence
    /// error when anything was not written (also the journal's end itself).
    pub(in crate::slot) fn write_end(
        &self,
        ev: &Path,
        res: VerbResult,
        rec: &Recorded,
        st: Option<&SlotState>,
        declared: &[String],
    ) -> VerbResult {
        self.ev_write_json(vrec::GATES_FILE, &rec.gates.gates);
        let writer = self.end_writer(Some(ev));
        let timings = self.rec.claim_name(vrec::TIMINGS_FILE);
        if let Err(e) = writer.timings(&timings, rec) {
            self.unwritten.push(e.unwritten(&timings));
        }
        let artifacts = EvidenceDir::open(ev)
            .and_then(|d| d.inventory_except(&SLOT_VERB_UNLISTED))
            .unwrap_or_else(|e| {
                let what = format!("{} (its artifact list)", vrec::VERB_FILE);
                self.unwritten.push(Unwritten::of(&what, &e));
                Vec::new()
            });
        let mut end = EndNotes::new(self, ev);
        let before = end.note(&res);
        let ending = match (&before, &res) {
            (Some(e), _) | (None, Err(e)) => Ending::Failed(e),
            (None, Ok((summary, _))) => Ending::Succeeded(summary),
        };
        let after = vrec::VerbAfter {
            phase: st.map(|s| s.phase),
            declared,
        };
        let sha = match writer.verb_doc(ending, rec, after, Some(&artifacts)) {
            Ok(sha) => Some(sha),
            Err(e) => {
                self.unwritten.push(e.unwritten(vrec::VERB_FILE));
                None
            }
        };
        end.note(&res);
        let (ok, detail) = end.journal_detail(&res);
        if let Err(e) = self.journal_end(ok, &detail, sha) {
            let file = self.paths.journal().display().to_string();
            self.unwritten
                .push(Unwritten::io(&file, "append of the `end` entry", &e));
            end.note(&res);
        }
        end.outcome(res)
    }

    /// The end writer of this verb, its evidence folder `ev` (`None`: it has none).
    fn end_writer<'w>(&'w self, ev: Option<&'w Path>) -> EndWriter<'w> {
        EndWriter {
            verb: self.verb(),
            paths: &self.paths,
            started_at: &self.started_at,
            ev,
        }
    }

    /// Appends the journal's `end` entry (only while the lock is held), naming the evidence
    /// folder and `verb.json`'s sha256 when it was written.
    ///
    /// Errors: the append ([`crate::slot::record::journal::journal_append_entry`]: undone when it fails).
    pub(in crate::slot) fn journal_end(
        &self,
        ok: bool,
        detail: &str,
        verb_sha256: Option<String>,
    ) -> std::io::Result<()> {
        if self.lock.is_none() {
            return Ok(());
        }
        self.end_writer(self.ev.as_deref())
            .journal_end(ok, detail, verb_sha256)
    }
}

/// What a verb's end has put into its `incomplete.txt` so far, and the state directory's
/// filesystem (read once, when something was not written).
struct EndNotes<'r, 'a> {
    run: &'r VerbRun<'a>,
    ev: &'r Path,
    fs: Option<StateFs>,
    /// How many of [`VerbRun::unwritten`] the note names.
    noted: usize,
    /// The note's first failure.
    marker: Result<(), NoteWriteError>,
}

impl<'r, 'a> EndNotes<'r, 'a> {
    fn new(run: &'r VerbRun<'a>, ev: &'r Path) -> Self {
        EndNotes {
            run,
            ev,
            fs: None,
            noted: 0,
            marker: Ok(()),
        }
    }

    /// The [`Incomplete`] of `unwritten` for the verb whose steps came to `res`.
    fn incomplete<'x>(
        &'x self,
        unwritten: &'x [Unwritten],
        fs: &'x StateFs,
        res: &'x VerbResult,
    ) -> Incomplete<'x> {
        Incomplete {
            verb: self.run.args.verb,
            slot: self.run.paths.slot,
            ev: self.ev,
            unwritten,
            fs,
            work: match res {
                Ok((summary, st)) => Work::Succeeded(summary, st.as_ref().map(|s| s.phase)),
                Err(e) => Work::Failed(e),
            },
            marker: self.marker.clone(),
        }
    }

    /// Brings `incomplete.txt` up to date with what was not written (the whole note the first
    /// time, a line per file after); the evidence error so far, `None` when all was written.
    fn note(&mut self, res: &VerbResult) -> Option<SlotError> {
        let all = self.run.unwritten.list();
        if all.is_empty() {
            return None;
        }
        let fs = self
            .fs
            .get_or_insert_with(|| StateFs::of(&self.run.paths.state_dir, Some(self.ev)))
            .clone();
        if all.len() > self.noted {
            let text = if self.noted == 0 {
                self.incomplete(&all, &fs, res).note()
            } else {
                all[self.noted..]
                    .iter()
                    .map(|u| crate::evidence::dir::not_written_line(&u.file, &u.why))
                    .collect()
            };
            let wrote =
                mark_incomplete(self.ev, &text).map_err(|e| NoteWriteError::new("append", e));
            if self.marker.is_ok() {
                self.marker = wrote;
            }
            self.noted = all.len();
        }
        Some(evidence_error(
            &self.run.raw,
            &self.incomplete(&all, &fs, res),
        ))
    }

    /// The journal's `end`: ok and the summary, or not ok and the error; with anything not
    /// written, a short line naming the files and whether `verb.json` was written.
    fn journal_detail(&self, res: &VerbResult) -> (bool, String) {
        let all = self.run.unwritten.list();
        match (all.is_empty(), res) {
            (true, Ok((s, _))) => (true, s.clone()),
            (true, Err(e)) => (false, e.to_string()),
            (false, _) => {
                let fs = (self.fs.clone())
                    .unwrap_or_else(|| StateFs::of(&self.run.paths.state_dir, Some(self.ev)));
                (false, self.incomplete(&all, &fs, res).journal_detail())
            }
        }
    }

    /// `res` when all was written, else the evidence error naming everything not written.
    fn outcome(mut self, res: VerbResult) -> VerbResult {
        match self.note(&res) {
            None => res,
            Some(e) => Err(e),
        }
    }
}

/// Appends `text` to `ev/incomplete.txt`, creating it when missing: never truncated or
/// replaced (`O_APPEND`, not through a symlink), so a full disk that takes no byte still
/// leaves the (empty) marker when a new file can be made at all.
///
/// Errors: the open or the write (named by the caller).
pub(crate) fn mark_incomplete(ev: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(ev.join(INCOMPLETE_FILE))?;
    f.write_all(text.as_bytes())
}

#[cfg(test)]
#[path = "verb_end_tests.rs"]
mod tests;
