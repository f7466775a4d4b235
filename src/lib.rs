//! netprobe: when network state is wrong after a container restore, which layer broke it —
//! the kernel, CRIU, the OCI runtime, or the harness?
//!
//! Layout (see `docs/ARCHITECTURE.md`): each module has one job and
//! dependencies point downward: [`probe`] and [`slot`] use everything below them; nothing below
//! imports `probe` or `slot`.

// `netprobe::…` paths resolve inside the library too, so the binary's command line (src/cli)
// compiles into the library's unit tests: `reference` renders its flags from clap.
extern crate self as netprobe;

/// The binary's command line, compiled into the library's unit tests only (the generated flag
/// tables of `docs/REFERENCE.md` are rendered from it, see [`reference`]).
#[cfg(test)]
#[path = "cli/mod.rs"]
#[allow(dead_code)]
mod cli;

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
pub mod reference;
pub mod report;
pub mod shell;
pub mod slot;
pub mod x11;
