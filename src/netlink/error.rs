//! The error type of the `netlink` module.

/// Everything that can go wrong while talking rtnetlink (`NETLINK_ROUTE`) or decoding its replies.
///
/// Every variant names the operation (`op`, e.g. `"dump_links_criu: send"`) so a report line
/// says which request failed; kernel refusals carry the positive `errno` of the `NLMSG_ERROR`.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    /// A socket syscall (`socket`, `connect`, `send`, `recv`) failed; `source` carries the OS errno.
    #[error("netlink {op}: {source}")]
    Io {
        /// The operation, e.g. `"capture: recv"`.
        op: String,
        /// The OS error (its `raw_os_error()` is the errno).
        #[source]
        source: std::io::Error,
    },
    /// The kernel answered a request with `NLMSG_ERROR` carrying a negative error code.
    #[error("netlink {op}: kernel returned NLMSG_ERROR errno {errno} ({}) for seq {seq}",
        std::io::Error::from_raw_os_error(*errno))]
    Kernel {
        /// The operation, e.g. `"set_link_up(1)"`.
        op: String,
        /// Positive errno (`-nlmsgerr.error`), e.g. 17 for `EEXIST`.
        errno: i32,
        /// `nlmsg_seq` of the failing request.
        seq: u32,
    },
    /// Reply bytes do not form well-formed netlink messages (truncated header, length past the
    /// end of the buffer, short `ifinfomsg`, bad attribute, missing `NLMSG_DONE`).
    #[error("netlink {op}: malformed reply at byte {offset}: {reason}")]
    Decode {
        /// The operation, e.g. `"decode_link_replies"`.
        op: String,
        /// Byte offset of the offending message in the decoded buffer.
        offset: usize,
        /// What was wrong.
        reason: String,
    },
    /// A caller-supplied argument cannot be encoded (e.g. a link name longer than 15 bytes).
    #[error("netlink {op}: invalid argument: {reason}")]
    InvalidArgument {
        /// The operation.
        op: String,
        /// Why the argument was refused.
        reason: String,
    },
    /// The kernel flagged a dump `NLM_F_DUMP_INTR` (the table changed while it was dumped), so
    /// the result is not a consistent snapshot.
    #[error("netlink {op}: dump interrupted (NLM_F_DUMP_INTR): state changed during the dump")]
    DumpInterrupted {
        /// The operation.
        op: String,
    },
    /// `NetState` JSON could not be (de)serialised.
    #[error("netstate JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl NetlinkError {
    /// The errno behind this error, when there is one (kernel refusal or OS error).
    pub fn errno(&self) -> Option<i32> {
        match self {
            NetlinkError::Kernel { errno, .. } => Some(*errno),
            NetlinkError::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    pub(crate) fn io(op: impl Into<String>, source: std::io::Error) -> Self {
        NetlinkError::Io {
            op: op.into(),
            source,
        }
    }

    pub(crate) fn decode(op: impl Into<String>, offset: usize, reason: impl Into<String>) -> Self {
        NetlinkError::Decode {
            op: op.into(),
            offset,
            reason: reason.into(),
        }
    }
}

/// Why a `NETLINK_NETFILTER` look at the nftables tables ([`super::nft_tables::tables`]) is not
/// complete: the step that failed (`socket`, `send`, `recv`, `decode`), the kernel's answer, or
/// the `/proc/thread-self/net` file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NftDumpError {
    /// A socket call failed; `step` is `socket`, `bind`, `connect`, `send` or `recv`.
    #[error("{step}: {source}")]
    Socket {
        /// The socket call.
        step: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The socket gave 0 bytes before the dump's `NLMSG_DONE`.
    #[error("recv: end of stream before NLMSG_DONE")]
    EndOfStream,
    /// The bytes at `offset` of an answer are not a netfilter netlink message.
    #[error("decode at byte {offset}: {source}")]
    Decode {
        /// Byte offset of the message in the received buffer.
        offset: usize,
        /// The decoder's error.
        #[source]
        source: netlink_packet_core::DecodeError,
    },
    /// A message at `offset` claims `nlmsg_len` 0 (the walk would not advance).
    #[error("decode at byte {offset}: nlmsg_len 0")]
    ZeroLength {
        /// Byte offset of the message in the received buffer.
        offset: usize,
    },
    /// An answer carries another request's sequence number.
    #[error("decode: sequence {got} for {want}")]
    Sequence {
        /// `nlmsg_seq` of the answer.
        got: u32,
        /// `nlmsg_seq` of the request.
        want: u32,
    },
    /// The kernel answered the request with `NLMSG_ERROR`.
    #[error("kernel answered {0}")]
    Kernel(netlink_packet_core::ErrorMessage),
    /// A dump of `what` (`table`, `chain`) answered with another message type.
    #[error("decode: a {what} dump answered another message")]
    OtherMessage {
        /// The object dumped.
        what: &'static str,
    },
    /// The `GETGEN` answer has no `NFTA_GEN_ID`.
    #[error("decode: no NFTA_GEN_ID in the GETGEN answer")]
    NoGeneration,
    /// A legacy x_tables names file exists but could not be read.
    #[error("{path}: {source}")]
    Proc {
        /// The file, e.g. `/proc/thread-self/net/ip_tables_names`.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Why one netfilter tool (`iptables-save`, `nft`, `iptables-restore`, …) gave no answer: it
/// could not run, failed or timed out; or CRIU's jumps did not go away.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The capture tool could not be started (not installed).
    #[error("{program}: cannot run ({source}); install iptables and nftables (host/setup.sh)")]
    Missing {
        /// The program, e.g. `iptables-save`.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A capture tool's bounded run failed (I/O, time bound, interruption).
    #[error(transparent)]
    Tree(crate::proc::TreeError),
    /// An unlock command's bounded run failed; `command` is `program args…` as shown in the log.
    #[error("{command}: {source}")]
    Run {
        /// `program args…`.
        command: String,
        /// The run's error.
        #[source]
        source: crate::proc::TreeError,
    },
    /// The tool exited unsuccessfully.
    #[error("{command}: {status}: {stderr}")]
    Failed {
        /// `program args…` (a trailing space when there are no arguments).
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// Its stderr, trimmed.
        stderr: String,
    },
    /// `iptables -D CHAIN -j CRIU` ran `passes` times and a jump is still there.
    #[error("{family}: still a jump to CRIU in {chain} after {passes} deletions")]
    JumpsLeft {
        /// `iptables` or `ip6tables`.
        family: String,
        /// `INPUT` or `OUTPUT`.
        chain: &'static str,
        /// How many deletions ran.
        passes: usize,
    },
}

/// Why CRIU's network lock was not removed ([`super::criu_unlock::unlock_here`]).
#[derive(Debug, thiserror::Error)]
pub enum UnlockError {
    /// The ruleset capture before or after failed.
    #[error(transparent)]
    Capture(#[from] ToolError),
    /// The capture after still shows part of the lock: the parts left, then each removal
    /// command that failed, joined by `; `.
    #[error("CRIU's network lock still there: {}{}", .left.join(", "), UnlockProblems(.problems))]
    Left {
        /// The parts of the lock still there.
        left: Vec<String>,
        /// The removal commands that failed, in order.
        problems: Vec<ToolError>,
    },
}

/// `; `-prefixed list of problems (the tail of [`UnlockError::Left`]'s text).
struct UnlockProblems<'a>(&'a [ToolError]);

impl std::fmt::Display for UnlockProblems<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|p| write!(f, "; {p}"))
    }
}
