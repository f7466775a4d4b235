//! Real CRIU (from `default_criu()`), root only: dump a child that owns a network namespace with
//! `lo` up, with `--leave-running`; check the network images and the log order; kill the original;
//! `restore -d`; check the restored process is alive in a netns with `lo` UP and 127.0.0.1.
//!
//! Every process this test creates is killed on success, failure and panic ([`ChildGuard`],
//! [`PidGuard`]). Set `NETPROBE_KEEP_LOGS=DIR` to copy dump.log and restore.log to DIR, and
//! `NETPROBE_TEST_STRACE=1` to run both CRIU commands under `strace -f -tt`.

use netprobe::criu::{Criu, DumpOpts, RestoreOpts, inventory, read_pidfile};
use netprobe::host::{default_criu, refuse_unless_ready};
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills (SIGKILL) and reaps a child we spawned, on drop.
struct ChildGuard(Option<Child>);

impl ChildGuard {
    fn pid(&self) -> i32 {
        self.0.as_ref().map(|c| c.id() as i32).unwrap_or(0)
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Kills a process by pid on drop, only if it is still the same process (start time in
/// `/proc/PID/stat` unchanged), then reaps it (this test process is a child subreaper, so a
/// CRIU-restored tree is re-parented to it) or waits for it to disappear.
struct PidGuard {
    pid: i32,
    start: Option<u64>,
}

impl PidGuard {
    fn new(pid: i32) -> PidGuard {
        PidGuard {
            pid,
            start: start_time(pid),
        }
    }
}

impl Drop for PidGuard {
    fn drop(&mut self) {
        if self.start.is_none() || start_time(self.pid) != self.start {
            return;
        }
        let pid = Pid::from_raw(self.pid);
        let _ = kill(pid, Signal::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
                Ok(nix::sys::wait::WaitStatus::StillAlive) => {}
                Ok(_) => return,
                // Not our child: wait until it is gone.
                Err(_) if !Path::new(&format!("/proc/{}", self.pid)).exists() => return,
                Err(_) => {}
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// On drop, reaps every exited child of this (subreaper) process for up to one second, so no
/// zombie outlives the test and gets re-parented to an init that may not reap.
struct ReapGuard;

impl Drop for ReapGuard {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Ok(nix::sys::wait::WaitStatus::StillAlive) => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(_) => {}
                Err(_) => return, // ECHILD: no children left
            }
        }
    }
}

/// Field 22 of /proc/PID/stat (start time in clock ticks since boot).
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 2..];
    after_comm.split_whitespace().nth(19)?.parse().ok()
}

fn netns_inode(pid: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/net"))
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// `nsenter -t PID -n ip -j addr`, parsed: (lo flags contain UP, lo has 127.0.0.1).
fn lo_state(pid: i32) -> (bool, bool, String) {
    let out = Command::new("nsenter")
        .args(["-t", &pid.to_string(), "-n", "ip", "-j", "addr"])
        .stdin(Stdio::null())
        .output()
        .expect("run nsenter");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return (false, false, text);
    };
    let lo = v
        .as_array()
        .and_then(|a| a.iter().find(|l| l["ifname"] == "lo"))
        .cloned()
        .unwrap_or_default();
    let up = lo["flags"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == "UP"));
    let has_127 = lo["addr_info"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x["local"] == "127.0.0.1"));
    (up, has_127, text)
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn count(lines: &[&str], needle: &str) -> usize {
    lines.iter().filter(|l| l.contains(needle)).count()
}

#[test]
fn criu_dumps_and_restores_a_netns() {
    let _baton = crate::common::baton(module_path!());
    crate::common::require_root();
    let criu_path = default_criu();
    let facts = refuse_unless_ready(&criu_path).expect("host ready for CRIU");
    eprintln!("criu {} {}", facts.path, facts.version);
    let criu = Criu::new(&facts.path);
    nix::sys::prctl::set_child_subreaper(true).expect("become child subreaper");
    // Dropped last: reaps any task CRIU re-parented to us (e.g. one it killed on a failed restore).
    let _reaper = ReapGuard;

    let mut cmd = Command::new("/usr/bin/unshare");
    cmd.args([
        "--net",
        "--",
        "/bin/sh",
        "-c",
        "ip link set lo up; exec sleep 1000",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    // SAFETY: setsid(2) is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
    let mut original = ChildGuard(Some(cmd.spawn().expect("spawn unshare")));
    let pid = original.pid();
    let ours = netns_inode("self");
    wait_for(
        "the child's own netns with lo up",
        Duration::from_secs(10),
        || {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let ns = netns_inode(&pid.to_string());
            comm.trim() == "sleep" && !ns.is_empty() && ns != ours && lo_state(pid).0
        },
    );
    let before = lo_state(pid);
    assert!(before.0 && before.1, "lo before dump: {}", before.2);

    let tmp = tempfile::tempdir().unwrap();
    let images = tmp.path().join("images");
    let mut dump = DumpOpts::new(pid, &images);
    dump.leave_running = true;
    let strace = std::env::var_os("NETPROBE_TEST_STRACE").is_some();
    if strace {
        dump.strace = Some(tmp.path().join("strace-dump.txt"));
    }
    let outcome = criu.dump(&dump).expect("criu dump");
    eprintln!("dump: {:?} in {} ms", outcome.argv, outcome.duration_ms);
    assert!(outcome.success());

    let inv = inventory(&images).expect("inventory");
    let names: Vec<&str> = inv.iter().map(|f| f.name.as_str()).collect();
    eprintln!("images: {names:?}");
    for prefix in ["netns-", "netdev-", "ifaddr-"] {
        assert!(
            names
                .iter()
                .any(|n| n.starts_with(prefix) && n.ends_with(".img")),
            "no {prefix}*.img in {names:?}"
        );
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);

    let dump_log = std::fs::read_to_string(dump.log_path()).expect("dump.log");
    let lines: Vec<&str> = dump_log.lines().collect();
    let anchor = lines
        .iter()
        .position(|l| l.contains("Dump NET namespace info"))
        .expect("dump.log has 'Dump NET namespace info'");
    let after = &lines[anchor + 1..];
    let before_anchor = &lines[..anchor];
    for needle in [
        "Dumping netns links",
        "LD: Got link",
        "Dump NET namespace info",
    ] {
        eprintln!(
            "dump.log: {:?}: total {}, before anchor {}, after anchor {}",
            needle,
            count(&lines, needle),
            count(before_anchor, needle),
            count(after, needle)
        );
    }
    let interesting: Vec<(usize, &str)> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            l.contains("Dumping netns links")
                || l.contains("LD: Got link")
                || l.contains("Dump NET namespace info")
        })
        .map(|(i, l)| (i + 1, *l))
        .collect();
    for (n, l) in &interesting {
        eprintln!("dump.log:{n}: {l}");
    }
    assert!(
        count(after, "LD: Got link") >= 1,
        "no 'LD: Got link' after 'Dump NET namespace info'"
    );

    // The original must be gone (and reaped) so its pid is free for the restore.
    if let Some(mut c) = original.0.take() {
        let _ = c.kill();
        let _ = c.wait();
    }

    let pidfile = tmp.path().join("restored.pid");
    let mut restore = RestoreOpts::new(&images, &pidfile);
    if strace {
        restore.strace = Some(tmp.path().join("strace-restore.txt"));
    }
    let r = criu.restore(&restore);
    let restore_log = std::fs::read_to_string(restore.log_path()).unwrap_or_default();
    if let Ok(dir) = std::env::var("NETPROBE_KEEP_LOGS") {
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(Path::new(&dir).join("dump.log"), &dump_log);
        let _ = std::fs::write(Path::new(&dir).join("restore.log"), &restore_log);
    }
    if strace {
        for f in ["strace-dump.txt", "strace-restore.txt"] {
            let n = std::fs::read_to_string(tmp.path().join(f))
                .map(|t| t.lines().count())
                .unwrap_or(0);
            eprintln!("{f}: {n} lines");
        }
    }
    let r = r.expect("criu restore");
    eprintln!("restore: {:?} in {} ms", r.argv, r.duration_ms);
    let rpid = read_pidfile(&pidfile).expect("pidfile");
    let _restored = PidGuard::new(rpid);
    for l in restore_log
        .lines()
        .filter(|l| l.contains("netns") || l.contains("NET") || l.contains("net ns"))
    {
        eprintln!("restore.log: {l}");
    }
    let ns_id = names
        .iter()
        .find_map(|n| n.strip_prefix("netns-")?.strip_suffix(".img"))
        .expect("netns id");
    assert!(restore_log.contains(&format!("Add net ns {ns_id} pid {pid}")));
    assert!(
        !restore_log.contains(&format!("No netns-{ns_id}.img image")),
        "restore did not find the netns image"
    );
    assert!(restore_log.contains("Restore finished successfully"));
    assert_eq!(rpid, pid, "CRIU restores the same pid");
    let comm = std::fs::read_to_string(format!("/proc/{rpid}/comm")).unwrap_or_default();
    assert_eq!(comm.trim(), "sleep");
    let rns = netns_inode(&rpid.to_string());
    assert!(
        !rns.is_empty() && rns != ours,
        "restored netns {rns} vs ours {ours}"
    );
    let after = lo_state(rpid);
    assert!(after.0, "lo is not UP after restore: {}", after.2);
    assert!(after.1, "lo has no 127.0.0.1 after restore: {}", after.2);
}
