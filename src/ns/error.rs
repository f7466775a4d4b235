//! The one error type of the `ns` module.

use std::io;
use std::path::PathBuf;

use super::identity::ProcessIdentity;

/// Everything that can go wrong while reading, proving, entering or stopping a process or
/// network namespace. Every variant names the pid and/or path involved and, where there is
/// one, the fix. The module fails closed: a fact it cannot read is an error, never a guess.
#[derive(Debug, thiserror::Error)]
pub enum NsError {
    /// The process no longer exists (no `/proc/<pid>`, or it is a zombie / dead task).
    #[error(
        "process {pid} is gone (no /proc/{pid}, or it has exited); a holder that is gone cannot be \
         re-verified, and a slot is never re-provisioned in place: `netprobe slot cleanup` this \
         slot, then provision another slot number"
    )]
    Gone {
        /// The pid that was expected to be alive.
        pid: i32,
    },

    /// A live process sits at the pid, but it is not the one we recorded: the pid was reused
    /// or the process moved to another network namespace.
    #[error(
        "process identity changed: expected {expected}, found {found}; refusing to act on a process \
         that is not ours — `netprobe slot cleanup` this slot, then provision another slot number"
    )]
    IdentityChanged {
        /// What was recorded (handshake / `holder.json`).
        expected: ProcessIdentity,
        /// What `/proc` says now.
        found: ProcessIdentity,
    },

    /// A `/proc` file could not be read (permission, race, unexpected kernel).
    #[error("cannot read {path}: {source}; run as root and check that /proc is mounted")]
    ProcRead {
        /// The file that failed.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },

    /// A `/proc/<pid>/stat` line did not have the expected shape.
    #[error("cannot parse {path}: {reason}")]
    StatParse {
        /// The stat file.
        path: PathBuf,
        /// What was wrong with it.
        reason: StatParseError,
    },

    /// A pidfd operation (`pidfd_open`, `pidfd_send_signal`, `poll`, `waitid`) failed.
    #[error(
        "{op} for pid {pid} failed: {source}; needs Linux >= 5.3 and permission to signal the pid (root)"
    )]
    Pidfd {
        /// The operation.
        op: &'static str,
        /// The target pid.
        pid: i32,
        /// The errno.
        #[source]
        source: io::Error,
    },

    /// The process did not exit within the timeout after SIGKILL.
    #[error(
        "process {pid} did not exit within {timeout_ms} ms after SIGKILL (stuck in D state?); \
         inspect /proc/{pid}/stack and stop it by hand"
    )]
    StopTimeout {
        /// The pid.
        pid: i32,
        /// The timeout that expired, in milliseconds.
        timeout_ms: u128,
    },

    /// After a stop, `/proc/<pid>` still shows the same identity.
    #[error(
        "process {pid} still alive with the same identity after SIGKILL and reap; stop it by hand"
    )]
    StillAlive {
        /// The pid.
        pid: i32,
    },

    /// Spawning the holder executable failed.
    #[error(
        "cannot spawn holder `{} __holder`: {source}; set NETPROBE_EXE to the netprobe binary",
        crate::shell::arg(.exe)
    )]
    Spawn {
        /// The executable path.
        exe: PathBuf,
        /// The errno.
        #[source]
        source: io::Error,
    },

    /// The holder handshake (one JSON line on the report pipe) failed.
    #[error(
        "holder pid {pid} ({exe}) handshake failed: {reason}; run `{} __holder --report-fd 1` \
         as root by hand to see what it reports",
        crate::shell::arg(.exe)
    )]
    Handshake {
        /// The holder's pid.
        pid: i32,
        /// The executable path.
        exe: PathBuf,
        /// What went wrong (timeout, EOF, bad JSON, pid mismatch).
        reason: HandshakeError,
    },

    /// The holder started but reported an error of its own (e.g. `unshare` not permitted).
    #[error("holder pid {pid} reported failure: {message}; holders need root (CAP_SYS_ADMIN)")]
    HolderFailed {
        /// The holder's pid.
        pid: i32,
        /// The holder's message.
        message: String,
    },

    /// The holder's netns is netprobe's own: the `unshare` did not take effect.
    #[error(
        "holder pid {pid} is in netprobe's own network namespace (inode {inode}); \
         unshare(CLONE_NEWNET) did not take effect"
    )]
    SameNetns {
        /// The holder's pid.
        pid: i32,
        /// The shared netns inode.
        inode: u64,
    },

    /// Opening a namespace file or `setns` into it failed.
    #[error(
        "cannot enter network namespace {path}: {source}; needs root (CAP_SYS_ADMIN) and a live \
         namespace (/proc/<pid>/ns/net of a live process, or a bind mount of one)"
    )]
    Setns {
        /// The namespace path.
        path: PathBuf,
        /// The errno.
        #[source]
        source: io::Error,
    },

    /// A socket for reading a namespace's cookie could not be made or asked
    /// (`socket(AF_UNIX)`, `getsockopt(SO_NETNS_COOKIE)`: Linux 5.14 and later).
    #[error("cannot read the network namespace cookie of {path}: {source}")]
    Cookie {
        /// The namespace path.
        path: PathBuf,
        /// The errno.
        #[source]
        source: io::Error,
    },

    /// The namespace entered is not the one asked for (checked by inode after `setns`).
    #[error("after setns into {path} the thread is in netns inode {found}, expected {expected}")]
    SetnsMismatch {
        /// The namespace path.
        path: PathBuf,
        /// The inode of `path`.
        expected: u64,
        /// The inode of `/proc/thread-self/ns/net` afterwards.
        found: u64,
    },

    /// `unshare(CLONE_NEWNET)` failed.
    #[error("unshare(CLONE_NEWNET) failed: {source}; needs root (CAP_SYS_ADMIN)")]
    Unshare {
        /// The errno.
        #[source]
        source: io::Error,
    },

    /// Any other system call failed (pipe, thread spawn, ...).
    #[error("{op} failed: {source}")]
    Os {
        /// The operation.
        op: &'static str,
        /// The errno.
        #[source]
        source: io::Error,
    },
}

/// Why a `/proc/<pid>/stat` line could not be parsed (see [`super::identity::parse_stat`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatParseError {
    /// No `)` closing field 2 (`comm`).
    #[error("no ')' closing the comm field")]
    NoCommEnd,
    /// Nothing after `comm`.
    #[error("no state field after comm")]
    NoState,
    /// Field 3 is not a single character.
    #[error("state field {0:?} is not one letter")]
    State(String),
    /// Fewer than the 20 fields after `comm` that field 22 needs.
    #[error("only {0} fields after comm, need 20")]
    TooFewFields(usize),
    /// Field 22 (`starttime`) is not a number.
    #[error("field 22 (starttime) {field:?}: {source}")]
    StartTime {
        /// The field as read.
        field: String,
        /// The parse error.
        source: std::num::ParseIntError,
    },
}

/// Why the holder handshake (one JSON line on the report pipe, then EOF) failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// No EOF within the handshake timeout.
    #[error("no EOF on the report pipe within {ms} ms (got {got:?})")]
    Timeout {
        /// The timeout, milliseconds.
        ms: u128,
        /// What was read so far (lossy UTF-8).
        got: String,
    },
    /// `poll(2)` on the pipe failed.
    #[error("poll on the report pipe: {0}")]
    Poll(io::Error),
    /// `read(2)` on the pipe failed.
    #[error("read report pipe: {0}")]
    Read(io::Error),
    /// More than 64 KiB arrived.
    #[error("report larger than 64 KiB")]
    TooLarge,
    /// The report is not UTF-8.
    #[error("report is not UTF-8: {0}")]
    NotUtf8(std::string::FromUtf8Error),
    /// Not exactly one newline-terminated line.
    #[error("expected exactly one JSON line, got {0:?}")]
    NotOneLine(String),
    /// The line is not a holder report.
    #[error("bad JSON {line:?}: {source}")]
    BadJson {
        /// The line.
        line: String,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// The holder reported another pid than the child spawned.
    #[error("holder reported pid {reported}, but the spawned child is pid {spawned}")]
    PidMismatch {
        /// The pid in the report.
        reported: i32,
        /// The child's pid.
        spawned: i32,
    },
}
