//! Stand-ins for helpers that belong to `ns`, `netlink` and `oci` (process identity, holder,
//! setns, network-state capture, runc wrapper, bundle). They are kept here, small and private to
//! the slot driver, until those modules land; the slot code calls only the functions below, so the
//! swap is local to this file.

use serde_json::{Map, Value, json};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------- process identity (ns)

/// A process identity: pid, start time (clock ticks after boot, `/proc/<pid>/stat` field 22) and
/// network-namespace inode (`stat /proc/<pid>/ns/net`). A pid alone is never trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessIdentity {
    /// Process id (host pid namespace).
    pub pid: i32,
    /// Start time in clock ticks since boot.
    pub start_time: u64,
    /// Inode of the process's network namespace.
    pub netns_inode: u64,
}

impl ProcessIdentity {
    /// Reads the identity of a live (non-zombie) process.
    ///
    /// Errors: the process does not exist, is a zombie, or `/proc` cannot be read.
    pub fn read(pid: i32) -> Result<Self, String> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_err(|e| format!("pid {pid}: {e}"))?;
        let rest = stat
            .rsplit_once(')')
            .map(|(_, r)| r)
            .ok_or(format!("pid {pid}: malformed stat"))?;
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.first() == Some(&"Z") || f.first() == Some(&"X") {
            return Err(format!("pid {pid} has exited (state {})", f[0]));
        }
        let start_time = f
            .get(19)
            .and_then(|s| s.parse().ok())
            .ok_or(format!("pid {pid}: no start time"))?;
        let netns_inode = fs::metadata(format!("/proc/{pid}/ns/net"))
            .map_err(|e| format!("pid {pid}: /proc/{pid}/ns/net: {e}"))?
            .ino();
        Ok(ProcessIdentity {
            pid,
            start_time,
            netns_inode,
        })
    }

    /// Re-reads the process and checks pid, start time and netns inode are unchanged.
    ///
    /// Errors: a sentence naming what differs (or that the process is gone).
    pub fn verify(&self) -> Result<(), String> {
        let now = Self::read(self.pid).map_err(|e| format!("holder not alive: {e}"))?;
        if now.start_time != self.start_time {
            return Err(format!(
                "pid {} now belongs to another process: start time {} != recorded {}",
                self.pid, now.start_time, self.start_time
            ));
        }
        if now.netns_inode != self.netns_inode {
            return Err(format!(
                "pid {}: netns inode {} != recorded {}",
                self.pid, now.netns_inode, self.netns_inode
            ));
        }
        Ok(())
    }

    /// `/proc/<pid>/ns/net`.
    pub fn netns_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/ns/net", self.pid))
    }
}

/// Starts a holder: a process in a new network namespace (`unshare(CLONE_NEWNET)`), its own
/// session (`setsid`), stdio `/dev/null`, waiting forever; `lo` is then brought up inside its
/// namespace. Returns its proven identity.
///
/// Errors: spawn failed, `lo` could not be brought up, or the identity could not be read.
pub fn spawn_holder() -> Result<ProcessIdentity, String> {
    let mut cmd = Command::new("sleep");
    cmd.arg("infinity")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: only async-signal-safe syscalls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::unshare(libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| format!("spawn holder: {e}"))?;
    let pid = child.id() as i32;
    drop(child);
    let own = fs::metadata("/proc/self/ns/net")
        .map(|m| m.ino())
        .unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(5);
    let id = loop {
        let id = ProcessIdentity::read(pid)?;
        if id.netns_inode != own {
            break id;
        }
        if Instant::now() > deadline {
            return Err(format!("holder pid {pid} never left netprobe's netns"));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let lo = run_in_netns(&id.netns_path(), || run_ip(&["link", "set", "lo", "up"]))?;
    if let Err(e) = lo {
        let _ = stop_by_identity(&id, Duration::from_secs(2));
        return Err(format!("holder lo up: {e}"));
    }
    Ok(id)
}

/// Stops the process through a pidfd: opens the pidfd, re-verifies the identity on it (so a
/// recycled pid is never signalled), sends SIGKILL, and waits for the pidfd to report the exit.
///
/// Returns `Ok(false)` when the process was already gone (nothing signalled).
/// Errors: the identity differs (another process has the pid: not signalled), or it did not exit
/// within `timeout`.
pub fn stop_by_identity(id: &ProcessIdentity, timeout: Duration) -> Result<bool, String> {
    // SAFETY: raw syscall with plain integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, id.pid, 0) } as i32;
    if fd < 0 {
        return Ok(false);
    }
    let _guard = FdGuard(fd);
    match ProcessIdentity::read(id.pid) {
        Err(_) => return Ok(false),
        Ok(now) if now != *id => {
            return Err(format!(
                "pid {} is now another process (start time {} netns {}): not signalled",
                id.pid, now.start_time, now.netns_inode
            ));
        }
        Ok(_) => {}
    }
    // SAFETY: pidfd_send_signal on our pidfd.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_send_signal, fd, libc::SIGKILL, 0usize, 0u32) };
    if rc != 0 {
        return Err(format!(
            "pidfd_send_signal: {}",
            std::io::Error::last_os_error()
        ));
    }
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as i32) };
    if n == 1 {
        // Reap if it is our child (harmless otherwise).
        // SAFETY: non-blocking waitpid.
        unsafe { libc::waitpid(id.pid, std::ptr::null_mut(), libc::WNOHANG) };
        Ok(true)
    } else {
        Err(format!(
            "pid {} did not exit within {} ms",
            id.pid,
            timeout.as_millis()
        ))
    }
}

struct FdGuard(i32);
impl Drop for FdGuard {
    fn drop(&mut self) {
        // SAFETY: closing an fd we opened.
        unsafe { libc::close(self.0) };
    }
}

/// Runs `f` on a fresh thread that has joined the network namespace at `path` (`setns`).
///
/// Errors: the namespace file cannot be opened or joined.
pub fn run_in_netns<T: Send>(path: &Path, f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let file = fs::File::open(path).map_err(|e| format!("open {}: {e}", path.display()))?;
            nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| format!("setns {}: {e}", path.display()))?;
            Ok(f())
        })
        .join()
        .map_err(|_| "netns thread panicked".to_string())?
    })
}

fn ip_bin() -> &'static str {
    if Path::new("/usr/sbin/ip").exists() {
        "/usr/sbin/ip"
    } else {
        "ip"
    }
}

fn run_ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new(ip_bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

// ---------------------------------------------------------------- network state (netlink)

fn canonical(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<(String, Value)> = m.into_iter().collect();
            keys.sort_by(|a, b| a.0.cmp(&b.0));
            let mut out = Map::new();
            for (k, v) in keys {
                out.insert(k, canonical(v));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.into_iter().map(canonical).collect()),
        o => o,
    }
}

/// Captures links, addresses and routes (IPv4 and IPv6, all tables) of the network namespace at
/// `netns` as canonical JSON (sorted keys, pretty, trailing newline): the bytes the
/// network-fidelity gate compares.
///
/// Errors: the namespace cannot be joined or `ip -j` failed.
pub fn capture_netstate(netns: &Path) -> Result<String, String> {
    let parts = run_in_netns(netns, || -> Result<Value, String> {
        let get = |args: &[&str]| -> Result<Value, String> {
            let s = run_ip(args)?;
            if s.trim().is_empty() {
                return Ok(Value::Array(vec![]));
            }
            serde_json::from_str(&s).map_err(|e| format!("ip {}: bad JSON: {e}", args.join(" ")))
        };
        Ok(json!({
            "links": get(&["-j", "-d", "link", "show"])?,
            "addresses": get(&["-j", "addr", "show"])?,
            "routes4": get(&["-j", "-4", "route", "show", "table", "all"])?,
            "routes6": get(&["-j", "-6", "route", "show", "table", "all"])?,
        }))
    })??;
    let mut s = serde_json::to_string_pretty(&canonical(parts)).map_err(|e| e.to_string())?;
    s.push('\n');
    Ok(s)
}

/// Whether the captured state has `lo` UP with `127.0.0.1/8`; returns the observed facts.
pub fn lo_up_with_127(state_json: &str) -> (bool, String) {
    let v: Value = serde_json::from_str(state_json).unwrap_or(Value::Null);
    let lo_link = v["links"]
        .as_array()
        .and_then(|a| a.iter().find(|l| l["ifname"] == "lo"))
        .cloned();
    let up = lo_link
        .as_ref()
        .and_then(|l| l["flags"].as_array())
        .map(|f| f.iter().any(|x| x == "UP"))
        .unwrap_or(false);
    let lo_addr = v["addresses"]
        .as_array()
        .and_then(|a| a.iter().find(|l| l["ifname"] == "lo"))
        .cloned();
    let has127 = lo_addr
        .as_ref()
        .and_then(|l| l["addr_info"].as_array())
        .map(|a| {
            a.iter()
                .any(|x| x["local"] == "127.0.0.1" && x["prefixlen"] == 8)
        })
        .unwrap_or(false);
    let flags = lo_link
        .map(|l| l["flags"].to_string())
        .unwrap_or_else(|| "no lo".into());
    (
        up && has127,
        format!(
            "lo flags {flags}; 127.0.0.1/8 {}",
            if has127 { "present" } else { "absent" }
        ),
    )
}

/// A line diff of two captures: `- line` only in `recorded`, `+ line` only in `observed`
/// (multiset difference, in order of appearance). Empty when byte-equal.
pub fn diff_lines(recorded: &str, observed: &str) -> String {
    if recorded == observed {
        return String::new();
    }
    use std::collections::HashMap;
    let count = |s: &str| {
        let mut m: HashMap<String, i64> = HashMap::new();
        for l in s.lines() {
            *m.entry(l.to_string()).or_default() += 1;
        }
        m
    };
    let (mut a, mut b) = (count(recorded), count(observed));
    let mut out = String::new();
    for l in recorded.lines() {
        let nb = b.get(l).copied().unwrap_or(0);
        let na = a.get_mut(l).expect("line counted");
        if *na > nb {
            out.push_str(&format!("- {l}\n"));
        }
        *na -= 1;
    }
    let a2 = count(recorded);
    for l in observed.lines() {
        let na = a2.get(l).copied().unwrap_or(0);
        let nb = b.get_mut(l).expect("line counted");
        if *nb > na {
            out.push_str(&format!("+ {l}\n"));
        }
        *nb -= 1;
    }
    if out.is_empty() {
        out.push_str("(same lines, different order or whitespace)\n");
    }
    out
}

// ---------------------------------------------------------------- runtime (oci)

/// A runc-compatible runtime: binary, state root (`--root`), CRIU binary (`--criu`).
#[derive(Debug, Clone)]
pub struct Runtime {
    /// The runtime binary.
    pub path: PathBuf,
    /// The runtime's state root.
    pub root: PathBuf,
    /// The CRIU binary passed with `--criu`.
    pub criu: PathBuf,
}

impl Runtime {
    fn cmd(&self, log: &Path) -> Command {
        let mut c = Command::new(&self.path);
        c.arg("--root")
            .arg(&self.root)
            .arg("--log")
            .arg(log)
            .arg("--log-format")
            .arg("text");
        c
    }

    fn run(
        &self,
        mut c: Command,
        what: &str,
        log: &Path,
        detached: bool,
    ) -> Result<String, String> {
        if detached {
            c.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let st = c
                .status()
                .map_err(|e| format!("cannot run {}: {e}", self.path.display()))?;
            if st.success() {
                return Ok(String::new());
            }
            let tail = fs::read_to_string(log).unwrap_or_default();
            let tail: String = tail
                .lines()
                .rev()
                .take(8)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            return Err(format!(
                "runtime {what} exited with {st}; log {}:\n{tail}",
                log.display()
            ));
        }
        c.stdin(Stdio::null());
        let out = c
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.path.display()))?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        Err(format!(
            "runtime {what} exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }

    /// `runtime create --bundle B --pid-file P ID` with stdio `/dev/null`.
    pub fn create(
        &self,
        id: &str,
        bundle: &Path,
        pid_file: &Path,
        log: &Path,
    ) -> Result<(), String> {
        let mut c = self.cmd(log);
        c.arg("create")
            .arg("--bundle")
            .arg(bundle)
            .arg("--pid-file")
            .arg(pid_file)
            .arg(id);
        self.run(c, "create", log, true).map(|_| ())
    }

    /// `runtime start ID`.
    pub fn start(&self, id: &str, log: &Path) -> Result<(), String> {
        let mut c = self.cmd(log);
        c.arg("start").arg(id);
        self.run(c, "start", log, false).map(|_| ())
    }

    /// `runtime state ID`: `Ok(None)` only when the runtime says the container does not exist.
    ///
    /// Errors: any other failure (the state cannot be proven).
    pub fn state(&self, id: &str, log: &Path) -> Result<Option<Value>, String> {
        let mut c = self.cmd(log);
        c.arg("state").arg(id).stdin(Stdio::null());
        let out = c
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.path.display()))?;
        if out.status.success() {
            return serde_json::from_slice(&out.stdout)
                .map(Some)
                .map_err(|e| format!("runtime state: not JSON: {e}"));
        }
        let err = String::from_utf8_lossy(&out.stderr);
        let logt = fs::read_to_string(log).unwrap_or_default();
        if err.contains("does not exist")
            || logt
                .lines()
                .last()
                .is_some_and(|l| l.contains("does not exist"))
        {
            return Ok(None);
        }
        Err(format!(
            "runtime state exited with {}: {}",
            out.status,
            err.trim()
        ))
    }

    /// `runtime kill ID KILL` (errors ignored: followed by a proven stop).
    pub fn kill(&self, id: &str, log: &Path) {
        let mut c = self.cmd(log);
        c.arg("kill").arg(id).arg("KILL");
        let _ = self.run(c, "kill", log, false);
    }

    /// `runtime delete --force ID`.
    pub fn delete(&self, id: &str, log: &Path) -> Result<(), String> {
        let mut c = self.cmd(log);
        c.arg("delete").arg("--force").arg(id);
        self.run(c, "delete", log, false).map(|_| ())
    }

    /// `runtime --criu C checkpoint --image-path I --work-path W ID` (the container stops).
    pub fn checkpoint(
        &self,
        id: &str,
        image: &Path,
        work: &Path,
        log: &Path,
    ) -> Result<(), String> {
        let mut c = self.cmd(log);
        c.arg("--criu")
            .arg(&self.criu)
            .arg("checkpoint")
            .arg("--image-path")
            .arg(image)
            .arg("--work-path")
            .arg(work)
            .arg(id);
        self.run(c, "checkpoint", log, true).map(|_| ())
    }

    /// `runtime --criu C restore --detach --bundle B --image-path I --work-path W --pid-file P ID`.
    pub fn restore(
        &self,
        id: &str,
        bundle: &Path,
        image: &Path,
        work: &Path,
        pid_file: &Path,
        log: &Path,
    ) -> Result<(), String> {
        let mut c = self.cmd(log);
        c.arg("--criu")
            .arg(&self.criu)
            .arg("restore")
            .arg("--detach")
            .arg("--bundle")
            .arg(bundle)
            .arg("--image-path")
            .arg(image)
            .arg("--work-path")
            .arg(work)
            .arg("--pid-file")
            .arg(pid_file)
            .arg(id);
        self.run(c, "restore", log, true).map(|_| ())
    }
}

// ---------------------------------------------------------------- bundle (oci)

/// The resources asked for in `config.json` (cgroup v1 units: microseconds, bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Resources {
    /// `cpu.cfs_quota_us`, microseconds per period.
    pub cpu_quota: i64,
    /// `cpu.cfs_period_us`, microseconds.
    pub cpu_period: u64,
    /// `memory.limit_in_bytes`, bytes.
    pub memory_limit: i64,
    /// `memory.memsw.limit_in_bytes` (memory + swap), bytes; equal to `memory_limit` = no swap.
    pub memory_swap: i64,
}

/// The slot's resources: 4 CPUs (quota 400000 per 100000 µs), 4 GiB memory, no swap.
pub const SLOT_RESOURCES: Resources = Resources {
    cpu_quota: 400_000,
    cpu_period: 100_000,
    memory_limit: 4 * 1024 * 1024 * 1024,
    memory_swap: 4 * 1024 * 1024 * 1024,
};

/// Writes `config.json` for the slot's container: args `/bin/sh /init.sh`, rootfs `rootfs`
/// (writable overlay), network namespace by path `netns`, `resources`, the runtime's default
/// capabilities, no terminal (stdio `/dev/null`), `cgroups_path`. Returns its sha256.
///
/// Errors: the file cannot be written.
pub fn write_config(
    bundle: &Path,
    netns: &Path,
    hostname: &str,
    cgroups_path: &str,
    r: &Resources,
) -> Result<String, String> {
    let caps = json!(["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]);
    let cfg = json!({
        "ociVersion": "1.0.2-dev",
        "process": {
            "terminal": false,
            "user": {"uid": 0, "gid": 0},
            "args": ["/bin/sh", "/init.sh"],
            "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "cwd": "/",
            "capabilities": {"bounding": caps, "effective": caps, "permitted": caps, "ambient": caps},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
            "noNewPrivileges": true
        },
        "root": {"path": "rootfs", "readonly": false},
        "hostname": hostname,
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]}
        ],
        "linux": {
            "cgroupsPath": cgroups_path,
            "resources": {
                "devices": [{"allow": false, "access": "rwm"}],
                "memory": {"limit": r.memory_limit, "swap": r.memory_swap},
                "cpu": {"quota": r.cpu_quota, "period": r.cpu_period}
            },
            "namespaces": [
                {"type": "pid"},
                {"type": "network", "path": netns.to_string_lossy()},
                {"type": "ipc"},
                {"type": "uts"},
                {"type": "mount"}
            ],
            "maskedPaths": ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
        }
    });
    let mut bytes = serde_json::to_vec_pretty(&cfg).map_err(|e| e.to_string())?;
    bytes.push(b'\n');
    let path = bundle.join("config.json");
    super::support::atomic_write(&path, &bytes)
        .map_err(|e| format!("write {}: {e}", path.display()))?;
    Ok(super::support::sha256_bytes(&bytes))
}

/// Path, relative to the image root, of the file declaring the guest server's TCP port on
/// 127.0.0.1 (decimal). The embedded image declares 5000; an image without it has no guest server
/// to check.
pub const GUEST_PORT_FILE: &str = "etc/netprobe-guest-port";

/// Builds the embedded default image in `dir`: a static busybox rootfs whose `/init.sh` runs
/// `busybox httpd -f -p 0.0.0.0:5000 -h /www` (serving `/www/index.html`).
///
/// Errors: `/bin/busybox` missing or an I/O error.
pub fn build_busybox_rootfs(dir: &Path) -> Result<(), String> {
    let bb = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .ok_or("busybox not found")?;
    let e = |x: std::io::Error| format!("busybox rootfs in {}: {x}", dir.display());
    for d in [
        "bin", "dev", "proc", "sys", "tmp", "www", "etc", "root", "run",
    ] {
        fs::create_dir_all(dir.join(d)).map_err(e)?;
    }
    fs::copy(bb, dir.join("bin/busybox")).map_err(e)?;
    fs::set_permissions(dir.join("bin/busybox"), fs::Permissions::from_mode(0o755)).map_err(e)?;
    for app in ["sh", "httpd", "sleep", "ls", "cat", "ip", "wget"] {
        std::os::unix::fs::symlink("busybox", dir.join("bin").join(app)).map_err(e)?;
    }
    fs::write(
        dir.join("init.sh"),
        "#!/bin/sh\nexec /bin/busybox httpd -f -p 0.0.0.0:5000 -h /www\n",
    )
    .map_err(e)?;
    fs::set_permissions(dir.join("init.sh"), fs::Permissions::from_mode(0o755)).map_err(e)?;
    fs::write(dir.join("www/index.html"), "netprobe slot guest\n").map_err(e)?;
    fs::write(dir.join(GUEST_PORT_FILE), "5000\n").map_err(e)?;
    fs::write(dir.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").map_err(e)?;
    fs::write(dir.join("etc/group"), "root:x:0:\n").map_err(e)?;
    Ok(())
}

/// HTTP GET `/` to `127.0.0.1:5000` from a thread inside the network namespace at `netns`,
/// retrying until `timeout`. Returns the status line.
///
/// Errors: no connection or no `200` status within `timeout`.
pub fn http_get_in_netns(netns: &Path, port: u16, timeout: Duration) -> Result<String, String> {
    run_in_netns(netns, || {
        use std::io::{Read, Write};
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        while Instant::now() < deadline {
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Ok(mut s) => {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                    let _ = s.write_all(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
                    let mut buf = Vec::new();
                    let _ = s.read_to_end(&mut buf);
                    let text = String::from_utf8_lossy(&buf);
                    let line = text.lines().next().unwrap_or("").to_string();
                    if line.starts_with("HTTP/1.") && line.split_whitespace().nth(1) == Some("200")
                    {
                        return Ok(line);
                    }
                    last = format!("status line {line:?}");
                }
                Err(e) => last = format!("connect 127.0.0.1:{port}: {e}"),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(last)
    })?
}
