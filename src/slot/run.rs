//! [`VerbRun`]: what every verb does around its own steps — enter (state dir, ownership marker,
//! lock, evidence folder, journal), gates ([`GateId`]) and the check that a destructive step
//! comes after its gates ([`VerbRun::clear`]), timings, facts, the runtime log, and the end
//! (`gates.json`, `timings.json`, `verb.json`, journal).

use super::error::{SlotError, StepError};
use super::gate::{GateId, GateLog, Observed};
use super::layout::{self, SlotLock, SlotPaths, StateDirUse};
use super::state::{ImageKind, SlotState};
use super::support::ms_since;
use super::{DECLARED_DIFFERENCES, SlotArgs, SlotOutcome};
use crate::evidence::{EvidenceDir, now_rfc3339};
use crate::oci::{OciError, Runtime, RuntimeKind, RuntimeOps};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Makes the runtime a verb drives: `(runtime binary, CRIU binary, runtime root, runtime kind,
/// systemd cgroup driver)`.
pub(crate) type MakeRuntime<'e> =
    &'e (dyn Fn(&Path, &Path, &Path, RuntimeKind, bool) -> Box<dyn RuntimeOps> + Sync);

/// What a verb runs against: the runtime factory, whether root is required, and (for unit
/// tests) an event trace that records every gate and cleared step in order.
pub(crate) struct SlotEnv<'e> {
    /// Builds the runtime (real: [`Runtime::new`] with the slot's private root and its CRIU).
    pub make_runtime: MakeRuntime<'e>,
    /// Refuse to run unless euid 0 (false only in unit tests with the recording fake).
    pub require_root: bool,
    /// Gate and step events (`gate <name>`, `step <name>`), shared with a fake runtime.
    pub trace: Option<Arc<Mutex<Vec<String>>>>,
    /// Where the `netns-empty` gate reads processes: `/proc` (unit tests: a folder with only
    /// the self-holder's `ns/net` and `net/dev`, linked to this process's).
    pub proc_root: PathBuf,
}

/// The real environment: runc/crun through [`Runtime`], root required.
/// `kind` (from `--version`, [`super::crun::detect_kind`]) gives crun its private mount
/// namespace, the `--root /run/crun` bind and `--cgroup-manager` ([`crate::oci::crun_quirks`]);
/// `systemd` adds the systemd cgroup driver (`--systemd-cgroup`) on every call.
pub(crate) fn real_runtime(
    rt: &Path,
    cr: &Path,
    root: &Path,
    kind: RuntimeKind,
    systemd: bool,
) -> Box<dyn RuntimeOps> {
    Box::new(
        Runtime::new(rt, root, Some(cr.to_path_buf()))
            .with_kind(kind)
            .with_systemd_cgroup(systemd),
    )
}

/// One verb's run (the successor of the old `Ctx`).
pub(crate) struct VerbRun<'a> {
    /// The command line's arguments.
    pub args: &'a SlotArgs,
    /// The slot number as typed (for error messages).
    pub raw: String,
    /// The slot's paths.
    pub paths: SlotPaths,
    /// Every gate evaluated so far, in order (`gates.json`).
    pub gates: GateLog,
    /// Named step timings, milliseconds, monotonic clock (`timings.json`).
    pub timings: BTreeMap<String, u64>,
    /// Facts for `verb.json` and the outcome.
    pub facts: BTreeMap<String, Value>,
    /// This verb's evidence folder, once opened.
    pub ev: Option<PathBuf>,
    /// When the verb started (monotonic).
    pub started: Instant,
    /// When the verb started (RFC 3339).
    pub started_at: String,
    /// The slot's exclusive lock, once taken.
    pub lock: Option<SlotLock>,
    /// Declared differences this verb adds (e.g. an overridden probe gate).
    pub extra_diffs: Vec<String>,
    /// The runtime factory, root requirement and trace.
    pub env: &'a SlotEnv<'a>,
    /// The runtime kind detected for a path ([`VerbRun::runtime_kind`]).
    rt_kind: Option<(Vec<PathBuf>, RuntimeKind)>,
    /// Evidence files being written on their own threads ([`VerbRun::ev_write_beside`]);
    /// joined by [`VerbRun::finish`] before the verb's own evidence is written.
    pending: Vec<std::thread::JoinHandle<()>>,
    /// What the `pending` threads are still making (a file name each, removed once written):
    /// an interruption note names them as possibly missing (a signal ends the verb without
    /// joining them).
    in_flight: Arc<Mutex<Vec<String>>>,
    /// Every gate evaluated so far, mirrored for the interruption note (`gates-so-far.json`:
    /// a signal ends the verb before `gates.json` is written).
    gates_so_far: Arc<Mutex<Vec<super::gate::Gate>>>,
    /// The interruption note registered once the evidence folder exists
    /// ([`VerbRun::interruption_note`]); dropped with the run.
    interruption: Option<crate::ns::cleanup::Registration>,
    /// Source files of the sealed copies re-hashed to their pin by this verb, with the `stat`
    /// they kept from before the hash to after it: recorded in `state.json` at the verb's end
    /// ([`super::sealed::SourceRefresh::apply`]), so the next verb compares by `stat` again.
    pub(crate) refreshed: super::sealed::SourceRefresh,
}

impl<'a> VerbRun<'a> {
    /// A run of `args.verb` on the slot at `paths`, nothing entered yet.
    pub fn new(args: &'a SlotArgs, raw: String, paths: SlotPaths, env: &'a SlotEnv<'a>) -> Self {
        VerbRun {
            args,
            raw,
            paths,
            gates: GateLog::default(),
            timings: BTreeMap::new(),
            facts: BTreeMap::new(),
            ev: None,
            started: Instant::now(),
            started_at: now_rfc3339(),
            lock: None,
            extra_diffs: Vec::new(),
            env,
            rt_kind: None,
            pending: Vec::new(),
            in_flight: Arc::default(),
            gates_so_far: Arc::default(),
            interruption: None,
            refreshed: Default::default(),
        }
    }

    /// The verb as written in evidence.
    pub fn verb(&self) -> &'static str {
        self.args.verb.as_str()
    }

    /// The runtime for binaries `rt`, `cr` under the slot's recorded runtime root, of the kind
    /// its `--version` names (facts `runtime_kind`, `runtime_kind_from`; recorded at provision
    /// in `state.json` `runtime.kind` and taken from there for the recorded path), with the slot's
    /// recorded cgroup driver (`--systemd-cgroup` on every call for systemd).
    pub fn runtime(&mut self, st: &SlotState, rt: &Path, cr: &Path) -> Box<dyn RuntimeOps> {
        let sealed = |h: &crate::ns::ProcessIdentity| {
            st.runtime
                .sealed
                .as_ref()
                .is_some_and(|s| super::sealed::exec_path(h.pid, s) == rt)
        };
        if let (None, Some(k)) = (&self.rt_kind, st.runtime.kind)
            && (st.runtime.path == rt || st.holder.as_ref().is_some_and(sealed))
        {
            // The recorded path and its sealed copy are the same binary (one pin).
            self.rt_kind = Some((vec![rt.to_path_buf(), st.runtime.path.clone()], k));
            self.fact(
                "runtime_kind_from",
                format!(
                    "state.json runtime.kind, detected from {} --version at provision; the same binary while its sha256 pin holds (gate {})",
                    st.runtime.path.display(),
                    super::gate::GateId::RuntimeBinaryPinned.name()
                ),
            );
        }
        let kind = self.runtime_kind(rt);
        let systemd = super::cgroups::uses_systemd(st);
        (self.env.make_runtime)(rt, cr, &st.runtime_root, kind, systemd)
    }

    /// The kind of runtime `rt` (detected once per verb and path, [`super::crun::detect_kind`]),
    /// recorded in the facts.
    pub fn runtime_kind(&mut self, rt: &Path) -> RuntimeKind {
        let kind = match &self.rt_kind {
            Some((p, k)) if p.iter().any(|p| p == rt) => *k,
            _ => {
                let (k, how) = super::crun::detect_kind(rt);
                self.rt_kind = Some((vec![rt.to_path_buf()], k));
                self.fact("runtime_kind_from", how);
                k
            }
        };
        self.fact("runtime_kind", kind.as_str());
        kind
    }

    /// Records what a best-effort release step did: `Ok(Some((sentence, value)))` is journalled
    /// as done and recorded as fact `done_fact`; `Err(e)` is journalled as failed and recorded
    /// as fact `left_fact`, and returned (the caller decides whether it blocks); `Ok(None)`,
    /// nothing to do, records nothing.
    pub fn record_release(
        &mut self,
        r: Result<Option<(String, Value)>, String>,
        done_fact: &str,
        left_fact: &str,
    ) -> Option<String> {
        match r {
            Ok(None) => None,
            Ok(Some((d, v))) => {
                self.journal("step", true, &d);
                self.fact(done_fact, v);
                None
            }
            Err(e) => {
                self.journal("step", false, &e);
                self.fact(left_fact, e.clone());
                Some(e)
            }
        }
    }

    /// Records fact `k`.
    pub fn fact(&mut self, k: &str, v: impl Into<Value>) {
        self.facts.insert(k.into(), v.into());
    }

    /// Runs `f`, recording its milliseconds as timing `name`.
    pub fn time<T>(&mut self, name: &str, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = f();
        self.timings.insert(name.into(), ms_since(t));
        out
    }

    /// Records the milliseconds since `t` as timing `name`.
    pub fn took(&mut self, name: &str, t: Instant) {
        self.timings.insert(name.into(), ms_since(t));
    }

    /// [`VerbRun::time`] for a runtime call that runs CRIU: the slot lock is handed to the
    /// children (so the slot stays locked until runc and CRIU exit, even if netprobe is killed).
    pub fn time_with_lock_inherited<T>(&mut self, name: &str, f: impl FnOnce() -> T) -> T {
        let lock = self.lock.take();
        let out = self.time(name, || match &lock {
            Some(l) => l.inherited_by_children(f),
            None => f(),
        });
        self.lock = lock;
        out
    }

    fn trace(&self, event: String) {
        if let Some(t) = &self.env.trace {
            t.lock().unwrap_or_else(|p| p.into_inner()).push(event);
        }
    }

    /// Evaluates blocking gate `id`. Errors: the gate's [`SlotError`] when not proven.
    pub fn gate(&mut self, id: GateId, r: Observed) -> Result<(), SlotError> {
        self.trace(format!("gate {}", id.name()));
        let raw = self.raw.clone();
        let r = self.gates.check(&raw, id, r);
        self.mirror_gates();
        r
    }

    /// Copies the gates evaluated since the last call into [`VerbRun::gates_so_far`].
    fn mirror_gates(&self) {
        let mut m = self.gates_so_far.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.len();
        m.extend(self.gates.gates.iter().skip(n).cloned());
    }

    /// Records blocking gate `id` as failed with `detail`; returns its error (for a gate whose
    /// failure ends the verb at once, with no value to go on with).
    pub fn fail(&mut self, id: GateId, detail: impl Into<String>) -> SlotError {
        self.trace(format!("gate {}", id.name()));
        let raw = self.raw.clone();
        let e = self.gates.fail(&raw, id, detail.into());
        self.mirror_gates();
        e
    }

    /// Records gate `id` as a non-blocking fact.
    pub fn record(&mut self, id: GateId, r: Observed) {
        self.trace(format!("gate {}", id.name()));
        self.gates.record(id, r);
        self.mirror_gates();
    }

    /// Evaluates gate `id`, blocking or recorded.
    pub fn gate_or_record(
        &mut self,
        id: GateId,
        blocking: bool,
        r: Observed,
    ) -> Result<(), SlotError> {
        if blocking {
            self.gate(id, r)
        } else {
            self.record(id, r);
            Ok(())
        }
    }

    /// Clears destructive step `step`: every gate of `required` must have been evaluated (and,
    /// if blocking, proven) before it. Fails closed otherwise — a gate moved after the step it
    /// protects is caught here at run time and by the unit tests of the verbs.
    ///
    /// Errors: [`SlotError::step`] naming the step and the missing gate.
    pub fn clear(&mut self, step: &str, required: &[GateId]) -> Result<(), SlotError> {
        self.trace(format!("step {step}"));
        match self.gates.missing(required) {
            None => Ok(()),
            Some(g) => Err(self
                .step_err(
                    step,
                    StepError::Missing("a gate that must come before this step was not passed"),
                )
                .with_note(&format!(" (gate `{}`)", g.name()))),
        }
    }

    /// A step that could not run, with its typed cause.
    pub fn step_err(&self, step: &str, cause: impl Into<StepError>) -> SlotError {
        SlotError::step(&self.raw, step, cause)
    }

    /// Appends to the slot journal (only while the lock is held).
    pub fn journal(&self, event: &str, ok: bool, detail: &str) {
        if self.lock.is_some() {
            let _ = layout::journal_append(&self.paths.journal(), self.verb(), event, ok, detail);
        }
    }

    /// A path in this verb's evidence folder (the temporary folder before it is opened).
    pub fn ev_path(&self, name: &str) -> PathBuf {
        self.ev
            .clone()
            .unwrap_or_else(std::env::temp_dir)
            .join(name)
    }

    /// [`VerbRun::ev_write`] on a thread of its own, for evidence beside a gate's facts that the
    /// gate does not read (the raw netfilter text, the sysctls CRIU does not save): its atomic
    /// write and fsync stay off the verb's critical path. [`VerbRun::finish`] waits for it, so the
    /// folder is complete when the verb ends, also when it fails.
    pub fn ev_write_beside(&mut self, name: &str, bytes: Vec<u8>) {
        let file = name.to_string();
        self.ev_make_beside(name, move || vec![(file, bytes)]);
    }

    /// [`VerbRun::ev_write_beside`] of files whose bytes are made on that thread too: `make`
    /// returns (file name, bytes) pairs, each written atomically (never overwriting). For
    /// evidence read after a gate's facts that no gate reads (the sysctls CRIU does not save,
    /// read beside the gates that follow the compared capture). `what` names what is made
    /// (a file name) for an interruption note until it is written. Nothing runs without an
    /// evidence folder.
    pub fn ev_make_beside(
        &mut self,
        what: &str,
        make: impl FnOnce() -> Vec<(String, Vec<u8>)> + Send + 'static,
    ) {
        let Some(d) = self.ev.clone() else {
            return;
        };
        let what = what.to_string();
        let in_flight = self.in_flight.clone();
        in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(what.clone());
        self.pending.push(std::thread::spawn(move || {
            let files = make();
            if let Ok(dir) = EvidenceDir::open(&d) {
                for (name, bytes) in files {
                    let _ = dir.write(&name, &bytes);
                }
            }
            let mut v = in_flight.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = v.iter().position(|w| *w == what) {
                v.remove(i);
            }
        }));
    }

    /// What [`VerbRun::ev_make_beside`] threads are still making (for tests).
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> Vec<String> {
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Writes one file of this verb's evidence folder through [`EvidenceDir::write`] (atomic,
    /// never overwrites). Best effort: a failed write never changes the verb's outcome.
    pub fn ev_write(&self, name: &str, bytes: &[u8]) {
        if let Some(d) = &self.ev
            && let Ok(dir) = EvidenceDir::open(d)
        {
            let _ = dir.write(name, bytes);
        }
    }

    /// Appends one runtime step to `runtime.log` in this verb's evidence folder (best effort):
    /// `what` and, for an invocation, its argv, exit code, duration and stderr / `--log` text.
    pub fn rt_log<T: RtLogged>(&self, what: &str, r: Result<&T, &OciError>) {
        let body = match r {
            Ok(o) => o.logged(),
            Err(e) => format!("FAILED: {e}"),
        };
        if self.ev.is_some()
            && let Ok(mut f) = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.ev_path("runtime.log"))
        {
            let _ = writeln!(f, "[{}] {what}: {}", now_rfc3339(), body.trim_end());
        }
    }

    /// Saves `state.json`. Errors: step `state-write` could not run.
    pub fn save(&self, st: &mut SlotState) -> Result<(), SlotError> {
        st.save(&self.paths.state())
            .map_err(|e| self.step_err("state-write", e))
    }

    /// state dir (no create) → ownership marker → lock → evidence folder → journal start.
    pub fn enter_existing(&mut self) -> Result<(), SlotError> {
        let r = layout::check_state_dir(&self.paths.state_dir, StateDirUse::Existing);
        self.gate(GateId::StateDir, r)?;
        self.enter_slot()
    }

    /// ownership marker → lock → evidence folder → journal start (every verb but `status`).
    pub fn enter_slot(&mut self) -> Result<(), SlotError> {
        let r = layout::check_owner(&self.paths)
            .map(|(_, d)| d)
            .map_err(|(_, d)| d);
        self.gate(GateId::OwnershipMarker, r)?;
        let r = SlotLock::acquire(&self.paths.lock()).map(|l| {
            self.lock = Some(l);
            format!("flock(LOCK_EX|LOCK_NB) on {}", self.paths.lock().display())
        });
        self.gate(GateId::SlotLock, r)?;
        self.open_evidence()
    }

    fn open_evidence(&mut self) -> Result<(), SlotError> {
        let base = self.paths.evidence();
        fs::create_dir_all(&base)
            .map_err(|e| self.step_err("evidence", StepError::io(&base)(e)))?;
        let mut seq = fs::read_dir(&base).map(|r| r.count()).unwrap_or(0) + 1;
        loop {
            let d = base.join(format!("{seq:04}-{}", self.verb()));
            match fs::create_dir(&d) {
                Ok(()) => {
                    self.ev = Some(d.clone());
                    self.journal("start", true, &format!("evidence {}", d.display()));
                    self.interruption = Some(self.interruption_note(&d));
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => seq += 1,
                Err(e) => return Err(self.step_err("evidence", StepError::io(&d)(e))),
            }
        }
    }

    /// Registers what an interrupted verb leaves ([`super::interruption::register`]).
    fn interruption_note(&self, ev: &std::path::Path) -> crate::ns::cleanup::Registration {
        super::interruption::register(super::interruption::NoteInputs {
            ev: ev.to_path_buf(),
            verb: self.verb().to_string(),
            provision: self.args.verb == super::Verb::Provision,
            paths: self.paths.clone(),
            in_flight: self.in_flight.clone(),
            gates_so_far: self.gates_so_far.clone(),
        })
    }

    /// The declared differences, with the binaries recorded at provision.
    pub fn declared(&self, st: Option<&SlotState>) -> Vec<String> {
        let mut v: Vec<String> = DECLARED_DIFFERENCES.iter().map(|s| s.to_string()).collect();
        if let Some(img) = st.and_then(|s| s.image.as_ref())
            && img.kind != ImageKind::Embedded
        {
            let profile = st
                .and_then(|s| s.profile.as_ref())
                .filter(|p| !p.image_from_flags)
                .map(|p| format!("profile {}", p.name))
                .unwrap_or_else(|| "--image".into());
            v.retain(|d| d != super::EMBEDDED_IMAGE_DIFFERENCE);
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
        }
        v.extend(self.extra_diffs.iter().cloned());
        if let Some((_, kind)) = &self.rt_kind {
            v.extend(crate::oci::crun_quirks(*kind, crate::oci::host_is_hybrid()));
            if *kind == RuntimeKind::Crun {
                v.push(format!("A failed crun restore leaves a half-written state folder (config.json, no status) and an empty `{}` cgroup under the slot's cgroup in every hierarchy: the slot removes both when they are its own and empty, and fails closed naming them otherwise.", super::crun::PROXY_CGROUP));
            }
        }
        v
    }

    /// Writes `gates.json`, `timings.json` and `verb.json`; returns the sha256 of `verb.json`'s
    /// bytes (recorded in the journal's end entry).
    fn write_verb_evidence(
        &self,
        res: &Result<(String, Option<SlotState>), SlotError>,
        st: Option<&SlotState>,
        declared: &[String],
    ) -> String {
        let gates = serde_json::to_vec_pretty(&self.gates.gates).unwrap_or_default();
        self.ev_write("gates.json", &gates);
        self.ev_write(
            "timings.json",
            &serde_json::to_vec_pretty(&self.timings).unwrap_or_default(),
        );
        let verb_doc = json!({
            "tool": "netprobe",
            "tool_version": env!("CARGO_PKG_VERSION"),
            "verb": self.verb(),
            "slot": self.paths.slot,
            "ok": res.is_ok(),
            "summary": res.as_ref().map(|(s, _)| s.clone()).ok(),
            "error": res.as_ref().err().map(|e| e.to_json()),
            "started_at": self.started_at,
            "finished_at": now_rfc3339(),
            "timings_ms": self.timings,
            "gates": self.gates.gates,
            "facts": self.facts,
            "phase": st.map(|s| s.phase),
            "declared_differences": declared,
        });
        let bytes = serde_json::to_vec_pretty(&verb_doc).unwrap_or_default();
        self.ev_write("verb.json", &bytes);
        crate::evidence::sha256_hex(&bytes)
    }

    /// The journal's `end` entry, naming the evidence folder and `verb.json`'s sha256.
    fn journal_end(&self, ok: bool, detail: &str, verb_sha256: Option<String>) {
        if self.lock.is_none() {
            return;
        }
        let e = layout::JournalEntry {
            at: now_rfc3339(),
            pid: std::process::id(),
            verb: self.verb().into(),
            event: "end".into(),
            ok,
            detail: detail.into(),
            evidence: self
                .ev
                .as_ref()
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().into_owned()),
            verb_sha256,
        };
        let _ = layout::journal_append_entry(&self.paths.journal(), &e);
    }

    /// Ends the verb: total time, `gates.json`, `timings.json`, `verb.json`, journal end; the
    /// outcome, or the error with this verb's evidence folder attached.
    pub fn finish(
        mut self,
        res: Result<(String, Option<SlotState>), SlotError>,
    ) -> Result<SlotOutcome, SlotError> {
        for w in std::mem::take(&mut self.pending) {
            let _ = w.join();
        }
        self.timings.insert("total".into(), ms_since(self.started));
        let st = match &res {
            Ok((_, s)) => s.clone(),
            Err(_) => SlotState::load(&self.paths.state()).ok(),
        };
        let declared = self.declared(st.as_ref());
        let verb_sha = self
            .ev
            .is_some()
            .then(|| self.write_verb_evidence(&res, st.as_ref(), &declared));
        match res {
            Ok((summary, st)) => {
                self.journal_end(true, &summary, verb_sha);
                Ok(SlotOutcome {
                    verb: self.args.verb,
                    slot: self.paths.slot,
                    phase: st.map(|s| s.phase),
                    summary,
                    gates: self.gates.gates.clone(),
                    timings_ms: self.timings.clone(),
                    facts: self.facts.clone(),
                    declared_differences: declared,
                    evidence: self.ev.clone(),
                    status: None,
                })
            }
            Err(mut e) => {
                self.journal_end(false, &e.to_string(), verb_sha);
                if let Some(d) = &self.ev {
                    e = e.with_evidence(d.clone());
                }
                Err(e)
            }
        }
    }
}

/// What [`VerbRun::rt_log`] writes for a successful runtime step.
pub(crate) trait RtLogged {
    fn logged(&self) -> String;
}

impl RtLogged for crate::oci::RuntimeOutcome {
    fn logged(&self) -> String {
        let exit = match self.code {
            Some(c) => format!("exit code {c}"),
            None => "killed by a signal".to_string(),
        };
        format!(
            "{} -> {exit} in {} ms\n{}",
            self.argv.join(" "),
            self.duration_ms,
            self.stderr
        )
    }
}

impl RtLogged for String {
    fn logged(&self) -> String {
        self.clone()
    }
}

impl RtLogged for () {
    fn logged(&self) -> String {
        "ok".into()
    }
}

/// The declared difference about the slot's binaries: each recorded binary (path, version,
/// sha256) against the reference arm's pin of `host/pins.toml` ([`crate::host::pins`]): the
/// pinned one when its version (and sha256, where pinned) match, else named as not the pin.
fn binaries_difference(st: &SlotState) -> String {
    let pins = crate::host::pins::pins();
    let one = |what: &str, b: &super::state::BinaryPin, pin: &crate::host::pins::Pin| {
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
