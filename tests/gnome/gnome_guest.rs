//! GNOME, the record's open step: Debian 12's GNOME Shell 43 as the X11 compositor of the Xorg
//! dummy display (host/build-desktop-image.sh --gnome, profiles/gnome.toml: a session D-Bus, a
//! system D-Bus and upowerd inside the container, no logind, llvmpipe) under real runc 1.1.5 and
//! CRIU 4.2.1, looked at only through netprobe's X11 client.
//!
//! 1. On an overlay that serves file handles (`index=on,nfs_export=on`) GNOME Shell starts,
//!    is checkpointed and restored with the screen pixel-equal, takes a key through XTEST, and a
//!    reset brings the snapshot's pixels back.
//! 2. On the overlay as the slot mounts it today (`index=off`) the checkpoint fails: the system
//!    D-Bus watches `/usr/share/dbus-1/system.d` with inotify, overlayfs cannot open the watch's
//!    file handle, and CRIU's path fallback (irmap) does not scan that directory:
//!    `fsnotify: Can't dump that handle`.
//!
//! The profile's session mode `netprobe` has no top-bar clock (README "GNOME"; tests/gnome/slot_gnome.rs
//! restores in a later minute on purpose). This test still starts its cycle early in a minute and
//! requires it to end within it, as it did when the clock was shown: a guard, not a need.
//! Evidence (PNGs, the guests' logs, CRIU's logs) is kept under
//! `$CARGO_TARGET_TMPDIR/gnome-evidence/<container id>/`.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::guest::{Guest, Overlay};
use common::wm_name;
use netprobe::x11::{Display, Rect, ascii_keysym, input_gate, pixel_gate, quiescence_gate};

fn evidence(g: &Guest) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("gnome-evidence")
        .join(&g.id);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn keep_logs(g: &Guest, ev: &Path) {
    for f in [
        "wm.log",
        "app.log",
        "dbus-system.log",
        "upower.log",
        "x.log",
        "Xorg.log",
    ] {
        std::fs::write(ev.join(f), g.guest_tmp(f)).unwrap();
    }
    for (from, to) in [
        ("ck-work/dump.log", "dump.log"),
        ("rs-work1/restore.log", "restore1.log"),
        ("rs-work2/restore.log", "restore2.log"),
    ] {
        let _ = std::fs::copy(g.p(from), ev.join(to));
    }
}

/// Runs the guest until GNOME Shell is the window manager, the typing app has the focus and the
/// screen has been still for 2 s (`common::settle_gnome`).
fn start_gnome(g: &mut Guest, limit: Duration) -> Display {
    g.run();
    let d = Display::connect(&g.socket(), Duration::from_secs(60)).unwrap();
    common::settle_gnome(&d, Instant::now() + limit, || {
        common::guest_logs(i64::from(g.pid))
    });
    d
}

fn second_of_minute() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        % 60
}

/// Waits until the wall clock is in the first `s` seconds of a minute.
fn early_in_minute(s: u64) {
    while second_of_minute() >= s {
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn gnome_shell_checkpoints_restores_and_resets_pixel_equal() {
    let _baton = crate::common::baton(module_path!());
    let img = common::gnome_image();
    let mut g = Guest::new(&img.rootfs, "gnome.toml", Overlay::NfsExport);
    let ev = evidence(&g);
    let d = start_gnome(&mut g, Duration::from_secs(240));
    // The snapshot's screenshot is taken on a still screen early in a minute (GNOME's clock
    // shows the minute). Under load GNOME can still be animating (or dim the screen) while the
    // test waits for the minute to turn, so the still screen is awaited again, bounded.
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut attempt = 0;
    let (minute, q, before) = loop {
        attempt += 1;
        early_in_minute(8);
        let minute = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            / 60;
        let (q, before) = quiescence_gate(
            &d,
            Duration::from_millis(250),
            &ev,
            &format!("snapshot-{attempt}"),
        )
        .unwrap();
        if (q.passed && second_of_minute() < 20) || Instant::now() > deadline {
            break (minute, q, before);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(q.passed, "{q:?}");
    drop(d);
    let ck = g.checkpoint();
    keep_logs(&g, &ev);
    ck.unwrap_or_else(|e| panic!("checkpoint of GNOME failed: {e}"));
    g.save_upper();

    g.restore(1);
    let d = Display::connect(&g.socket(), Duration::from_secs(30)).unwrap();
    assert_eq!(wm_name(&d).as_deref(), Some("GNOME Shell"));
    let r = pixel_gate(&before, &d.screenshot().unwrap(), &ev, "after-restore").unwrap();
    let full = Rect {
        x: 0,
        y: 0,
        width: before.width,
        height: before.height,
    };
    let ig = input_gate(
        &d,
        ascii_keysym('q').unwrap(),
        full,
        &before,
        Duration::from_secs(15),
        &ev,
        "after-input",
    )
    .unwrap();
    drop(d);
    g.reset_upper();
    g.restore(2);
    let d = Display::connect(&g.socket(), Duration::from_secs(30)).unwrap();
    let rr = pixel_gate(&before, &d.screenshot().unwrap(), &ev, "after-reset").unwrap();
    let same_minute = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 60
        == minute;
    keep_logs(&g, &ev);
    drop(d);
    g.release();
    assert!(
        same_minute,
        "the cycle crossed a minute boundary (GNOME's clock changes): evidence {}",
        ev.display()
    );
    assert!(
        r.passed,
        "restore changed pixels: {r:?}; evidence {}",
        ev.display()
    );
    assert!(ig.passed, "the key did not reach GNOME: {ig:?}");
    assert!(rr.passed, "reset did not bring the pixels back: {rr:?}");
}

#[test]
fn gnome_checkpoint_fails_on_the_slots_index_off_overlay() {
    let _baton = crate::common::baton(module_path!());
    let img = common::gnome_image();
    let mut g = Guest::new(&img.rootfs, "gnome.toml", Overlay::Slot);
    let ev = evidence(&g);
    let d = start_gnome(&mut g, Duration::from_secs(240));
    drop(d);
    let r = g.checkpoint();
    keep_logs(&g, &ev);
    let log = std::fs::read_to_string(g.p("ck-work/dump.log")).unwrap();
    // The finding is not deterministic: CRIU's irmap fallback finds the watched inode when it is
    // still in the dentry cache, and then the dump succeeds. When the dump fails, it must fail
    // for the recorded reason (fsnotify handle on the index=off overlay); either outcome is kept
    // as evidence. index=on,nfs_export=on makes it pass every time (the other test).
    match r {
        Err(e) => {
            assert!(
                log.contains("fsnotify: \tCan't dump that handle"),
                "{e}; evidence {}",
                ev.display()
            );
            assert!(log.contains("cannot be opened"), "{}", ev.display());
        }
        Ok(()) => {
            std::fs::write(
                ev.join("outcome.txt"),
                "the dump on the index=off overlay succeeded this time (irmap found the watched inode)\n",
            )
            .unwrap();
            eprintln!(
                "note: CRIU dumped GNOME on the index=off overlay this time; evidence {}",
                ev.display()
            );
        }
    }
    g.release();
}
