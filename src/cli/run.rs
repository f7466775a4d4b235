//! `netprobe run`: climb the ladder, write evidence, print the verdict.

use super::{Execute, fail, parse_verdict};
use netprobe::evidence::result::VerdictCode;
use netprobe::exit::ExitClass;
use netprobe::probe::runner::{self, RunOptions};
use netprobe::report::progress::{Progress, ProgressMode};
use std::path::PathBuf;
use std::process::ExitCode;

const EXAMPLES: &str = "Examples:
  sudo netprobe run                                   # the whole ladder: newest /opt/runc-*, CRIU 4.3
  sudo netprobe run --runtime /opt/crun-1.28/bin/crun --expect runtime-preserves-netns   # the control runtime
  sudo netprobe run --phases kernel,criu --strace     # the cheap rungs, CRIU under strace
  sudo netprobe run --runtime /opt/runc-1.5.2/sbin/runc --expect runtime-empty-ns --evidence ev/runc-1.5.2
  sudo netprobe run --criu /opt/criu-4.1.1/sbin/criu --evidence ev/criu-4.1.1 && netprobe diff ev/runc-1.5.2 ev/criu-4.1.1
";

/// Climb the probe ladder (kernel → criu → oci → external-netns), write evidence, print the verdict.
#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct RunCmd {
    /// Rungs to run, cheapest first.
    #[arg(long, default_value = "kernel,criu,oci,external-netns")]
    phases: String,
    /// New evidence folder (must not exist or be empty). Default: ./evidence/<UTC time>-<pid>.
    #[arg(long)]
    evidence: Option<PathBuf>,
    /// OCI runtime binary (runc or crun). Default: the newest /opt/runc-<version>/sbin/runc set-up installed (closest to the pinned 1.5.2), else runc in PATH.
    #[arg(long)]
    runtime: Option<PathBuf>,
    /// CRIU binary; the runtime reaches it through its PATH. Default: /opt/criu-4.3/sbin/criu (the pin), else /opt/criu-4.2.1/sbin/criu, else /opt/criu-4.1.1/sbin/criu, else criu in PATH.
    #[arg(long)]
    criu: Option<PathBuf>,
    /// Rootfs for the runtime rungs (must have sleep; the declared differences name it). Default: a busybox rootfs built by netprobe.
    #[arg(long)]
    rootfs: Option<PathBuf>,
    /// Run CRIU (and the runtime, following forks) under strace; traces kept in the rung folders.
    #[arg(long)]
    strace: bool,
    /// Expected verdict: exit 1 when the verdict differs (regression check for a new pin).
    #[arg(long, value_parser = parse_verdict)]
    expect: Option<VerdictCode>,
    /// What the probe's netns holds before the checkpoint: `lo` (default: the cheapest probe,
    /// the one the verdict table was established with) or `rich` (veth pair, IPv4/IPv6
    /// addresses, routes in main and table 100, a policy rule, sysctls, iptables + nftables).
    #[arg(long, value_enum, default_value = "lo")]
    netns: netprobe::probe::netns_content::NetnsContent,
    /// Print only the final result JSON on stdout.
    #[arg(long, conflicts_with = "quiet")]
    json: bool,
    /// Print only the verdict.
    #[arg(long)]
    quiet: bool,
    /// The folder of the `netprobe matrix` that started this run as one of its parts, passed by
    /// the matrix: --evidence may then be directly in it (proven from the matrix's
    /// incomplete.txt and this process's parent). Not for operators; hidden from --help.
    #[arg(long, hide = true, value_name = "MATRIX_FOLDER")]
    part_of_matrix: Option<PathBuf>,
}

impl Execute for RunCmd {
    fn execute(self) -> ExitCode {
        let a = self;
        let phases = match runner::parse_phases(&a.phases) {
            Ok(p) => p,
            Err(e) => return fail(e.exit_class(), e),
        };
        let opts = RunOptions {
            phases,
            evidence: a.evidence,
            runtime: a
                .runtime
                .unwrap_or_else(netprobe::host::pinned_default_runtime),
            criu: a.criu.unwrap_or_else(netprobe::host::pinned_default_criu),
            rootfs: a.rootfs,
            strace: a.strace,
            exe: netprobe::ns::default_exe(),
            command: std::env::args().collect(),
            netns: a.netns,
            part_of_matrix: a.part_of_matrix,
        };
        let mode = if a.json {
            ProgressMode::Json
        } else if a.quiet {
            ProgressMode::Quiet
        } else {
            ProgressMode::Auto
        };
        let mut progress = Progress::new(mode);
        let (result, dir) = match runner::run(&opts, &mut progress) {
            Ok(r) => r,
            Err(e) => return fail(e.exit_class(), e),
        };
        if let Err(e) = progress.finished(&result, &dir)
            && e.kind() != std::io::ErrorKind::BrokenPipe
        {
            eprintln!("netprobe: printing the result: {e}");
        }
        let class = runner::exit_class(&result, a.expect);
        if class == ExitClass::Gate
            && let Some(e) = a.expect
        {
            return fail(
                class,
                format!(
                    "verdict {} differs from --expect {e} (evidence: {})",
                    result.verdict.code,
                    dir.display()
                ),
            );
        }
        class.into()
    }
}
