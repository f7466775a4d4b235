//! Image inventory: every file CRIU wrote into an images directory, with size and sha256.

use super::run::CriuError;
use serde::{Deserialize, Serialize};
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

/// The evidence module's streaming hash, re-exported where the image inventory is made.
pub use crate::evidence::sha256_file;
