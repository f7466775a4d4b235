//! Evidence kept once: a file of a slot verb's folder whose bytes equal a file another verb
//! folder of the same slot already stores is recorded as `<name>.ref` instead of a second
//! copy ([`EvidenceDir::store_as_reference`]). The `.ref` is a small JSON document
//! ([`Reference`]): where the bytes are (`stored_in`, `../NNNN-verb/<file>`: a file directly in
//! a sibling verb folder), their sha256 and size, and why they are not stored here.
//!
//! Every reader of recorded evidence reads through the old name ([`open_target`] behind
//! [`super::compressed::open_content`] and [`super::fsio::read_recorded`]); the artifact list
//! names the stored `<name>.ref` with the sha256 of its own bytes and, in `content` (encoding
//! `reference`), the sha256 and size of the referenced file as hashed now
//! ([`content_of`]): `report` hashes both again, so a referenced file changed or removed is a
//! MISMATCH of the folder that refers to it. `slot prune` keeps every folder a kept folder
//! refers to ([`referenced_folders`]). A reference is made only after the referenced file was
//! hashed to the local file's sha256; references never chain (the target is a stored file).

use super::dir::{EvidenceDir, sha256_stream};
use super::error::{EvidenceError, io_err};
use super::fsio::open_regular;
use super::result::{Artifact, Content, Encoding};
use serde::{Deserialize, Serialize};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// The suffix of a file kept by reference: `screen-after.png` is recorded as
/// `screen-after.png.ref`.
pub const REF_SUFFIX: &str = ".ref";

/// The most bytes a `.ref` document may have (it is a few hundred).
const REF_CAP: u64 = 16 << 10;

/// A `.ref` document: where a verb folder's file is stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    /// The file holding the bytes, relative to the folder of the `.ref`:
    /// `../NNNN-verb/<file>` ([`check_stored_in`]).
    pub stored_in: String,
    /// Lower-case hex sha256 of the bytes (the local file's, equal to the target's when made).
    pub sha256: String,
    /// Their size, bytes.
    pub bytes: u64,
    /// Why they are not stored here (what proved them equal, and that the folder is kept).
    pub why: String,
}

/// Whether the recorded file `rel` is kept by reference (its name ends in [`REF_SUFFIX`]).
pub fn is_reference(rel: &str) -> bool {
    rel.ends_with(REF_SUFFIX)
}

/// `path` with [`REF_SUFFIX`] appended.
pub fn ref_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(REF_SUFFIX);
    PathBuf::from(s)
}

/// Why a reference's `stored_in` is refused ([`check_stored_in`]); its message names the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoredInError {
    /// Not three parts `../FOLDER/FILE`.
    #[error("stored_in {0:?}: not ../NNNN-verb/FILE")]
    Shape(String),
    /// The folder is not a verb folder's name.
    #[error("stored_in {0:?}: not a verb folder's name (NNNN-verb)")]
    Folder(String),
    /// The file is empty, hidden, `..` or itself a reference.
    #[error("stored_in {0:?}: not a stored file's name")]
    File(String),
}

/// The verb folder name and file of a reference's `stored_in` (`../0003-restore/screen.png`
/// → `("0003-restore", "screen.png")`): exactly `..`, a verb folder name (`NNNN-<verb>`) and a
/// file name that is not hidden and not itself a reference.
///
/// Errors: [`StoredInError`] naming the value and which part is refused.
pub fn check_stored_in(stored_in: &str) -> Result<(&str, &str), StoredInError> {
    let mut parts = stored_in.split('/');
    let (Some(".."), Some(folder), Some(file), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(StoredInError::Shape(stored_in.into()));
    };
    let verb_folder = folder.split_once('-').is_some_and(|(n, v)| {
        !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
            && !v.is_empty()
            && v.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
    });
    if !verb_folder {
        return Err(StoredInError::Folder(stored_in.into()));
    }
    if file.is_empty() || file.starts_with('.') || is_reference(file) || file == ".." {
        return Err(StoredInError::File(stored_in.into()));
    }
    Ok((folder, file))
}

/// Reads and checks the `.ref` document at `path` (a regular file, no symlink, at most 16 KiB).
///
/// Errors: open/read errors; `InvalidData` for a document that is not a [`Reference`] or whose
/// `stored_in` is refused ([`check_stored_in`]).
pub fn read_reference(path: &Path) -> io::Result<Reference> {
    let mut buf = Vec::new();
    open_regular(path, false)?
        .take(REF_CAP + 1)
        .read_to_end(&mut buf)?;
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    if buf.len() as u64 > REF_CAP {
        return Err(invalid(format!("larger than {REF_CAP} bytes: not a .ref")));
    }
    let r: Reference =
        serde_json::from_slice(&buf).map_err(|e| invalid(format!("not a .ref document: {e}")))?;
    check_stored_in(&r.stored_in).map_err(|e| invalid(e.to_string()))?;
    Ok(r)
}

/// The file the `.ref` at `ref_file` names (its folder joined with `stored_in`), with the
/// document.
///
/// Errors: those of [`read_reference`].
pub fn target_of(ref_file: &Path) -> io::Result<(PathBuf, Reference)> {
    let r = read_reference(ref_file)?;
    let dir = ref_file.parent().unwrap_or(Path::new("."));
    Ok((dir.join(&r.stored_in), r))
}

/// Opens the content of recorded file `path` kept by reference: `<path>.ref` resolved and its
/// target opened ([`open_regular`], no symlink).
///
/// Errors: those of [`target_of`] and of opening the target.
pub fn open_target(path: &Path) -> io::Result<std::fs::File> {
    let (target, _) = target_of(&ref_path(path))?;
    open_regular(&target, false)
}

/// What the `.ref` at `ref_file` refers to, hashed now: the target's sha256 and size.
///
/// Errors: those of [`target_of`]; the target cannot be opened or read.
pub fn content_of(ref_file: &Path) -> io::Result<Content> {
    let (target, _) = target_of(ref_file)?;
    let (sha256, bytes) = sha256_stream(open_regular(&target, false)?, |_| Ok(()))?;
    Ok(Content {
        encoding: Encoding::Reference,
        bytes,
        sha256,
    })
}

/// The verb folders the `.ref` files directly in `verb_dir` refer to (folder names, sorted,
/// each once); unreadable documents are skipped.
pub fn referenced_folders(verb_dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(verb_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| is_reference(&e.file_name().to_string_lossy()))
        .filter_map(|e| read_reference(&e.path()).ok())
        .filter_map(|r| {
            check_stored_in(&r.stored_in)
                .ok()
                .map(|(f, _)| f.to_string())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

impl EvidenceDir {
    /// Keeps the folder's file `rel` (directly in the folder) by reference to `stored_in`
    /// (`../NNNN-verb/<file>`): both are hashed, and only when they are equal is
    /// `<rel>.ref` written atomically ([`Reference`], with `why`) and `rel` removed.
    ///
    /// Returns the `.ref`'s [`Artifact`] with its `content`. Errors:
    /// [`EvidenceError::BadPath`] (`rel` not directly in the folder, `stored_in` refused),
    /// [`EvidenceError::Exists`] (`<rel>.ref` is there), [`EvidenceError::Io`] (read, the
    /// two files differ — `InvalidData` —, write, the removal of `rel`). Nothing is removed
    /// unless the reference was written.
    pub fn store_as_reference(
        &self,
        rel: &str,
        stored_in: &str,
        why: &str,
    ) -> Result<Artifact, EvidenceError> {
        if rel.contains('/') || rel.starts_with('.') || is_reference(rel) {
            return Err(EvidenceError::BadPath {
                rel: rel.to_string(),
                reason: "only a stored file directly in the folder is kept by reference",
            });
        }
        check_stored_in(stored_in).map_err(|_| EvidenceError::BadPath {
            rel: stored_in.to_string(),
            reason: "a reference names ../NNNN-verb/FILE",
        })?;
        let src = self.root().join(rel);
        let target = self.root().join(stored_in);
        let hash = |p: &Path| {
            open_regular(p, false)
                .and_then(|f| sha256_stream(f, |_| Ok(())))
                .map_err(io_err("hash", p))
        };
        let (sha256, bytes) = hash(&src)?;
        let (t_sha, t_bytes) = hash(&target)?;
        if (t_sha.as_str(), t_bytes) != (sha256.as_str(), bytes) {
            return Err(io_err("refer to", &target)(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{t_bytes} bytes with sha256 {t_sha}, not the {bytes} bytes with sha256 {sha256} of {rel}"
                ),
            )));
        }
        let doc = Reference {
            stored_in: stored_in.to_string(),
            sha256: sha256.clone(),
            bytes,
            why: why.to_string(),
        };
        let mut text = serde_json::to_vec_pretty(&doc).unwrap_or_default();
        text.push(b'\n');
        let mut stored = self.write(&format!("{rel}{REF_SUFFIX}"), &text)?;
        std::fs::remove_file(&src).map_err(io_err("remove the stored copy of", &src))?;
        stored.content = Some(Content {
            encoding: Encoding::Reference,
            bytes,
            sha256,
        });
        Ok(stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_in_names_a_file_of_a_sibling_verb_folder_only() {
        assert_eq!(
            check_stored_in("../0003-restore/screen.png").unwrap(),
            ("0003-restore", "screen.png")
        );
        for bad in [
            "0003-restore/screen.png",
            "../0003-restore/a/b",
            "../../x/0003-restore/a",
            "../x/screen.png",
            "../0003-restore/.hidden",
            "../0003-restore/a.png.ref",
            "../0003-restore/..",
            "/etc/passwd",
        ] {
            assert!(check_stored_in(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_equal_file_is_kept_by_reference_and_read_through_its_name() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("0002-snapshot")).unwrap();
        std::fs::create_dir_all(d.path().join("0004-reset")).unwrap();
        let a = EvidenceDir::open(&d.path().join("0002-snapshot")).unwrap();
        let b = EvidenceDir::open(&d.path().join("0004-reset")).unwrap();
        a.write("screen.png", b"pixels").unwrap();
        b.write("screen-after.png", b"pixels").unwrap();
        b.write("other.png", b"other").unwrap();
        let r = b
            .store_as_reference("screen-after.png", "../0002-snapshot/screen.png", "equal")
            .unwrap();
        assert_eq!(r.path, "screen-after.png.ref");
        let c = r.content.clone().unwrap();
        assert_eq!((c.encoding, c.bytes), (Encoding::Reference, 6));
        assert!(!b.root().join("screen-after.png").exists());
        let p = b.root().join("screen-after.png");
        assert_eq!(crate::evidence::read_recorded(&p).unwrap(), b"pixels");
        // Listed as made; a different file is never referenced.
        let inv = b.inventory().unwrap();
        assert_eq!(inv[1], r);
        assert!(
            b.store_as_reference("other.png", "../0002-snapshot/screen.png", "x")
                .is_err()
        );
        assert!(b.root().join("other.png").exists());
        assert_eq!(referenced_folders(b.root()), ["0002-snapshot"]);
        // The referenced file changed: the content differs from the list.
        std::fs::remove_file(a.root().join("screen.png")).unwrap();
        a.write("screen.png", b"changed").unwrap();
        let now = b.inventory().unwrap();
        assert_ne!(now[1].content, r.content);
    }
}
