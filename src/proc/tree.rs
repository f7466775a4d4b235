//! [`run_tree`]: spawn one program in its own process group, read its pipes with `poll(2)`, bound
//! the whole tree in time, kill the whole tree on timeout and on interruption.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// After the child itself has exited, how long its pipes are still read for output that a
/// straggler (a descendant that left the process group) may hold open.
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// After a tree is killed, how long [`kill_tree`] waits for every killed process to be gone.
const KILL_WAIT: Duration = Duration::from_secs(3);

/// What a bounded run produced.
#[derive(Debug)]
pub struct TreeOutput {
    /// How the child (the group leader) ended.
    pub status: ExitStatus,
    /// Everything read from the child's stdout pipe (empty when stdout was not piped).
    pub stdout: Vec<u8>,
    /// Everything read from the child's stderr pipe (empty when stderr was not piped).
    pub stderr: Vec<u8>,
    /// Wall time from spawn to the child's exit, monotonic clock.
    pub duration: Duration,
}

/// Why a bounded run did not complete.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// The program could not be started (missing, not executable, …).
    #[error("could not start {program}: {source}")]
    Spawn {
        /// The program as given to [`Command::new`].
        program: String,
        /// The OS error.
        source: io::Error,
    },
    /// Waiting for the child or reading its pipes failed.
    #[error("running {program}: {source}")]
    Io {
        /// The program.
        program: String,
        /// The OS error.
        source: io::Error,
    },
    /// The time bound fired: the whole process tree was killed (SIGKILL) and the child reaped.
    #[error(
        "{program} did not finish within {} ms; its whole process tree was killed",
        timeout.as_millis()
    )]
    TimedOut {
        /// The program.
        program: String,
        /// The bound that fired.
        timeout: Duration,
        /// Output read from the stdout pipe before the kill.
        stdout: Vec<u8>,
        /// Output read from the stderr pipe before the kill.
        stderr: Vec<u8>,
    },
    /// netprobe is being interrupted (SIGINT/SIGTERM/SIGHUP): the tree was killed. Returned
    /// only on the signal thread; any other thread stops for good instead (see
    /// [`crate::ns::cleanup::checkpoint`]).
    #[error("{program} was killed: netprobe is being interrupted")]
    Interrupted {
        /// The program.
        program: String,
    },
}

struct Running {
    id: u64,
    pid: i32,
    program: String,
    interrupted: Arc<AtomicBool>,
}

thread_local! {
    /// The descriptor [`with_inherited_fd`] hands to the trees this thread starts.
    static INHERITED_FD: std::cell::Cell<Option<std::os::fd::RawFd>> =
        const { std::cell::Cell::new(None) };
}

/// Runs `f` so that every process tree [`run_tree`] starts on this thread during `f` inherits
/// `fd` (its close-on-exec flag cleared in the child between fork and exec, never in netprobe):
/// e.g. the slot lock, held by the runtime and CRIU until they exit even when netprobe is
/// killed. Children started by other threads meanwhile do not get it.
pub fn with_inherited_fd<T>(fd: std::os::fd::BorrowedFd<'_>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<std::os::fd::RawFd>);
    impl Drop for Restore {
        fn drop(&mut self) {
            INHERITED_FD.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(INHERITED_FD.with(|c| c.replace(Some(fd.as_raw_fd()))));
    f()
}

/// The trees being waited for now. An entry's `pid` is the unreaped child (so neither the pid
/// nor the process group id can be reused while it is listed).
static TREES: Mutex<Vec<Running>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(1);

/// The programs of the trees being run now (for messages and tests).
pub fn running_trees() -> Vec<String> {
    let t = TREES.lock().unwrap_or_else(|p| p.into_inner());
    t.iter()
        .map(|r| format!("{} (pid {})", r.program, r.pid))
        .collect()
}

/// Kills every tree being run now (SIGKILL to each group and every descendant) and marks it
/// interrupted; returns what was killed. Called by the signal thread before it releases.
pub fn kill_running_trees() -> Vec<String> {
    let t = TREES.lock().unwrap_or_else(|p| p.into_inner());
    t.iter()
        .map(|r| {
            r.interrupted.store(true, Ordering::SeqCst);
            kill_tree(r.pid);
            format!("{} (pid {})", r.program, r.pid)
        })
        .collect()
}

/// Runs `cmd` as the leader of a new process group and waits at most `limit` for it.
///
/// stdio is as the caller configured it on `cmd`; the pipes among them are read here (stdout
/// and stderr) or written (`input` to stdin, then closed; `input` must fit a pipe buffer,
/// 64 KiB). When the child exits, anything left in its process group is killed and the pipes
/// are read for at most [`PIPE_GRACE`] more. When `limit` passes first, the whole tree is
/// killed (see [`kill_running_trees`]) and [`TreeError::TimedOut`] returned. A non-zero exit
/// is not an error.
///
/// Interruption: on a thread other than the signal thread, once a signal has been seen, this
/// does not start the program and stops the thread for good; a tree killed by the signal
/// thread likewise stops its waiting thread after reaping the child.
///
/// Errors: [`TreeError::Spawn`], [`TreeError::Io`], [`TreeError::TimedOut`],
/// [`TreeError::Interrupted`].
pub fn run_tree(
    cmd: &mut Command,
    limit: Duration,
    input: Option<&[u8]>,
) -> Result<TreeOutput, TreeError> {
    crate::ns::cleanup::checkpoint();
    let program = cmd.get_program().to_string_lossy().into_owned();
    if let Some(pid) = super::child_mark() {
        cmd.env(super::RUN_PID_ENV, pid.to_string());
    }
    // SAFETY: setpgid(2) is async-signal-safe and touches no memory.
    unsafe {
        let inherit = INHERITED_FD.with(|c| c.get());
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // Only in this child: the descriptor stays close-on-exec in netprobe, so a child
            // another thread starts at the same moment does not inherit it.
            if let Some(fd) = inherit
                && libc::fcntl(fd, libc::F_SETFD, 0) != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|source| TreeError::Spawn {
        program: program.clone(),
        source,
    })?;
    let pid = child.id() as i32;
    let interrupted = Arc::new(AtomicBool::new(false));
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    TREES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Running {
            id,
            pid,
            program: program.clone(),
            interrupted: interrupted.clone(),
        });
    if crate::ns::cleanup::interrupting() {
        interrupted.store(true, Ordering::SeqCst);
        kill_tree(pid);
    }
    if let (Some(mut stdin), Some(data)) = (child.stdin.take(), input) {
        // A write error (the child is gone early) shows up in its output and status.
        let _ = stdin.write_all(data);
    }
    // Duration::MAX (no bound) would overflow an Instant: a century is no bound either.
    let deadline = start + limit.min(Duration::from_secs(100 * 365 * 86_400));
    let waited = wait_reading(&mut child, deadline, &interrupted);
    TREES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|r| r.id != id);
    let status = child.wait();
    let (out, err, timed_out) = waited.map_err(|source| TreeError::Io {
        program: program.clone(),
        source,
    })?;
    let status = status.map_err(|source| TreeError::Io {
        program: program.clone(),
        source,
    })?;
    if interrupted.load(Ordering::SeqCst) {
        crate::ns::cleanup::checkpoint();
        return Err(TreeError::Interrupted { program });
    }
    if timed_out {
        return Err(TreeError::TimedOut {
            program,
            timeout: limit,
            stdout: out,
            stderr: err,
        });
    }
    Ok(TreeOutput {
        status,
        stdout: out,
        stderr: err,
        duration: start.elapsed(),
    })
}

/// Waits for the child's exit (pidfd; 20 ms polling without pidfds) while reading its stdout
/// and stderr pipes; kills the tree at `deadline`. The child is left unreaped (zombie) so its
/// pid and process group stay ours. Returns (stdout, stderr, timed out).
fn wait_reading(
    child: &mut Child,
    deadline: Instant,
    interrupted: &AtomicBool,
) -> io::Result<(Vec<u8>, Vec<u8>, bool)> {
    let pid = child.id() as i32;
    let pidfd = crate::ns::pidfd_open(pid).ok();
    let mut pipes: [Option<OwnedFd>; 2] = [
        child.stdout.take().map(OwnedFd::from),
        child.stderr.take().map(OwnedFd::from),
    ];
    for p in pipes.iter().flatten() {
        set_nonblocking(p)?;
    }
    let mut bufs = [Vec::new(), Vec::new()];
    let mut exited_at: Option<Instant> = None;
    let mut timed_out = false;
    loop {
        if exited_at.is_none() && leader_exited(pid, pidfd.as_ref()) {
            // Stragglers still in the group go now (the zombie leader pins the group id).
            // SAFETY: kill(2) on our own unreaped child's process group.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            wait_gone(&[], pid);
            exited_at = Some(Instant::now());
        }
        if pipes.iter().all(Option::is_none) && exited_at.is_some() {
            break;
        }
        let now = Instant::now();
        let until = match exited_at {
            Some(t) => (t + PIPE_GRACE).min(deadline.max(t + Duration::from_millis(100))),
            None => deadline,
        };
        if now >= until {
            if exited_at.is_some() {
                break; // a straggler outside the group holds a pipe: stop reading
            }
            timed_out = !interrupted.load(Ordering::SeqCst);
            kill_tree(pid);
            // The leader dies at once; pipes get the grace from its exit.
            wait_exit(pid, pidfd.as_ref());
            continue;
        }
        let mut left = until - now;
        if pidfd.is_none() && exited_at.is_none() {
            left = left.min(Duration::from_millis(20));
        }
        poll_once(pidfd.as_ref().filter(|_| exited_at.is_none()), &pipes, left)?;
        for (i, slot) in pipes.iter_mut().enumerate() {
            if let Some(fd) = slot
                && drain(fd, &mut bufs[i])?
            {
                *slot = None;
            }
        }
    }
    let [out, err] = bufs;
    Ok((out, err, timed_out))
}

/// One `poll(2)` over the pidfd (readable at the child's exit) and the open pipes.
fn poll_once(
    pidfd: Option<&OwnedFd>,
    pipes: &[Option<OwnedFd>; 2],
    left: Duration,
) -> io::Result<()> {
    let mut fds: Vec<libc::pollfd> = pidfd
        .into_iter()
        .chain(pipes.iter().flatten())
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs for the call's duration.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// Reads what is available; true at end of file.
fn drain(fd: &OwnedFd, buf: &mut Vec<u8>) -> io::Result<bool> {
    let mut f = std::fs::File::from(fd.try_clone()?);
    let mut chunk = [0u8; 16384];
    loop {
        match f.read(&mut chunk) {
            Ok(0) => return Ok(true),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = fcntl(fd.as_fd(), FcntlArg::F_GETFL).map_err(io::Error::from)?;
    let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
    fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags)).map_err(io::Error::from)?;
    Ok(())
}

/// Whether the child has exited, without reaping it (`waitid(WEXITED | WNOHANG | WNOWAIT)`).
fn leader_exited(pid: i32, _pidfd: Option<&OwnedFd>) -> bool {
    // SAFETY: `siginfo_t` is plain old data; all zeroes is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid writes only into `info`, a valid `siginfo_t` this function owns.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid is valid to read for a SIGCHLD-kind siginfo filled by waitid.
    r == 0 && unsafe { info.si_pid() } == pid
}

/// Waits (at most 5 s) for the killed child to exit, without reaping it.
fn wait_exit(pid: i32, pidfd: Option<&OwnedFd>) {
    let until = Instant::now() + Duration::from_secs(5);
    while !leader_exited(pid, pidfd) && Instant::now() < until {
        match pidfd {
            Some(fd) => {
                let _ = crate::ns::wait_pidfd_exit(fd, Duration::from_millis(100));
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// SIGKILL to the process group `pid` and to every descendant of `pid` (also those in other
/// groups or sessions), found through `/proc/PID/task/TID/children` while `pid` is alive; each
/// found process is stopped (SIGSTOP) before its children are listed, so it cannot fork behind
/// the walk, and signalled through a pidfd, so a reused pid is never hit.
fn kill_tree(pid: i32) {
    let mut found: Vec<OwnedFd> = Vec::new();
    let mut queue = vec![pid];
    let mut seen = std::collections::HashSet::new();
    while let Some(p) = queue.pop() {
        if !seen.insert(p) {
            continue;
        }
        let Ok(fd) = crate::ns::pidfd_open(p) else {
            continue;
        };
        if p != pid {
            let _ = crate::ns::pidfd_send_signal(&fd, libc::SIGSTOP);
        }
        queue.extend(children_of(p));
        found.push(fd);
    }
    // SAFETY: kill(2) on the process group of our own unreaped child.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    for fd in &found {
        let _ = crate::ns::pidfd_send_signal(fd, libc::SIGKILL);
    }
    wait_gone(&found, pid);
}

/// Waits (at most [`KILL_WAIT`]) until every process in `found` has exited and no live
/// (non-zombie) process is left in process group `pgid`, sending SIGKILL again to any member
/// still found: a killed process takes a moment to exit, and netprobe must not end while one it
/// started is still alive.
fn wait_gone(found: &[OwnedFd], pgid: i32) {
    let until = Instant::now() + KILL_WAIT;
    loop {
        let alive = found
            .iter()
            .filter(|fd| !crate::ns::wait_pidfd_exit(fd, Duration::ZERO).unwrap_or(true))
            .count();
        let members = live_group_members(pgid);
        if (alive == 0 && members.is_empty()) || Instant::now() >= until {
            return;
        }
        for m in members {
            // SAFETY: kill(2); `m` was a live member of our own tree's group a moment ago.
            unsafe { libc::kill(m, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Live (not zombie) processes whose process group is `pgid` (`/proc/PID/stat` field 5).
///
/// Every process is tested with `getpgid(2)` (one system call, no `/proc` file); only the
/// group's members get their `stat` read for the state and the group confirmed. This runs after
/// every bounded program ends (~28 times per runtime part of a matrix): reading every
/// process's `stat` took ~2 ms per scan with ~100 processes on this host, `getpgid` ~0.08 ms.
fn live_group_members(pgid: i32) -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            // SAFETY: getpgid(2) takes a pid and touches no memory of ours.
            if unsafe { libc::getpgid(pid) } != pgid {
                return None;
            }
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let mut f = stat.rsplit_once(") ")?.1.split_whitespace();
            let state = f.next()?;
            let pgrp: i32 = f.nth(1)?.parse().ok()?;
            (pgrp == pgid && state != "Z" && state != "X").then_some(pid)
        })
        .collect()
}

/// The children of every thread of `pid` (`/proc/PID/task/*/children`, Linux >= 3.5 with
/// CONFIG_PROC_CHILDREN; empty when unreadable).
fn children_of(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("/bin/sh");
        c.args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    #[test]
    fn captures_output_and_status() {
        let o = run_tree(
            &mut sh("echo out; echo err >&2; exit 3"),
            Duration::from_secs(10),
            None,
        )
        .unwrap();
        assert_eq!(o.status.code(), Some(3));
        assert_eq!(o.stdout, b"out\n");
        assert_eq!(o.stderr, b"err\n");
    }

    #[test]
    fn input_goes_to_stdin() {
        let mut c = sh("cat");
        c.stdin(Stdio::piped());
        let o = run_tree(&mut c, Duration::from_secs(10), Some(b"hello\n")).unwrap();
        assert_eq!(o.stdout, b"hello\n");
    }

    /// A grandchild that keeps the pipes and hangs: the bound fires, the whole tree dies, and
    /// the call returns within about the bound.
    #[test]
    fn a_hung_grandchild_holding_the_pipes_is_killed_at_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let pidf = dir.path().join("gc");
        let script = format!(
            "echo started; sleep 300 & echo $! > {}; wait",
            pidf.display()
        );
        let t0 = Instant::now();
        let e = run_tree(&mut sh(&script), Duration::from_millis(700), None).unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        match e {
            TreeError::TimedOut { stdout, .. } => assert_eq!(stdout, b"started\n"),
            other => panic!("{other}"),
        }
        let gc: i32 = std::fs::read_to_string(&pidf)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_gone(gc);
    }

    /// The child exits at once but leaves a grandchild in its group that holds the pipes: the
    /// call returns promptly and the grandchild is killed.
    #[test]
    fn a_straggler_left_by_an_exited_child_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pidf = dir.path().join("gc");
        let script = format!("sleep 300 & echo $! > {}; exit 0", pidf.display());
        let t0 = Instant::now();
        let o = run_tree(&mut sh(&script), Duration::from_secs(60), None).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert_eq!(o.status.code(), Some(0));
        let gc: i32 = std::fs::read_to_string(&pidf)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_gone(gc);
    }

    /// A descendant that left the group (its own session) is found through /proc and killed at
    /// the bound too.
    #[test]
    fn a_descendant_in_another_session_is_killed_at_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let pidf = dir.path().join("gc");
        let script = format!(
            "setsid sh -c 'echo $$ > {}; exec sleep 300' & sleep 300",
            pidf.display()
        );
        let e = run_tree(&mut sh(&script), Duration::from_millis(800), None).unwrap_err();
        assert!(matches!(e, TreeError::TimedOut { .. }), "{e}");
        let gc: i32 = std::fs::read_to_string(&pidf)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_gone(gc);
    }

    /// Gone or a zombie (an orphan re-parented to pid 1 may wait a moment to be reaped).
    fn assert_gone(pid: i32) {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat.rsplit_once(") ").map(|(_, r)| r.chars().next());
            if stat.is_empty() || state == Some(Some('Z')) {
                return;
            }
            assert!(Instant::now() < until, "pid {pid} still running: {stat}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
