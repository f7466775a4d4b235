//! Where a slot lives: slot number validation, the state directory's layout (its checks:
//! [`super::state_dir`]), the slot's
//! ownership marker, the per-slot exclusive lock ([`super::slot_lock`]) and the append-only slot
//! journal ([`crate::slot::record::journal`]).
//!
//! Layout of a state directory (`--state-dir DIR`):
//! ```text
//! DIR/.netprobe-state-dir          marker: this directory holds netprobe slots
//! DIR/slot-N/owner.json            ownership marker (tool, slot, canonical path, id)
//! DIR/slot-N/lock                  flock target (exclusive, non-blocking)
//! DIR/slot-N/journal.jsonl         append-only journal, one JSON object per line
//! DIR/slot-N/state.json            slot state (schema: evidence-schema/slot-state.schema.json)
//! DIR/slot-N/holder.json           holder identity (pid, start time, netns inode)
//! DIR/slot-N/image/                image source, FUSE export file, read-only lower mount
//! DIR/slot-N/image-manifest.json   a directory image's metadata listing taken at provision
//! DIR/slot-N/overlay/{upper,work}  per-run overlay upper and work directories
//! DIR/slot-N/bundle/               OCI bundle: config.json, rootfs (overlay mount point)
//! DIR/slot-N/runc-root/            the runtime's state root (`runc --root`)
//! DIR/slot-N/snapshot-<id>/        complete snapshots; snapshot.tmp-* are never used
//! DIR/slot-N/evidence/<seq>-<verb>/  one evidence folder per verb run
//! ```

use super::fs_tools;
use crate::slot::error::SlotError;
use serde::{Deserialize, Serialize};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Highest accepted slot number (inclusive). Slot numbers are 0..=999.
pub const MAX_SLOT: u32 = 999;

/// Name of the state-directory marker file (defined with the other files that mark a folder
/// netprobe wrote, [`crate::evidence::enclosing`]).
pub const STATE_DIR_MARKER: &str = crate::evidence::enclosing::SLOT_STATE_DIR_MARKER;

/// Name of the slot ownership marker inside a slot directory (see [`STATE_DIR_MARKER`]).
pub const OWNER_FILE: &str = crate::evidence::enclosing::SLOT_OWNER_FILE;

/// Validates a raw slot number: ASCII digits only, 1 to 3 characters, no leading zero (except
/// `0` itself), value 0..=[`MAX_SLOT`]. No signs, spaces, dots or slashes: the number becomes part
/// of a path (`slot-N`).
///
/// Errors: a usage error (exit 2) naming the raw text.
pub fn parse_slot(raw: &str) -> Result<u32, SlotError> {
    let ok_chars = !raw.is_empty() && raw.len() <= 3 && raw.bytes().all(|b| b.is_ascii_digit());
    if !ok_chars || (raw.len() > 1 && raw.starts_with('0')) {
        return Err(SlotError::usage(
            raw,
            format!(
                "malformed slot number {raw:?}: expected digits only, 0..={MAX_SLOT}, no leading zero"
            ),
        ));
    }
    let n: u32 = raw
        .parse()
        .map_err(|_| SlotError::usage(raw, format!("malformed slot number {raw:?}")))?;
    if n > MAX_SLOT {
        return Err(SlotError::usage(
            raw,
            format!("slot number {n} is above {MAX_SLOT}"),
        ));
    }
    Ok(n)
}

/// The paths of one slot. All absolute; `root` is `<state dir>/slot-N`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotPaths {
    /// The slot number.
    pub slot: u32,
    /// The state directory (absolute, as given without a trailing `/` or `.` components,
    /// symlink-checked).
    pub state_dir: PathBuf,
    /// `<state dir>/slot-N`.
    pub root: PathBuf,
}

impl SlotPaths {
    /// Paths for slot `slot` in `state_dir` (made absolute against the current directory; a
    /// trailing `/` and `.` components dropped).
    pub fn new(state_dir: &Path, slot: u32) -> Self {
        let state_dir = if state_dir.is_absolute() {
            state_dir.to_path_buf()
        } else {
            std::env::current_dir()
                .unwrap_or_else(|_| PathBuf::from("/"))
                .join(state_dir)
        };
        // Rebuilt from its components: no trailing `/` (with one, `lstat` follows a symlink, so
        // a symlinked state directory would pass the `state-dir` gate and its mounts be named
        // by a path mountinfo never shows) and no `.` components.
        let state_dir: PathBuf = state_dir.components().collect();
        let root = state_dir.join(format!("slot-{slot}"));
        SlotPaths {
            slot,
            state_dir,
            root,
        }
    }
    /// `owner.json`.
    pub fn owner(&self) -> PathBuf {
        self.root.join(OWNER_FILE)
    }
    /// `lock`.
    pub fn lock(&self) -> PathBuf {
        self.root.join("lock")
    }
    /// `journal.jsonl`.
    pub fn journal(&self) -> PathBuf {
        self.root.join("journal.jsonl")
    }
    /// `state.json`.
    pub fn state(&self) -> PathBuf {
        self.root.join("state.json")
    }
    /// `holder.json`.
    pub fn holder(&self) -> PathBuf {
        self.root.join("holder.json")
    }
    /// `image/`.
    pub fn image_dir(&self) -> PathBuf {
        self.root.join("image")
    }
    /// `image-manifest.json`: the directory image's listing taken at provision
    /// ([`crate::slot::gate::image_manifest::ManifestListing`]).
    pub fn image_manifest(&self) -> PathBuf {
        self.root.join("image-manifest.json")
    }
    /// `overlay/`.
    pub fn overlay_dir(&self) -> PathBuf {
        self.root.join("overlay")
    }
    /// `bundle/`.
    pub fn bundle(&self) -> PathBuf {
        self.root.join("bundle")
    }
    /// `bundle/config.json`.
    pub fn config(&self) -> PathBuf {
        self.bundle().join("config.json")
    }
    /// `bundle/rootfs` (the overlay mount point).
    pub fn rootfs(&self) -> PathBuf {
        self.bundle().join("rootfs")
    }
    /// `runc-root/`.
    pub fn runtime_root(&self) -> PathBuf {
        self.root.join("runc-root")
    }
    /// `evidence/`.
    pub fn evidence(&self) -> PathBuf {
        self.root.join("evidence")
    }
    /// The container id used with the runtime: `netprobe-slot-N`.
    pub fn container_id(&self) -> String {
        format!("netprobe-slot-{}", self.slot)
    }
    /// The cgroup path in `config.json` (cgroupfs driver): `/netprobe/slot-N-<first 8 hex of the
    /// ownership id>` (unique per slot lifetime, so two state directories never share a cgroup).
    pub fn cgroups_path(&self, owner_id: &str) -> String {
        format!(
            "/netprobe/slot-{}-{}",
            self.slot,
            &owner_id[..owner_id.len().min(8)]
        )
    }
}

/// The slot ownership marker (`owner.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerMarker {
    /// Always `netprobe`.
    pub tool: String,
    /// Always `slot`.
    pub kind: String,
    /// The slot number.
    pub slot: u32,
    /// The slot directory's absolute path when it was created; a copied or moved slot does not match.
    pub path: PathBuf,
    /// Random id (128 bits, hex) of this slot's lifetime.
    pub id: String,
    /// RFC 3339 creation time (UTC).
    pub created_at: String,
    /// The netprobe version that created the slot.
    pub tool_version: String,
}

/// Why [`create_slot`] made no slot.
#[derive(Debug)]
pub enum CreateSlotError {
    /// The slot directory is already there (the `slot-fresh` gate): the detail (the way out,
    /// which depends on the slot's state, is added by the caller).
    Exists(String),
    /// The directory or its marker could not be made: the detail (naming the path) and the
    /// I/O error. A directory this call made is removed again when it holds nothing else, so
    /// the slot number is not used up; `removed` says whether the slot folder is gone now.
    Io {
        /// `cannot create …: …` or `cannot write …/owner.json: …`.
        detail: String,
        /// The I/O error.
        source: std::io::Error,
        /// Whether no slot folder is left (none was made, or the one made was removed).
        removed: bool,
    },
}

/// Creates the slot directory (`mkdir`, so an existing one is refused atomically) and writes its
/// ownership marker. When the marker cannot be written (a full disk, a quota), the directory
/// just made is removed again if it holds nothing else.
///
/// Errors: [`CreateSlotError::Exists`] when the directory exists (the `slot-fresh` gate),
/// [`CreateSlotError::Io`] when it or its marker cannot be made.
pub fn create_slot(paths: &SlotPaths) -> Result<OwnerMarker, CreateSlotError> {
    let io = |detail: String, source: std::io::Error| CreateSlotError::Io {
        detail,
        source,
        removed: fs::symlink_metadata(&paths.root).is_err(),
    };
    match fs::symlink_metadata(&paths.root) {
        Ok(m) => {
            // The way out depends on what of the slot may be live: the caller adds it
            // (`status::existing_slot_way_out`).
            return Err(CreateSlotError::Exists(format!(
                "{} already exists ({}); a slot is never re-provisioned in place",
                paths.root.display(),
                if m.file_type().is_symlink() {
                    "a symlink"
                } else {
                    "a directory or file"
                },
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(format!("cannot stat {}: {e}", paths.root.display()), e)),
    }
    if let Err(e) = fs::DirBuilder::new().mode(0o700).create(&paths.root) {
        let d = format!("cannot create {}: {e}", paths.root.display());
        return Err(match e.kind() == std::io::ErrorKind::AlreadyExists {
            true => CreateSlotError::Exists(d),
            false => io(d, e),
        });
    }
    let marker = OwnerMarker {
        tool: "netprobe".into(),
        kind: "slot".into(),
        slot: paths.slot,
        path: paths.root.clone(),
        id: fs_tools::random_hex(16),
        created_at: crate::evidence::now_rfc3339(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
    };
    let bytes = serde_json::to_vec_pretty(&marker).expect("serialize owner marker");
    if let Err(e) = crate::evidence::replace_atomic(&paths.owner(), &bytes) {
        // Made by this call a moment ago: removed unless something else is in it now.
        let _ = fs::remove_dir(&paths.root);
        return Err(io(
            format!("cannot write {}: {e}", paths.owner().display()),
            e,
        ));
    }
    Ok(marker)
}

use std::os::unix::fs::DirBuilderExt;

/// Checks the slot directory and its ownership marker: the directory exists, is not a symlink, is
/// owned by us, and `owner.json` is a regular file naming netprobe, this slot number and this
/// slot directory's path.
///
/// Returns `Ok((marker, detail))` when proven; `Err((exists, detail))` otherwise, where `exists`
/// is false when there is no slot directory at all.
pub fn check_owner(paths: &SlotPaths) -> Result<(OwnerMarker, String), (bool, String)> {
    let md = match fs::symlink_metadata(&paths.root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err((
                false,
                format!(
                    "{} does not exist: slot {} was never provisioned (run {} first)",
                    paths.root.display(),
                    paths.slot,
                    crate::slot::next_step::command(
                        "provision",
                        paths.slot,
                        paths.root.parent().unwrap_or(&paths.root)
                    )
                ),
            ));
        }
        Err(e) => return Err((true, format!("cannot stat {}: {e}", paths.root.display()))),
        Ok(m) => m,
    };
    if md.file_type().is_symlink() || !md.is_dir() {
        return Err((
            true,
            format!("{} is a symlink or not a directory", paths.root.display()),
        ));
    }
    let euid = nix::unistd::geteuid().as_raw();
    if md.uid() != euid {
        return Err((
            true,
            format!(
                "{} is owned by uid {}, not {euid}",
                paths.root.display(),
                md.uid()
            ),
        ));
    }
    let owner = paths.owner();
    match fs::symlink_metadata(&owner) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err((true, format!("{} is not a regular file", owner.display()))),
        Err(_) => return Err((true, missing_owner(paths))),
    }
    let text =
        fs::read(&owner).map_err(|e| (true, format!("cannot read {}: {e}", owner.display())))?;
    let m: OwnerMarker = serde_json::from_slice(&text).map_err(|e| {
        (
            true,
            format!(
                "{} is not a netprobe ownership marker: {e}",
                owner.display()
            ),
        )
    })?;
    if m.tool == "netprobe" && m.kind == "slot" && m.slot == paths.slot && m.path != paths.root {
        return Err((true, copied_slot(paths, &owner, &m.path)));
    }
    if m.tool != "netprobe" || m.kind != "slot" || m.slot != paths.slot || m.path != paths.root {
        return Err((
            true,
            format!(
                "{} names tool {:?} kind {:?} slot {} path {}, expected netprobe slot {} at {}",
                owner.display(),
                m.tool,
                m.kind,
                m.slot,
                m.path.display(),
                paths.slot,
                paths.root.display()
            ),
        ));
    }
    let detail = format!("{}: netprobe slot {}, id {}", owner.display(), m.slot, m.id);
    Ok((m, detail))
}

/// The refusal of a slot folder without `owner.json`: nothing in it is touched. Moving it away
/// is the way out only when nothing of it can be live: when its `state.json` (read, not proven:
/// the marker is missing) records a phase other than `clean`, the words name what it records as
/// possibly live (container and runtime root, holder pid, overlay mount), to be released by hand
/// first — moved away first, they would run on with no owner.
fn missing_owner(paths: &SlotPaths) -> String {
    let head = format!(
        "{} is missing: the directory is not proven to be a netprobe slot, so nothing in it is touched; if netprobe made it, its evidence and journal (evidence/, journal.jsonl) say so",
        paths.owner().display()
    );
    let root = paths.root.display();
    match crate::slot::state::SlotState::load(&paths.state()) {
        Ok(st) if st.phase != crate::slot::state::Phase::Clean => {
            let holder = st
                .holder
                .map(|h| format!(", holder pid {}", h.pid))
                .unwrap_or_default();
            let overlay = st
                .overlay
                .as_ref()
                .map(|o| format!(", overlay mounted on {}", o.merged.display()))
                .unwrap_or_default();
            format!(
                "{head}. Its state.json (not proven either) records phase {}: what it names may still be live — container {} under runtime root {}{holder}{overlay}; release those by hand first (moving the folder first would leave them running with no owner), then keep what you need, move {root} away, and provision another slot number",
                st.phase.name(),
                st.container_id,
                st.runtime_root.display(),
            )
        }
        _ => format!(
            "{head}: keep what you need, move {root} away, and provision another slot number"
        ),
    }
}

/// The words for a slot folder whose marker `owner` names another path `original`: it was
/// copied or moved from there, and is used only where it was provisioned (its state, mounts and
/// runtime root name that path). The fix: the `--state-dir` holding the original (or, when
/// the original is gone, moving this folder back there).
fn copied_slot(paths: &SlotPaths, owner: &Path, original: &Path) -> String {
    let sd = original.parent().unwrap_or(original);
    let back = match fs::symlink_metadata(original) {
        Ok(_) => String::new(),
        Err(_) => format!(
            " ({} does not exist now: move this folder back there first)",
            original.display()
        ),
    };
    format!(
        "{} names netprobe slot {} at {}, not {}: this slot folder was copied or moved from there, and a slot is used only where it was provisioned (its state, mounts and runtime root name that path), so nothing in it is touched; use `--state-dir {}`{back}",
        owner.display(),
        paths.slot,
        original.display(),
        paths.root.display(),
        crate::shell::arg(sd)
    )
}

#[cfg(test)]
mod tests {
    use crate::slot::record::journal::{journal_append, journal_read};

    #[test]
    fn slot_files_replaced_by_a_fifo_or_a_device_never_hang_or_grow() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("journal.jsonl");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // Each of these would block for ever (FIFO) or read without end (/dev/zero) if opened
        // plainly; each returns at once.
        assert!(journal_read(&fifo).is_empty());
        let e = journal_append(&fifo, "reset", crate::slot::JournalEvent::Start, true, "x")
            .unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = crate::slot::state::SlotState::load(&fifo).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        let zero = d.path().join("state.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(journal_read(&zero).is_empty());
        let e = crate::slot::state::SlotState::load(&zero).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
    }
}
