//! Process guards: whatever netprobe starts or adopts is killed and reaped on every exit path
//! (success, error, panic). Drop never panics.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::process::{Child, ExitStatus};
use std::time::Duration;

use super::error::NsError;
use super::identity::ProcessIdentity;
use super::pidfd::{pidfd_open, pidfd_send_signal, try_reap_pidfd, wait_pidfd_exit};

/// How long a Drop waits for a SIGKILLed process to exit before giving up (and saying so on
/// stderr).
pub const DROP_STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Owns a `std::process::Child` that netprobe spawned: on Drop it is sent SIGKILL and reaped
/// (`waitpid`). Use [`ChildGuard::into_inner`] to take it back (disarm). It signals by pid,
/// which is safe only while the child is unreaped: do not reap it elsewhere (use
/// [`ProcessGuard`] for processes reaped by someone else).
#[derive(Debug)]
pub struct ChildGuard {
    child: Option<Child>,
}

impl ChildGuard {
    /// Guards `child` from now on.
    pub fn new(child: Child) -> ChildGuard {
        ChildGuard { child: Some(child) }
    }

    /// The child's pid.
    pub fn pid(&self) -> i32 {
        self.child.as_ref().map(|c| c.id() as i32).unwrap_or(-1)
    }

    /// The guarded child (for `stdout`, `try_wait`, ...).
    pub fn child_mut(&mut self) -> &mut Child {
        self.child
            .as_mut()
            .expect("ChildGuard holds its child until consumed")
    }

    /// SIGKILLs the child (no-op if it already exited) and reaps it.
    ///
    /// Returns its exit status. Errors: `Os { op: "kill child" | "waitpid child" }`.
    pub fn stop(mut self) -> Result<ExitStatus, NsError> {
        let child = self
            .child
            .as_mut()
            .expect("ChildGuard holds its child until consumed");
        // On a kill error the child stays in the guard, and Drop tries once more.
        child.kill().map_err(|source| NsError::Os {
            op: "kill child",
            source,
        })?;
        let status = child.wait().map_err(|source| NsError::Os {
            op: "waitpid child",
            source,
        });
        // Waited (or the wait failed, e.g. ECHILD: reaped elsewhere): never signal this pid again.
        self.child = None;
        status
    }

    /// Disarms the guard and returns the child; the caller is responsible for it again.
    pub fn into_inner(mut self) -> Child {
        self.child
            .take()
            .expect("ChildGuard holds its child until consumed")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Kills the process behind `fd` (identity `id`) with SIGKILL through the pidfd, waits up to
/// `timeout` for it to exit, reaps it if it is our child, and proves `/proc` no longer shows
/// `id`. Errors: `Pidfd`, `StopTimeout`, `StillAlive`, `ProcRead`/`StatParse`.
pub(crate) fn kill_via_pidfd(
    fd: &OwnedFd,
    id: &ProcessIdentity,
    timeout: Duration,
) -> Result<(), NsError> {
    let pid = id.pid;
    match pidfd_send_signal(fd, libc::SIGKILL) {
        Ok(()) => {}
        // Already exited and reaped: nothing left to kill.
        Err(NsError::Pidfd { source, .. }) if source.raw_os_error() == Some(libc::ESRCH) => {}
        Err(NsError::Pidfd { op, source, .. }) => return Err(NsError::Pidfd { op, pid, source }),
        Err(e) => return Err(e),
    }
    let exited = wait_pidfd_exit(fd, timeout).map_err(|e| match e {
        NsError::Pidfd { op, source, .. } => NsError::Pidfd { op, pid, source },
        e => e,
    })?;
    if !exited {
        return Err(NsError::StopTimeout {
            pid,
            timeout_ms: timeout.as_millis(),
        });
    }
    try_reap_pidfd(fd);
    prove_gone(id)
}

/// Ok if `/proc` no longer shows `id` (gone, zombie, or the pid now belongs to someone else).
pub(crate) fn prove_gone(id: &ProcessIdentity) -> Result<(), NsError> {
    match id.verify() {
        Err(NsError::Gone { .. }) | Err(NsError::IdentityChanged { .. }) => Ok(()),
        Ok(()) => Err(NsError::StillAlive { pid: id.pid }),
        Err(e) => Err(e),
    }
}

/// A process netprobe did not spawn but is responsible for (e.g. a process restored by CRIU,
/// found through its pid file), pinned by a pidfd. On Drop it is SIGKILLed through the pidfd
/// (never a reused pid), waited for up to [`DROP_STOP_TIMEOUT`] and reaped if it is our child.
#[derive(Debug)]
pub struct ProcessGuard {
    identity: ProcessIdentity,
    pidfd: Option<OwnedFd>,
    /// Kills the process if netprobe is interrupted by a signal (see [`super::cleanup`]).
    on_signal: Option<super::cleanup::Registration>,
}

impl ProcessGuard {
    /// Opens a pidfd on `identity.pid`, then proves the live process there is `identity`
    /// (pidfd first, then `/proc`, then the pidfd is checked not to have exited: so the
    /// pidfd and the identity refer to the same live process).
    ///
    /// Errors: `Gone { pid }`; `IdentityChanged` (refuses: never act on a process that is
    /// not ours); `Pidfd`; `ProcRead`/`StatParse`.
    pub fn adopt(identity: ProcessIdentity) -> Result<ProcessGuard, NsError> {
        let pid = identity.pid;
        let fd = pidfd_open(pid)?;
        identity.verify()?;
        if wait_pidfd_exit(&fd, Duration::ZERO)? {
            return Err(NsError::Gone { pid });
        }
        let on_signal = super::cleanup::register(format!("process {identity}"), move || {
            if let Ok(fd) = pidfd_open(identity.pid)
                && identity.verify().is_ok()
            {
                let _ = kill_via_pidfd(&fd, &identity, DROP_STOP_TIMEOUT);
            }
        });
        Ok(ProcessGuard {
            identity,
            pidfd: Some(fd),
            on_signal: Some(on_signal),
        })
    }

    /// The adopted identity.
    pub fn identity(&self) -> &ProcessIdentity {
        &self.identity
    }

    /// Re-proves the identity (`ProcessIdentity::verify`).
    pub fn verify(&self) -> Result<(), NsError> {
        self.identity.verify()
    }

    /// SIGKILL through the pidfd, wait up to `timeout` (POLLIN on the pidfd), reap if ours,
    /// prove gone. Errors: `Pidfd`, `StopTimeout { pid, timeout_ms }`, `StillAlive { pid }`.
    pub fn stop(mut self, timeout: Duration) -> Result<(), NsError> {
        match self.pidfd.take() {
            Some(fd) => kill_via_pidfd(&fd, &self.identity, timeout),
            None => Ok(()),
        }
    }

    /// Disarms the guard: the process keeps running and is no longer killed on Drop.
    pub fn release(mut self) -> ProcessIdentity {
        self.pidfd = None;
        self.on_signal = None;
        self.identity
    }
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        if let Some(fd) = self.pidfd.take()
            && let Err(e) = kill_via_pidfd(&fd, &self.identity, DROP_STOP_TIMEOUT)
        {
            let _ = writeln!(
                std::io::stderr(),
                "netprobe: could not stop adopted process {}: {e}",
                self.identity
            );
        }
    }
}
