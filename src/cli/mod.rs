//! netprobe's command line (clap derive): one file per command, each holding that command's
//! arguments, help examples and the few lines that call the library and print. `main.rs` only
//! parses, dispatches and maps errors to exit codes.
//!
//! Exit codes: every command returns an [`ExitClass`], whose docs hold the README's exit-code
//! table (0 ran and matched, 1 gate / verdict differs / not reproduced, 2 usage, 3 host
//! refused, 4 could not run).
//!
//! Adding a command: a new file `src/cli/NAME.rs` with a `#[derive(clap::Args)]` struct (its doc
//! comment is the one-line help, `#[command(after_help = …)]` the example) implementing
//! [`Execute`], plus its `mod` line and one line in the [`commands!`] list below.

use clap::Parser;
use netprobe::evidence::result::VerdictCode;
use netprobe::exit::ExitClass;
use std::process::ExitCode;

mod cgroup;
mod completions;
mod diff;
mod doctor;
mod fleet;
mod holder;
mod images;
mod matrix;
pub use netprobe::out;
mod report;
mod run;
pub mod slot;
mod verify;

/// A parsed command: runs it, prints its output and returns the exit code.
pub trait Execute {
    /// Runs the command. Failures are printed as `netprobe: MESSAGE` on stderr ([`fail`]).
    fn execute(self) -> ExitCode;
}

/// Declares [`Cmd`] (one variant per command, in help order) and its dispatch to
/// [`Execute::execute`].
macro_rules! commands {
    ($($(#[$attr:meta])* $variant:ident($ty:ty),)*) => {
        /// The subcommands of `netprobe`.
        #[derive(clap::Subcommand)]
        pub enum Cmd {
            $($(#[$attr])* $variant($ty),)*
        }

        impl Execute for Cmd {
            fn execute(self) -> ExitCode {
                match self {
                    $(Cmd::$variant(c) => c.execute(),)*
                }
            }
        }
    };
}

commands! {
    Run(run::RunCmd),
    Verify(verify::VerifyCmd),
    Report(report::ReportCmd),
    Diff(diff::DiffCmd),
    Matrix(matrix::MatrixCmd),
    Fleet(fleet::FleetCmd),
    Doctor(doctor::DoctorCmd),
    Slot(slot::SlotCmd),
    Images(images::ImagesCmd),
    Cgroup(cgroup::CgroupCmd),
    Completions(completions::CompletionsCmd),
    Man(completions::ManCmd),
    #[command(name = "__holder", hide = true)]
    Holder(holder::HolderCmd),
}

/// `netprobe [COMMAND]`.
#[derive(Parser)]
#[command(
    name = "netprobe",
    version,
    about = "Which layer broke the network namespace after a container restore: kernel, CRIU, OCI runtime or harness?",
    after_help = "Exit codes: 0 ok, 1 verdict differs from --expect / gate failed / verify mismatch, 2 usage, 3 host refused, 4 a phase could not run, 128+N interrupted by signal N.\n\nEnvironment: NETPROBE_STEP_TIMEOUT_S=SECONDS bounds every runtime call and CRIU dump/restore (default 120); at the bound the step's whole process tree is killed."
)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// `--expect VERDICT`: one of [`VerdictCode::ALL`]. Errors: the list of verdicts.
pub fn parse_verdict(s: &str) -> Result<VerdictCode, netprobe::matrix::UnknownVerdict> {
    VerdictCode::parse(s).ok_or_else(|| netprobe::matrix::UnknownVerdict::new(s))
}

/// Prints `netprobe: MSG` on stderr and returns the exit code of `class`.
pub fn fail(class: ExitClass, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("netprobe: {msg}");
    class.into()
}
