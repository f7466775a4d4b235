//! The slot journal (`DIR/slot-N/journal.jsonl`): append-only, one JSON object per line
//! ([`JournalEntry`]: time, pid, verb, event, ok, detail); appends are whole lines or undone,
//! reads skip what cannot be parsed and [`journal_bad_lines`] names it.

use serde::{Deserialize, Serialize};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The `event` of a journal entry, written as its name (`start`, `step`, `end`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum JournalEvent {
    /// A verb started (`start`; the detail names its evidence folder).
    Start,
    /// A step of a verb (`step`).
    Step,
    /// A gate failed (`gate-failed`).
    GateFailed,
    /// A verb ended (`end`; with its evidence folder and `verb.json`'s sha256).
    End,
    /// An evidence folder was pruned (`pruned`, [`super::prune`]).
    Pruned,
    /// The evidence prune after a verb failed (`prune-failed`).
    PruneFailed,
    /// A name netprobe does not write (an edited journal), kept as read.
    Other(String),
}

impl JournalEvent {
    /// The name written in the journal.
    pub fn as_str(&self) -> &str {
        match self {
            JournalEvent::Start => "start",
            JournalEvent::Step => "step",
            JournalEvent::GateFailed => "gate-failed",
            JournalEvent::End => "end",
            JournalEvent::Pruned => "pruned",
            JournalEvent::PruneFailed => "prune-failed",
            JournalEvent::Other(s) => s,
        }
    }
}

impl From<String> for JournalEvent {
    fn from(s: String) -> Self {
        match s.as_str() {
            "start" => JournalEvent::Start,
            "step" => JournalEvent::Step,
            "gate-failed" => JournalEvent::GateFailed,
            "end" => JournalEvent::End,
            "pruned" => JournalEvent::Pruned,
            "prune-failed" => JournalEvent::PruneFailed,
            _ => JournalEvent::Other(s),
        }
    }
}

impl From<&str> for JournalEvent {
    fn from(s: &str) -> Self {
        JournalEvent::from(s.to_string())
    }
}

impl From<JournalEvent> for String {
    fn from(e: JournalEvent) -> Self {
        e.as_str().to_string()
    }
}

impl PartialEq<&str> for JournalEvent {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for JournalEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line of the slot journal (`journal.jsonl`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JournalEntry {
    /// RFC 3339 time (UTC, milliseconds).
    pub at: String,
    /// netprobe's pid.
    pub pid: u32,
    /// The verb.
    pub verb: String,
    /// `start`, `step`, `gate-failed`, `end`, `pruned`, `prune-failed`.
    pub event: JournalEvent,
    /// Whether the event is a success.
    pub ok: bool,
    /// Free text (the step name, the failed gate and its detail, the evidence folder).
    pub detail: String,
    /// `end` only: the verb's evidence folder name (`0013-restore`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// `end` only: sha256 (lower-case hex) of the `verb.json` written into that folder just
    /// before, so `netprobe report` can tell an edited `verb.json` from the one the verb wrote;
    /// absent when no `verb.json` could be written (the detail then says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb_sha256: Option<String>,
}

/// Appends one entry to the journal (`O_APPEND`, one `write`, then `fsync`). Errors are
/// returned, never ignored silently by callers that gate on them.
pub fn journal_append(
    path: &Path,
    verb: &str,
    event: impl Into<JournalEvent>,
    ok: bool,
    detail: &str,
) -> std::io::Result<()> {
    let e = JournalEntry {
        at: crate::evidence::now_rfc3339(),
        pid: std::process::id(),
        verb: verb.into(),
        event: event.into(),
        ok,
        detail: detail.into(),
        evidence: None,
        verb_sha256: None,
    };
    journal_append_entry(path, &e)
}

/// Appends `e` to the journal (`O_APPEND`, one `write`, then `fsync`). A write that fails part
/// way (a full disk, a quota) is undone (the file cut back to its length before), so no
/// half entry is left for the next one to be glued to; a journal whose last line was cut by a
/// crash gets a newline first, so the new entry starts its own line.
///
/// Errors: the journal cannot be opened or written (then it is as it was).
pub fn journal_append_entry(path: &Path, e: &JournalEntry) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(e).map_err(std::io::Error::other)?;
    line.push(b'\n');
    // O_NONBLOCK: a FIFO in its place opens at once (and is refused below) instead of blocking.
    // Readable too: its last byte tells whether a crash cut the last line.
    let mut f = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            // What a FIFO without a reader answers to a non-blocking open for writing.
            Some(libc::ENXIO) => std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{} is a FIFO, not a regular file", path.display()),
            ),
            _ => e,
        })?;
    if !f.metadata()?.file_type().is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    let before = f.metadata()?.len();
    if before > 0 {
        let mut last = [0u8; 1];
        if std::os::unix::fs::FileExt::read_at(&f, &mut last, before - 1).is_ok_and(|n| n == 1)
            && last[0] != b'\n'
        {
            line.insert(0, b'\n');
        }
    }
    if let Err(e) = f.write_all(&line).and_then(|()| f.sync_data()) {
        let _ = f.set_len(before);
        return Err(e);
    }
    Ok(())
}

/// The 1-based numbers of the journal's lines that are not journal entries, but an entry cut
/// by a crash while it was written (its JSON ends early: never trusted, never flagged; the next
/// append starts a new line after it): every other line netprobe writes is one whole entry, so
/// these were edited in. An unreadable journal has none.
pub fn journal_bad_lines(path: &Path) -> Vec<usize> {
    let Ok(text) = crate::evidence::read_recorded_text(path) else {
        return Vec::new();
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| match serde_json::from_str::<JournalEntry>(l) {
            Ok(_) => false,
            Err(e) => !(e.is_eof() && l.starts_with('{')),
        })
        .map(|(i, _)| i + 1)
        .collect()
}

/// Reads the journal; malformed lines are skipped (a line cut by a crash is never trusted). Read
/// as a recorded file ([`crate::evidence::read_recorded_text`]: a regular file only, bounded): a
/// journal that is a FIFO, a device or a symlink reads as empty, never as a hang.
pub fn journal_read(path: &Path) -> Vec<JournalEntry> {
    crate::evidence::read_recorded_text(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
