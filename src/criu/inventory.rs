//! Image inventory: every file CRIU wrote into an images directory, with size and sha256.

use super::run::CriuError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A file's name with its sha256 and size, or why it could not be hashed.
type Hashed = (String, Result<(String, u64), CriuError>);

/// One file of a CRIU images directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageFile {
    /// File name inside the images directory (e.g. `netns-10.img`, `dump.log`).
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Lower-case hex SHA-256 of the content.
    pub sha256: String,
}

/// Lists the regular files directly inside `images_dir` (not recursive; directories, symlinks
/// and other kinds are skipped), sorted by name, each with its size and streamed sha256. The
/// files are hashed on up to [`HASH_THREADS`] threads (largest first, each thread taking the
/// next file), so a guest's tens of MB of memory pages take a fraction of one core's time.
///
/// Errors: [`CriuError::Io`] naming the directory or the file that could not be read (the
/// first in name order when several fail).
pub fn inventory(images_dir: &Path) -> Result<Vec<ImageFile>, CriuError> {
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
            out.push((
                name.clone(),
                crate::evidence::sha256_recorded(&path).map_err(io(&path)),
            ));
        }
    };
    let mut hashed: Vec<Hashed> = std::thread::scope(|s| {
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
        .map(|(name, r)| {
            r.map(|(sha256, bytes)| ImageFile {
                name,
                bytes,
                sha256,
            })
        })
        .collect()
}

/// At most this many threads hash one images directory ([`inventory`]).
pub const HASH_THREADS: usize = 4;

/// The evidence module's streaming hash, re-exported where the image inventory is made.
pub use crate::evidence::sha256_file;
