//! netprobe: when network state is wrong after a container restore, which layer broke it —
//! the kernel, CRIU, the OCI runtime, or the harness?
//!
//! Layout (see `docs/ARCHITECTURE.md`): each module has one job and
//! dependencies point downward: [`probe`] and [`slot`] use everything below them; nothing below
//! imports `probe` or `slot`.

pub mod assert;
pub mod cgroup;
pub mod criu;
pub mod evidence;
pub mod exit;
pub mod fleet;
pub mod host;
pub mod images;
pub mod matrix;
pub mod netlink;
pub mod ns;
pub mod oci;
pub mod out;
pub mod probe;
pub mod proc;
pub mod profile;
pub mod report;
pub mod shell;
pub mod slot;
pub mod x11;
