//! Shared helpers for the slot driver tests (root, real runc + CRIU), used as
//! `crate::common::slot_support` by the `slot_*` modules (a module, not a test binary of its own).
#![allow(dead_code)]

use netprobe::slot::{SlotArgs, SlotOutcome, SlotState, Verb, run_verb};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Serializes the heavy tests (2 cores shared).
pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The netprobe binary: the holder is started from it (`__holder`), and the CLI tests run it.
pub use super::EXE;

pub use super::require_root;

/// A fresh state dir (not created: provision creates it) inside a tempdir.
pub fn state_dir(tmp: &tempfile::TempDir) -> PathBuf {
    tmp.path().join("state")
}

/// Arguments for a library call; the holder is started from [`EXE`] (the test binary is not
/// netprobe). Provision overrides the probe gate with a reason.
pub fn args(verb: Verb, slot: &str, sd: &Path) -> SlotArgs {
    let mut a = SlotArgs::new(verb, slot, sd);
    a.holder_exe = Some(EXE.into());
    if verb == Verb::Provision {
        a.no_probe_gate = true;
        a.reason = Some("integration test".into());
        // Tests run stand-in scripts around the real binaries (wrappers that hang, fail, …).
        a.allow_script_binaries = Some("integration test stand-ins".into());
    }
    a
}

pub fn run(verb: Verb, slot: &str, sd: &Path) -> Result<SlotOutcome, netprobe::slot::SlotError> {
    run_verb(&args(verb, slot, sd))
}

pub fn ok(verb: Verb, slot: &str, sd: &Path) -> SlotOutcome {
    match run(verb, slot, sd) {
        Ok(o) => o,
        Err(e) => panic!("{} failed (exit {}): {e}", verb.as_str(), e.exit_code()),
    }
}

pub fn gate<'a>(o: &'a SlotOutcome, name: &str) -> &'a netprobe::slot::Gate {
    o.gates
        .iter()
        .rev()
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("no gate {name} in {:?}", o.gates))
}

pub fn state(sd: &Path, slot: u32) -> SlotState {
    SlotState::load(&sd.join(format!("slot-{slot}/state.json"))).expect("state.json")
}

/// True when `pid` is a zombie or gone (nothing left to release).
fn dead(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty()
        || stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
}

/// Asserts nothing of the state dir is left: container (runtime state root and processes),
/// holder (the recorded pids, and any live `netprobe __holder` started from [`EXE`]), mount,
/// FUSE export (qemu-storage-daemon) or loop device.
pub fn assert_released(sd: &Path, holder_pids: &[i32]) {
    let sd_s = sd.to_string_lossy().to_string();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let left: Vec<&str> = mounts.lines().filter(|l| l.contains(&sd_s)).collect();
    assert!(left.is_empty(), "mounts left: {left:?}");
    let exe = std::fs::canonicalize(EXE).unwrap();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() {
            if dead(pid) {
                continue;
            }
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            assert!(
                !(cmd.contains("qemu-storage-daemon") && cmd.contains(&sd_s)),
                "qemu-storage-daemon left: pid {pid}"
            );
            assert!(
                !(cmd.contains("runc") && cmd.contains(&sd_s)),
                "runtime process left: pid {pid} {cmd}"
            );
            if holder_pids.contains(&pid) {
                panic!("holder pid {pid} still alive: {cmd}");
            }
            let pexe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
            assert!(
                !(cmd.contains("__holder") && pexe.as_deref() == Some(exe.as_path())),
                "netprobe __holder left: pid {pid} {cmd}"
            );
        }
    }
    for e in std::fs::read_dir("/sys/block").unwrap().flatten() {
        let n = e.file_name().to_string_lossy().to_string();
        if n.starts_with("loop")
            && let Ok(b) = std::fs::read_to_string(format!("/sys/block/{n}/loop/backing_file"))
        {
            assert!(!b.contains(&sd_s), "loop device {n} left, backed by {b}");
        }
    }
    // No container known to any slot's runtime root.
    if let Ok(rd) = std::fs::read_dir(sd) {
        for s in rd.flatten() {
            let root = s.path().join("runc-root");
            if let Ok(c) = std::fs::read_dir(&root) {
                let names: Vec<_> = c.flatten().map(|e| e.file_name()).collect();
                assert!(
                    names.is_empty(),
                    "runtime state left in {}: {names:?}",
                    root.display()
                );
            }
        }
    }
}

/// Holder pids recorded in every slot of the state dir (for [`assert_released`]).
pub fn holder_pids(sd: &Path) -> Vec<i32> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir(sd) {
        for s in rd.flatten() {
            if let Ok(t) = std::fs::read_to_string(s.path().join("holder.json"))
                && let Ok(j) = serde_json::from_str::<serde_json::Value>(&t)
                && let Some(p) = j["pid"].as_i64()
            {
                v.push(p as i32);
            }
        }
    }
    v
}

/// Best-effort cleanup of every slot in the state dir (used when a test fails mid-way). When
/// cleanup refuses — a test that failed while it staged a container the runtime lost track of
/// (cleanup names, never kills, processes it does not know) — every process in the slot
/// holder's network namespace is killed and cleanup runs again, so a failed test leaves
/// nothing running or mounted.
pub struct CleanupOnDrop(pub PathBuf, pub Vec<u32>);
impl Drop for CleanupOnDrop {
    fn drop(&mut self) {
        for s in &self.1 {
            if run(Verb::Cleanup, &s.to_string(), &self.0).is_ok() {
                continue;
            }
            let holder = std::fs::read_to_string(self.0.join(format!("slot-{s}/holder.json")))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|j| j["netns_inode"].as_u64());
            if let Some(ino) = holder {
                kill_netns_members(&format!("net:[{ino}]"));
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            let _ = run(Verb::Cleanup, &s.to_string(), &self.0);
        }
    }
}

/// SIGKILL to every process (but this one) whose `/proc/PID/ns/net` is `link` (`net:[INODE]`).
fn kill_netns_members(link: &str) {
    let me = std::process::id() as i32;
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let ns = std::fs::read_link(e.path().join("ns/net")).unwrap_or_default();
        if pid != me && ns.to_string_lossy() == link {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// A directory image without a TCP server: the embedded busybox rootfs
/// (`netprobe::oci::build_busybox_rootfs`) with `/init.sh` running `sleep` and no guest-port
/// declaration, so the `guest-http` gate is recorded as not applicable.
pub fn sleep_image(dir: &Path) -> PathBuf {
    let root = dir.join("sleep-image");
    netprobe::oci::build_busybox_rootfs(&root).unwrap();
    netprobe::evidence::fsio::write_executable(
        &root.join("init.sh"),
        "#!/bin/sh\nexec /bin/busybox sleep 100000000\n",
        0o755,
    )
    .unwrap();
    root
}

/// A directory image with the guest server: the embedded busybox rootfs (httpd on
/// 0.0.0.0:5000) declaring its port in `etc/netprobe-guest-port`.
pub fn http_image(dir: &Path) -> PathBuf {
    let root = dir.join("http-image");
    netprobe::oci::build_busybox_rootfs(&root).unwrap();
    std::fs::write(
        root.join(netprobe::slot::gate::guest_net::GUEST_PORT_FILE),
        format!("{}\n", netprobe::oci::INIT_HTTP_PORT),
    )
    .unwrap();
    root
}

/// Runs the netprobe binary with `args` (and extra environment); returns exit code, stdout,
/// stderr.
pub fn cli(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut c = std::process::Command::new(EXE);
    c.args(args).env_remove("NETPROBE_EXE");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `netprobe slot VERB --slot=N --state-dir SD [extra]` through the binary.
pub fn cli_slot(
    verb: &str,
    slot: &str,
    sd: &Path,
    extra: &[&str],
) -> (Option<i32>, String, String) {
    cli_slot_env(verb, slot, sd, extra, &[])
}

/// As [`cli_slot`], with extra environment variables.
pub fn cli_slot_env(
    verb: &str,
    slot: &str,
    sd: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String, String) {
    let sd = sd.to_string_lossy().to_string();
    let slot = format!("--slot={slot}");
    let mut a = vec!["slot", verb, slot.as_str(), "--state-dir", sd.as_str()];
    a.extend_from_slice(extra);
    cli(&a, env)
}

/// The slot-state JSON Schema validator (`evidence-schema/slot-state.schema.json`).
pub fn slot_state_validator() -> jsonschema::Validator {
    let s: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/evidence-schema/slot-state.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    jsonschema::validator_for(&s).unwrap()
}

/// Asserts `doc` validates against the slot-state schema.
pub fn assert_valid(v: &jsonschema::Validator, doc: &serde_json::Value) {
    let errs: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errs.is_empty(), "{errs:?}\n{doc:#}");
}

/// Provision args with a directory image.
pub fn provision_dir(
    slot: &str,
    sd: &Path,
    image: &Path,
) -> Result<SlotOutcome, netprobe::slot::SlotError> {
    let mut a = args(Verb::Provision, slot, sd);
    a.image = Some(image.to_path_buf());
    run_verb(&a)
}

/// A wrapper `name` in `dir` around `real`: when `dir/NAME.hang` exists and an argument equals
/// its content, it forks `sleep 1000` (pid to `dir/gc.pid`) and waits; otherwise execs `real`.
pub fn flagged_wrapper(dir: &Path, name: &str, real: &Path) -> PathBuf {
    let path = dir.join(name);
    let flag = dir.join(format!("{name}.hang"));
    netprobe::evidence::fsio::write_executable(
        &path,
        format!(
            "#!/bin/sh\n\
             if [ -e {flag} ]; then\n\
               step=$(cat {flag})\n\
               for a in \"$@\"; do\n\
                 if [ \"$a\" = \"$step\" ]; then\n\
                   sleep 1000 &\n\
                   echo $! > {dir}/gc.pid\n\
                   wait\n\
                 fi\n\
               done\n\
             fi\n\
             exec {real} \"$@\"\n",
            flag = flag.display(),
            dir = dir.display(),
            real = real.display()
        ),
        0o755,
    )
    .unwrap();
    path
}

/// True when `pid` is gone or a zombie.
pub fn gone(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty()
        || stat
            .rsplit_once(") ")
            .is_some_and(|(_, r)| r.starts_with('Z'))
}

/// `netprobe slot VERB --slot=SLOT EXTRA…` started while `NAME.hang` in `wdir` names `step`
/// (default bound; see [`flagged_wrapper`]), sent `signal` once the wrapper hangs (its
/// grandchild's pid in `gc.pid`), and waited for (at most `wait_s` seconds). Returns the exit
/// code, the time from the signal to the exit, and stderr; `before_signal` runs while the step
/// hangs.
pub fn interrupt_hung(
    wdir: &Path,
    sd: &Path,
    (slot, extra): (&str, &[&str]),
    (verb, name, step): (&str, &str, &str),
    signal: i32,
    wait_s: u64,
    before_signal: impl FnOnce(),
) -> (Option<i32>, Duration, String) {
    let _ = std::fs::remove_file(wdir.join("gc.pid"));
    std::fs::write(wdir.join(format!("{name}.hang")), step).unwrap();
    let errf = wdir.join(format!("{verb}-signal-stderr.txt"));
    let mut child = std::process::Command::new(EXE)
        .args(["slot", verb, &format!("--slot={slot}"), "--state-dir"])
        .arg(sd)
        .args(extra)
        .env_remove("NETPROBE_STEP_TIMEOUT_S")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&errf).unwrap())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while !wdir.join("gc.pid").is_file() {
        assert!(
            Instant::now() < until,
            "{name} never hung at {step}: {}",
            std::fs::read_to_string(&errf).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    before_signal();
    let t0 = Instant::now();
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if t0.elapsed() > Duration::from_secs(wait_s) {
            let _ = child.kill();
            panic!("slot {verb} still running {wait_s} s after signal {signal}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    std::fs::remove_file(wdir.join(format!("{name}.hang"))).unwrap();
    let took = t0.elapsed();
    (
        code,
        took,
        std::fs::read_to_string(&errf).unwrap_or_default(),
    )
}

/// A qcow2 image of [`http_image`] (mkfs.ext4 -d, qemu-img convert) and its sha256.
pub fn build_qcow2(dir: &Path) -> (PathBuf, String) {
    let root = http_image(dir);
    let raw = dir.join("image.ext4");
    let q = dir.join("image.qcow2");
    let st = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", "-d"])
        .arg(&root)
        .arg(&raw)
        .arg("64M")
        .status()
        .unwrap();
    assert!(st.success());
    let st = std::process::Command::new("qemu-img")
        .args(["convert", "-f", "raw", "-O", "qcow2"])
        .arg(&raw)
        .arg(&q)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::remove_file(&raw).unwrap();
    let (sha, _) = netprobe::evidence::sha256_file(&q).unwrap();
    (q, sha)
}

/// A private copy of `src` at `dir/name` (executable, proven not open for writing before it
/// is run), so a test can change or swap it without touching the host's binary.
pub fn private_copy(dir: &Path, name: &str, src: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(name);
    std::fs::copy(src, &p).unwrap();
    netprobe::evidence::fsio::wait_no_writer(&p, netprobe::evidence::fsio::NO_WRITER_WAIT).unwrap();
    p
}

/// The error of a verb expected to fail (panics when it succeeds).
pub fn err(a: &SlotArgs) -> netprobe::slot::SlotError {
    match run_verb(a) {
        Ok(o) => panic!("{} unexpectedly succeeded: {}", a.verb.as_str(), o.summary),
        Err(e) => e,
    }
}

/// Asserts a gate error: exit code, gate, and a message naming the slot and the gate.
pub fn assert_gate_err(e: &netprobe::slot::SlotError, slot: &str, gate: &str, code: i32) {
    assert_eq!(e.exit_code(), code, "{e}");
    assert_eq!(e.gate.as_deref(), Some(gate), "{e}");
    let text = e.to_string();
    assert!(
        text.contains(&format!("slot {slot}")) && text.contains(gate),
        "{text}"
    );
}

/// The newest evidence folder of `verb` in slot folder `slot_dir` (`evidence/NNNN-<verb>`).
pub fn newest(slot_dir: &Path, verb: &str) -> PathBuf {
    std::fs::read_dir(slot_dir.join("evidence"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(&format!("-{verb}")))
        .max()
        .unwrap()
}

/// Plants CRIU's exact iptables lock (IPv4 and IPv6,
/// `netprobe::netlink::criu_unlock::IPTABLES_LOCK`) once more in the holder's netns: one more
/// jump to `CRIU` per chain each time, as each dump or restore that locks adds one.
pub fn plant_lock(h: &netprobe::ns::ProcessIdentity) {
    use std::io::Write;
    netprobe::ns::run_in_netns(&h.netns_path(), || {
        for tool in ["iptables-restore", "ip6tables-restore"] {
            let mut c = std::process::Command::new(tool)
                .args(["-w", "--noflush"])
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            c.stdin
                .take()
                .unwrap()
                .write_all(netprobe::netlink::criu_unlock::IPTABLES_LOCK.as_bytes())
                .unwrap();
            assert!(c.wait().unwrap().success(), "{tool}");
        }
    })
    .unwrap();
}

/// CRIU's lock as a capture with the tools in the holder's netns shows it.
pub fn lock_in(h: &netprobe::ns::ProcessIdentity) -> Vec<String> {
    netprobe::ns::run_in_netns(&h.netns_path(), || {
        let (s, _) = netprobe::netlink::netfilter::capture_with_tools_here().unwrap();
        netprobe::netlink::netfilter::criu_lock(&s)
    })
    .unwrap()
}

/// `out` parsed as JSON; panics naming the text when it is not.
pub fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// True when the last record of gate `name` in a verb's JSON document `doc` (`gates[]`) is
/// proven.
pub fn gate_proven(doc: &serde_json::Value, name: &str) -> bool {
    doc["gates"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|g| g["name"] == name)
        .is_some_and(|g| g["proven"] == true)
}
