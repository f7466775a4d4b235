//! OCI bundle (rootfs, config.json via oci-spec) and runtime wrapper (runc first, crun-ready).
//!
//! - [`rootfs`]: the built-in busybox rootfs ([`build_busybox_rootfs`]) and [`check_rootfs`].
//! - [`bundle`]: [`BundleSpec`] → `config.json` ([`write_bundle`], atomic, sha256).
//! - [`runtime`]: [`Runtime`] (create/start/state/kill/delete/checkpoint/restore), always with a
//!   private `--root` and an explicit `--criu`; [`ContainerGuard`] so nothing leaks.
//! - [`runc_state`]: `runc state` decided in-process from runc's `state.json` (as runc does).
//! - [`cgroups`]: a killed runtime's leftover `<hierarchy>/<id>` cgroups, removed at release.
//! - [`container`]: [`Container`], the one container handle (create → start → checkpoint →
//!   prove gone → restore → release) of the probe rungs and the slot, over [`RuntimeOps`].
//!
//! Facts this module relies on (ARCHITECTURE.md section 2): runc sets `empty_ns = CLONE_NEWNET` for
//! checkpoint and restore (checkpoint.go `setEmptyNsMask`), so a private netns is neither dumped
//! nor restored; a netns named by path is passed to CRIU as external (`extRootNetNS`).

pub mod bundle;
pub mod cgroups;
pub mod container;
pub mod error;
pub mod guard;
mod ids;
pub mod rootfs;
pub mod runc_state;
pub mod runtime;
pub mod runtime_env;

pub use bundle::{
    BundleInfo, BundleSpec, CONFIG_JSON, NetnsSpec, Resources, build_spec, config_sha256,
    read_bundle_spec, write_bundle, write_spec,
};
pub use container::{Container, RuntimeOps};
pub use error::{OciError, Result};
pub use guard::ContainerGuard;
pub use ids::unique_container_id;
pub use rootfs::{
    DEFAULT_BUSYBOX, INIT_HTTP_PORT, INIT_SH, build_busybox_rootfs, build_busybox_rootfs_from,
    check_rootfs, sleep_candidates,
};
pub use runtime::{
    CRUN_DEFAULT_ROOT, ContainerState, HYBRID_UNIFIED_MOUNT, Runtime, RuntimeKind, RuntimeOutcome,
    crun_quirks, host_is_hybrid, read_pid_file, refuse_existing,
};
pub use runtime_env::{
    CRIU_PATH_PREFIX, RUNC_LOG_PREFIX, SLOT_TAG_PREFIX, TmpOwner, left_by_dead_processes,
    slot_owner_tag, sweep_stale_criu_path_dirs, sweep_stale_runc_logs,
};
