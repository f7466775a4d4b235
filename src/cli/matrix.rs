//! `netprobe matrix`: runtimes × CRIUs in one command (the handler lives in `src/matrix/`).

use super::Execute;
use netprobe::matrix::cli::MatrixArgs;
use std::process::ExitCode;

/// Runtimes × CRIUs: kernel rung once, criu rung per CRIU, runtime rungs per pair; matrix.json + table.
#[derive(clap::Args)]
pub struct MatrixCmd {
    #[command(flatten)]
    args: MatrixArgs,
}

impl Execute for MatrixCmd {
    fn execute(self) -> ExitCode {
        netprobe::matrix::cli::handle(self.args, netprobe::ns::default_exe())
    }
}
