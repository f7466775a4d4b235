//! The one copy of the small file helpers every module uses: replace-in-place atomic writes
//! (state files, `config.json`; [`crate::evidence::EvidenceDir`] never overwrites, so evidence
//! goes there), `fsync` of a folder, SHA-256 of bytes and of a file, and "now" as RFC 3339.

use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
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
    fn hashes_and_time_have_their_shapes() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let t = now_rfc3339();
        assert!(t.ends_with('Z') && t.len() == 24, "{t}");
    }
}
