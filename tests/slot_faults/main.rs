//! Test binary `slot_faults` (one per area, each former tests/*.rs a module): The slot driver under faults: bad input, hostile set-ups and binaries, hung trees, interrupted and SIGKILLed verbs, and what they leave.
//! Modules of different former files never overlap (`common::baton`).

#[path = "../common/mod.rs"]
mod common;

mod hostile_binaries;
mod slot_crun_kill;
mod slot_faults;
mod slot_hostile;
mod slot_hung_tree;
mod slot_interrupt;
mod slot_kill;
mod slot_leftovers;
