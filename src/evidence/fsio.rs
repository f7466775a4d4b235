//! The one copy of the small file helpers every module uses: replace-in-place atomic writes
//! (state files, `config.json`; [`crate::evidence::EvidenceDir`] never overwrites, so evidence
//! goes there), `fsync` of a folder, SHA-256 of bytes and of a file, "now" as RFC 3339, and
//! [`read_bounded`]: the one way a file is read whole into memory — a regular file only (never
//! blocking on a FIFO, never opening a device), never more than a stated cap — used for what an
//! operator names (a profile, a matrix config, a CRIU image) and, through [`read_recorded`] and
//! [`sha256_recorded`] ([`open_regular`]), for every recorded evidence file.

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
    replace_atomic_with(path, |w| w.write_all(bytes))
}

/// [`replace_atomic`] of what `fill` writes (through a 64 KiB buffer): a document written part
/// by part, never held whole. `fill`'s error (its own, or any I/O error as `E`) leaves `path`
/// as it was.
///
/// Errors: `fill`'s, or any I/O error; the temporary file is removed on failure.
pub fn replace_atomic_with<E: From<std::io::Error>>(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> Result<(), E>,
) -> Result<(), E> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        unix_nanos()
    ));
    let res = (|| -> Result<(), E> {
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        let mut w = std::io::BufWriter::with_capacity(64 * 1024, f);
        fill(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        fsync_dir(dir)?;
        Ok(())
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

/// The most netprobe reads of one recorded file it parses whole (a log, `host.json`, a
/// `netstate-*.json`, a CRIU image): 256 MiB. Generous — the largest file of a ladder run here is
/// CRIU's `-v4` dump log at a few MiB — but finite, so an evidence file replaced by a huge (or
/// sparse) file cannot make `verify`, `report` or `diff` exhaust memory. Files only hashed are
/// streamed and have no cap.
pub const MAX_PARSED_BYTES: u64 = 256 << 20;

/// Opens `path` for reading only if it is a regular file, without ever blocking: `O_NONBLOCK`
/// (a FIFO opens at once instead of waiting for a writer), then `fstat` of what was opened.
/// With `follow == false` also `O_NOFOLLOW` (a symlink in place of the file is refused; evidence
/// folders hold none), which is what every recorded evidence file is opened with.
///
/// Errors: the open error; `InvalidInput` (the message does not repeat the path, as the
/// standard I/O errors do not) naming the kind of a non-regular file (FIFO,
/// character or block device, socket, folder) or a symlink (with `follow == false`), saying a
/// regular file is needed.
pub fn open_regular(path: &Path, follow: bool) -> std::io::Result<File> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    let not_regular = |kind: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{kind}, not a regular file: only the regular file that was recorded is read"),
        )
    };
    let f = match OpenOptions::new().read(true).custom_flags(flags).open(path) {
        Ok(f) => f,
        Err(e) if !follow && e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(not_regular("a symbolic link"));
        }
        Err(e) => return Err(e),
    };
    let ft = f.metadata()?.file_type();
    if ft.is_file() {
        return Ok(f);
    }
    Err(not_regular(kind_of(ft)))
}

/// Reads the recorded evidence file `path` whole: opened by [`open_regular`] (no symlink, only a
/// regular file, never blocking), at most [`MAX_PARSED_BYTES`]; when only `<path>.zst` is there
/// (stored compressed, [`super::compressed`]), what it decodes to (at most the same cap); when
/// only `<path>.ref` is there ([`super::reference`]), the file it refers to.
///
/// Errors: those of [`open_regular`] and of reading; `InvalidData` when the file is larger than
/// [`MAX_PARSED_BYTES`] (naming the cap).
pub fn read_recorded(path: &Path) -> std::io::Result<Vec<u8>> {
    read_bounded(path, MAX_PARSED_BYTES, Symlinks::Refuse)
        .or_else(|e| match e {
            // Only stored compressed: its content, decoded (at most the same cap).
            BoundedReadError::Io(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && fs::symlink_metadata(super::compressed::zst_path(path)).is_ok() =>
            {
                super::compressed::read_zst_bounded(path, MAX_PARSED_BYTES)
                    .map_err(BoundedReadError::Io)
            }
            // Kept by reference: the file it refers to, read as a recorded file.
            BoundedReadError::Io(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && fs::symlink_metadata(super::reference::ref_path(path)).is_ok() =>
            {
                let (target, _) = super::reference::target_of(&super::reference::ref_path(path))
                    .map_err(BoundedReadError::Io)?;
                read_bounded(&target, MAX_PARSED_BYTES, Symlinks::Refuse)
            }
            e => Err(e),
        })
        .map_err(|e| match e {
            BoundedReadError::Io(e) => e,
            BoundedReadError::NotRegular { kind } => std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{kind}, not a regular file: only the regular file that was recorded is read"
                ),
            ),
            BoundedReadError::TooLarge { .. } => std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "larger than {} MiB, the most netprobe reads of one evidence file",
                    MAX_PARSED_BYTES >> 20
                ),
            ),
        })
}

/// [`read_recorded`] as UTF-8 text.
///
/// Errors: those of [`read_recorded`]; `InvalidData` when the file is not UTF-8.
pub fn read_recorded_text(path: &Path) -> std::io::Result<String> {
    String::from_utf8(read_recorded(path)?).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text: {e}"),
        )
    })
}

/// SHA-256 of the recorded evidence file `path`, streamed (no size cap), opened by
/// [`open_regular`] without following a symlink.
///
/// Returns `(lower-case hex sha256, size in bytes)`. Errors: those of [`open_regular`] and of
/// reading.
pub fn sha256_recorded(path: &Path) -> std::io::Result<(String, u64)> {
    super::dir::sha256_stream(open_regular(path, false)?, |_| Ok(()))
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

/// What a non-regular file is, for [`BoundedReadError::NotRegular`] and other refusals of a
/// file that is not a plain one: "a symbolic link", "a folder", "a FIFO", …
pub fn kind_of(t: fs::FileType) -> &'static str {
    if t.is_symlink() {
        "a symbolic link"
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

/// How long [`wait_no_writer`] waits for the last writer of a file to go: 5 s.
pub const NO_WRITER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Waits until no process holds `path` open for writing, so that `execve` of it cannot fail
/// with `ETXTBSY` ("Text file busy"). A file netprobe has just written and closed can still be
/// open for writing elsewhere for a moment: a process another thread forked while the file was
/// open inherits the descriptor until it execs (`O_CLOEXEC` closes it only then). The test is
/// the kernel's own: a read lease (`fcntl(F_SETLEASE, F_RDLCK)`, taken and dropped at once on a
/// read-only descriptor) is refused with `EAGAIN` exactly while the inode is open for writing
/// (`check_conflicting_open()` in fs/locks.c). Polls every millisecond, at most `timeout`.
///
/// Returns `Ok` at once where leases are unavailable (`EINVAL`: `fs.leases-enable=0` or a file
/// system without them; `EOPNOTSUPP`): there is nothing to wait on, and the caller goes on as it
/// would without this wait.
///
/// Errors: the file cannot be opened; still open for writing after `timeout`
/// (`ErrorKind::ResourceBusy`, naming the file); another `fcntl` error.
pub fn wait_no_writer(path: &Path, timeout: std::time::Duration) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let start = std::time::Instant::now();
    loop {
        // SAFETY: fcntl on a descriptor this function owns; F_SETLEASE takes an int argument.
        let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK) };
        if r == 0 {
            // SAFETY: as above; drops the lease just taken.
            unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) => {}
            // No leases here (`fs.leases-enable=0`, a file system without them): nothing can be
            // waited for; the caller goes on as it would without this wait.
            Some(libc::EINVAL | libc::EOPNOTSUPP | libc::ENOSYS) => return Ok(()),
            _ => return Err(e),
        }
        if start.elapsed() >= timeout {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ResourceBusy,
                format!(
                    "{} is still open for writing by another process after {} ms",
                    path.display(),
                    timeout.as_millis()
                ),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Writes an executable file (a generated script, a wrapper): `bytes` to `path` (created or
/// truncated), mode `mode`, then [`wait_no_writer`] so the caller (or a runtime it starts) can
/// `execve` it at once without `ETXTBSY`.
///
/// Errors: any I/O error of the write or the `chmod`; those of [`wait_no_writer`].
pub fn write_executable(path: &Path, bytes: impl AsRef<[u8]>, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::write(path, bytes)?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    wait_no_writer(path, NO_WRITER_WAIT)
}

/// `text` with every control character but newline and tab escaped (`\u{1b}`), cut after `max`
/// characters (marked `…`): safe to print to a terminal.
pub fn printable(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        match c {
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
    }
    out
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
        assert_eq!(e.to_string(), "it is a symbolic link, not a regular file");
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
    fn recorded_files_refuse_fifos_symlinks_devices_and_huge_files() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("dump.log");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        let link = d.path().join("kernel.log");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        // Both would block or never end if opened plainly: each returns at once.
        for (p, kind) in [(&fifo, "FIFO"), (&link, "symbolic link")] {
            let e = sha256_recorded(p).unwrap_err().to_string();
            assert!(e.contains(kind) && e.contains("not a regular file"), "{e}");
            let e = read_recorded(p).unwrap_err().to_string();
            assert!(e.contains(kind), "{e}");
        }
        let e = super::super::dir::sha256_file(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let e = super::super::dir::sha256_file(&fifo).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        // A sparse file over the cap is refused after reading one byte past it.
        let big = d.path().join("big.log");
        File::create(&big)
            .unwrap()
            .set_len(MAX_PARSED_BYTES + 1)
            .unwrap();
        let e = read_recorded(&big).unwrap_err().to_string();
        assert!(e.contains("256 MiB"), "{e}");
        let ok = d.path().join("ok.txt");
        fs::write(&ok, "ok\n").unwrap();
        assert_eq!(read_recorded_text(&ok).unwrap(), "ok\n");
        assert_eq!(sha256_recorded(&ok).unwrap().1, 3);
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

    /// A file another process holds open for writing cannot be executed (`ETXTBSY`);
    /// [`wait_no_writer`] waits until that process lets go, and times out naming the file.
    #[test]
    fn wait_no_writer_waits_for_the_last_writer() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("tool.sh");
        write_executable(&p, "#!/bin/sh\nexit 0\n", 0o755).unwrap();
        assert!(std::process::Command::new(&p).status().unwrap().success());
        // A child holds the file open for writing for 400 ms, as a process forked while the
        // file was being written does until it execs.
        let held = d.path().join("held");
        let mut child = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(format!(
                "exec 3>>'{}'; : > '{}'; sleep 0.4",
                p.display(),
                held.display()
            ))
            .spawn()
            .unwrap();
        while !held.exists() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let busy = std::process::Command::new(&p).status().unwrap_err();
        assert_eq!(busy.raw_os_error(), Some(libc::ETXTBSY), "{busy}");
        let e = wait_no_writer(&p, std::time::Duration::from_millis(50)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ResourceBusy, "{e}");
        assert!(e.to_string().contains("tool.sh"), "{e}");
        wait_no_writer(&p, NO_WRITER_WAIT).unwrap();
        assert!(std::process::Command::new(&p).status().unwrap().success());
        child.wait().unwrap();
        assert!(wait_no_writer(&d.path().join("missing"), NO_WRITER_WAIT).is_err());
    }
}
