//! What a verb has recorded so far — its gates, step timings, facts and what its declared
//! differences depend on — kept in one record ([`VerbRecord`]) that the verb
//! ([`super::verb_run::VerbRun`]) writes and its interruption note ([`super::interruption`]) reads:
//! a signal does not unwind, so the note, on the signal thread, makes the interrupted verb's
//! `timings.json`, `verb.json` and `gates-so-far.json` from the same record a finished verb
//! makes its `timings.json`, `verb.json` and `gates.json` from. `verb.json` is one type
//! ([`VerbDoc`]) for both endings ([`Ending`]).

use crate::evidence::result::Artifact;
use crate::ns::cleanup::InterruptSignal;
use crate::oci::RuntimeKind;
use crate::slot::JournalEvent;
use crate::slot::error::SlotError;
use crate::slot::gate::publish_gates;
use crate::slot::gate::{Gate, GateLog};
use crate::slot::record::journal::JournalEntry;
use crate::slot::resources::crun_leftovers;
use crate::slot::state::{ImageKind, Phase, SlotState};
use crate::slot::{DECLARED_DIFFERENCES, EMBEDDED_IMAGE_DIFFERENCE};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// A verb's outcome document in its evidence folder.
pub const VERB_FILE: &str = "verb.json";
/// A verb's step timings in its evidence folder (milliseconds, monotonic clock).
pub const TIMINGS_FILE: &str = "timings.json";
/// A finished verb's gates in its evidence folder (an interrupted verb's are in
/// [`crate::slot::record::interruption::GATES_SO_FAR_FILE`]).
pub const GATES_FILE: &str = "gates.json";

/// What a verb has recorded so far (see the module docs).
#[derive(Debug, Clone, Default)]
pub(crate) struct Recorded {
    /// Every gate evaluated so far, in order.
    pub gates: GateLog,
    /// Named step timings, milliseconds, monotonic clock.
    pub timings: BTreeMap<String, u64>,
    /// Facts for `verb.json` and the outcome.
    pub facts: BTreeMap<String, Value>,
    /// Declared differences this verb adds (e.g. an overridden probe gate).
    pub extra_diffs: Vec<String>,
    /// The runtime kind detected for these paths ([`super::verb_run::VerbRun::runtime_kind`]).
    pub rt_kind: Option<(Vec<PathBuf>, RuntimeKind)>,
    /// Whether the verb's end evidence (`timings.json`, `verb.json`) has been claimed, by the
    /// verb's end or its interruption note, whichever came first ([`VerbRecord::claim_end`]).
    end_claimed: bool,
    /// The evidence file names this verb has claimed so far ([`VerbRecord::claim_name`]).
    ev_names: BTreeSet<String>,
}

/// The [`Recorded`] of one verb, shared by the verb and its interruption note.
#[derive(Debug, Clone, Default)]
pub(crate) struct VerbRecord(Arc<Mutex<Recorded>>);

impl VerbRecord {
    /// The record, locked (a poisoned lock is taken as it is). Hold the guard only over plain
    /// reads and writes of the record, never across a call that may spawn a process or reach a
    /// stop point ([`crate::ns::cleanup::checkpoint`]): a thread stopped there for good would keep
    /// the interruption note from reading it.
    pub fn lock(&self) -> MutexGuard<'_, Recorded> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Claims the writing of the verb's end evidence (`timings.json`, `verb.json`) and returns
    /// the record as it is now: `(true, record)` the first time, `(false, record)` once claimed
    /// (the verb's end and its interruption note race when a signal comes as the verb ends;
    /// evidence is never overwritten, so only the first writes them).
    pub fn claim_end(&self) -> (bool, Recorded) {
        let mut r = self.lock();
        let first = !r.end_claimed;
        r.end_claimed = true;
        (first, r.clone())
    }

    /// Claims evidence file name `name` for one write of this verb and returns the name to
    /// write: `name` itself the first time, else `name` qualified with the first free
    /// occurrence number ([`qualified`]: `criu-lock-released-2.txt`), recorded in fact
    /// `evidence_renamed` (`"<name> → <written as>"`, one entry each). So no two writes of one
    /// verb collide on a name, whichever steps make them — evidence is never overwritten, and
    /// a second write of a name would otherwise be refused (EEXIST) and fail the verb.
    pub fn claim_name(&self, name: &str) -> String {
        let mut r = self.lock();
        if r.ev_names.insert(name.to_string()) {
            return name.to_string();
        }
        let mut n = 2;
        let got = loop {
            let q = qualified(name, n);
            if r.ev_names.insert(q.clone()) {
                break q;
            }
            n += 1;
        };
        let entry = Value::String(format!("{name} → {got}"));
        match r.facts.get_mut(RENAMED_FACT) {
            Some(Value::Array(v)) => v.push(entry),
            _ => {
                r.facts
                    .insert(RENAMED_FACT.to_string(), Value::Array(vec![entry]));
            }
        }
        got
    }
}

/// The fact listing the evidence files a verb wrote under a qualified name
/// ([`VerbRecord::claim_name`]).
pub const RENAMED_FACT: &str = "evidence_renamed";

/// `name` with occurrence number `n` before its extension, in its last path component:
/// `a/criu-lock-released.txt`, 2 → `a/criu-lock-released-2.txt`; `runtime`, 3 → `runtime-3`.
pub(crate) fn qualified(name: &str, n: u32) -> String {
    let (dir, file) = match name.rfind('/') {
        Some(i) => name.split_at(i + 1),
        None => ("", name),
    };
    match file.rfind('.') {
        Some(i) if i > 0 => format!("{dir}{}-{n}{}", &file[..i], &file[i..]),
        _ => format!("{dir}{file}-{n}"),
    }
}

/// How a verb ended, as `verb.json` says it.
#[derive(Debug)]
pub(crate) enum Ending<'a> {
    /// It succeeded, with this summary.
    Succeeded(&'a str),
    /// It failed with this error.
    Failed(&'a SlotError),
    /// A signal interrupted it.
    Interrupted(Interrupted),
}

/// The `interrupted` object of an interrupted verb's `verb.json` (absent from a finished
/// verb's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interrupted {
    /// The signal (`SIGINT`, `SIGTERM`, `SIGHUP`).
    pub signal: InterruptSignal,
    /// The exit code netprobe exits with: 128 + the signal's number.
    pub exit_code: i32,
    /// What the signal path stopped and released before `verb.json` was written, in order (the
    /// release list of `interrupted.txt`).
    pub released: Vec<String>,
    /// Evidence files still being made beside the verb when the signal came, so possibly
    /// missing from the folder ([`super::verb_run::VerbRun::ev_make_beside`]).
    pub evidence_in_flight: Vec<String>,
}

/// `verb.json`: a verb's outcome (`ok`, `summary` or `error`, and `interrupted` for a verb a
/// signal stopped), gates, timings (ms), facts, the slot's phase after it and the declared
/// differences. Written with its keys in alphabetical order ([`VerbDoc::to_bytes`]), as every
/// `verb.json` before this type.
#[derive(Debug, Serialize)]
pub(crate) struct VerbDoc<'a> {
    /// `netprobe`.
    pub tool: &'static str,
    /// netprobe's version.
    pub tool_version: &'static str,
    /// The verb as written in evidence.
    pub verb: &'a str,
    /// The slot number.
    pub slot: u32,
    /// True only for a verb that succeeded.
    pub ok: bool,
    /// A successful verb's summary.
    pub summary: Option<&'a str>,
    /// A failed verb's error ([`SlotError::to_json`]).
    pub error: Option<Value>,
    /// An interrupted verb's signal and release list; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interrupted>,
    /// When the verb started (RFC 3339).
    pub started_at: &'a str,
    /// When the document was made (RFC 3339).
    pub finished_at: String,
    /// Named step timings, milliseconds, monotonic clock (with `total`).
    pub timings_ms: &'a BTreeMap<String, u64>,
    /// Every gate evaluated, in order.
    pub gates: &'a [Gate],
    /// The verb's facts.
    pub facts: &'a BTreeMap<String, Value>,
    /// The slot's phase after the verb (`state.json`), if readable.
    pub phase: Option<Phase>,
    /// The declared differences ([`declared`]).
    pub declared_differences: &'a [String],
    /// A finished verb's evidence folder as it was when `verb.json` was made: every file but
    /// those [`crate::evidence::enclosing::SLOT_VERB_UNLISTED`] names (path relative to the
    /// folder, bytes, sha256), as a run's result lists its artifacts; `netprobe report` hashes
    /// them again. Absent from an interrupted verb's (its folder may still be growing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<&'a [Artifact]>,
}

/// Which verb a [`VerbDoc`] is of.
#[derive(Debug, Clone, Copy)]
pub(crate) struct VerbId<'a> {
    /// The verb as written in evidence.
    pub verb: &'a str,
    /// The slot number.
    pub slot: u32,
    /// When the verb started (RFC 3339).
    pub started_at: &'a str,
}

/// Where a verb left its slot, for its [`VerbDoc`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct VerbAfter<'a> {
    /// The slot's phase after the verb (`state.json`), if readable.
    pub phase: Option<Phase>,
    /// The declared differences ([`declared`]).
    pub declared: &'a [String],
}

impl<'a> VerbDoc<'a> {
    /// The document of verb `id`, ended as `ending`, from record `rec` (its timings must
    /// already hold `total`), finished now, with the slot left as `after` says, listing
    /// `artifacts` (a finished verb's; `None` for an interrupted one).
    pub fn new(
        id: VerbId<'a>,
        ending: Ending<'a>,
        rec: &'a Recorded,
        after: VerbAfter<'a>,
        artifacts: Option<&'a [Artifact]>,
    ) -> VerbDoc<'a> {
        let VerbId {
            verb,
            slot,
            started_at,
        } = id;
        let VerbAfter {
            phase,
            declared: declared_differences,
        } = after;
        let (ok, summary, error, interrupted) = match ending {
            Ending::Succeeded(s) => (true, Some(s), None, None),
            Ending::Failed(e) => (false, None, Some(e.to_json()), None),
            Ending::Interrupted(i) => (false, None, None, Some(i)),
        };
        VerbDoc {
            tool: "netprobe",
            tool_version: env!("CARGO_PKG_VERSION"),
            verb,
            slot,
            ok,
            summary,
            error,
            interrupted,
            started_at,
            finished_at: crate::evidence::now_rfc3339(),
            timings_ms: &rec.timings,
            gates: &rec.gates.gates,
            facts: &rec.facts,
            phase,
            declared_differences,
            artifacts,
        }
    }

    /// The bytes of `verb.json`: pretty JSON, keys in alphabetical order (through
    /// [`serde_json::Value`], whose maps are sorted), no trailing newline.
    ///
    /// Errors: the document could not be encoded.
    pub fn to_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_value(self).and_then(|v| serde_json::to_vec_pretty(&v))
    }
}

/// The bytes of `timings.json`: the timings as pretty JSON (milliseconds by step name).
///
/// Errors: the map could not be encoded.
pub(crate) fn timings_bytes(t: &BTreeMap<String, u64>) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec_pretty(t)
}

/// The journal's `end` entry of verb `verb` (now, this process): `ok`, `detail`, the name of
/// evidence folder `ev` and `verb.json`'s sha256, when there are.
pub(crate) fn end_entry(
    verb: &str,
    ok: bool,
    detail: &str,
    ev: Option<&Path>,
    verb_sha256: Option<String>,
) -> JournalEntry {
    JournalEntry {
        at: crate::evidence::now_rfc3339(),
        pid: std::process::id(),
        verb: verb.into(),
        event: JournalEvent::End,
        ok,
        detail: detail.into(),
        evidence: ev
            .and_then(|d| d.file_name())
            .map(|n| n.to_string_lossy().into_owned()),
        verb_sha256,
    }
}

/// The declared differences of a verb: [`DECLARED_DIFFERENCES`], the image when it is not the
/// embedded one and the binaries recorded at provision (from `st`), `extra` (what the verb
/// added), and the quirks of runtime `kind` when detected.
pub(crate) fn declared(
    st: Option<&SlotState>,
    extra: &[String],
    kind: Option<RuntimeKind>,
) -> Vec<String> {
    let mut v: Vec<String> = DECLARED_DIFFERENCES.iter().map(|s| s.to_string()).collect();
    if let Some(img) = st.and_then(|s| s.image.as_ref())
        && img.kind != ImageKind::Embedded
    {
        let profile = st
            .and_then(|s| s.profile.as_ref())
            .filter(|p| !p.image_from_flags)
            .map(|p| format!("profile {}", p.name))
            .unwrap_or_else(|| "--image".into());
        v.retain(|d| d != EMBEDDED_IMAGE_DIFFERENCE);
        let kind = if img.kind == ImageKind::Qcow2 {
            "qcow2"
        } else {
            "directory"
        };
        v.push(format!(
            "The image is not netprobe's embedded busybox rootfs: {kind} {} ({profile}).",
            img.source.display()
        ));
    }
    if let Some(st) = st {
        v.push(binaries_difference(st));
        if !st.published_ports.is_empty() {
            v.push(publish_gates::CHECKPOINT_CLOSES_CONNECTIONS.into());
        }
        for p in st.published_ports.iter().filter(|p| !p.loopback) {
            v.push(format!(
                "Published port {p} listens on a non-loopback address, named by the operator: the guest's port is reachable from beyond this host."
            ));
        }
    }
    v.extend(extra.iter().cloned());
    // Only crun's quirks depend on the host's cgroup layout (a mountinfo read).
    if kind == Some(RuntimeKind::Crun) {
        v.extend(crate::oci::crun_quirks(
            RuntimeKind::Crun,
            crate::oci::host_is_hybrid(),
        ));
        v.push(format!("A failed crun restore leaves a half-written state folder (config.json, no status) and an empty `{}` cgroup under the slot's cgroup in every hierarchy: the slot removes both when they are its own and empty, and fails closed naming them otherwise.", crun_leftovers::PROXY_CGROUP));
    }
    v
}

/// The declared difference about the slot's binaries: each recorded binary (path, version,
/// sha256) against the reference arm's pin of `host/pins.toml` ([`crate::host::pins`]): the
/// pinned one when its version (and sha256, where pinned) match, else named as not the pin.
fn binaries_difference(st: &SlotState) -> String {
    let pins = crate::host::pins::pins();
    let one = |what: &str, b: &crate::slot::state::BinaryPin, pin: &crate::host::pins::Pin| {
        let version = b.version.as_deref().unwrap_or("unknown");
        let same = b.version.as_deref() == Some(pin.version.as_str())
            && pin
                .sha256
                .as_ref()
                .is_none_or(|s| s.eq_ignore_ascii_case(&b.sha256));
        format!(
            "{what} {} (version {version}, sha256 {}): {}",
            b.path.display(),
            b.sha256,
            if same {
                format!("the reference arm's pin ({} {})", pin.name, pin.version)
            } else {
                format!("not the reference arm's pin ({} {})", pin.name, pin.version)
            }
        )
    };
    format!(
        "Binaries are those recorded at provision: {}; {}.",
        one("runtime", &st.runtime, &pins.runtime),
        one("CRIU", &st.criu, &pins.criu)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slot::gate::GateId;
    use serde_json::json;

    fn record() -> Recorded {
        let mut r = Recorded::default();
        r.gates.record(GateId::SlotLock, Ok("held".into()));
        r.gates.record(GateId::ConfigHash, Err("tampered".into()));
        r.timings.insert("enter".into(), 3);
        r.timings.insert("total".into(), 41);
        r.facts.insert("runtime_kind".into(), json!("runc"));
        r
    }

    /// The bytes a finished verb's `verb.json` had when it was made with `json!` (keys sorted),
    /// with the `artifacts` list since added.
    fn before_the_type(
        rec: &Recorded,
        ok: bool,
        err: Option<&SlotError>,
        doc: &VerbDoc,
    ) -> Vec<u8> {
        let mut v = json!({
            "tool": "netprobe",
            "tool_version": env!("CARGO_PKG_VERSION"),
            "verb": "restore",
            "slot": 7,
            "ok": ok,
            "summary": ok.then_some("restored"),
            "error": err.map(|e| e.to_json()),
            "started_at": "2026-01-01T00:00:00.000Z",
            "finished_at": doc.finished_at,
            "timings_ms": rec.timings,
            "gates": rec.gates.gates,
            "facts": rec.facts,
            "phase": Some(Phase::Running),
            "declared_differences": ["d1"],
        });
        v["artifacts"] = json!(doc.artifacts);
        serde_json::to_vec_pretty(&v).unwrap()
    }

    /// A finished verb's `verb.json` keeps the bytes it had before the type, with one field
    /// more: `artifacts`, the files of its folder (path, bytes, sha256).
    #[test]
    fn a_finished_verbs_verb_json_keeps_its_bytes_and_lists_its_artifacts() {
        let rec = record();
        let declared = ["d1".to_string()];
        let id = VerbId {
            verb: "restore",
            slot: 7,
            started_at: "2026-01-01T00:00:00.000Z",
        };
        let arts = [Artifact {
            path: "criu-work/restore.log".into(),
            bytes: 3,
            sha256: "ab".repeat(32),
            content: None,
        }];
        let running = VerbAfter {
            phase: Some(Phase::Running),
            declared: &declared[..],
        };
        let doc = VerbDoc::new(
            id,
            Ending::Succeeded("restored"),
            &rec,
            running,
            Some(&arts),
        );
        assert_eq!(
            doc.to_bytes().unwrap(),
            before_the_type(&rec, true, None, &doc)
        );
        let e = SlotError::gate_failed("7", GateId::ConfigHash, "tampered");
        let doc = VerbDoc::new(id, Ending::Failed(&e), &rec, running, Some(&[]));
        assert_eq!(
            doc.to_bytes().unwrap(),
            before_the_type(&rec, false, Some(&e), &doc)
        );
        let v: Value = serde_json::from_slice(&doc.to_bytes().unwrap()).unwrap();
        assert!(v.get("interrupted").is_none(), "{v:#}");
        assert_eq!(v["artifacts"], json!([]));
        let doc = VerbDoc::new(
            id,
            Ending::Succeeded("restored"),
            &rec,
            running,
            Some(&arts),
        );
        let v: Value = serde_json::from_slice(&doc.to_bytes().unwrap()).unwrap();
        assert_eq!(
            v["artifacts"],
            json!([{"path": "criu-work/restore.log", "bytes": 3, "sha256": "ab".repeat(32)}])
        );
    }

    #[test]
    fn an_interrupted_verbs_verb_json_names_the_signal_and_is_not_ok() {
        let rec = record();
        let i = Interrupted {
            signal: InterruptSignal::Sigterm,
            exit_code: InterruptSignal::Sigterm.exit_code(),
            released: vec!["killed the process tree of criu".into()],
            evidence_in_flight: vec!["sysctls-other.json".into()],
        };
        let doc = VerbDoc::new(
            VerbId {
                verb: "snapshot",
                slot: 7,
                started_at: "2026-01-01T00:00:00.000Z",
            },
            Ending::Interrupted(i.clone()),
            &rec,
            VerbAfter {
                phase: None,
                declared: &[],
            },
            None,
        );
        let v: Value = serde_json::from_slice(&doc.to_bytes().unwrap()).unwrap();
        assert_eq!(v["ok"], false);
        assert!(v.get("artifacts").is_none(), "{v:#}");
        assert!(v["summary"].is_null() && v["error"].is_null(), "{v:#}");
        assert_eq!(v["interrupted"]["signal"], "SIGTERM");
        assert_eq!(v["interrupted"]["exit_code"], 143);
        let back: Interrupted = serde_json::from_value(v["interrupted"].clone()).unwrap();
        assert_eq!(back, i);
        // The rest has a finished verb's shape: gates, timings (with total), facts, phase.
        assert_eq!(v["timings_ms"]["total"], 41);
        assert_eq!(v["gates"].as_array().unwrap().len(), 2);
        assert_eq!(v["facts"]["runtime_kind"], "runc");
        assert!(v["phase"].is_null());
        assert_eq!(v["verb"], "snapshot");
        let t: BTreeMap<String, u64> =
            serde_json::from_slice(&timings_bytes(&rec.timings).unwrap()).unwrap();
        assert_eq!(t, rec.timings);
    }

    #[test]
    fn the_end_entry_names_the_folder_and_the_verb_json_sha256() {
        let e = end_entry(
            "snapshot",
            false,
            "interrupted by SIGINT",
            Some(Path::new("/s/slot-7/evidence/0004-snapshot")),
            Some("ab".repeat(32)),
        );
        assert_eq!(
            (e.event.as_str(), e.ok, e.evidence.as_deref()),
            ("end", false, Some("0004-snapshot"))
        );
        assert_eq!(e.verb_sha256, Some("ab".repeat(32)));
        assert_eq!(e.pid, std::process::id());
        assert_eq!(end_entry("cleanup", true, "", None, None).evidence, None);
    }

    #[test]
    fn only_the_first_claims_the_end() {
        let r = VerbRecord::default();
        r.lock().timings.insert("enter".into(), 1);
        let (first, rec) = r.claim_end();
        assert!(first);
        assert_eq!(rec.timings.get("enter"), Some(&1));
        assert!(!r.claim_end().0);
    }

    #[test]
    fn a_name_is_qualified_before_its_extension_in_its_last_component() {
        assert_eq!(
            qualified("criu-lock-released.txt", 2),
            "criu-lock-released-2.txt"
        );
        assert_eq!(qualified("runtime", 3), "runtime-3");
        assert_eq!(qualified("a.b/c.tar.gz", 2), "a.b/c.tar-2.gz");
        assert_eq!(qualified("d/.hidden", 2), "d/.hidden-2");
        let r = VerbRecord::default();
        assert_eq!(r.claim_name("x.txt"), "x.txt");
        assert_eq!(r.claim_name("x-2.txt"), "x-2.txt");
        assert_eq!(
            r.claim_name("x.txt"),
            "x-3.txt",
            "a taken qualified name is skipped"
        );
        assert_eq!(r.claim_name("y.txt"), "y.txt");
        assert_eq!(r.lock().facts[RENAMED_FACT], json!(["x.txt → x-3.txt"]));
    }
}
