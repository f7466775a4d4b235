//! The one writer of a verb's end record: `timings.json`, `verb.json` and the journal's `end`
//! entry. Used by a verb that finished ([`super::verb_end`]: each write checked, what was not
//! written recorded) and by one a signal interrupted ([`super::interruption`]: each write's
//! outcome said in the note); whichever claims the end first writes it
//! ([`super::verb_record::VerbRecord::claim_end`]).

use super::journal;
use super::verb_record::{self as vrec, Ending, Recorded, VerbDoc};
use crate::evidence::result::Artifact;
use crate::evidence::{EvidenceDir, EvidenceError};
use crate::slot::resources::slot_dir::SlotPaths;
use crate::slot::state::Phase;
use std::path::Path;

/// Whose end is written, and where: the verb, its slot (and so the slot's journal), its start
/// and its evidence folder.
pub(crate) struct EndWriter<'a> {
    /// The verb as written in evidence (`provision`, …).
    pub verb: &'a str,
    /// The slot's paths (its number; its `journal.jsonl`).
    pub paths: &'a SlotPaths,
    /// When the verb started (RFC 3339: `started_at` in `verb.json`).
    pub started_at: &'a str,
    /// The verb's evidence folder (`None`: the verb had none; only the journal's end is
    /// written).
    pub ev: Option<&'a Path>,
}

impl EndWriter<'_> {
    /// Writes `rec`'s timings (milliseconds by step name, pretty JSON) as `name` — `timings.json`
    /// ([`vrec::TIMINGS_FILE`]) or the name the verb claimed for it — into the evidence folder.
    ///
    /// Errors: the folder's open or the write ([`EvidenceError`]; never overwrites).
    pub fn timings(&self, name: &str, rec: &Recorded) -> Result<Artifact, EvidenceError> {
        self.write(name, &vrec::timings_bytes(&rec.timings))
    }

    /// Writes `verb.json` ([`VerbDoc`]) of the verb ended as `ending`, from record `rec` (its
    /// timings holding `total`), the slot's `phase` after it, the `declared` differences and,
    /// for a verb that finished, its folder's `artifacts`. Returns the file's sha256.
    ///
    /// Errors: the folder's open or the write ([`EvidenceError`]; never overwrites).
    pub fn verb_doc(
        &self,
        ending: Ending<'_>,
        rec: &Recorded,
        (phase, declared): (Option<Phase>, &[String]),
        artifacts: Option<&[Artifact]>,
    ) -> Result<String, EvidenceError> {
        let id = (self.verb, self.paths.slot, self.started_at);
        let bytes = VerbDoc::new(id, ending, rec, (phase, declared), artifacts).to_bytes();
        self.write(vrec::VERB_FILE, &bytes).map(|a| a.sha256)
    }

    /// Appends the journal's `end` entry ([`vrec::end_entry`]): `ok`, `detail`, the evidence
    /// folder's name and `verb.json`'s sha256 when there are.
    ///
    /// Errors: the append (I/O).
    pub fn journal_end(
        &self,
        ok: bool,
        detail: &str,
        verb_sha256: Option<String>,
    ) -> std::io::Result<()> {
        let e = vrec::end_entry(self.verb, ok, detail, self.ev, verb_sha256);
        journal::journal_append_entry(&self.paths.journal(), &e)
    }

    /// Writes `bytes` as `name` into the evidence folder.
    fn write(&self, name: &str, bytes: &[u8]) -> Result<Artifact, EvidenceError> {
        let ev = self.ev.ok_or_else(|| EvidenceError::BadPath {
            rel: name.to_string(),
            reason: "the verb has no evidence folder",
        })?;
        EvidenceDir::open(ev).and_then(|d| d.write(name, bytes))
    }
}
