//! Facts about the machine: kernel, runtime and CRIU versions + sha256, pins, CRIU config-file
//! refusal, prerequisites ("doctor").
//!
//! Every refusal is a [`HostError`] (the CLI maps it to exit code 3) whose message names the
//! input and the fix.

pub mod binary;
pub mod config;
pub mod doctor;
pub mod error;
pub mod facts;
pub mod pins;

pub use binary::{
    BinaryKind, PRIVATE_CRIU, PRIVATE_CRIU_4_1, PRIVATE_CRIU_4_3, binary_facts, binary_facts_then,
    default_criu, default_runtime, find_in_path, missing_library, missing_loader,
    newest_runc_under, parse_runtime_version, pinned_default_criu, pinned_default_runtime,
    program_name,
};
pub use config::{criu_config_files, refuse_criu_config};
pub use doctor::{Prereq, doctor, doctor_ok};
pub use error::HostError;
pub use facts::{cgroup_mode, host_facts};
pub use pins::{
    InstallRecord, Pin, check_one, check_pins, install_record, install_record_differences,
    installed_sha256, pin_differences, pin_differences_with_paths, pins, script_differences,
};

use crate::criu::{Criu, CriuError};
use crate::evidence::result::BinaryFacts;
use std::path::Path;

/// `Ok(())` when the effective uid is 0. Errors: [`HostError::NotRoot`] ("netprobe needs root
/// (namespaces, CRIU): run it with sudo").
pub fn check_root() -> Result<(), HostError> {
    if nix::unistd::geteuid().is_root() {
        Ok(())
    } else {
        Err(HostError::NotRoot)
    }
}

/// The gate before any CRIU work: root ([`check_root`]), no CRIU config file
/// ([`refuse_criu_config`]), CRIU present with a recognised version ([`binary_facts`]), and
/// `criu check` exits 0. Returns CRIU's [`BinaryFacts`].
///
/// Errors: the first failing [`HostError`]; a failed `criu check` is
/// [`HostError::CriuCheckFailed`] carrying the tail of its output.
pub fn refuse_unless_ready(criu: &Path) -> Result<BinaryFacts, HostError> {
    check_root()?;
    refuse_criu_config()?;
    // `criu check` runs once `--version` is recognised, while the binary is still being hashed.
    let (facts, ()) = binary_facts_then(criu, BinaryKind::Criu, |path| {
        match Criu::new(path).check() {
            Ok(_) => Ok(()),
            Err(CriuError::Failed { outcome, tail, .. }) => Err(HostError::CriuCheckFailed {
                path: path.to_path_buf(),
                status: outcome.status_text(),
                tail,
            }),
            Err(e) => Err(HostError::CriuCheckFailed {
                path: path.to_path_buf(),
                status: "could not run".to_string(),
                tail: e.to_string(),
            }),
        }
    })?;
    Ok(facts)
}
