//! `netprobe doctor`: every prerequisite, found or missing, with the fix.

use super::Execute;
use netprobe::exit::ExitClass;
use std::path::PathBuf;
use std::process::ExitCode;

/// Check every prerequisite and print found/missing with the fix.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  sudo netprobe doctor\n")]
pub struct DoctorCmd {
    /// CRIU binary.
    #[arg(long)]
    criu: Option<PathBuf>,
    /// OCI runtime binary.
    #[arg(long)]
    runtime: Option<PathBuf>,
}

impl Execute for DoctorCmd {
    fn execute(self) -> ExitCode {
        let criu = self
            .criu
            .unwrap_or_else(netprobe::host::pinned_default_criu);
        let runtime = self
            .runtime
            .unwrap_or_else(netprobe::host::pinned_default_runtime);
        let prereqs = netprobe::host::doctor(&criu, &runtime);
        super::out::raw(netprobe::report::console::doctor_text(&prereqs));
        // Not a prerequisite: what runs killed with SIGKILL left (the next run releases it).
        let left = netprobe::probe::stale::find(
            std::path::Path::new("/proc"),
            std::path::Path::new("/var/tmp"),
            &std::env::temp_dir(),
        );
        if !left.is_empty() {
            super::out::line(format!(
                "note    left by netprobe runs killed with SIGKILL: {}: {}",
                left.summary(),
                left.items().join(", ")
            ));
            super::out::line(
                "        fix: the next `sudo netprobe run` releases them (listed in its evidence's stale-swept.json)",
            );
        }
        if netprobe::host::doctor_ok(&prereqs) {
            ExitClass::Ok.into()
        } else {
            ExitClass::HostRefused.into()
        }
    }
}
