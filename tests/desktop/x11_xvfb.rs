//! netprobe's X11 client against a real Xvfb (Debian 12's, started here at 1920x1080x24 on a
//! free display number, killed on drop): geometry, screenshot → PNG with sha256, quiescence,
//! XTEST key input reaching a focused window, the pixel diff of a drawn rectangle, and the errors
//! for a display socket that is not a socket and a display that never comes up.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use netprobe::evidence::sha256_hex;
use netprobe::x11::{
    DIFF_MARK, Display, Rect, ScreenBuffers, Screenshot, X11Error, ascii_keysym, diff, diff_image,
};
use x11rb::connection::Connection;
use x11rb::protocol::Event;
use x11rb::protocol::xproto::{
    ConnectionExt as _, CreateGCAux, CreateWindowAux, EventMask, InputFocus, Rectangle, WindowClass,
};

/// The tests of this binary start and stop their servers side by side: one allocation or one
/// stop at a time, so a stop's clean-up never meets a server still starting on the same number.
static ALLOC: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A host Xvfb on display `:n`; stopped and reaped on drop, its socket and lock file gone.
struct Xvfb {
    child: Child,
    socket: PathBuf,
}

impl Drop for Xvfb {
    /// SIGTERM first (Xvfb then removes its `/tmp/.X11-unix/X<n>` socket and `/tmp/.X<n>-lock`),
    /// SIGKILL after 5 s; whatever the server left is removed (SIGKILL alone left both behind,
    /// one pair per test run; under load a server ended by SIGTERM once left its socket).
    fn drop(&mut self) {
        let _one = ALLOC.lock().unwrap_or_else(|p| p.into_inner());
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !matches!(self.child.try_wait(), Ok(Some(_))) {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let n = self.socket.file_name().unwrap().to_string_lossy()[1..].to_string();
        let lock = PathBuf::from(format!("/tmp/.X{n}-lock"));
        // Ours to remove: the lock names our (now reaped) server, or the server removed its lock
        // but not its socket; no other server is starting (`ALLOC` is held), and a server takes
        // its lock before it makes its socket, so a missing lock means no server owns the socket.
        let ours = match std::fs::read_to_string(&lock) {
            Ok(t) => t.trim() == self.child.id().to_string(),
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        };
        if ours {
            let _ = std::fs::remove_file(&self.socket);
            let _ = std::fs::remove_file(&lock);
        }
    }
}

fn start_xvfb() -> Xvfb {
    assert!(
        Path::new("/usr/bin/Xvfb").exists(),
        "Xvfb missing: run `bash host/setup.sh --test-deps` (host/install-test-deps.sh installs xvfb)"
    );
    // One allocation at a time ([`ALLOC`]), and a display is ours only when its lock file names
    // our server's pid (a server that lost the race for a number exits, but the socket seen may
    // be the winner's).
    let _one = ALLOC.lock().unwrap_or_else(|p| p.into_inner());
    let base = 300 + (std::process::id() % 400);
    for n in base..base + 50 {
        let lock = PathBuf::from(format!("/tmp/.X{n}-lock"));
        let socket = PathBuf::from(format!("/tmp/.X11-unix/X{n}"));
        if socket.exists() || lock.exists() {
            continue;
        }
        let mut child = Command::new("/usr/bin/Xvfb")
            .arg(format!(":{n}"))
            .args([
                "-screen",
                "0",
                "1920x1080x24",
                "-nolisten",
                "tcp",
                "-noreset",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                break; // lost a race for this display number: try the next
            }
            let owner = std::fs::read_to_string(&lock).unwrap_or_default();
            if socket.exists() && owner.trim() == child.id().to_string() {
                return Xvfb { child, socket };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("no free X display number in {base}..{}", base + 50);
}

/// A mapped InputOutput window with a white background at (x, y), size w x h.
fn white_window(d: &Display, x: i16, y: i16, w: u16, h: u16, events: EventMask) -> u32 {
    let c = d.connection();
    let screen = &c.setup().roots[0];
    let win = c.generate_id().unwrap();
    c.create_window(
        screen.root_depth,
        win,
        d.root(),
        x,
        y,
        w,
        h,
        0,
        WindowClass::INPUT_OUTPUT,
        0,
        &CreateWindowAux::new()
            .background_pixel(screen.white_pixel)
            .override_redirect(1)
            .event_mask(events),
    )
    .unwrap();
    c.map_window(win).unwrap();
    d.sync().unwrap();
    win
}

/// Fills `r` (window coordinates) of `win` black and waits for the server to have drawn it.
fn fill_black(d: &Display, win: u32, r: Rectangle) {
    let c = d.connection();
    let gc = c.generate_id().unwrap();
    let black = c.setup().roots[0].black_pixel;
    c.create_gc(gc, win, &CreateGCAux::new().foreground(black))
        .unwrap();
    c.poly_fill_rectangle(win, gc, &[r]).unwrap();
    d.sync().unwrap();
}

#[test]
fn geometry_screenshot_png_and_quiescence() {
    let _baton = crate::common::baton(module_path!());
    let x = start_xvfb();
    let d = Display::connect(&x.socket, Duration::from_secs(10)).unwrap();
    let g = d.geometry().unwrap();
    assert_eq!((g.width, g.height, g.depth), (1920, 1080, 24));
    let s = d.screenshot().unwrap();
    assert_eq!(
        (s.width, s.height, s.rgb.len()),
        (1920, 1080, 1920 * 1080 * 3)
    );
    let q = d.quiescence(Duration::from_millis(250)).unwrap();
    assert!(q.is_quiescent(), "an idle Xvfb is still: {:?}", q.diff);
    assert_eq!(q.interval_ms, 250);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("root.png");
    let sha = s.write_png(&p).unwrap();
    assert_eq!(sha, sha256_hex(&std::fs::read(&p).unwrap()));
    assert_eq!(Screenshot::read_png(&p).unwrap(), s);
}

#[test]
fn xtest_key_press_reaches_the_focused_window() {
    let _baton = crate::common::baton(module_path!());
    let x = start_xvfb();
    let d = Display::connect(&x.socket, Duration::from_secs(10)).unwrap();
    let win = white_window(&d, 10, 10, 200, 100, EventMask::KEY_PRESS);
    d.connection()
        .set_input_focus(InputFocus::POINTER_ROOT, win, x11rb::CURRENT_TIME)
        .unwrap();
    d.sync().unwrap();
    let keysym = ascii_keysym('a').unwrap();
    let code = d.keycode(keysym).unwrap();
    d.press_key(keysym).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(Event::KeyPress(k)) = d.connection().poll_for_event().unwrap() {
            assert_eq!((k.event, k.detail), (win, code));
            break;
        }
        assert!(Instant::now() < deadline, "no KeyPress within 5 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let e = d.keycode(0x00ff_fff0).unwrap_err();
    assert!(matches!(e, X11Error::NoKeycode { .. }), "{e}");
}

#[test]
fn a_drawn_rectangle_is_counted_bounded_and_marked() {
    let _baton = crate::common::baton(module_path!());
    let x = start_xvfb();
    let d = Display::connect(&x.socket, Duration::from_secs(10)).unwrap();
    let win = white_window(&d, 100, 50, 300, 200, EventMask::NO_EVENT);
    let before = d.screenshot().unwrap();
    assert_eq!(before.pixel(150, 100), [255, 255, 255]);
    fill_black(
        &d,
        win,
        Rectangle {
            x: 10,
            y: 20,
            width: 30,
            height: 40,
        },
    );
    let after = d.screenshot().unwrap();
    let pd = diff(&before, &after).unwrap();
    assert_eq!(pd.differing, 30 * 40);
    assert_eq!(
        pd.bbox,
        Some(Rect {
            x: 110,
            y: 70,
            width: 30,
            height: 40
        })
    );
    let img = diff_image(&before, &after).unwrap();
    assert_eq!(img.pixel(110, 70), DIFF_MARK);
    assert_ne!(img.pixel(109, 70), DIFF_MARK);
}

/// Screens and regions come through MIT-SHM (the server writes into a memfd netprobe maps) and
/// are the same pixels `GetImage` sends through the socket.
#[test]
fn shared_memory_images_equal_socket_images() {
    let _baton = crate::common::baton(module_path!());
    let x = start_xvfb();
    let d = Display::connect(&x.socket, Duration::from_secs(10)).unwrap();
    let win = white_window(&d, 100, 50, 300, 200, EventMask::NO_EVENT);
    fill_black(
        &d,
        win,
        Rectangle {
            x: 7,
            y: 9,
            width: 50,
            height: 30,
        },
    );
    let region = Rect {
        x: 90,
        y: 40,
        width: 120,
        height: 60,
    };
    let (shm_full, shm_region) = (d.screenshot().unwrap(), d.region(region).unwrap());
    assert!(
        d.uses_shm(),
        "Xvfb has MIT-SHM 1.2: images must come through it"
    );
    assert!(
        d.image_transfer().starts_with("MIT-SHM"),
        "{}",
        d.image_transfer()
    );
    d.disable_shm();
    assert!(!d.uses_shm());
    assert!(
        d.image_transfer().starts_with("GetImage"),
        "{}",
        d.image_transfer()
    );
    let (socket_full, socket_region) = (d.screenshot().unwrap(), d.region(region).unwrap());
    assert!(shm_full == socket_full, "full screens differ");
    assert!(shm_region == socket_region, "regions differ");
    assert_eq!(shm_region.pixel(20, 25), [0, 0, 0]);
    assert_eq!(shm_region.pixel(100, 50), [255, 255, 255]);

    // A second connection on buffers prepared before it (what a restore does while CRIU
    // restores the X server): the prepared segment is the one attached, the two RGB buffers
    // take the whole screens, and the pixels are the same.
    let g = d.geometry().unwrap();
    let prepared = Display::connect(&x.socket, Duration::from_secs(10)).unwrap();
    let bufs = ScreenBuffers::prepare(g.width, g.height, 2);
    assert!(bufs.shm_error().is_none(), "{:?}", bufs.shm_error());
    prepared.adopt_buffers(bufs);
    for _ in 0..3 {
        assert!(
            prepared.screenshot().unwrap() == shm_full,
            "full screens differ"
        );
    }
    assert!(
        prepared.region(region).unwrap() == shm_region,
        "regions differ"
    );
    assert!(
        prepared.image_transfer().starts_with("MIT-SHM")
            && prepared
                .image_transfer()
                .ends_with("prepared before the connection)"),
        "{}",
        prepared.image_transfer()
    );
    assert!(
        !d.image_transfer().contains("prepared"),
        "{}",
        d.image_transfer()
    );
}

#[test]
fn a_regular_file_is_not_a_display_socket() {
    let _baton = crate::common::baton(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("X0");
    std::fs::write(&f, b"").unwrap();
    let t = Instant::now();
    let e = Display::connect(&f, Duration::from_secs(5)).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(1), "refused at once");
    let msg = e.to_string();
    assert!(matches!(e, X11Error::NotASocket { .. }), "{msg}");
    assert!(
        msg.contains(&f.display().to_string()) && msg.contains("regular file"),
        "{msg}"
    );
}

#[test]
fn a_display_that_never_comes_up_fails_after_the_bounded_wait() {
    let _baton = crate::common::baton(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("tmp/.X11-unix/X7");
    let t = Instant::now();
    let e = Display::connect(&f, Duration::from_millis(400)).unwrap_err();
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    let msg = e.to_string();
    match e {
        X11Error::NeverCameUp { waited_ms, .. } => assert!(waited_ms >= 400),
        other => panic!("{other}"),
    }
    assert!(
        msg.contains(&f.display().to_string()) && msg.contains("did not come up"),
        "{msg}"
    );
}

#[test]
fn display_gates_record_pass_and_fail_with_pngs() {
    let _baton = crate::common::baton(module_path!());
    use netprobe::x11::{Geometry, geometry_gate, input_gate, pixel_gate, quiescence_gate};
    let x = start_xvfb();
    let d = Display::connect(&x.socket, Duration::from_secs(10)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path();
    let want = Geometry {
        width: 1920,
        height: 1080,
        depth: 24,
    };
    assert!(geometry_gate(&d, want).unwrap().passed);
    let wrong = geometry_gate(
        &d,
        Geometry {
            width: 1280,
            ..want
        },
    )
    .unwrap();
    assert!(
        !wrong.passed && wrong.detail.contains("1920x1080"),
        "{wrong:?}"
    );

    let win = white_window(&d, 100, 100, 200, 100, EventMask::KEY_PRESS);
    let (q, reference) = quiescence_gate(&d, Duration::from_millis(250), ev, "snap").unwrap();
    assert!(q.passed, "{q:?}");
    assert_eq!(q.pngs.len(), 1);
    assert_eq!(
        q.pngs[0].sha256,
        sha256_hex(&std::fs::read(ev.join("snap.png")).unwrap())
    );
    let same = pixel_gate(&reference, &d.screenshot().unwrap(), ev, "after").unwrap();
    assert!(same.passed && same.pngs.len() == 1, "{same:?}");
    assert!(
        pixel_gate(&reference, &reference, ev, "after").is_err(),
        "evidence is never overwritten"
    );

    // A moved window fails the pixel gate with a marked diff.
    d.connection()
        .configure_window(
            win,
            &x11rb::protocol::xproto::ConfigureWindowAux::new().x(400),
        )
        .unwrap();
    d.sync().unwrap();
    let moved = pixel_gate(&reference, &d.screenshot().unwrap(), ev, "moved").unwrap();
    assert!(!moved.passed, "{moved:?}");
    assert_eq!(moved.pngs[1].file, "moved-diff.png");
    let dpng = Screenshot::read_png(&ev.join("moved-diff.png")).unwrap();
    let pd = moved.diff.unwrap();
    assert_eq!(
        dpng.rgb.chunks(3).filter(|p| *p == DIFF_MARK).count() as u64,
        pd.differing
    );
    assert_eq!(pd.bbox.unwrap().x, 100);

    // The input gate: nothing in this window redraws on a key, so it must not pass.
    let region = Rect {
        x: 400,
        y: 100,
        width: 200,
        height: 100,
    };
    let base = d.screenshot().unwrap();
    let ig = input_gate(
        &d,
        ascii_keysym('z').unwrap(),
        region,
        &base,
        Duration::from_millis(500),
        ev,
        "input",
    )
    .unwrap();
    assert!(!ig.passed && ig.detail.contains("unchanged"), "{ig:?}");
}

#[test]
fn a_stopped_xvfb_leaves_no_socket_or_lock_behind() {
    let _baton = crate::common::baton(module_path!());
    let x = start_xvfb();
    let socket = x.socket.clone();
    let n = socket.file_name().unwrap().to_string_lossy()[1..].to_string();
    let lock = PathBuf::from(format!("/tmp/.X{n}-lock"));
    assert!(socket.exists() && lock.exists());
    let ours = x.child.id().to_string();
    drop(x);
    // Another test may already have started a server on the freed number: then its lock (made
    // before its socket, so read after it) names that server, never ours.
    let socket_left = socket.exists();
    let owner = std::fs::read_to_string(&lock).ok();
    assert!(
        owner.as_deref().map(str::trim) != Some(ours.as_str()),
        "{} left behind",
        lock.display()
    );
    assert!(
        !socket_left || owner.is_some(),
        "{} left behind",
        socket.display()
    );
}
