//! Image inventory: every file CRIU wrote into an images directory, with size and sha256.

use super::run::CriuError;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
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
}

/// Lists the regular files directly inside `images_dir` (not recursive; directories, symlinks
/// and other kinds are skipped), sorted by name, each with its size and streamed sha256.
///
/// Errors: [`CriuError::Io`] naming the directory or the file that could not be read.
pub fn inventory(images_dir: &Path) -> Result<Vec<ImageFile>, CriuError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CriuError::Io { path, source }
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(images_dir).map_err(io(images_dir))? {
        let entry = entry.map_err(io(images_dir))?;
        let path = entry.path();
        if !entry.file_type().map_err(io(&path))?.is_file() {
            continue;
        }
        let (sha256, bytes) = sha256_file(&path).map_err(io(&path))?;
        files.push(ImageFile {
            name: entry.file_name().to_string_lossy().into_owned(),
            bytes,
            sha256,
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// Streams `path` through SHA-256 in 64 KiB reads. Returns `(lower-case hex sha256, bytes read)`.
/// Errors: the `io::Error` of opening or reading the file.
pub fn sha256_file(path: &Path) -> std::io::Result<(String, u64)> {
    let mut f = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    Ok((hex::encode(hasher.finalize()), total))
}
