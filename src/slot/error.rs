//! Errors of the slot driver. The exit class comes from the type: a failed gate carries its
//! [`GateId`]'s class, a step that could not run carries a typed [`StepError`] (its `source`
//! chain kept), usage and host refusals their own class ([`crate::exit::ExitClass`]).

use super::gate::GateId;
use crate::exit::ExitClass;
use crate::ns::NsError;
use crate::oci::OciError;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Why a step of a verb could not run (after its gates passed): the typed cause, with its
/// `source` chain.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The OCI runtime failed ([`crate::oci`]).
    #[error(transparent)]
    Runtime(#[from] OciError),
    /// A namespace or process operation failed ([`crate::ns`]): holder spawn, identity.
    #[error(transparent)]
    Ns(#[from] NsError),
    /// A file operation on `path` failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The network state could not be captured ([`crate::ns::capture_netstate`]).
    #[error(transparent)]
    Capture(#[from] crate::ns::CaptureError),
    /// A CRIU image inventory could not be read.
    #[error(transparent)]
    Inventory(#[from] crate::criu::CriuError),
    /// A mount step ([`super::resources::mounts`]: `mount`, `losetup`, `qemu-storage-daemon`) failed; the
    /// text names the program, its arguments and its stderr.
    #[error("{0}")]
    Tool(String),
    /// A mount step ([`super::mounts`]) failed.
    #[error(transparent)]
    Mount(#[from] crate::slot::resources::mounts::MountError),
    /// A directory image's manifest could not be taken or written.
    #[error(transparent)]
    Manifest(#[from] crate::slot::gate::image_manifest::ManifestError),
    /// A qcow2's `stat` did not hold between its hash and its export.
    #[error(transparent)]
    Qcow2Held(#[from] crate::slot::gate::image_unchanged::Qcow2HeldError),
    /// A profile's `config.json` could not be made.
    #[error(transparent)]
    Bundle(#[from] crate::slot::profile_record::BundleError),
    /// `state.json` could not be read or written.
    #[error(transparent)]
    State(#[from] super::state::StateError),
    /// A file-tree helper (`cp -a`, `sync -f`, a removal) failed.
    #[error(transparent)]
    Tree(#[from] super::resources::fs_tools::TreeError),
    /// A document failed its JSON Schema (e.g. `holder.json`).
    #[error("{}", .0.join("; "))]
    Schema(Vec<String>),
    /// Something the slot state should hold is missing (e.g. no overlay recorded).
    #[error("{0}")]
    Missing(&'static str),
    /// A document of the crate's own types could not be encoded as JSON (`file`).
    #[error("{file}: encode as JSON: {source}")]
    Encode {
        /// The file it was for.
        file: &'static str,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// A tree digest ([`crate::evidence::tree_digest`]) could not be taken.
    #[error(transparent)]
    Digest(#[from] crate::evidence::TreeDigestError),
}

impl StepError {
    /// A [`StepError::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> StepError {
        let path = path.into();
        move |source| StepError::Io { path, source }
    }
}

impl StepError {
    /// A [`StepError::Encode`] of `file`.
    pub fn encode(file: &'static str, source: serde_json::Error) -> StepError {
        StepError::Encode { file, source }
    }
}

impl From<String> for StepError {
    fn from(s: String) -> Self {
        StepError::Tool(s)
    }
}

/// The gate of [`SlotError::evidence_incomplete`]: the verb's own record (its evidence
/// folder, journal entries, last `state.json` update) could not all be written.
pub const EVIDENCE_GATE: &str = "evidence";

macro_rules! steps {
    ($($(#[$doc:meta])* $id:ident => $name:literal,)*) => {
        /// A step of a verb that can fail after its gates passed ([`SlotError::step`]); its
        /// name is what `verb.json`'s `error.gate` and the messages carry (e.g.
        /// `runtime-checkpoint`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum StepId { $($(#[$doc])* $id,)* }

        impl StepId {
            /// Every step id, in declaration order.
            pub const ALL: &'static [StepId] = &[$(StepId::$id,)*];

            /// The stable step name, e.g. `runtime-checkpoint`.
            pub fn name(self) -> &'static str {
                match self { $(StepId::$id => $name,)* }
            }
        }
    };
}

steps! {
    /// cleanup: the release of the slot's resources.
    Cleanup => "cleanup",
    /// provision: writing the bundle's `config.json`.
    ConfigJson => "config.json",
    /// reset: stopping the container.
    ContainerStop => "container-stop",
    /// the guest display (X11) could not be reached.
    Display => "display",
    /// a `sync -f` of a written tree.
    Fsync => "fsync",
    /// provision: the qcow2 image's FUSE export (`qemu-storage-daemon`).
    FuseExport => "fuse-export",
    /// the holder process (spawn, identity, netns).
    Holder => "holder",
    /// provision: writing `holder.json`.
    HolderJson => "holder.json",
    /// provision: the container image (directory or qcow2).
    Image => "image",
    /// provision: the image's metadata manifest.
    ImageManifest => "image-manifest",
    /// provision: mounting the image read-only.
    ImageMount => "image-mount",
    /// provision: attaching the image to a loop device.
    LoopAttach => "loop-attach",
    /// snapshot: the snapshot's manifest.
    Manifest => "manifest",
    /// provision: creating the slot's folders.
    Mkdir => "mkdir",
    /// capturing the network state.
    NetstateCapture => "netstate-capture",
    /// snapshot: writing the recorded network state.
    NetstateWrite => "netstate-write",
    /// mounting the rootfs overlay.
    Overlay => "overlay",
    /// unmounting the rootfs overlay.
    OverlayUnmount => "overlay-unmount",
    /// provision: the profile's readiness checks.
    Readiness => "readiness",
    /// restore/reset: the destructive part of a restore.
    Restore => "restore",
    /// snapshot: the runtime's checkpoint.
    RuntimeCheckpoint => "runtime-checkpoint",
    /// provision: the runtime's create.
    RuntimeCreate => "runtime-create",
    /// removing a runtime's half state.
    RuntimeHalfState => "runtime-half-state",
    /// restore/reset: the runtime's restore.
    RuntimeRestore => "runtime-restore",
    /// provision: the runtime's start.
    RuntimeStart => "runtime-start",
    /// reading the runtime's state of the container.
    RuntimeState => "runtime-state",
    /// provision: the sealed copies of the binaries.
    SealedCopy => "sealed-copy",
    /// provision: creating the slot directory.
    SlotCreate => "slot-create",
    /// snapshot: the destructive part of a snapshot.
    Snapshot => "snapshot",
    /// snapshot: renaming the finished snapshot into place.
    SnapshotRename => "snapshot-rename",
    /// writing `state.json`.
    StateWrite => "state-write",
    /// cleanup: unmounting the slot's mounts.
    Unmount => "unmount",
    /// snapshot: the saved upper's tree digest.
    UpperDigest => "upper-digest",
    /// restore/reset: the new overlay upper from the snapshot.
    UpperReset => "upper-reset",
    /// snapshot: saving the overlay upper.
    UpperSave => "upper-save",
    /// status: encoding the status document.
    StatusDocument => "status-document",
}

/// Where a slot verb failed: a gate, a step that could not run, the root check, or the verb's
/// own record. Written as its name (`"gate": "net-fidelity"` in `verb.json` and `--json`);
/// dereferences to that name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailedAt {
    /// A gate that was not proven (exit 1 or 3 by its class).
    Gate(GateId),
    /// A step that could not run (exit 4).
    Step(StepId),
    /// The root check before any gate (`root`, a host refusal).
    Root,
    /// The verb's own record could not all be written ([`EVIDENCE_GATE`]).
    Evidence,
}

impl FailedAt {
    /// The stable name: the gate's, the step's, `root` or `evidence`.
    pub fn name(self) -> &'static str {
        match self {
            FailedAt::Gate(g) => g.name(),
            FailedAt::Step(s) => s.name(),
            FailedAt::Root => "root",
            FailedAt::Evidence => EVIDENCE_GATE,
        }
    }

    /// The place named `name` (as `verb.json`'s `error.gate` carries it), gates first; `None`
    /// for a name netprobe does not write. A name two gates share (`runtime-binary`) gives the
    /// first.
    pub fn from_name(name: &str) -> Option<FailedAt> {
        let gate = GateId::ALL.iter().find(|g| g.name() == name);
        let step = StepId::ALL.iter().find(|s| s.name() == name);
        match (gate, step) {
            (Some(g), _) => Some(FailedAt::Gate(*g)),
            (None, Some(s)) => Some(FailedAt::Step(*s)),
            _ if name == "root" => Some(FailedAt::Root),
            _ if name == EVIDENCE_GATE => Some(FailedAt::Evidence),
            _ => None,
        }
    }
}

impl std::ops::Deref for FailedAt {
    type Target = str;
    fn deref(&self) -> &str {
        self.name()
    }
}

impl fmt::Display for FailedAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for FailedAt {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A failed slot verb. `Display` names the slot and, for gate failures, the gate.
///
/// Source: produced by [`crate::slot::run_verb`]; the CLI maps it to an exit code with
/// [`SlotError::exit_code`] (or [`SlotError::kind`], an [`ExitClass`]).
#[derive(Debug, Clone)]
pub struct SlotError {
    /// The exit class.
    pub kind: ExitClass,
    /// The slot as given on the command line (raw text, possibly malformed).
    pub slot: String,
    /// The gate that failed (for gate and host-refused gates), or the step that could not run.
    pub gate: Option<FailedAt>,
    /// One or more lines for people: the fact that could not be proven and what was observed,
    /// or the cause chain of the step that could not run.
    pub message: String,
    /// A diff (network state recorded vs observed) when the network-fidelity gate failed.
    pub diff: Option<Box<str>>,
    /// The evidence folder of this verb, when one was written.
    pub evidence: Option<Box<std::path::Path>>,
    /// The typed cause of a step that could not run.
    pub source: Option<Arc<StepError>>,
}

impl SlotError {
    /// A usage error (exit 2).
    pub fn usage(slot: &str, message: impl Into<String>) -> Self {
        Self::new(ExitClass::Usage, slot, None, message)
    }

    /// Gate `id` failed with `detail` observed; the class is the gate's.
    pub fn gate_failed(slot: &str, id: GateId, detail: &str) -> Self {
        Self::new(
            id.class().exit_class(),
            slot,
            Some(FailedAt::Gate(id)),
            format!("{} — not proven: {detail}", id.fact()),
        )
    }

    /// A host refusal (exit 3) naming the prerequisite.
    pub fn host(slot: &str, gate: FailedAt, message: impl Into<String>) -> Self {
        Self::new(ExitClass::HostRefused, slot, Some(gate), message)
    }

    /// A step that could not run (exit 4) naming the step and its typed cause; the message is
    /// the cause with its `source` chain.
    pub fn step(slot: &str, step: StepId, cause: impl Into<StepError>) -> Self {
        let cause = cause.into();
        let mut message = cause.to_string();
        let mut src = std::error::Error::source(&cause);
        while let Some(s) = src {
            let t = s.to_string();
            if !message.contains(&t) {
                message.push_str(&format!(": {t}"));
            }
            src = s.source();
        }
        let mut e = Self::new(
            ExitClass::CouldNotRun,
            slot,
            Some(FailedAt::Step(step)),
            message,
        );
        e.source = Some(Arc::new(cause));
        e
    }

    /// A verb whose own record could not all be written (evidence files, journal entries, its
    /// last `state.json` update): exit 2, as an evidence folder netprobe cannot write into
    /// (docs/REFERENCE.md's table); gate `evidence`. The message names the files, the state directory's
    /// filesystem and the fix ([`super::record::incomplete_evidence::Incomplete::message`]).
    pub fn evidence_incomplete(slot: &str, message: impl Into<String>) -> Self {
        Self::new(ExitClass::Usage, slot, Some(FailedAt::Evidence), message)
    }

    fn new(
        kind: ExitClass,
        slot: &str,
        gate: Option<FailedAt>,
        message: impl Into<String>,
    ) -> Self {
        SlotError {
            kind,
            slot: slot.to_string(),
            gate,
            message: message.into(),
            diff: None,
            evidence: None,
            source: None,
        }
    }

    /// Appends `text` to the message (e.g. a diagnosis of a known CRIU failure).
    pub fn with_note(mut self, text: &str) -> Self {
        self.message.push_str(text);
        self
    }

    /// Attaches the network-state diff (recorded vs observed).
    pub fn with_diff(mut self, diff: String) -> Self {
        self.diff = Some(diff.into_boxed_str());
        self
    }

    /// Attaches the evidence folder of the verb, unless one is already attached.
    pub fn with_evidence(mut self, dir: PathBuf) -> Self {
        if self.evidence.is_none() {
            self.evidence = Some(dir.into_boxed_path());
        }
        self
    }

    /// CRIU's deciding log lines with their line numbers ([`crate::criu::quote_log`]) when the
    /// step's cause is a failed runtime checkpoint or restore whose CRIU log names the reason
    /// (e.g. "Connected TCP socket, consider using --tcp-established option"); also part of
    /// `message`. Read from the `source` field (`OciError::Failed { criu_reason, .. }`).
    pub fn criu_reason(&self) -> Option<&str> {
        match self.source.as_deref() {
            Some(StepError::Runtime(OciError::Failed {
                criu_reason: Some(r),
                ..
            })) => Some(r.as_str()),
            _ => None,
        }
    }

    /// The exit class ([`SlotError::kind`]).
    pub fn exit_class(&self) -> ExitClass {
        self.kind
    }

    /// The process exit code of [`SlotError::exit_class`]: 1 gate failed, 2 usage, 3 host
    /// refused, 4 could not run.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.kind.code())
    }

    /// The error as JSON (`kind`, `slot`, `gate`, `message`, `diff`, `criu_reason`,
    /// `evidence`, `exit_code`), for `--json` output and `verb.json`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": self.kind.as_str(),
            "slot": self.slot,
            "gate": self.gate,
            "message": self.message,
            "diff": self.diff,
            "criu_reason": self.criu_reason(),
            "evidence": self.evidence,
            "exit_code": self.exit_code(),
        })
    }
}

impl fmt::Display for SlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let slot = if self.slot.is_empty() {
            "?"
        } else {
            &self.slot
        };
        match (&self.kind, &self.gate) {
            (ExitClass::Gate, Some(g)) => {
                write!(f, "slot {slot}: gate `{g}` failed: {}", self.message)?
            }
            (ExitClass::HostRefused, Some(g)) => write!(
                f,
                "slot {slot}: host refused (gate `{g}`): {}",
                self.message
            )?,
            (ExitClass::CouldNotRun, Some(g)) => {
                write!(f, "slot {slot}: step `{g}` could not run: {}", self.message)?
            }
            (ExitClass::Usage, Some(FailedAt::Evidence)) => {
                write!(f, "slot {slot}: {}", self.message)?
            }
            (ExitClass::Usage, _) => write!(f, "slot {slot}: usage: {}", self.message)?,
            (_, _) => write!(f, "slot {slot}: {}", self.message)?,
        }
        if let Some(d) = &self.diff {
            write!(
                f,
                "\nnetwork state diff (field: recorded at snapshot → observed now):\n{d}"
            )?;
        }
        if let Some(e) = &self.evidence {
            write!(f, "\nevidence: {}", e.display())?;
        }
        Ok(())
    }
}

impl std::error::Error for SlotError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_errors_keep_their_cause_and_class() {
        let io = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let e = SlotError::step("5", StepId::Snapshot, StepError::io("/x/evidence")(io));
        assert_eq!(e.exit_code(), 4);
        assert_eq!(e.kind, ExitClass::CouldNotRun);
        let s = e.to_string();
        assert!(
            s.starts_with("slot 5: step `snapshot` could not run: /x/evidence: "),
            "{s}"
        );
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(e.to_json()["kind"], "could-not-run");
        assert!(e.to_json()["criu_reason"].is_null());
        // A failed runtime checkpoint carries CRIU's reason as a field and in the message.
        let why = "dump.log:12: Error (criu/sk-inet.c:199): inet: Connected TCP socket, consider using --tcp-established option.";
        let e = SlotError::step(
            "5",
            StepId::RuntimeCheckpoint,
            OciError::Failed {
                argv: vec!["runc".into(), "checkpoint".into()],
                code: Some(1),
                signal: None,
                stderr_tail: "criu failed: type NOTIFY errno 0".into(),
                log: Some("/w/dump.log".into()),
                criu_reason: Some(why.into()),
            },
        );
        assert_eq!(e.criu_reason(), Some(why));
        assert_eq!(e.to_json()["criu_reason"], why);
        assert!(e.message.contains("Connected TCP socket"), "{e}");
        let u = SlotError::usage("x", "bad");
        assert_eq!(
            (u.exit_code(), u.to_json()["kind"].clone()),
            (2, "usage".into())
        );
    }
}
