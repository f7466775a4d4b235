//! Entering a network namespace without changing netprobe's own.
//!
//! A network namespace belongs to a **thread** (`setns(2)`, `unshare(2)`): these functions run
//! the closure in a fresh scoped thread that joins (or creates) the namespace and then ends, so
//! the calling thread and the rest of netprobe stay where they are. Sockets created inside the
//! closure stay bound to that namespace even after the thread ends. Inside the closure use
//! `/proc/thread-self/...` (`/proc/self/...` is the main thread's view).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::error::NsError;
use super::identity::ns_inode;

const THREAD_SELF_NET: &str = "/proc/thread-self/ns/net";

/// Inode of the calling thread's network namespace (`st_ino` of `/proc/thread-self/ns/net`).
///
/// Errors: `ProcRead` naming the path if `/proc` is not readable.
pub fn own_netns_inode() -> Result<u64, NsError> {
    ns_inode(Path::new(THREAD_SELF_NET))
}

/// Inode of the network namespace at `path` (`/proc/<pid>/ns/net` or a bind mount of one).
///
/// Errors: `ProcRead` naming the path (missing, permission, process gone).
pub fn netns_inode_of(path: &Path) -> Result<u64, NsError> {
    ns_inode(path)
}

fn join_scoped<T: Send>(body: impl FnOnce() -> Result<T, NsError> + Send) -> Result<T, NsError> {
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("netprobe-netns".into())
            .spawn_scoped(s, body)
            .map_err(|source| NsError::Os {
                op: "spawn netns thread",
                source,
            })?;
        match handle.join() {
            Ok(r) => r,
            Err(payload) => std::panic::resume_unwind(payload),
        }
    })
}

/// Runs `f` in a new thread that has joined the network namespace at `target`
/// (`/proc/<pid>/ns/net` or a bind-mounted namespace file) with `setns(fd, CLONE_NEWNET)`;
/// the thread ends afterwards and the caller's namespace is untouched. Before `f` runs, the
/// thread's netns inode is checked against `target`'s.
///
/// Errors: `Setns { path, .. }` if the file cannot be opened or `setns` fails (needs root);
/// `SetnsMismatch` if the thread is not in the namespace afterwards; `Os` if the thread cannot
/// be spawned. A panic in `f` is propagated to the caller.
pub fn run_in_netns<T: Send>(target: &Path, f: impl FnOnce() -> T + Send) -> Result<T, NsError> {
    let path: PathBuf = target.to_path_buf();
    join_scoped(move || {
        let file = File::open(&path).map_err(|source| NsError::Setns {
            path: path.clone(),
            source,
        })?;
        let expected = ns_inode(&path)?;
        // SAFETY: setns on a valid fd we own, affecting only this thread's netns.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(NsError::Setns {
                path,
                source: io::Error::last_os_error(),
            });
        }
        drop(file);
        let found = own_netns_inode()?;
        if found != expected {
            return Err(NsError::SetnsMismatch {
                path,
                expected,
                found,
            });
        }
        Ok(f())
    })
}

/// Runs `f` in a new thread that first calls `unshare(CLONE_NEWNET)`: a brand-new, empty
/// network namespace (only `lo`, DOWN) that disappears when the thread ends unless `f` keeps
/// something pinning it (a socket, an open ns fd).
///
/// Errors: `Unshare` (needs root); `Os` if the thread cannot be spawned. A panic in `f` is
/// propagated to the caller.
pub fn run_in_fresh_netns<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, NsError> {
    join_scoped(move || {
        // SAFETY: unshare affecting only this thread's network namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(NsError::Unshare {
                source: io::Error::last_os_error(),
            });
        }
        Ok(f())
    })
}
