//! Test binary `ladder` (one per area, each former tests/*.rs a module): The ladder for real (runc, crun, CRIU): verdicts, what a run releases, the rich netns, hung and killed runs, today's pins, and the assertion specs and scanner.
//! Modules of different former files never overlap (`common::baton`).

#[path = "../common/mod.rs"]
mod common;

mod assert_eval;
mod assert_scan;
mod assert_spec;
mod ladder;
mod ladder_release;
mod rich_ladder;
mod run_hung_tree;
mod run_sigkill;
mod runtime_pins;
