//! The CRIU binary: `criu --version`, `criu check`, `criu dump`, `criu restore`.

use super::cmd::{CmdOutcome, RunError, tail_lines};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Environment variable through which CRIU reads an extra configuration file. It is removed from
/// every child environment netprobe creates for CRIU (ARCHITECTURE.md section 2).
pub const CRIU_CONFIG_ENV: &str = "CRIU_CONFIG_FILE";

/// Default bound on one `criu dump` or `criu restore`, seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;

/// Errors from running CRIU. Each names the binary or file involved and where to look next.
#[derive(Debug, thiserror::Error)]
pub enum CriuError {
    /// CRIU (or strace wrapping it) could not be run to completion.
    #[error("criu {action}: {source}")]
    Run {
        /// `dump`, `restore`, `check` or `--version`.
        action: String,
        /// What went wrong.
        source: RunError,
    },
    /// CRIU ran and exited non-zero. `log` is CRIU's own log for dump/restore (`-o`).
    #[error(
        "criu {action} failed ({status}): {tail} (CRIU's log: {log})",
        status = outcome.status_text(),
        log = log.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "its output".into())
    )]
    Failed {
        /// `dump`, `restore`, `check` or `--version`.
        action: String,
        /// The complete outcome (argv, exit code, output, duration).
        outcome: Box<CmdOutcome>,
        /// CRIU's log file for this action, when it writes one.
        log: Option<PathBuf>,
        /// CRIU's deciding lines of the log file, numbered and joined with ` | ` (its
        /// `Error (…)` lines and the lines before them, see [`crate::criu::deciding_lines`]);
        /// without any, its last lines (or those of the output when there is no log).
        tail: String,
    },
    /// `criu --version` printed nothing that looks like `Version: X`.
    #[error(
        "{path} does not look like CRIU (its --version printed: {output:?}); pass the path of a CRIU >= 4.1 binary (run: sudo bash host/setup.sh)"
    )]
    NotCriu {
        /// The binary that was run.
        path: PathBuf,
        /// Its verbatim `--version` output.
        output: String,
    },
    /// A file or directory netprobe reads or creates for CRIU could not be used.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The `--pidfile` written by `criu restore -d` does not hold a positive pid.
    #[error(
        "pidfile {path} written by criu restore holds {content:?}, not a pid: read restore.log next to it"
    )]
    BadPidfile {
        /// The pidfile.
        path: PathBuf,
        /// Its content.
        content: String,
    },
}

/// Options for `criu dump` (see [`Criu::dump`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpOpts {
    /// Pid of the root of the process tree to dump (`-t`).
    pub pid: i32,
    /// Images directory (`-D`); created when missing.
    pub images_dir: PathBuf,
    /// Work directory (`-W`) where CRIU writes `dump.log`; `None` = the images directory.
    pub work_dir: Option<PathBuf>,
    /// `--leave-running`: keep the tree running after the dump.
    pub leave_running: bool,
    /// Extra CRIU arguments appended verbatim, after the fixed ones.
    pub extra: Vec<OsString>,
    /// When set, CRIU runs under `strace -f -tt -o <this file>`.
    pub strace: Option<PathBuf>,
    /// Wall-time bound; `None` = [`DEFAULT_TIMEOUT_SECS`].
    pub timeout: Option<Duration>,
}

impl DumpOpts {
    /// Options for dumping `pid` into `images_dir` with every optional field unset
    /// (no `--leave-running`, no work dir, no extra args, no strace, default timeout).
    pub fn new(pid: i32, images_dir: impl Into<PathBuf>) -> DumpOpts {
        DumpOpts {
            pid,
            images_dir: images_dir.into(),
            work_dir: None,
            leave_running: false,
            extra: Vec::new(),
            strace: None,
            timeout: None,
        }
    }

    /// Where CRIU writes its log: `<work_dir or images_dir>/dump.log`.
    pub fn log_path(&self) -> PathBuf {
        self.work_dir
            .as_deref()
            .unwrap_or(&self.images_dir)
            .join("dump.log")
    }
}

/// Options for `criu restore -d` (see [`Criu::restore`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreOpts {
    /// Images directory (`-D`) written by a dump.
    pub images_dir: PathBuf,
    /// Work directory (`-W`) where CRIU writes `restore.log`; `None` = the images directory.
    pub work_dir: Option<PathBuf>,
    /// `--pidfile`: CRIU writes the restored root task's pid here (made absolute).
    pub pidfile: PathBuf,
    /// Extra CRIU arguments appended verbatim, after the fixed ones.
    pub extra: Vec<OsString>,
    /// When set, CRIU runs under `strace -tt -o <this file>` (no `-f`: see [`Criu::command`]).
    pub strace: Option<PathBuf>,
    /// Wall-time bound; `None` = [`DEFAULT_TIMEOUT_SECS`].
    pub timeout: Option<Duration>,
}

impl RestoreOpts {
    /// Options for restoring from `images_dir`, writing the pid to `pidfile`, every optional
    /// field unset.
    pub fn new(images_dir: impl Into<PathBuf>, pidfile: impl Into<PathBuf>) -> RestoreOpts {
        RestoreOpts {
            images_dir: images_dir.into(),
            work_dir: None,
            pidfile: pidfile.into(),
            extra: Vec::new(),
            strace: None,
            timeout: None,
        }
    }

    /// Where CRIU writes its log: `<work_dir or images_dir>/restore.log`.
    pub fn log_path(&self) -> PathBuf {
        self.work_dir
            .as_deref()
            .unwrap_or(&self.images_dir)
            .join("restore.log")
    }
}

/// A CRIU binary. Every invocation is a direct exec (no shell), with `CRIU_CONFIG_FILE` removed
/// from the child environment and stdin from `/dev/null`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Criu {
    /// The binary to execute (absolute, or a bare name looked up in `PATH` by the OS).
    pub path: PathBuf,
}

impl Criu {
    /// A CRIU at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Criu {
        Criu { path: path.into() }
    }

    /// The base [`Command`] every invocation starts from: `self.path`, or, when `strace` is given,
    /// `strace [-f] -tt -o TRACE self.path` (TRACE made absolute; `-f` only when
    /// `follow_forks`), with `CRIU_CONFIG_ENV` removed from the environment. Arguments are appended
    /// by the caller.
    ///
    /// `follow_forks` must be false for `criu restore`: under `strace -f` the restored tasks are
    /// already ptrace'd by strace, CRIU cannot seize them and restore fails with "Can't interrupt
    /// the PID task: No such process" (observed with CRIU 4.1.1). It must be false for `criu dump`
    /// with CRIU >= 4.2 too: its start-up feature probe forks a child that calls PTRACE_TRACEME
    /// (kerndat_breakpoints), which fails under a tracer that follows forks. So netprobe traces
    /// CRIU's main process only; CRIU's -v4 log covers its helpers.
    pub fn command(&self, strace: Option<&Path>, follow_forks: bool) -> Command {
        let mut cmd = match strace {
            Some(trace) => {
                let mut c = Command::new("strace");
                if follow_forks {
                    c.arg("-f");
                }
                c.arg("-tt").arg("-o").arg(absolute(trace)).arg(&self.path);
                c
            }
            None => Command::new(&self.path),
        };
        cmd.env_remove(CRIU_CONFIG_ENV);
        cmd
    }

    /// Runs `criu --version` and returns `(version, verbatim output)`, e.g. `("4.1.1",
    /// "Version: 4.1.1\n")`. Errors: [`CriuError::Run`] when it cannot run,
    /// [`CriuError::Failed`] on a non-zero exit, [`CriuError::NotCriu`] when no `Version:` line
    /// is printed.
    pub fn version(&self) -> Result<(String, String), CriuError> {
        let mut cmd = self.command(None, false);
        cmd.arg("--version");
        let outcome = run("--version", &mut cmd, Some(Duration::from_secs(30)))?;
        let output = format!("{}{}", outcome.stdout, outcome.stderr);
        if !outcome.success() {
            return Err(failed("--version", outcome, None));
        }
        match parse_criu_version(&output) {
            Some(v) => Ok((v, output)),
            None => Err(CriuError::NotCriu {
                path: self.path.clone(),
                output,
            }),
        }
    }

    /// Runs `criu check` (CRIU's own test of the kernel features it needs).
    /// Returns the outcome when it exits 0 (it prints `Looks good.`).
    /// Errors: [`CriuError::Failed`] carrying the outcome and its last lines on a non-zero exit;
    /// [`CriuError::Run`] when it cannot run within 60 s.
    pub fn check(&self) -> Result<CmdOutcome, CriuError> {
        let mut cmd = self.command(None, false);
        cmd.arg("check");
        let outcome = run("check", &mut cmd, Some(Duration::from_secs(60)))?;
        if outcome.success() {
            Ok(outcome)
        } else {
            Err(failed("check", outcome, None))
        }
    }

    /// `criu dump -t PID [--leave-running] -v4 -o dump.log -D IMAGES [-W WORK] [extra…]`,
    /// optionally under `strace -f -tt -o TRACE`. Creates the images (and work) directory when
    /// missing. All paths are passed absolute.
    ///
    /// Errors: [`CriuError::Io`] when a directory cannot be created; [`CriuError::Run`] when CRIU
    /// cannot be started or exceeds the timeout; [`CriuError::Failed`] on a non-zero exit,
    /// carrying the outcome and pointing at [`DumpOpts::log_path`].
    pub fn dump(&self, o: &DumpOpts) -> Result<CmdOutcome, CriuError> {
        create_dir(&o.images_dir)?;
        if let Some(w) = &o.work_dir {
            create_dir(w)?;
        }
        let mut cmd = self.command(o.strace.as_deref(), false);
        cmd.arg("dump").arg("-t").arg(o.pid.to_string());
        if o.leave_running {
            cmd.arg("--leave-running");
        }
        cmd.args(["-v4", "-o", "dump.log", "-D"])
            .arg(absolute(&o.images_dir));
        if let Some(w) = &o.work_dir {
            cmd.arg("-W").arg(absolute(w));
        }
        cmd.args(&o.extra);
        let outcome = run("dump", &mut cmd, Some(timeout_or_default(o.timeout)))?;
        if outcome.success() {
            Ok(outcome)
        } else {
            Err(failed("dump", outcome, Some(o.log_path())))
        }
    }

    /// `criu restore -d -v4 -o restore.log -D IMAGES [-W WORK] --pidfile F [extra…]`, optionally
    /// under `strace -tt -o TRACE` (without `-f`: see [`Criu::command`]; the trace then covers
    /// CRIU's main process only, not the tasks it forks). With `-d` CRIU detaches the restored tree and exits; read
    /// the restored root's pid with [`read_pidfile`].
    ///
    /// Errors: as [`Criu::dump`], pointing at [`RestoreOpts::log_path`].
    pub fn restore(&self, o: &RestoreOpts) -> Result<CmdOutcome, CriuError> {
        if let Some(w) = &o.work_dir {
            create_dir(w)?;
        }
        let mut cmd = self.command(o.strace.as_deref(), false);
        cmd.args(["restore", "-d", "-v4", "-o", "restore.log", "-D"])
            .arg(absolute(&o.images_dir));
        if let Some(w) = &o.work_dir {
            cmd.arg("-W").arg(absolute(w));
        }
        cmd.arg("--pidfile").arg(absolute(&o.pidfile));
        cmd.args(&o.extra);
        // A CRIU killed at the bound or on an interruption leaves its root yard (`yard`).
        let _yard_on_signal = super::yard::register_release(o.log_path());
        let outcome = run("restore", &mut cmd, Some(timeout_or_default(o.timeout)))
            .inspect_err(|_| drop(super::yard::release_named_in(&o.log_path())))?;
        if outcome.success() {
            Ok(outcome)
        } else {
            Err(failed("restore", outcome, Some(o.log_path())))
        }
    }
}

/// Parses CRIU's `--version` output: the value of the first line `Version: X` (e.g.
/// `"Version: 4.1.1\nGitID: v4.1.1"` → `Some("4.1.1")`). `None` when there is no such line or
/// the value is empty.
pub fn parse_criu_version(output: &str) -> Option<String> {
    output.lines().find_map(|l| {
        let v = l.trim().strip_prefix("Version:")?.trim();
        (!v.is_empty() && v.starts_with(|c: char| c.is_ascii_digit())).then(|| v.to_string())
    })
}

/// Reads the pid that `criu restore --pidfile F` wrote (decimal, optional trailing newline).
/// Errors: [`CriuError::Io`] when unreadable, [`CriuError::BadPidfile`] when not a positive pid.
pub fn read_pidfile(path: &Path) -> Result<i32, CriuError> {
    let content = crate::evidence::read_recorded_text(path).map_err(|source| CriuError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    match content.trim().parse::<i32>() {
        Ok(pid) if pid > 0 => Ok(pid),
        _ => Err(CriuError::BadPidfile {
            path: path.to_path_buf(),
            content,
        }),
    }
}

fn run(
    action: &str,
    cmd: &mut Command,
    timeout: Option<Duration>,
) -> Result<CmdOutcome, CriuError> {
    CmdOutcome::run(cmd, timeout).map_err(|source| CriuError::Run {
        action: action.to_string(),
        source,
    })
}

fn failed(action: &str, outcome: CmdOutcome, log: Option<PathBuf>) -> CriuError {
    // CRIU's deciding lines (its `Error (…)` lines and those before them, numbered), else the
    // log's last lines.
    let from_log = log.as_deref().and_then(|p| {
        let b = std::fs::read(p).ok()?;
        let lines = super::reason::deciding_lines(&b);
        if lines.is_empty() {
            Some(tail_lines(&String::from_utf8_lossy(&b), 5)).filter(|t| !t.is_empty())
        } else {
            let quoted: Vec<String> = lines
                .iter()
                .map(|l| format!("{}: {}", l.number, l.text.trim()))
                .collect();
            Some(quoted.join(" | "))
        }
    });
    let tail = from_log.unwrap_or_else(|| outcome.tail(5));
    CriuError::Failed {
        action: action.to_string(),
        outcome: Box::new(outcome),
        log,
        tail,
    }
}

/// `t`, else [`DEFAULT_TIMEOUT_SECS`] — or `NETPROBE_STEP_TIMEOUT_S` when set (see
/// [`crate::proc::step_timeout`]).
fn timeout_or_default(t: Option<Duration>) -> Duration {
    t.unwrap_or_else(|| crate::proc::step_timeout(Duration::from_secs(DEFAULT_TIMEOUT_SECS)))
}

fn create_dir(p: &Path) -> Result<(), CriuError> {
    std::fs::create_dir_all(p).map_err(|source| CriuError::Io {
        path: p.to_path_buf(),
        source,
    })
}

/// `p` made absolute against the current directory (lexically; no symlink resolution). Falls back
/// to `p` unchanged if the current directory is unreadable.
fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}
