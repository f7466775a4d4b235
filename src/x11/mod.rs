//! netprobe looks at a guest's screen itself: X11 spoken directly to the guest's display socket
//! with the x11rb crate (no tool inside the guest).
//!
//! - [`display`]: [`Display::connect`] (bounded wait, socket check), [`Display::geometry`],
//!   [`Display::screenshot`] (root window, through MIT-SHM where the server has it, else
//!   `GetImage`), [`Display::press_key`] (XTEST),
//!   [`Display::quiescence`] (two screenshots an interval apart).
//! - [`buffers`]: [`ScreenBuffers`], whole-screen memory made ready before the display is up
//!   (a restore prepares it while CRIU restores the X server).
//! - [`image`]: [`Screenshot`] ↔ PNG with sha256, [`diff`] (count + bounding box),
//!   [`diff_image`] (changed pixels marked red), [`region_equal`].
//! - [`ewmh`]: what the window manager says: its name, the focused window's name, the
//!   windows of a name with their map state.
//! - [`gates`]: the display gates as data in, [`GateRecord`] out (geometry, quiescence,
//!   pixel-equal, input), writing their PNGs with sha256 into an evidence directory.
//!
//! The socket of display `:N` is `<guest root>/tmp/.X11-unix/XN` ([`socket_under_root`]); with a
//! tmpfs `/tmp` in the guest, the root is `/proc/<container init pid>/root`.

pub mod buffers;
pub mod display;
pub mod error;
pub mod ewmh;
pub mod gates;
pub mod image;
mod shm;

pub use buffers::ScreenBuffers;
pub use display::{Display, Geometry, Quiescence, ascii_keysym, socket_under_root};
pub use error::{Result, ShmError, X11Error};
pub use gates::{
    GateRecord, KeyPressed, PngArtifact, geometry_gate, input_gate, input_gate_pressed, pixel_gate,
    pixel_gate_png, quiescence_gate, write_artifact,
};
pub use image::{
    DIFF_MARK, PixelDiff, Rect, Screenshot, diff, diff_image, rect_text, region_equal,
    region_other_pixels,
};
