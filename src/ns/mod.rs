//! Namespaces and processes: holder child with its own netns, setns by pid/path, pidfd, process identity.
//!
//! Network namespaces are **per thread**: `setns`/`unshare(CLONE_NEWNET)` change only the
//! calling thread, so netprobe enters a namespace on the calling thread and always switches it
//! back afterwards ([`run_in_netns`], [`run_in_fresh_netns`]: an fd of the original netns is
//! opened first and restored on return or unwind; a failed switch back aborts). Inside the
//! closure, read `/proc/thread-self/net/...`, not `/proc/self/net/...` (which shows the main
//! thread's namespace).

pub mod cleanup;
pub mod error;
pub mod forward;
pub mod guard;
pub mod holder;
pub mod identity;
pub mod mountinfo;
pub mod netns;
pub mod pidfd;

pub use error::{HandshakeError, NsError, StatParseError};
pub use guard::{ChildGuard, ProcessGuard};
pub use holder::{
    HOLDER_ARG, Holder, HolderOptions, RUN_PID_ARG, default_exe, holder_main, stop_by_identity,
};
pub use identity::ProcessIdentity;
pub use netns::{
    CaptureError, SETTLE_MS, UnsavedSysctlsError, capture_netstate, capture_netstate_compared,
    netns_cookie_of, netns_inode_of, own_netns_inode, run_in_fresh_netns, run_in_netns,
    unsaved_sysctls_in,
};
pub use pidfd::{pidfd_open, pidfd_send_signal, wait_pidfd_exit};
