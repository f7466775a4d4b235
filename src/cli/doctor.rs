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
        // Not attributable to a run (CRIU names its yard nowhere but in its log): counted only
        // when no CRIU runs, so that none of them can be in use.
        let tmp = std::path::Path::new("/tmp");
        let yards = netprobe::criu::yard::yards_in(tmp);
        if !yards.is_empty() && !netprobe::criu::yard::criu_running(std::path::Path::new("/proc")) {
            super::out::line(format!(
                "note    {} CRIU root yard(s) /tmp/.criu.mntns.* and no CRIU is running: folders CRIU processes killed mid-restore left (CRIU removes its own when it ends)",
                yards.len()
            ));
            super::out::line("        fix: rmdir /tmp/.criu.mntns.* (removes only the empty ones)");
        }
        if netprobe::host::doctor_ok(&prereqs) {
            ExitClass::Ok.into()
        } else {
            ExitClass::HostRefused.into()
        }
    }
}
