//! netprobe's command line: parse (clap derive), call the library, map errors to exit codes.
//! No logic lives here. Exit codes (README): 0 ran and matched, 1 verdict differs from
//! `--expect` / a gate failed / verify did not reproduce, 2 usage, 3 host refused, 4 a phase
//! could not run.

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use netprobe::evidence::result::VerdictCode;
use netprobe::probe::runner::{self, RunOptions};
use netprobe::report::progress::{Progress, ProgressMode};
use std::path::PathBuf;
use std::process::ExitCode;

const RUN_EXAMPLES: &str = "Examples:
  sudo netprobe run                                   # the whole ladder: newest /opt/runc-*, CRIU 4.3
  sudo netprobe run --runtime /opt/crun-1.28/bin/crun --expect runtime-preserves-netns   # the control runtime
  sudo netprobe run --phases kernel,criu --strace     # the cheap rungs, CRIU under strace
  sudo netprobe run --runtime /opt/runc-1.5.2/sbin/runc --expect runtime-empty-ns --evidence ev/runc-1.5.2
  sudo netprobe run --criu /opt/criu-4.1.1/sbin/criu --evidence ev/criu-4.1.1 && netprobe diff ev/runc-1.5.2 ev/criu-4.1.1
";

#[derive(Parser)]
#[command(
    name = "netprobe",
    version,
    about = "Which layer broke the network namespace after a container restore: kernel, CRIU, OCI runtime or harness?",
    after_help = "Exit codes: 0 ok, 1 verdict differs from --expect / gate failed / verify mismatch, 2 usage, 3 host refused, 4 a phase could not run."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Climb the probe ladder (kernel → criu → oci → external-netns), write evidence, print the verdict.
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// Runtimes × CRIUs: kernel rung once, criu rung per CRIU, runtime rungs per pair; matrix.json + table.
    Matrix(netprobe::matrix::cli::MatrixArgs),
    /// Re-run the assertions over a preserved evidence folder (no root needed).
    #[command(after_help = "Example:\n  netprobe verify evidence/20261130T013419Z-4242\n")]
    Verify {
        /// Evidence folder written by `netprobe run`.
        dir: PathBuf,
        /// Also require this verdict (exit 1 otherwise).
        #[arg(long, value_parser = parse_verdict)]
        expect: Option<VerdictCode>,
    },
    /// Render a report of an evidence folder (DIR/report.md or DIR/report.html).
    #[command(
        after_help = "Example:\n  netprobe report evidence/20261130T013419Z-4242 --format html\n"
    )]
    Report {
        /// Evidence folder.
        dir: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Md)]
        format: Format,
    },
    /// Compare two runs (evidence folders or result files): verdict first. Exit 1 when the verdict changed.
    #[command(after_help = "Example:\n  netprobe diff evidence/runc-1.1.5 evidence/runc-1.5.2\n")]
    Diff {
        /// The older run.
        old: PathBuf,
        /// The newer run.
        new: PathBuf,
    },
    /// Check every prerequisite and print found/missing with the fix.
    #[command(after_help = "Example:\n  sudo netprobe doctor\n")]
    Doctor {
        /// CRIU binary.
        #[arg(long)]
        criu: Option<PathBuf>,
        /// OCI runtime binary.
        #[arg(long)]
        runtime: Option<PathBuf>,
    },
    /// The slot driver of the OCI reference arm (provision, snapshot, restore, reset, cleanup, status).
    #[command(after_help = "Examples:
  sudo netprobe slot provision --slot 0 --state-dir /var/lib/netprobe/slots --probe-evidence evidence/last
  sudo netprobe slot snapshot  --slot 0 --state-dir /var/lib/netprobe/slots
  sudo netprobe slot restore   --slot 0 --state-dir /var/lib/netprobe/slots
  sudo netprobe slot reset     --slot 0 --state-dir /var/lib/netprobe/slots
  sudo netprobe slot cleanup   --slot 0 --state-dir /var/lib/netprobe/slots
")]
    Slot(SlotCli),
    /// Print shell completions.
    #[command(
        after_help = "Example:\n  netprobe completions bash > /etc/bash_completion.d/netprobe\n"
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff).
    #[command(after_help = "Example:\n  netprobe man > /usr/local/share/man/man1/netprobe.1\n")]
    Man,
    /// Internal: the holder process (owns a netns, waits forever).
    #[command(name = "__holder", hide = true)]
    Holder {
        /// Inherited fd to report the identity on.
        #[arg(long)]
        report_fd: i32,
        /// Bring lo up.
        #[arg(long)]
        lo_up: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Md,
    Html,
}

#[derive(clap::Args)]
struct RunArgs {
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
    /// Rootfs for the runtime rungs (must have sleep). Default: a busybox rootfs built by netprobe.
    #[arg(long)]
    rootfs: Option<PathBuf>,
    /// Run CRIU (and the runtime, following forks) under strace; traces kept in the rung folders.
    #[arg(long)]
    strace: bool,
    /// Expected verdict: exit 1 when the verdict differs (regression check for a new pin).
    #[arg(long, value_parser = parse_verdict)]
    expect: Option<VerdictCode>,
    /// Print only the final result JSON on stdout.
    #[arg(long, conflicts_with = "quiet")]
    json: bool,
    /// Print only the verdict.
    #[arg(long)]
    quiet: bool,
}

#[derive(clap::Args)]
struct SlotCli {
    /// The verb.
    #[arg(value_enum)]
    verb: netprobe::slot::Verb,
    /// Slot number (digits only, 0 to 999).
    #[arg(long, allow_hyphen_values = true)]
    slot: String,
    /// State directory holding the slots (created if missing; never a symlink).
    #[arg(long)]
    state_dir: PathBuf,
    /// Image: a directory or a .qcow2 file. Default: the embedded busybox rootfs serving HTTP on :5000.
    #[arg(long)]
    image: Option<PathBuf>,
    /// sha256 pin of a .qcow2 --image.
    #[arg(long)]
    image_sha256: Option<String>,
    /// Evidence folder of a passing probe run for the same runtime and CRIU (provision gate).
    #[arg(long)]
    probe_evidence: Option<PathBuf>,
    /// Skip the probe gate (recorded in the slot with --reason).
    #[arg(long, requires = "reason")]
    no_probe_gate: bool,
    /// Why the probe gate is skipped.
    #[arg(long)]
    reason: Option<String>,
    /// OCI runtime binary (runc or crun). Default: the newest /opt/runc-<version>/sbin/runc set-up installed (closest to the pinned 1.5.2), else runc in PATH.
    #[arg(long)]
    runtime: Option<PathBuf>,
    /// CRIU binary. Default: as for `netprobe run`; later verbs: the one recorded at provision.
    #[arg(long)]
    criu: Option<PathBuf>,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

fn parse_verdict(s: &str) -> Result<VerdictCode, String> {
    VerdictCode::parse(s).ok_or_else(|| {
        let all: Vec<&str> = VerdictCode::ALL.iter().map(|v| v.as_str()).collect();
        format!("unknown verdict {s:?}; one of: {}", all.join(", "))
    })
}

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("netprobe: {msg}");
    ExitCode::from(code)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.cmd {
        Cmd::Holder { report_fd, lo_up } => netprobe::ns::holder_main(report_fd, lo_up),
        Cmd::Run(a) => cmd_run(a),
        Cmd::Matrix(a) => netprobe::matrix::cli::handle(a, netprobe::ns::default_exe()),
        Cmd::Verify { dir, .. } if dir.join(netprobe::matrix::model::MATRIX_FILE).is_file() => {
            netprobe::matrix::cli::handle_verify(&dir)
        }
        Cmd::Verify { dir, expect } => match netprobe::probe::verify::verify(&dir) {
            Err(e) => fail(2, e),
            Ok(o) => {
                println!(
                    "verify {}: {} assertions re-evaluated, {} artifacts checked",
                    dir.display(),
                    o.assertions,
                    o.artifacts
                );
                for f in &o.failing {
                    println!("  failing (as recorded): {f}");
                }
                for m in &o.mismatches {
                    println!("  MISMATCH: {m}");
                }
                println!(
                    "verdict from the evidence: {} (recorded: {})",
                    o.verdict.code, o.recorded.code
                );
                if !o.reproduced() {
                    return fail(1, "the evidence does not reproduce the recorded result");
                }
                if let Some(e) = expect
                    && e != o.verdict.code
                {
                    return fail(
                        1,
                        format!("verdict {} differs from --expect {e}", o.verdict.code),
                    );
                }
                ExitCode::SUCCESS
            }
        },
        Cmd::Report { dir, format } => {
            let f = match format {
                Format::Md => netprobe::report::Format::Markdown,
                Format::Html => netprobe::report::Format::Html,
            };
            match netprobe::report::write_report(&dir, f) {
                Ok(p) => {
                    println!("{}", p.display());
                    ExitCode::SUCCESS
                }
                Err(e) => fail(2, e),
            }
        }
        Cmd::Diff { old, new } => match netprobe::report::diff::diff_paths(&old, &new) {
            Ok(d) => {
                print!("{}", netprobe::report::diff::render_diff(&d));
                if d.verdict_changed() {
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                }
            }
            Err(e) => fail(2, e),
        },
        Cmd::Doctor { criu, runtime } => {
            let criu = criu.unwrap_or_else(netprobe::host::pinned_default_criu);
            let runtime = runtime.unwrap_or_else(netprobe::host::pinned_default_runtime);
            let prereqs = netprobe::host::doctor(&criu, &runtime);
            for p in &prereqs {
                let mark = if p.found { "found  " } else { "MISSING" };
                let req = if p.required {
                    ""
                } else {
                    " (slot driver / optional)"
                };
                // One line per prerequisite: the first line of the detail (a binary's whole
                // --version output can be long).
                let mut detail = p.detail.lines().next().unwrap_or("").to_string();
                if p.detail.lines().count() > 1 {
                    detail.push_str(" …");
                }
                println!("{mark} {}{req}: {detail}", p.name);
                if !p.found {
                    println!("        fix: {}", p.fix);
                }
            }
            if netprobe::host::doctor_ok(&prereqs) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(3)
            }
        }
        Cmd::Slot(s) => cmd_slot(s),
        Cmd::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "netprobe",
                &mut std::io::stdout(),
            );
            ExitCode::SUCCESS
        }
        Cmd::Man => {
            let man = clap_mangen::Man::new(Cli::command());
            match man.render(&mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(4, e),
            }
        }
    }
}

fn cmd_run(a: RunArgs) -> ExitCode {
    let phases = match runner::parse_phases(&a.phases) {
        Ok(p) => p,
        Err(e) => return fail(e.exit_code() as u8, e),
    };
    let exe = netprobe::ns::default_exe();
    let opts = RunOptions {
        phases,
        evidence: a.evidence,
        runtime: a
            .runtime
            .unwrap_or_else(netprobe::host::pinned_default_runtime),
        criu: a.criu.unwrap_or_else(netprobe::host::pinned_default_criu),
        rootfs: a.rootfs,
        strace: a.strace,
        exe,
        command: std::env::args().collect(),
    };
    let mode = if a.json {
        ProgressMode::Json
    } else if a.quiet {
        ProgressMode::Quiet
    } else {
        ProgressMode::Auto
    };
    let mut progress = Progress::new(mode);
    match runner::run(&opts, &mut progress) {
        Err(e) => fail(e.exit_code() as u8, e),
        Ok((result, dir)) => {
            if let Err(e) = progress.finished(&result, &dir) {
                eprintln!("netprobe: printing the result: {e}");
            }
            let code = runner::exit_code(&result, a.expect);
            if code == 1
                && let Some(e) = a.expect
            {
                eprintln!(
                    "netprobe: verdict {} differs from --expect {e} (evidence: {})",
                    result.verdict.code,
                    dir.display()
                );
            }
            ExitCode::from(code as u8)
        }
    }
}

fn cmd_slot(s: SlotCli) -> ExitCode {
    let args = netprobe::slot::SlotArgs {
        verb: s.verb,
        slot: s.slot,
        state_dir: s.state_dir,
        image: s.image,
        image_sha256: s.image_sha256,
        probe_evidence: s.probe_evidence,
        no_probe_gate: s.no_probe_gate,
        reason: s.reason,
        runtime: s.runtime,
        criu: s.criu,
        holder_exe: None,
        json: s.json,
    };
    match netprobe::slot::run_verb(&args) {
        Ok(o) => {
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&o.to_json()).unwrap_or_default()
                );
            } else {
                println!("{}", o.render());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&e.to_json()).unwrap_or_default()
                );
            }
            fail(e.exit_code() as u8, e)
        }
    }
}
