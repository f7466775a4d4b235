//! The checkpoint images of a snapshot proven as its manifest recorded them: every file by
//! name, size and digest — BLAKE3 when the manifest records it for every file (snapshots of
//! this netprobe), else SHA-256 (snapshots of an older one). Part of the `snapshot-complete`
//! gate ([`super::pure_checks::snapshot_complete`]).
//!
//! A snapshot of this netprobe also records each file's `stat` (device, inode, size, mtime,
//! ctime: [`ImageStat`]), taken before and after its digests were computed and kept only when
//! both agree. When every file still has that `stat`, the files are the bytes that were hashed
//! and are not re-hashed ([`images_unchanged`]): the kernel moves a file's ctime on every write,
//! rename onto it or truncation, and no call sets it back — the rule the qcow2 image and the
//! sealed binaries' sources are proven by. Any difference, or no record, re-hashes as before, so
//! a change is still named by digest.

use crate::criu::inventory::{FileDigest, ImageDigest, ImageFile, digests};
use crate::slot::gate::Observed;
use crate::slot::resources::sealed_binaries::FileStat;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One checkpoint file's `stat` when its digest was recorded (`state.json`
/// `snapshot.checkpoint_stats[]`): the file name directly inside the images folder and its
/// [`FileStat`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageStat {
    /// File name inside the images folder (`pages-1.img`).
    pub name: String,
    /// Its `stat` identity.
    pub stat: FileStat,
}

/// The `stat` of every entry directly inside `images_dir`, sorted by name; `None` when the
/// folder cannot be read, an entry cannot be `lstat`ed, has a name that is not UTF-8, or is not
/// a regular file (such a folder is left to the re-hash, which names what it finds).
pub fn image_stats(images_dir: &Path) -> Option<Vec<ImageStat>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(images_dir).ok()? {
        let e = e.ok()?;
        let m = e.metadata().ok()?; // lstat: a symbolic link is not a regular file
        if !m.file_type().is_file() {
            return None;
        }
        v.push(ImageStat {
            name: e.file_name().into_string().ok()?,
            stat: FileStat::of(&m),
        });
    }
    v.sort_by(|a, b| a.name.cmp(&b.name));
    Some(v)
}

/// Runs `hash` on `images_dir` between two [`image_stats`]: returns its result with the `stat`s
/// when both agree (nothing changed while it hashed), else with `None`.
///
/// Errors: those of `hash`.
pub fn hashed_with_stats<T, E>(
    images_dir: &Path,
    hash: impl FnOnce() -> Result<T, E>,
) -> Result<(T, Option<Vec<ImageStat>>), E> {
    let before = image_stats(images_dir);
    let out = hash()?;
    let after = image_stats(images_dir);
    Ok((out, before.filter(|b| Some(b) == after.as_ref())))
}

/// True when `stats` (recorded with `recorded` at snapshot) covers exactly the recorded files,
/// with their recorded sizes, and every file in `images_dir` still has that `stat` — no other
/// entry there either. False on any difference or when the folder cannot be read.
pub fn images_unchanged(images_dir: &Path, recorded: &[ImageFile], stats: &[ImageStat]) -> bool {
    let covers = recorded.len() == stats.len()
        && recorded.iter().all(|f| {
            stats
                .iter()
                .any(|s| s.name == f.name && s.stat.size == f.bytes)
        });
    covers && image_stats(images_dir).as_deref() == Some(stats)
}

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
/// `checkpoint_files`): by their `stat`s when `stats` (recorded at snapshot) all still hold
/// ([`images_unchanged`]), else the same names, and each file's size and digest
/// ([`digest_of`]) as recorded. Returns the detail (`49 checkpoint files (blake3 as recorded)`,
/// with `; unchanged since hashed: …, not re-hashed` when proven by `stat`).
///
/// Errors: a sentence naming the file that cannot be opened or read; or every
/// difference by name with both sizes and digests and the algorithm
/// (`checkpoint images differ from the manifest (blake3): changed pages-1.img (… bytes, blake3
/// … → … bytes, blake3 …)`).
pub fn checkpoint_images(
    images_dir: &Path,
    recorded: &[ImageFile],
    stats: Option<&[ImageStat]>,
) -> Observed {
    let digest = digest_of(recorded);
    if stats.is_some_and(|s| images_unchanged(images_dir, recorded, s)) {
        return Ok(format!(
            "{} checkpoint files ({} as recorded; unchanged since hashed: device, inode, size, mtime, ctime, not re-hashed)",
            recorded.len(),
            digest.name()
        ));
    }
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
            checkpoint_images(d.path(), &files, None).unwrap(),
            "2 checkpoint files (blake3 as recorded)"
        );
        // One byte changed, same size: named with both BLAKE3 digests.
        let mut changed = big.clone();
        changed[big.len() / 2] ^= 1;
        fs::write(d.path().join("pages-1.img"), &changed).unwrap();
        let e = checkpoint_images(d.path(), &files, None).unwrap_err();
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
        let e = checkpoint_images(d.path(), &files, None).unwrap_err();
        assert!(e.contains("changed core-1.img (4 bytes, blake3 "), "{e}");
    }

    #[test]
    fn a_snapshot_without_blake3_is_proven_by_sha256() {
        let (d, big) = images();
        let files = inventory(d.path()).unwrap();
        assert_eq!(
            checkpoint_images(d.path(), &files, None).unwrap(),
            "2 checkpoint files (sha256 as recorded)"
        );
        // One entry without `blake3` (not what a snapshot writes): all checked by sha256.
        let mut mixed = inventory_with_blake3(d.path()).unwrap();
        mixed[0].blake3 = None;
        assert_eq!(digest_of(&mixed), ImageDigest::Sha256);
        assert!(
            checkpoint_images(d.path(), &mixed, None)
                .unwrap()
                .contains("(sha256 as recorded)")
        );
        let mut changed = big.clone();
        changed[0] ^= 1;
        fs::write(d.path().join("pages-1.img"), &changed).unwrap();
        let e = checkpoint_images(d.path(), &files, None).unwrap_err();
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
        let e = checkpoint_images(d.path(), &files, None).unwrap_err();
        assert!(
            e.contains("not a regular file pages-1.img (a symbolic link; recorded 393216 bytes"),
            "{e}"
        );
        fs::remove_file(&pages).unwrap();
        fs::create_dir(&pages).unwrap();
        let e = checkpoint_images(d.path(), &files, None).unwrap_err();
        assert!(
            e.contains("not a regular file pages-1.img (a folder;"),
            "{e}"
        );
        fs::remove_dir(&pages).unwrap();
        let e = checkpoint_images(d.path(), &files, None).unwrap_err();
        assert!(
            e.contains("missing pages-1.img (393216 bytes, blake3 "),
            "{e}"
        );
        let gone = d.path().join("gone");
        let e = checkpoint_images(&gone, &files, None).unwrap_err();
        assert!(
            e.starts_with("the checkpoint images cannot be hashed (blake3): ")
                && e.contains(&gone.display().to_string()),
            "{e}"
        );
    }

    #[test]
    fn recorded_stats_prove_the_images_without_a_rehash_and_any_change_falls_back() {
        let (d, _) = images();
        let (files, stats) =
            hashed_with_stats(d.path(), || inventory_with_blake3(d.path())).unwrap();
        let stats = stats.expect("nothing changed while hashing");
        assert_eq!(stats.len(), 2);
        let ok = checkpoint_images(d.path(), &files, Some(&stats)).unwrap();
        assert!(
            ok.contains("2 checkpoint files (blake3 as recorded; unchanged since hashed"),
            "{ok}"
        );
        assert!(ok.contains("not re-hashed"), "{ok}");
        // The same bytes written back: the ctime moved, so the files are re-hashed (and pass).
        let core = d.path().join("core-1.img");
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(&core, b"core").unwrap();
        assert!(!images_unchanged(d.path(), &files, &stats));
        assert_eq!(
            checkpoint_images(d.path(), &files, Some(&stats)).unwrap(),
            "2 checkpoint files (blake3 as recorded)"
        );
        // Other bytes: named by digest, as without a record.
        fs::write(&core, b"CORE").unwrap();
        let e = checkpoint_images(d.path(), &files, Some(&stats)).unwrap_err();
        assert!(e.contains("changed core-1.img"), "{e}");
        fs::write(&core, b"core").unwrap();
        // A fresh record; then an extra entry, or a record not covering the manifest, re-hashes.
        let stats = image_stats(d.path()).unwrap();
        assert!(images_unchanged(d.path(), &files, &stats));
        assert!(!images_unchanged(d.path(), &files[..1], &stats));
        fs::create_dir(d.path().join("sub")).unwrap();
        assert!(image_stats(d.path()).is_none());
        assert!(!images_unchanged(d.path(), &files, &stats));
        let e = checkpoint_images(d.path(), &files, Some(&stats));
        assert!(
            e.is_ok(),
            "a folder is not a regular file the digests list: {e:?}"
        );
    }
}
