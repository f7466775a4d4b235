//! Section `desktop`: the slot driver's `restore` and `reset` of the desktop guest
//! (`profiles/desktop.toml`: Xorg dummy 1920x1080x24, openbox, the typing app, the HTTP
//! supervisor; the partitioned qcow2 built by `host/build-desktop-image.sh`) against a bare
//! `runc restore -d` of the same checkpoint images (issue 13's benchmark, target ≤ 1.1x).
//!
//! Driven through the built binary's CLI like section `slot` (`slot.rs`): provision with
//! `--profile` and snapshot are untimed set-up (the screen is let settle first, so the
//! snapshot's `screen-quiescent` gate passes); then, alternating, `netprobe slot restore` (or
//! `reset`) end to end — gates included: binaries, config, profile, holder, snapshot, overlay
//! upper reset, runtime restore, net-fidelity, ready gates, cgroup read-back, and the display
//! gates `pixels-equal` (a 1920x1080 screenshot compared with the snapshot's, PNGs written)
//! and `input-reaches-app` (a key through XTEST must change the app's region) — against
//! `runc restore -d` of the slot's checkpoint with the slot's bundle. The slot's container is
//! stopped (untimed) before every run on both sides: the guest's X server (abstract socket
//! `@/tmp/.X11-unix/X0`) and its TCP port live in the holder's netns, so a second copy cannot
//! be restored beside the first. Prints the image's size (qcow2 file, allocated, virtual) and
//! the snapshot's (checkpoint images, saved upper, reference screen). Everything is removed
//! afterwards (`slot cleanup`).
//!
//! The profile is `$NETPROBE_BENCH_DESKTOP_PROFILE`, else `profiles/desktop.toml` of this
//! source tree (its image under `/var/cache/netprobe/desktop`, made by `host/setup.sh`).

use crate::Config;
use crate::slot::{Bench, compare, new_slot, provision, snapshot};
use crate::stats::note;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The profile the section provisions.
fn profile() -> PathBuf {
    std::env::var_os("NETPROBE_BENCH_DESKTOP_PROFILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/desktop.toml"))
}

/// Bytes of every regular file under `p` (not following symlinks), and the file count.
fn tree_bytes(p: &Path) -> (u64, u64) {
    let mut total = (0, 0);
    let Ok(rd) = std::fs::read_dir(p) else {
        return total;
    };
    for e in rd.flatten() {
        let Ok(m) = e.path().symlink_metadata() else {
            continue;
        };
        if m.is_dir() {
            let (b, n) = tree_bytes(&e.path());
            total = (total.0 + b, total.1 + n);
        } else if m.is_file() {
            total = (total.0 + m.len(), total.1 + 1);
        }
    }
    total
}

/// Bytes as MiB, or KiB below 1 MiB.
fn mib(b: u64) -> String {
    if b < 1 << 20 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", b as f64 / 1048576.0)
    }
}

/// Waits (at most 90 s) until two screenshots 500 ms apart are equal and the app is drawn
/// (the centre of the profile's `display.input` region is not black), so the snapshot's
/// `screen-quiescent` gate sees the settled desktop, not the black screen before the app maps;
/// a still black screen after 5 s gets one Shift key press (the Tk app's start-up stall).
fn settle_screen(pid: i32, profile: &Path) -> Result<(), String> {
    let lp = netprobe::profile::load(profile).map_err(|e| e.to_string())?;
    let ds = lp.profile.display.ok_or("the profile has no [display]")?;
    let centre = ds.input.map(|i| (i.x + i.width / 2, i.y + i.height / 2));
    let sock = netprobe::slot::gate::display_gates::socket_of(pid, ds.number);
    let d = netprobe::x11::Display::connect(&sock, Duration::from_secs(30))
        .map_err(|e| format!("display {}: {e}", sock.display()))?;
    let start = Instant::now();
    let deadline = start + Duration::from_secs(90);
    let mut woken = false;
    loop {
        let q = d
            .quiescence(Duration::from_millis(500))
            .map_err(|e| format!("quiescence: {e}"))?;
        let drawn = centre.is_none_or(|(x, y)| q.second.pixel(x, y) != [0, 0, 0]);
        if q.is_quiescent() && drawn {
            return Ok(());
        }
        // The guest's Tk app can stall at start-up, unmapped, until an X event reaches it (see
        // README, tests/desktop/slot_desktop.rs): one Shift press wakes it and types nothing.
        if q.is_quiescent() && !woken && start.elapsed() > Duration::from_secs(5) {
            d.press_key(0xffe1).map_err(|e| format!("Shift key: {e}"))?;
            woken = true;
        }
        if Instant::now() > deadline {
            return Err(format!("the desktop did not settle in 90 s: {:?}", q.diff));
        }
    }
}

/// The image's sizes, from the provision outcome's `image` fact: the qcow2 file (length and
/// allocated blocks), the virtual disk (the FUSE export's length while mounted) and the root
/// partition mounted.
fn image_sizes(prov: &serde_json::Value) -> String {
    use std::os::unix::fs::MetadataExt;
    let img = &prov["facts"]["image"];
    let path = |k: &str| img[k].as_str().map(PathBuf::from);
    let Some(src) = path("source") else {
        return "no image fact in the provision outcome".into();
    };
    let Ok(m) = std::fs::metadata(&src) else {
        return format!("{}: unreadable", src.display());
    };
    let virt = path("export_file")
        .and_then(|e| std::fs::metadata(e).ok())
        .map_or_else(|| "?".into(), |m| mib(m.len()));
    let part = img["partition"]["size"]
        .as_u64()
        .map_or_else(|| "whole device".into(), mib);
    let used = path("lower")
        .and_then(|l| nix::sys::statvfs::statvfs(&l).ok())
        .map_or_else(
            || "?".into(),
            |v| mib((v.blocks() - v.blocks_free()) * v.fragment_size()),
        );
    format!(
        "image {}: qcow2 file {} ({} allocated), virtual disk {virt}, root partition {part} \
         ({used} used)",
        src.display(),
        mib(m.len()),
        mib(m.blocks() * 512),
    )
}

/// Runs the section.
pub fn run(cfg: &Config) -> Result<(), String> {
    let prof = profile();
    let prof_s = prof.to_string_lossy().to_string();
    let mut slot = new_slot()?;
    let (prov, d) = provision(&slot, &["--profile", &prof_s])?;
    let pid = prov
        .pointer("/facts/provision_container_pid")
        .and_then(|v| v.as_i64())
        .ok_or("provision --json names no provision_container_pid")?;
    settle_screen(pid as i32, &prof)?;
    let (ck, d2) = snapshot(&mut slot)?;
    let snap = ck.parent().unwrap_or(&ck).to_path_buf();
    let (ck_b, ck_n) = tree_bytes(&ck);
    let (up_b, up_n) = tree_bytes(&snap.join("upper"));
    let screen = std::fs::metadata(snap.join("screen.png")).map_or(0, |m| m.len());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    note(
        "desktop",
        format!(
            "profile {prof_s}: provisioned in {:.0} ms, snapshot in {:.0} ms (untimed set-up) | \
             {} | snapshot: checkpoint images {} in {ck_n} files, saved upper {} in {up_n} \
             files, screen.png {} | load average {}",
            d.as_secs_f64() * 1e3,
            d2.as_secs_f64() * 1e3,
            image_sizes(&prov),
            mib(ck_b),
            mib(up_b),
            mib(screen),
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" "),
        ),
    );
    let bench = Bench {
        section: "desktop",
        targets: (1.1, 1.1),
        stop_slot_before_peer: true,
    };
    let r = compare(cfg, &slot, &ck, &slot.slot_dir.join("bundle"), &bench);
    slot.stop_container();
    drop(slot);
    r
}
