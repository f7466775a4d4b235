//! The one copy of the small file helpers every module uses: replace-in-place atomic writes
//! (state files, `config.json`; [`crate::evidence::EvidenceDir`] never overwrites, so evidence
//! goes there), `fsync` of a folder, SHA-256 of bytes and of a file, "now" as RFC 3339, and
//! [`read_bounded`]: the one way a file an operator names (a profile, a matrix config, a CRIU
//! image) is read into memory — a regular file only, never more than a stated cap.

use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Writes `bytes` to `path` atomically, replacing any file there: a temporary sibling
/// (`.<name>.tmp-<pid>-<nanos>`, mode 0644, never following a symlink), `fsync`, `rename`, then
/// `fsync` of the folder.
///
/// Errors: any I/O error; the temporary file is removed on failure.
pub fn replace_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        unix_nanos()
    ));
    let res = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        fsync_dir(dir)
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res
}

/// `fsync` of a folder (makes renames and creations in it durable).
///
/// Errors: the folder cannot be opened or synced.
pub fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Lower-case hex SHA-256 of `bytes` (64 characters).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Nanoseconds since the Unix epoch (wall clock; 0 before 1970), for unique temporary names.
pub fn unix_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Now, RFC 3339 UTC with milliseconds (e.g. `2026-12-01T02:20:49.123Z`), wall clock.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The cap for a small text file an operator names on the command line or in a profile (a slot
/// profile, `netprobe matrix --config`, an `image.sha256_file`): 1 MiB. Such TOML files are a
/// few KiB; anything larger is not one.
pub const CONFIG_READ_CAP: u64 = 1 << 20;

/// Symlinks in [`read_bounded`]: followed (to a regular file only) or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symlinks {
    /// A symlink to a regular file is read; one to anything else is refused before it is opened.
    Follow,
    /// A symlink is refused (`O_NOFOLLOW`): for files a tool writes itself, e.g. CRIU's images.
    Refuse,
}

/// Why [`read_bounded`] did not return a file's bytes. The messages name no file: callers put
/// the path (and the option or key it came from) in front.
#[derive(Debug, thiserror::Error)]
pub enum BoundedReadError {
    /// stat, open or read failed.
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
    /// Not a regular file (a device such as `/dev/zero`, a FIFO, a socket, a folder, or with
    /// [`Symlinks::Refuse`] a symlink): such a file may never end, or block on open.
    #[error("it is {kind}, not a regular file")]
    NotRegular {
        /// What it is, e.g. "a character device".
        kind: &'static str,
    },
    /// Larger than the cap the caller set.
    #[error("it holds at least {size} bytes, more than the cap of {cap} bytes")]
    TooLarge {
        /// Its size in bytes (at least this many: a file that grows is cut at `cap + 1`).
        size: u64,
        /// The cap, bytes.
        cap: u64,
    },
}

/// What a non-regular file is, for [`BoundedReadError::NotRegular`].
fn kind_of(t: fs::FileType) -> &'static str {
    if t.is_symlink() {
        "a symlink"
    } else if t.is_dir() {
        "a folder"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a plain file"
    }
}

/// Reads the regular file `path` whole, refusing it when it holds more than `cap` bytes. The
/// file's type is checked with `stat` (`lstat` with [`Symlinks::Refuse`]) before it is opened —
/// opening a device can have side effects — then opened with `O_NONBLOCK` (and `O_NOFOLLOW`
/// with [`Symlinks::Refuse`]) and checked again with `fstat`; at most `cap + 1` bytes are read,
/// so a file that grows meanwhile is refused too. Memory used: at most `cap + 1` bytes.
///
/// Errors: [`BoundedReadError::Io`] (missing, permissions), [`BoundedReadError::NotRegular`]
/// (device, FIFO, socket, folder, refused symlink), [`BoundedReadError::TooLarge`].
pub fn read_bounded(path: &Path, cap: u64, links: Symlinks) -> Result<Vec<u8>, BoundedReadError> {
    let meta = match links {
        Symlinks::Follow => fs::metadata(path)?,
        Symlinks::Refuse => fs::symlink_metadata(path)?,
    };
    if !meta.file_type().is_file() {
        return Err(BoundedReadError::NotRegular {
            kind: kind_of(meta.file_type()),
        });
    }
    let mut flags = libc::O_NONBLOCK;
    if links == Symlinks::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.file_type().is_file() {
        return Err(BoundedReadError::NotRegular {
            kind: kind_of(meta.file_type()),
        });
    }
    if meta.len() > cap {
        return Err(BoundedReadError::TooLarge {
            size: meta.len(),
            cap,
        });
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    f.take(cap.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > cap {
        return Err(BoundedReadError::TooLarge {
            size: buf.len() as u64,
            cap,
        });
    }
    Ok(buf)
}

/// [`read_bounded`] of a text file. Errors: as [`read_bounded`], plus [`BoundedReadError::Io`]
/// of kind `InvalidData` when the bytes are not UTF-8.
pub fn read_bounded_text(
    path: &Path,
    cap: u64,
    links: Symlinks,
) -> Result<String, BoundedReadError> {
    let bytes = read_bounded(path, cap, links)?;
    String::from_utf8(bytes).map_err(|e| {
        BoundedReadError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (at byte {})", e.utf8_error().valid_up_to()),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_atomic_replaces_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state.json");
        replace_atomic(&p, b"one").unwrap();
        replace_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
        assert!(replace_atomic(&d.path().join("no/such/dir/x"), b"x").is_err());
    }

    #[test]
    fn read_bounded_refuses_devices_symlinks_and_large_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("p.toml");
        fs::write(&p, b"0123456789").unwrap();
        assert_eq!(
            read_bounded(&p, 10, Symlinks::Refuse).unwrap(),
            b"0123456789"
        );
        let e = read_bounded(&p, 9, Symlinks::Follow).unwrap_err();
        assert!(
            matches!(e, BoundedReadError::TooLarge { size: 10, cap: 9 }),
            "{e}"
        );
        assert!(e.to_string().contains("cap of 9 bytes"), "{e}");
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20, Symlinks::Follow).unwrap_err();
        assert_eq!(
            e.to_string(),
            "it is a character device, not a regular file"
        );
        let z = d.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &z).unwrap();
        let e = read_bounded(&z, 1 << 20, Symlinks::Follow).unwrap_err();
        assert!(matches!(e, BoundedReadError::NotRegular { .. }), "{e}");
        let e = read_bounded(&z, 1 << 20, Symlinks::Refuse).unwrap_err();
        assert_eq!(e.to_string(), "it is a symlink, not a regular file");
        let l = d.path().join("link.toml");
        std::os::unix::fs::symlink(&p, &l).unwrap();
        assert_eq!(
            read_bounded_text(&l, 64, Symlinks::Follow).unwrap(),
            "0123456789"
        );
        assert!(read_bounded(&l, 64, Symlinks::Refuse).is_err());
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = read_bounded(&fifo, 64, Symlinks::Follow).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = read_bounded(d.path(), 64, Symlinks::Follow).unwrap_err();
        assert!(e.to_string().contains("a folder"), "{e}");
        fs::write(&p, [0xffu8, 0xfe]).unwrap();
        assert!(read_bounded_text(&p, 64, Symlinks::Follow).is_err());
    }

    #[test]
    fn hashes_and_time_have_their_shapes() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let t = now_rfc3339();
        assert!(t.ends_with('Z') && t.len() == 24, "{t}");
    }
}
