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
