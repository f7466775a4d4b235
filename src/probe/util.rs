//! Small helpers shared by the rungs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The iproute2 commands of [`ip_view`], one per line of `ip -batch` input: addresses, IPv4
/// routes of every table, IPv6 routes of every table (`root ::/0` selects family inet6, the
/// same output as `ip -6 -j route show table all`; batch lines cannot carry `-6`).
const IP_VIEW_BATCH: [&str; 3] = [
    "addr show",
    "route show table all",
    "route show table all root ::/0",
];

/// The bound of one [`ip_view`].
const IP_VIEW_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// iproute2's view of the netns of `pid` (addresses, IPv4 and IPv6 routes of all tables), for
/// people to read beside the in-process capture. Best effort: the in-process capture is the
/// evidence assertions read.
///
/// One process, `ip -j -force -batch -` started inside the netns (the child `setns`es into
/// `/proc/PID/ns/net`, opened here, between fork and exec — what `nsenter -t PID -n` does, one
/// exec fewer), fed the three commands of `IP_VIEW_BATCH` on stdin (one JSON line each). The
/// text lists each command under a `$ …` header, then any stderr.
///
/// Errors: opening the netns (the process is gone), the spawn error when `ip` cannot run, or
/// `TimedOut` when it did not finish within 10 s (its process tree is then killed).
pub fn ip_view(pid: i32) -> std::io::Result<String> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let netns = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
    let fd = netns.as_raw_fd();
    let mut cmd = Command::new("ip");
    cmd.args(["-j", "-force", "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec the closure only calls setns(2), which is
    // async-signal-safe, on a descriptor this process keeps open until the spawn returns.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // Bounded as a process tree (10 s): a hung `ip` never holds the run.
    let input = format!("{}\n", IP_VIEW_BATCH.join("\n"));
    let o = crate::proc::run_tree(&mut cmd, IP_VIEW_TIMEOUT, Some(input.as_bytes()));
    drop(netns);
    let o = o.map_err(|e| match e {
        crate::proc::TreeError::Spawn { source, .. }
        | crate::proc::TreeError::Io { source, .. } => source,
        other => std::io::Error::new(std::io::ErrorKind::TimedOut, other.to_string()),
    })?;
    let stdout = String::from_utf8_lossy(&o.stdout);
    let mut lines = stdout.lines();
    let mut text = String::new();
    for cmd in IP_VIEW_BATCH {
        text.push_str(&format!("$ ip -j {cmd}   (in the netns of pid {pid})\n"));
        text.push_str(lines.next().unwrap_or(""));
        text.push_str("\n\n");
    }
    for rest in lines {
        text.push_str(rest);
        text.push('\n');
    }
    text.push_str(&String::from_utf8_lossy(&o.stderr));
    Ok(text)
}

/// Makes this process the child subreaper (`PR_SET_CHILD_SUBREAPER`): processes that CRIU or the
/// runtime restore detached (`restore -d`) are re-parented to netprobe instead of pid 1, so
/// netprobe can reap them after killing them and no zombie outlives a run.
///
/// Errors: the `prctl` errno.
pub fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer argument and touches no memory.
    let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Reaps every child that has already exited (`waitpid(-1, WNOHANG)` until none is left).
/// Called between rungs, when no rung holds a child it still means to wait for.
/// Returns the number reaped.
pub fn reap_exited_children() -> usize {
    let mut n = 0;
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes only into `status`.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return n;
        }
        n += 1;
    }
}

pub use crate::ns::mountinfo::mounts_under;

/// Lazily unmounts (`MNT_DETACH`) every mount at or below `dir`, deepest first, and returns
/// those it detached. A runtime or CRIU that was killed mid-operation leaves mounts behind
/// (runc's `criu-root`, CRIU's `.criu.cgyard.*` cgroup yard in its work directory).
pub fn detach_mounts_under(dir: &Path) -> Vec<PathBuf> {
    crate::ns::mountinfo::unmount_under(dir, |m| {
        nix::mount::umount2(m, nix::mount::MntFlags::MNT_DETACH)
    })
    .0
}

/// The name of every work area under `/var/tmp` starts with this, then the pid of the run that
/// made it and `-`.
pub const WORK_AREA_PREFIX: &str = "netprobe-";

/// A private work area under `/var/tmp` (rootfs, bundle, the runtime's `--root`), removed on
/// drop and on interruption — after every mount below it is detached, and never across a
/// mount that could not be detached (so a bind-mounted rootfs is never deleted through it).
pub struct WorkArea {
    path: PathBuf,
    _on_signal: crate::ns::cleanup::Registration,
}

impl WorkArea {
    /// Creates `/var/tmp/netprobe-<pid>-XXXXXX` (mode 0700; `<pid>` this process's, so that
    /// one a run killed with SIGKILL left is found by the next run: `crate::probe::stale`).
    ///
    /// Errors: the directory cannot be created.
    pub fn new() -> std::io::Result<WorkArea> {
        let path = tempfile::Builder::new()
            .prefix(&format!("{WORK_AREA_PREFIX}{}-", std::process::id()))
            .tempdir_in("/var/tmp")?
            .keep();
        let p = path.clone();
        let on_signal =
            crate::ns::cleanup::register(format!("work area {}", path.display()), move || {
                remove_work_area(&p);
            });
        Ok(WorkArea {
            path,
            _on_signal: on_signal,
        })
    }

    /// The work area's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Removes the work area `path` after detaching every mount below it; never across a mount
/// that could not be detached (then it says so on stderr and returns false). True when it is
/// gone.
pub(crate) fn remove_work_area(path: &Path) -> bool {
    detach_mounts_under(path);
    if mounts_under(path).is_empty() {
        let _ = std::fs::remove_dir_all(path);
        !path.exists()
    } else {
        eprintln!(
            "netprobe: left {} in place: a mount below it could not be detached",
            path.display()
        );
        false
    }
}

impl Drop for WorkArea {
    fn drop(&mut self) {
        let _ = remove_work_area(&self.path);
    }
}

/// `" (read LOG)"` when `log` exists and `error` does not name it already, else `""`: the hint
/// that follows a CRIU or runtime error (a program that died before logging leaves no log).
pub fn read_log_hint(error: &str, log: &std::path::Path) -> String {
    let shown = log.display().to_string();
    if log.is_file() && !error.contains(&shown) {
        format!(" (read {shown})")
    } else {
        String::new()
    }
}
