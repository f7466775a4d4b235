//! Small helpers shared by the rungs.

use std::process::{Command, Stdio};

/// The iproute2 commands of [`ip_view`], one per line of `ip -batch` input: addresses, IPv4
/// routes of every table, IPv6 routes of every table (`root ::/0` selects family inet6, the
/// same output as `ip -6 -j route show table all`; batch lines cannot carry `-6`).
const IP_VIEW_BATCH: [&str; 3] = [
    "addr show",
    "route show table all",
    "route show table all root ::/0",
];

/// iproute2's view of the netns of `pid` (addresses, IPv4 and IPv6 routes of all tables), for
/// people to read beside the in-process capture. Best effort: the in-process capture is the
/// evidence assertions read.
///
/// One process, `nsenter -t PID -n ip -j -force -batch -`, fed the three commands of
/// [`IP_VIEW_BATCH`] on stdin (one JSON line each): ~3 ms instead of three nsenter+ip pairs
/// (~10 ms) per view. The text lists each command under a `$ …` header, then any stderr.
///
/// Errors: the spawn error when `nsenter`/`ip` cannot run.
pub fn ip_view(pid: i32) -> std::io::Result<String> {
    let mut child = Command::new("nsenter")
        .arg("-t")
        .arg(pid.to_string())
        .args(["-n", "ip", "-j", "-force", "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped stdin");
        // A write error (ip gone early) shows up as missing output and its stderr.
        let _ = stdin.write_all(IP_VIEW_BATCH.join("\n").as_bytes());
        let _ = stdin.write_all(b"\n");
    }
    let o = child.wait_with_output()?;
    let stdout = String::from_utf8_lossy(&o.stdout);
    let mut lines = stdout.lines();
    let mut text = String::new();
    for cmd in IP_VIEW_BATCH {
        text.push_str(&format!("$ nsenter -t {pid} -n ip -j {cmd}\n"));
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
