//! Image inventory: every file CRIU wrote into an images directory, with size and sha256 (and,
//! for a slot snapshot, BLAKE3), and the same listing by one digest to check it against.

use super::run::CriuError;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::Path;

/// One file of a CRIU images directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageFile {
    /// File name inside the images directory (e.g. `netns-10.img`, `dump.log`).
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Lower-case hex SHA-256 of the content.
    pub sha256: String,
    /// Lower-case hex BLAKE3 (32 bytes) of the content: recorded by a slot snapshot
    /// ([`inventory_with_blake3`]) so its `snapshot-complete` gate can check the files faster;
    /// absent ([`inventory`], snapshots of older netprobe) and then not serialized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
}

/// The digest by which [`digests`] lists an images directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageDigest {
    /// SHA-256, streamed in 64 KiB reads ([`crate::evidence::sha256_recorded`]).
    Sha256,
    /// BLAKE3, a large file memory-mapped and hashed on all cores ([`blake3_recorded`]).
    Blake3,
}

impl ImageDigest {
    /// The name used in manifests and gate details: `sha256` or `blake3`.
    pub fn name(self) -> &'static str {
        match self {
            ImageDigest::Sha256 => "sha256",
            ImageDigest::Blake3 => "blake3",
        }
    }

    /// The digest this file recorded by this algorithm (`None`: not recorded).
    pub fn recorded(self, f: &ImageFile) -> Option<&str> {
        match self {
            ImageDigest::Sha256 => Some(&f.sha256),
            ImageDigest::Blake3 => f.blake3.as_deref(),
        }
    }

    /// `(lower-case hex digest, bytes hashed)` of the file at `path`. Errors: those of
    /// opening (no symlink, only a regular file), mapping or reading it.
    fn of_file(self, path: &Path) -> io::Result<(String, u64)> {
        match self {
            ImageDigest::Sha256 => crate::evidence::sha256_recorded(path),
            ImageDigest::Blake3 => blake3_recorded(path),
        }
    }
}

/// One file of an images directory with its size and its digest by one [`ImageDigest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDigest {
    /// File name inside the images directory.
    pub name: String,
    /// Size in bytes (as hashed).
    pub bytes: u64,
    /// Lower-case hex digest.
    pub hex: String,
}

/// Lists the regular files directly inside `images_dir` (not recursive; directories, symlinks
/// and other kinds are skipped), sorted by name, each with its size and streamed sha256
/// (`blake3` is `None`). The files are hashed on up to [`HASH_THREADS`] threads (largest first,
/// each thread taking the next file), so a guest's tens of MB of memory pages take a fraction
/// of one core's time.
///
/// Errors: [`CriuError::Io`] naming the directory or the file that could not be read (the
/// first in name order when several fail).
pub fn inventory(images_dir: &Path) -> Result<Vec<ImageFile>, CriuError> {
    let hashed = hash_each(images_dir, crate::evidence::sha256_recorded)?;
    Ok(hashed
        .into_iter()
        .map(|(name, (sha256, bytes))| ImageFile {
            name,
            bytes,
            sha256,
            blake3: None,
        })
        .collect())
}

/// [`inventory`] with the BLAKE3 of every file as well, both digests from one streamed read
/// of each file (64 KiB blocks, no memory map): what a slot snapshot records in its manifest.
///
/// Errors: those of [`inventory`].
pub fn inventory_with_blake3(images_dir: &Path) -> Result<Vec<ImageFile>, CriuError> {
    let both = |path: &Path| {
        let mut b3 = blake3::Hasher::new();
        let f = crate::evidence::open_regular(path, false)?;
        let (sha256, bytes) = crate::evidence::sha256_stream(f, |block| {
            b3.update(block);
            Ok(())
        })?;
        Ok((sha256, b3.finalize().to_hex().to_string(), bytes))
    };
    let hashed = hash_each(images_dir, both)?;
    Ok(hashed
        .into_iter()
        .map(|(name, (sha256, blake3, bytes))| ImageFile {
            name,
            bytes,
            sha256,
            blake3: Some(blake3),
        })
        .collect())
}

/// The regular files directly inside `images_dir` as [`inventory`] lists them, each with its
/// size and its digest by `digest` only: what a recorded inventory is checked against.
///
/// Errors: those of [`inventory`] (a file that cannot be opened, mapped or read is named).
pub fn digests(images_dir: &Path, digest: ImageDigest) -> Result<Vec<FileDigest>, CriuError> {
    let hashed = hash_each(images_dir, |p| digest.of_file(p))?;
    Ok(hashed
        .into_iter()
        .map(|(name, (hex, bytes))| FileDigest { name, bytes, hex })
        .collect())
}

/// Files at least this large (bytes) are memory-mapped and hashed on all cores by
/// [`blake3_recorded`] (`update_rayon`); smaller ones are read and hashed on the calling
/// thread (below it the threads cost more than they save).
pub const BLAKE3_PARALLEL_MIN: u64 = 128 << 10;

/// BLAKE3 of the recorded file `path`, opened like [`crate::evidence::sha256_recorded`] (no
/// symlink, only a regular file). A file of at least [`BLAKE3_PARALLEL_MIN`] bytes is mapped
/// read-only from that descriptor and hashed with `blake3::Hasher::update_rayon` (all cores);
/// a smaller one is read.
///
/// Why a map: measured here in a fresh process on a desktop snapshot's 49 images (55 MiB),
/// mapped 11 ms, against 17–35 ms read into buffers (the fresh buffers' page faults and the
/// copy). The one cost: a file truncated by another process while it is mapped ends netprobe
/// with SIGBUS, as a SIGKILL would — during the gates, before anything destructive, and the
/// next verb's gate then names the file. The snapshot folders are root's and written only by
/// netprobe under the slot lock.
///
/// Returns `(lower-case hex BLAKE3, bytes hashed)`. Errors: those of opening, `fstat`, `mmap`
/// or reading.
pub fn blake3_recorded(path: &Path) -> io::Result<(String, u64)> {
    let mut f = crate::evidence::open_regular(path, false)?;
    let mut h = blake3::Hasher::new();
    if f.metadata()?.len() < BLAKE3_PARALLEL_MIN {
        let n = io::copy(&mut f, &mut h)?;
        return Ok((h.finalize().to_hex().to_string(), n));
    }
    // SAFETY: a read-only map of a regular file this function opened and keeps open while the
    // map lives; its bytes are only read (see the SIGBUS note above).
    let map = unsafe { memmap2::Mmap::map(&f)? };
    h.update_rayon(&map);
    Ok((h.finalize().to_hex().to_string(), map.len() as u64))
}

/// Hashes every regular file directly inside `images_dir` with `hash` on up to
/// [`HASH_THREADS`] threads (largest first), returned sorted by name.
///
/// Errors: [`CriuError::Io`] naming the directory or the first file (in name order) `hash`
/// failed on.
fn hash_each<T: Send>(
    images_dir: &Path,
    hash: impl Fn(&Path) -> io::Result<T> + Sync,
) -> Result<Vec<(String, T)>, CriuError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CriuError::Io { path, source }
    };
    let mut found: Vec<(String, u64)> = Vec::new();
    for entry in std::fs::read_dir(images_dir).map_err(io(images_dir))? {
        let entry = entry.map_err(io(images_dir))?;
        let path = entry.path();
        if !entry.file_type().map_err(io(&path))?.is_file() {
            continue;
        }
        let len = entry.metadata().map_err(io(&path))?.len();
        found.push((entry.file_name().to_string_lossy().into_owned(), len));
    }
    found.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, HASH_THREADS)
        .min(found.len().max(1));
    let hash_some = || {
        let mut out = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some((name, _)) = found.get(i) else {
                return out;
            };
            let path = images_dir.join(name);
            out.push((name.clone(), hash(&path).map_err(io(&path))));
        }
    };
    let mut hashed: Vec<(String, Result<T, CriuError>)> = std::thread::scope(|s| {
        let others: Vec<_> = (1..threads).map(|_| s.spawn(hash_some)).collect();
        let mut all = hash_some();
        for h in others {
            all.extend(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        all
    });
    hashed.sort_by(|a, b| a.0.cmp(&b.0));
    hashed
        .into_iter()
        .map(|(name, r)| r.map(|v| (name, v)))
        .collect()
}

/// At most this many threads hash one images directory ([`inventory`]).
pub const HASH_THREADS: usize = 4;

/// The evidence module's streaming hash, re-exported where the image inventory is made.
pub use crate::evidence::sha256_file;

#[cfg(test)]
mod tests {
    use super::*;

    /// A large (mapped) file and a small (read) one: the digest is that of the whole file,
    /// with its size.
    #[test]
    fn blake3_of_a_large_mapped_file_is_that_of_the_whole_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pages-1.img");
        let data: Vec<u8> = (0..(4 << 20) * 2 + 12_345)
            .map(|i| (i * 31 % 253) as u8)
            .collect();
        std::fs::write(&p, &data).unwrap();
        let (hex, n) = blake3_recorded(&p).unwrap();
        assert_eq!(hex, blake3::hash(&data).to_hex().to_string());
        assert_eq!(n, data.len() as u64);
        // Another large size, and a small file.
        std::fs::write(&p, &data[..4 << 20]).unwrap();
        let (hex, _) = blake3_recorded(&p).unwrap();
        assert_eq!(hex, blake3::hash(&data[..4 << 20]).to_hex().to_string());
        std::fs::write(&p, b"core").unwrap();
        assert_eq!(
            blake3_recorded(&p).unwrap(),
            (blake3::hash(b"core").to_hex().to_string(), 4)
        );
    }
}
