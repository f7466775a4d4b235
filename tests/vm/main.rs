//! Test binary `vm` (one per area, each former tests/*.rs a module): The test host in a virtual machine (host/vm/): the VM tests and host/vm/run.sh when its qemu is killed.
//! Modules of different former files never overlap (`common::baton`).

#[path = "../common/mod.rs"]
mod common;

mod vm;
mod vm_killed;
