//! pidfd helpers: open, signal through, and wait for exit of a process without pid-reuse races.
//!
//! Source: `pidfd_open(2)`, `pidfd_send_signal(2)`, `poll(2)` (a pidfd becomes readable when
//! the process exits), `waitid(2)` with `P_PIDFD`. Needs Linux >= 5.3 (5.4 for `P_PIDFD`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use super::error::NsError;

/// Opens a pidfd (`O_CLOEXEC` is implied by the kernel) for process `pid`.
///
/// Errors: `Gone { pid }` on `ESRCH` (no such process); `Pidfd { op: "pidfd_open", .. }` else.
pub fn pidfd_open(pid: i32) -> Result<OwnedFd, NsError> {
    if pid <= 0 {
        return Err(NsError::Gone { pid });
    }
    // SAFETY: plain syscall with integer arguments; the returned fd is owned by us.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0 as libc::c_uint) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ESRCH) {
            return Err(NsError::Gone { pid });
        }
        return Err(NsError::Pidfd {
            op: "pidfd_open",
            pid,
            source: e,
        });
    }
    // SAFETY: r is a fresh fd returned by the kernel, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(r as i32) })
}

/// Sends signal `sig` (e.g. `libc::SIGKILL`) to the process behind `fd`. Safe against pid
/// reuse: the signal can only reach the process the pidfd was opened on.
///
/// Errors: `Pidfd { op: "pidfd_send_signal", pid: -1, .. }` (the pid is not known here; callers
/// that know it map the error). `ESRCH` means the process already exited and was reaped.
pub fn pidfd_send_signal(fd: &OwnedFd, sig: i32) -> Result<(), NsError> {
    // SAFETY: syscall on a valid fd we borrow; siginfo NULL and flags 0 as documented.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0 as libc::c_uint,
        )
    };
    if r < 0 {
        return Err(NsError::Pidfd {
            op: "pidfd_send_signal",
            pid: -1,
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Waits up to `timeout` for the process behind `fd` to exit (pidfd readable, `POLLIN`).
/// Works whether or not the process is our child; it does not reap it.
///
/// Returns `Ok(true)` if it exited (or was already gone), `Ok(false)` on timeout. A zero
/// timeout just tests. Errors: `Pidfd { op: "poll", .. }` for anything but `EINTR`.
pub fn wait_pidfd_exit(fd: &OwnedFd, timeout: Duration) -> Result<bool, NsError> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(NsError::Pidfd {
                op: "poll",
                pid: -1,
                source: e,
            });
        }
        if r > 0 && pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
            return Ok(true);
        }
        if left.is_zero() {
            return Ok(false);
        }
    }
}

/// Reaps the process behind `fd` if it is our child and has exited (`waitid(P_PIDFD, ..,
/// WEXITED | WNOHANG)`). Returns `true` if it was reaped, `false` if it is not our child
/// (`ECHILD`) or not yet exited. Never blocks.
pub(crate) fn try_reap_pidfd(fd: &OwnedFd) -> bool {
    // SAFETY: zeroed siginfo is a valid out-parameter for waitid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid with a valid pidfd and an out-pointer we own.
    let r = unsafe {
        libc::waitid(
            libc::P_PIDFD,
            fd.as_raw_fd() as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG,
        )
    };
    // SAFETY: si_pid is valid to read for waitid results; 0 means nothing was reaped.
    r == 0 && unsafe { info.si_pid() } != 0
}
