//! Small helpers shared by the rungs.

use std::process::{Command, Stdio};

/// iproute2's view of the netns of `pid` (`nsenter -t PID -n ip -j addr show` and
/// `… route show table all`), for people to read beside the in-process capture.
/// Best effort: the in-process capture is the evidence assertions read.
///
/// Errors: the spawn error when `nsenter`/`ip` cannot run.
pub fn ip_view(pid: i32) -> std::io::Result<String> {
    let mut text = String::new();
    for args in [
        vec!["addr", "show"],
        vec!["route", "show", "table", "all"],
        vec!["-6", "route", "show", "table", "all"],
    ] {
        let o = Command::new("nsenter")
            .arg("-t")
            .arg(pid.to_string())
            .arg("-n")
            .arg("ip")
            .arg("-j")
            .args(&args)
            .stdin(Stdio::null())
            .output()?;
        text.push_str(&format!("$ nsenter -t {pid} -n ip -j {}\n", args.join(" ")));
        text.push_str(&String::from_utf8_lossy(&o.stdout));
        text.push_str(&String::from_utf8_lossy(&o.stderr));
        text.push('\n');
    }
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
