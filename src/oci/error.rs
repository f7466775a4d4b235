//! Errors of the `oci` module: each names the input that was wrong and the fix.

use std::path::PathBuf;

/// Everything that can go wrong while building a rootfs or bundle, or while driving an OCI
/// runtime (runc). Every variant carries the path, id or argv it is about, so the message alone
/// tells the operator what to change.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// An I/O operation (`op`, e.g. "create directory") on `path` failed.
    #[error("cannot {op} {path}: {source}")]
    Io {
        /// What was being done, in words ("create directory", "write", "read").
        op: &'static str,
        /// The file or directory it was done to.
        path: PathBuf,
        /// The underlying OS error.
        #[source]
        source: std::io::Error,
    },

    /// The busybox binary to copy into the rootfs does not exist or is not a regular file.
    #[error(
        "busybox {path} not found or not a regular file; install busybox-static (apt-get install busybox-static) or pass a rootfs with --rootfs"
    )]
    BusyboxMissing {
        /// The busybox path that was looked at.
        path: PathBuf,
    },

    /// The busybox binary is not a static ELF executable (it has a PT_INTERP program header, or is
    /// not ELF at all), so it would not run inside a bare rootfs.
    #[error(
        "busybox {path} is not a statically linked ELF executable ({reason}); install busybox-static (apt-get install busybox-static), whose /bin/busybox needs no loader"
    )]
    BusyboxNotStatic {
        /// The busybox path that was inspected.
        path: PathBuf,
        /// Why it was refused ("dynamically linked, interpreter /lib64/ld-linux-x86-64.so.2").
        reason: String,
    },

    /// The busybox binary lacks an applet the rootfs cannot do without.
    #[error(
        "busybox {path} has no `{applet}` applet (busybox --list); install busybox-static, which has it"
    )]
    BusyboxApplet {
        /// The busybox path.
        path: PathBuf,
        /// The missing applet name.
        applet: String,
    },

    /// The directory to build a rootfs in already holds files; netprobe never writes over them.
    #[error(
        "rootfs directory {path} is not empty; netprobe only builds into a new or empty directory: pass another path"
    )]
    RootfsDirNotEmpty {
        /// The directory.
        path: PathBuf,
    },

    /// A rootfs given to netprobe does not exist.
    #[error(
        "rootfs {path} does not exist; pass an existing rootfs directory, or omit --rootfs to use the built-in busybox rootfs"
    )]
    RootfsMissing {
        /// The rootfs path.
        path: PathBuf,
    },

    /// A rootfs given to netprobe is not a directory.
    #[error(
        "rootfs {path} is not a directory; pass a rootfs directory, or omit --rootfs to use the built-in busybox rootfs"
    )]
    RootfsNotDir {
        /// The rootfs path.
        path: PathBuf,
    },

    /// A rootfs has no executable `sleep` (the probes' container workload).
    #[error(
        "rootfs {path} has no sleep (looked for {}); pass a rootfs with one, or omit --rootfs to use the built-in busybox rootfs",
        looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    RootfsNoSleep {
        /// The rootfs path.
        path: PathBuf,
        /// Every candidate that was checked, in order.
        looked: Vec<PathBuf>,
    },

    /// A bundle spec is unusable before anything is written (empty args, relative path, …).
    #[error("invalid bundle spec for {bundle}: {reason}")]
    BadSpec {
        /// The bundle directory.
        bundle: PathBuf,
        /// What is wrong and how to fix it.
        reason: String,
    },

    /// oci-spec refused to build or (de)serialise the runtime spec.
    #[error("OCI runtime spec for {path}: {source}; this is a netprobe bug if the input was valid")]
    Spec {
        /// The config.json (or bundle) path concerned.
        path: PathBuf,
        /// The oci-spec error.
        #[source]
        source: oci_spec::OciSpecError,
    },

    /// config.json could not be serialised to / parsed from JSON.
    #[error("config.json {path} is not valid OCI JSON: {source}; regenerate the bundle")]
    Json {
        /// The config.json path.
        path: PathBuf,
        /// The serde_json error.
        #[source]
        source: serde_json::Error,
    },

    /// A container id that runc would refuse (empty, or characters outside `[A-Za-z0-9_+.-]`).
    #[error(
        "container id {id:?} is not a valid runc id; use letters, digits and `_+.-` only (see unique_container_id)"
    )]
    InvalidId {
        /// The id as given.
        id: String,
    },

    /// The runtime binary could not be started at all (missing, not executable).
    #[error(
        "cannot run the OCI runtime: {argv:?}: {source}; install runc (apt-get install runc) or pass its path with --runtime"
    )]
    Spawn {
        /// The argv that was attempted.
        argv: Vec<String>,
        /// The OS error from exec.
        #[source]
        source: std::io::Error,
    },

    /// The runtime did not exit within its time limit; its whole process tree was killed
    /// (SIGKILL).
    #[error(
        "the OCI runtime did not finish within {timeout_ms} ms and its whole process tree was killed: {argv:?}; {log} (the bound is NETPROBE_STEP_TIMEOUT_S seconds when set)"
    )]
    Timeout {
        /// The argv that was run.
        argv: Vec<String>,
        /// The limit, milliseconds.
        timeout_ms: u64,
        /// What its `--log` held when it was killed (its last lines, or that it was empty or
        /// there was none: the temporary log is removed afterwards), and where CRIU's log is.
        log: String,
    },

    /// The runtime's process tree was killed because netprobe is being interrupted (only seen
    /// by release actions on the signal thread).
    #[error("the OCI runtime was killed: netprobe is being interrupted: {argv:?}")]
    Interrupted {
        /// The argv that was run.
        argv: Vec<String>,
    },

    /// The runtime ran and exited non-zero (or was killed by a signal: `code` None). The
    /// runtime's own error (its stderr) comes first, then how it ended and its argv.
    #[error(
        "OCI runtime failed: {} (the runtime {}: {argv:?}){}{}",
        own_words(stderr_tail),
        how_it_ended(*code, *signal),
        log.as_ref().map(|l| format!(" (CRIU log: {})", l.display())).unwrap_or_default(),
        criu_reason.as_ref().map(|r| match code {
            Some(_) => format!("\n{r}"),
            None => format!("\n(the runtime was killed: CRIU's errors below may have followed the kill rather than caused the failure)\n{r}"),
        }).unwrap_or_default()
    )]
    Failed {
        /// The full argv.
        argv: Vec<String>,
        /// The exit code, None when killed by a signal.
        code: Option<i32>,
        /// The signal that killed it (`code` None).
        signal: Option<i32>,
        /// The last lines of stderr (and of runc's --log file), trimmed.
        stderr_tail: String,
        /// For checkpoint/restore: the CRIU log in the work path (dump.log or restore.log).
        log: Option<PathBuf>,
        /// For checkpoint/restore: CRIU's deciding lines quoted from `log` with their line
        /// numbers (see [`crate::criu::quote_log`]); None when the log holds no `Error (` line.
        criu_reason: Option<String>,
    },

    /// The runtime's output could not be understood (e.g. `runc state` JSON).
    #[error("cannot parse output of {argv:?}: {reason}; output was: {output}")]
    Parse {
        /// The argv whose output it was.
        argv: Vec<String>,
        /// What went wrong.
        reason: String,
        /// The (truncated) output.
        output: String,
    },

    /// A container that must be gone is still known to the runtime.
    #[error(
        "container {id} still exists (status {status}) under runc root {root}; it must be gone before restore: run runc --root {} delete -f {} if it is yours",
        crate::shell::arg(.root),
        crate::shell::arg(.id)
    )]
    StillExists {
        /// The container id.
        id: String,
        /// Its status per `runc state`.
        status: String,
        /// The runtime's state root.
        root: PathBuf,
    },

    /// The pid in the runtime's `--pid-file` is not a live process.
    #[error("container init pid {pid} (from {}) is not running", pid_file.display())]
    NotRunning {
        /// The pid read.
        pid: i32,
        /// The pid file.
        pid_file: PathBuf,
    },

    /// A container of that name already exists and was not created by this netprobe run.
    #[error(
        "a container named {id} already exists under runc root {root}; netprobe never deletes what it did not create: if it is yours, run runc --root {} delete -f {}",
        crate::shell::arg(.root),
        crate::shell::arg(.id)
    )]
    AlreadyExists {
        /// The container id.
        id: String,
        /// The runtime's state root.
        root: PathBuf,
    },
}

/// Result alias of the `oci` module.
pub type Result<T, E = OciError> = std::result::Result<T, E>;

/// Wrap an [`std::io::Error`] with the operation and path it concerns.
pub(crate) fn io_err(
    op: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(std::io::Error) -> OciError {
    let path = path.into();
    move |source| OciError::Io { op, path, source }
}

/// The runtime's own error: its stderr tail, or that it said nothing there.
fn own_words(stderr_tail: &str) -> &str {
    match stderr_tail.trim() {
        "" => "nothing on stderr",
        t => t,
    }
}

/// `exited with 1`, `was killed by signal 9 (SIGKILL)`, or `was killed by a signal` when
/// neither is known.
fn how_it_ended(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (Some(c), _) => format!("exited with {c}"),
        (None, Some(n)) => match nix::sys::signal::Signal::try_from(n) {
            Ok(sig) => format!("was killed by signal {n} ({})", sig.as_str()),
            Err(_) => format!("was killed by signal {n}"),
        },
        (None, None) => "was killed by a signal".into(),
    }
}

/// The `--work-path` of a runtime argv, if any.
fn work_path(argv: &[String]) -> Option<&str> {
    argv.iter()
        .position(|a| a == "--work-path")
        .and_then(|i| argv.get(i + 1))
        .map(String::as_str)
}

/// After a runtime step's whole tree was killed (bound or interruption): removes the CRIU root
/// yard its restore left ([`crate::criu::yard`]), found in the step's `restore.log` in its
/// `--work-path`. Returns "; " and what became of it, or "" when the log named none (no
/// restore, no work path, or CRIU had not reached its mount namespace).
pub(crate) fn release_criu_yards(argv: &[String]) -> String {
    let released = match restore_log(argv) {
        Some(log) => crate::criu::yard::release_named_in(&log),
        None => Vec::new(),
    };
    match crate::criu::yard::outcomes(&released) {
        Some(o) => format!("; the killed CRIU's root yard {o}"),
        None => String::new(),
    }
}

/// The `restore.log` in the `--work-path` of a runtime `restore` argv.
fn restore_log(argv: &[String]) -> Option<std::path::PathBuf> {
    let w = work_path(argv).filter(|_| argv.iter().any(|a| a == "restore"))?;
    Some(std::path::Path::new(w).join("restore.log"))
}

/// For a runtime `restore` argv: [`crate::criu::yard::register_release`] of the step's
/// `restore.log`; `None` for any other step.
pub(crate) fn register_yard_release(argv: &[String]) -> Option<crate::ns::cleanup::Registration> {
    restore_log(argv).map(crate::criu::yard::register_release)
}

/// What a killed runtime's temporary `--log` (`log`) held, for [`OciError::Timeout`]: its last
/// 5 lines (one line each, `|`-joined), or that it was empty or there was none; and the step's
/// CRIU log (`dump.log`, or `restore.log` for a restore) in the `--work-path` of `argv` (which
/// netprobe keeps in the evidence), named when CRIU wrote it, else said to be missing.
pub(crate) fn timeout_log(log: Option<&std::path::Path>, argv: &[String]) -> String {
    let criu = match work_path(argv) {
        None => "no CRIU step (no --work-path)".to_string(),
        Some(w) => {
            // The step's own log: a restore's work path may hold the checkpoint's dump.log.
            let name = match argv.iter().any(|a| a == "restore") {
                true => "restore.log",
                false => "dump.log",
            };
            let p = std::path::Path::new(w).join(name);
            match p.is_file() {
                true => format!("CRIU's log: {}", p.display()),
                false => format!("CRIU wrote no {name} in the --work-path {w}"),
            }
        }
    };
    let Some(p) = log else {
        return format!("the runtime ran without --log (its output was piped); {criu}");
    };
    let text = std::fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return format!("its --log was empty when it was killed; {criu}");
    }
    let tail = &lines[lines.len().saturating_sub(5)..];
    format!(
        "its --log ended with: {}; {criu}",
        tail.iter()
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join(" | ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_runtime_names_the_signal_and_qualifies_criu_s_errors() {
        let e = OciError::Failed {
            argv: vec!["runc".into(), "restore".into()],
            code: None,
            signal: Some(9),
            stderr_tail: String::new(),
            log: Some("/w/restore.log".into()),
            criu_reason: Some(
                "CRIU's reason (/w/restore.log):\n  68: Error (criu/util.c:1532): rlimit".into(),
            ),
        };
        let m = e.to_string();
        assert!(
            m.starts_with("OCI runtime failed: nothing on stderr (the runtime was killed by signal 9 (SIGKILL): [\"runc\", \"restore\"]) (CRIU log: /w/restore.log)"),
            "{m}"
        );
        // The runtime's own error comes first, before its argv.
        let e = OciError::Failed {
            argv: vec!["/proc/7/fd/8".into(), "restore".into()],
            code: Some(1),
            signal: None,
            stderr_tail: "write to `devices.deny`: Invalid argument".into(),
            log: None,
            criu_reason: None,
        };
        assert_eq!(
            e.to_string(),
            "OCI runtime failed: write to `devices.deny`: Invalid argument (the runtime exited with 1: [\"/proc/7/fd/8\", \"restore\"])"
        );
        assert!(m.contains("may have followed the kill"), "{m}");
        assert_eq!(how_it_ended(Some(1), None), "exited with 1");
        assert_eq!(how_it_ended(None, None), "was killed by a signal");
        assert_eq!(how_it_ended(None, Some(200)), "was killed by signal 200");
    }

    /// A yard named in a killed restore's `restore.log` (made here as `mkdtemp` names it).
    fn test_yard(tag: &str) -> std::path::PathBuf {
        let n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
            % 10_000;
        let y = std::path::PathBuf::from(format!("/tmp/.criu.mntns.{tag}{n:04}"));
        std::fs::create_dir(&y).unwrap();
        y
    }

    #[test]
    fn a_killed_restore_s_yard_is_removed_and_said() {
        let w = tempfile::tempdir().unwrap();
        let y = test_yard("ut");
        let log = format!("(00.04) mnt: Will mount 58 @ {}/mnt-58 /sys\n", y.display());
        std::fs::write(w.path().join("restore.log"), log).unwrap();
        let ws = w.path().display().to_string();
        let argv = |step: &str| -> Vec<String> {
            ["runc", step, "--work-path", &ws, "id"]
                .map(String::from)
                .to_vec()
        };
        assert_eq!(release_criu_yards(&argv("checkpoint")), "");
        assert!(y.is_dir(), "a checkpoint's work path is not looked at");
        assert_eq!(
            release_criu_yards(&argv("restore")),
            format!("; the killed CRIU's root yard {}: removed", y.display())
        );
        assert!(!y.exists());
        assert_eq!(
            release_criu_yards(&argv("restore")),
            format!(
                "; the killed CRIU's root yard {}: already gone",
                y.display()
            )
        );
        assert!(register_yard_release(&argv("delete")).is_none());
    }
}
