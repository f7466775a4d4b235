//! `slot prune --slot N --state-dir DIR --keep K`: retention of a slot's evidence.
//! Removes the oldest verb folders (`evidence/NNNN-verb`) beyond the `K` newest, never the
//! provision's, the last snapshot's that succeeded, a folder whose files a kept folder refers
//! to (`.ref`, [`crate::evidence::reference`]), nor — unless `--include-failed` — a failed or
//! interrupted verb's (or one the journal holds no end of). The slot profile's `[evidence]
//! keep = N` runs the same after each verb that succeeded ([`prune_locked`], [`PruneCause`]). Before each folder goes, the
//! journal gets an entry (`verb` `prune`, `event` `pruned`, `evidence` the folder,
//! `verb_sha256` its `verb.json`'s sha256, `detail` why); `netprobe report` then lists the
//! verb as "pruned (hash recorded)". A folder whose `verb.json` no longer has the sha256 the
//! journal recorded at its end is kept and named (evidence that does not match is not
//! destroyed). The slot's ownership marker is proven and its lock taken first: a prune while a
//! verb holds the lock is refused naming the holder, nothing removed.
//!
//! A folder is first renamed to `evidence/.pruned-NNNN-verb` (one `rename`: the report never
//! sees half a folder), the journal entry appended (durable), then the folder removed.

use crate::exit::ExitClass;
use crate::slot::JournalEvent;
use crate::slot::record::journal::{self, JournalEntry};
use crate::slot::resources::slot_dir::{self, SlotPaths};
use crate::slot::resources::slot_lock::SlotLock;
use crate::slot::resources::state_dir::{self, StateDirUse};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};

/// The journal `event` of a pruned verb folder.
pub const PRUNED_EVENT: JournalEvent = JournalEvent::Pruned;

/// Errors of `slot prune`; nothing is removed when one is returned before the first removal.
#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    /// `--keep` is not a whole number of at least 1.
    #[error(
        "--keep {raw:?}: {why}; give the number of verb folders to keep, a whole number of at least 1 (e.g. --keep 20); nothing removed"
    )]
    Keep {
        /// The value as typed.
        raw: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The slot or its state directory is not one netprobe made (or the number is malformed).
    #[error("slot {slot}: {detail}; nothing removed")]
    Slot {
        /// The slot number as typed.
        slot: String,
        /// Why (the ownership marker's or state directory's check).
        detail: String,
    },
    /// Another process holds the slot lock (a verb runs).
    #[error("slot {slot}: prune refused, nothing removed: {held}")]
    Locked {
        /// The slot number as typed.
        slot: String,
        /// The lock's holder, as the lock names it.
        held: String,
    },
    /// A folder could not be listed, renamed or removed, or the journal not appended.
    #[error("slot {slot}: {action} {}: {source}", .path.display())]
    Io {
        /// The slot number as typed.
        slot: String,
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl PruneError {
    /// Exit class: usage (2) for bad input, a slot that is not netprobe's and a held lock; could
    /// not run (4) for I/O.
    pub fn exit_class(&self) -> ExitClass {
        match self {
            PruneError::Io { .. } => ExitClass::CouldNotRun,
            _ => ExitClass::Usage,
        }
    }
}

/// Parses `--keep`: a whole number of at least 1 (`0`, a sign, anything else refused).
///
/// Errors: [`PruneError::Keep`].
pub fn parse_keep(raw: &str) -> Result<NonZeroU32, PruneError> {
    let bad = |why| PruneError::Keep {
        raw: raw.to_string(),
        why,
    };
    if raw.starts_with('-') {
        return Err(bad("a negative number"));
    }
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("not a whole number"));
    }
    let n: u32 = raw.parse().map_err(|_| bad("too large"))?;
    NonZeroU32::new(n).ok_or_else(|| bad("0 would remove every verb folder"))
}

/// One verb folder removed (or kept for a reason a prune reports).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PrunedFolder {
    /// The folder's name (`0004-reset`).
    pub folder: String,
    /// sha256 of its `verb.json` as recorded (`None`: it had none).
    pub verb_sha256: Option<String>,
    /// Why it was removed (or kept).
    pub why: String,
}

/// What a prune did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PruneOutcome {
    /// The folders removed, oldest first.
    pub removed: Vec<PrunedFolder>,
    /// Folders beyond `keep` kept anyway, and why (protected, or not matching the journal).
    pub kept_beyond: Vec<PrunedFolder>,
    /// How many verb folders remain.
    pub remaining: usize,
}

/// What the journal says of one folder: its `end` (ok, verb.json sha256), if any.
struct Ended {
    ok: bool,
    sha: Option<String>,
}

fn ended(journal: &[JournalEntry], name: &str) -> Option<Ended> {
    journal
        .iter()
        .rev()
        .find(|e| e.event == JournalEvent::End && e.evidence.as_deref() == Some(name))
        .map(|e| Ended {
            ok: e.ok,
            sha: e.verb_sha256.clone(),
        })
}

/// The verb folders (`NNNN-verb`) of `evidence`, oldest first.
pub(crate) fn verb_folders(evidence: &Path) -> std::io::Result<Vec<String>> {
    let mut v: Vec<String> = std::fs::read_dir(evidence)?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.split_once('-')
                .is_some_and(|(s, _)| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    v.sort();
    Ok(v)
}

/// Why folder `name` is kept whatever `keep` says (`None`: it may be removed).
/// `last_snapshot`: the newest snapshot folder that ended ok.
fn protected(
    name: &str,
    end: Option<&Ended>,
    last_snapshot: Option<&str>,
    include_failed: bool,
) -> Option<&'static str> {
    let verb = name.split_once('-').map_or("", |(_, v)| v);
    if verb == "provision" {
        return Some("the provision's folder is always kept");
    }
    if Some(name) == last_snapshot {
        return Some("the last snapshot's folder is always kept");
    }
    match end {
        _ if include_failed => None,
        None => Some(
            "the journal records no end of this verb (interrupted or still running): kept unless --include-failed",
        ),
        Some(e) if !e.ok => Some("a failed verb's folder: kept unless --include-failed"),
        Some(_) => None,
    }
}

/// Why a prune runs: `slot prune --keep N`, or the slot profile's `[evidence] keep = N` after
/// a verb that succeeded (its folder named).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PruneCause<'a> {
    /// `slot prune --keep N`.
    Command,
    /// The profile's `[evidence] keep`, after the verb whose folder is named (`0051-reset`).
    Profile {
        /// The folder of the verb that just succeeded.
        after: &'a str,
    },
}

impl PruneCause<'_> {
    /// The words of the limit: `--keep 5`, or `[evidence] keep = 5 of the slot's profile`.
    fn limit(&self, keep: usize) -> String {
        match self {
            PruneCause::Command => format!("--keep {keep}"),
            PruneCause::Profile { after } => {
                format!("[evidence] keep = {keep} of the slot's profile (after {after})")
            }
        }
    }
}

/// Prunes slot `raw_slot` of `state_dir` to the `keep` newest verb folders (see the module
/// docs); `include_failed` lets failed and interrupted verbs' folders go too.
///
/// Errors: [`PruneError`] (nothing removed unless [`PruneError::Io`] came after a removal).
pub fn prune(
    state_dir: &Path,
    raw_slot: &str,
    keep: NonZeroU32,
    include_failed: bool,
) -> Result<PruneOutcome, PruneError> {
    let slot_err = |detail: String| PruneError::Slot {
        slot: raw_slot.to_string(),
        detail,
    };
    let n = slot_dir::parse_slot(raw_slot).map_err(|e| slot_err(e.to_string()))?;
    state_dir::check_state_dir(state_dir, StateDirUse::Existing).map_err(slot_err)?;
    let paths = SlotPaths::new(state_dir, n);
    slot_dir::check_owner(&paths).map_err(|(_, d)| slot_err(d))?;
    let _lock = SlotLock::acquire(&paths.lock()).map_err(|held| PruneError::Locked {
        slot: raw_slot.to_string(),
        held: held.to_string(),
    })?;
    prune_locked(&paths, raw_slot, keep, include_failed, PruneCause::Command)
}

/// The folders among `candidates` (may be removed) that a folder which stays refers to
/// ([`crate::evidence::reference`]), each with the first such folder: moved to the kept until
/// none is left (a kept folder's references keep theirs too).
fn referenced(
    evidence: &Path,
    folders: &[String],
    candidates: &mut Vec<String>,
) -> Vec<(String, String)> {
    let refs: Vec<(String, Vec<String>)> = folders
        .iter()
        .map(|f| {
            let to = crate::evidence::reference::referenced_folders(&evidence.join(f));
            (f.clone(), to)
        })
        .collect();
    let mut kept = Vec::new();
    loop {
        let hit = candidates.iter().position(|c| {
            refs.iter()
                .any(|(f, to)| !candidates.contains(f) && to.contains(c))
        });
        let Some(i) = hit else { break };
        let c = candidates.remove(i);
        let by = refs
            .iter()
            .find(|(f, to)| !candidates.contains(f) && to.contains(&c))
            .map(|(f, _)| f.clone())
            .unwrap_or_default();
        kept.push((c, by));
    }
    kept
}

/// [`prune`] with the slot's lock held by the caller (`slot prune` after its checks; a verb's
/// end for the profile's `[evidence] keep`). `cause` gives the words of the journal entries.
///
/// Errors: [`PruneError::Io`] (nothing removed unless it came after a removal).
pub(crate) fn prune_locked(
    paths: &SlotPaths,
    raw_slot: &str,
    keep: NonZeroU32,
    include_failed: bool,
    cause: PruneCause,
) -> Result<PruneOutcome, PruneError> {
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| PruneError::Io {
            slot: raw_slot.to_string(),
            action,
            path,
            source,
        }
    };
    let evidence = paths.evidence();
    let folders = verb_folders(&evidence).map_err(io("list", &evidence))?;
    let journal = journal::journal_read(&paths.journal());
    let last_snapshot = folders
        .iter()
        .rev()
        .find(|n| n.ends_with("-snapshot") && ended(&journal, n).is_some_and(|e| e.ok))
        .cloned();
    let keep = keep.get() as usize;
    let beyond = folders.len().saturating_sub(keep);
    let mut out = PruneOutcome::default();
    let kept_as = |name: &String, why: String| PrunedFolder {
        folder: name.clone(),
        verb_sha256: ended(&journal, name).and_then(|e| e.sha),
        why,
    };
    let mut candidates = Vec::new();
    for name in &folders[..beyond] {
        let end = ended(&journal, name);
        match protected(name, end.as_ref(), last_snapshot.as_deref(), include_failed) {
            Some(why) => out.kept_beyond.push(kept_as(name, why.to_string())),
            None => candidates.push(name.clone()),
        }
    }
    for (name, by) in referenced(&evidence, &folders, &mut candidates) {
        let why = format!(
            "evidence/{by} refers to files stored here (.ref): kept while a kept folder refers to it"
        );
        out.kept_beyond.push(kept_as(&name, why));
    }
    for name in &candidates {
        let end = ended(&journal, name);
        let sha = end.as_ref().and_then(|e| e.sha.clone());
        let dir = evidence.join(name);
        let now = crate::evidence::sha256_recorded(&dir.join("verb.json"))
            .ok()
            .map(|(s, _)| s);
        if sha.is_some() && now != sha {
            out.kept_beyond.push(kept_as(name, format!(
                "its verb.json ({}) no longer has the sha256 the journal recorded at its end: evidence that does not match is kept, not removed",
                now.as_deref().unwrap_or("unreadable")
            )));
            continue;
        }
        let why = format!(
            "beyond {}: {} newer verb folder(s) kept",
            cause.limit(keep),
            folders.len() - beyond
        );
        let staged = evidence.join(format!(".pruned-{name}"));
        std::fs::rename(&dir, &staged).map_err(io("rename", &dir))?;
        let entry = JournalEntry {
            at: crate::evidence::now_rfc3339(),
            pid: std::process::id(),
            verb: "prune".into(),
            event: PRUNED_EVENT,
            ok: true,
            detail: format!(
                "removed evidence/{name} ({}; verb.json sha256 {}): {why}",
                end.as_ref()
                    .map_or("no end recorded", |e| if e.ok { "ok" } else { "failed" }),
                now.as_deref().unwrap_or("none: it had no verb.json")
            ),
            evidence: Some(name.clone()),
            verb_sha256: now.clone(),
        };
        if let Err(e) = journal::journal_append_entry(&paths.journal(), &entry) {
            // Not recorded: the folder goes back, nothing of it removed.
            let _ = std::fs::rename(&staged, &dir);
            return Err(io("append to", &paths.journal())(e));
        }
        std::fs::remove_dir_all(&staged).map_err(io("remove", &staged))?;
        out.removed.push(PrunedFolder {
            folder: name.clone(),
            verb_sha256: now,
            why,
        });
    }
    out.remaining = folders.len() - out.removed.len();
    Ok(out)
}

#[cfg(test)]
#[path = "prune_tests.rs"]
mod tests;
