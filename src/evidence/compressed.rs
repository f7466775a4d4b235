//! Evidence files stored compressed (zstd): large files read rarely — CRIU's `-v4` logs, a
//! slot verb's bigger JSON — are kept as `<name>.zst` once nothing of the verb reads them any
//! more ([`EvidenceDir::compress`]), and every reader of recorded evidence reads them
//! transparently: [`open_content`] (and through it [`super::fsio::read_recorded`] and the log
//! assertions' scan) opens `<name>`, or `<name>.zst` decoded when only that is there.
//!
//! An artifact list names the stored file (`criu-work/restore.log.zst`) with the sha256 and
//! size of the stored bytes — what `sha256sum` shows — and, in `content`
//! ([`super::result::Content`]), the sha256 and size of what it decodes to (what CRIU wrote).
//! A compressed file is proven before its original goes: the temporary `.zst` is decoded again
//! and must hash to the original's sha256, else nothing is replaced (fail closed: the original
//! stays). Old evidence, with uncompressed logs, reads as it always did.

use super::dir::{EvidenceDir, sha256_stream};
use super::error::{EvidenceError, io_err};
use super::fsio::open_regular;
use super::result::{Artifact, Content, Encoding};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// The suffix of a file stored compressed: `restore.log` is kept as `restore.log.zst`.
pub const ZSTD_SUFFIX: &str = ".zst";

/// Files at least this large (bytes) are worth compressing: below one 4 KiB block on disk
/// nothing is gained, and a small JSON read by `report` stays plain.
pub const COMPRESS_THRESHOLD: u64 = 8 << 10;

/// The zstd level evidence is compressed with. Measured here on a GNOME reset's 953,549-byte
/// CRIU `restore.log` (zstd 1.5, one core): level 3 stores 143 KB in 0.01 s of CPU, 9 99 KB in
/// 0.04 s, 16 (the first `btopt` level) 82 KB in 0.17 s, 19 81 KB in 0.40 s. 9 keeps a GNOME
/// reset's evidence under its 150 KB budget (≈141 KB) while the thread beside the display gates
/// ends before them (`evidence-beside-wait` 0 ms); 16 saved 17 KB but made the reset wait
/// ≈120–180 ms for that thread at its end.
pub const ZSTD_LEVEL: i32 = 9;

/// `path` with [`ZSTD_SUFFIX`] appended (`a/restore.log` → `a/restore.log.zst`).
pub fn zst_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(ZSTD_SUFFIX);
    PathBuf::from(s)
}

/// Whether the recorded file `rel` is stored compressed (its name ends in [`ZSTD_SUFFIX`]).
pub fn is_compressed(rel: &str) -> bool {
    rel.ends_with(ZSTD_SUFFIX)
}

/// Opens the recorded evidence file `path` for reading its content: the file itself when it is
/// there ([`open_regular`], `follow` as there), else `<path>.zst` decoded on the fly, else the
/// file `<path>.ref` refers to ([`super::reference::open_target`]). A reader never needs to
/// know which it got.
///
/// Errors: those of [`open_regular`] — `NotFound` when neither is there (the error of `path`
/// itself) —; the decoder's set-up.
pub fn open_content(path: &Path, follow: bool) -> io::Result<Box<dyn Read + Send>> {
    match open_regular(path, follow) {
        Ok(f) => Ok(Box::new(f)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let z = match open_regular(&zst_path(path), follow) {
                Ok(z) => z,
                Err(z) if z.kind() == io::ErrorKind::NotFound => {
                    // Kept by reference: the referenced file ([`super::reference`]).
                    return match super::reference::open_target(path) {
                        Ok(f) => Ok(Box::new(f)),
                        Err(r)
                            if r.kind() == io::ErrorKind::NotFound
                                && !super::reference::ref_path(path).exists() =>
                        {
                            Err(e)
                        }
                        Err(r) => Err(r),
                    };
                }
                Err(z) => return Err(z),
            };
            Ok(Box::new(zstd::stream::read::Decoder::new(z)?))
        }
        Err(e) => Err(e),
    }
}

/// What the stored file `path` (a `.zst` one) decodes to: its sha256 and size, streamed.
///
/// Errors: the file cannot be opened, or is not a whole zstd stream (`InvalidData`, or the
/// decoder's own error).
pub fn content_of(path: &Path) -> io::Result<Content> {
    let z = open_regular(path, false)?;
    let (sha256, bytes) = sha256_stream(zstd::stream::read::Decoder::new(z)?, |_| Ok(()))?;
    Ok(Content {
        encoding: Encoding::Zstd,
        bytes,
        sha256,
    })
}

/// A writer that hashes what it passes on (the stored bytes of a compressed file).
struct Hashing<W> {
    inner: W,
    hasher: Sha256,
    bytes: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl EvidenceDir {
    /// Stores the folder's file `rel` compressed: `<rel>.zst` is written atomically (temporary
    /// name, proven to decode to the original's sha256, linked into place without replacing
    /// anything), then `rel` is removed. Level [`ZSTD_LEVEL`]. Memory: zstd's window and one
    /// 64 KiB block, whatever the size.
    ///
    /// Returns the stored file's [`Artifact`] with its `content`. Errors:
    /// [`EvidenceError::Exists`] (`<rel>.zst` is there already), [`EvidenceError::BadPath`],
    /// [`EvidenceError::Io`] (read, write, the proof — `InvalidData` when the decoded bytes
    /// differ — or the removal of `rel`, after which both files are there and both listed).
    /// Nothing is removed unless the compressed file was proven.
    pub fn compress(&self, rel: &str) -> Result<Artifact, EvidenceError> {
        let src = self.root().join(rel);
        let input = open_regular(&src, false).map_err(io_err("open", &src))?;
        let mut content = None;
        let mut stored = self.atomic(&format!("{rel}{ZSTD_SUFFIX}"), false, |f, tmp| {
            let out = Hashing {
                inner: io::BufWriter::with_capacity(1 << 16, &mut *f),
                hasher: Sha256::new(),
                bytes: 0,
            };
            let mut enc = zstd::stream::write::Encoder::new(out, ZSTD_LEVEL)
                .map_err(io_err("start compressing", tmp))?;
            let (sha, n) = sha256_stream(input, |b| enc.write_all(b))
                .map_err(io_err("compress into", tmp))?;
            let mut out = enc.finish().map_err(io_err("compress into", tmp))?;
            out.flush().map_err(io_err("write", tmp))?;
            let proof = content_of(tmp).map_err(io_err("decode again", tmp))?;
            if proof.sha256 != sha || proof.bytes != n {
                return Err(io_err("prove", tmp)(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "decodes to {} bytes with sha256 {}, not the {n} bytes with sha256 {sha} it was made from",
                        proof.bytes, proof.sha256
                    ),
                )));
            }
            content = Some(proof);
            Ok((out.bytes, hex::encode(out.hasher.finalize())))
        })?;
        std::fs::remove_file(&src).map_err(io_err("remove the uncompressed", &src))?;
        stored.content = content;
        Ok(stored)
    }
}

/// Reads the recorded `<path>.zst` whole, decoded, refusing more than `cap` decoded bytes
/// (a small file that decodes to a huge one is refused like a huge file).
///
/// Errors: open/decode errors; `InvalidData` over `cap`.
pub(crate) fn read_zst_bounded(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let z: File = open_regular(&zst_path(path), false)?;
    let mut buf = Vec::new();
    zstd::stream::read::Decoder::new(z)?
        .take(cap.saturating_add(1))
        .read_to_end(&mut buf)?;
    if buf.len() as u64 > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "decodes to more than {} MiB, the most netprobe reads of one evidence file",
                cap >> 20
            ),
        ));
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_text() -> Vec<u8> {
        (0..20_000)
            .map(|i| format!("({i:06}) pie: 1: restoring something at {:#x}\n", i * 4096))
            .collect::<String>()
            .into_bytes()
    }

    /// The stored file is what `sha256sum` hashes, its content what was written; the original
    /// is gone, and every reader reads the content through the old name.
    #[test]
    fn a_compressed_file_is_listed_with_both_hashes_and_read_through_its_old_name() {
        let d = tempfile::tempdir().unwrap();
        let ev = EvidenceDir::open(d.path()).unwrap();
        let text = log_text();
        ev.write("criu-work/restore.log", &text).unwrap();
        let a = ev.compress("criu-work/restore.log").unwrap();
        assert_eq!(a.path, "criu-work/restore.log.zst");
        let stored = std::fs::read(d.path().join(&a.path)).unwrap();
        assert_eq!(a.sha256, super::super::sha256_hex(&stored));
        assert_eq!(a.bytes, stored.len() as u64);
        assert!(a.bytes * 10 < text.len() as u64, "{} bytes", a.bytes);
        let c = a.content.clone().unwrap();
        assert_eq!(c.sha256, super::super::sha256_hex(&text));
        assert_eq!(c.bytes, text.len() as u64);
        assert!(!d.path().join("criu-work/restore.log").exists());
        let p = d.path().join("criu-work/restore.log");
        assert_eq!(super::super::read_recorded(&p).unwrap(), text);
        let mut via = Vec::new();
        open_content(&p, false)
            .unwrap()
            .read_to_end(&mut via)
            .unwrap();
        assert_eq!(via, text);
        // The inventory lists it as compress returned it.
        let inv = ev.inventory().unwrap();
        assert_eq!(inv, vec![a]);
        // Never a second time over the first.
        ev.write("criu-work/restore.log", b"again").unwrap();
        assert!(matches!(
            ev.compress("criu-work/restore.log"),
            Err(EvidenceError::Exists(_))
        ));
        assert_eq!(
            std::fs::read(d.path().join("criu-work/restore.log")).unwrap(),
            b"again"
        );
    }

    #[test]
    fn a_missing_file_is_not_found_under_its_own_name() {
        let d = tempfile::tempdir().unwrap();
        let e = open_content(&d.path().join("dump.log"), false)
            .err()
            .unwrap();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        // A broken .zst is an error, not silence.
        std::fs::write(d.path().join("dump.log.zst"), b"not zstd").unwrap();
        assert!(super::super::read_recorded(&d.path().join("dump.log")).is_err());
        assert!(content_of(&d.path().join("dump.log.zst")).is_err());
    }

    #[test]
    fn a_file_that_decodes_past_the_cap_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let ev = EvidenceDir::open(d.path()).unwrap();
        ev.write("big.json", &vec![b'x'; 100_000]).unwrap();
        ev.compress("big.json").unwrap();
        let e = read_zst_bounded(&d.path().join("big.json"), 1000).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }
}
