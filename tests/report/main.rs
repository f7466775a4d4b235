//! Test binary `report` (one per area, each former tests/*.rs a module): Reports, diff and verify: markdown/HTML rendering (Chromium too), progress output, attribution, matrix and slot reports, declared differences, forged evidence.
//! Modules of different former files never overlap (`common::baton`).

#[path = "../common/mod.rs"]
mod common;
#[path = "../fixtures/report/fixtures.rs"]
mod fixtures;

mod declared_differences;
mod diff_real;
mod report_attribution;
mod report_diff;
mod report_html_chromium;
mod report_matrix;
mod report_progress;
mod report_render;
mod report_slot;
mod report_verified;
mod verify_forged;
