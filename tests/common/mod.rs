//! Shared helpers of the tests, `#[path = "../common/mod.rs"] mod common;` in every area's
//! `tests/<area>/main.rs`: the [`baton`] every test takes first, [`EXE`], the root check, a
//! process in a netns of its own ([`netns`]), the helpers of each group of tests (`slot_support`,
//! `ladder`, `matrix_support`, `oci_runc`, `fleet_play`, ...); for the desktop-guest
//! tests (slot_partition, x11_*) the desktop
//! guest image, built once per test binary by host/build-desktop-image.sh (cached on disk by its
//! build key, so only the first run on a machine pays for mmdebstrap).
// Each area binary uses a part of these helpers (and of their re-exports).
#![allow(dead_code, unused_imports)]

mod baton;
pub mod cli;
pub mod fleet_play;
pub mod ladder;
pub mod matrix_support;
pub mod netns;
pub mod oci_runc;
pub mod slot_state_faults;
pub mod slot_support;

pub use baton::baton;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The netprobe binary cargo built for these tests (the CLI tests run it, holders start from it).
pub const EXE: &str = env!("CARGO_BIN_EXE_netprobe");

/// Whether this process runs as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Fails (never skips) unless root: namespaces, mounts, runc and CRIU need it.
pub fn require_root() {
    assert!(
        is_root(),
        "these tests need root: run them as root after `bash host/setup.sh --test-deps`"
    );
}

/// The desktop guest image as built by host/build-desktop-image.sh.
#[derive(Debug, Clone)]
pub struct DesktopImage {
    /// The output directory (`$NETPROBE_CACHE/desktop`, default /var/cache/netprobe/desktop).
    pub dir: PathBuf,
    /// `desktop.qcow2`.
    pub qcow2: PathBuf,
    /// The sha256 from `desktop.qcow2.sha256`.
    pub sha256: String,
    /// The unpacked root filesystem the image was packed from.
    pub rootfs: PathBuf,
}

/// Builds (or finds cached) the desktop guest image; panics with the script's output on failure.
pub fn desktop_image() -> DesktopImage {
    static IMG: OnceLock<DesktopImage> = OnceLock::new();
    IMG.get_or_init(|| build("desktop")).clone()
}

/// Builds (or finds cached) the GNOME guest image (`--gnome`).
pub fn gnome_image() -> DesktopImage {
    static IMG: OnceLock<DesktopImage> = OnceLock::new();
    IMG.get_or_init(|| build("gnome")).clone()
}

fn build(name: &str) -> DesktopImage {
    let cache = std::env::var_os("NETPROBE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/netprobe"));
    let dir = cache.join(name);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("host/build-desktop-image.sh");
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(&script);
    if name == "gnome" {
        cmd.arg("--gnome");
    }
    let out = cmd
        .arg(&dir)
        .output()
        .expect("run host/build-desktop-image.sh");
    assert!(
        out.status.success(),
        "host/build-desktop-image.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sha = std::fs::read_to_string(dir.join(format!("{name}.qcow2.sha256"))).unwrap();
    DesktopImage {
        qcow2: dir.join(format!("{name}.qcow2")),
        sha256: sha.split_whitespace().next().unwrap().to_string(),
        rootfs: dir.join("rootfs"),
        dir,
    }
}

pub mod guest;

/// The shipped `profiles/<name>.toml`, pointed at `img` (built by [`desktop_image`] or
/// [`gnome_image`]): the file itself when `img` is in the shipped `/var/cache/netprobe/<name>`,
/// else a copy in `dir` with that folder replaced by `img.dir` (a private `NETPROBE_CACHE`).
/// Panics when the shipped profile does not name the shipped folder.
pub fn shipped_profile(name: &str, img: &DesktopImage, dir: &std::path::Path) -> PathBuf {
    let shipped = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("profiles/{name}.toml"));
    let default = PathBuf::from(format!("/var/cache/netprobe/{name}"));
    let text = std::fs::read_to_string(&shipped).unwrap();
    assert!(
        text.contains(&format!("\"{}/{name}.qcow2\"", default.display())),
        "profiles/{name}.toml no longer names {}",
        default.display()
    );
    if img.dir == default {
        return shipped;
    }
    let p = dir.join(format!("{name}.toml"));
    let moved = text.replace(
        &default.to_string_lossy().to_string(),
        &img.dir.to_string_lossy(),
    );
    std::fs::write(&p, moved).unwrap();
    p
}

/// The window manager's name (`netprobe::x11::ewmh::wm_name`), e.g. `GNOME Shell`.
pub fn wm_name(d: &netprobe::x11::Display) -> Option<String> {
    netprobe::x11::ewmh::wm_name(d)
}

/// The `WM_NAME` of the focused window (`netprobe::x11::ewmh::active_window_name`).
pub fn active_window_name(d: &netprobe::x11::Display) -> Option<String> {
    netprobe::x11::ewmh::active_window_name(d)
}

/// The typing app's windows with their map state (`netprobe::x11::ewmh::windows_named`).
pub fn typing_windows(d: &netprobe::x11::Display) -> Vec<String> {
    netprobe::x11::ewmh::windows_named(d, "netprobe-typing")
}

/// The guest's own logs (`wm.log`, `app.log`, `x.log` in its `/tmp`, read through
/// `/proc/<pid>/root`), each under a `== name ==` line; a missing file reads as empty.
pub fn guest_logs(pid: i64) -> String {
    ["wm.log", "app.log", "x.log"]
        .iter()
        .map(|f| {
            let text =
                std::fs::read_to_string(format!("/proc/{pid}/root/tmp/{f}")).unwrap_or_default();
            format!("== {f} ==\n{text}\n")
        })
        .collect()
}

/// A point inside the typing app's window (typing_app.py: white, 900x240+200+150; openbox's frame
/// adds a title bar above it).
pub const APP_POINT: (u32, u32) = (650, 350);

/// Waits (bounded by `limit`) until the screen is still (two screenshots `still` apart equal)
/// and the typing app's window is drawn (white at [`APP_POINT`]); returns the second
/// screenshot.
///
/// The guest's Tk app sometimes stalls at start-up with its window unmapped (seen on this
/// machine under load: the main thread waits on a futex while Tcl's notifier thread waits in
/// `pselect` on the X socket) until an X event reaches it. When the screen is still and the app
/// is not drawn after 5 s, one Shift key press (the label stays `typed: ` while the window is
/// unmapped) is sent through XTEST to wake it. A dead app still fails: no key draws a window.
/// On timeout the panic names the pixel seen and `logs()` (the guest's logs).
pub fn settle_desktop(
    d: &netprobe::x11::Display,
    still: std::time::Duration,
    limit: std::time::Duration,
    logs: impl Fn() -> String,
) -> netprobe::x11::Screenshot {
    use std::time::{Duration, Instant};
    let start = Instant::now();
    let mut woken = false;
    loop {
        let q = d.quiescence(still).unwrap();
        let pixel = q.second.pixel(APP_POINT.0, APP_POINT.1);
        if q.is_quiescent() && pixel == [255, 255, 255] {
            return q.second;
        }
        if q.is_quiescent() && !woken && start.elapsed() > Duration::from_secs(5) {
            d.press_key(0xffe1).unwrap(); // XK_Shift_L
            woken = true;
        }
        assert!(
            start.elapsed() < limit,
            "the desktop did not settle with the app drawn within {limit:?} (woken by Shift: {woken}): {:?}, pixel at {APP_POINT:?}: {pixel:?}\n{}",
            q.diff,
            logs()
        );
    }
}

/// Waits, bounded by `deadline`, until GNOME Shell is the window manager, the typing app
/// (`netprobe-typing`) has the focus, and the screen has been still for 2 s (four screenshots
/// 500 ms apart, each equal to the one before them): what a snapshot's `screen-quiescent` gate and a later
/// pixel comparison need. A focus change or a late redraw after a shorter still moment is what
/// made the GNOME tests flaky. Panics with what was last seen when the deadline passes.
pub fn settle_gnome(
    d: &netprobe::x11::Display,
    deadline: std::time::Instant,
    log: impl Fn() -> String,
) {
    use std::time::{Duration, Instant};
    let wait = |what: &str, ok: &dyn Fn() -> bool| {
        while !ok() {
            assert!(
                Instant::now() < deadline,
                "GNOME: {what} before the deadline; log:\n{}",
                log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    wait("GNOME Shell did not become the window manager", &|| {
        wm_name(d).as_deref() == Some("GNOME Shell")
    });
    let focus_wait = Instant::now();
    while active_window_name(d).as_deref() != Some("netprobe-typing") {
        assert!(
            Instant::now() < deadline,
            "GNOME: the typing app did not get the focus within {:?} (active window: {:?}; the app's windows: {:?}); logs:\n{}",
            focus_wait.elapsed(),
            active_window_name(d),
            typing_windows(d),
            log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let mut reference = d.screenshot().unwrap();
    let mut still = 0;
    while still < 4 {
        std::thread::sleep(Duration::from_millis(500));
        let now = d.screenshot().unwrap();
        let diff = netprobe::x11::diff(&reference, &now).unwrap();
        if diff.is_equal() {
            still += 1;
        } else {
            assert!(Instant::now() < deadline, "GNOME never settled: {diff:?}");
            (reference, still) = (now, 0);
        }
    }
    assert_eq!(
        active_window_name(d).as_deref(),
        Some("netprobe-typing"),
        "the typing app lost the focus while GNOME settled"
    );
    let windows = typing_windows(d);
    assert!(
        windows.iter().any(|w| w.ends_with(" VIEWABLE")),
        "the focused typing app has no viewable window: {windows:?}"
    );
}
