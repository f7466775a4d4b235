//! Test binary `criu_oci` (one per area, each former tests/*.rs a module): CRIU and OCI pieces: the CRIU wrapper and its reasons, CRIU on netns and its root yard, bundles, rootfs, runc checkpoint/restore, cgroup limits, CRIU images and checkpoint archives.
//! Modules of different former files never overlap (`common::baton`).

#[path = "../common/mod.rs"]
mod common;

mod archive_input;
mod archive_podman;
mod cgroup_limits;
mod criu_cmd;
mod criu_netns;
mod criu_reason;
mod criu_yard;
mod images_criu;
mod oci_bundle;
mod oci_rootfs;
mod oci_runc;
