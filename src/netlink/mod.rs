//! CRIU-exact link dump (raw request bytes, CRIU-style decode) and NetState capture, canonical JSON, diff.
//!
//! Everything here works in the **calling thread's** network namespace: a `NETLINK_ROUTE`
//! socket is bound to the netns of the thread that opens it, so callers that `unshare(CLONE_NEWNET)`
//! or `setns()` in a dedicated thread get that netns, and the process's own netns is untouched.
//!
//! - [`criu_dump`]: [`criu_link_dump_request`], [`dump_links_criu`], [`decode_link_replies`].
//! - [`state`]: [`NetState`] capture, canonical JSON, diff.
//! - [`mutate`]: link lookup, link up, address add, veth create/delete (ACK-checked, batched).

pub mod criu_dump;
pub mod criu_unlock;
mod error;
pub mod fidelity;
mod full;
pub mod mutate;
pub mod netfilter;
pub mod nft_tables;
pub mod rules;
pub mod state;
pub mod sysctl;
mod wire;

pub use criu_dump::{
    ARPHRD_ETHER, ARPHRD_LOOPBACK, CRIU_LINK_DUMP_SEQ, CriuLink, IFF_UP, LinkDump,
    criu_link_dump_request, decode_link_replies, dump_links_criu,
};
pub use error::{NetlinkError, NftDumpError, ToolError, UnlockError};
pub use full::{CaptureExtras, capture_compared, capture_full};
pub use mutate::{
    add_address, create_veth_pair, create_veth_pairs, delete_link, delete_links, link_index,
    set_link_up,
};
pub use rules::RuleState;
pub use state::{AddrState, LinkState, NetState, RouteState, capture, dump_addrs};
