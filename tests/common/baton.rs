//! One former test file at a time. Each area's test binary (`tests/<area>/main.rs`) holds what
//! were separate test binaries, one module each, whose tests were written for a machine of their
//! own: leak checks that scan `ps` for criu/runc/qemu, `/run/netns`, cgroups, fixed ports and
//! slots, timings. libtest runs a binary's tests sorted by name, two at a time
//! (`--test-threads=2`), so one module's tests run together; the baton lets tests of one module
//! overlap as they did before and keeps tests of two modules apart.
//!
//! When the baton passes to another module, the process is made as a fresh test binary would be:
//! no longer a child subreaper (`PR_SET_CHILD_SUBREAPER`, set by the modules that need it), and
//! the exited children re-parented to it by an earlier module reaped (the zombies a test binary's
//! exit used to hand to pid 1).

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

struct Holders {
    /// The module that holds (or last held) the baton.
    module: Option<&'static str>,
    /// Its tests running now.
    count: usize,
}

static HOLDERS: Mutex<Holders> = Mutex::new(Holders {
    module: None,
    count: 0,
});
static FREED: Condvar = Condvar::new();

fn holders() -> MutexGuard<'static, Holders> {
    HOLDERS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The baton held by one test; released on drop (also when the test panics).
#[must_use = "the baton is released when dropped: bind it (`let _baton = ...`)"]
pub struct Baton(());

/// Waits until no test of another module runs, then holds the baton for the module of
/// `module_path` (`module_path!()` of the test: `area::module[::inner]`, the module is its second
/// segment). Call it first in every test: `let _baton = crate::common::baton(module_path!());`.
pub fn baton(module_path: &'static str) -> Baton {
    let module = module_path.split("::").nth(1).unwrap_or(module_path);
    let mut h = holders();
    while h.count > 0 && h.module != Some(module) {
        h = FREED.wait(h).unwrap_or_else(PoisonError::into_inner);
    }
    if h.module != Some(module) {
        fresh_process();
        h.module = Some(module);
    }
    h.count += 1;
    Baton(())
}

impl Drop for Baton {
    fn drop(&mut self) {
        let mut h = holders();
        h.count -= 1;
        if h.count == 0 {
            FREED.notify_all();
        }
    }
}

/// Not a child subreaper, and no exited child left unreaped (no test runs: every child still
/// exited here is a leftover of the module before).
fn fresh_process() {
    nix::sys::prctl::set_child_subreaper(false).expect("PR_SET_CHILD_SUBREAPER 0");
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    while let Ok(st) = waitpid(nix::unistd::Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
        if st == WaitStatus::StillAlive {
            break;
        }
    }
}
