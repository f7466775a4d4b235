//! `netprobe __holder` (hidden): the holder process that owns a netns and waits forever (or
//! forwards a slot's published ports into it).

use super::Execute;
use std::process::ExitCode;

/// Internal: the holder process (owns a netns, waits forever).
#[derive(clap::Args)]
pub struct HolderCmd {
    /// Inherited fd to report the identity on.
    #[arg(long)]
    report_fd: i32,
    /// Bring lo up.
    #[arg(long)]
    lo_up: bool,
    /// Inherited fd to hold open until the end (repeatable).
    #[arg(long)]
    keep_fd: Vec<i32>,
    /// The probe run that started it (a marker for the next run's sweep; not read).
    #[arg(long)]
    run_pid: Option<u32>,
    /// Inherited listening socket and the guest port its connections are forwarded to,
    /// `FD:GUEST_PORT` (repeatable; a slot's published ports).
    #[arg(long, value_parser = netprobe::ns::forward::parse_publish_arg)]
    publish: Vec<netprobe::ns::forward::Listener>,
}

impl Execute for HolderCmd {
    fn execute(self) -> ExitCode {
        // Only a marker on the command line for the next run's sweep.
        let _ = self.run_pid;
        netprobe::ns::holder_main(self.report_fd, self.lo_up, &self.keep_fd, &self.publish)
    }
}
