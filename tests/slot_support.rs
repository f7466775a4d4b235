//! Shared helpers for the slot driver tests (root, real runc + CRIU). Included with
//! `mod slot_support;` by the `slot_*` tests.
#![allow(dead_code)]

use netprobe::slot::{SlotArgs, SlotOutcome, SlotState, Verb, run_verb};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Serializes the heavy tests (2 cores shared).
pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A fresh state dir (not created: provision creates it) inside a tempdir.
pub fn state_dir(tmp: &tempfile::TempDir) -> PathBuf {
    tmp.path().join("state")
}

pub fn args(verb: Verb, slot: &str, sd: &Path) -> SlotArgs {
    let mut a = SlotArgs::new(verb, slot, sd);
    if verb == Verb::Provision {
        a.no_probe_gate = true;
        a.reason = Some("integration test".into());
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

/// Asserts nothing of the state dir is left: container, holder, mount, FUSE export, loop device.
pub fn assert_released(sd: &Path, holder_pids: &[i32]) {
    let sd_s = sd.to_string_lossy().to_string();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let left: Vec<&str> = mounts.lines().filter(|l| l.contains(&sd_s)).collect();
    assert!(left.is_empty(), "mounts left: {left:?}");
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd);
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'));
            if zombie {
                continue;
            }
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

/// Best-effort cleanup of every slot in the state dir (used when a test fails mid-way).
pub struct CleanupOnDrop(pub PathBuf, pub Vec<u32>);
impl Drop for CleanupOnDrop {
    fn drop(&mut self) {
        for s in &self.1 {
            let _ = run(Verb::Cleanup, &s.to_string(), &self.0);
        }
    }
}

/// A directory image without a TCP server: the embedded busybox rootfs with `/init.sh` running
/// `sleep` and no guest-port declaration (CRIU 4.1.1 cannot dump inet sockets on kernel >= 6.16).
pub fn sleep_image(dir: &Path) -> PathBuf {
    let root = dir.join("sleep-image");
    netprobe::slot::compat::build_busybox_rootfs(&root).unwrap();
    std::fs::write(
        root.join("init.sh"),
        "#!/bin/sh\nexec /bin/busybox sleep 100000000\n",
    )
    .unwrap();
    std::fs::remove_file(root.join(netprobe::slot::compat::GUEST_PORT_FILE)).unwrap();
    root
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
