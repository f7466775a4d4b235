//! Entering a network namespace without changing netprobe's own.
//!
//! A network namespace belongs to a **thread** (`setns(2)`, `unshare(2)` with `CLONE_NEWNET`
//! change only the calling thread, also in a multi-threaded process). These functions switch
//! the **calling thread** into the namespace, run the closure, and switch it back to the
//! netns it was in (held open as an fd from before the switch) when the closure returns or
//! panics: no thread is spawned, and every other thread stays where it is. Sockets created
//! inside the closure stay bound to that namespace after the switch back. Inside the closure
//! use `/proc/thread-self/...` (`/proc/self/...` is the main thread's view).
//!
//! If switching back ever fails, the process aborts (after a message on stderr): a thread left
//! in a foreign netns would silently talk to the wrong kernel tables from then on.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::MetadataExt;
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

/// The calling thread's netns from before a switch, held open; dropping the guard switches
/// the thread back with `setns(fd, CLONE_NEWNET)` (on return and on unwind alike).
struct RestoreNetns {
    original: File,
}

impl RestoreNetns {
    /// Opens `/proc/thread-self/ns/net` (the calling thread's netns) before any switch.
    fn open_current() -> Result<File, NsError> {
        File::open(THREAD_SELF_NET).map_err(|source| NsError::ProcRead {
            path: PathBuf::from(THREAD_SELF_NET),
            source,
        })
    }
}

impl Drop for RestoreNetns {
    fn drop(&mut self) {
        // SAFETY: setns on a valid fd we own, affecting only this thread's netns.
        if unsafe { libc::setns(self.original.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            let e = io::Error::last_os_error();
            eprintln!(
                "netprobe: cannot switch this thread back to its original network namespace \
                 (setns: {e}); aborting rather than run on in a foreign netns"
            );
            std::process::abort();
        }
    }
}

/// Runs `f` on the calling thread after joining the network namespace at `target`
/// (`/proc/<pid>/ns/net` or a bind-mounted namespace file) with `setns(fd, CLONE_NEWNET)`,
/// then switches the thread back to the netns it was in (also when `f` panics); the rest of
/// the process never changes netns. Before `f` runs, the thread's netns inode
/// (`/proc/thread-self/ns/net`) is checked against the inode of the opened `target`.
///
/// Errors: `Setns { path, .. }` if the file cannot be opened or `setns` fails (needs root;
/// `EINVAL` for a file that is not a netns); `SetnsMismatch` if the thread is not in the
/// namespace afterwards; `ProcRead` if `/proc/thread-self/ns/net` cannot be opened or read.
/// A panic in `f` is propagated to the caller (after the switch back). Aborts the process if
/// the switch back fails (see the module docs).
pub fn run_in_netns<T: Send>(target: &Path, f: impl FnOnce() -> T + Send) -> Result<T, NsError> {
    let setns_err = |source| NsError::Setns {
        path: target.to_path_buf(),
        source,
    };
    let file = File::open(target).map_err(setns_err)?;
    let expected = file.metadata().map_err(setns_err)?.ino();
    let original = RestoreNetns::open_current()?;
    // SAFETY: setns on a valid fd we own, affecting only this thread's netns.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(setns_err(io::Error::last_os_error()));
    }
    let _back = RestoreNetns { original };
    drop(file);
    let found = own_netns_inode()?;
    if found != expected {
        return Err(NsError::SetnsMismatch {
            path: target.to_path_buf(),
            expected,
            found,
        });
    }
    Ok(f())
}

/// The cookie of the network namespace at `target` (`/proc/<pid>/ns/net`): the kernel's 64-bit
/// id of a namespace, never reused while the machine runs (`SO_NETNS_COOKIE` of a socket made in
/// it, Linux 5.14 and later), where the inode number (`st_ino` of the ns file) is reused as
/// soon as the namespace is gone. Read on the calling thread inside [`run_in_netns`].
///
/// Errors: those of [`run_in_netns`]; `Cookie` when the socket or the `getsockopt` fails.
pub fn netns_cookie_of(target: &Path) -> Result<u64, NsError> {
    let cookie_err = |source| NsError::Cookie {
        path: target.to_path_buf(),
        source,
    };
    run_in_netns(target, || -> io::Result<u64> {
        // SAFETY: plain socket(2); the fd is owned right away.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just returned by socket(2) and is owned by nothing else.
        let sock = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let mut cookie: u64 = 0;
        let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
        // SAFETY: getsockopt into a u64 of the length given.
        let rc = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_NETNS_COOKIE,
                (&mut cookie as *mut u64).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(cookie)
    })?
    .map_err(cookie_err)
}

/// `SO_NETNS_COOKIE` (include/uapi/asm-generic/socket.h, Linux 5.14; not exported by `libc`
/// for x86-64).
const SO_NETNS_COOKIE: libc::c_int = 71;

/// Runs `f` on the calling thread after `unshare(CLONE_NEWNET)`: a brand-new, empty network
/// namespace (only `lo`, DOWN). The thread is switched back to its original netns when `f`
/// returns or panics; the new namespace then disappears unless `f` kept something pinning it
/// (a socket, an open ns fd, a child process in it).
///
/// Errors: `Unshare` (needs root); `ProcRead` if `/proc/thread-self/ns/net` cannot be opened.
/// A panic in `f` is propagated to the caller (after the switch back). Aborts the process if
/// the switch back fails (see the module docs).
pub fn run_in_fresh_netns<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, NsError> {
    let original = RestoreNetns::open_current()?;
    // SAFETY: unshare affecting only this thread's network namespace.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(NsError::Unshare {
            source: io::Error::last_os_error(),
        });
    }
    let _back = RestoreNetns { original };
    Ok(f())
}

/// Why [`capture_netstate`] failed: the namespace could not be entered, or a netlink dump in it
/// failed.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// `setns` into the namespace failed (the process owning it is gone, or no privilege).
    #[error("enter {}: {source}", path.display())]
    Enter {
        /// The namespace path (`/proc/<pid>/ns/net`).
        path: std::path::PathBuf,
        /// The namespace error.
        #[source]
        source: NsError,
    },
    /// A netlink dump inside the namespace failed.
    #[error("netlink capture in {}: {source}", path.display())]
    Netlink {
        /// The namespace path.
        path: std::path::PathBuf,
        /// The netlink error.
        #[source]
        source: crate::netlink::NetlinkError,
    },
}

/// Why [`unsaved_sysctls_in`] failed: the namespace could not be entered, or `/proc/sys/net`
/// could not be read in it.
#[derive(Debug, thiserror::Error)]
pub enum UnsavedSysctlsError {
    /// `setns` into the namespace failed.
    #[error("enter {}: {source}", path.display())]
    Enter {
        /// The namespace path.
        path: std::path::PathBuf,
        /// The namespace error.
        #[source]
        source: NsError,
    },
    /// Reading `/proc/sys/net` inside the namespace failed.
    #[error("{}: /proc/sys/net: {source}", path.display())]
    Read {
        /// The namespace path.
        path: std::path::PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// How long [`capture_netstate`] waits for `tentative` addresses (IPv6 DAD) to settle,
/// milliseconds.
pub const SETTLE_MS: u64 = 5000;

/// The one state capture of the probe rungs and the slot driver: the full
/// [`crate::netlink::NetState`] of the network namespace at `netns` (`/proc/<pid>/ns/net`) —
/// links, addresses with their flags, routes of every table, policy rules, the sysctls CRIU
/// saves and the canonical netfilter ruleset ([`crate::netlink::capture_full`], waiting at
/// most [`SETTLE_MS`] for tentative addresses) — with the evidence beside it that is not
/// compared ([`crate::netlink::CaptureExtras`]). The calling thread enters the namespace for
/// the capture only; the netfilter tools it runs inherit that namespace.
///
/// Errors: [`CaptureError::Enter`] or [`CaptureError::Netlink`], naming the namespace.
pub fn capture_netstate(
    netns: &Path,
) -> Result<(crate::netlink::NetState, crate::netlink::CaptureExtras), CaptureError> {
    capture_in(netns, crate::netlink::capture_full)
}

/// A captured state with what the capture saw beside it.
type Captured = (crate::netlink::NetState, crate::netlink::CaptureExtras);

/// One capture `how` (waiting at most [`SETTLE_MS`]) run in the netns at `netns`.
fn capture_in(
    netns: &Path,
    how: fn(u64) -> Result<Captured, crate::netlink::NetlinkError>,
) -> Result<Captured, CaptureError> {
    run_in_netns(netns, || how(SETTLE_MS))
        .map_err(|source| CaptureError::Enter {
            path: netns.to_path_buf(),
            source,
        })?
        .map_err(|source| CaptureError::Netlink {
            path: netns.to_path_buf(),
            source,
        })
}

/// [`capture_netstate`] for a verb's gates: the same compared state, by
/// [`crate::netlink::capture_compared`], so the extras' `uncovered_sysctls` are **empty** — read
/// them with [`unsaved_sysctls_in`] (e.g. on another thread, off the verb's critical path).
///
/// Errors: as [`capture_netstate`].
pub fn capture_netstate_compared(
    netns: &Path,
) -> Result<(crate::netlink::NetState, crate::netlink::CaptureExtras), CaptureError> {
    capture_in(netns, crate::netlink::capture_compared)
}

/// The sysctls CRIU does not save in the network namespace at `netns`
/// ([`crate::netlink::sysctl::capture_unsaved_sysctls`], entered on the calling thread), as
/// dotted name → value.
///
/// Errors: [`UnsavedSysctlsError`], naming the namespace that could not be entered or
/// `/proc/sys/net` that could not be read.
pub fn unsaved_sysctls_in(
    netns: &Path,
) -> Result<crate::netlink::sysctl::Sysctls, UnsavedSysctlsError> {
    run_in_netns(netns, crate::netlink::sysctl::capture_unsaved_sysctls)
        .map_err(|source| UnsavedSysctlsError::Enter {
            path: netns.to_path_buf(),
            source,
        })?
        .map_err(|source| UnsavedSysctlsError::Read {
            path: netns.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsaved_sysctls_of_a_namespace_that_cannot_be_entered_name_it() {
        let e = unsaved_sysctls_in(Path::new("/nonexistent/ns/net"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("enter /nonexistent/ns/net: "), "{e}");
    }

    /// A device whose name holds a `.` (a VLAN such as `eth0.100`): its devconf sysctls are
    /// saved by CRIU, so compared (by-name read and walk agree), never also listed as unsaved.
    #[test]
    fn a_dotted_device_s_sysctls_are_saved_ones_in_every_capture() {
        use crate::netlink::sysctl::*;
        run_in_fresh_netns(|| {
            let st = std::process::Command::new("ip")
                .args(["link", "add", "a.b", "type", "veth", "peer", "name", "c.d"])
                .status()
                .expect("ip");
            assert!(st.success(), "ip link add: {st}");
            let (covered, other) = capture_sysctls().unwrap();
            assert!(
                covered.contains_key("net.ipv4.conf.a.b.forwarding")
                    && covered.contains_key("net.ipv6.conf.c.d.hop_limit"),
                "{covered:?}"
            );
            assert!(
                !other
                    .keys()
                    .any(|k| k.starts_with("net.ipv4.conf.a.b.") && covered.contains_key(k)),
                "{other:?}"
            );
            assert_eq!(capture_saved_sysctls().unwrap(), covered);
            assert_eq!(capture_unsaved_sysctls().unwrap(), other);
        })
        .unwrap();
    }

    #[test]
    fn unsaved_sysctls_of_this_namespace_are_the_walk_s_unsaved_half() {
        let own = Path::new("/proc/thread-self/ns/net");
        let m = unsaved_sysctls_in(own).unwrap();
        assert!(m.contains_key("net.core.somaxconn"), "{m:?}");
        assert!(
            !m.keys().any(|k| crate::netlink::sysctl::criu_saves(k)),
            "{m:?}"
        );
    }
}
