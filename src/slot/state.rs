//! The slot state model (`slot-N/state.json`), written atomically after every step so that a
//! killed netprobe leaves a state `cleanup` can release. Schema:
//! `evidence-schema/slot-state.schema.json` (the `state` member of `slot status`).

use super::Verb;
use crate::ns::ProcessIdentity;
use crate::oci::Resources;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Why `state.json` could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The file is missing or unreadable.
    #[error("{}: {source}", path.display())]
    Read {
        /// `state.json`.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a slot state (or the state cannot be serialized).
    #[error("{}: {source}", path.display())]
    Parse {
        /// `state.json`.
        path: PathBuf,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// The atomic write failed.
    #[error("write {}: {source}", path.display())]
    Write {
        /// `state.json`.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Version of the `state.json` layout.
pub const STATE_SCHEMA_VERSION: u32 = 1;

/// Where the slot is in its life. Phases ending in `-ing` that are found by a later verb mean the
/// verb that set them was interrupted; later verbs decide from facts (runtime state, holder
/// identity, snapshot completeness), never from the phase alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// provision started and has not finished.
    Provisioning,
    /// provision failed; what it started was released by its guards.
    ProvisionFailed,
    /// provisioned: container running, ready gates passed.
    Ready,
    /// a snapshot started and has not finished.
    Snapshotting,
    /// a complete snapshot exists and the container was stopped by the checkpoint.
    Checkpointed,
    /// a snapshot failed; the previous complete snapshot (if any) is unchanged.
    SnapshotFailed,
    /// restore or reset started and has not finished.
    Restoring,
    /// restored and every gate passed.
    Running,
    /// restore failed closed; the holder is kept so the restore can be retried.
    RestoreFailed,
    /// cleanup started and has not finished.
    Cleaning,
    /// everything released; evidence kept.
    Clean,
}

/// How a verb ended, for [`Phase::after`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerbEnd {
    /// The verb passed its gates and started its first destructive step.
    Began,
    /// Every step and gate passed.
    Succeeded,
    /// A step or a gate after the first destructive step failed; `container_gone` says whether
    /// `runtime state` proved the container absent afterwards.
    Failed {
        /// The container is proven gone.
        container_gone: bool,
    },
}

impl Phase {
    /// The phase as `state.json` spells it (`running`, `restore-failed`, …).
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| format!("{self:?}"))
    }

    /// The one table of phase transitions: the phase a slot is in after `verb` reached `end`,
    /// coming from `prev` (the phase before the verb began). `status` changes nothing: `prev`.
    ///
    /// | verb | began | succeeded | failed |
    /// |---|---|---|---|
    /// | provision | provisioning | ready | provision-failed |
    /// | snapshot | snapshotting | checkpointed | snapshot-failed if the container is gone, else `prev` |
    /// | restore, reset | restoring | running | restore-failed |
    /// | cleanup | cleaning | clean | cleaning |
    pub fn after(verb: Verb, end: VerbEnd, prev: Phase) -> Phase {
        use Phase::*;
        use VerbEnd::*;
        match (verb, end) {
            (Verb::Status, _) => prev,
            (Verb::Provision, Began) => Provisioning,
            (Verb::Provision, Succeeded) => Ready,
            (Verb::Provision, Failed { .. }) => ProvisionFailed,
            (Verb::Snapshot, Began) => Snapshotting,
            (Verb::Snapshot, Succeeded) => Checkpointed,
            (
                Verb::Snapshot,
                Failed {
                    container_gone: true,
                },
            ) => SnapshotFailed,
            (
                Verb::Snapshot,
                Failed {
                    container_gone: false,
                },
            ) => prev,
            (Verb::Restore | Verb::Reset, Began) => Restoring,
            (Verb::Restore | Verb::Reset, Succeeded) => Running,
            (Verb::Restore | Verb::Reset, Failed { .. }) => RestoreFailed,
            (Verb::Cleanup, Began) => Cleaning,
            (Verb::Cleanup, Succeeded) => Clean,
            (Verb::Cleanup, Failed { .. }) => Cleaning,
        }
    }
}

/// A binary recorded at provision (from [`crate::host::binary_facts`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BinaryPin {
    /// Path used at provision (absolute, as executed).
    pub path: PathBuf,
    /// Lower-case hex sha256 at provision.
    pub sha256: String,
    /// Version parsed from `--version` at provision (e.g. `1.1.5+ds1`, `4.2.1`).
    #[serde(default)]
    pub version: Option<String>,
    /// For the runtime: which CLI it speaks (`runc` or `crun`), detected from its `--version`
    /// at provision ([`super::resources::crun_leftovers::detect_kind`]). Later verbs take it from here instead of
    /// running `--version` again: the binary is the same one while its sha256 pin holds (a
    /// verb uses nothing the runtime answers before that gate passed). Absent in states
    /// written before it was recorded (then detected per verb) and for CRIU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<crate::oci::RuntimeKind>,
    /// The sealed copy of this binary the holder keeps (made at provision, executed by every
    /// later verb: [`super::resources::sealed_binaries`]). Absent in states written before sealed copies and where
    /// none could be made (then every verb re-hashes the file at `path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<super::resources::sealed_binaries::SealedCopy>,
    /// When the binary is not an ELF executable but a `#!` script, accepted at provision only
    /// with `--allow-script-binaries REASON`: its interpreter and the operator's reason. Absent
    /// for an ELF executable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<ScriptAllowed>,
}

/// A `#!` script accepted as the slot's runtime or CRIU (`--allow-script-binaries REASON`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptAllowed {
    /// The script's interpreter line after `#!` (e.g. `/bin/sh`).
    pub interpreter: String,
    /// The operator's reason (`--allow-script-binaries REASON`).
    pub reason: String,
}

/// How the probe-verdict gate was satisfied (`mode` in `state.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeGateMode {
    /// A netprobe evidence folder with a passing verdict (`--probe-evidence DIR`).
    Evidence,
    /// Overridden by the operator (`--no-probe-gate --reason TEXT`).
    Override,
}

impl PartialEq<&str> for ProbeGateMode {
    fn eq(&self, other: &&str) -> bool {
        serde_json::to_value(self).is_ok_and(|v| v == *other)
    }
}

/// How the probe-verdict gate was satisfied at provision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeGateRecord {
    /// `evidence` (a passing netprobe-result.json) or `override` (`--no-probe-gate --reason`).
    pub mode: ProbeGateMode,
    /// The probe evidence directory, for `evidence`.
    pub evidence_dir: Option<PathBuf>,
    /// The verdict code read from it.
    pub verdict: Option<String>,
    /// The operator's reason, for `override`.
    pub reason: Option<String>,
}

/// What the slot's image is (`kind` in `state.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageKind {
    /// netprobe's busybox rootfs, built in the slot (the default).
    Embedded,
    /// A `--image` directory, used as the overlay's lower as it is.
    Directory,
    /// A pinned `--image X.qcow2`, served read-only (FUSE export, loop device, read-only mount).
    Qcow2,
}

impl ImageKind {
    /// The kind `--image` names: none = embedded, a `.qcow2` file = qcow2, else a directory.
    pub fn of(image: Option<&Path>) -> ImageKind {
        match image {
            None => ImageKind::Embedded,
            Some(p) if p.extension().is_some_and(|e| e == "qcow2") => ImageKind::Qcow2,
            Some(_) => ImageKind::Directory,
        }
    }
}

impl PartialEq<&str> for ImageKind {
    fn eq(&self, other: &&str) -> bool {
        serde_json::to_value(self).is_ok_and(|v| v == *other)
    }
}

/// The slot's image and its mounts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageState {
    /// `embedded` (busybox rootfs built in the slot), `directory` or `qcow2`.
    pub kind: ImageKind,
    /// The source: the directory or qcow2 path; for `embedded`, the built rootfs.
    pub source: PathBuf,
    /// The qcow2's sha256 (pinned with `--image-sha256` and checked).
    pub sha256: Option<String>,
    /// The overlay's lower directory (the read-only image root).
    pub lower: PathBuf,
    /// FUSE export file (qcow2 only).
    pub export_file: Option<PathBuf>,
    /// `qemu-storage-daemon` pid (qcow2 only).
    pub qsd_pid: Option<i32>,
    /// Loop device (qcow2 only).
    pub loop_device: Option<PathBuf>,
    /// Filesystem type of the image (qcow2 only).
    pub fstype: Option<String>,
    /// The partition mounted as the root filesystem (a partitioned qcow2 attached with a
    /// profile; `None`: the whole device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<super::resources::partition::PartitionInfo>,
    /// `embedded` and `directory`: the lower's metadata manifest taken at provision (its listing
    /// in `slot-N/image-manifest.json`), re-proven by the `image-unchanged` gate
    /// ([`super::gate::image_unchanged`]). `None` for a qcow2, and in states written before it was
    /// recorded (the gate then fails closed: nothing proves the folder unchanged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<super::gate::image_manifest::ImageManifest>,
    /// `qcow2`: the file's `stat` taken before it was hashed to its pin and proven the same once
    /// exported, compared by the `image-unchanged` gate instead of re-hashing it. `None` for a
    /// directory image, and in states written before it was recorded (the gate then hashes the
    /// file whole against `sha256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_stat: Option<super::resources::sealed_binaries::FileStat>,
}

impl ImageState {
    /// An image that is a plain directory used as the overlay's lower as it is (`embedded` or
    /// `directory`): no hash, no export, no mounts of its own; its manifest not yet taken.
    pub fn plain_directory(kind: ImageKind, dir: PathBuf) -> ImageState {
        ImageState {
            kind,
            source: dir.clone(),
            sha256: None,
            lower: dir,
            export_file: None,
            qsd_pid: None,
            loop_device: None,
            fstype: None,
            partition: None,
            manifest: None,
            file_stat: None,
        }
    }
}

/// The container rootfs overlay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverlayState {
    /// Mount point (`bundle/rootfs`).
    pub merged: PathBuf,
    /// Run number; upper = `overlay/upper-<run>`, work = `overlay/work-<run>`.
    pub run: u32,
    /// Whether the overlay was mounted when the state was written.
    pub mounted: bool,
    /// The overlayfs options after `lowerdir,upperdir,workdir` that provision mounted with and
    /// every restore/reset mounts with again (the profile's `[overlay]`, see
    /// [`crate::profile::OverlaySpec::effective`]); states written before the field:
    /// `index=off`.
    #[serde(default = "default_overlay_options")]
    pub options: Vec<String>,
    /// Whether the mount also has overlayfs' `volatile` (no sync of the upper's filesystem;
    /// [`crate::slot::resources::mounts::mount_overlay_volatile`]); false in states written before the
    /// field and where the kernel refused it.
    #[serde(default)]
    pub volatile: bool,
}

fn default_overlay_options() -> Vec<String> {
    crate::profile::OverlaySpec::default().effective()
}

impl OverlayState {
    /// The upper directory of run `run`.
    pub fn upper(&self, overlay_dir: &Path, run: u32) -> PathBuf {
        overlay_dir.join(format!("upper-{run}"))
    }
    /// The work directory of run `run`.
    pub fn work(&self, overlay_dir: &Path, run: u32) -> PathBuf {
        overlay_dir.join(format!("work-{run}"))
    }

    /// Every run's folder in `overlay_dir` (`upper-<n>`, `work-<n>`, `n` digits only) but run
    /// `keep`'s: what earlier runs, interrupted resets and their prepared copies left. Sorted;
    /// an unreadable folder has none.
    pub fn runs_except(overlay_dir: &Path, keep: u32) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(overlay_dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                let n = name
                    .strip_prefix("upper-")
                    .or_else(|| name.strip_prefix("work-"));
                n.is_some_and(|n| {
                    !n.is_empty()
                        && n.bytes().all(|b| b.is_ascii_digit())
                        && n.parse::<u32>().ok() != Some(keep)
                })
            })
            .map(|e| e.path())
            .collect();
        v.sort();
        v
    }
}

/// Whether `name` is a snapshot folder's name as `snapshot` writes it: `snapshot-` followed by
/// at least one of `[A-Za-z0-9_.-]`, no `/`, not `..`-like.
pub fn is_snapshot_dir_name(name: &str) -> bool {
    name.strip_prefix("snapshot-").is_some_and(|id| {
        !id.is_empty()
            && !id.starts_with('.')
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
    })
}

fn snapshot_dir_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if is_snapshot_dir_name(&s) {
        Ok(s)
    } else {
        Err(serde::de::Error::custom(format!(
            "snapshot.dir {s:?} is not a snapshot folder name (`snapshot-<id>` inside the slot): the file was edited; restore it or run {} and provision again",
            super::next_step::bare("cleanup")
        )))
    }
}

/// The complete snapshot the slot restores from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRef {
    /// Directory name inside the slot (`snapshot-<id>`). A `state.json` naming anything else (a
    /// path, `..`, another folder) is refused at load ([`is_snapshot_dir_name`]): restore reads
    /// its images from there and the next snapshot removes it.
    #[serde(deserialize_with = "snapshot_dir_name")]
    pub dir: String,
    /// RFC 3339 time the snapshot completed.
    pub created_at: String,
    /// sha256 of the recorded network state (`netstate.json`).
    pub netstate_sha256: String,
    /// The screen recorded before the checkpoint (`screen.png` in the snapshot folder), for a
    /// profile with a display; the pixel gate of restore/reset compares against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen: Option<crate::x11::PngArtifact>,
    /// The saved overlay upper (`upper/` in the snapshot folder): its tree digest
    /// ([`crate::evidence::tree_digest`]) at snapshot time. `None` in a snapshot taken by a
    /// netprobe before 0.1.0's upper hashing: the `snapshot-complete` gate then fails closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper: Option<crate::evidence::TreeDigest>,
    /// sha256 of the snapshot's `manifest.json` as written. `None`: as for `upper`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_sha256: Option<String>,
    /// Each checkpoint file's `stat` when its digest was recorded (sorted by name;
    /// [`super::gate::checkpoint_images::hashed_with_stats`]): while every file keeps it, the
    /// `snapshot-complete` gate proves the images without re-hashing them. `None` (a snapshot of
    /// an older netprobe, or a file changed during the hash): they are re-hashed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_stats: Option<Vec<super::gate::checkpoint_images::ImageStat>>,
}

/// The slot profile a slot was provisioned with (`--profile FILE` or the built-in default),
/// re-checked on every verb by the `profile-hash` gate like `config.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileRecord {
    /// The profile's `name`.
    pub name: String,
    /// The profile file (absolute), or `None` for the built-in default.
    pub source: Option<PathBuf>,
    /// Lower-case hex sha256 of the profile's exact bytes.
    pub sha256: String,
    /// The profile as parsed at provision (paths resolved).
    pub profile: crate::profile::Profile,
    /// True when provision got `--image` without `--profile`: the record is the built-in
    /// default (its `sha256`) with `image` replaced by the flags' image and without the embedded
    /// image's server facts (`network.guest_port`, its `tcp` check): such an image declares its
    /// server in `/etc/netprobe-guest-port`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub image_from_flags: bool,
}

/// `slot-N/state.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotState {
    /// [`STATE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Slot number.
    pub slot: u32,
    /// The ownership marker's id.
    pub owner_id: String,
    /// Current phase.
    pub phase: Phase,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// RFC 3339 time of the last write.
    pub updated_at: String,
    /// Container id used with the runtime.
    pub container_id: String,
    /// The runtime's state root (`--root`).
    pub runtime_root: PathBuf,
    /// cgroupsPath in config.json.
    pub cgroups_path: String,
    /// Runtime binary at provision.
    pub runtime: BinaryPin,
    /// CRIU binary at provision.
    pub criu: BinaryPin,
    /// How the probe gate was satisfied.
    pub probe_gate: ProbeGateRecord,
    /// Image and mounts (absent until mounted).
    pub image: Option<ImageState>,
    /// Overlay (absent until mounted).
    pub overlay: Option<OverlayState>,
    /// Holder identity (absent until started and proven): the `netprobe __holder` process that
    /// owns the slot's network namespace ([`crate::ns::Holder`], detached).
    pub holder: Option<ProcessIdentity>,
    /// The holder's network namespace cookie (`SO_NETNS_COOKIE`, [`crate::ns::netns_cookie_of`]),
    /// read at provision: unlike the inode number, never reused, so with the holder gone a
    /// process in a namespace of the recorded inode is in the slot's only if the cookie is this
    /// one. Absent in slots provisioned before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_netns_cookie: Option<u64>,
    /// sha256 of config.json (absent until written).
    pub config_sha256: Option<String>,
    /// Resources asked for in config.json (OCI units: µs, bytes).
    pub resources: Resources,
    /// The host's cgroup mode, the cgroup driver, CRIU's manage-cgroups mode and the last limit
    /// read-back (absent in states written before the driver was chosen: cgroupfs).
    #[serde(default)]
    pub cgroup: Option<super::resources::cgroups::SlotCgroup>,
    /// The slot profile (`None`: a slot provisioned with `--image` flags or by an older netprobe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileRecord>,
    /// The published guest ports (`--publish`, the profile's `[[network.publish]]`): the holder
    /// owns their listening sockets in the host's namespace. Empty: none (not written).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub published_ports: Vec<super::resources::published_ports::PublishedPort>,
    /// The complete snapshot in use.
    pub snapshot: Option<SnapshotRef>,
    /// Number of successful restores (restore + reset).
    pub restores: u32,
    /// The last verb and whether it succeeded.
    pub last_verb: Option<String>,
    /// Whether the last verb succeeded.
    pub last_ok: bool,
}

impl SlotState {
    /// Loads `state.json`, read as a recorded file ([`crate::evidence::read_recorded`]: a regular
    /// file, no symlink, bounded, never blocking).
    ///
    /// Errors: [`StateError::Read`] (missing, unreadable, not a regular file, too large),
    /// [`StateError::Parse`] (malformed).
    pub fn load(path: &Path) -> Result<SlotState, StateError> {
        let b = crate::evidence::read_recorded(path).map_err(|source| StateError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_slice(&b).map_err(|source| StateError::Parse {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Writes `state.json` atomically, updating `updated_at`.
    ///
    /// Errors: [`StateError::Write`].
    pub fn save(&mut self, path: &Path) -> Result<(), StateError> {
        self.updated_at = crate::evidence::now_rfc3339();
        let b = serde_json::to_vec_pretty(self).map_err(|source| StateError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        crate::evidence::replace_atomic(path, &b).map_err(|source| StateError::Write {
            path: path.to_path_buf(),
            source,
        })
    }

    /// [`SlotState::save`] unless `state.json` already holds this very state (only `updated_at`
    /// may differ), e.g. when the verb's last step saved it: one atomic write and its two
    /// `fsync`s fewer. An unreadable or different file is rewritten.
    ///
    /// Errors: I/O of the write.
    pub fn save_if_changed(&mut self, path: &Path) -> Result<(), StateError> {
        if let Ok(disk) = SlotState::load(path) {
            let mut same = self.clone();
            same.updated_at = disk.updated_at.clone();
            if same == disk {
                self.updated_at = disk.updated_at;
                return Ok(());
            }
        }
        self.save(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_dir_must_be_a_snapshot_folder_name() {
        for ok in [
            "snapshot-1",
            "snapshot-20261204T060558Z-3",
            "snapshot-a.b_c",
        ] {
            assert!(is_snapshot_dir_name(ok), "{ok}");
        }
        for bad in [
            "",
            "snapshot-",
            "snapshot-..",
            "snapshot-../x",
            "../../victim",
            "/tmp/victim",
            "upper-1",
            "snapshot-a/b",
        ] {
            assert!(!is_snapshot_dir_name(bad), "{bad}");
            let j = serde_json::json!({"dir": bad, "created_at": "t", "netstate_sha256": "x"});
            let e = serde_json::from_value::<SnapshotRef>(j).unwrap_err();
            assert!(e.to_string().contains("not a snapshot folder name"), "{e}");
        }
    }

    #[test]
    fn kinds_serialize_as_before_and_compare_with_text() {
        assert_eq!(serde_json::to_value(ImageKind::Qcow2).unwrap(), "qcow2");
        assert_eq!(ImageKind::of(None), "embedded");
        assert_eq!(
            ImageKind::of(Some(Path::new("/x/a.qcow2"))),
            ImageKind::Qcow2
        );
        assert_eq!(ImageKind::of(Some(Path::new("/x/dir"))), "directory");
        assert_eq!(
            serde_json::to_value(ProbeGateMode::Override).unwrap(),
            "override"
        );
        assert_eq!(ProbeGateMode::Evidence, "evidence");
    }

    #[test]
    fn phase_table() {
        use Phase::*;
        use VerbEnd::*;
        let gone = Failed {
            container_gone: true,
        };
        let alive = Failed {
            container_gone: false,
        };
        assert_eq!(
            Phase::after(Verb::Provision, Succeeded, Provisioning),
            Ready
        );
        assert_eq!(Phase::after(Verb::Snapshot, gone, Ready), SnapshotFailed);
        assert_eq!(Phase::after(Verb::Snapshot, alive, Running), Running);
        assert_eq!(Phase::after(Verb::Reset, alive, Running), RestoreFailed);
        assert_eq!(Phase::after(Verb::Cleanup, Succeeded, Running), Clean);
        assert_eq!(Phase::after(Verb::Status, Began, Ready), Ready);
    }

    #[test]
    fn runs_except_names_every_other_run_folder_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        for n in [
            "upper-3", "work-3", "upper-4", "work-4", "upper-12", "upper-x", "work-", "keep",
        ] {
            std::fs::create_dir(d.path().join(n)).unwrap();
        }
        let names: Vec<String> = OverlayState::runs_except(d.path(), 4)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["upper-12", "upper-3", "work-3"]);
        assert!(OverlayState::runs_except(&d.path().join("missing"), 1).is_empty());
    }

    #[test]
    fn overlay_options_are_recorded_and_older_states_mean_index_off_without_volatile() {
        let old: OverlayState =
            serde_json::from_str(r#"{"merged": "/s/rootfs", "run": 2, "mounted": true}"#).unwrap();
        assert_eq!(old.options, ["index=off"]);
        assert!(!old.volatile, "older states were mounted without volatile");
        let ov = OverlayState {
            options: vec!["index=on".into(), "nfs_export=on".into()],
            volatile: true,
            ..old
        };
        let j = serde_json::to_value(&ov).unwrap();
        assert_eq!(j["volatile"], true);
        assert_eq!(
            j["options"],
            serde_json::json!(["index=on", "nfs_export=on"])
        );
        assert_eq!(serde_json::from_value::<OverlayState>(j).unwrap(), ov);
    }
}
