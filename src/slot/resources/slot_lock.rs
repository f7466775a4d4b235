//! The per-slot exclusive lock (`slot-N/lock`, `flock`): a second verb on a slot is refused,
//! not queued, naming who holds it; a runtime or CRIU the verb starts keeps it while it runs.

use crate::slot::record::evidence_writes;
use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A process other than this one that has a slot lock open (`/proc/PID/fd/*`).
struct LockHolder {
    pid: u32,
    comm: String,
    /// A child of this process that has not exec'd yet (same executable): it inherited the
    /// descriptor at `fork` from another thread of this process and drops it at `exec`
    /// (the descriptor is close-on-exec).
    forking: bool,
    /// A netprobe process (the same executable as this one, or named `netprobe`): a verb.
    netprobe: bool,
}

/// Who holds the slot lock at `path` (the verb and every runtime or CRIU process that inherited
/// its descriptor), in pid order.
fn lock_holders(path: &Path) -> Vec<LockHolder> {
    let me = std::process::id();
    let my_exe = fs::read_link("/proc/self/exe").ok();
    let path = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        if open_on(&e.path(), &path) == 0 {
            continue;
        }
        let status = fs::read_to_string(e.path().join("status")).unwrap_or_default();
        let ppid = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|v| v.trim().parse::<u32>().ok());
        let exe = fs::read_link(e.path().join("exe")).ok();
        let comm = fs::read_to_string(e.path().join("comm"))
            .unwrap_or_default()
            .trim()
            .to_string();
        let named_netprobe = comm == "netprobe";
        let comm = sealed_name(&comm, exe.as_deref()).unwrap_or(comm);
        out.push(LockHolder {
            pid,
            comm,
            forking: ppid == Some(me) && exe.is_some() && exe == my_exe,
            netprobe: named_netprobe || (exe.is_some() && exe == my_exe),
        });
    }
    out.sort_by_key(|h| h.pid);
    out
}

/// The name to show for a process run from one of the slot's sealed copies
/// ([`crate::slot::resources::sealed_binaries`]): it was executed as `/proc/<holder pid>/fd/<n>`, so its `comm` is
/// the descriptor number (`8`) and its `exe` link the memfd (`/memfd:netprobe-runc (deleted)`):
/// `memfd:netprobe-runc (sealed copy, run as fd 8)`. None for any other process.
fn sealed_name(comm: &str, exe: Option<&Path>) -> Option<String> {
    let exe = exe?.to_str()?;
    let memfd = exe.strip_prefix("/memfd:")?;
    let memfd = memfd.strip_suffix(" (deleted)").unwrap_or(memfd);
    (!comm.is_empty() && comm.bytes().all(|b| b.is_ascii_digit()))
        .then(|| format!("memfd:{memfd} (sealed copy, run as fd {comm})"))
}

/// How many descriptors of the process at `proc_dir` (`/proc/PID`) are open on `target`
/// (a canonical path).
fn open_on(proc_dir: &Path, target: &Path) -> usize {
    fs::read_dir(proc_dir.join("fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|fd| fs::read_link(fd.path()).is_ok_and(|t| t == target))
        .count()
}

/// [`lock_holders`], with this process first (as `this netprobe process`) when it has at least
/// `own` descriptors open on the lock (2 inside [`SlotLock::acquire`], which holds one itself).
fn holders(path: &Path, own: usize) -> Vec<LockHolder> {
    let mut out = lock_holders(path);
    let me = fs::canonicalize(path).map(|p| open_on(Path::new("/proc/self"), &p));
    if me.is_ok_and(|n| n >= own) {
        out.insert(
            0,
            LockHolder {
                pid: std::process::id(),
                comm: "this netprobe process".into(),
                forking: false,
                netprobe: true,
            },
        );
    }
    out
}

/// `pid 123 (netprobe), pid 124 (runc)`; empty for none.
fn describe(holders: &[LockHolder]) -> String {
    holders
        .iter()
        .map(|h| format!("pid {} ({})", h.pid, h.comm))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The pids of `holders` when none of them is a netprobe process (a runtime or CRIU task that
/// outlived the verb that started it, e.g. one CRIU forked into its own session before the
/// runtime was killed): empty when a verb holds it, or nobody.
fn orphans(holders: &[LockHolder]) -> Vec<u32> {
    if holders.iter().any(|h| h.netprobe) {
        return Vec::new();
    }
    holders.iter().map(|h| h.pid).collect()
}

/// Who holds a slot lock, from one scan of `/proc` ([`held_by`]).
pub(crate) struct HeldBy {
    /// For a sentence: `pid 123 (netprobe), pid 124 (runc)`, or `another process` when none is
    /// found with it open (it may have just been released).
    pub text: String,
    /// [`orphans`] of the same scan: the holders' pids when none is a netprobe process.
    pub orphans: Vec<u32>,
    /// The sentence for such holders ([`orphan_sentence`]); empty when there are none.
    pub orphan_sentence: String,
}

/// Who holds the slot lock at `path` now ([`HeldBy`], one scan).
pub(crate) fn held_by(path: &Path) -> HeldBy {
    let me = std::process::id();
    let all = holders(path, 1);
    let h: Vec<String> = all
        .iter()
        .map(|h| match h.pid == me {
            true => h.comm.clone(),
            false => format!("pid {} ({})", h.pid, h.comm),
        })
        .collect();
    let orphans = orphans(&all);
    HeldBy {
        text: if h.is_empty() {
            "another process".into()
        } else {
            h.join(", ")
        },
        orphan_sentence: orphan_sentence(&all, &orphans),
        orphans,
    }
}

/// The words for a lock held only by processes that are not netprobe (`orphans`, of
/// `holders`): how long each has run (`/proc/PID/stat` start time), that nothing bounds them
/// any more, and `kill -9` if the same pids still hold it when asked again. Empty for none.
fn orphan_sentence(holders: &[LockHolder], orphans: &[u32]) -> String {
    if orphans.is_empty() {
        return String::new();
    }
    let ages: Vec<String> = orphans
        .iter()
        .map(|p| match running_for_s(*p) {
            Some(s) => format!("pid {p} for {s:.1} s"),
            None => format!("pid {p} for an unknown time"),
        })
        .collect();
    let pids: Vec<String> = orphans.iter().map(u32::to_string).collect();
    format!(
        "held by {} and by no netprobe process: a runtime or CRIU task whose verb was killed, running ({}) with nothing bounding it any more; it may still be finishing that verb's step: run {} again, and if the same pids still hold the lock, stop them (`kill -9 {}`), then run the verb again",
        describe(holders),
        ages.join(", "),
        crate::slot::next_step::bare("status"),
        pids.join(" ")
    )
}

/// How long process `pid` has run, seconds (its start time in `/proc/PID/stat`, field 22, in
/// clock ticks since boot, against `/proc/uptime`); `None` when either cannot be read.
fn running_for_s(pid: u32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let start: f64 = stat
        .rsplit_once(") ")?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()?;
    let uptime: f64 = fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| (uptime - start / hz as f64).max(0.0))
}

/// What [`probe`] saw of a slot lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LockProbe {
    /// Nobody holds it (or the file does not exist yet).
    Free,
    /// Another process holds it (a verb runs, or what a killed verb left).
    Held,
    /// The lock cannot be taken by a verb: why (e.g. the file cannot be opened for writing on a
    /// read-only state directory). Nothing says a verb runs.
    Unusable(String),
}

/// Whether the slot lock at `path` is held, for `slot status`, without taking it for longer
/// than the test: opened read-only (`flock` needs no write access), `LOCK_EX | LOCK_NB` tried
/// and released. A lock a verb could not open for writing (its [`SlotLock::acquire`] opens it
/// read-write) is [`LockProbe::Unusable`] with the reason, not "held".
pub(crate) fn probe(path: &Path) -> LockProbe {
    let ro = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return LockProbe::Free,
        Err(e) => return LockProbe::Unusable(format!("cannot open {}: {e}", path.display())),
    };
    // SAFETY: flock on a valid, owned file descriptor (released when `ro` is closed).
    if unsafe { libc::flock(ro.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return LockProbe::Held;
        }
        return LockProbe::Unusable(format!("flock {}: {err}", path.display()));
    }
    drop(ro);
    match OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(_) => LockProbe::Free,
        Err(e) => LockProbe::Unusable(format!(
            "cannot open {} for writing: {e} (every verb on this slot takes this lock, so each fails at gate slot-lock until the file can be opened for writing)",
            path.display()
        )),
    }
}

/// [`orphans`] among the other processes holding the slot lock at `path`.
#[cfg(test)]
pub(crate) fn orphan_holders(path: &Path) -> Vec<u32> {
    orphans(&lock_holders(path))
}

/// The fix for the slot lock at `path` (`<state dir>/slot-N/lock`) that cannot be opened, after
/// its error: for a read-only mount, missing permissions or a full disk (or quota), the state
/// directory's filesystem and the fix ([`evidence_writes::state_dir_refused`]), then run
/// the verb again; else nothing.
fn open_fix(path: &Path, e: &std::io::Error) -> String {
    let state_dir = path.parent().and_then(Path::parent).unwrap_or(path);
    match evidence_writes::state_dir_refused(state_dir, e) {
        Some(fs) => format!("; the state directory is not writable: {fs}, then run the verb again"),
        None => String::new(),
    }
}

/// The per-slot exclusive lock: `flock(LOCK_EX | LOCK_NB)` on `slot-N/lock`. A second verb on
/// the same slot is refused, not queued. Released when dropped (or when the process dies).
/// Why the slot lock was not taken; each message names the lock file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The lock file could not be opened (`fix` says how, when known).
    #[error("cannot open {}: {source}{fix}", path.display())]
    Open {
        /// The lock file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
        /// What to do, e.g. on a read-only state directory (may be empty).
        fix: String,
    },
    /// `flock` failed for another reason than a holder.
    #[error("flock {}: {source}", path.display())]
    Flock {
        /// The lock file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Held by no netprobe process (a killed verb's runtime or CRIU).
    #[error("{} is {sentence}", path.display())]
    Orphans {
        /// The lock file.
        path: PathBuf,
        /// Who holds it and the `kill -9` that frees it.
        sentence: String,
    },
    /// Held by another verb (or a process it started).
    #[error("{} is held by {by} — another netprobe verb on this slot, or a runtime or CRIU it started; refused, not queued: wait for it to end ({} shows `busy` until then) and run the verb again; if it hangs, stop it (`kill` the netprobe pid: it releases what it started)", path.display(), crate::slot::next_step::bare("status"))]
    Held {
        /// The lock file.
        path: PathBuf,
        /// Who holds it.
        by: String,
    },
}

#[derive(Debug)]
pub struct SlotLock {
    file: File,
}

impl SlotLock {
    /// Takes the lock without blocking.
    ///
    /// Errors: `Err(detail)` when another process holds it (`EWOULDBLOCK`) or the file cannot be opened.
    pub fn acquire(path: &Path) -> Result<SlotLock, LockError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|source| LockError::Open {
                path: path.to_path_buf(),
                fix: open_fix(path, &source),
                source,
            })?;
        // A child another thread of this process is forking holds the lock until its exec
        // (bounded wait); anything else holding it refuses at once.
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
        loop {
            // SAFETY: flock on a valid, owned file descriptor.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(SlotLock { file });
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(LockError::Flock {
                    path: path.to_path_buf(),
                    source: err,
                });
            }
            let holders = holders(path, 2);
            let transient = holders.iter().all(|h| h.forking);
            let orphans = orphans(&holders);
            if !transient && !orphans.is_empty() {
                return Err(LockError::Orphans {
                    path: path.to_path_buf(),
                    sentence: orphan_sentence(&holders, &orphans),
                });
            }
            if !transient || std::time::Instant::now() > deadline {
                let by = if holders.is_empty() {
                    "another process (none found with it open now: it may have just ended)".into()
                } else {
                    describe(&holders)
                };
                return Err(LockError::Held {
                    path: path.to_path_buf(),
                    by,
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// Runs `f` so that every process tree `f` starts on this thread (the runtime and CRIU during
    /// checkpoint and restore, through [`crate::proc::run_tree`]) inherits the lock's file
    /// descriptor and keeps the slot locked until it exits, even when netprobe itself is killed
    /// ([`crate::proc::with_inherited_fd`]: only those children; the descriptor stays
    /// close-on-exec in netprobe, so a child another thread starts meanwhile does not hold it).
    pub fn inherited_by_children<T>(&self, f: impl FnOnce() -> T) -> T {
        use std::os::fd::AsFd;
        crate::proc::with_inherited_fd(self.file.as_fd(), f)
    }
}

#[cfg(test)]
#[path = "slot_lock_tests.rs"]
mod tests;
