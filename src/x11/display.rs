//! A connection to a guest's X display through its Unix socket (x11rb, no tool in the guest):
//! geometry, root-window screenshots (`GetImage`, ZPixmap), key input (XTEST `FakeInput`), and
//! the quiescence check.

use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::xproto::{self, ConnectionExt as _, ImageFormat, ImageOrder};
use x11rb::protocol::xtest::{self, ConnectionExt as _};
use x11rb::rust_connection::{DefaultStream, RustConnection};

use super::error::{Result, X11Error};
use super::image::{PixelDiff, Rect, Screenshot, diff};

/// The socket of display `:number` under a guest's root directory:
/// `<root>/tmp/.X11-unix/X<number>`. `root` is the container's rootfs (overlay merged dir) or,
/// when the guest's `/tmp` is a tmpfs, `/proc/<container init pid>/root`.
pub fn socket_under_root(root: &Path, number: u32) -> PathBuf {
    root.join(format!("tmp/.X11-unix/X{number}"))
}

/// What the display reports about its first screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Geometry {
    /// Root window width, pixels.
    pub width: u32,
    /// Root window height, pixels.
    pub height: u32,
    /// Root window depth, bits (24 for TrueColor 8-8-8).
    pub depth: u8,
}

/// Two screenshots taken `interval_ms` apart and how they differ (the snapshot gate's
/// "screen quiescent" check).
#[derive(Debug, Clone)]
pub struct Quiescence {
    /// The first screenshot.
    pub first: Screenshot,
    /// The second screenshot.
    pub second: Screenshot,
    /// The wait between them, milliseconds.
    pub interval_ms: u64,
    /// Their pixel diff; equal means quiescent.
    pub diff: PixelDiff,
}

impl Quiescence {
    /// True when the two screenshots are pixel-equal.
    pub fn is_quiescent(&self) -> bool {
        self.diff.is_equal()
    }
}

/// An open X11 connection to one display socket, screen 0.
pub struct Display {
    conn: RustConnection,
    path: PathBuf,
    root: xproto::Window,
    /// The MIT-SHM segment images are read through, attached at the first image (`Err`
    /// inside: why not — the server has none, or attaching failed; then `GetImage`).
    shm: std::sync::OnceLock<std::result::Result<super::shm::ShmSegment, super::ShmError>>,
    /// The last `ShmGetImage` that failed (that image came through `GetImage`).
    shm_failed: std::sync::Mutex<Option<String>>,
    /// Set by [`Display::disable_shm`].
    no_shm: std::sync::atomic::AtomicBool,
    /// Held from `ShmGetImage` until its pixels are converted: one segment, one image at a time.
    shm_busy: std::sync::Mutex<()>,
    /// Made ready ahead of the first image ([`Display::adopt_buffers`]): the segment attached
    /// at the first image instead of a new one, and RGB buffers for whole-screen images.
    prepared: std::sync::Mutex<super::buffers::ScreenBuffers>,
    /// The attached segment is the prepared one.
    shm_was_prepared: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Display {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Display({})", self.path.display())
    }
}

fn file_kind(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "directory"
    } else if ft.is_file() {
        "regular file"
    } else if ft.is_symlink() {
        "symlink"
    } else if ft.is_fifo() {
        "fifo"
    } else {
        "not a socket"
    }
}

impl Display {
    /// Connects to the X server listening on the Unix socket `path`, waiting up to `timeout` for
    /// it to appear and accept (polled every 100 ms). No authorization cookie is sent.
    ///
    /// Errors: [`X11Error::NotASocket`] at once when `path` exists and is not a socket;
    /// [`X11Error::NeverCameUp`] when it is still missing or refusing after `timeout`;
    /// [`X11Error::Setup`] when the X11 handshake fails.
    pub fn connect(path: &Path, timeout: Duration) -> Result<Display> {
        let start = Instant::now();
        let stream = loop {
            let last = match std::fs::symlink_metadata(path) {
                Ok(m) if !m.file_type().is_socket() => {
                    return Err(X11Error::NotASocket {
                        path: path.to_path_buf(),
                        kind: file_kind(m.file_type()).into(),
                    });
                }
                Ok(_) => match UnixStream::connect(path) {
                    Ok(s) => break s,
                    Err(e) => format!("connect: {e}"),
                },
                Err(e) => format!("{e}"),
            };
            if start.elapsed() >= timeout {
                return Err(X11Error::NeverCameUp {
                    path: path.to_path_buf(),
                    waited_ms: start.elapsed().as_millis() as u64,
                    last,
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let setup_err = |reason: String| X11Error::Setup {
            path: path.to_path_buf(),
            reason,
        };
        let (stream, _peer) =
            DefaultStream::from_unix_stream(stream).map_err(|e| setup_err(e.to_string()))?;
        let conn =
            RustConnection::connect_to_stream(stream, 0).map_err(|e| setup_err(e.to_string()))?;
        let root = conn
            .setup()
            .roots
            .first()
            .map(|s| s.root)
            .ok_or_else(|| setup_err("the server reports no screen".into()))?;
        Ok(Display {
            conn,
            path: path.to_path_buf(),
            root,
            shm: std::sync::OnceLock::new(),
            shm_failed: std::sync::Mutex::new(None),
            no_shm: std::sync::atomic::AtomicBool::new(false),
            shm_busy: std::sync::Mutex::new(()),
            prepared: std::sync::Mutex::new(super::buffers::ScreenBuffers::none()),
            shm_was_prepared: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Uses `b` (made by [`super::ScreenBuffers::prepare`], e.g. while the X server was being
    /// restored) for the images of this connection: its shared-memory segment is the one
    /// attached at the first image (when MIT-SHM is used and it is large enough), and its RGB
    /// buffers take whole-screen images of its size. Nothing else changes: the pixels are the
    /// server's either way.
    pub fn adopt_buffers(&self, b: super::ScreenBuffers) {
        *self.prepared.lock().unwrap_or_else(|p| p.into_inner()) = b;
    }

    /// The socket path this connection uses.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The root window's id (screen 0).
    pub fn root(&self) -> xproto::Window {
        self.root
    }

    /// The underlying x11rb connection (for callers that draw or create windows, e.g. tests).
    pub fn connection(&self) -> &RustConnection {
        &self.conn
    }

    fn req_err(&self, request: &'static str) -> impl Fn(String) -> X11Error + '_ {
        move |reason| X11Error::Request {
            path: self.path.clone(),
            request,
            reason,
        }
    }

    /// Screen 0's root window size and depth, from `GetGeometry` on the root window (asked now,
    /// not the cached connection setup, so a RandR change shows).
    ///
    /// Errors: [`X11Error::Request`].
    pub fn geometry(&self) -> Result<Geometry> {
        let e = self.req_err("GetGeometry");
        let g = self
            .conn
            .get_geometry(self.root)
            .map_err(|x| e(x.to_string()))?
            .reply()
            .map_err(|x| e(x.to_string()))?;
        Ok(Geometry {
            width: u32::from(g.width),
            height: u32::from(g.height),
            depth: g.depth,
        })
    }

    /// A screenshot of the whole root window: `GetImage` (ZPixmap, all planes) decoded with the
    /// root visual's colour masks into RGB. The cursor is not part of it (X servers exclude
    /// sprites from GetImage).
    ///
    /// Errors: [`X11Error::Request`]; [`X11Error::Format`] for depths other than 24/32 at 32 bits
    /// per pixel.
    pub fn screenshot(&self) -> Result<Screenshot> {
        let g = self.geometry()?;
        let all = Rect {
            x: 0,
            y: 0,
            width: g.width,
            height: g.height,
        };
        self.image(all, g.depth)
    }

    /// A screenshot of `rect` of the root window (clipped to the screen), as [`Display::screenshot`]
    /// takes the whole one: what the input gate polls, a few KB instead of 8 MB per look.
    ///
    /// Errors: as [`Display::screenshot`]; [`X11Error::Request`] for an empty clipped rectangle.
    pub fn region(&self, rect: Rect) -> Result<Screenshot> {
        let g = self.geometry()?;
        let clipped = Rect {
            x: rect.x.min(g.width),
            y: rect.y.min(g.height),
            width: rect.width.min(g.width.saturating_sub(rect.x)),
            height: rect.height.min(g.height.saturating_sub(rect.y)),
        };
        self.image(clipped, g.depth)
    }

    /// `GetImage` of `r` at the root's `depth`, decoded into RGB.
    fn image(&self, r: Rect, depth: u8) -> Result<Screenshot> {
        let setup = self.conn.setup();
        let bpp = setup
            .pixmap_formats
            .iter()
            .find(|f| f.depth == depth)
            .map(|f| f.bits_per_pixel)
            .unwrap_or(0);
        let fmt_err = || X11Error::Format {
            path: self.path.clone(),
            depth,
            bits_per_pixel: bpp,
        };
        if bpp != 32 || depth < 24 {
            return Err(fmt_err());
        }
        let screen = &setup.roots[0];
        let visual = screen
            .allowed_depths
            .iter()
            .flat_map(|d| d.visuals.iter())
            .find(|v| v.visual_id == screen.root_visual)
            .ok_or_else(fmt_err)?;
        let (rm, gm, bm) = (visual.red_mask, visual.green_mask, visual.blue_mask);
        let e = self.req_err("GetImage");
        if r.width == 0 || r.height == 0 {
            return Err(e(format!("empty rectangle {r}")));
        }
        let need = (r.width * r.height * 4) as usize;
        let lsb = setup.image_byte_order == ImageOrder::LSB_FIRST;
        let out = self
            .prepared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take_rgb(need / 4 * 3);
        let convert = |px: &[u8]| zpixmap_to_rgb_into(px, lsb, [rm, gm, bm], out);
        if let Some(rgb) = self.shm_rgb(r, need, convert) {
            return Screenshot::new(r.width, r.height, rgb);
        }
        let reply = self
            .conn
            .get_image(
                ImageFormat::Z_PIXMAP,
                self.root,
                r.x as i16,
                r.y as i16,
                r.width as u16,
                r.height as u16,
                !0,
            )
            .map_err(|x| e(x.to_string()))?
            .reply()
            .map_err(|x| e(x.to_string()))?;
        if reply.data.len() < need {
            return Err(e(format!(
                "{} bytes of image data for {}x{} at 32 bpp",
                reply.data.len(),
                r.width,
                r.height
            )));
        }
        let rgb = zpixmap_to_rgb(&reply.data[..need], lsb, [rm, gm, bm]);
        Screenshot::new(r.width, r.height, rgb)
    }

    /// `r`'s pixels through MIT-SHM ([`super::shm`]), converted by `convert` while no other
    /// image of this connection can overwrite the one segment (attached at the first call,
    /// sized for screen 0 as the server set it up); `None` when that is unavailable or fails,
    /// and `GetImage` is used instead.
    fn shm_rgb(
        &self,
        r: Rect,
        need: usize,
        convert: impl FnOnce(&[u8]) -> Vec<u8>,
    ) -> Option<Vec<u8>> {
        if !self.shm_allowed() {
            return None;
        }
        let _one_at_a_time = self.shm_busy.lock().unwrap_or_else(|p| p.into_inner());
        let seg = self.shm.get_or_init(|| {
            let s = &self.conn.setup().roots[0];
            let len = usize::from(s.width_in_pixels) * usize::from(s.height_in_pixels) * 4;
            if len == 0 {
                return Err(super::ShmError::NoPixels);
            }
            let prepared = self
                .prepared
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take_shm(len);
            match prepared {
                Some(p) => super::shm::attach_prepared(&self.conn, p).inspect(|_| {
                    self.shm_was_prepared
                        .store(true, std::sync::atomic::Ordering::Relaxed)
                }),
                None => super::shm::attach(&self.conn, len),
            }
        });
        match super::shm::get_image(seg.as_ref().ok()?, &self.conn, self.root, r, need) {
            Ok(px) => Some(convert(px)),
            Err(e) => {
                if let Ok(mut f) = self.shm_failed.lock() {
                    *f = Some(e.to_string());
                }
                None
            }
        }
    }

    /// ", prepared before the connection" when the attached segment is the adopted one.
    fn prepared_note(&self) -> &'static str {
        if self
            .shm_was_prepared
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            ", prepared before the connection"
        } else {
            ""
        }
    }

    /// How this connection's images came: through MIT-SHM, or `GetImage` and why — a sentence
    /// for the evidence.
    pub fn image_transfer(&self) -> String {
        let failed = self.shm_failed.lock().ok().and_then(|f| f.clone());
        match (self.shm_allowed(), self.shm.get(), failed) {
            (false, _, _) => "GetImage through the socket (MIT-SHM not used by choice)".into(),
            (true, None, _) => "no image taken".into(),
            (true, Some(Err(e)), _) => format!("GetImage through the socket (MIT-SHM: {e})"),
            (true, Some(Ok(_)), None) => format!(
                "MIT-SHM (ShmGetImage into a memfd passed with ShmAttachFd{})",
                self.prepared_note()
            ),
            (true, Some(Ok(_)), Some(e)) => format!(
                "MIT-SHM (ShmGetImage into a memfd passed with ShmAttachFd), GetImage through the socket after a failed ShmGetImage: {e}"
            ),
        }
    }

    fn shm_allowed(&self) -> bool {
        !self.no_shm.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether images are read through MIT-SHM (known after the first image).
    pub fn uses_shm(&self) -> bool {
        self.shm_allowed() && self.shm.get().is_some_and(|s| s.is_ok())
    }

    /// From now on, images come through the socket (`GetImage`) only: to compare both ways.
    pub fn disable_shm(&self) {
        self.no_shm
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Takes two screenshots `interval` apart and diffs them.
    ///
    /// Errors: those of [`Display::screenshot`].
    pub fn quiescence(&self, interval: Duration) -> Result<Quiescence> {
        let first = self.screenshot()?;
        std::thread::sleep(interval);
        let second = self.screenshot()?;
        let diff = diff(&first, &second)?;
        Ok(Quiescence {
            first,
            second,
            interval_ms: interval.as_millis() as u64,
            diff,
        })
    }

    /// The keycode the server maps to `keysym` (any column of `GetKeyboardMapping`).
    ///
    /// Errors: [`X11Error::Request`], [`X11Error::NoKeycode`].
    pub fn keycode(&self, keysym: u32) -> Result<u8> {
        let setup = self.conn.setup();
        let (min, max) = (setup.min_keycode, setup.max_keycode);
        let e = self.req_err("GetKeyboardMapping");
        let map = self
            .conn
            .get_keyboard_mapping(min, max - min + 1)
            .map_err(|x| e(x.to_string()))?
            .reply()
            .map_err(|x| e(x.to_string()))?;
        let per = usize::from(map.keysyms_per_keycode.max(1));
        map.keysyms
            .chunks(per)
            .position(|syms| syms.contains(&keysym))
            .map(|i| min + i as u8)
            .ok_or(X11Error::NoKeycode {
                path: self.path.clone(),
                keysym,
            })
    }

    /// Sends a key press and release of `keysym` through XTEST `FakeInput` (delivered to the
    /// window with the input focus, as from a real keyboard), then round-trips
    /// (`GetInputFocus`) so the server has processed both.
    ///
    /// Errors: [`X11Error::Request`] (XTEST missing: "the server has no XTEST extension"),
    /// [`X11Error::NoKeycode`].
    pub fn press_key(&self, keysym: u32) -> Result<()> {
        let e = self.req_err("XTestFakeInput");
        let present = self
            .conn
            .extension_information(xtest::X11_EXTENSION_NAME)
            .map_err(|x| e(x.to_string()))?
            .is_some();
        if !present {
            return Err(e("the server has no XTEST extension; start the X server with it enabled (Xorg/Xvfb enable it by default)".into()));
        }
        let code = self.keycode(keysym)?;
        for typ in [xproto::KEY_PRESS_EVENT, xproto::KEY_RELEASE_EVENT] {
            self.conn
                .xtest_fake_input(typ, code, x11rb::CURRENT_TIME, self.root, 0, 0, 0)
                .map_err(|x| e(x.to_string()))?
                .check()
                .map_err(|x| e(x.to_string()))?;
        }
        self.sync()
    }

    /// Round-trip to the server (`GetInputFocus`), so every request sent before has been
    /// processed.
    ///
    /// Errors: [`X11Error::Request`].
    pub fn sync(&self) -> Result<()> {
        let e = self.req_err("GetInputFocus");
        self.conn
            .get_input_focus()
            .map_err(|x| e(x.to_string()))?
            .reply()
            .map_err(|x| e(x.to_string()))?;
        Ok(())
    }
}

/// The X keysym of a printable ASCII character (Latin-1 keysyms equal the code point), e.g.
/// `'a'` → 0x61. None for other characters.
pub fn ascii_keysym(c: char) -> Option<u32> {
    (c.is_ascii_graphic() || c == ' ').then_some(c as u32)
}

/// 32-bit ZPixmap pixels (`data`, 4 bytes each, `lsb`: least significant byte first) into RGB
/// bytes through the visual's colour masks (`[red, green, blue]`). Masks of 8 bits each on byte
/// boundaries (every TrueColor visual of depth 24 in practice) take a byte-shuffle path, with
/// the byte positions as constants for the usual layouts (BGRX and RGBX either way round);
/// any other masks are shifted and cut per pixel. Both give the same bytes. A whole screen
/// (at least [`PARALLEL_PIXELS`]) is converted in row bands on rayon's pool (all cores): 1920x1080
/// took ~6 ms on one core of the 2-core test machine.
pub fn zpixmap_to_rgb(data: &[u8], lsb: bool, masks: [u32; 3]) -> Vec<u8> {
    zpixmap_to_rgb_into(data, lsb, masks, Vec::new())
}

/// [`zpixmap_to_rgb`] into `out` (resized to 3 bytes per pixel; every byte written): a buffer
/// whose pages were touched earlier ([`super::ScreenBuffers`]) saves the page faults of a fresh
/// one (6 MB for 1920x1080: ~4 ms on the 2-core test machine).
pub fn zpixmap_to_rgb_into(data: &[u8], lsb: bool, masks: [u32; 3], mut out: Vec<u8>) -> Vec<u8> {
    use rayon::prelude::*;
    let n = data.len() / 4;
    if out.len() != n * 3 {
        out.clear();
        out.resize(n * 3, 0);
    }
    let mut rgb = out;
    let byte_of = |m: u32| -> Option<usize> {
        let shift = m.trailing_zeros();
        (m.count_ones() == 8 && shift.is_multiple_of(8) && m >> shift == 0xff).then(|| {
            let i = (shift / 8) as usize;
            if lsb { i } else { 3 - i }
        })
    };
    let convert = |out: &mut [u8], px: &[u8]| match masks.map(byte_of) {
        [Some(2), Some(1), Some(0)] => shuffle::<2, 1, 0>(out, px),
        [Some(1), Some(2), Some(3)] => shuffle::<1, 2, 3>(out, px),
        [Some(0), Some(1), Some(2)] => shuffle::<0, 1, 2>(out, px),
        [Some(3), Some(2), Some(1)] => shuffle::<3, 2, 1>(out, px),
        [Some(r), Some(g), Some(b)] => {
            for (o, p) in out.chunks_exact_mut(3).zip(px.chunks_exact(4)) {
                o[0] = p[r];
                o[1] = p[g];
                o[2] = p[b];
            }
        }
        _ => by_masks(out, px, lsb, masks),
    };
    if n >= PARALLEL_PIXELS {
        rgb.par_chunks_mut(BAND_PIXELS * 3)
            .zip(data.par_chunks(BAND_PIXELS * 4))
            .for_each(|(o, p)| convert(o, p));
    } else {
        convert(&mut rgb, data);
    }
    rgb
}

/// Pixels from which [`zpixmap_to_rgb`] converts on all cores (a 1024x256 region or larger).
pub const PARALLEL_PIXELS: usize = 1 << 18;

/// Pixels per band of a parallel conversion (256 KiB of ZPixmap).
const BAND_PIXELS: usize = 1 << 16;

/// The byte shuffle with the positions of red, green and blue in each 4-byte pixel as
/// constants (no bounds checks in the loop).
fn shuffle<const R: usize, const G: usize, const B: usize>(out: &mut [u8], px: &[u8]) {
    for (o, p) in out.chunks_exact_mut(3).zip(px.chunks_exact(4)) {
        o[0] = p[R];
        o[1] = p[G];
        o[2] = p[B];
    }
}

/// Masks that are not whole bytes: each pixel read as a 32-bit word and each channel shifted
/// down and cut to 8 bits (0 for a zero mask).
fn by_masks(out: &mut [u8], px: &[u8], lsb: bool, masks: [u32; 3]) {
    let chan = |p: u32, m: u32| -> u8 {
        if m == 0 {
            0
        } else {
            ((p & m) >> m.trailing_zeros()) as u8
        }
    };
    for (o, px) in out.chunks_exact_mut(3).zip(px.chunks_exact(4)) {
        let b = [px[0], px[1], px[2], px[3]];
        let p = if lsb {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        };
        o[0] = chan(p, masks[0]);
        o[1] = chan(p, masks[1]);
        o[2] = chan(p, masks[2]);
    }
}

#[cfg(test)]
mod zpixmap_tests {
    use super::zpixmap_to_rgb;

    /// The per-pixel mask path, written out: the reference the byte-shuffle path must equal.
    fn slow(data: &[u8], lsb: bool, m: [u32; 3]) -> Vec<u8> {
        let mut out = Vec::new();
        for px in data.chunks_exact(4) {
            let b = [px[0], px[1], px[2], px[3]];
            let p = if lsb {
                u32::from_le_bytes(b)
            } else {
                u32::from_be_bytes(b)
            };
            for mask in m {
                out.push(if mask == 0 {
                    0
                } else {
                    ((p & mask) >> mask.trailing_zeros()) as u8
                });
            }
        }
        out
    }

    #[test]
    fn byte_masks_and_odd_masks_give_the_per_pixel_bytes() {
        let data: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        for lsb in [true, false] {
            for m in [
                [0xff0000, 0xff00, 0xff],
                [0xff, 0xff00, 0xff0000],
                [0xff00_0000, 0xff0000, 0xff00],
                [0x3ff00000, 0xffc00, 0x3ff],
                [0xf800, 0x7e0, 0x1f],
            ] {
                assert_eq!(
                    zpixmap_to_rgb(&data, lsb, m),
                    slow(&data, lsb, m),
                    "lsb {lsb} masks {m:x?}"
                );
            }
        }
        // BGRX little-endian (Xvfb's depth 24): bytes B, G, R, X -> R, G, B.
        assert_eq!(
            zpixmap_to_rgb(&[1, 2, 3, 0], true, [0xff0000, 0xff00, 0xff]),
            [3, 2, 1]
        );
    }

    #[test]
    fn a_whole_screen_converted_in_bands_gives_the_per_pixel_bytes() {
        // Above the parallel threshold and not a whole number of bands.
        let n = super::PARALLEL_PIXELS + 12_345;
        let data: Vec<u8> = (0..n as u32 * 4)
            .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
            .collect();
        for (lsb, m) in [
            (true, [0xff0000, 0xff00, 0xff]),
            (false, [0xff0000, 0xff00, 0xff]),
            (true, [0xff00, 0xff0000, 0xff000000]),
            (true, [0xf800, 0x7e0, 0x1f]),
        ] {
            let fast = zpixmap_to_rgb(&data, lsb, m);
            assert_eq!(fast.len(), n * 3);
            assert!(fast == slow(&data, lsb, m), "lsb {lsb} masks {m:x?}");
        }
    }
}
