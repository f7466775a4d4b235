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
    digest(root, None)
}

/// One entry of a tree listing: its path relative to the root (`.`, `./etc/a`; lossy UTF-8)
/// and the sha256 of its record (type, mode, owner, content sha256 or target or device number,
/// xattrs), the same record [`tree_digest`] feeds into the tree's digest.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TreeEntry {
    /// Relative path, `.` for the root.
    pub path: String,
    /// Lower-case hex sha256 of the entry's record.
    pub record_sha256: String,
}

/// [`tree_digest`] and, beside it, one [`TreeEntry`] per entry in digest order: what lets a
/// later refusal name the paths that differ ([`listing_diff`]). Memory: one entry per path.
///
/// Errors: as [`tree_digest`].
pub fn tree_listing(root: &Path) -> Result<(TreeDigest, Vec<TreeEntry>), TreeDigestError> {
    let mut l = Vec::new();
    let d = digest(root, Some(&mut l))?;
    Ok((d, l))
}

/// The paths that differ between a recorded listing and one taken now, each list in path
/// order. `C` tells a changed path: its path (the upper's listing), or the path with what
/// changed (the slot image's manifest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListingDiff<C = String> {
    /// In both, with another record (content, mode, owner, type, target or xattrs).
    pub changed: Vec<C>,
    /// Only now.
    pub added: Vec<String>,
    /// Only in the recorded listing.
    pub removed: Vec<String>,
}

impl<C> ListingDiff<C> {
    /// True when the listings name the same paths with the same records.
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.added.is_empty() && self.removed.is_empty()
    }
}

impl std::fmt::Display for ListingDiff {
    /// `changed ./etc/a; added ./evil; removed ./etc/sub/b` — at most 5 paths per kind, the
    /// rest counted; `no path differs` when empty.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SHOWN: usize = 5;
        let mut parts = Vec::new();
        for (what, paths) in [
            ("changed", &self.changed),
            ("added", &self.added),
            ("removed", &self.removed),
        ] {
            if paths.is_empty() {
                continue;
            }
            let mut p = paths
                .iter()
                .take(SHOWN)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            if paths.len() > SHOWN {
                p.push_str(&format!(" and {} more", paths.len() - SHOWN));
            }
            parts.push(format!("{what} {p}"));
        }
        if parts.is_empty() {
            return f.write_str("no path differs");
        }
        f.write_str(&parts.join("; "))
    }
}

/// The paths of `now` that differ from `recorded`, each list in path order.
pub fn listing_diff(recorded: &[TreeEntry], now: &[TreeEntry]) -> ListingDiff {
    let (changed, added, removed) = diff_by_path(
        recorded
            .iter()
            .map(|e| (e.path.as_str(), e.record_sha256.as_str())),
        now.iter()
            .map(|e| (e.path.as_str(), e.record_sha256.as_str())),
        |p, _, _| p.to_string(),
    );
    ListingDiff {
        changed,
        added,
        removed,
    }
}

/// The names in folder `path`, sorted bytewise (the order every tree walk records in).
///
/// Errors: the folder or one of its entries cannot be read.
pub fn sorted_names(path: &Path) -> std::io::Result<Vec<std::ffi::OsString>> {
    let mut names = fs::read_dir(path)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<Vec<_>>>()?;
    names.sort();
    Ok(names)
}

/// Two listings of records keyed by path, compared: `(changed, added, removed)`, each in path
/// order; a path in both with unequal records is told by `changed(path, was, now)`. Shared by
/// every listing diff (the snapshot's upper, the slot image's manifest).
pub fn diff_by_path<'a, T: PartialEq, C>(
    recorded: impl IntoIterator<Item = (&'a str, T)>,
    now: impl IntoIterator<Item = (&'a str, T)>,
    changed: impl Fn(&str, &T, &T) -> C,
) -> (Vec<C>, Vec<String>, Vec<String>) {
    use std::collections::BTreeMap;
    let a: BTreeMap<&str, T> = recorded.into_iter().collect();
    let b: BTreeMap<&str, T> = now.into_iter().collect();
    let mut out = (Vec::new(), Vec::new(), Vec::new());
    for (p, r) in &b {
        match a.get(p) {
            None => out.1.push(p.to_string()),
            Some(r0) if r0 != r => out.0.push(changed(p, r0, r)),
            Some(_) => {}
        }
    }
    out.2 = a
        .keys()
        .filter(|p| !b.contains_key(*p))
        .map(|p| p.to_string())
        .collect();
    out
}

/// The digest of `root`, pushing each entry to `listing` when given.
fn digest(
    root: &Path,
    mut listing: Option<&mut Vec<TreeEntry>>,
) -> Result<TreeDigest, TreeDigestError> {
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
    walk(root, Path::new("."), &mut h, &mut d, &mut listing)?;
    d.sha256 = hex::encode(h.finalize());
    Ok(d)
}

/// Hashes the entry `root/rel` and, for a folder, everything under it in byte order of names.
fn walk(
    root: &Path,
    rel: &Path,
    h: &mut Sha256,
    d: &mut TreeDigest,
    listing: &mut Option<&mut Vec<TreeEntry>>,
) -> Result<(), TreeDigestError> {
    let path = root.join(rel);
    let err = |source| TreeDigestError::Io {
        path: path.clone(),
        source,
    };
    let md = fs::symlink_metadata(&path).map_err(err)?;
    let ft = md.file_type();
    let (kind, rec) = record(&path, rel, &md, d).map_err(err)?;
    h.update(&rec);
    if let Some(l) = listing.as_deref_mut() {
        l.push(TreeEntry {
            path: rel.to_string_lossy().into_owned(),
            record_sha256: hex::encode(Sha256::digest(&rec)),
        });
    }
    d.entries += 1;
    if kind != 'd' || ft.is_symlink() {
        return Ok(());
    }
    for n in sorted_names(&path).map_err(err)? {
        walk(root, &rel.join(n), h, d, listing)?;
    }
    Ok(())
}

/// One entry's record (`path NUL kind NUL mode uid gid NUL payload NUL xattrs NUL NL`) and its
/// kind letter.
fn record(
    path: &Path,
    rel: &Path,
    md: &fs::Metadata,
    d: &mut TreeDigest,
) -> io::Result<(char, Vec<u8>)> {
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
    let mut r = Vec::with_capacity(128 + payload.len());
    r.extend_from_slice(rel.as_os_str().as_bytes());
    r.extend_from_slice(&[0, kind as u8, 0]);
    r.extend_from_slice(format!("{:o} {} {}", md.mode(), md.uid(), md.gid()).as_bytes());
    r.push(0);
    r.extend_from_slice(&payload);
    r.push(0);
    let mut names: Vec<_> = xattr::list(path)?.collect();
    names.sort();
    for n in names {
        let v = xattr::get(path, &n)?.unwrap_or_default();
        r.extend_from_slice(n.as_bytes());
        r.push(b'=');
        r.extend_from_slice(hex::encode(v).as_bytes());
        r.push(0);
    }
    r.push(b'\n');
    Ok((kind, r))
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
    fn the_listing_names_what_changed_and_digests_as_the_tree() {
        let t = tree();
        let (d, l0) = tree_listing(t.path()).unwrap();
        assert_eq!(d, tree_digest(t.path()).unwrap());
        let paths: Vec<&str> = l0.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                ".",
                "./etc",
                "./etc/a",
                "./etc/link",
                "./etc/sub",
                "./etc/sub/b"
            ]
        );
        assert!(listing_diff(&l0, &l0).is_empty());
        assert_eq!(listing_diff(&l0, &l0).to_string(), "no path differs");
        let p = t.path();
        fs::write(p.join("etc/a"), b"alphA").unwrap();
        fs::write(p.join("evil"), b"").unwrap();
        fs::remove_file(p.join("etc/sub/b")).unwrap();
        let (_, l1) = tree_listing(p).unwrap();
        let diff = listing_diff(&l0, &l1);
        // The folders holding an added or removed entry keep their record (no timestamps).
        assert_eq!(diff.changed, ["./etc/a"]);
        assert_eq!(diff.added, ["./evil"]);
        assert_eq!(diff.removed, ["./etc/sub/b"]);
        assert_eq!(
            diff.to_string(),
            "changed ./etc/a; added ./evil; removed ./etc/sub/b"
        );
        let many: Vec<TreeEntry> = (0..8)
            .map(|i| TreeEntry {
                path: format!("./f{i}"),
                record_sha256: String::new(),
            })
            .collect();
        let d = listing_diff(&[], &many).to_string();
        assert_eq!(d, "added ./f0, ./f1, ./f2, ./f3, ./f4 and 3 more");
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
