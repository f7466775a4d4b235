//! The desktop guest (host/build-desktop-image.sh: Xorg with the dummy driver at 1920x1080,
//! openbox, the typing app, supervisor.py as init) in a real runc 1.1.5 container whose
//! config.json is `build_spec` + `apply_profile(profiles/desktop.toml)` (Docker's capabilities,
//! tmpfs /tmp, /dev/shm size, 4 CPUs / 4 GiB), checkpointed and restored by real CRIU 4.2.1,
//! looked at only through netprobe's X11 client on the display's socket reached through the
//! container's root, `/proc/<init pid>/root/tmp/.X11-unix/X0` (no tool in the guest):
//! - the screenshot after restore is pixel-equal to the one before the checkpoint;
//! - a key press sent through XTEST changes the typing app's region (input reaches the guest);
//! - a reset (second restore from the same images, overlay upper put back) brings the snapshot's
//!   pixels back after that input;
//! - a window moved after restore fails the comparison, with a count, a bounding box and a diff
//!   PNG whose changed pixels are marked.
//!
//! Unique container id, private runc root, everything in one tempdir; the container, the overlay
//! mount and the runtime are released on success, failure and panic.

use crate::common;

use std::time::Duration;

use common::guest::{Guest, Overlay};
use netprobe::x11::{
    DIFF_MARK, Display, Rect, Screenshot, ascii_keysym, diff_image, input_gate, pixel_gate,
    quiescence_gate,
};
use x11rb::protocol::xproto::{ConfigureWindowAux, ConnectionExt as _, MapState};

/// The typing app's client area (typing_app.py asks for 900x240+200+150; openbox adds a 1 px border
/// and a 20 px title bar, so the client area is at +201+170), as the
/// shipped profile's input probe names it (`[display.input]` of profiles/desktop.toml).
fn app_region() -> Rect {
    let lp = netprobe::profile::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/desktop.toml"),
    )
    .unwrap();
    let i = lp.profile.display.unwrap().input.unwrap();
    assert_eq!((i.x, i.y, i.width, i.height), (201, 170, 900, 240));
    Rect {
        x: i.x,
        y: i.y,
        width: i.width,
        height: i.height,
    }
}

/// The guest's own logs (supervisor.py writes each program's output to `/tmp/<name>.log`).
fn guest_logs(g: &Guest) -> String {
    ["x.log", "wm.log", "app.log", "Xorg.log"]
        .iter()
        .map(|n| {
            let t = g.guest_tmp(n);
            let tail: Vec<&str> = t.lines().rev().take(30).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            format!("--- guest /tmp/{n} (last 30 lines)\n{}", tail.join("\n"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Moves the top-level window covering the app's centre 300 px to the right.
fn move_app_window(d: &Display) {
    let app = app_region();
    let c = d.connection();
    let tree = c.query_tree(d.root()).unwrap().reply().unwrap();
    let (cx, cy) = ((app.x + 450) as i32, (app.y + 120) as i32);
    for w in tree.children.iter().rev() {
        let a = c.get_window_attributes(*w).unwrap().reply().unwrap();
        let g = c.get_geometry(*w).unwrap().reply().unwrap();
        let (x, y) = (i32::from(g.x), i32::from(g.y));
        if a.map_state == MapState::VIEWABLE
            && (x..x + i32::from(g.width)).contains(&cx)
            && (y..y + i32::from(g.height)).contains(&cy)
        {
            c.configure_window(*w, &ConfigureWindowAux::new().x(x + 300))
                .unwrap();
            d.sync().unwrap();
            return;
        }
    }
    panic!("no viewable top-level window over the app");
}

#[test]
fn desktop_guest_pixels_input_and_reset_through_criu() {
    let _baton = crate::common::baton(module_path!());
    let img = common::desktop_image();
    let app = app_region();
    // As profiles/desktop.toml mounts it: the session and AT-SPI D-Bus inotify watches are dumped
    // by file handle.
    let mut g = Guest::new(&img.rootfs, "desktop.toml", Overlay::NfsExport);
    g.run();
    let d = Display::connect(&g.socket(), Duration::from_secs(30)).unwrap();
    let geom = d.geometry().unwrap();
    assert_eq!((geom.width, geom.height, geom.depth), (1920, 1080, 24));
    common::settle_desktop(
        &d,
        Duration::from_millis(250),
        Duration::from_secs(90),
        || guest_logs(&g),
    );
    let ev = g.p("evidence");
    std::fs::create_dir_all(&ev).unwrap();
    let (q, before) = quiescence_gate(&d, Duration::from_millis(250), &ev, "snapshot").unwrap();
    assert!(q.passed, "{q:?}");
    drop(d);

    // Snapshot: checkpoint (container stops), keep the overlay upper as it was.
    g.checkpoint().unwrap();
    g.save_upper();

    // Restore: pixel-equal (the pixel gate), then input reaches the app (the input gate).
    g.restore(1);
    let d = Display::connect(&g.socket(), Duration::from_secs(10)).unwrap();
    let r = pixel_gate(&before, &d.screenshot().unwrap(), &ev, "after-restore").unwrap();
    assert!(r.passed, "restore changed pixels: {r:?}");
    let ig = input_gate(
        &d,
        ascii_keysym('q').unwrap(),
        app,
        &before,
        Duration::from_secs(10),
        &ev,
        "after-input",
    )
    .unwrap();
    assert!(ig.passed, "{ig:?}");
    let bb = ig.diff.as_ref().unwrap().bbox.unwrap();
    assert!(
        bb.x >= app.x && bb.y >= app.y && bb.x + bb.width <= app.x + app.width,
        "typing changed pixels outside the app: {ig:?}"
    );
    drop(d);

    // Reset: container gone, upper back to the snapshot's, restore again: the snapshot's pixels.
    g.reset_upper();
    g.restore(2);
    let d = Display::connect(&g.socket(), Duration::from_secs(10)).unwrap();
    let r = pixel_gate(&before, &d.screenshot().unwrap(), &ev, "after-reset").unwrap();
    assert!(r.passed, "reset did not bring the pixels back: {r:?}");

    // Tamper: a window moved after restore fails the pixel gate, with a marked diff.
    move_app_window(&d);
    // The move goes through openbox (a ConfigureRequest), asynchronously: wait (bounded) until
    // the screen differs from the snapshot's and is still again.
    let t0 = std::time::Instant::now();
    let moved = loop {
        let q = d.quiescence(Duration::from_millis(250)).unwrap();
        if q.is_quiescent() && !netprobe::x11::diff(&before, &q.second).unwrap().is_equal() {
            break q.second;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the window manager did not move the window within 20 s"
        );
    };
    let r = pixel_gate(&before, &moved, &ev, "after-move").unwrap();
    assert!(!r.passed, "a moved window must fail the pixel gate");
    let md = r.diff.clone().unwrap();
    let bb = md.bbox.unwrap();
    assert!(
        bb.x <= app.x + 300 && bb.x + bb.width >= app.x + app.width,
        "{md:?}"
    );
    assert_eq!(r.pngs[1].file, "after-move-diff.png");
    let dimg = Screenshot::read_png(&ev.join("after-move-diff.png")).unwrap();
    let marked = dimg.rgb.chunks(3).filter(|p| *p == DIFF_MARK).count() as u64;
    assert_eq!(marked, md.differing);
    assert_eq!(dimg, diff_image(&before, &moved).unwrap());
    drop(d);
    g.release();
}
