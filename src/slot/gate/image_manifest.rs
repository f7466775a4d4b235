//! The metadata manifest of a directory image (`embedded` or `directory`: the overlay's lower
//! used in place): one record per entry of a sorted walk — relative path, type, permission
//! bits, owner, size, mtime, ctime, symlink target, device number — and one sha256 over them.
//! Metadata only, so it costs one `lstat` per entry (and a `readlink` per symlink), never a
//! read of the content: a write changes a file's size, mtime or ctime, and ctime is set by the
//! kernel on every write, chmod, chown, xattr change, rename or link, and no call sets it back.
//! Recorded at provision ([`ImageManifest`] in `state.json`, the listing in
//! `slot-N/image-manifest.json`: [`ManifestListing`]) and recomputed by the `image-unchanged`
//! gate ([`super::image_unchanged`]), whose refusal names the paths that differ ([`diff`]).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// Why a directory image's manifest could not be taken, written or trusted.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// An entry could not be read (`lstat`, `readdir`, `readlink`).
    #[error("{}: {source}", path.display())]
    Read {
        /// The entry.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The root walked is not a directory.
    #[error("{} is not a directory", .0.display())]
    NotADirectory(std::path::PathBuf),
    /// The listing's entries no longer hash to the recorded sha256.
    #[error("its entries hash to {now}, not the recorded {want} (the listing was edited)")]
    Edited {
        /// The digest of the entries now.
        now: String,
        /// The recorded digest.
        want: String,
    },
    /// An entry or the listing could not be encoded as JSON (`what`).
    #[error("{what}: {source}")]
    Encode {
        /// The listing file, or `an entry`.
        what: String,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// The listing file could not be written.
    #[error("write {}: {source}", path.display())]
    Write {
        /// The listing file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl ManifestError {
    fn read(path: &Path) -> impl FnOnce(std::io::Error) -> ManifestError + '_ {
        move |source| ManifestError::Read {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Version of the listing file's layout ([`ManifestListing`]).
pub const LISTING_SCHEMA_VERSION: u32 = 1;

/// What an entry is (`lstat`'s file type; symlinks are never followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (its target is recorded).
    Symlink,
    /// A character device (its device number is recorded).
    CharDevice,
    /// A block device (its device number is recorded).
    BlockDevice,
    /// A named pipe.
    Fifo,
    /// A socket.
    Socket,
}

/// One entry of the manifest, as listed in `image-manifest.json` and hashed (its compact JSON,
/// one line per entry) into [`ImageManifest::sha256`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// Relative path: `.` for the image root, `./etc/passwd` below it; a byte that is not
    /// UTF-8 is written `\xNN` and a backslash `\\` ([`escape_name`]), so every name is kept.
    pub path: String,
    /// The entry's type.
    pub kind: EntryKind,
    /// Permission bits with setuid, setgid and sticky (`st_mode & 0o7777`).
    pub mode: u32,
    /// Owner uid.
    pub uid: u32,
    /// Owner gid.
    pub gid: u32,
    /// `st_size`, bytes.
    pub size: u64,
    /// `st_mtime`, `st_mtime_nsec` (seconds, nanoseconds since the epoch).
    pub mtime: [i64; 2],
    /// `st_ctime`, `st_ctime_nsec` (the kernel sets it on every change; no call sets it back).
    pub ctime: [i64; 2],
    /// A symlink's target (escaped as `path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// A device's number (major, minor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdev: Option<[u32; 2]>,
}

/// The manifest as `state.json` records it (`image.manifest`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageManifest {
    /// Lower-case hex sha256 over the entries' records in walk order ([`digest`]).
    pub sha256: String,
    /// Entries walked, the root included.
    pub entries: u64,
}

/// `slot-N/image-manifest.json`: the walk's entries, kept so the gate can name what changed.
/// Its entries reproduce the recorded sha256 ([`ManifestListing::check`]), so a listing edited
/// since is never trusted to name paths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestListing {
    /// [`LISTING_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The image root walked (the overlay's lower).
    pub root: String,
    /// [`ImageManifest::sha256`].
    pub sha256: String,
    /// Every entry, in walk order.
    pub entries: Vec<ManifestEntry>,
}

impl ManifestListing {
    /// The listing of `entries` walked under `root`.
    ///
    /// Errors: an entry could not be encoded ([`digest`]).
    pub fn new(root: &Path, entries: Vec<ManifestEntry>) -> Result<ManifestListing, ManifestError> {
        Ok(ManifestListing {
            schema_version: LISTING_SCHEMA_VERSION,
            root: root.display().to_string(),
            sha256: digest(&entries)?,
            entries,
        })
    }

    /// The [`ImageManifest`] that `state.json` records for this listing.
    pub fn manifest(&self) -> ImageManifest {
        ImageManifest {
            sha256: self.sha256.clone(),
            entries: self.entries.len() as u64,
        }
    }

    /// The listing's entries hash to `want` (the sha256 `state.json` records).
    ///
    /// Errors: a sentence naming both digests when they differ (the file was edited).
    pub fn check(&self, want: &str) -> Result<(), ManifestError> {
        let now = digest(&self.entries)?;
        if now == want {
            Ok(())
        } else {
            Err(ManifestError::Edited {
                now,
                want: want.to_string(),
            })
        }
    }
}

/// The sha256 over `entries`: each entry's compact JSON followed by a newline, in order.
///
/// Errors: an entry could not be encoded.
pub fn digest(entries: &[ManifestEntry]) -> Result<String, ManifestError> {
    let mut h = Sha256::new();
    for e in entries {
        let json = serde_json::to_vec(e).map_err(|source| ManifestError::Encode {
            what: "an entry".into(),
            source,
        })?;
        h.update(json);
        h.update(b"\n");
    }
    Ok(hex::encode(h.finalize()))
}

/// The entries under `root` (the root first, as `.`), depth-first, each folder's names in byte
/// order; symlinks are recorded, not followed. Memory: one entry per path.
///
/// Errors: a sentence naming the first entry that could not be read (`lstat`, `readdir`,
/// `readlink`), or `root` when it is not a directory.
pub fn walk(root: &Path) -> Result<Vec<ManifestEntry>, ManifestError> {
    let md = fs::symlink_metadata(root).map_err(ManifestError::read(root))?;
    if !md.is_dir() {
        return Err(ManifestError::NotADirectory(root.to_path_buf()));
    }
    let mut out = Vec::new();
    walk_dir(root, ".".into(), md, &mut out)?;
    Ok(out)
}

/// Records `path` (named `rel`, with its `lstat` `md`) and, for a folder, everything below it.
fn walk_dir(
    path: &Path,
    rel: String,
    md: fs::Metadata,
    out: &mut Vec<ManifestEntry>,
) -> Result<(), ManifestError> {
    let e = entry(path, rel, &md).map_err(ManifestError::read(path))?;
    let (is_dir, rel) = (e.kind == EntryKind::Dir, e.path.clone());
    out.push(e);
    if !is_dir {
        return Ok(());
    }
    for n in crate::evidence::tree_digest::sorted_names(path).map_err(ManifestError::read(path))? {
        let child = path.join(&n);
        let md = fs::symlink_metadata(&child).map_err(ManifestError::read(&child))?;
        let rel = format!(
            "{rel}/{}",
            escape_name(std::os::unix::ffi::OsStrExt::as_bytes(n.as_os_str()))
        );
        walk_dir(&child, rel, md, out)?;
    }
    Ok(())
}

/// One entry's record from its `lstat` (and `readlink` for a symlink).
fn entry(path: &Path, rel: String, md: &fs::Metadata) -> std::io::Result<ManifestEntry> {
    use std::os::unix::ffi::OsStrExt;
    let ft = md.file_type();
    let kind = if ft.is_symlink() {
        EntryKind::Symlink
    } else if ft.is_dir() {
        EntryKind::Dir
    } else if ft.is_file() {
        EntryKind::File
    } else if ft.is_char_device() {
        EntryKind::CharDevice
    } else if ft.is_block_device() {
        EntryKind::BlockDevice
    } else if ft.is_fifo() {
        EntryKind::Fifo
    } else {
        EntryKind::Socket
    };
    let target = match kind {
        EntryKind::Symlink => Some(escape_name(fs::read_link(path)?.as_os_str().as_bytes())),
        _ => None,
    };
    let rdev = match kind {
        EntryKind::CharDevice | EntryKind::BlockDevice => {
            Some([libc::major(md.rdev()), libc::minor(md.rdev())])
        }
        _ => None,
    };
    Ok(ManifestEntry {
        path: rel,
        kind,
        mode: md.mode() & 0o7777,
        uid: md.uid(),
        gid: md.gid(),
        size: md.size(),
        mtime: [md.mtime(), md.mtime_nsec()],
        ctime: [md.ctime(), md.ctime_nsec()],
        target,
        rdev,
    })
}

/// `bytes` as text that keeps every name apart: UTF-8 as it is, a backslash as `\\`, every
/// byte that is not UTF-8 as `\xNN`.
pub fn escape_name(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                s.push_str("\\\\");
            } else {
                s.push(c);
            }
        }
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

/// How one path differs between the recorded listing and the walk now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// The entry's path.
    pub path: String,
    /// What differs, e.g. `size 6 → 8`, `mode 644 → 600`, `mtime`, `ctime`.
    pub fields: Vec<String>,
}

/// The paths that differ between a recorded listing and the walk now, each list in path order;
/// a changed path with the fields that changed.
pub type ManifestDiff = crate::evidence::tree_digest::ListingDiff<Changed>;

/// Paths shown per kind of difference; the rest are counted.
const SHOWN: usize = 5;

impl std::fmt::Display for ManifestDiff {
    /// `changed ./var/www/index.html (size 6 → 8, mtime, ctime); added ./evil; removed ./etc/a`
    /// — at most 5 paths per kind, the rest counted; `no path differs` when empty.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let more = |n: usize| {
            if n > SHOWN {
                format!(" and {} more", n - SHOWN)
            } else {
                String::new()
            }
        };
        let mut parts = Vec::new();
        if !self.changed.is_empty() {
            let shown: Vec<String> = self
                .changed
                .iter()
                .take(SHOWN)
                .map(|c| format!("{} ({})", c.path, c.fields.join(", ")))
                .collect();
            parts.push(format!(
                "changed {}{}",
                shown.join(", "),
                more(self.changed.len())
            ));
        }
        for (what, paths) in [("added", &self.added), ("removed", &self.removed)] {
            if !paths.is_empty() {
                let shown: Vec<&str> = paths.iter().take(SHOWN).map(String::as_str).collect();
                parts.push(format!("{what} {}{}", shown.join(", "), more(paths.len())));
            }
        }
        if parts.is_empty() {
            return f.write_str("no path differs");
        }
        f.write_str(&parts.join("; "))
    }
}

/// The fields of `now` that differ from `was`: type, mode (octal), owner, size and symlink
/// target or device number with both values; mtime and ctime by name.
fn fields_changed(was: &ManifestEntry, now: &ManifestEntry) -> Vec<String> {
    let mut f = Vec::new();
    let mut both = |name: &str, a: String, b: String| {
        if a != b {
            f.push(format!("{name} {a} → {b}"));
        }
    };
    both("type", kind_name(was.kind), kind_name(now.kind));
    both("mode", format!("{:o}", was.mode), format!("{:o}", now.mode));
    both("uid", was.uid.to_string(), now.uid.to_string());
    both("gid", was.gid.to_string(), now.gid.to_string());
    both("size", was.size.to_string(), now.size.to_string());
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
    both("target", opt(&was.target), opt(&now.target));
    let dev = |d: Option<[u32; 2]>| d.map_or("-".into(), |[a, b]| format!("{a}:{b}"));
    both("device", dev(was.rdev), dev(now.rdev));
    if was.mtime != now.mtime {
        f.push("mtime".into());
    }
    if was.ctime != now.ctime {
        f.push("ctime".into());
    }
    f
}

fn kind_name(k: EntryKind) -> String {
    serde_json::to_value(k)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// The paths of `now` that differ from `recorded`.
pub fn diff(recorded: &[ManifestEntry], now: &[ManifestEntry]) -> ManifestDiff {
    let (changed, added, removed) = crate::evidence::tree_digest::diff_by_path(
        recorded.iter().map(|e| (e.path.as_str(), e)),
        now.iter().map(|e| (e.path.as_str(), e)),
        |p, was, now| Changed {
            path: p.to_string(),
            fields: fields_changed(was, now),
        },
    );
    ManifestDiff {
        changed,
        added,
        removed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir_all(t.path().join("etc/sub")).unwrap();
        fs::create_dir_all(t.path().join("var/www")).unwrap();
        fs::write(t.path().join("etc/a"), b"alpha").unwrap();
        fs::write(t.path().join("etc/sub/b"), b"beta").unwrap();
        fs::write(t.path().join("var/www/index.html"), b"hello\n").unwrap();
        symlink("a", t.path().join("etc/link")).unwrap();
        t
    }

    fn paths(l: &[ManifestEntry]) -> Vec<&str> {
        l.iter().map(|e| e.path.as_str()).collect()
    }

    #[test]
    fn the_walk_is_sorted_metadata_only_and_reproducible() {
        let t = tree();
        let l = walk(t.path()).unwrap();
        assert_eq!(
            paths(&l),
            [
                ".",
                "./etc",
                "./etc/a",
                "./etc/link",
                "./etc/sub",
                "./etc/sub/b",
                "./var",
                "./var/www",
                "./var/www/index.html"
            ]
        );
        let link = &l[3];
        assert_eq!(
            (link.kind, link.target.as_deref()),
            (EntryKind::Symlink, Some("a"))
        );
        let html = &l[8];
        assert_eq!(
            (html.kind, html.size, html.target.clone()),
            (EntryKind::File, 6, None)
        );
        // The same tree walked again: the same records and digest.
        let again = walk(t.path()).unwrap();
        assert_eq!(again, l);
        assert_eq!(digest(&again).unwrap(), digest(&l).unwrap());
        // A listing reproduces its own digest, and refuses an edited entry.
        let mut listing = ManifestListing::new(t.path(), l).unwrap();
        assert_eq!(listing.manifest().entries, 9);
        let want = listing.sha256.clone();
        listing.check(&want).unwrap();
        listing.entries[2].size = 99;
        let e = listing.check(&want).unwrap_err().to_string();
        assert!(
            e.contains("the listing was edited") && e.contains(&want),
            "{e}"
        );
        // The JSON keeps every field (no target or device where there is none).
        let j = serde_json::to_value(&listing.entries[8]).unwrap();
        assert_eq!(j["kind"], "file");
        assert!(j.get("target").is_none() && j.get("rdev").is_none(), "{j}");
    }

    #[test]
    fn every_kind_of_change_shows_in_the_digest_and_the_diff() {
        let t = tree();
        let p = t.path();
        let l0 = walk(p).unwrap();
        assert!(diff(&l0, &l0).is_empty());
        assert_eq!(diff(&l0, &l0).to_string(), "no path differs");
        // Content rewritten with the same size: mtime and ctime say so.
        // Past the filesystem clock's granularity, so the new mtime differs.
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(p.join("var/www/index.html"), b"HELLO\n").unwrap();
        let l1 = walk(p).unwrap();
        assert_ne!(digest(&l1).unwrap(), digest(&l0).unwrap());
        let d = diff(&l0, &l1);
        assert_eq!(d.changed.len(), 1, "{d}");
        assert_eq!(d.changed[0].path, "./var/www/index.html");
        assert_eq!(d.changed[0].fields, ["mtime", "ctime"]);
        // A chmod changes mode and ctime; the mtime stays.
        fs::set_permissions(p.join("etc/a"), fs::Permissions::from_mode(0o600)).unwrap();
        // A longer write: size too.
        fs::write(p.join("etc/sub/b"), b"beta, longer").unwrap();
        fs::write(p.join("evil"), b"").unwrap();
        fs::remove_file(p.join("etc/link")).unwrap();
        let l2 = walk(p).unwrap();
        let d = diff(&l1, &l2);
        let a = d.changed.iter().find(|c| c.path == "./etc/a").unwrap();
        let was = l1.iter().find(|e| e.path == "./etc/a").unwrap().mode;
        assert_eq!(
            a.fields,
            [format!("mode {was:o} → 600"), "ctime".into()],
            "{d}"
        );
        let b = d.changed.iter().find(|c| c.path == "./etc/sub/b").unwrap();
        assert_eq!(b.fields[0], "size 4 → 12", "{d}");
        assert_eq!(d.added, ["./evil"]);
        assert_eq!(d.removed, ["./etc/link"]);
        // The folders whose entries were added or removed changed too (mtime, ctime).
        assert!(d.changed.iter().any(|c| c.path == "."), "{d}");
        assert!(d.changed.iter().any(|c| c.path == "./etc"), "{d}");
        let s = d.to_string();
        assert!(
            s.contains(&format!("./etc/a (mode {was:o} → 600, ctime)"))
                && s.contains("; added ./evil; removed ./etc/link"),
            "{s}"
        );
        // A symlink retargeted: both targets named.
        symlink("sub/b", p.join("etc/link")).unwrap();
        let l3 = walk(p).unwrap();
        let mut was = l3.clone();
        let i = was.iter().position(|e| e.path == "./etc/link").unwrap();
        was[i].target = Some("a".into());
        let d = diff(&was, &l3);
        assert_eq!(d.changed[0].fields, ["target a → sub/b"]);
    }

    #[test]
    fn the_diff_counts_what_it_does_not_show() {
        let e = |i: usize| ManifestEntry {
            path: format!("./f{i}"),
            kind: EntryKind::File,
            mode: 0o644,
            uid: 0,
            gid: 0,
            size: 1,
            mtime: [1, 0],
            ctime: [1, 0],
            target: None,
            rdev: None,
        };
        let many: Vec<ManifestEntry> = (0..8).map(e).collect();
        assert_eq!(
            diff(&[], &many).to_string(),
            "added ./f0, ./f1, ./f2, ./f3, ./f4 and 3 more"
        );
        let mut later = many.clone();
        for x in later.iter_mut() {
            x.ctime = [2, 0];
        }
        let s = diff(&many, &later).to_string();
        assert!(s.starts_with("changed ./f0 (ctime), ./f1 (ctime)"), "{s}");
        assert!(s.ends_with("and 3 more"), "{s}");
        assert_eq!(diff(&many, &[]).removed.len(), 8);
    }

    #[test]
    fn names_that_are_not_utf8_are_kept_apart() {
        assert_eq!(escape_name(b"plain"), "plain");
        assert_eq!(escape_name(b"a\\b"), "a\\\\b");
        assert_eq!(escape_name(b"x\xffy"), "x\\xffy");
        // The literal text `\xff` and the byte 0xff are two names.
        assert_ne!(escape_name(b"\\xff"), escape_name(b"\xff"));
        let t = tempfile::tempdir().unwrap();
        use std::os::unix::ffi::OsStrExt;
        let odd = std::ffi::OsStr::from_bytes(b"bad\xfe");
        fs::write(t.path().join(odd), b"").unwrap();
        let l = walk(t.path()).unwrap();
        assert_eq!(paths(&l), [".", "./bad\\xfe"]);
    }

    #[test]
    fn a_missing_or_non_directory_root_is_refused_by_name() {
        let t = tree();
        let e = walk(&t.path().join("etc/a")).unwrap_err().to_string();
        assert!(e.ends_with("etc/a is not a directory"), "{e}");
        let e = walk(&t.path().join("nope")).unwrap_err().to_string();
        assert!(e.contains("nope") && e.contains("No such file"), "{e}");
        // A symlink to a folder is not followed: not a directory.
        symlink(t.path().join("etc"), t.path().join("etc-link")).unwrap();
        assert!(walk(&t.path().join("etc-link")).is_err());
    }
}
