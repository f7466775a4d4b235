//! Bounded process trees. Every external program netprobe runs to completion (the OCI runtime,
//! CRIU, strace wrapping either, `ip`, `--version` probes) goes through [`run_tree`]: the child
//! starts its own process group (`setpgid(0, 0)` between fork and exec), the whole group — and
//! every descendant found under the child in `/proc/PID/task/TID/children`, also those that left
//! the group — is killed with SIGKILL when the time bound fires or netprobe is interrupted, and
//! the child's pipes are read with `poll(2)` so a grandchild that keeps a copy of them cannot make
//! the read outlast the bound.
//!
//! The bound of one step is [`step_timeout`]: the caller's default (120 s for the runtime and
//! CRIU), or the number of seconds in `NETPROBE_STEP_TIMEOUT_S` (for tests and slow hosts).

mod signals;
pub mod tcp;
mod tree;

pub use signals::install_tree_killer;

pub use tree::{
    TreeError, TreeOutput, kill_running_trees, run_tree, running_trees, with_inherited_fd,
};

use std::time::Duration;

/// Environment variable every program [`run_tree`] starts carries once
/// [`mark_children_with_run_pid`] was called (a probe run): the pid of that run, so that a
/// runtime or CRIU a run killed with SIGKILL left running is found by the next run
/// (`crate::probe::stale`). A slot verb never sets it: its runtime's work outlives nothing.
pub const RUN_PID_ENV: &str = "NETPROBE_RUN_PID";

static MARK_CHILDREN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// From now on, every program [`run_tree`] starts gets [`RUN_PID_ENV`]`=<this process's pid>`.
pub fn mark_children_with_run_pid() {
    MARK_CHILDREN.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// The value [`run_tree`] gives [`RUN_PID_ENV`], if children are marked.
fn child_mark() -> Option<u32> {
    MARK_CHILDREN
        .load(std::sync::atomic::Ordering::SeqCst)
        .then(std::process::id)
}

/// Whether process `pid` has exited: `kill(pid, 0)` answers `ESRCH` (reaped), or
/// `/proc/<pid>/stat` says it is a zombie (`Z`) or dead (`X`) — a process killed with SIGKILL
/// whose parent died too is re-parented to pid 1, which need not reap it at once (on this
/// machine kind pid 1 is not an init that reaps promptly), and a zombie holds no resource and
/// runs nothing. False for pid ≤ 0 and for any live process. A zombie's pid cannot be reused
/// before it is reaped, so the answer names that process.
pub fn exited(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
        == Err(nix::errno::Errno::ESRCH)
    {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'))
    })
}

/// Environment variable overriding the bound of every runtime / CRIU step, in seconds (a
/// positive number, fractions allowed: `0.5`). Unset or empty: the caller's default; any other
/// value that is not a positive number is refused before a command runs
/// ([`check_step_timeout_env`], exit 2).
pub const STEP_TIMEOUT_ENV: &str = "NETPROBE_STEP_TIMEOUT_S";

/// The bound of one step: `NETPROBE_STEP_TIMEOUT_S` seconds when set to a positive number, else
/// `default`.
pub fn step_timeout(default: Duration) -> Duration {
    std::env::var(STEP_TIMEOUT_ENV)
        .ok()
        .and_then(|v| parse_seconds(&v))
        .unwrap_or(default)
}

/// Checks `NETPROBE_STEP_TIMEOUT_S` once, before a command runs: unset or empty is fine (each
/// step keeps its default); anything else must be a positive number of seconds.
///
/// Errors: [`StepTimeoutEnvError`], the usage message naming the variable, its value and the
/// fix.
pub fn check_step_timeout_env() -> Result<(), StepTimeoutEnvError> {
    match std::env::var_os(STEP_TIMEOUT_ENV) {
        None => Ok(()),
        Some(v) if v.is_empty() => Ok(()),
        Some(v) => match v.to_str().and_then(parse_seconds) {
            Some(_) => Ok(()),
            None => Err(StepTimeoutEnvError {
                value: v.to_string_lossy().into_owned(),
            }),
        },
    }
}

/// `NETPROBE_STEP_TIMEOUT_S` is set to something that is not a positive number of seconds.
#[derive(Debug, thiserror::Error)]
#[error(
    "{STEP_TIMEOUT_ENV}={value}: not a positive number of seconds (e.g. 30 or 0.5); fix it, or unset it to keep each step's own bound"
)]
pub struct StepTimeoutEnvError {
    /// The variable's value (lossily decoded).
    pub value: String,
}

/// `"2"` → 2 s, `"0.5"` → 500 ms; `None` for empty, negative, zero, non-finite or non-numbers.
fn parse_seconds(v: &str) -> Option<Duration> {
    let s: f64 = v.trim().parse().ok()?;
    (s.is_finite() && s > 0.0 && s < 1e9).then(|| Duration::from_secs_f64(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_timeout_parsing() {
        assert_eq!(parse_seconds("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_seconds(" 0.5 "), Some(Duration::from_millis(500)));
        for bad in ["", "0", "-1", "abc", "inf", "NaN"] {
            assert_eq!(parse_seconds(bad), None, "{bad}");
        }
    }

    /// A zombie (exited, not reaped: what a SIGKILLed run whose parent died too is until pid 1
    /// reaps it) has exited; a live process has not; a reaped one has.
    #[test]
    fn a_zombie_has_exited_a_live_process_has_not() {
        assert!(!exited(std::process::id() as i32));
        assert!(!exited(0) && !exited(-1));
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id() as i32;
        let stat = format!("/proc/{pid}/stat");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(&stat).is_ok_and(|s| s.contains(") Z "))
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        let zombie = std::fs::read_to_string(&stat).unwrap_or_default();
        assert!(zombie.contains(") Z "), "{zombie}");
        assert!(exited(pid), "a zombie has exited");
        child.wait().expect("reap");
        assert!(exited(pid), "a reaped process has exited");
    }
}
