//! Test binary `slot` (one per area, each former tests/*.rs a module): The slot driver's core for real (root, runc/crun, CRIU): the CLI, the whole cycle, closing gates, images, sealed binaries, published ports, status schema, state directory.
//! Modules of different former files never overlap (`common::baton`).

#[path = "../common/mod.rs"]
mod common;

mod slot_cli;
mod slot_crun;
mod slot_cycle;
mod slot_fidelity;
mod slot_image;
mod slot_process_names;
mod slot_publish;
mod slot_schema;
mod slot_sealed;
mod slot_state_dir;
