//! [`VerbRun`]: what every verb does around its own steps — enter (state dir, ownership marker,
//! lock, evidence folder, journal), gates ([`GateId`]) and the check that a destructive step
//! comes after its gates ([`VerbRun::clear`]), timings, facts, the runtime log, and the end
//! (`gates.json`, `timings.json`, `verb.json`, journal). Gates, timings and facts are kept in
//! one record shared with the verb's interruption note ([`super::verb_record`]).

use crate::evidence::now_rfc3339;
use crate::oci::{Runtime, RuntimeKind, RuntimeOps};
use crate::slot::JournalEvent;
use crate::slot::error::StepId;
use crate::slot::error::{SlotError, StepError};
use crate::slot::gate::{GateId, GateLog, Observed};
use crate::slot::record::evidence_writes::{Unwritten, UnwrittenLog};
use crate::slot::record::journal;
use crate::slot::record::verb_record::{self as vrec, VerbRecord};
use crate::slot::resources::cgroups;
use crate::slot::resources::crun_leftovers;
use crate::slot::resources::fs_tools::ms_since;
use crate::slot::resources::sealed_binaries;
use crate::slot::resources::slot_dir::{self, SlotPaths};
use crate::slot::resources::slot_lock::SlotLock;
use crate::slot::resources::state_dir::{self, StateDirUse};
use crate::slot::state::SlotState;
use crate::slot::verb::prune;
use crate::slot::{SlotArgs, SlotOutcome};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What a verb's own steps came to: its summary and the slot's state after it, or its error.
pub(crate) type VerbResult = Result<(String, Option<SlotState>), SlotError>;

/// Makes the runtime a verb drives: `(runtime binary, CRIU binary, runtime root, runtime kind,
/// systemd cgroup driver, the slot's owner id)`.
pub(crate) type MakeRuntime<'e> =
    &'e (dyn Fn(&Path, &Path, &Path, RuntimeKind, bool, &str) -> Box<dyn RuntimeOps> + Sync);

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
/// `kind` (from `--version`, [`crun_leftovers::detect_kind`]) gives crun its private mount
/// namespace, the `--root /run/crun` bind and `--cgroup-manager` ([`crate::oci::crun_quirks`]);
/// `systemd` adds the systemd cgroup driver (`--systemd-cgroup`) on every call; `owner_id` (the
/// slot's, from `owner.json`) tags the temporary CRIU PATH folders and runc logs the calls make
/// ([`Runtime::with_slot_owner`]), so only this slot's cleanup sweeps what a killed verb left.
pub(crate) fn real_runtime(
    rt: &Path,
    cr: &Path,
    root: &Path,
    kind: RuntimeKind,
    systemd: bool,
    owner_id: &str,
) -> Box<dyn RuntimeOps> {
    Box::new(
        Runtime::new(rt, root, Some(cr.to_path_buf()))
            .with_kind(kind)
            .with_systemd_cgroup(systemd)
            .with_slot_owner(owner_id),
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
    /// Gates (`gates.json`), step timings (`timings.json`), facts, declared differences added
    /// and the detected runtime kind, shared with the interruption note.
    pub(crate) rec: VerbRecord,
    /// This verb's evidence folder, once opened.
    pub ev: Option<PathBuf>,
    /// When the verb started (monotonic).
    pub started: Instant,
    /// When the verb started (RFC 3339).
    pub started_at: String,
    /// The slot's exclusive lock, once taken.
    pub lock: Option<SlotLock>,
    /// The runtime factory, root requirement and trace.
    pub env: &'a SlotEnv<'a>,
    /// Evidence files being written on their own threads ([`VerbRun::ev_write_beside`]);
    /// joined by [`VerbRun::finish`] before the verb's own evidence is written.
    pub(super) pending: Vec<std::thread::JoinHandle<()>>,
    /// What the `pending` threads are still making (a file name each, removed once written):
    /// an interruption note names them as possibly missing (a signal ends the verb without
    /// joining them).
    pub(super) in_flight: Arc<Mutex<Vec<String>>>,
    /// The interruption note registered once the evidence folder exists
    /// ([`VerbRun::interruption_note`]); dropped with the run.
    interruption: Option<crate::ns::cleanup::Registration>,
    /// Source files of the sealed copies re-hashed to their pin by this verb, with the `stat`
    /// they kept from before the hash to after it: recorded in `state.json` at the verb's end
    /// ([`sealed_binaries::SourceRefresh::apply`]), so the next verb compares by `stat` again.
    pub(crate) refreshed: sealed_binaries::SourceRefresh,
    /// What the verb could not write of its own record (evidence files, journal entries, its
    /// last `state.json` update), shared with the `pending` threads: any makes the verb fail at
    /// its end ([`super::evidence_writes`]).
    pub(crate) unwritten: UnwrittenLog,
}

impl<'a> VerbRun<'a> {
    /// A run of `args.verb` on the slot at `paths`, nothing entered yet.
    pub fn new(args: &'a SlotArgs, raw: String, paths: SlotPaths, env: &'a SlotEnv<'a>) -> Self {
        VerbRun {
            args,
            raw,
            paths,
            rec: VerbRecord::default(),
            ev: None,
            started: Instant::now(),
            started_at: now_rfc3339(),
            lock: None,
            env,
            pending: Vec::new(),
            in_flight: Arc::default(),
            interruption: None,
            refreshed: Default::default(),
            unwritten: UnwrittenLog::default(),
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
                .is_some_and(|s| sealed_binaries::exec_path(h.pid, s) == rt)
        };
        let detected = self.rec.lock().rt_kind.is_some();
        if let (false, Some(k)) = (detected, st.runtime.kind)
            && (st.runtime.path == rt || st.holder.as_ref().is_some_and(sealed))
        {
            // The recorded path and its sealed copy are the same binary (one pin).
            self.rec.lock().rt_kind = Some((vec![rt.to_path_buf(), st.runtime.path.clone()], k));
            self.fact(
                "runtime_kind_from",
                format!(
                    "state.json runtime.kind, detected from {} --version at provision; the same binary while its sha256 pin holds (gate {})",
                    st.runtime.path.display(),
                    crate::slot::gate::GateId::RuntimeBinaryPinned.name()
                ),
            );
        }
        let kind = self.runtime_kind(rt);
        let systemd = cgroups::uses_systemd(st);
        (self.env.make_runtime)(rt, cr, &st.runtime_root, kind, systemd, &st.owner_id)
    }

    /// The kind of runtime `rt` (detected once per verb and path, [`crun_leftovers::detect_kind`]),
    /// recorded in the facts.
    pub fn runtime_kind(&mut self, rt: &Path) -> RuntimeKind {
        let known = match &self.rec.lock().rt_kind {
            Some((p, k)) if p.iter().any(|p| p == rt) => Some(*k),
            _ => None,
        };
        let kind = match known {
            Some(k) => k,
            None => {
                // `--version` runs a process: not under the record's lock.
                let (k, how) = crun_leftovers::detect_kind(rt);
                self.rec.lock().rt_kind = Some((vec![rt.to_path_buf()], k));
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
    pub fn record_release<E: std::fmt::Display>(
        &mut self,
        r: Result<Option<(String, Value)>, E>,
        done_fact: &str,
        left_fact: &str,
    ) -> Option<String> {
        match r {
            Ok(None) => None,
            Ok(Some((d, v))) => {
                self.journal(JournalEvent::Step, true, &d);
                self.fact(done_fact, v);
                None
            }
            Err(e) => {
                let e = e.to_string();
                self.journal(JournalEvent::Step, false, &e);
                self.fact(left_fact, e.clone());
                Some(e)
            }
        }
    }

    /// Records fact `k`.
    pub fn fact(&mut self, k: &str, v: impl Into<Value>) {
        let v = v.into();
        self.rec.lock().facts.insert(k.into(), v);
    }

    /// Records fact `k` as `value`'s JSON; a value that cannot be encoded is recorded as a
    /// part of `verb.json` not written ([`VerbRun::unwritten`]).
    pub fn fact_json<T: serde::Serialize + ?Sized>(&mut self, k: &str, value: &T) {
        match serde_json::to_value(value) {
            Ok(v) => self.fact(k, v),
            Err(e) => self
                .unwritten
                .push(Unwritten::encode(&format!("verb.json (fact {k})"), &e)),
        }
    }

    /// Fact `k`, if recorded.
    pub fn fact_of(&self, k: &str) -> Option<Value> {
        self.rec.lock().facts.get(k).cloned()
    }

    /// Adds a declared difference of this verb (e.g. an overridden probe gate).
    pub fn declare(&mut self, difference: String) {
        self.rec.lock().extra_diffs.push(difference);
    }

    /// The gates evaluated so far, in order (a copy).
    pub fn gate_log(&self) -> GateLog {
        self.rec.lock().gates.clone()
    }

    /// Records `ms` milliseconds (monotonic clock) as timing `name`.
    pub fn timing(&mut self, name: &str, ms: u64) {
        self.rec.lock().timings.insert(name.into(), ms);
    }

    /// Runs `f`, recording its milliseconds as timing `name`.
    pub fn time<T>(&mut self, name: &str, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = f();
        self.took(name, t);
        out
    }

    /// Records the milliseconds since `t` as timing `name`.
    pub fn took(&mut self, name: &str, t: Instant) {
        self.timing(name, ms_since(t));
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
        self.rec.lock().gates.check(&self.raw, id, r)
    }

    /// Records blocking gate `id` as failed with `detail`; returns its error (for a gate whose
    /// failure ends the verb at once, with no value to go on with).
    pub fn fail(&mut self, id: GateId, detail: impl Into<String>) -> SlotError {
        self.trace(format!("gate {}", id.name()));
        let detail = detail.into();
        self.rec.lock().gates.fail(&self.raw, id, detail)
    }

    /// Records gate `id` as a non-blocking fact.
    pub fn record(&mut self, id: GateId, r: Observed) {
        self.trace(format!("gate {}", id.name()));
        self.rec.lock().gates.record(id, r);
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
    pub fn clear(&mut self, step: StepId, required: &[GateId]) -> Result<(), SlotError> {
        self.trace(format!("step {}", step.name()));
        let missing = self.rec.lock().gates.missing(required);
        match missing {
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
    pub fn step_err(&self, step: StepId, cause: impl Into<StepError>) -> SlotError {
        SlotError::step(&self.raw, step, cause)
    }

    /// Appends to the slot journal (only while the lock is held); an append that fails is
    /// recorded as not written ([`VerbRun::unwritten`]).
    pub fn journal(&self, event: JournalEvent, ok: bool, detail: &str) {
        if self.lock.is_some()
            && let Err(e) = journal::journal_append(
                &self.paths.journal(),
                self.verb(),
                event.clone(),
                ok,
                detail,
            )
        {
            let what = format!("append of a `{event}` entry");
            let file = self.paths.journal().display().to_string();
            self.unwritten.push(Unwritten::io(&file, &what, &e));
        }
    }

    /// Saves `state.json`. Errors: step `state-write` could not run.
    pub fn save(&self, st: &mut SlotState) -> Result<(), SlotError> {
        self.trace(format!("state {}", st.phase.name()));
        st.save(&self.paths.state())
            .map_err(|e| self.step_err(StepId::StateWrite, e))
    }

    /// state dir (no create) → ownership marker → lock → evidence folder → journal start.
    pub fn enter_existing(&mut self) -> Result<(), SlotError> {
        let r = state_dir::check_state_dir(&self.paths.state_dir, StateDirUse::Existing);
        self.gate(GateId::StateDir, r)?;
        self.enter_slot()
    }

    /// ownership marker → lock → evidence folder → journal start (every verb but `status`).
    pub fn enter_slot(&mut self) -> Result<(), SlotError> {
        let r = slot_dir::check_owner(&self.paths)
            .map(|(_, d)| d)
            .map_err(|(_, d)| d);
        self.gate(GateId::OwnershipMarker, r)?;
        let r = SlotLock::acquire(&self.paths.lock())
            .map(|l| {
                self.lock = Some(l);
                format!("flock(LOCK_EX|LOCK_NB) on {}", self.paths.lock().display())
            })
            .map_err(|e| e.to_string());
        self.gate(GateId::SlotLock, r)?;
        self.open_evidence()
    }

    fn open_evidence(&mut self) -> Result<(), SlotError> {
        let base = self.paths.evidence();
        fs::create_dir_all(&base).map_err(|e| self.folder_error(&base, &e))?;
        // After the newest folder (not after the count: `slot prune` removes older ones, and a
        // number is never given twice — the journal names folders by it).
        let mut seq = prune::verb_folders(&base)
            .unwrap_or_default()
            .iter()
            .filter_map(|n| n.split_once('-').and_then(|(s, _)| s.parse::<usize>().ok()))
            .max()
            .unwrap_or(0)
            + 1;
        loop {
            let d = base.join(format!("{seq:04}-{}", self.verb()));
            match fs::create_dir(&d) {
                Ok(()) => {
                    self.ev = Some(d.clone());
                    self.journal(
                        JournalEvent::Start,
                        true,
                        &format!("evidence {}", d.display()),
                    );
                    self.interruption = Some(self.interruption_note(&d));
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => seq += 1,
                Err(e) => return Err(self.folder_error(&d, &e)),
            }
        }
    }

    /// The error of an evidence folder `d` that cannot be created (exit 2, as one netprobe
    /// cannot write into), with the state directory's filesystem; nothing was done yet.
    fn folder_error(&self, d: &Path, e: &std::io::Error) -> SlotError {
        let fs = crate::slot::record::evidence_writes::StateFs::of(&self.paths.state_dir, Some(d));
        SlotError::evidence_incomplete(
            &self.raw,
            crate::slot::record::evidence_writes::folder_message(
                self.args.verb,
                &self.paths.root,
                d,
                e,
                &fs,
            ),
        )
    }

    /// Registers what an interrupted verb leaves ([`crate::slot::record::interruption::register`]).
    fn interruption_note(&self, ev: &std::path::Path) -> crate::ns::cleanup::Registration {
        crate::slot::record::interruption::register(crate::slot::record::interruption::NoteInputs {
            ev: ev.to_path_buf(),
            verb: self.verb().to_string(),
            provision: self.args.verb == crate::slot::Verb::Provision,
            paths: self.paths.clone(),
            in_flight: self.in_flight.clone(),
            record: self.rec.clone(),
            started: self.started,
            started_at: self.started_at.clone(),
        })
    }

    /// The declared differences, with the binaries recorded at provision
    /// ([`vrec::declared`]).
    pub fn declared(&self, st: Option<&SlotState>) -> Vec<String> {
        let (extra, kind) = {
            let r = self.rec.lock();
            (r.extra_diffs.clone(), r.rt_kind.as_ref().map(|(_, k)| *k))
        };
        vrec::declared(st, &extra, kind)
    }

    /// Ends the verb: total time, then — once it claimed the end ([`VerbRecord::claim_end`]) —
    /// `gates.json`, `timings.json`, `verb.json` with its artifact list and the journal's end,
    /// each write checked ([`VerbRun::write_end`]); the outcome, or the error with this verb's
    /// evidence folder attached. A verb any of whose own record could not be written fails
    /// (exit 2), whatever its work came to ([`super::evidence_writes`]).
    pub fn finish(mut self, res: VerbResult) -> Result<SlotOutcome, SlotError> {
        let t = Instant::now();
        for w in std::mem::take(&mut self.pending) {
            let _ = w.join();
        }
        self.took("evidence-beside-wait", t);
        // Once the outcome is decided and only for a verb that succeeded: its large files
        // stored compressed before the end record lists them ([`super::evidence_compress`]).
        if let (Ok(_), Some(ev)) = (&res, &self.ev) {
            let t = Instant::now();
            if self.args.verb == crate::slot::Verb::Reset {
                // What the base folders store already is kept by reference
                // ([`super::evidence_refer`]).
                crate::slot::record::evidence_refer::refer_at_end(&self.paths, ev, &self.rec);
            }
            crate::slot::record::evidence_compress::compress_at_end(ev, &self.rec);
            self.took("evidence-compress", t);
        }
        self.took("total", self.started);
        let st = match &res {
            Ok((_, s)) => s.clone(),
            Err(_) => SlotState::load(&self.paths.state()).ok(),
        };
        let declared = self.declared(st.as_ref());
        // A signal that came as the verb ended may have let its note claim the end first: the
        // note's timings.json, verb.json and journal end stand (the process is exiting).
        let (ours, rec) = self.rec.claim_end();
        let res = match (ours, self.ev.clone()) {
            (true, Some(ev)) => self.write_end(&ev, res, &rec, st.as_ref(), &declared),
            (true, None) => {
                let (ok, detail) = match &res {
                    Ok((s, _)) => (true, s.clone()),
                    Err(e) => (false, e.to_string()),
                };
                let _ = self.journal_end(ok, &detail, None);
                res
            }
            (false, _) => res,
        };
        let mut rec = rec;
        if let (true, Ok((_, Some(st)))) = (ours, &res) {
            self.keep_per_profile(st, &mut rec.facts);
        }
        match res {
            Ok((summary, st)) => Ok(SlotOutcome {
                verb: self.args.verb,
                slot: self.paths.slot,
                phase: st.map(|s| s.phase),
                summary,
                gates: rec.gates.gates,
                timings_ms: rec.timings,
                facts: rec.facts,
                declared_differences: declared,
                evidence: self.ev.clone(),
                status: None,
            }),
            Err(mut e) => {
                if let Some(d) = &self.ev {
                    e = e.with_evidence(d.clone());
                }
                Err(e)
            }
        }
    }
}

impl VerbRun<'_> {
    /// After a verb that succeeded and whose end is recorded: the slot profile's `[evidence]
    /// keep = N` ([`crate::profile::EvidenceSpec`]) prunes the slot's oldest verb folders as
    /// `slot prune --keep N` does ([`prune::prune_locked`], under this verb's lock; the
    /// journal records each removal and why). What it removed is added to the outcome's facts
    /// (`evidence_pruned`; the verb's `verb.json` is sealed already); a prune that fails is
    /// journalled (event `prune-failed`) and in fact `evidence_prune_error`, the verb's outcome
    /// stands.
    fn keep_per_profile(
        &self,
        st: &SlotState,
        facts: &mut std::collections::BTreeMap<String, Value>,
    ) {
        let Some(keep) = st.profile.as_ref().and_then(|p| p.profile.evidence.keep) else {
            return;
        };
        let (Some(ev), Some(_)) = (&self.ev, &self.lock) else {
            return;
        };
        let after = ev
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let cause = prune::PruneCause::Profile { after: &after };
        match prune::prune_locked(&self.paths, &self.raw, keep, false, cause) {
            Ok(o) => {
                // What was pruned could not be encoded: said as the prune's error.
                let (k, v) = match serde_json::to_value(&o) {
                    Ok(v) => ("evidence_pruned", v),
                    Err(e) => (
                        "evidence_prune_error",
                        format!("encode as JSON: {e}").into(),
                    ),
                };
                facts.insert(k.into(), v);
            }
            Err(e) => {
                let _ = journal::journal_append(
                    &self.paths.journal(),
                    "prune",
                    JournalEvent::PruneFailed,
                    false,
                    &format!("[evidence] keep = {keep} after {after}: {e}"),
                );
                facts.insert("evidence_prune_error".into(), Value::from(e.to_string()));
            }
        }
    }
}
