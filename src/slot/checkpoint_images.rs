//! The checkpoint images of a snapshot proven as its manifest recorded them: every file by
//! name, size and digest — BLAKE3 when the manifest records it for every file (snapshots of
//! this netprobe), else SHA-256 (snapshots of an older one). Part of the `snapshot-complete`
//! gate ([`super::checks::snapshot_complete`]).

use crate::criu::inventory::{FileDigest, ImageDigest, ImageFile, digests};
use std::path::Path;

/// The digest `recorded` is checked by: [`ImageDigest::Blake3`] when every entry (at least one)
/// records a `blake3`, else [`ImageDigest::Sha256`] (every entry records that).
pub fn digest_of(recorded: &[ImageFile]) -> ImageDigest {
    if !recorded.is_empty() && recorded.iter().all(|f| f.blake3.is_some()) {
        ImageDigest::Blake3
    } else {
        ImageDigest::Sha256
    }
}

/// Proves the files directly inside `images_dir` are exactly `recorded` (the manifest's
/// `checkpoint_files`): the same names, and each file's size and digest ([`digest_of`]) as
/// recorded. Returns the detail (`49 checkpoint files (blake3 as recorded)`).
///
/// Errors: a sentence naming the file that cannot be opened or read; or every
/// difference by name with both sizes and digests and the algorithm
/// (`checkpoint images differ from the manifest (blake3): changed pages-1.img (… bytes, blake3
/// … → … bytes, blake3 …)`).
pub fn checkpoint_images(images_dir: &Path, recorded: &[ImageFile]) -> Result<String, String> {
    let digest = digest_of(recorded);
    let want: Vec<FileDigest> = recorded
        .iter()
        .map(|f| FileDigest {
            name: f.name.clone(),
            bytes: f.bytes,
            hex: digest.recorded(f).unwrap_or_default().to_string(),
        })
        .collect();
    let now = digests(images_dir, digest).map_err(|e| {
        format!(
            "the checkpoint images cannot be hashed ({}): {e}",
            digest.name()
        )
    })?;
    if now != want {
        return Err(format!(
            "checkpoint images differ from the manifest ({}): {}",
            digest.name(),
            image_differences(&want, &now, digest, &|name| {
                std::fs::symlink_metadata(images_dir.join(name))
                    .ok()
                    .map(|m| crate::evidence::fsio::kind_of(m.file_type()))
            })
        ));
    }
    Ok(format!(
        "{} checkpoint files ({} as recorded)",
        want.len(),
        digest.name()
    ))
}

/// How the checkpoint images `now` differ from the manifest's `want` (both by `digest`), by
/// name: `changed pages-1.img (… bytes, blake3 … → … bytes, blake3 …)`, `missing …`, `not a
/// regular file pages-1.img (a symbolic link; …)` when `present` names what stands under a
/// recorded name that is not among the regular files hashed, `not recorded …`.
pub fn image_differences(
    want: &[FileDigest],
    now: &[FileDigest],
    digest: ImageDigest,
    present: &dyn Fn(&str) -> Option<&'static str>,
) -> String {
    let one = |f: &FileDigest| format!("{} bytes, {} {}", f.bytes, digest.name(), f.hex);
    let mut parts = Vec::new();
    for w in want {
        match now.iter().find(|n| n.name == w.name) {
            Some(n) if n != w => {
                parts.push(format!("changed {} ({} → {})", w.name, one(w), one(n)))
            }
            Some(_) => {}
            None => parts.push(match present(&w.name) {
                Some(kind) => format!(
                    "not a regular file {} ({kind}; recorded {})",
                    w.name,
                    one(w)
                ),
                None => format!("missing {} ({})", w.name, one(w)),
            }),
        }
    }
    for n in now
        .iter()
        .filter(|n| !want.iter().any(|w| w.name == n.name))
    {
        parts.push(format!("not recorded {} ({})", n.name, one(n)));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::criu::inventory::{BLAKE3_PARALLEL_MIN, inventory, inventory_with_blake3};
    use std::fs;

    /// An images folder with a small file and one large enough to be hashed on all cores.
    fn images() -> (tempfile::TempDir, Vec<u8>) {
        let d = tempfile::tempdir().unwrap();
        let big: Vec<u8> = (0..BLAKE3_PARALLEL_MIN as usize * 3)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        fs::write(d.path().join("pages-1.img"), &big).unwrap();
        fs::write(d.path().join("core-1.img"), b"core").unwrap();
        (d, big)
    }

    #[test]
    fn both_digests_come_from_one_read_and_match_the_reference() {
        let (d, big) = images();
        let files = inventory_with_blake3(d.path()).unwrap();
        let pages = files.iter().find(|f| f.name == "pages-1.img").unwrap();
        assert_eq!(pages.blake3.as_deref(), Some(&*blake3::hash(&big).to_hex()));
        assert_eq!(pages.sha256, crate::evidence::sha256_hex(&big));
        assert_eq!(pages.bytes, big.len() as u64);
        let core = files.iter().find(|f| f.name == "core-1.img").unwrap();
        assert_eq!(
            core.blake3.as_deref(),
            Some(&*blake3::hash(b"core").to_hex())
        );
        // The parallel and the single-thread BLAKE3 agree with what the snapshot recorded.
        let now = digests(d.path(), ImageDigest::Blake3).unwrap();
        assert_eq!(now.len(), 2);
        assert!(now.iter().all(|n| {
            files
                .iter()
                .any(|f| f.name == n.name && f.blake3.as_deref() == Some(&*n.hex))
        }));
        // The probes' inventory stays sha256-only, and then serializes no `blake3`.
        let old = inventory(d.path()).unwrap();
        assert!(old.iter().all(|f| f.blake3.is_none()));
        assert!(!serde_json::to_string(&old).unwrap().contains("blake3"));
    }

    #[test]
    fn a_snapshot_with_blake3_is_proven_by_blake3_and_a_change_is_named() {
        let (d, big) = images();
        let files = inventory_with_blake3(d.path()).unwrap();
        assert_eq!(
            checkpoint_images(d.path(), &files).unwrap(),
            "2 checkpoint files (blake3 as recorded)"
        );
        // One byte changed, same size: named with both BLAKE3 digests.
        let mut changed = big.clone();
        changed[big.len() / 2] ^= 1;
        fs::write(d.path().join("pages-1.img"), &changed).unwrap();
        let e = checkpoint_images(d.path(), &files).unwrap_err();
        let (was, is) = (blake3::hash(&big).to_hex(), blake3::hash(&changed).to_hex());
        assert!(
            e.starts_with(
                "checkpoint images differ from the manifest (blake3): changed pages-1.img ("
            ) && e.contains(&format!("blake3 {was} → {} bytes, blake3 {is}", big.len())),
            "{e}"
        );
        // A small (single-thread) file changed is seen as well.
        fs::write(d.path().join("pages-1.img"), &big).unwrap();
        fs::write(d.path().join("core-1.img"), b"CORE").unwrap();
        let e = checkpoint_images(d.path(), &files).unwrap_err();
        assert!(e.contains("changed core-1.img (4 bytes, blake3 "), "{e}");
    }

    #[test]
    fn a_snapshot_without_blake3_is_proven_by_sha256() {
        let (d, big) = images();
        let files = inventory(d.path()).unwrap();
        assert_eq!(
            checkpoint_images(d.path(), &files).unwrap(),
            "2 checkpoint files (sha256 as recorded)"
        );
        // One entry without `blake3` (not what a snapshot writes): all checked by sha256.
        let mut mixed = inventory_with_blake3(d.path()).unwrap();
        mixed[0].blake3 = None;
        assert_eq!(digest_of(&mixed), ImageDigest::Sha256);
        assert!(
            checkpoint_images(d.path(), &mixed)
                .unwrap()
                .contains("(sha256 as recorded)")
        );
        let mut changed = big.clone();
        changed[0] ^= 1;
        fs::write(d.path().join("pages-1.img"), &changed).unwrap();
        let e = checkpoint_images(d.path(), &files).unwrap_err();
        assert!(
            e.contains("(sha256): changed pages-1.img (")
                && e.contains(&crate::evidence::sha256_hex(&changed)),
            "{e}"
        );
    }

    #[test]
    fn an_unreadable_image_fails_closed_naming_it() {
        let (d, _) = images();
        let files = inventory_with_blake3(d.path()).unwrap();
        let pages = d.path().join("pages-1.img");
        fs::remove_file(&pages).unwrap();
        // A symlink in place of a recorded image is never followed.
        std::os::unix::fs::symlink(d.path().join("core-1.img"), &pages).unwrap();
        let e = checkpoint_images(d.path(), &files).unwrap_err();
        assert!(
            e.contains("not a regular file pages-1.img (a symbolic link; recorded 393216 bytes"),
            "{e}"
        );
        fs::remove_file(&pages).unwrap();
        fs::create_dir(&pages).unwrap();
        let e = checkpoint_images(d.path(), &files).unwrap_err();
        assert!(
            e.contains("not a regular file pages-1.img (a folder;"),
            "{e}"
        );
        fs::remove_dir(&pages).unwrap();
        let e = checkpoint_images(d.path(), &files).unwrap_err();
        assert!(
            e.contains("missing pages-1.img (393216 bytes, blake3 "),
            "{e}"
        );
        let gone = d.path().join("gone");
        let e = checkpoint_images(&gone, &files).unwrap_err();
        assert!(
            e.starts_with("the checkpoint images cannot be hashed (blake3): ")
                && e.contains(&gone.display().to_string()),
            "{e}"
        );
    }
}
