//! `netprobe diff OLD NEW`: what moved between two runs.

use super::{Execute, fail};
use netprobe::exit::ExitClass;
use std::path::PathBuf;
use std::process::ExitCode;

/// Compare two runs (evidence folders or result files): verdict first. Exit 1 when the verdict changed.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  netprobe diff evidence/runc-1.1.5 evidence/runc-1.5.2\n")]
pub struct DiffCmd {
    /// The older run.
    old: PathBuf,
    /// The newer run.
    new: PathBuf,
}

impl Execute for DiffCmd {
    fn execute(self) -> ExitCode {
        use netprobe::report::diff::{diff_paths, render_diff};
        match diff_paths(&self.old, &self.new) {
            Ok(d) => {
                super::out::raw(render_diff(&d));
                if d.verdict_changed() {
                    ExitClass::Gate.into()
                } else {
                    ExitClass::Ok.into()
                }
            }
            Err(e) => fail(ExitClass::Usage, e),
        }
    }
}
