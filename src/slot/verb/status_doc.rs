//! The `slot status` document as types ([`StatusDoc`], its `live` as [`Live`]): what
//! [`super::status`] builds and [`super::advice`] reads, written as
//! `evidence-schema/slot-state.schema.json` describes it (a unit test validates each kind).

use crate::slot::state::SlotState;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

/// The `slot status` document (schema `evidence-schema/slot-state.schema.json`). Printed
/// through a [`Value`], so its keys are in alphabetical order.
#[derive(Debug, Serialize)]
pub(crate) struct StatusDoc {
    /// [`crate::slot::state::STATE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `netprobe`.
    pub tool: &'static str,
    /// netprobe's version.
    pub tool_version: &'static str,
    /// The slot number.
    pub slot: u32,
    /// The slot folder.
    pub slot_dir: PathBuf,
    /// Whether the slot folder exists.
    pub exists: bool,
    /// Whether its ownership marker is proven.
    pub owned: bool,
    /// Whether another verb holds the slot lock.
    pub busy: bool,
    /// Why no verb can take the slot lock, if so.
    pub lock_error: Option<String>,
    /// `state.json`, when it was read.
    pub state: Option<SlotState>,
    /// Why `state.json` could not be read, if so.
    pub state_error: Option<String>,
    /// What is alive now.
    pub live: Live,
    /// Whether the snapshot recorded is complete.
    pub snapshot: SnapshotNow,
    /// Interrupted snapshots' folders (`snapshot.tmp-*`).
    pub stale_snapshot_tmp: Vec<String>,
    /// How many journal entries can be read.
    pub journal_entries: usize,
    /// The journal's last entry.
    pub last_journal_entry: Option<crate::slot::record::journal::JournalEntry>,
    /// The slot's declared differences.
    pub declared_differences: Vec<String>,
    /// What to do next, when it is not the obvious verb.
    pub advice: Option<String>,
}

/// `snapshot`: whether the snapshot `state.json` records is complete, and the detail.
#[derive(Debug, Serialize)]
pub(crate) struct SnapshotNow {
    /// The `snapshot-complete` check passes now.
    pub complete: bool,
    /// Its detail, or why it is not known.
    pub detail: String,
}

/// `live`: what is alive now, from `state.json` ([`LiveFacts`]), or from what is left when it
/// cannot be read ([`UnrecordedLive`]), or nothing for a slot that does not exist (`{}`).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum Live {
    /// `state.json` was read.
    Recorded(Box<LiveFacts>),
    /// `state.json` cannot be read.
    Unrecorded(UnrecordedLive),
    /// No slot: an empty object.
    NoSlot {},
}

/// A fact proven now or not (`proven`, `detail`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ProvenNow {
    /// Whether it is proven.
    pub proven: bool,
    /// The gate's detail.
    pub detail: String,
}

/// The holder (`alive`, `detail`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct HolderNow {
    /// Whether it is the recorded process, alive.
    pub alive: bool,
    /// What proves it, or why not.
    pub detail: String,
}

/// The runtime's word on the container (`status`: its state, `absent` or `unknown`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ContainerNow {
    /// `runtime state`'s status, `absent` or `unknown`.
    pub status: String,
    /// The init pid, or why it is not known.
    pub detail: String,
}

/// None left (`none`), and the check's detail.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct NoneLeft {
    /// Whether none is left.
    pub none: bool,
    /// The check's detail.
    pub detail: String,
}

/// Processes a lost container left: in its cgroup and beside the holder in the slot's netns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct LeftNow {
    /// The `cgroup-empty` check.
    pub cgroup: NoneLeft,
    /// The `netns-empty` check.
    pub netns: NoneLeft,
}

/// The holder's sealed copies proven now (`None`: none recorded).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct SealedNow {
    /// The runtime's.
    pub runtime: Option<ProvenNow>,
    /// CRIU's.
    pub criu: Option<ProvenNow>,
}

/// `state.json`'s `overlay.volatile` beside the mount table's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct VolatileNow {
    /// What `state.json` records.
    pub recorded: bool,
    /// What the mount table says.
    pub mounted: bool,
    /// Whether they agree.
    pub agrees: bool,
}

/// `live` of a slot whose `state.json` was read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct LiveFacts {
    /// The running container's cgroup limits read back ([`crate::slot::resources::cgroups::limits_now`]).
    pub cgroup_limits: Value,
    /// The holder.
    pub holder: HolderNow,
    /// CRIU's network lock in the holder's netns ([`crate::slot::resources::criu_net_lock::look`]).
    pub criu_network_lock: Option<crate::slot::resources::criu_net_lock::LockNow>,
    /// The `image-unchanged` check, where it is cheap.
    pub image_unchanged: Option<ProvenNow>,
    /// The holder's sealed copies.
    pub sealed_copies: SealedNow,
    /// The container.
    pub container: ContainerNow,
    /// What a lost container left (only when the runtime has none and no verb runs).
    pub left_processes: Option<LeftNow>,
    /// Whether the overlay is mounted.
    pub overlay_mounted: bool,
    /// The overlay's `volatile`, recorded and mounted.
    pub overlay_volatile: Option<VolatileNow>,
    /// Whether the qcow2's filesystem is mounted.
    pub image_mounted: bool,
    /// Whether the FUSE export's daemon runs.
    pub fuse_export_running: bool,
    /// Whether the loop device is attached to the export.
    pub loop_attached: bool,
    /// Each published port now ([`crate::slot::gate::publish_gates::live`]).
    pub published_ports: Value,
}

/// The runtime's state entry of the slot's container (`path`, `exists`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct RuntimeEntryNow {
    /// `<slot>/runc-root/<container id>`.
    pub path: String,
    /// Whether it exists.
    pub exists: bool,
}

/// `live` of a slot whose `state.json` cannot be read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct UnrecordedLive {
    /// The holder `holder.json` records.
    pub holder: HolderNow,
    /// Every mount point under the slot folder.
    pub mounts_under_slot: Vec<String>,
    /// The container's cgroup folders still there.
    pub cgroup_dirs: Vec<String>,
    /// The runtime's state entry of the container.
    pub runtime_state_entry: Option<RuntimeEntryNow>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slot::gate::pure_checks::tests::fixture;
    use crate::slot::state::STATE_SCHEMA_VERSION;

    fn schema() -> jsonschema::Validator {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("evidence-schema/slot-state.schema.json"),
        )
        .unwrap();
        jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
    }

    fn doc(st: Option<SlotState>, state_error: Option<String>, live: Live) -> StatusDoc {
        let exists = !matches!(live, Live::NoSlot {});
        StatusDoc {
            schema_version: STATE_SCHEMA_VERSION,
            tool: "netprobe",
            tool_version: env!("CARGO_PKG_VERSION"),
            slot: 7,
            slot_dir: "/var/lib/np/slot-7".into(),
            exists,
            owned: exists,
            busy: false,
            lock_error: None,
            state: st,
            state_error,
            live,
            snapshot: SnapshotNow {
                complete: false,
                detail: "no slot".into(),
            },
            stale_snapshot_tmp: vec!["snapshot.tmp-1".into()],
            journal_entries: 1,
            last_journal_entry: Some(crate::slot::record::journal::JournalEntry {
                at: "2026-01-01T00:00:00.000Z".into(),
                pid: 42,
                verb: "provision".into(),
                event: crate::slot::JournalEvent::End,
                ok: true,
                detail: "provisioned".into(),
                evidence: Some("0001-provision".into()),
                verb_sha256: None,
            }),
            declared_differences: match exists {
                true => vec!["a difference".into()],
                false => Vec::new(),
            },
            advice: None,
        }
    }

    /// The typed document of each kind of slot (state read, state unreadable, no slot)
    /// validates against `evidence-schema/slot-state.schema.json`.
    #[test]
    fn status_documents_validate_against_the_slot_state_schema() {
        let (_d, mut st) = fixture();
        // The unit fixture's owner id is a word; a slot's is hex.
        st.owner_id = "0123abcd".into();
        let said = |proven| ProvenNow {
            proven,
            detail: "detail".into(),
        };
        let facts = LiveFacts {
            cgroup_limits: Value::Null,
            holder: HolderNow {
                alive: true,
                detail: "pid 1".into(),
            },
            criu_network_lock: Some(crate::slot::resources::criu_net_lock::LockNow {
                status: crate::slot::resources::criu_net_lock::LockPresence::Absent,
                detail: "none".into(),
            }),
            image_unchanged: Some(said(false)),
            sealed_copies: SealedNow {
                runtime: Some(said(true)),
                criu: None,
            },
            container: ContainerNow {
                status: "absent".into(),
                detail: "runtime state: does not exist".into(),
            },
            left_processes: Some(LeftNow {
                cgroup: NoneLeft {
                    none: true,
                    detail: "none".into(),
                },
                netns: NoneLeft {
                    none: false,
                    detail: "pid 9".into(),
                },
            }),
            overlay_mounted: true,
            overlay_volatile: Some(VolatileNow {
                recorded: true,
                mounted: false,
                agrees: false,
            }),
            image_mounted: false,
            fuse_export_running: false,
            loop_attached: false,
            published_ports: serde_json::json!([]),
        };
        let unrecorded = UnrecordedLive {
            holder: HolderNow {
                alive: false,
                detail: "gone".into(),
            },
            mounts_under_slot: vec!["/var/lib/np/slot-7/rootfs".into()],
            cgroup_dirs: Vec::new(),
            runtime_state_entry: Some(RuntimeEntryNow {
                path: "/var/lib/np/slot-7/runc-root/netprobe-slot-7".into(),
                exists: false,
            }),
        };
        let v = schema();
        for d in [
            doc(Some(st), None, Live::Recorded(Box::new(facts))),
            doc(None, Some("missing".into()), Live::Unrecorded(unrecorded)),
            doc(None, None, Live::NoSlot {}),
        ] {
            let j = serde_json::to_value(&d).unwrap();
            let errors: Vec<String> = v.iter_errors(&j).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{errors:#?}\n{j:#}");
        }
        // No slot: `live` is an empty object.
        let j = serde_json::to_value(doc(None, None, Live::NoSlot {})).unwrap();
        assert_eq!(j["live"], serde_json::json!({}));
    }
}
