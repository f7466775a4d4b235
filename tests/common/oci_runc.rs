//! Shared by tests/criu_oci/oci_runc.rs (root, real runc and CRIU): the prerequisites, one test at a
//! time ([`serial`]), the [`Fixture`] (busybox rootfs, bundle, private runc root), the netns
//! [`Holder`], what a process's netns and `lo` look like, and the checkpoint → restore cycle
//! with its CRIU log lines.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use netprobe::oci::{
    BundleSpec, NetnsSpec, Runtime, build_busybox_rootfs, read_pid_file, write_bundle,
};

pub const RUNC: &str = "/usr/bin/runc";
pub const CRIU: &str = netprobe::host::PRIVATE_CRIU;

static SERIAL: Mutex<()> = Mutex::new(());

/// One test of this file at a time (a lock left by a test that panicked is taken over).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Fails (never skips) unless root with runc and CRIU 4.1.1 present: in CI a missing
/// prerequisite is a test failure. Fix: run `bash host/setup.sh` as root.
pub fn can_run() -> bool {
    super::require_root();
    assert!(
        Path::new(RUNC).exists() && Path::new(CRIU).exists(),
        "missing {RUNC} or {CRIU}: run `bash host/setup.sh` as root"
    );
    true
}

pub struct Fixture {
    pub tmp: tempfile::TempDir,
    pub runtime: Runtime,
}

impl Fixture {
    pub fn new() -> Self {
        // Become a child subreaper, so container inits orphaned by runc are re-parented to this
        // test process and the guard reaps them (no `[sleep] <defunct>` under pid 1).
        nix::sys::prctl::set_child_subreaper(true).unwrap();
        let tmp = tempfile::Builder::new()
            .prefix("netprobe-oci-test-")
            .tempdir()
            .unwrap();
        build_busybox_rootfs(&tmp.path().join("rootfs")).unwrap();
        let runtime = Runtime::new(RUNC, tmp.path().join("runc-root"), Some(CRIU.into()));
        Fixture { tmp, runtime }
    }
    pub fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }
    pub fn bundle(&self, netns: NetnsSpec) -> PathBuf {
        let bundle = self.p("bundle");
        write_bundle(
            &bundle,
            &BundleSpec {
                rootfs: self.p("rootfs"),
                readonly_root: true,
                args: vec!["sleep".into(), "1000".into()],
                netns,
                resources: None,
                hostname: "np-oci".into(),
                cgroups_path: None,
            },
        )
        .unwrap();
        bundle
    }
    /// `runc list` under our private root holds nothing, and no child of ours is a zombie.
    pub fn assert_nothing_listed(&self) {
        assert_no_zombie_children();
        let out = Command::new(RUNC)
            .arg("--root")
            .arg(&self.runtime.root)
            .args(["list", "-q"])
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&out.stdout).trim().is_empty(),
            "runc list not empty: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// No exited-but-unreaped child (the container inits re-parented to us as subreaper must have
/// been reaped by the runtime wrapper). WNOWAIT: looks without reaping.
pub fn assert_no_zombie_children() {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match waitid(Id::All, flags) {
        Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::ECHILD) => {}
        other => panic!("unreaped child: {other:?}"),
    }
}

/// A holder process owning a fresh netns with `lo` up; killed and reaped on drop.
pub struct Holder {
    pub child: Child,
}

impl Holder {
    pub fn spawn() -> Self {
        let child = Command::new("/usr/bin/unshare")
            .args([
                "--net",
                "--",
                "/bin/sh",
                "-c",
                "ip link set lo up; exec sleep 1000",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let h = Holder { child };
        // Ready once the shell has exec'd sleep (so lo is up) in a netns other than ours.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let comm =
                std::fs::read_to_string(format!("/proc/{}/comm", h.pid())).unwrap_or_default();
            if comm.trim() == "sleep"
                && netns_inode(h.pid()) != netns_inode(std::process::id() as i32)
            {
                break;
            }
            assert!(Instant::now() < deadline, "holder did not become ready");
            std::thread::sleep(Duration::from_millis(20));
        }
        h
    }
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
    pub fn netns_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/ns/net", self.pid()))
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn netns_inode(pid: i32) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/net"))
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// `nsenter -t PID -n ip -j addr` → the `lo` object.
pub fn lo_of(pid: i32) -> serde_json::Value {
    let out = Command::new("/usr/bin/nsenter")
        .args(["-t", &pid.to_string(), "-n", "ip", "-j", "addr"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "nsenter ip: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .find(|l| l["ifname"] == "lo")
        .cloned()
        .expect("no lo")
}

pub fn lo_is_up(lo: &serde_json::Value) -> bool {
    lo["flags"]
        .as_array()
        .map(|f| f.iter().any(|x| x == "UP"))
        .unwrap_or(false)
}

pub fn lo_has_127(lo: &serde_json::Value) -> bool {
    lo["addr_info"]
        .as_array()
        .map(|a| {
            a.iter()
                .any(|x| x["local"] == "127.0.0.1" && x["prefixlen"] == 8)
        })
        .unwrap_or(false)
}

/// `(name, bytes)` of every file in `dir`, sorted.
pub fn inventory(dir: &Path) -> Vec<(String, u64)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Lines of the form "No netns-<digits>.img image" (not the -ct-/-exp- conntrack ones).
pub fn no_netns_image_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            l.split("No netns-").nth(1).is_some_and(|rest| {
                rest.split_once(".img image")
                    .is_some_and(|(id, _)| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
            })
        })
        .collect()
}

pub fn grep<'a>(log: &'a str, needle: &str) -> Vec<&'a str> {
    log.lines().filter(|l| l.contains(needle)).collect()
}

/// create + start, state running with a pid; returns the pid.
pub fn create_and_start(fx: &Fixture, id: &str, bundle: &Path) -> i32 {
    fx.runtime
        .create(id, bundle, &fx.p("create.pid"))
        .unwrap_or_else(|e| panic!("create: {e}"));
    let st = fx.runtime.state(id).unwrap().expect("created container");
    assert_eq!(st.status, "created");
    fx.runtime.start(id).unwrap();
    let st = fx.runtime.state(id).unwrap().expect("started container");
    assert_eq!(st.status, "running");
    assert!(st.pid > 0);
    assert_eq!(st.pid, read_pid_file(&fx.p("create.pid")).unwrap());
    eprintln!("{id}: started pid {}", st.pid);
    assert_eq!(st.bundle, bundle);
    st.pid
}

/// checkpoint → prove gone → restore; returns (restored pid, dump.log, restore.log, images).
pub fn checkpoint_restore(
    fx: &Fixture,
    id: &str,
    bundle: &Path,
) -> (i32, String, String, Vec<(String, u64)>) {
    let images = fx.p("images");
    let work = fx.p("work");
    let out = fx
        .runtime
        .checkpoint(id, &images, &work, &[])
        .unwrap_or_else(|e| panic!("checkpoint: {e}"));
    eprintln!("checkpoint: {} ms, argv {:?}", out.duration_ms, out.argv);
    // The runtime reaches CRIU through its PATH, never --criu (runc removed it in 1.4), and
    // CRIU's own log proves which one ran.
    assert!(!out.argv.iter().any(|a| a == "--criu"), "{:?}", out.argv);
    fx.runtime.prove_gone(id).unwrap();
    let dump_log = std::fs::read_to_string(work.join("dump.log")).unwrap();
    assert_eq!(
        netprobe::probe::runtime_cycle::criu_version_in_log(&dump_log).as_deref(),
        Some("4.2.1"),
        "dump.log names the requested CRIU ({CRIU})"
    );
    let inv = inventory(&images);

    let out = fx
        .runtime
        .restore(id, bundle, &images, &work, &fx.p("restore.pid"), &[])
        .unwrap_or_else(|e| panic!("restore: {e}"));
    eprintln!("restore: {} ms", out.duration_ms);
    let restore_log = std::fs::read_to_string(work.join("restore.log")).unwrap();
    let st = fx.runtime.state(id).unwrap().expect("restored container");
    assert_eq!(st.status, "running");
    assert!(st.pid > 0);
    assert_eq!(st.pid, read_pid_file(&fx.p("restore.pid")).unwrap());
    eprintln!("{id}: restored pid {}", st.pid);
    (st.pid, dump_log, restore_log, inv)
}

pub fn report(tag: &str, dump_log: &str, restore_log: &str, inv: &[(String, u64)]) {
    eprintln!("[{tag}] images: {inv:?}");
    for needle in [
        "Dump NET namespace info",
        "Dumping netns links",
        "LD: Got link",
        "extRootNetNS",
        "netns",
        "external",
        "empty",
    ] {
        for l in grep(dump_log, needle).iter().take(6) {
            eprintln!("[{tag}] dump.log   {needle:?}: {l}");
        }
    }
    for needle in [
        "No netns-",
        "extRootNetNS",
        "netns",
        "external",
        "Restore finished",
    ] {
        for l in grep(restore_log, needle).iter().take(6) {
            eprintln!("[{tag}] restore.log {needle:?}: {l}");
        }
    }
}
