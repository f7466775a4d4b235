//! A process in a network namespace of its own, for tests that look into a netns from outside:
//! `unshare --net -- sleep 1000` in its own session, killed and reaped on drop.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed and reaped when dropped.
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `sleep` in a netns of its own (its own session), once it runs there (at most 10 s); its
/// guard and `/proc/<pid>/ns/net`.
pub fn sleeper_in_own_netns() -> (ChildGuard, PathBuf) {
    let mut cmd = Command::new("/usr/bin/unshare");
    cmd.args(["--net", "--", "sleep", "1000"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid(2) is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
    let c = ChildGuard(cmd.spawn().expect("spawn unshare"));
    let pid = c.0.id();
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let ns = std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
        if comm.trim() == "sleep" && ns.is_some_and(|n| n != ours) {
            break;
        }
        assert!(Instant::now() < deadline, "no own netns");
        std::thread::sleep(Duration::from_millis(20));
    }
    (c, PathBuf::from(format!("/proc/{pid}/ns/net")))
}

/// Runs `script` with `sh -e` inside `netns`; panics naming the script and its stderr when it
/// fails.
pub fn sh(netns: &std::path::Path, script: &str) {
    let o =
        netprobe::probe::netns_content::run_in(netns, "/bin/sh", &["-e", "-s"], script.as_bytes())
            .unwrap();
    assert!(
        o.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}
