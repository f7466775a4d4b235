//! Sealed copies of the slot's runtime and CRIU binaries: made at provision, held by the holder,
//! executed by every later verb instead of re-hashing the files on disk.
//!
//! At provision each binary whose sha256 the `*-binary-found` gate recorded is copied into a
//! memfd (`memfd_create(2)`, `MFD_ALLOW_SEALING | MFD_EXEC`) while the copy is hashed; the copy
//! must hash to the recorded sha256. It is then sealed with `F_SEAL_SEAL | F_SEAL_SHRINK |
//! F_SEAL_GROW | F_SEAL_WRITE` — the kernel refuses every later write, resize or seal change, to
//! root too, for the life of the file (the seal set runc uses for its own cloned binary,
//! `RUNC_MEMFD_SEALS` in runc's `libcontainer/dmz/cloned_binary_linux.go`) — reopened read-only
//! (an `O_RDWR` descriptor would make `execve` fail with `ETXTBSY`) and handed to the holder,
//! which keeps it open under the same number until it ends ([`crate::ns::Holder::spawn_keeping`]).
//!
//! A later verb runs `/proc/<holder pid>/fd/<n>` through symlinks in the runtime's private
//! `PATH` folder (`runc`/`crun` for the runtime, `criu` for CRIU), so the processes are named
//! after the binaries, not the descriptor number (`crate::oci::runtime_env::CriuPathDir`). Its gate ([`prove`]) opens that descriptor and
//! proves it is the copy made at provision — a memfd with the recorded device, inode and size
//! and all four seals — so the bytes executed are the bytes hashed at provision, with no
//! re-hash (which took 9–17 ms of every verb on a 2-core machine). The file on disk the copy
//! came from is compared by `stat` (device, inode, size, mtime, ctime); when any differs it is
//! re-hashed and must still hash to the pin (a swapped binary fails the gate as before).

use crate::slot::gate::Observed;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The seals every sealed copy carries (runc's `RUNC_MEMFD_SEALS`).
pub const SEALS: libc::c_int =
    libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;

/// A file's identity by `stat(2)`: what a later verb compares instead of re-hashing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStat {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// `st_size`, bytes.
    pub size: u64,
    /// `st_mtime`, `st_mtime_nsec` (seconds, nanoseconds since the epoch).
    pub mtime: [i64; 2],
    /// `st_ctime`, `st_ctime_nsec` (the kernel sets it on every change; no call sets it back).
    pub ctime: [i64; 2],
}

impl FileStat {
    /// From a `stat` result.
    pub fn of(m: &std::fs::Metadata) -> FileStat {
        FileStat {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: [m.mtime(), m.mtime_nsec()],
            ctime: [m.ctime(), m.ctime_nsec()],
        }
    }
}

/// The record of one sealed copy (`state.json` `runtime.sealed` / `criu.sealed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedCopy {
    /// The memfd's name (`netprobe-runtime`, `netprobe-criu`): its `/proc/PID/fd` link reads
    /// `/memfd:<name> (deleted)`.
    pub name: String,
    /// Lower-case hex sha256 of the bytes copied (the pin the copy was checked against).
    pub sha256: String,
    /// The descriptor number under which the holder keeps it (`/proc/<holder pid>/fd/<fd>`).
    pub holder_fd: i32,
    /// The memfd's device and inode (`fstat` at provision).
    pub dev: u64,
    /// The memfd's inode number.
    pub ino: u64,
    /// Its size, bytes (that of the file it was copied from).
    pub bytes: u64,
    /// The file it was copied from, by `stat`, at provision.
    pub source: FileStat,
}

/// A sealed copy just made: the read-only descriptor (to hand to the holder) and its record.
#[derive(Debug)]
pub struct Sealed {
    /// Read-only, close-on-exec (the holder spawn clears that for its child).
    pub fd: OwnedFd,
    /// What `state.json` records; `holder_fd` is `fd`'s number.
    pub record: SealedCopy,
}

/// Why no sealed copy was made.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The file's bytes do not hash to the pin recorded by its gate moments before.
    #[error(
        "{path} changed after its gate: its copy hashes to sha256 {found}, the gate recorded {pinned}"
    )]
    Changed {
        /// The file copied.
        path: PathBuf,
        /// sha256 of the bytes copied.
        found: String,
        /// The recorded pin.
        pinned: String,
    },
    /// A system call failed (no memfd, no sealing, a read error).
    #[error("cannot make a sealed copy of {path}: {op}: {source}")]
    Os {
        /// The file copied.
        path: PathBuf,
        /// The failed step.
        op: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// `stat(2)` of a file failed.
    #[error("cannot stat {}: {source}", path.display())]
    Stat {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Copies `path` into a sealed memfd named `netprobe-<name>`, hashing the bytes as they are
/// copied; they must hash to `sha256` (lower-case hex).
///
/// Errors: [`SealError::Changed`] when the bytes hash to something else; [`SealError::Os`] when
/// the file cannot be read or the memfd cannot be made, written, sealed or reopened.
pub fn seal(path: &Path, name: &str, sha256: &str) -> Result<Sealed, SealError> {
    let os = |op: &'static str| {
        move |source: std::io::Error| SealError::Os {
            path: path.to_path_buf(),
            op,
            source,
        }
    };
    let mut src = File::open(path).map_err(os("open"))?;
    let source = FileStat::of(&src.metadata().map_err(os("stat"))?);
    let memfd_name = format!("netprobe-{name}");
    let rw = memfd(&memfd_name).map_err(os("memfd_create"))?;
    let mut out = File::from(rw);
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut bytes = 0u64;
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(os("read")(e)),
        };
        hash.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(os("write memfd"))?;
        bytes += n as u64;
    }
    let found = hex::encode(hash.finalize());
    if found != sha256 {
        return Err(SealError::Changed {
            path: path.to_path_buf(),
            found,
            pinned: sha256.to_string(),
        });
    }
    // SAFETY: fcntl(2) F_ADD_SEALS on a memfd this function owns.
    if unsafe { libc::fcntl(out.as_raw_fd(), libc::F_ADD_SEALS, SEALS) } != 0 {
        return Err(os("F_ADD_SEALS")(std::io::Error::last_os_error()));
    }
    let ro = File::open(format!("/proc/self/fd/{}", out.as_raw_fd())).map_err(os("reopen"))?;
    drop(out);
    let m = ro.metadata().map_err(os("fstat memfd"))?;
    let fd = OwnedFd::from(ro);
    Ok(Sealed {
        record: SealedCopy {
            name: memfd_name,
            sha256: found,
            holder_fd: fd.as_raw_fd(),
            dev: m.dev(),
            ino: m.ino(),
            bytes,
            source,
        },
        fd,
    })
}

/// `memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC)`; without `MFD_EXEC` on a
/// kernel older than 6.3 (`EINVAL`), whose memfds are executable anyway.
fn memfd(name: &str) -> std::io::Result<OwnedFd> {
    let c = std::ffi::CString::new(name).map_err(std::io::Error::other)?;
    let base = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    for flags in [base | libc::MFD_EXEC, base] {
        // SAFETY: memfd_create(2) with a valid C string; the fd is owned below.
        let fd = unsafe { libc::memfd_create(c.as_ptr(), flags) };
        if fd >= 0 {
            // SAFETY: a fresh descriptor owned by nobody else.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(e);
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::EINVAL))
}

/// The path a verb executes for the copy `rec` held by the holder `pid`.
pub fn exec_path(pid: i32, rec: &SealedCopy) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/fd/{}", rec.holder_fd))
}

/// Proves `/proc/<pid>/fd/<holder_fd>` is the sealed copy `rec`: the memfd of the recorded name
/// (its link reads `/memfd:<name> (deleted)`) with the recorded device, inode and size and
/// every seal of [`SEALS`]. Returns the gate's sentence. (That the record belongs to the binary
/// in question — its name and sha256 — is the caller's check.)
///
/// Errors: a sentence naming the descriptor and what differs (fail closed: a descriptor that
/// cannot be opened or read is not proven).
pub fn prove(pid: i32, rec: &SealedCopy) -> Observed {
    let p = exec_path(pid, rec);
    let link = std::fs::read_link(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    let link = link.to_string_lossy().into_owned();
    if !link.starts_with("/memfd:") {
        return Err(format!("{} is {link}, not a memfd", p.display()));
    }
    if link != format!("/memfd:{} (deleted)", rec.name) {
        return Err(format!(
            "{} is {link}, not the memfd {} made at provision",
            p.display(),
            rec.name
        ));
    }
    let f = File::open(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    let m = f
        .metadata()
        .map_err(|e| format!("{}: fstat: {e}", p.display()))?;
    if (m.dev(), m.ino(), m.size()) != (rec.dev, rec.ino, rec.bytes) {
        return Err(format!(
            "{} ({link}) is device {} inode {} of {} bytes; the copy made at provision was device {} inode {} of {} bytes",
            p.display(),
            m.dev(),
            m.ino(),
            m.size(),
            rec.dev,
            rec.ino,
            rec.bytes
        ));
    }
    // SAFETY: fcntl(2) F_GET_SEALS on a descriptor this function owns.
    let seals = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GET_SEALS) };
    if seals < 0 || seals & SEALS != SEALS {
        return Err(format!(
            "{} ({link}) carries seals {seals:#x}, not all of seal+shrink+grow+write ({SEALS:#x})",
            p.display()
        ));
    }
    Ok(format!(
        "runs {} ({link}, inode {}, {} bytes, sealed seal+shrink+grow+write since provision)",
        p.display(),
        rec.ino,
        rec.bytes
    ))
}

/// Whether the file at `path` still has the `stat` identity recorded (at provision, or when a
/// verb last re-hashed it to the pin: [`SourceRefresh`]) (`Ok(true)`), has another
/// (`Ok(false)`: re-hash it), or cannot be read (`Err`).
pub fn source_unchanged(path: &Path, rec: &SealedCopy) -> Result<bool, SealError> {
    Ok(source_stat(path)? == rec.source)
}

/// The `stat` identity of the file at `path`.
///
/// Errors: a sentence naming the path when `stat(2)` fails.
pub fn source_stat(path: &Path) -> Result<FileStat, SealError> {
    let m = std::fs::metadata(path).map_err(|source| SealError::Stat {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(FileStat::of(&m))
}

/// The source files a verb re-hashed to their pin (their `stat` changed since it was
/// recorded, e.g. a package reinstalled the same bytes), with the `stat` each had both before
/// and after the hash (a file written during the hash changes its `ctime`, and is not refreshed).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SourceRefresh {
    /// The runtime's source file, when re-hashed to the pin.
    pub runtime: Option<FileStat>,
    /// CRIU's source file, when re-hashed to the pin.
    pub criu: Option<FileStat>,
}

impl SourceRefresh {
    /// Records each refreshed `stat` as the sealed copy's `source` in `st` (the copy itself is
    /// unchanged: same memfd, same sha256); returns a sentence per binary refreshed.
    pub fn apply(&self, st: &mut crate::slot::state::SlotState) -> Vec<String> {
        let mut done = Vec::new();
        for (what, new, pin) in [
            ("runtime", self.runtime, &mut st.runtime),
            ("criu", self.criu, &mut st.criu),
        ] {
            if let (Some(new), Some(rec)) = (new, pin.sealed.as_mut())
                && rec.source != new
            {
                rec.source = new;
                done.push(format!(
                    "{what} {}: re-hashed to the pin; its new stat is recorded (later verbs compare by stat again)",
                    pin.path.display()
                ));
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(b: &[u8]) -> String {
        hex::encode(Sha256::digest(b))
    }

    #[test]
    fn a_sealed_copy_refuses_writes_and_proves_itself() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bin");
        std::fs::write(&p, b"#!/bin/sh\necho sealed\n").unwrap();
        let s = seal(&p, "test", &sha(b"#!/bin/sh\necho sealed\n")).unwrap();
        assert_eq!(s.record.bytes, 22);
        // The read-only descriptor cannot write; a fresh O_RDWR open cannot either (sealed).
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/self/fd/{}", s.fd.as_raw_fd()))
            .unwrap();
        assert!(w.write_all(b"x").is_err(), "F_SEAL_WRITE refuses writes");
        drop(w);
        let me = std::process::id() as i32;
        let d = prove(me, &s.record).unwrap();
        assert!(d.contains("/memfd:netprobe-test"), "{d}");
        assert!(source_unchanged(&p, &s.record).unwrap());
        // Another file under the recorded number is not the copy.
        let mut other = s.record.clone();
        other.ino += 1;
        assert!(prove(me, &other).unwrap_err().contains("inode"));
        let mut other = s.record.clone();
        other.name = "netprobe-criu".into();
        assert!(
            prove(me, &other)
                .unwrap_err()
                .contains("not the memfd netprobe-criu")
        );
        assert_eq!(s.record.sha256, sha(b"#!/bin/sh\necho sealed\n"));
        std::fs::write(&p, b"changed").unwrap();
        assert!(!source_unchanged(&p, &s.record).unwrap());
    }

    #[test]
    fn a_file_that_no_longer_hashes_to_its_pin_is_not_copied() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bin");
        std::fs::write(&p, b"new bytes").unwrap();
        let e = seal(&p, "test", &sha(b"old bytes")).unwrap_err();
        assert!(e.to_string().contains("changed after its gate"), "{e}");
    }

    #[test]
    fn a_descriptor_that_is_not_a_memfd_is_not_proven() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plain");
        std::fs::write(&p, b"plain").unwrap();
        let f = File::open(&p).unwrap();
        let m = f.metadata().unwrap();
        let rec = SealedCopy {
            name: "netprobe-test".into(),
            sha256: String::new(),
            holder_fd: f.as_raw_fd(),
            dev: m.dev(),
            ino: m.ino(),
            bytes: 5,
            source: FileStat::of(&m),
        };
        let e = prove(std::process::id() as i32, &rec).unwrap_err();
        assert!(e.contains("not a memfd"), "{e}");
    }
}
