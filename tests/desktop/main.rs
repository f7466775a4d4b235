//! Test binary `desktop` (one per area, each former tests/*.rs a module): The desktop guest: the slot driver on the desktop image, partitioned qcow2 disks, X11 (Xvfb and the guest's Xorg under CRIU), the OSWorld-compatible server.
//! Modules of different former files never overlap (`common::baton`).

#[path = "../common/mod.rs"]
mod common;

mod guest_osworld_api;
mod slot_desktop;
mod slot_partition;
mod x11_desktop_criu;
mod x11_xvfb;
