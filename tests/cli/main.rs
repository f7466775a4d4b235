//! Test binary `cli` (one per area, each former tests/*.rs a module): The command line and the host: help, completions, broken pipes, CRIU config refusal, doctor, install scripts, version parsing, hostile words, evidence folders and their schemas.
//! Modules of different former files never overlap (`common::baton`).

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod cli_broken_pipe;
mod evidence_dir;
mod evidence_disk;
mod evidence_paths;
mod evidence_schema;
mod host_config;
mod host_doctor;
mod host_install;
mod host_version;
mod hostile_words;
