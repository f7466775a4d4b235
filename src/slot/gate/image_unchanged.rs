//! The image under the container, recorded at provision and re-proven by the `image-unchanged`
//! gate of snapshot, restore and reset before their first destructive step: an overlay's lower
//! that changed under it is undefined behaviour in the kernel, and a guest restored onto other
//! files than it was snapshotted on is not the snapshot.
//!
//! - `embedded` and `directory`: the lower is a plain folder used in place, so provision
//!   records its metadata manifest ([`super::image_manifest`]: sha256 and entry count in
//!   `state.json` `image.manifest`, the listing in `slot-N/image-manifest.json`) and the gate
//!   walks it again (one `lstat` per entry) and names the paths that differ.
//! - `qcow2`: the file is hashed to its pin at provision; its `stat` (device, inode, size,
//!   mtime, ctime: [`FileStat`]) is taken before that hash, proven the same once the FUSE export
//!   serves it, and recorded (`image.file_stat`), so the gate compares one `stat` instead of
//!   re-hashing gigabytes (ctime changes on any write and cannot be set back). A state written
//!   before the record: the file is hashed whole against the pin, as the binaries are.

use crate::slot::gate::Observed;
use crate::slot::gate::image_manifest::ManifestError;
use crate::slot::gate::image_manifest::{self, ImageManifest, ManifestListing};
use crate::slot::resources::sealed_binaries::SealError;
use crate::slot::resources::sealed_binaries::{FileStat, source_stat};
use crate::slot::resources::slot_dir::SlotPaths;
use crate::slot::state::{ImageKind, ImageState, SlotState};
use std::path::Path;

/// provision: walks the directory image at `lower`, writes its listing to `listing`
/// atomically (`slot-N/image-manifest.json`) and returns what `state.json` records.
///
/// Errors: a sentence naming the entry that could not be read, or the listing file.
pub(crate) fn record_manifest(
    lower: &Path,
    listing: &Path,
) -> Result<ImageManifest, ManifestError> {
    let entries = image_manifest::walk(lower)?;
    let l = ManifestListing::new(lower, entries)?;
    let bytes = serde_json::to_vec(&l).map_err(|source| ManifestError::Encode {
        what: listing.display().to_string(),
        source,
    })?;
    crate::evidence::replace_atomic(listing, &bytes).map_err(|source| ManifestError::Write {
        path: listing.to_path_buf(),
        source,
    })?;
    Ok(l.manifest())
}

/// The `image-unchanged` gate: the image under the container is the one provision recorded.
/// Read-only (a walk of the lower, or one `stat` of the qcow2), so restore and reset run it on a
/// thread beside the other gates.
pub(crate) fn image_unchanged(st: &SlotState, p: &SlotPaths) -> Observed {
    let Some(img) = &st.image else {
        return Err(format!(
            "state.json records no image: nothing proves what the container runs on; fix: {}",
            new_slot(p)
        ));
    };
    match img.kind {
        ImageKind::Embedded | ImageKind::Directory => directory(img, p),
        ImageKind::Qcow2 => qcow2(img, p),
    }
}

/// The way out when the image cannot be proven: the slot is released and another provisioned.
fn new_slot(p: &SlotPaths) -> String {
    format!(
        "{}, then provision a new slot",
        crate::slot::next_step::on_slot("cleanup", p)
    )
}

fn kind_name(k: ImageKind) -> String {
    serde_json::to_value(k)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// `embedded`/`directory`: the manifest walked now equals the one recorded at provision.
fn directory(img: &ImageState, p: &SlotPaths) -> Observed {
    let (kind, lower) = (kind_name(img.kind), img.lower.display());
    let Some(want) = &img.manifest else {
        return Err(format!(
            "state.json records no manifest of the {kind} image {lower} (a slot provisioned by a netprobe before image manifests), so that the image under the container is the one provision mounted cannot be proven; fix: {}",
            new_slot(p)
        ));
    };
    let now = image_manifest::walk(&img.lower).map_err(|e| {
        format!(
            "the {kind} image {lower} (the overlay's lower) cannot be walked: {e}; fix: if it became unreachable (its filesystem unmounted, a folder above it renamed), make it reachable at {lower} again (the image itself moved changes its ctime and stays refused), else {}",
            new_slot(p)
        )
    })?;
    let sha = image_manifest::digest(&now).map_err(|e| {
        format!(
            "the {kind} image {lower}: its metadata sha256 cannot be taken: {e}; fix: {}",
            new_slot(p)
        )
    })?;
    if sha == want.sha256 && now.len() as u64 == want.entries {
        return Ok(format!(
            "{kind} image {lower}: {} entries, metadata sha256 {sha} as recorded at provision (path, type, mode, owner, size, mtime, ctime, symlink target, device number)",
            want.entries
        ));
    }
    Err(format!(
        "the {kind} image {lower} (the overlay's lower, used in place) changed since provision: {} entries, metadata sha256 {sha}; recorded {} entries, {}: {}. The guest would run on other files than at provision and snapshot, and an overlay's lower changed under it is undefined in the kernel; fix: an edited image cannot be proven the same again (ctime cannot be set back, so even the same bytes put back are refused): {}",
        now.len(),
        want.entries,
        want.sha256,
        named_paths(p, want, &now),
        new_slot(p)
    ))
}

/// The paths that differ from the provision-time listing (`slot-N/image-manifest.json`), or
/// why they cannot be named (the listing is missing, unreadable, or no longer hashes to the
/// recorded sha256).
fn named_paths(
    p: &SlotPaths,
    want: &ImageManifest,
    now: &[image_manifest::ManifestEntry],
) -> String {
    let path = p.image_manifest();
    let listing = crate::evidence::read_recorded(&path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice::<ManifestListing>(&b).map_err(|e| e.to_string()))
        .and_then(|l| l.check(&want.sha256).map(|()| l).map_err(|e| e.to_string()));
    match listing {
        Ok(l) => image_manifest::diff(&l.entries, now).to_string(),
        Err(e) => format!(
            "the paths that differ cannot be named ({}: {e})",
            path.display()
        ),
    }
}

/// `qcow2`: the file's `stat` equals the one recorded at provision; without a record (an
/// older state) the file hashed whole against its pin.
fn qcow2(img: &ImageState, p: &SlotPaths) -> Observed {
    let src = img.source.display();
    let Some(pin) = &img.sha256 else {
        return Err(format!(
            "state.json records no sha256 of the qcow2 image {src}; fix: {}",
            new_slot(p)
        ));
    };
    let Some(want) = img.file_stat else {
        let why =
            "state.json records no stat of the file (a slot provisioned by an older netprobe)";
        return match super::pure_checks::file_sha256(&img.source) {
            Ok(h) if h == *pin => Ok(format!(
                "qcow2 image {src}: sha256 {h}, the pin (hashed whole: {why})"
            )),
            Ok(h) => Err(format!(
                "the qcow2 image {src} has sha256 {h}, not the pin {pin} it had at provision (hashed whole: {why}); fix: {}",
                new_slot(p)
            )),
            Err(e) => Err(format!("{e} (hashed whole: {why}); fix: {}", new_slot(p))),
        };
    };
    let now = source_stat(&img.source).map_err(|e| {
        format!(
            "{e}; fix: if it became unreachable (its filesystem unmounted, a folder above it renamed), make it reachable at {src} again, else {}",
            new_slot(p)
        )
    })?;
    if now == want {
        return Ok(format!(
            "qcow2 image {src}: hashed to the pin {pin} at provision and unchanged since (device, inode, size, mtime, ctime; not re-hashed)"
        ));
    }
    Err(format!(
        "the qcow2 image {src} changed since it was hashed to the pin {pin} at provision ({}): the FUSE export may serve other blocks than the snapshot was taken on; fix: a changed file cannot be proven the same again by stat (ctime cannot be set back): {}",
        stat_diff(&want, &now),
        new_slot(p)
    ))
}

/// What differs between two `stat`s: device, inode and size with both values; mtime, ctime.
pub(crate) fn stat_diff(was: &FileStat, now: &FileStat) -> String {
    let mut f = Vec::new();
    for (name, a, b) in [
        ("device", was.dev, now.dev),
        ("inode", was.ino, now.ino),
        ("size", was.size, now.size),
    ] {
        if a != b {
            f.push(format!("{name} {a} → {b}"));
        }
    }
    if was.mtime != now.mtime {
        f.push("mtime".into());
    }
    if was.ctime != now.ctime {
        f.push("ctime".into());
    }
    if f.is_empty() {
        return "no field differs".into();
    }
    f.join(", ")
}

/// Why provision could not prove a qcow2 attached with the bytes hashed to its pin.
#[derive(Debug, thiserror::Error)]
pub enum Qcow2HeldError {
    /// No `stat` was taken before the hash.
    #[error("{}: no stat was taken before its sha256 (nothing proves the bytes hashed are the ones attached)", .0.display())]
    NoStatBefore(std::path::PathBuf),
    /// The file cannot be `stat`ed now.
    #[error(transparent)]
    Stat(#[from] SealError),
    /// The file's `stat` changed between the hash and the export.
    #[error("{} changed between its sha256 check and its FUSE export ({diff}): the bytes attached are not proven to be the pinned ones; provision again once nothing writes to it", file.display())]
    Changed {
        /// The qcow2 file.
        file: std::path::PathBuf,
        /// What changed ([`stat_diff`]).
        diff: String,
    },
}

/// provision, qcow2: the file's `stat` now (the export serving it) equals `before`, taken
/// before it was hashed to its pin; the stat `state.json` then records.
///
/// Errors: a sentence naming the file and what changed while it was hashed and attached.
pub(crate) fn qcow2_stat_held(
    file: &Path,
    before: Option<FileStat>,
) -> Result<FileStat, Qcow2HeldError> {
    let before = before.ok_or_else(|| Qcow2HeldError::NoStatBefore(file.to_path_buf()))?;
    let now = source_stat(file)?;
    if now == before {
        Ok(now)
    } else {
        Err(Qcow2HeldError::Changed {
            file: file.to_path_buf(),
            diff: stat_diff(&before, &now),
        })
    }
}

#[cfg(test)]
#[path = "image_unchanged_tests.rs"]
mod tests;
