//! Errors of the X11 module: each names the display socket (or file) and the fix.

use std::path::PathBuf;

/// What went wrong talking to a guest's X display.
#[derive(Debug, thiserror::Error)]
pub enum X11Error {
    /// The path exists but is not a Unix socket (e.g. a regular file or directory left where the
    /// X server's socket should be).
    #[error(
        "{path} is not a Unix socket ({kind}); the X server's socket for display :N is \
         <guest root>/tmp/.X11-unix/XN: check the display number and that the guest's X server owns it"
    )]
    NotASocket {
        /// The path that was checked.
        path: PathBuf,
        /// What it is instead ("regular file", "directory", …).
        kind: String,
    },
    /// The socket did not appear (or refused connections) within the bounded wait.
    #[error(
        "display socket {path} did not come up within {waited_ms} ms ({last}); start the guest's \
         X server (Xorg/Xvfb) on that display, or raise the readiness timeout"
    )]
    NeverCameUp {
        /// The socket path waited for.
        path: PathBuf,
        /// How long netprobe waited, milliseconds.
        waited_ms: u64,
        /// The last error seen (missing, connection refused, …).
        last: String,
    },
    /// The X11 connection setup failed (authorization, protocol).
    #[error(
        "X11 connection setup on {path} failed: {reason}; the guest's X server must accept \
         local connections without a cookie (no -auth) or be reachable as root"
    )]
    Setup {
        /// The socket path.
        path: PathBuf,
        /// The x11rb error.
        reason: String,
    },
    /// A request failed after setup (connection lost, X error reply, missing extension).
    #[error("X11 request {request} on {path} failed: {reason}")]
    Request {
        /// The socket path.
        path: PathBuf,
        /// The request name (e.g. `GetImage`).
        request: &'static str,
        /// The error.
        reason: String,
    },
    /// The server's pixel format is one netprobe does not decode.
    #[error(
        "unsupported pixel format on {path}: depth {depth}, {bits_per_pixel} bits per pixel; \
         netprobe reads 24/32-bit TrueColor screens (run the X server at depth 24)"
    )]
    Format {
        /// The socket path.
        path: PathBuf,
        /// Root window depth.
        depth: u8,
        /// Bits per pixel of that depth's ZPixmap format.
        bits_per_pixel: u8,
    },
    /// A keysym has no keycode in the server's keyboard mapping.
    #[error("keysym 0x{keysym:x} has no keycode on {path}; use a keysym of the server's keymap")]
    NoKeycode {
        /// The socket path.
        path: PathBuf,
        /// The keysym asked for.
        keysym: u32,
    },
    /// Two images of different sizes were compared.
    #[error(
        "cannot compare a {a_w}x{a_h} image with a {b_w}x{b_h} image (the display's geometry changed)"
    )]
    SizeMismatch {
        /// First image width, pixels.
        a_w: u32,
        /// First image height, pixels.
        a_h: u32,
        /// Second image width, pixels.
        b_w: u32,
        /// Second image height, pixels.
        b_h: u32,
    },
    /// PNG encoding or decoding failed.
    #[error("PNG {what}: {reason}")]
    Png {
        /// What was being done, e.g. "decode /path/a.png".
        what: String,
        /// The png crate's error.
        reason: String,
    },
    /// A file could not be read or written.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Result with [`X11Error`].
pub type Result<T> = std::result::Result<T, X11Error>;

/// Why MIT-SHM images are not available on a connection ([`super::shm`]): the step that failed
/// (the server check, memfd, ftruncate, mmap, the attach, `ShmGetImage`).
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    /// The connection failed while sending a request.
    #[error(transparent)]
    Connection(#[from] x11rb::errors::ConnectionError),
    /// A query's reply was an X error or the connection broke.
    #[error(transparent)]
    Reply(#[from] x11rb::errors::ReplyError),
    /// No XID could be allocated for the segment.
    #[error(transparent)]
    Id(#[from] x11rb::errors::ReplyOrIdError),
    /// The server does not offer the MIT-SHM extension.
    #[error("the server has no MIT-SHM")]
    NoShm,
    /// The server's MIT-SHM is older than 1.2.
    #[error("MIT-SHM {major}.{minor} has no ShmAttachFd")]
    TooOld {
        /// Major version.
        major: u16,
        /// Minor version.
        minor: u16,
    },
    /// A segment of 0 bytes was asked for.
    #[error("a segment of 0 bytes")]
    Empty,
    /// Screen 0 has no pixels, so no segment is sized for it.
    #[error("screen 0 has no pixels")]
    NoPixels,
    /// A system call failed; `step` is `memfd_create`, `ftruncate` or `mmap`.
    #[error("{step}: {source}")]
    Os {
        /// The call.
        step: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// `mmap` returned a null pointer.
    #[error("mmap returned null")]
    NullMapping,
    /// A request's reply was an X error; `request` is `ShmAttachFd` or `ShmGetImage`.
    #[error("{request}: {source}")]
    Request {
        /// The request.
        request: &'static str,
        /// The error.
        #[source]
        source: x11rb::errors::ReplyError,
    },
    /// The image asked for is larger than the segment.
    #[error("{need} bytes do not fit the {len}-byte segment")]
    TooLarge {
        /// Bytes asked for.
        need: usize,
        /// The segment's size, bytes.
        len: usize,
    },
    /// `ShmGetImage` wrote fewer bytes than asked for.
    #[error("ShmGetImage wrote {wrote} bytes, not {need}")]
    Short {
        /// Bytes written, as the reply says.
        wrote: u32,
        /// Bytes asked for.
        need: usize,
    },
}
