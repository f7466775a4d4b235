//! `netprobe completions SHELL` and `netprobe man`: generated from the clap definitions.

use super::{Cli, Execute, fail};
use clap::CommandFactory;
use netprobe::exit::ExitClass;
use std::process::ExitCode;

/// Print shell completions.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  netprobe completions bash > /etc/bash_completion.d/netprobe\n")]
pub struct CompletionsCmd {
    /// The shell.
    shell: clap_complete::Shell,
}

impl Execute for CompletionsCmd {
    fn execute(self) -> ExitCode {
        // Into memory first: clap_complete panics on a failed write (a closed stdout).
        let mut buf = Vec::new();
        clap_complete::generate(self.shell, &mut Cli::command(), "netprobe", &mut buf);
        super::out::raw(String::from_utf8_lossy(&buf));
        ExitClass::Ok.into()
    }
}

/// Print the man page (roff).
#[derive(clap::Args)]
#[command(after_help = "Example:\n  netprobe man > /usr/local/share/man/man1/netprobe.1\n")]
pub struct ManCmd {}

impl Execute for ManCmd {
    fn execute(self) -> ExitCode {
        let man = clap_mangen::Man::new(Cli::command());
        let mut buf = Vec::new();
        match man.render(&mut buf) {
            Ok(()) => {
                super::out::raw(String::from_utf8_lossy(&buf));
                ExitClass::Ok.into()
            }
            Err(e) => fail(ExitClass::CouldNotRun, e),
        }
    }
}
