//! A slot verb's writes of its own record, checked: every file of its evidence folder
//! (`evidence/NNNN-verb/`), its journal entries and its last `state.json` update. A write that
//! fails (a full disk, a quota, a read-only remount) is collected here ([`Unwritten`]: the file
//! and the I/O error) instead of being dropped, and the verb's end ([`super::verb_end`]) turns
//! any into a failed verb ([`super::incomplete_evidence::evidence_error`], exit 2 as docs/REFERENCE.md's table has it for "an evidence
//! folder netprobe cannot write into"): the error ([`super::incomplete_evidence::Incomplete::message`]) names each file not
//! written, the state directory's filesystem ([`StateFs`]) and the fix, `verb.json` says so
//! when it can still be written, the folder keeps `incomplete.txt`
//! ([`super::incomplete_evidence::Incomplete::note`]) when any byte can be written, and the journal's `end`
//! ([`super::incomplete_evidence::Incomplete::journal_detail`]) records a `verb.json` sha256 only for a `verb.json` that
//! was written.
//!
//! What the verb did stays as it did it: a verb whose work succeeded (a restore whose container
//! runs and whose gates passed) keeps the phase it recorded in `state.json` — the error says the
//! work succeeded and points to `slot status` — and a verb that failed keeps its own failure in
//! the error's text (and its network diff and CRIU reason in their fields).

use crate::evidence::EvidenceError;
use crate::ns::mountinfo::MountedFs;
use crate::slot::Verb;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What refused a write, as far as the fix depends on it: the fix is derived from this and
/// nothing else ([`WriteFault::fix`]), so a full disk is never blamed for another errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum WriteFault {
    /// ENOSPC: the filesystem is full.
    NoSpace,
    /// EDQUOT: a disk quota refuses the write.
    Quota,
    /// EROFS: the filesystem is mounted read-only.
    ReadOnly,
    /// EACCES, EPERM: no write permission.
    Permission,
    /// EEXIST: a file or folder of that name is already there (evidence is never
    /// overwritten). Not a matter of space: each verb writes each name once
    /// ([`super::verb_run::VerbRun::ev_write`] qualifies a second write of a name), so something
    /// else put it there.
    Exists,
    /// Another OS error (the `errno`: EIO, ENOTDIR, …).
    Errno(i32),
    /// Not an OS error (the file's own text says what).
    Other,
}

impl WriteFault {
    /// The fault of OS error `e`.
    pub fn of_io(e: &std::io::Error) -> WriteFault {
        match e.raw_os_error() {
            Some(libc::ENOSPC) => WriteFault::NoSpace,
            Some(libc::EDQUOT) => WriteFault::Quota,
            Some(libc::EROFS) => WriteFault::ReadOnly,
            Some(libc::EACCES | libc::EPERM) => WriteFault::Permission,
            Some(libc::EEXIST) => WriteFault::Exists,
            Some(n) => WriteFault::Errno(n),
            None if e.kind() == std::io::ErrorKind::AlreadyExists => WriteFault::Exists,
            None => WriteFault::Other,
        }
    }

    /// The fix for this fault: `at` is the mount point to free or remount (or the folder when
    /// the mount table names none), `dir` the folder the write went into.
    pub fn fix(self, at: &Path, dir: &Path) -> String {
        let (at, dir) = (at.display(), dir.display());
        match self {
            WriteFault::NoSpace => format!("free space in {at} (the filesystem is full: ENOSPC)"),
            WriteFault::Quota => {
                format!(
                    "raise the quota that refuses the write on {at}, or free space under it (EDQUOT)"
                )
            }
            WriteFault::ReadOnly => format!("remount {at} read-write (EROFS)"),
            WriteFault::Permission => format!(
                "give uid {} write permission on {dir} (EACCES/EPERM)",
                nix::unistd::geteuid()
            ),
            WriteFault::Exists => format!(
                "nothing to free: a file or folder of that name was already in {dir} (EEXIST), put there by something other than this verb, which writes each name once — move it away, and report it to netprobe's developers with the folder if nobody else writes there"
            ),
            WriteFault::Errno(n) => format!(
                "lift what refuses the write on {at} ({})",
                nix::errno::Errno::from_raw(n)
            ),
            WriteFault::Other => "see why each file above was not written".to_string(),
        }
    }
}

/// A file a verb could not write, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unwritten {
    /// What was not written: a path relative to the verb's evidence folder (`gates.json`,
    /// `runtime.log`), or the slot's own `journal.jsonl` / `state.json`, named so.
    pub file: String,
    /// Why: what was being done and the OS error, e.g. `write: No space left on device (os
    /// error 28)`.
    pub why: String,
    /// What refused it, for the fix.
    pub fault: WriteFault,
}

impl Unwritten {
    /// `file` not written because of evidence error `e` (its I/O error when it is one: the
    /// temporary file's name in it says nothing the file name does not).
    pub fn of(file: &str, e: &EvidenceError) -> Unwritten {
        let (why, fault) = match e {
            EvidenceError::Io { action, source, .. } => {
                (format!("{action}: {source}"), WriteFault::of_io(source))
            }
            EvidenceError::Exists(_) => (
                "a file or folder of that name is already there (evidence is never overwritten)"
                    .into(),
                WriteFault::Exists,
            ),
            e => (e.to_string(), WriteFault::Other),
        };
        Unwritten {
            file: file.to_string(),
            why,
            fault,
        }
    }

    /// `file` not written: its contents could not be encoded as JSON (`e`).
    pub fn encode(file: &str, e: &serde_json::Error) -> Unwritten {
        Unwritten {
            file: file.to_string(),
            why: format!("encode as JSON: {e}"),
            fault: WriteFault::Other,
        }
    }

    /// `file` not written: `action` failed with `e`.
    pub fn io(file: &str, action: &str, e: &std::io::Error) -> Unwritten {
        Unwritten {
            file: file.to_string(),
            why: format!("{action}: {e}"),
            fault: WriteFault::of_io(e),
        }
    }
}

/// The files a verb could not write so far, in the order they failed, each once; shared with
/// the threads that write evidence beside the verb ([`super::verb_run::VerbRun::ev_make_beside`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct UnwrittenLog(Arc<Mutex<Vec<Unwritten>>>);

impl UnwrittenLog {
    /// Records `u` (a file already recorded keeps its first failure).
    pub fn push(&self, u: Unwritten) {
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if !v.iter().any(|w| w.file == u.file) {
            v.push(u);
        }
    }

    /// What was recorded so far.
    pub fn list(&self) -> Vec<Unwritten> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The filesystem holding the state directory, for the error and `incomplete.txt`: where it
/// is mounted, its type and source ([`crate::ns::mountinfo::filesystem_of`]) and the bytes
/// free on it (`statvfs`: available to unprivileged writers × fragment size); and the evidence
/// folder's, when that is another one (a filesystem mounted inside the state directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StateFs {
    /// The state directory.
    pub state_dir: PathBuf,
    /// Its filesystem, when the mount table names it.
    pub mounted: Option<MountedFs>,
    /// Bytes free on it, when `statvfs` answers.
    pub free_bytes: Option<u64>,
    /// The evidence folder, its filesystem and the bytes free on it, when that filesystem is
    /// not the state directory's.
    pub evidence: Option<(PathBuf, MountedFs, Option<u64>)>,
}

/// Bytes free on the filesystem holding `p`, when `statvfs` answers.
fn free_bytes(p: &Path) -> Option<u64> {
    nix::sys::statvfs::statvfs(p)
        .ok()
        .map(|s| s.blocks_available().saturating_mul(s.fragment_size()))
}

/// `WHAT P is on the tmpfs filesystem S mounted at M (N bytes free now)`.
fn on(what: &str, path: &Path, mounted: Option<&MountedFs>, free: Option<u64>) -> String {
    let free = free
        .map(|b| format!(" ({b} bytes free now)"))
        .unwrap_or_default();
    match mounted {
        Some(m) => format!(
            "{what} {} is on the {} filesystem {} mounted at {}{free}",
            path.display(),
            m.fstype,
            m.source,
            m.mount_point.display()
        ),
        None => format!(
            "{what} {} is on a filesystem /proc/self/mountinfo does not name{free}",
            path.display()
        ),
    }
}

impl StateFs {
    /// The filesystems of `state_dir` and of evidence folder `ev` now.
    pub fn of(state_dir: &Path, ev: Option<&Path>) -> StateFs {
        let mounted = crate::ns::mountinfo::filesystem_of(state_dir);
        let evidence = ev.and_then(|ev| {
            let m = crate::ns::mountinfo::filesystem_of(ev)?;
            let other = mounted
                .as_ref()
                .is_none_or(|s| s.mount_point != m.mount_point);
            other.then(|| (ev.to_path_buf(), m, free_bytes(ev)))
        });
        StateFs {
            state_dir: state_dir.to_path_buf(),
            mounted,
            free_bytes: free_bytes(state_dir),
            evidence,
        }
    }

    /// Where to free space: the evidence folder's mount point when it is its own, else the
    /// state directory's, else the state directory itself.
    pub(super) fn where_to_free(&self) -> &Path {
        match (&self.evidence, &self.mounted) {
            (Some((_, m, _)), _) | (None, Some(m)) => m.mount_point.as_path(),
            (None, None) => self.state_dir.as_path(),
        }
    }

    /// `the state directory D is on the tmpfs filesystem S mounted at M (N bytes free now)`,
    /// and the evidence folder's the same way when it is another.
    pub(super) fn sentence(&self) -> String {
        let mut s = on(
            "the state directory",
            &self.state_dir,
            self.mounted.as_ref(),
            self.free_bytes,
        );
        if let Some((ev, m, free)) = &self.evidence {
            s.push_str(&format!(
                "; {}",
                on("the evidence folder", ev, Some(m), *free)
            ));
        }
        s
    }
}

/// The message of an evidence folder `d` of slot folder `slot_root` that could not be created
/// (`e`) before verb `verb` ran any of its steps: the state directory's filesystem and the fix
/// (run it again; for a provision, whose slot folder is made first and never provisioned in
/// place, move that folder away first).
pub(crate) fn folder_message(
    verb: Verb,
    slot_root: &Path,
    d: &Path,
    e: &std::io::Error,
    fs: &StateFs,
) -> String {
    let again = match verb {
        Verb::Provision => format!(
            "move {} away (it holds no state yet: nothing runs) and provision again",
            slot_root.display()
        ),
        _ => "run it again".to_string(),
    };
    let parent = d.parent().unwrap_or(d);
    format!(
        "cannot create the evidence folder {}: {e}; the {} stopped before any of its steps (every verb writes its evidence there first); {}; fix: {}, then {again}",
        d.display(),
        verb.as_str(),
        fs.sentence(),
        WriteFault::of_io(e).fix(fs.where_to_free(), parent)
    )
}

/// The `state-dir` gate's words for a state directory that refused the slot folder or its
/// marker with `e` — a read-only filesystem (EROFS), a full disk or quota (ENOSPC, EDQUOT), no
/// write permission (EACCES, EPERM) —: the filesystem (where it is mounted, its type, the bytes
/// free) and the fix. `None` for any other error (a step that could not run).
pub(crate) fn state_dir_refused(state_dir: &Path, e: &std::io::Error) -> Option<String> {
    let fs = StateFs::of(state_dir, None);
    let at = fs.where_to_free().display();
    let fix = match e.raw_os_error()? {
        libc::EROFS => format!(
            "remount {at} read-write, or give --state-dir a folder on a writable filesystem"
        ),
        libc::ENOSPC | libc::EDQUOT => {
            format!("free space in {at} (or raise the quota that refuses the write)")
        }
        libc::EACCES | libc::EPERM => format!(
            "give uid {} write permission on {}",
            nix::unistd::geteuid(),
            // A state directory not made yet: the folder it is to be made in.
            match state_dir.exists() {
                true => state_dir,
                false => state_dir.parent().unwrap_or(state_dir),
            }
            .display()
        ),
        _ => return None,
    };
    Some(format!("{}; fix: {fix}", fs.sentence()))
}

#[cfg(test)]
#[path = "evidence_writes_tests.rs"]
mod tests;
