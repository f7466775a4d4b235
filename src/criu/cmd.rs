//! [`CmdOutcome`]: what one run of an external binary (CRIU, an OCI runtime, strace wrapping
//! either) produced. Shared by the CRIU wrapper and, by design, the OCI runtime wrapper.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

/// What one finished run of an external command produced.
///
/// Shapes: `argv` is the program followed by its arguments, each lossily converted to UTF-8;
/// `stdout`/`stderr` are the whole streams, lossily converted to UTF-8; `duration_ms` is the wall
/// time from spawn to exit in milliseconds, measured on the monotonic clock ([`std::time::Instant`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CmdOutcome {
    /// Program and arguments, as executed (no shell is ever involved).
    pub argv: Vec<String>,
    /// Exit code; `None` when the process was ended by a signal (see `signal`).
    pub code: Option<i32>,
    /// The signal number that ended the process, if it was ended by one.
    pub signal: Option<i32>,
    /// Everything the process wrote to its stdout.
    pub stdout: String,
    /// Everything the process wrote to its stderr.
    pub stderr: String,
    /// Wall time from spawn to exit, milliseconds, monotonic clock.
    pub duration_ms: u64,
}

/// Why a command could not be run to completion (as opposed to running and failing, which is a
/// [`CmdOutcome`] with a non-zero `code`).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The program could not be started (missing, not executable, …).
    #[error("could not start {program}: {source} (check that it exists and is executable)")]
    Spawn {
        /// The program as given to [`Command::new`].
        program: String,
        /// The OS error.
        source: io::Error,
    },
    /// Capturing the output or waiting for the process failed.
    #[error("running {program} failed while capturing its output: {source}")]
    Io {
        /// The program as given to [`Command::new`].
        program: String,
        /// The OS error.
        source: io::Error,
    },
    /// The process did not exit within the timeout: its whole process tree was killed
    /// (SIGKILL) and the process reaped.
    #[error(
        "{program} did not finish within {timeout_ms} ms and its whole process tree was killed \
         (the bound is NETPROBE_STEP_TIMEOUT_S seconds when set); partial output: {partial_tail}"
    )]
    Timeout {
        /// The program as given to [`Command::new`].
        program: String,
        /// The timeout that expired, milliseconds.
        timeout_ms: u64,
        /// The last lines of stderr (or stdout) written before it was killed.
        partial_tail: String,
    },
    /// The process tree was killed because netprobe is being interrupted (seen only by release
    /// actions on the signal thread).
    #[error("{program} was killed: netprobe is being interrupted")]
    Interrupted {
        /// The program as given to [`Command::new`].
        program: String,
    },
}

impl CmdOutcome {
    /// Runs `cmd` to completion with stdin from `/dev/null` and stdout/stderr captured through
    /// anonymous temporary files (never pipes, so a detached grandchild that keeps a copy of the
    /// descriptors cannot make this hang), through [`crate::proc::run_tree`]. `timeout` bounds
    /// the wall time; on expiry the whole process tree is killed with SIGKILL, the child
    /// reaped, and [`RunError::Timeout`] is returned.
    ///
    /// Errors: [`RunError::Spawn`] when the program cannot be started, [`RunError::Io`] when the
    /// temporary files cannot be created or read, [`RunError::Timeout`].
    /// A non-zero exit is **not** an error here: check [`CmdOutcome::success`].
    pub fn run(cmd: &mut Command, timeout: Option<Duration>) -> Result<CmdOutcome, RunError> {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut argv = vec![program.clone()];
        argv.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
        let io_err = |source| RunError::Io {
            program: program.clone(),
            source,
        };
        let mut out = tempfile::tempfile().map_err(io_err)?;
        let mut err = tempfile::tempfile().map_err(io_err)?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone().map_err(io_err)?))
            .stderr(Stdio::from(err.try_clone().map_err(io_err)?));
        // The whole process tree is bounded: it runs as its own process group, killed as a
        // group (with every descendant) at the bound or when netprobe is interrupted.
        let limit = timeout.unwrap_or(Duration::MAX);
        let (status, duration_ms) = match crate::proc::run_tree(cmd, limit, None) {
            Ok(o) => (o.status, o.duration.as_millis() as u64),
            Err(crate::proc::TreeError::Spawn { source, .. }) => {
                return Err(RunError::Spawn { program, source });
            }
            Err(crate::proc::TreeError::Io { source, .. }) => return Err(io_err(source)),
            Err(crate::proc::TreeError::TimedOut { .. }) => {
                let partial = read_all(&mut err).unwrap_or_default();
                let partial = if partial.trim().is_empty() {
                    read_all(&mut out).unwrap_or_default()
                } else {
                    partial
                };
                return Err(RunError::Timeout {
                    program,
                    timeout_ms: limit.as_millis() as u64,
                    partial_tail: tail_lines(&partial, 5),
                });
            }
            Err(crate::proc::TreeError::Interrupted { .. }) => {
                return Err(RunError::Interrupted { program });
            }
        };
        let stdout = read_all(&mut out).map_err(io_err)?;
        let stderr = read_all(&mut err).map_err(io_err)?;
        Ok(CmdOutcome {
            argv,
            code: status.code(),
            signal: status.signal(),
            stdout,
            stderr,
            duration_ms,
        })
    }

    /// True when the process exited with code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// How the process ended, for messages: `exit code N` or `signal N`.
    pub fn status_text(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(s)) => format!("signal {s}"),
            (None, None) => "unknown status".to_string(),
        }
    }

    /// The last `n` non-empty lines of stderr followed by stdout, joined with ` | `, for error
    /// messages. Empty string when both are empty.
    pub fn tail(&self, n: usize) -> String {
        let both = format!("{}\n{}", self.stderr, self.stdout);
        tail_lines(&both, n)
    }
}

/// The last `n` non-empty lines of `text`, trimmed, joined with ` | `.
pub fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let start = lines.len().saturating_sub(n);
    lines[start..].join(" | ")
}

fn read_all(f: &mut File) -> io::Result<String> {
    f.seek(SeekFrom::Start(0))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}
