//! `netprobe cgroup`: prove the cgroup driver on this host (limits read back from the cgroup
//! files, v1 or v2, and with systemd from the scope unit; then nothing left).

use super::{Execute, fail, out};
use netprobe::exit::ExitClass;
use std::path::PathBuf;
use std::process::ExitCode;

/// Prove the cgroup driver on this host: a container with the slot's limits (4 CPUs, 4 GiB, no
/// swap) read back from its cgroup files (v1 or v2) and, with systemd, from its scope unit;
/// then nothing left. Exit 1 when a check fails, 3 when the host cannot (no cgroups, systemd
/// asked where it is not pid 1).
#[derive(clap::Args)]
#[command(
    after_help = "Example:\n  sudo netprobe cgroup --driver systemd --evidence ev/cgroup-systemd\n"
)]
pub struct CgroupCmd {
    /// cgroup driver; default: systemd where systemd is pid 1, else cgroupfs.
    #[arg(long, value_parser = ["systemd", "cgroupfs"])]
    driver: Option<String>,
    /// OCI runtime binary. Default: `run`'s — the newest /opt/runc-<version>/sbin/runc set-up
    /// installed, else runc in PATH.
    #[arg(long)]
    runtime: Option<PathBuf>,
    /// systemd driver: also `systemctl daemon-reload` before and after aligning the unit and
    /// re-read the files (reloads every unit of the host: for test hosts).
    #[arg(long)]
    daemon_reload: bool,
    /// Evidence folder to create (cgroup-check.json, config.json); must not exist.
    #[arg(long)]
    evidence: PathBuf,
}

impl Execute for CgroupCmd {
    fn execute(self) -> ExitCode {
        use netprobe::cgroup::{CgroupDriver, CgroupError, check};
        let driver = match self.driver.map(|d| d.parse::<CgroupDriver>()).transpose() {
            Ok(d) => d,
            Err(e) => return fail(ExitClass::Usage, e),
        };
        let runtime = self
            .runtime
            .unwrap_or_else(netprobe::host::pinned_default_runtime);
        let evidence = self.evidence;
        match check::run_check(
            std::path::Path::new("/"),
            &runtime,
            driver,
            self.daemon_reload,
            &evidence,
        ) {
            Ok(r) => {
                out::line(format!(
                    "cgroup {} host, driver {} ({}), {}; cgroupsPath {}; CRIU --manage-cgroups-mode {}",
                    r.mode,
                    r.driver.driver,
                    r.driver.source,
                    r.runtime_version,
                    r.cgroups_path,
                    r.manage_cgroups_mode.as_str()
                ));
                for a in &r.unit_aligned {
                    out::line(format!("set on the unit: {a}"));
                }
                for f in &r.findings {
                    out::line(format!("finding: {f}"));
                }
                for c in &r.checks {
                    let mark = if c.pass { "pass" } else { "FAIL" };
                    out::line(format!("{mark} {}: {}", c.name, c.observed));
                }
                out::line(format!(
                    "evidence: {}",
                    evidence.join("cgroup-check.json").display()
                ));
                if r.pass {
                    ExitClass::Ok.into()
                } else {
                    ExitClass::Gate.into()
                }
            }
            Err(e) => {
                // A refused --evidence folder is a usage error (2), as for `run`.
                let class = match e.downcast_ref::<CgroupError>() {
                    Some(c) => c.exit_class(),
                    None if e
                        .downcast_ref::<netprobe::evidence::EvidenceError>()
                        .is_some() =>
                    {
                        ExitClass::Usage
                    }
                    None => ExitClass::CouldNotRun,
                };
                fail(class, format!("{e:#}"))
            }
        }
    }
}
