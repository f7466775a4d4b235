//! Test binary `fleet` (one per area, each former tests/*.rs a module): `netprobe fleet` and `netprobe matrix` for real: the fleet table over real runs; the matrix, killed and signalled.
//! Modules of different former files never overlap (`common::baton`).

#[path = "../common/mod.rs"]
mod common;

mod fleet;
mod matrix;
mod matrix_kill;
mod matrix_signals;
