//! The one writer of a verb's end record: `timings.json`, `verb.json` and the journal's `end`
//! entry. Used by a verb that finished ([`super::verb_end`]: each write checked, what was not
//! written recorded) and by one a signal interrupted ([`super::interruption`]: each write's
//! outcome said in the note); whichever claims the end first writes it
//! ([`crate::slot::record::verb_record::VerbRecord::claim_end`]).

use crate::evidence::result::Artifact;
use crate::evidence::{EvidenceDir, EvidenceError};
use crate::slot::record::evidence_writes::Unwritten;
use crate::slot::record::journal;
use crate::slot::record::verb_record::{self as vrec, Ending, Recorded, VerbDoc};
use crate::slot::resources::slot_dir::SlotPaths;
use std::path::Path;

/// Why an end file was not written: its JSON could not be encoded, or the write failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EndWriteError {
    /// The document could not be encoded as JSON.
    #[error("encode as JSON: {0}")]
    Encode(#[source] serde_json::Error),
    /// The folder's open or the write failed (never overwrites).
    #[error(transparent)]
    Write(#[from] EvidenceError),
}

impl EndWriteError {
    /// The verb's record of `file` not written for this reason.
    pub(crate) fn unwritten(&self, file: &str) -> Unwritten {
        match self {
            EndWriteError::Encode(e) => Unwritten::encode(file, e),
            EndWriteError::Write(e) => Unwritten::of(file, e),
        }
    }
}

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
    /// Errors: [`EndWriteError`] when the timings cannot be encoded, or the folder's open or
    /// the write fails (never overwrites).
    pub fn timings(&self, name: &str, rec: &Recorded) -> Result<Artifact, EndWriteError> {
        let bytes = vrec::timings_bytes(&rec.timings).map_err(EndWriteError::Encode)?;
        Ok(self.write(name, &bytes)?)
    }

    /// Writes `verb.json` ([`VerbDoc`]) of the verb ended as `ending`, from record `rec` (its
    /// timings holding `total`), the slot's phase and the declared differences `after` it and,
    /// for a verb that finished, its folder's `artifacts`. Returns the file's sha256.
    ///
    /// Errors: [`EndWriteError`] when the document cannot be encoded, or the folder's open or
    /// the write fails (never overwrites).
    pub fn verb_doc(
        &self,
        ending: Ending<'_>,
        rec: &Recorded,
        after: vrec::VerbAfter<'_>,
        artifacts: Option<&[Artifact]>,
    ) -> Result<String, EndWriteError> {
        let id = vrec::VerbId {
            verb: self.verb,
            slot: self.paths.slot,
            started_at: self.started_at,
        };
        let bytes = VerbDoc::new(id, ending, rec, after, artifacts)
            .to_bytes()
            .map_err(EndWriteError::Encode)?;
        Ok(self.write(vrec::VERB_FILE, &bytes).map(|a| a.sha256)?)
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
