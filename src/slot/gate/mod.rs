//! The gate framework, as data: every gate is a [`GateId`] that owns its stable name, the fact
//! it must prove (one sentence) and its class (the exit class when it fails); every verb has one
//! constant list of the gates it must pass before its first destructive step
//! ([`GateId::required_before`]). An evaluated gate is a [`Gate`] in the verb's [`GateLog`]
//! (written to `gates.json`). Any unproven blocking gate fails the verb closed before the
//! destructive step it protects.
//!
//! The gates' own evaluation lives in this folder's modules: the pure checks
//! ([`pure_checks`]), the gates several verbs share ([`shared_gates`]), provision's binary and
//! probe gates, the image and checkpoint images, network state and fidelity, published ports,
//! display and readiness.

pub mod checkpoint_images;
pub mod display_gates;
pub mod guest_net;
pub mod image_manifest;
pub(super) mod image_unchanged;
pub(super) mod net_fidelity;
pub(super) mod provision_gates;
pub(super) mod publish_gates;
pub mod pure_checks;
pub(super) mod readiness;
pub(super) mod readiness_screen;
pub(super) mod shared_gates;

use crate::exit::ExitClass;
use crate::slot::Verb;
use crate::slot::error::SlotError;
use serde::{Deserialize, Serialize};

/// What a gate observed: `Ok(detail)` when its fact is proven, `Err(detail)` when it is not
/// (anything that could not be read counts as not proven). Not an error type: the detail is
/// evidence, written to `gates.json` either way.
pub type Observed = Result<String, String>;

/// The detail of a fact a gate could not prove: evidence written to `gates.json`, not a
/// failure of netprobe's own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotProven(pub String);

impl From<String> for NotProven {
    fn from(detail: String) -> Self {
        NotProven(detail)
    }
}

impl From<NotProven> for String {
    fn from(n: NotProven) -> Self {
        n.0
    }
}

impl std::ops::Deref for NotProven {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

/// An observation whose proof also yields a value (`T`, with the detail in it, e.g. the
/// snapshot folder and the detail); [`NotProven`] with the detail when not proven.
pub type ObservedWith<T> = Result<T, NotProven>;

/// The exit class of a gate that fails: `gate` (exit 1) or `host` (exit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateClass {
    /// A slot fact could not be proven (exit 1).
    Gate,
    /// The host refused: a CRIU config file, an unrecognised binary (exit 3).
    Host,
}

impl GateClass {
    /// The exit class of a failure of this gate class.
    pub fn exit_class(self) -> ExitClass {
        match self {
            GateClass::Gate => ExitClass::Gate,
            GateClass::Host => ExitClass::HostRefused,
        }
    }
}

/// Which fact the state-dir gate proves (shared by every verb).
const STATE_DIR_FACT: &str =
    "the state directory is ours (not a symlink, our uid, not group/world-writable, marked)";
const BINARY_FOUND_FACT: &str = "the binary exists, is recognised and is hashed at provision";

macro_rules! gates {
    ($($(#[$doc:meta])* $id:ident => ($name:literal, $class:ident, $fact:expr),)*) => {
        /// Every gate of the slot driver. The name is what `gates.json` and error messages
        /// carry; two ids share a name only where one name covers two facts (a binary found and
        /// hashed at provision vs. a binary that still has its recorded hash).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum GateId { $($(#[$doc])* $id,)* }

        impl GateId {
            /// Every gate id, in declaration order.
            pub const ALL: &'static [GateId] = &[$(GateId::$id,)*];

            /// The stable gate name, e.g. `holder-identity`.
            pub fn name(self) -> &'static str {
                match self { $(GateId::$id => $name,)* }
            }

            /// The fact the gate must prove, as one sentence.
            pub fn fact(self) -> &'static str {
                match self { $(GateId::$id => $fact,)* }
            }

            /// The class of the gate's failure.
            pub fn class(self) -> GateClass {
                match self { $(GateId::$id => GateClass::$class,)* }
            }
        }
    };
}

gates! {
    /// The state directory is safe to use.
    StateDir => ("state-dir", Gate, STATE_DIR_FACT),
    /// The slot directory carries netprobe's ownership marker.
    OwnershipMarker => ("ownership-marker", Gate, "the slot directory carries our ownership marker"),
    /// The verb holds the slot's exclusive lock.
    SlotLock => ("slot-lock", Gate, "this verb holds the slot's exclusive lock"),
    /// `state.json` is readable and names this slot.
    SlotState => ("slot-state", Gate, "state.json is readable and names this slot"),
    /// The slot was not cleaned up.
    SlotNotClean => ("slot-not-clean", Gate, "the slot has not been cleaned up (a clean slot has nothing left to drive)"),
    /// provision: the slot directory did not exist.
    SlotFresh => ("slot-fresh", Gate, "the slot directory did not exist (fresh state only)"),
    /// No CRIU configuration file is present.
    CriuConfigAbsent => ("criu-config-absent", Host, "no CRIU configuration file is present (they silently change checkpoint behaviour)"),
    /// provision: the runtime binary exists and is recognised.
    RuntimeBinaryFound => ("runtime-binary", Host, BINARY_FOUND_FACT),
    /// provision: the CRIU binary exists and is recognised.
    CriuBinaryFound => ("criu-binary", Host, BINARY_FOUND_FACT),
    /// Later verbs: the runtime binary still has the sha256 recorded at provision.
    RuntimeBinaryPinned => ("runtime-binary", Gate, "the runtime binary has the sha256 recorded at provision"),
    /// Later verbs: the CRIU binary still has the sha256 recorded at provision.
    CriuBinaryPinned => ("criu-binary", Gate, "the CRIU binary has the sha256 recorded at provision"),
    /// provision: probe evidence proves the holder path for these binaries.
    ProbeVerdict => ("probe-verdict", Gate, "a netprobe evidence folder proves the holder path for these runtime and CRIU binaries (it reproduces under netprobe verify, every file hashed; verdict runtime-empty-ns or runtime-preserves-netns, external-netns passed, same sha256)"),
    /// provision: the qcow2 image has the pinned sha256.
    ImageSha256 => ("image-sha256", Gate, "the qcow2 image has the pinned sha256"),
    /// provision: the image directory exists.
    ImagePresent => ("image-present", Gate, "the image directory exists"),
    /// snapshot/restore/reset: the image under the container is the one provision recorded.
    ImageUnchanged => ("image-unchanged", Gate, "the image under the container is the one provision recorded: a directory image's metadata manifest (path, type, mode, owner, size, mtime, ctime, symlink target, device number of every entry) walked again equals the recorded one; a qcow2 has the stat (device, inode, size, mtime, ctime) it had when hashed to its pin"),
    /// The holder is the recorded process.
    HolderIdentity => ("holder-identity", Gate, "the holder is alive with the recorded pid, start time and netns inode"),
    /// provision: the holder's netns is not netprobe's.
    HolderPrivateNetns => ("holder-private-netns", Gate, "the holder's network namespace is not netprobe's"),
    /// `config.json` is unchanged since provision and names the holder's netns.
    ConfigHash => ("config-hash", Gate, "config.json has the sha256 recorded at provision"),
    /// No container of the slot exists (before create or restore).
    ContainerAbsent => ("container-absent", Gate, "no container with this slot's id exists under its runtime root (no <root>/<id> entry, or runtime state)"),
    /// snapshot: the container is running.
    ContainerRunning => ("container-running", Gate, "the container is running (runtime state)"),
    /// The container was stopped and is proven gone.
    ContainerStopped => ("container-stopped", Gate, "the container is proven gone (no <root>/<id> entry under its runtime root, or runtime state)"),
    /// snapshot: the running container is one a verb brought up through every gate.
    ContainerGated => ("container-gated", Gate, "the container to checkpoint is one a provision, restore or reset brought up through every gate (phase ready or running, or a snapshot of it that did not finish): a restore that did not pass its gates leaves a container whose state is unproven"),
    /// snapshot: the rootfs overlay is mounted.
    OverlayMounted => ("overlay-mounted", Gate, "the container rootfs overlay is mounted, with the upper state.json records"),
    /// `lo` is UP with 127.0.0.1/8 in the holder's netns.
    LoUp127 => ("lo-up-127", Gate, "lo is UP with 127.0.0.1/8 in the container's network namespace"),
    /// snapshot: no part of CRIU's network lock is in the namespace whose state is recorded.
    NoCriuLock => ("no-criu-lock", Gate, "no part of CRIU's network lock is in the container's network namespace (a checkpoint or restore that did not finish leaves it, and a snapshot would record it)"),
    /// The guest server answers 200.
    GuestHttp => ("guest-http", Gate, "the guest server answers GET / with 200 on 127.0.0.1:<port> from inside the namespace"),
    /// provision: a profile's `tcp` readiness check: the port accepts a connection.
    GuestTcp => ("guest-tcp", Gate, "a TCP connection to 127.0.0.1:<port> from inside the namespace is accepted (the profile's tcp readiness check)"),
    /// The container runs in the holder's netns.
    ContainerInHolderNetns => ("container-in-holder-netns", Gate, "the container runs (runtime state) in the holder's network namespace"),
    /// provision: the host has usable cgroups and the cgroup driver fits it.
    CgroupHost => ("cgroup-host", Host, "the host has the cpu and memory cgroup controllers (v1 or v2) and the cgroup driver fits it (systemd only where systemd is pid 1)"),
    /// The cgroup limits read back equal config.json's (provision, restore, reset; and at
    /// snapshot before the checkpoint).
    CgroupLimits => ("cgroup-limits", Gate, "cpu quota/period and memory limit/swap read back from the container's cgroup files (v1 or v2, every file named) equal config.json"),
    /// systemd driver: the scope unit holds the limits and the container's cgroup.
    CgroupUnitLimits => ("cgroup-unit-limits", Gate, "the systemd scope unit's CPUQuotaPerSecUSec, MemoryMax and MemorySwapMax equal config.json and its ControlGroup is the container's 0:: cgroup"),
    /// cleanup: the scope and the container's cgroup directories are gone.
    CgroupReleased => ("cgroup-released", Gate, "the container's cgroup directories are gone and (systemd driver) its scope unit is gone"),
    /// The slot profile is unchanged since provision.
    ProfileHash => ("profile-hash", Gate, "the slot profile has the sha256 recorded at provision"),
    /// provision: the display answers with the profile's geometry and depth.
    DisplayGeometry => ("display-geometry", Gate, "the guest's X display answers with the profile's width, height and depth"),
    /// snapshot: two screenshots 250 ms apart are equal.
    ScreenQuiescent => ("screen-quiescent", Gate, "two screenshots 250 ms apart are pixel-equal (the screen is still)"),
    /// snapshot: the profile's input region of the reference screen is drawn (not one colour).
    AppDrawn => ("app-drawn", Gate, "the profile's display.input region of the snapshot's screen holds more than one colour (the application's window is drawn there, not the bare background an unmapped window leaves)"),
    /// provision: a profile's `active-window` readiness check: the focused window has its name.
    ActiveWindow => ("active-window", Gate, "the window the window manager says has the focus (EWMH _NET_ACTIVE_WINDOW) has the WM_NAME the profile's active-window readiness check names"),
    /// provision: a profile's `app-drawn` readiness check, waited for on the live screen.
    AppShown => ("app-shown", Gate, "the profile's display.input region of the live screen holds more than one colour (the profile's app-drawn readiness check: what the snapshot's app-drawn gate needs, waited for)"),
    /// provision: a profile's `screen-quiescent` readiness check.
    ScreenSettled => ("screen-settled", Gate, "no pixel of the screen changed for the profile's still_ms, screenshots 250 ms apart (the profile's screen-quiescent readiness check: what the snapshot's screen-quiescent gate needs, waited for)"),
    /// restore/reset: the screen equals the snapshot's.
    PixelsEqual => ("pixels-equal", Gate, "the screen of the restored container (by `restore`, or by `reset`'s restore) equals the snapshot's pixel for pixel"),
    /// restore/reset: a key through XTEST changes the application's region.
    InputReachesApp => ("input-reaches-app", Gate, "a key press sent through XTEST changes the application's region"),
    /// restore/reset: a complete snapshot exists.
    SnapshotComplete => ("snapshot-complete", Gate, "a complete snapshot exists (manifest and hashes verified)"),
    /// restore/reset: no process is left in the container's cgroup (the runtime has none).
    CgroupEmpty => ("cgroup-empty", Gate, "no process runs in the container's cgroup, in any hierarchy (the runtime having no container does not prove its processes gone)"),
    /// restore/reset, and cleanup before it unmounts: no process but the holder is in the
    /// slot's network namespace.
    NetnsEmpty => ("netns-empty", Gate, "no process but the holder is in the slot's network namespace (a process moved out of the container's cgroup still shares it)"),
    /// restore/reset: the new overlay upper, copied from the snapshot, has the saved upper's
    /// tree digest (checked before it is mounted).
    UpperCopy => ("upper-copy", Gate, "the overlay upper copied from the snapshot has the saved upper's tree sha256 (entries, modes, owners, contents, xattrs), before it is mounted"),
    /// restore/reset: the network state is byte-equal to the recorded one.
    NetFidelity => ("net-fidelity", Gate, "the network state after restore is byte-equal to the one recorded at snapshot (full capture: netfilter, address flags), with no part of CRIU's network lock in it"),
    /// provision: every published host port could be bound (before anything is created).
    HostPortsFree => ("host-ports-free", Host, "every published host port is free and was bound by netprobe before anything was created (a taken port is named with the process listening on it)"),
    /// provision, restore, reset: a request through each published host port reaches the guest.
    PublishedPorts => ("published-ports", Gate, "a request through each published host port, from the host's namespace, reaches the guest (its HTTP check answers, or the connection stays open 300 ms)"),
    /// snapshot: the holder stopped accepting and no forwarded connection is left.
    PublishedPortsQuiesced => ("published-ports-quiesced", Gate, "the holder stopped accepting on the published ports and no TCP connection on a guest port is left in the slot's namespace but listeners and TIME-WAIT (the runtime checkpoints without --tcp-established)"),
    /// cleanup: everything is released.
    Released => ("released", Gate, "every resource of the slot is released"),
}

/// The gates every verb on an existing slot passes on entry (before anything else).
const ENTER_EXISTING: [GateId; 5] = [
    GateId::StateDir,
    GateId::OwnershipMarker,
    GateId::SlotLock,
    GateId::SlotState,
    GateId::SlotNotClean,
];

/// The binaries, `config.json` and holder, re-proven by snapshot, restore and reset.
const COMMON: [GateId; 6] = [
    GateId::CriuConfigAbsent,
    GateId::RuntimeBinaryPinned,
    GateId::CriuBinaryPinned,
    GateId::ConfigHash,
    GateId::ProfileHash,
    GateId::HolderIdentity,
];

macro_rules! concat_gates {
    ($($part:expr),* ; $n:expr) => {{
        let mut out = [GateId::StateDir; $n];
        let mut i = 0;
        $(
            let part: &[GateId] = &$part;
            let mut j = 0;
            while j < part.len() {
                out[i] = part[j];
                i += 1;
                j += 1;
            }
        )*
        assert!(i == $n);
        out
    }};
}

/// provision: before the slot directory is created (the first thing it creates).
pub const PROVISION_GATES: [GateId; 6] = [
    GateId::StateDir,
    GateId::CriuConfigAbsent,
    GateId::RuntimeBinaryFound,
    GateId::CriuBinaryFound,
    GateId::ProbeVerdict,
    GateId::CgroupHost,
];
/// provision: before `runtime create` (the container is started only after these).
pub const PROVISION_CREATE_GATES: [GateId; 4] = [
    GateId::HolderIdentity,
    GateId::HolderPrivateNetns,
    GateId::ConfigHash,
    GateId::ContainerAbsent,
];
/// snapshot: before the phase changes and the checkpoint stops the container.
pub const SNAPSHOT_GATES: [GateId; 15] = concat_gates!(
    ENTER_EXISTING, COMMON, [GateId::ContainerRunning, GateId::ContainerGated, GateId::ImageUnchanged, GateId::OverlayMounted]; 15);
/// snapshot: before the checkpoint itself (network state recorded first).
pub const CHECKPOINT_GATES: [GateId; 3] =
    [GateId::LoUp127, GateId::NoCriuLock, GateId::CgroupLimits];
/// restore: before the phase changes, the overlay is reset and the runtime restores.
pub const RESTORE_GATES: [GateId; 16] = concat_gates!(
    ENTER_EXISTING, COMMON, [GateId::SnapshotComplete, GateId::ImageUnchanged, GateId::ContainerAbsent, GateId::CgroupEmpty, GateId::NetnsEmpty]; 16);
/// reset: before the running container is killed.
pub const RESET_GATES: [GateId; 13] =
    concat_gates!(ENTER_EXISTING, COMMON, [GateId::SnapshotComplete, GateId::ImageUnchanged]; 13);
/// cleanup: before the phase changes and the container is stopped. The runtime binary is
/// blocking (cleanup runs it); CRIU config, CRIU binary and config hash are recorded, not
/// blocking: they protect no step cleanup takes.
/// A clean slot may be cleaned up again (nothing left to release): no `slot-not-clean`.
pub const CLEANUP_GATES: [GateId; 8] = concat_gates!([
    GateId::StateDir,
    GateId::OwnershipMarker,
    GateId::SlotLock,
    GateId::SlotState,
    GateId::CriuConfigAbsent,
    GateId::RuntimeBinaryPinned,
    GateId::CriuBinaryPinned,
    GateId::ConfigHash,
]; 8);
/// cleanup: before anything is unmounted (nothing is unmounted under a live container, nor
/// under a process of one the runtime lost track of, still in the slot's network namespace).
pub const UNMOUNT_GATES: [GateId; 2] = [GateId::ContainerStopped, GateId::NetnsEmpty];

impl GateId {
    /// The gates `verb` must have passed before its first destructive step (for `reset`, the
    /// kill of the running container; for `status`, none: it changes nothing).
    pub fn required_before(verb: Verb) -> &'static [GateId] {
        match verb {
            Verb::Provision => &PROVISION_GATES,
            Verb::Snapshot => &SNAPSHOT_GATES,
            Verb::Restore => &RESTORE_GATES,
            Verb::Reset => &RESET_GATES,
            Verb::Cleanup => &CLEANUP_GATES,
            Verb::Status => &[],
        }
    }
}

impl GateId {
    /// Where the gate is evaluated: the function(s) that record its [`Observed`], as
    /// `FILE::FUNCTION` with FILE relative to `src/` (several separated by `, `). The generated
    /// gate table of `docs/REFERENCE.md` shows it; a unit test of `crate::reference` checks
    /// that each file defines that function.
    pub fn evaluated_by(self) -> &'static str {
        match self {
            GateId::StateDir => {
                "slot/record/verb_run.rs::enter_existing, slot/verb/provision.rs::create_slot_dir"
            }
            GateId::OwnershipMarker => "slot/record/verb_run.rs::enter_slot",
            GateId::SlotLock => "slot/record/verb_run.rs::enter_slot",
            GateId::SlotState => "slot/mod.rs::with_existing",
            GateId::SlotNotClean => "slot/mod.rs::with_existing",
            GateId::SlotFresh => "slot/verb/provision.rs::create_slot_dir",
            GateId::CriuConfigAbsent => "slot/gate/shared_gates.rs::criu_config_gate",
            GateId::RuntimeBinaryFound => "slot/gate/provision_gates.rs::binary_gates",
            GateId::CriuBinaryFound => "slot/gate/provision_gates.rs::binary_gates",
            GateId::RuntimeBinaryPinned => "slot/gate/shared_gates.rs::binary_gates",
            GateId::CriuBinaryPinned => "slot/gate/shared_gates.rs::binary_gates",
            GateId::ProbeVerdict => "slot/gate/provision_gates.rs::probe_gate",
            GateId::ImageSha256 => {
                "slot/profile_record.rs::load_gate, slot/verb/provision.rs::image_gate"
            }
            GateId::ImagePresent => {
                "slot/profile_record.rs::load_gate, slot/verb/provision.rs::image_gate"
            }
            GateId::ImageUnchanged => {
                "slot/verb/snapshot.rs::snapshot, slot/verb/restore.rs::gates"
            }
            GateId::HolderIdentity => "slot/gate/pure_checks.rs::holder",
            GateId::HolderPrivateNetns => "slot/verb/provision.rs::start_holder",
            GateId::ConfigHash => "slot/gate/pure_checks.rs::config_hash",
            GateId::ContainerAbsent => {
                "slot/verb/provision.rs::start_container, slot/verb/restore.rs::gates"
            }
            GateId::ContainerRunning => "slot/verb/snapshot.rs::snapshot",
            GateId::ContainerStopped => "slot/gate/shared_gates.rs::stop_container_proven_from",
            GateId::ContainerGated => "slot/verb/snapshot.rs::snapshot",
            GateId::OverlayMounted => "slot/verb/snapshot.rs::snapshot",
            GateId::LoUp127 => "slot/gate/shared_gates.rs::lo_gate",
            GateId::NoCriuLock => {
                "slot/verb/snapshot.rs::checkpoint, slot/resources/criu_net_lock.rs::before_restore"
            }
            GateId::GuestHttp => {
                "slot/gate/shared_gates.rs::guest_http_gate, slot/gate/readiness.rs::run_checks"
            }
            GateId::GuestTcp => "slot/gate/readiness.rs::run_checks",
            GateId::ContainerInHolderNetns => "slot/gate/shared_gates.rs::ready_gates",
            GateId::CgroupHost => "slot/resources/cgroups.rs::provision_gate",
            GateId::CgroupLimits => {
                "slot/resources/cgroups.rs::limits_gates, slot/resources/cgroups.rs::snapshot_limits_gate"
            }
            GateId::CgroupUnitLimits => "slot/resources/cgroups.rs::unit_gate",
            GateId::CgroupReleased => "slot/resources/cgroups.rs::cleanup",
            GateId::ProfileHash => "slot/gate/shared_gates.rs::common_gates",
            GateId::DisplayGeometry => {
                "slot/gate/display_gates.rs::provision_gate, slot/gate/readiness.rs::run_checks"
            }
            GateId::ScreenQuiescent => "slot/gate/display_gates.rs::snapshot_gate",
            GateId::AppDrawn => "slot/gate/display_gates.rs::snapshot_gate",
            GateId::ActiveWindow => "slot/gate/readiness_screen.rs::gate",
            GateId::AppShown => "slot/gate/readiness_screen.rs::gate",
            GateId::ScreenSettled => "slot/gate/readiness_screen.rs::gate",
            GateId::PixelsEqual => "slot/gate/display_gates.rs::restored_gates",
            GateId::InputReachesApp => "slot/gate/display_gates.rs::input_gate",
            GateId::SnapshotComplete => "slot/gate/pure_checks.rs::snapshot_complete",
            GateId::CgroupEmpty => "slot/resources/leftover_procs.rs::no_container_procs",
            GateId::NetnsEmpty => "slot/resources/leftover_procs.rs::no_netns_strangers",
            GateId::UpperCopy => "slot/verb/reset_upper.rs::upper_copy_gate",
            GateId::NetFidelity => "slot/verb/restore.rs::net_fidelity",
            GateId::HostPortsFree => "slot/verb/provision.rs::publish_gate",
            GateId::PublishedPorts => "slot/gate/publish_gates.rs::published_gate",
            GateId::PublishedPortsQuiesced => "slot/gate/publish_gates.rs::quiesce_gate",
            GateId::Released => "slot/verb/cleanup.rs::cleanup",
        }
    }
}

/// One evaluated gate, as written to `gates.json` in the verb's evidence folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gate {
    /// Stable gate name ([`GateId::name`]), e.g. `ownership-marker`, `net-fidelity`.
    pub name: String,
    /// The fact the gate must prove ([`GateId::fact`]).
    pub fact: String,
    /// True only when the fact was proven. Anything that could not be read is `false`.
    pub proven: bool,
    /// What was observed (values, paths, hashes).
    pub detail: String,
    /// True when an unproven gate stops the verb (always, except facts recorded by `cleanup`
    /// and `status` that protect no step those verbs take).
    pub blocking: bool,
    /// Exit class on failure ([`GateId::class`]): `gate` (exit 1) or `host` (exit 3).
    pub class: GateClass,
}

/// The gates evaluated so far by one verb, in order.
#[derive(Debug, Default, Clone, Serialize)]
pub struct GateLog {
    /// The gates, in evaluation order.
    pub gates: Vec<Gate>,
}

impl GateLog {
    /// Records blocking gate `id` with its result (`Ok(detail)` proven, `Err(detail)` not).
    ///
    /// Errors: a [`SlotError`] naming `slot`, the gate, its fact and the detail, with the
    /// gate's exit class ([`GateId::class`]), when not proven.
    pub fn check(&mut self, slot: &str, id: GateId, r: Observed) -> Result<(), SlotError> {
        match r {
            Ok(detail) => {
                self.push(id, true, detail, true);
                Ok(())
            }
            Err(detail) => Err(self.fail(slot, id, detail)),
        }
    }

    /// Records blocking gate `id` as not proven with `detail` and returns its error.
    pub fn fail(&mut self, slot: &str, id: GateId, detail: String) -> SlotError {
        let e = SlotError::gate_failed(slot, id, &detail);
        self.push(id, false, detail, true);
        e
    }

    /// Records gate `id` as a non-blocking fact (used where the fact protects no step the verb
    /// takes). Never fails.
    pub fn record(&mut self, id: GateId, r: Observed) {
        let (proven, detail) = split(r);
        self.push(id, proven, detail, false);
    }

    fn push(&mut self, id: GateId, proven: bool, detail: String, blocking: bool) {
        self.gates.push(Gate {
            name: id.name().into(),
            fact: id.fact().into(),
            proven,
            detail,
            blocking,
            class: id.class(),
        });
    }

    /// The last evaluation of the gate named like `id`, if any.
    pub fn get(&self, id: GateId) -> Option<&Gate> {
        self.gates.iter().rev().find(|g| g.name == id.name())
    }

    /// The first of `required` that has not been evaluated yet, or evaluated as a blocking gate
    /// and not proven (a non-blocking record counts as evaluated).
    pub fn missing(&self, required: &[GateId]) -> Option<GateId> {
        required.iter().copied().find(|id| {
            !self
                .gates
                .iter()
                .any(|g| g.name == id.name() && g.fact == id.fact() && (g.proven || !g.blocking))
        })
    }

    /// True when every blocking gate evaluated so far is proven.
    pub fn all_proven(&self) -> bool {
        self.gates.iter().filter(|g| g.blocking).all(|g| g.proven)
    }
}

fn split(r: Observed) -> (bool, String) {
    match r {
        Ok(d) => (true, d),
        Err(d) => (false, d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_own_one_sentence_and_names_are_kebab_case() {
        for id in GateId::ALL {
            let n = id.name();
            assert!(
                n.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{n}"
            );
            assert!(!id.fact().is_empty());
        }
        // Only the binary gates share a name (found at provision vs. pinned later).
        let mut names: Vec<&str> = GateId::ALL.iter().map(|g| g.name()).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(before - names.len(), 2);
        assert_eq!(GateId::ALL.len(), 50);
    }

    #[test]
    fn profile_hash_is_reproven_by_every_verb_on_a_running_slot() {
        for v in [Verb::Snapshot, Verb::Restore, Verb::Reset] {
            assert!(
                GateId::required_before(v).contains(&GateId::ProfileHash),
                "{v:?}"
            );
        }
    }

    #[test]
    fn image_unchanged_is_reproven_before_every_destructive_step_on_a_running_slot() {
        for v in [Verb::Snapshot, Verb::Restore, Verb::Reset] {
            assert!(
                GateId::required_before(v).contains(&GateId::ImageUnchanged),
                "{v:?}"
            );
        }
        assert!(!CLEANUP_GATES.contains(&GateId::ImageUnchanged));
    }

    #[test]
    fn failing_gate_names_fact_detail_and_class() {
        let mut log = GateLog::default();
        assert!(log.check("3", GateId::SlotLock, Ok("held".into())).is_ok());
        let e = log
            .check(
                "3",
                GateId::CriuConfigAbsent,
                Err("/etc/criu/default.conf".into()),
            )
            .unwrap_err();
        assert_eq!(e.exit_code(), 3);
        let s = e.to_string();
        assert!(
            s.contains("criu-config-absent") && s.contains("default.conf"),
            "{s}"
        );
        let e = log
            .check("3", GateId::ConfigHash, Err("tampered".into()))
            .unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert_eq!(
            serde_json::to_value(&log.gates[1]).unwrap()["class"],
            "host"
        );
        assert!(!log.all_proven());
        assert_eq!(
            log.missing(&[GateId::SlotLock, GateId::ConfigHash]),
            Some(GateId::ConfigHash)
        );
        log.record(GateId::ConfigHash, Err("recorded only".into()));
        assert_eq!(log.missing(&[GateId::SlotLock, GateId::ConfigHash]), None);
    }

    #[test]
    fn verb_lists_start_with_their_entry_gates() {
        for v in [Verb::Snapshot, Verb::Restore, Verb::Reset] {
            assert_eq!(&GateId::required_before(v)[..5], &ENTER_EXISTING, "{v:?}");
        }
        assert_eq!(&CLEANUP_GATES[..4], &ENTER_EXISTING[..4]);
        assert!(RESTORE_GATES.contains(&GateId::ContainerAbsent));
        assert!(!RESET_GATES.contains(&GateId::ContainerAbsent));
        assert!(GateId::required_before(Verb::Status).is_empty());
    }
}
