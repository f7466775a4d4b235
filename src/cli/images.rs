//! `netprobe images DIR`: what CRIU's images hold about the network, decoded.

use super::Execute;
use netprobe::images::cli::{IMAGES_EXAMPLES, ImagesArgs};
use std::process::ExitCode;

/// What CRIU's images hold about the network, decoded (tree, or --json).
#[derive(clap::Args)]
#[command(after_help = IMAGES_EXAMPLES)]
pub struct ImagesCmd {
    #[command(flatten)]
    args: ImagesArgs,
}

impl Execute for ImagesCmd {
    fn execute(self) -> ExitCode {
        netprobe::images::cli::run(&self.args)
    }
}
