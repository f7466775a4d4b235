//! [`ContainerGuard`]: a container owned for a lifetime, killed and deleted on drop, error,
//! panic or signal, its leftover cgroups removed.

use super::runtime::{Runtime, says_does_not_exist};
use super::{OciError, Result};
use std::time::Instant;

/// Owns a container for its lifetime: on drop (success, error or panic) it runs
/// `runc kill ID KILL` and `runc delete --force ID`, ignoring "does not exist", so nothing leaks.
/// Create it right after [`refuse_existing`] and before `create`/`restore`.
///
/// Zombies: when runc exits, the container's init is re-parented to the nearest child subreaper,
/// else to pid 1, which leaves a `[sleep] <defunct>` until pid 1 gets to it. A caller that has set
/// `PR_SET_CHILD_SUBREAPER` inherits the init instead; [`Runtime::kill`] (KILL),
/// [`Runtime::delete`] and [`Runtime::checkpoint`] (without `--leave-running`/`--pre-dump`) then
/// reap that pid (waitpid on that pid only, at most 2 s), and so does this guard.
#[derive(Debug)]
pub struct ContainerGuard {
    /// The runtime that owns the container.
    pub runtime: Runtime,
    /// The container id.
    pub id: String,
    armed: bool,
    /// The container's init pid when the caller knows it (from the runtime's `--pid-file`, see
    /// [`ContainerGuard::set_pid`]): cleanup then needs no `runc state` to find it.
    pid: Option<i32>,
    /// Kills and deletes the container if netprobe is interrupted by a signal
    /// (see [`crate::ns::cleanup`]).
    on_signal: Option<crate::ns::cleanup::Registration>,
}

/// What a signal-path release of container `id` proves, the runtime asked again after its kill
/// and delete: `killed and deleted; runtime state: does not exist (proven gone)`, or `FAILED: …`
/// naming what the runtime still says or why it could not be asked.
pub(crate) fn release_proof(rt: &Runtime, id: &str) -> String {
    match rt.state(id) {
        Ok(None) => "killed and deleted; runtime state: does not exist (proven gone)".into(),
        Ok(Some(st)) => format!("FAILED: runtime state still says {}", st.status),
        Err(e) => format!("FAILED: runtime state could not be asked: {e}"),
    }
}

impl ContainerGuard {
    /// Guard container `id` of `runtime` (armed).
    pub fn new(runtime: &Runtime, id: impl Into<String>) -> Self {
        let id = id.into();
        let (rt, cid) = (runtime.clone(), id.clone());
        let on_signal =
            crate::ns::cleanup::register_reporting(format!("container {id}"), move || {
                let _ = rt.kill(&cid, "KILL");
                let _ = rt.delete(&cid, true);
                super::cgroups::remove_leftover_cgroups(&cid);
                Some(release_proof(&rt, &cid))
            });
        Self {
            runtime: runtime.clone(),
            id,
            armed: true,
            pid: None,
            on_signal: Some(on_signal),
        }
    }

    /// Records the container's current init pid (read from the runtime's `--pid-file` after
    /// `create`/`restore`), so [`release`](Self::release) kills and reaps it without asking
    /// `runc state` first. Set it again after every restore (the pid changes).
    pub fn set_pid(&mut self, pid: i32) {
        self.pid = (pid > 0).then_some(pid);
    }

    /// Do not clean up on drop (the container outlives this guard, e.g. a provisioned slot).
    pub fn disarm(&mut self) {
        self.armed = false;
        self.on_signal = None;
    }

    /// Kill and force-delete now; then prove it is gone.
    ///
    /// Errors: those of [`Runtime::delete`] other than "does not exist", and of
    /// [`Runtime::prove_gone`].
    pub fn release(&mut self) -> Result<()> {
        self.armed = false;
        // Kept until the release is done (see Container::release).
        let _registration = self.on_signal.take();
        // kill and delete reap the init when it is our child (see the type's doc).
        // With the pid known, no `runc state` before the kill; after a successful KILL (init
        // reaped) the delete needs no pid either. `prove_gone` below still asks `runc state`.
        let killed = match self.pid {
            Some(pid) => self.runtime.kill_reaping(&self.id, "KILL", Some(pid)),
            None => self.runtime.kill(&self.id, "KILL"),
        }
        .is_ok();
        let deleted = match self.runtime.delete_inner(&self.id, true, !killed) {
            Ok(_) => Ok(()),
            Err(OciError::Failed { stderr_tail, .. }) if says_does_not_exist(&stderr_tail) => {
                Ok(())
            }
            Err(e) => Err(e),
        };
        // A runtime killed mid-restore can leave the container's cgroups without any state
        // to delete them by.
        super::cgroups::remove_leftover_cgroups(&self.id);
        deleted?;
        self.runtime.prove_gone(&self.id)
    }
}

/// Reap `pid` if it is our child (it is when this process is a child subreaper,
/// `prctl(PR_SET_CHILD_SUBREAPER)`: the runtime exits and the container's init is re-parented
/// here). Otherwise (`ECHILD`) do nothing: pid 1 reaps it. Waits at most 2 s for the exit, on
/// a pidfd (woken at the exit, no polling interval; 10 ms polling if pidfds are unavailable).
pub(crate) fn reap_if_child(pid: i32) {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let deadline = Instant::now() + std::time::Duration::from_secs(2);
    let mut pidfd = None;
    loop {
        match waitpid(nix::unistd::Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) if Instant::now() < deadline => {
                // Our child, still running: the pid cannot be reused before we reap it.
                if pidfd.is_none() {
                    pidfd = crate::ns::pidfd_open(pid).ok();
                }
                let left = deadline.saturating_duration_since(Instant::now());
                let waited = pidfd
                    .as_ref()
                    .is_some_and(|fd| crate::ns::wait_pidfd_exit(fd, left).is_ok());
                if !waited {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
            _ => return,
        }
    }
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        if self.armed
            && let Err(e) = self.release()
        {
            eprintln!("netprobe: cleaning up container {}: {e}", self.id);
        }
    }
}
