//! MIT-SHM 1.2 image transfer for [`super::Display`]: the X server writes a `GetImage` into a
//! memfd this process maps, handed to the server with `ShmAttachFd` over the display socket (no
//! System V segment, so it works across the container's IPC namespace), instead of sending the
//! pixels through the socket. A 1920x1080 screen is 8 MB: through the socket its reply took 12–24
//! ms of each display gate on a 2-core machine; through shared memory the server copies it in a
//! few. Mirrors xcb's `xcb_shm_attach_fd` / `xcb_shm_get_image` use in e.g. x11rb's
//! `shared_memory` example. Anything that fails here makes the caller use `GetImage` instead:
//! both return the server's pixels of the same rectangle.

use super::Rect;
use super::ShmError;
use std::os::fd::{FromRawFd, OwnedFd};
use std::ptr::NonNull;
use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::shm;
use x11rb::protocol::xproto::{ImageFormat, Window};
use x11rb::rust_connection::RustConnection;

/// A shared mapping of `len` bytes at `ptr`, unmapped once, on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is process-wide memory owned by this value; it is only read through
// `&self` (after the server's reply), and unmapped once, in Drop.
unsafe impl Send for Mapping {}
// SAFETY: as above: shared access is read-only.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are the mapping made in `prepare`, unmapped only here.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// A memfd of `len` bytes mapped shared and read-write here, its pages populated, not yet
/// attached to a server: made by [`prepare`] ahead of the first image (e.g. while CRIU
/// restores the X server), attached by [`attach_prepared`].
pub(crate) struct PreparedShm {
    file: std::fs::File,
    map: Mapping,
}

impl PreparedShm {
    /// The segment's size, bytes.
    pub(crate) fn len(&self) -> usize {
        self.map.len
    }
}

/// A shared-memory segment attached to the server: `len` bytes mapped here at `ptr`.
pub(crate) struct ShmSegment {
    seg: shm::Seg,
    map: Mapping,
}

/// The server has MIT-SHM 1.2 or later (`ShmAttachFd`).
///
/// Errors: a sentence naming what is missing (no MIT-SHM, an older version) or the failed query.
fn check_server(conn: &RustConnection) -> Result<(), ShmError> {
    if conn
        .extension_information(shm::X11_EXTENSION_NAME)?
        .is_none()
    {
        return Err(ShmError::NoShm);
    }
    let v = shm::query_version(conn)?.reply()?;
    if (v.major_version, v.minor_version) < (1, 2) {
        return Err(ShmError::TooOld {
            major: v.major_version,
            minor: v.minor_version,
        });
    }
    Ok(())
}

/// The error of system call `step`, from `errno`.
fn os_error(step: &'static str) -> ShmError {
    ShmError::Os {
        step,
        source: std::io::Error::last_os_error(),
    }
}

/// A memfd of `len` bytes (> 0), mapped shared and read-write with `MAP_POPULATE`: the
/// server's first `ShmGetImage` then writes into pages that exist (allocating a fresh
/// segment's 2,025 pages was ~6 ms of the first screenshot after a restore on the 2-core test
/// machine).
///
/// Errors: a sentence naming the step (memfd, ftruncate, mmap).
pub(crate) fn prepare(len: usize) -> Result<PreparedShm, ShmError> {
    if len == 0 {
        return Err(ShmError::Empty);
    }
    let name = c"netprobe-xshm";
    // SAFETY: memfd_create(2) with a valid C string; the descriptor is owned below.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(os_error("memfd_create"));
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let file = std::fs::File::from(fd);
    file.set_len(len as u64).map_err(|source| ShmError::Os {
        step: "ftruncate",
        source,
    })?;
    // SAFETY: a shared mapping of the whole memfd, length `len` (> 0 checked above).
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            std::os::fd::AsRawFd::as_raw_fd(&file),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(os_error("mmap"));
    }
    let map = Mapping {
        ptr: NonNull::new(p.cast()).ok_or(ShmError::NullMapping)?,
        len,
    };
    Ok(PreparedShm { file, map })
}

/// `prepared` attached to the server as a new segment (`ShmAttachFd`, read-write), after
/// checking the server has MIT-SHM 1.2 or later.
///
/// Errors: a sentence naming the step (no MIT-SHM, an older version, the attach).
pub(crate) fn attach_prepared(
    conn: &RustConnection,
    prepared: PreparedShm,
) -> Result<ShmSegment, ShmError> {
    check_server(conn)?;
    attach_checked(conn, prepared)
}

/// `ShmAttachFd` of `prepared` to a server [`check_server`] accepted.
fn attach_checked(conn: &RustConnection, prepared: PreparedShm) -> Result<ShmSegment, ShmError> {
    let PreparedShm { file, map } = prepared;
    let id = conn.generate_id()?;
    shm::attach_fd(conn, id, OwnedFd::from(file), false)?
        .check()
        .map_err(|source| ShmError::Request {
            request: "ShmAttachFd",
            source,
        })?;
    Ok(ShmSegment { seg: id, map })
}

/// A memfd of `len` bytes mapped shared, read-write, and attached to the server as a new
/// segment (MIT-SHM 1.2 or later: `ShmAttachFd`): [`prepare`] then [`attach_prepared`], the
/// server checked first.
///
/// Errors: a sentence naming the step (no MIT-SHM, an older version, memfd, mmap, the attach).
pub(crate) fn attach(conn: &RustConnection, len: usize) -> Result<ShmSegment, ShmError> {
    check_server(conn)?;
    attach_checked(conn, prepare(len)?)
}

/// `ShmGetImage` of `r` of `root` in ZPixmap into `seg`: the first `need` bytes of the segment.
///
/// Errors: the request failed, or the reply's size is short of `need`.
pub(crate) fn get_image<'a>(
    seg: &'a ShmSegment,
    conn: &RustConnection,
    root: Window,
    r: Rect,
    need: usize,
) -> Result<&'a [u8], ShmError> {
    if need > seg.map.len {
        return Err(ShmError::TooLarge {
            need,
            len: seg.map.len,
        });
    }
    let reply = shm::get_image(
        conn,
        root,
        r.x as i16,
        r.y as i16,
        r.width as u16,
        r.height as u16,
        !0,
        ImageFormat::Z_PIXMAP.into(),
        seg.seg,
        0,
    )?
    .reply()
    .map_err(|source| ShmError::Request {
        request: "ShmGetImage",
        source,
    })?;
    if (reply.size as usize) < need {
        return Err(ShmError::Short {
            wrote: reply.size,
            need,
        });
    }
    // SAFETY: the mapping holds `seg.map.len >= need` bytes; the server finished writing them
    // before its reply.
    Ok(unsafe { std::slice::from_raw_parts(seg.map.ptr.as_ptr(), need) })
}
