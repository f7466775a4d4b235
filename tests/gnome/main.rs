//! Test binary `gnome` (one per area, each former tests/*.rs a module): The GNOME guest: GNOME through the slot driver, the guest's GNOME Shell, OSWorld's own client on restored GNOME slots.
//! Modules of different former files never overlap (`common::baton`).

#[path = "../common/mod.rs"]
mod common;

mod gnome_guest;
mod osworld_client;
mod slot_gnome;
