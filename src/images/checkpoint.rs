//! One checkpoint archive, read whole: the stream ([`super::archive`]), CRIU's network images
//! of its `checkpoint/` ([`super::netimg::decode_images`]), the engine's metadata
//! ([`super::engine`]) and the finding ([`super::finding`]); with its text rendering and JSON
//! (`evidence-schema/checkpoint-archive.schema.json`).

use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::archive::{ArchiveError, Compression, read_archive};
use super::engine::{EngineMeta, MetadataError, read_meta};
use super::finding::{Finding, derive};
use super::format::ImageError;
use super::netimg::{NetImages, decode_images};

/// The version of the JSON shape [`Checkpoint`] serialises to.
pub const CHECKPOINT_SCHEMA_VERSION: u32 = 1;

/// What `netprobe images ARCHIVE` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// [`CHECKPOINT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The archive as given.
    pub archive: PathBuf,
    /// Its compression, from its first bytes.
    pub compression: Compression,
    /// Tar entries read.
    pub entries: u64,
    /// Files under `checkpoint/`.
    pub checkpoint_files: u64,
    /// The engine's metadata.
    pub engine: EngineMeta,
    /// What a restore will bring back, and why.
    pub finding: Finding,
    /// The network images of `checkpoint/`, decoded (`dir` is `<archive>:checkpoint`).
    pub images: NetImages,
}

/// Why a checkpoint archive cannot be reported.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The stream: unreadable, refused, truncated, corrupt, no `checkpoint/`.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// A malformed network image (named `<archive>:checkpoint/<file>`).
    #[error("{0}; give an unmodified checkpoint archive as podman or the kubelet wrote it")]
    Image(#[from] ImageError),
    /// A metadata file of the wrong shape.
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    /// `checkpoint/` holds no CRIU image.
    #[error("{}: checkpoint/ holds no CRIU image (no inventory.img, no network image); give an archive of a finished checkpoint", archive.display())]
    NoImages {
        /// The archive as given.
        archive: PathBuf,
    },
}

/// Reads the checkpoint archive at `path` (streamed, never unpacked) and derives its finding.
///
/// Errors: [`CheckpointError`], each naming the archive (and the entry, its offset) and the fix.
pub fn read_checkpoint(path: &Path) -> Result<Checkpoint, CheckpointError> {
    let read = read_archive(path)?;
    let label = PathBuf::from(format!("{}:checkpoint", path.display()));
    let images = decode_images(&label, read.images)?;
    if !images.inventory && images.namespaces.is_empty() {
        return Err(CheckpointError::NoImages {
            archive: path.to_path_buf(),
        });
    }
    let engine = read_meta(path, &read.metadata, &read.top_level)?;
    let finding = derive(&images, Some(&engine), "checkpoint/");
    Ok(Checkpoint {
        schema_version: CHECKPOINT_SCHEMA_VERSION,
        archive: path.to_path_buf(),
        compression: read.compression,
        entries: read.entries,
        checkpoint_files: read.checkpoint_files,
        engine,
        finding,
        images,
    })
}

/// Whether `path` is a file whose first bytes start a tar, gzip or zstd stream.
pub fn looks_like_archive(path: &Path) -> bool {
    use std::io::Read;
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = Vec::with_capacity(512);
    f.take(512).read_to_end(&mut head).is_ok() && super::archive::sniff(&head).is_some()
}

/// The engine block and the finding as text (the images tree follows, from
/// [`super::tree::render`]).
pub fn render_head(c: &Checkpoint) -> String {
    let mut o = String::new();
    let e = &c.engine;
    let _ = writeln!(
        o,
        "{} ({}, {} entries, {} files in checkpoint/, read as a stream)",
        c.archive.display(),
        c.compression.as_str(),
        c.entries,
        c.checkpoint_files
    );
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "not recorded".into());
    let _ = writeln!(
        o,
        "  engine: {} (metadata: {})",
        serde_json::to_value(e.engine)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        if e.files.is_empty() {
            "none".into()
        } else {
            e.files.join(", ")
        }
    );
    let _ = writeln!(
        o,
        "    container: {} (id {})",
        opt(&e.container_name),
        opt(&e.container_id)
    );
    let _ = writeln!(o, "    runtime: {}", opt(&e.runtime));
    if let Some(m) = &e.network_mode {
        let _ = writeln!(o, "    network mode: {m}");
    }
    let ns = match (&e.netns_path, e.netns_in_spec) {
        (Some(p), _) => format!("{p} (given to the runtime by path)"),
        (None, true) => "no path (created by the runtime)".into(),
        (None, false) => "not in spec.dump".into(),
    };
    let _ = writeln!(o, "    network namespace: {ns}");
    for (k, v) in &e.ip_annotations {
        let _ = writeln!(o, "    annotation {k} = {v}");
    }
    for i in e.interfaces.iter().filter(|i| i.network != "annotation") {
        let _ = writeln!(
            o,
            "    network.status: {} {} {}{}{}",
            i.network,
            i.interface.as_deref().unwrap_or("?"),
            i.addresses.join(" "),
            if i.gateways.is_empty() {
                String::new()
            } else {
                format!(" gateway {}", i.gateways.join(" "))
            },
            i.mac
                .as_deref()
                .map_or(String::new(), |m| format!(" mac {m}"))
        );
    }
    let f = &c.finding;
    let _ = writeln!(o, "  finding: {}", f.kind.as_str());
    let _ = writeln!(o, "    restore brings back: {}", f.restore);
    if let Some(d) = &f.decided_by {
        let _ = writeln!(o, "    decided by: {d}");
    }
    let _ = writeln!(o, "    why: {}", f.reason);
    let _ = writeln!(o, "    rests on: {}", f.rests_on.join(", "));
    o
}
