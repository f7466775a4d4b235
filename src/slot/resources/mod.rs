//! The slot's host-side resources: where a slot lives ([`slot_dir`]: slot number, state
//! directory, ownership marker, paths; the state directory's checks in [`state_dir`]) and its lock ([`slot_lock`]); the image and rootfs
//! mounts ([`mounts`], [`partition`]); cgroups ([`cgroups`]); the sealed runtime and CRIU
//! binaries ([`sealed_binaries`]); published host ports ([`published_ports`]); what a runtime
//! or CRIU leaves behind ([`leftover_procs`], [`crun_leftovers`], [`runtime_half_state`],
//! [`criu_net_lock`]); and the file-system and tool helpers ([`fs_tools`]).

pub mod cgroups;
pub mod criu_net_lock;
pub mod crun_leftovers;
pub mod fs_tools;
pub(super) mod leftover_procs;
pub mod mounts;
pub mod partition;
pub mod published_ports;
pub(super) mod runtime_half_state;
pub mod sealed_binaries;
pub mod slot_dir;
pub(super) mod slot_lock;
pub mod state_dir;
