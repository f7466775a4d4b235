//! One sha256 over a directory tree as a container sees it through an overlay upper: every
//! entry's relative path, type, mode, owner, and per type the content's sha256 (regular file),
//! the target (symlink) or the device number (character/block device — overlayfs records a
//! deletion as a 0:0 character device), and every extended attribute with its value
//! (`trusted.overlay.opaque`, `security.capability`, …). Timestamps are not part of it. Used to
//! prove a slot snapshot's saved upper, and each copy made from it, unchanged.

use sha2::{Digest, Sha256};
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The digest of a tree and what went into it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TreeDigest {
    /// Lower-case hex sha256 of the canonical listing (one record per entry, sorted by path).
    pub sha256: String,
    /// Entries hashed, the root folder included.
    pub entries: u64,
    /// Bytes of regular-file content hashed.
    pub bytes: u64,
}

/// Errors of [`tree_digest`].
#[derive(Debug, thiserror::Error)]
pub enum TreeDigestError {
    /// An entry could not be read (stat, readdir, readlink, open, read or its xattrs).
    #[error("{path}: {source}")]
    Io {
        /// The entry.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// `root` is not a directory (or is a symlink).
    #[error("{0} is not a directory")]
    NotADirectory(PathBuf),
}

/// The digest of the tree under `root` (not following symlinks; the root's own mode and owner
/// included, as entry `.`). Memory: one path list per folder and a 64 KiB read buffer.
///
/// Errors: [`TreeDigestError::NotADirectory`] when `root` is not a directory;
/// [`TreeDigestError::Io`] naming the first entry that could not be read.
pub fn tree_digest(root: &Path) -> Result<TreeDigest, TreeDigestError> {
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TreeDigestError::Io { path, source }
    };
    let md = fs::symlink_metadata(root).map_err(io_err(root))?;
    if !md.is_dir() {
        return Err(TreeDigestError::NotADirectory(root.to_path_buf()));
    }
    let mut h = Sha256::new();
    let mut d = TreeDigest {
        sha256: String::new(),
        entries: 0,
        bytes: 0,
    };
    walk(root, Path::new("."), &mut h, &mut d)?;
    d.sha256 = hex::encode(h.finalize());
    Ok(d)
}

/// Hashes the entry `root/rel` and, for a folder, everything under it in byte order of names.
fn walk(
    root: &Path,
    rel: &Path,
    h: &mut Sha256,
    d: &mut TreeDigest,
) -> Result<(), TreeDigestError> {
    let path = root.join(rel);
    let err = |source| TreeDigestError::Io {
        path: path.clone(),
        source,
    };
    let md = fs::symlink_metadata(&path).map_err(err)?;
    let ft = md.file_type();
    let kind = record(&path, rel, &md, h, d).map_err(err)?;
    d.entries += 1;
    if kind != 'd' || ft.is_symlink() {
        return Ok(());
    }
    let mut names: Vec<_> = fs::read_dir(&path)
        .map_err(err)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .map_err(err)?;
    names.sort();
    for n in names {
        walk(root, &rel.join(n), h, d)?;
    }
    Ok(())
}

/// Feeds one entry's record (`path NUL kind NUL mode uid gid NUL payload NUL xattrs NUL NL`)
/// into `h`; returns its kind letter.
fn record(
    path: &Path,
    rel: &Path,
    md: &fs::Metadata,
    h: &mut Sha256,
    d: &mut TreeDigest,
) -> io::Result<char> {
    use std::os::unix::ffi::OsStrExt;
    let ft = md.file_type();
    let (kind, payload) = if ft.is_symlink() {
        ('l', fs::read_link(path)?.as_os_str().as_bytes().to_vec())
    } else if ft.is_dir() {
        ('d', Vec::new())
    } else if ft.is_file() {
        let (sha, n) = super::sha256_file(path)?;
        d.bytes += n;
        ('f', format!("{n} {sha}").into_bytes())
    } else if ft.is_char_device() || ft.is_block_device() {
        let c = if ft.is_char_device() { 'c' } else { 'b' };
        let dev = md.rdev();
        let (maj, min) = (libc::major(dev), libc::minor(dev));
        (c, format!("{maj}:{min}").into_bytes())
    } else if ft.is_fifo() {
        ('p', Vec::new())
    } else {
        ('s', Vec::new())
    };
    h.update(rel.as_os_str().as_bytes());
    h.update([0, kind as u8, 0]);
    h.update(format!("{:o} {} {}", md.mode(), md.uid(), md.gid()).as_bytes());
    h.update([0]);
    h.update(&payload);
    h.update([0]);
    let mut names: Vec<_> = xattr::list(path)?.collect();
    names.sort();
    for n in names {
        let v = xattr::get(path, &n)?.unwrap_or_default();
        h.update(n.as_bytes());
        h.update(b"=");
        h.update(hex::encode(v).as_bytes());
        h.update([0]);
    }
    h.update(b"\n");
    Ok(kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir_all(t.path().join("etc/sub")).unwrap();
        fs::write(t.path().join("etc/a"), b"alpha").unwrap();
        fs::write(t.path().join("etc/sub/b"), b"beta").unwrap();
        symlink("a", t.path().join("etc/link")).unwrap();
        t
    }

    #[test]
    fn same_tree_same_digest_and_every_change_shows() {
        let t = tree();
        let d0 = tree_digest(t.path()).unwrap();
        assert_eq!(d0.entries, 6, "., etc, etc/a, etc/link, etc/sub, etc/sub/b");
        assert_eq!(d0.bytes, 9);
        // A copy elsewhere with the same content, modes and owners digests the same.
        let u = tree();
        assert_eq!(tree_digest(u.path()).unwrap(), d0);

        let p = t.path();
        type Change<'a> = (&'a str, Box<dyn Fn() + 'a>);
        let changes: Vec<Change> = vec![
            (
                "content",
                Box::new(|| fs::write(p.join("etc/a"), b"alphA").unwrap()),
            ),
            (
                "new file",
                Box::new(|| fs::write(p.join("evil"), b"").unwrap()),
            ),
            (
                "mode",
                Box::new(|| {
                    fs::set_permissions(p.join("etc/sub/b"), fs::Permissions::from_mode(0o600))
                        .unwrap()
                }),
            ),
            (
                "symlink target",
                Box::new(|| {
                    fs::remove_file(p.join("etc/link")).unwrap();
                    symlink("sub/b", p.join("etc/link")).unwrap();
                }),
            ),
            (
                "xattr",
                Box::new(|| xattr::set(p.join("etc/sub"), "user.netprobe", b"1").unwrap()),
            ),
            (
                "removed",
                Box::new(|| fs::remove_file(p.join("etc/sub/b")).unwrap()),
            ),
        ];
        let mut last = d0.sha256.clone();
        for (what, change) in changes {
            change();
            let d = tree_digest(p).unwrap();
            assert_ne!(d.sha256, last, "{what} must change the digest");
            last = d.sha256;
        }
    }

    #[test]
    fn a_file_or_missing_root_is_refused() {
        let t = tree();
        assert!(matches!(
            tree_digest(&t.path().join("etc/a")),
            Err(TreeDigestError::NotADirectory(_))
        ));
        let e = tree_digest(&t.path().join("nope")).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }
}
