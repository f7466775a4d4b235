//! The verbs. Order in every verb: slot number → root → state dir → ownership marker → lock →
//! evidence folder + journal → gates → steps (each destructive step preceded by the gates that
//! protect it) → evidence.

use super::error::SlotError;
use super::gate::GateLog;
use super::layout::{self, SlotLock, SlotPaths, StateDirUse};
use super::state::*;
use super::support::{self, ms_since, timed};
use super::{DECLARED_DIFFERENCES, SLOT_RESOURCES, SlotArgs, SlotOutcome, Verb, mounts, net};
use crate::criu::inventory::{ImageFile, inventory};
use crate::evidence::result::{RungName, Status as RungStatus, VerdictCode};
use crate::evidence::{EvidenceDir, read_result, sha256_file};
use crate::host::{self, BinaryKind};
use crate::netlink::NetState;
use crate::ns::{self, Holder, HolderOptions, NsError, ProcessIdentity};
use crate::oci::{
    self, BundleSpec, ContainerGuard, NetnsSpec, OciError, Runtime, config_sha256,
    read_bundle_spec, refuse_existing, write_bundle,
};
use crate::probe;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const STATE_DIR_FACT: &str =
    "the state directory is ours (not a symlink, our uid, not group/world-writable, marked)";

struct Ctx<'a> {
    args: &'a SlotArgs,
    raw: String,
    paths: SlotPaths,
    gates: GateLog,
    timings: BTreeMap<String, u64>,
    facts: BTreeMap<String, Value>,
    ev: Option<PathBuf>,
    started: Instant,
    started_at: String,
    lock: Option<SlotLock>,
    extra_diffs: Vec<String>,
}

impl<'a> Ctx<'a> {
    fn verb(&self) -> &'static str {
        self.args.verb.as_str()
    }

    fn fact(&mut self, k: &str, v: impl Into<Value>) {
        self.facts.insert(k.into(), v.into());
    }

    fn time<T>(&mut self, name: &str, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = f();
        self.timings.insert(name.into(), ms_since(t));
        out
    }

    /// [`Ctx::time`] for a runtime call that runs CRIU: the slot lock is handed to the children
    /// (so the slot stays locked until runc and CRIU exit, even if netprobe is killed).
    fn time_with_lock_inherited<T>(&mut self, name: &str, f: impl FnOnce() -> T) -> T {
        let lock = self.lock.take();
        let out = self.time(name, || match &lock {
            Some(l) => l.inherited_by_children(f),
            None => f(),
        });
        self.lock = lock;
        out
    }

    fn gate(&mut self, name: &str, fact: &str, r: Result<String, String>) -> Result<(), SlotError> {
        let raw = self.raw.clone();
        match r {
            Ok(d) => self.gates.check(&raw, name, fact, true, d),
            Err(d) => self.gates.check(&raw, name, fact, false, d),
        }
    }

    fn host_gate(
        &mut self,
        name: &str,
        fact: &str,
        r: Result<String, String>,
    ) -> Result<(), SlotError> {
        let raw = self.raw.clone();
        match r {
            Ok(d) => self.gates.check_host(&raw, name, fact, true, d),
            Err(d) => self.gates.check_host(&raw, name, fact, false, d),
        }
    }

    fn run_err(&self, step: &str, msg: impl Into<String>) -> SlotError {
        SlotError::run(&self.raw, step, msg)
    }

    fn journal(&self, event: &str, ok: bool, detail: &str) {
        if self.lock.is_some() {
            let _ = layout::journal_append(&self.paths.journal(), self.verb(), event, ok, detail);
        }
    }

    fn ev_path(&self, name: &str) -> PathBuf {
        self.ev
            .clone()
            .unwrap_or_else(std::env::temp_dir)
            .join(name)
    }

    /// Writes one file of this verb's evidence folder through [`EvidenceDir::write`] (atomic,
    /// never overwrites). Evidence is best effort: a failed write never changes the verb's outcome.
    fn ev_write(&self, name: &str, bytes: &[u8]) {
        if let Some(d) = &self.ev
            && let Ok(dir) = EvidenceDir::open(d)
        {
            let _ = dir.write(name, bytes);
        }
    }

    /// Appends one runtime step to `runtime.log` in this verb's evidence folder (best effort):
    /// `what` and, for an invocation, its argv, exit code, duration and stderr / `--log` text.
    fn rt_log<T: RtLogged>(&self, what: &str, r: Result<&T, &OciError>) {
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
            let _ = writeln!(
                f,
                "[{}] {what}: {}",
                support::now_rfc3339(),
                body.trim_end()
            );
        }
    }

    fn save(&self, st: &mut SlotState) -> Result<(), SlotError> {
        st.save(&self.paths.state())
            .map_err(|e| self.run_err("state-write", e))
    }

    /// state dir (no create) → ownership marker → lock → evidence folder → journal start.
    fn enter_existing(&mut self) -> Result<(), SlotError> {
        let r = layout::check_state_dir(&self.paths.state_dir, StateDirUse::Existing);
        self.gate("state-dir", STATE_DIR_FACT, r)?;
        self.enter_slot()
    }

    /// ownership marker → lock → evidence folder → journal start (every verb but `status`).
    fn enter_slot(&mut self) -> Result<(), SlotError> {
        let r = layout::check_owner(&self.paths)
            .map(|(_, d)| d)
            .map_err(|(_, d)| d);
        self.gate(
            "ownership-marker",
            "the slot directory carries our ownership marker",
            r,
        )?;
        self.take_lock()?;
        self.open_evidence()
    }

    fn take_lock(&mut self) -> Result<(), SlotError> {
        match SlotLock::acquire(&self.paths.lock()) {
            Ok(l) => {
                self.lock = Some(l);
                let d = format!("flock(LOCK_EX|LOCK_NB) on {}", self.paths.lock().display());
                self.gate(
                    "slot-lock",
                    "this verb holds the slot's exclusive lock",
                    Ok(d),
                )
            }
            Err(d) => self.gate(
                "slot-lock",
                "this verb holds the slot's exclusive lock",
                Err(d),
            ),
        }
    }

    fn open_evidence(&mut self) -> Result<(), SlotError> {
        let base = self.paths.evidence();
        fs::create_dir_all(&base)
            .map_err(|e| self.run_err("evidence", format!("{}: {e}", base.display())))?;
        let mut seq = fs::read_dir(&base).map(|r| r.count()).unwrap_or(0) + 1;
        loop {
            let d = base.join(format!("{seq:04}-{}", self.verb()));
            match fs::create_dir(&d) {
                Ok(()) => {
                    self.ev = Some(d.clone());
                    self.journal("start", true, &format!("evidence {}", d.display()));
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => seq += 1,
                Err(e) => return Err(self.run_err("evidence", format!("{}: {e}", d.display()))),
            }
        }
    }

    fn declared(&self, st: Option<&SlotState>) -> Vec<String> {
        let mut v: Vec<String> = DECLARED_DIFFERENCES.iter().map(|s| s.to_string()).collect();
        if let Some(st) = st {
            v.push(format!(
                "Binaries are those recorded at provision, not the reference arm's pins (runc 1.5.2, CRIU 4.3): runtime {} sha256 {}, CRIU {} sha256 {}.",
                st.runtime.path.display(),
                st.runtime.sha256,
                st.criu.path.display(),
                st.criu.sha256
            ));
        }
        v.extend(self.extra_diffs.iter().cloned());
        v
    }
}

/// Entry point for [`super::run_verb`].
pub(super) fn run(args: &SlotArgs) -> Result<SlotOutcome, SlotError> {
    let raw = args.slot.clone();
    let n = layout::parse_slot(&raw)?;
    usage_checks(args, &raw)?;
    if !nix::unistd::geteuid().is_root() {
        return Err(SlotError::host(
            &raw,
            "root",
            "netprobe slot needs root (namespaces, mounts, runc, CRIU)",
        ));
    }
    let paths = SlotPaths::new(&args.state_dir, n);
    let mut ctx = Ctx {
        args,
        raw,
        paths,
        gates: GateLog::default(),
        timings: BTreeMap::new(),
        facts: BTreeMap::new(),
        ev: None,
        started: Instant::now(),
        started_at: support::now_rfc3339(),
        lock: None,
        extra_diffs: Vec::new(),
    };
    if args.verb == Verb::Status {
        return status(&mut ctx);
    }
    let res = match args.verb {
        Verb::Provision => provision(&mut ctx),
        Verb::Snapshot => with_existing(&mut ctx, snapshot),
        Verb::Restore => with_existing(&mut ctx, |c, s| restore(c, s, false)),
        Verb::Reset => with_existing(&mut ctx, |c, s| restore(c, s, true)),
        Verb::Cleanup => with_existing(&mut ctx, cleanup),
        Verb::Status => unreachable!(),
    };
    finish(ctx, res)
}

fn usage_checks(a: &SlotArgs, raw: &str) -> Result<(), SlotError> {
    let prov = a.verb == Verb::Provision;
    if !prov
        && (a.image.is_some()
            || a.image_sha256.is_some()
            || a.probe_evidence.is_some()
            || a.no_probe_gate)
    {
        return Err(SlotError::usage(
            raw,
            "--image, --image-sha256, --probe-evidence and --no-probe-gate are for provision only",
        ));
    }
    if a.no_probe_gate && a.reason.as_deref().map(str::trim).unwrap_or("").is_empty() {
        return Err(SlotError::usage(
            raw,
            "--no-probe-gate needs --reason TEXT (recorded in the slot)",
        ));
    }
    if a.no_probe_gate && a.probe_evidence.is_some() {
        return Err(SlotError::usage(
            raw,
            "--no-probe-gate and --probe-evidence exclude each other",
        ));
    }
    if let Some(h) = &a.image_sha256
        && (h.len() != 64
            || !h
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    {
        return Err(SlotError::usage(
            raw,
            format!("--image-sha256 {h:?}: expected 64 lower-case hex digits"),
        ));
    }
    if let Some(img) = &a.image {
        let is_qcow = img.extension().is_some_and(|e| e == "qcow2");
        if is_qcow && a.image_sha256.is_none() {
            return Err(SlotError::usage(
                raw,
                "a .qcow2 --image must be pinned with --image-sha256",
            ));
        }
        if !is_qcow && a.image_sha256.is_some() {
            return Err(SlotError::usage(
                raw,
                "--image-sha256 applies to a .qcow2 image only",
            ));
        }
    }
    Ok(())
}

fn with_existing(
    ctx: &mut Ctx,
    f: impl FnOnce(&mut Ctx, &mut SlotState) -> Result<String, SlotError>,
) -> Result<(String, Option<SlotState>), SlotError> {
    let t = Instant::now();
    ctx.enter_existing()?;
    ctx.timings.insert("enter".into(), ms_since(t));
    let r = SlotState::load(&ctx.paths.state());
    let mut st = match r {
        Ok(s) => {
            ctx.gate(
                "slot-state",
                "state.json is readable and names this slot",
                if s.slot == ctx.paths.slot {
                    Ok(format!("phase {:?}", s.phase))
                } else {
                    Err(format!("state.json names slot {}", s.slot))
                },
            )?;
            s
        }
        Err(e) => {
            ctx.gate(
                "slot-state",
                "state.json is readable and names this slot",
                Err(e),
            )?;
            unreachable!()
        }
    };
    if ctx.args.verb != Verb::Cleanup {
        let r = if st.phase == Phase::Clean {
            Err(format!(
                "slot {} was cleaned up (phase clean): its container, mounts and holder are \
                 released and a slot is never re-provisioned in place; provision a new slot \
                 number, or remove the slot folder {} after keeping its evidence ({})",
                ctx.paths.slot,
                ctx.paths.root.display(),
                ctx.paths.evidence().display()
            ))
        } else {
            Ok(format!("phase {:?}", st.phase))
        };
        ctx.gate(
            "slot-not-clean",
            "the slot has not been cleaned up (a clean slot has nothing left to drive)",
            r,
        )?;
    }
    let r = f(ctx, &mut st);
    st.last_verb = Some(ctx.verb().into());
    st.last_ok = r.is_ok();
    let _ = st.save_if_changed(&ctx.paths.state());
    r.map(|s| (s, Some(st)))
}

fn finish(
    mut ctx: Ctx,
    res: Result<(String, Option<SlotState>), SlotError>,
) -> Result<SlotOutcome, SlotError> {
    ctx.timings.insert("total".into(), ms_since(ctx.started));
    let st = match &res {
        Ok((_, s)) => s.clone(),
        Err(_) => SlotState::load(&ctx.paths.state()).ok(),
    };
    let declared = ctx.declared(st.as_ref());
    if ctx.ev.is_some() {
        let gates = serde_json::to_vec_pretty(&ctx.gates.gates).unwrap_or_default();
        ctx.ev_write("gates.json", &gates);
        ctx.ev_write(
            "timings.json",
            &serde_json::to_vec_pretty(&ctx.timings).unwrap_or_default(),
        );
        let verb_doc = json!({
            "tool": "netprobe",
            "tool_version": env!("CARGO_PKG_VERSION"),
            "verb": ctx.verb(),
            "slot": ctx.paths.slot,
            "ok": res.is_ok(),
            "summary": res.as_ref().map(|(s, _)| s.clone()).ok(),
            "error": res.as_ref().err().map(|e| e.to_json()),
            "started_at": ctx.started_at,
            "finished_at": support::now_rfc3339(),
            "timings_ms": ctx.timings,
            "gates": ctx.gates.gates,
            "facts": ctx.facts,
            "phase": st.as_ref().map(|s| s.phase),
            "declared_differences": declared,
        });
        ctx.ev_write(
            "verb.json",
            &serde_json::to_vec_pretty(&verb_doc).unwrap_or_default(),
        );
    }
    match res {
        Ok((summary, st)) => {
            ctx.journal("end", true, &summary);
            Ok(SlotOutcome {
                verb: ctx.args.verb,
                slot: ctx.paths.slot,
                phase: st.map(|s| s.phase),
                summary,
                gates: ctx.gates.gates.clone(),
                timings_ms: ctx.timings.clone(),
                facts: ctx.facts.clone(),
                declared_differences: declared,
                evidence: ctx.ev.clone(),
                status: None,
            })
        }
        Err(mut e) => {
            ctx.journal("end", false, &e.to_string());
            if let Some(d) = &ctx.ev {
                e = e.with_evidence(d.clone());
            }
            Err(e)
        }
    }
}

// ------------------------------------------------------------------ shared gates

/// What [`Ctx::rt_log`] writes for a successful runtime step.
trait RtLogged {
    fn logged(&self) -> String;
}

impl RtLogged for oci::RuntimeOutcome {
    fn logged(&self) -> String {
        format!(
            "{} -> exit {:?} in {} ms\n{}",
            self.argv.join(" "),
            self.code,
            self.duration_ms,
            self.stderr
        )
    }
}

impl RtLogged for () {
    fn logged(&self) -> String {
        "ok".into()
    }
}

fn criu_config_gate(ctx: &mut Ctx, blocking: bool) -> Result<(), SlotError> {
    let fact = "no CRIU configuration file is present (they silently change checkpoint behaviour)";
    let r = match host::refuse_criu_config() {
        Ok(()) => Ok("none of /etc/criu/default.conf, ~/.criu/default.conf, /etc/criu/runc.conf, $CRIU_CONFIG_FILE".into()),
        Err(e) => Err(e.to_string()),
    };
    if blocking {
        ctx.host_gate("criu-config-absent", fact, r)
    } else {
        let (ok, d) = match r {
            Ok(d) => (true, d),
            Err(d) => (false, d),
        };
        ctx.gates.record("criu-config-absent", fact, ok, d);
        Ok(())
    }
}

/// The sha256 of a file, as a gate detail error when it cannot be read.
fn file_sha256(path: &Path) -> Result<String, String> {
    sha256_file(path)
        .map(|(h, _)| h)
        .map_err(|e| format!("cannot hash {}: {e}", path.display()))
}

/// The runtime and CRIU paths this verb uses: `--runtime`/`--criu` if given, else the ones
/// recorded at provision (either way checked by [`binary_gates`]).
fn binary_paths(ctx: &Ctx, st: &SlotState) -> (PathBuf, PathBuf) {
    (
        ctx.args.runtime.clone().unwrap_or(st.runtime.path.clone()),
        ctx.args.criu.clone().unwrap_or(st.criu.path.clone()),
    )
}

/// Runtime and CRIU binaries: same sha256 as recorded at provision. A `--runtime`/`--criu` given
/// to a later verb replaces the recorded path only if its sha256 is the recorded one. The two
/// files are hashed on two threads at once (whole files, every verb; about 15 MB together).
fn binary_gates(
    ctx: &mut Ctx,
    st: &SlotState,
    criu_blocking: bool,
) -> Result<(PathBuf, PathBuf), SlotError> {
    let (rt, cr) = binary_paths(ctx, st);
    let (h_rt, h_cr) = std::thread::scope(|s| {
        let criu = s.spawn(|| file_sha256(&cr));
        let runtime = file_sha256(&rt);
        let criu = criu
            .join()
            .unwrap_or_else(|_| Err(format!("hashing {} panicked", cr.display())));
        (runtime, criu)
    });
    for (name, path, pin, blocking, hashed) in [
        ("runtime-binary", &rt, &st.runtime, true, h_rt),
        ("criu-binary", &cr, &st.criu, criu_blocking, h_cr),
    ] {
        let fact = format!("{} has the sha256 recorded at provision", path.display());
        let r = match hashed {
            Ok(h) if h == pin.sha256 => Ok(format!("sha256 {h}")),
            Ok(h) => Err(format!(
                "sha256 {h} != {} recorded at provision for {} (binary swapped?)",
                pin.sha256,
                pin.path.display()
            )),
            Err(e) => Err(e),
        };
        if blocking {
            ctx.gate(name, &fact, r)?;
        } else {
            let (ok, d) = match r {
                Ok(d) => (true, d),
                Err(d) => (false, d),
            };
            ctx.gates.record(name, &fact, ok, d);
        }
    }
    Ok((rt, cr))
}

/// `config.json` hash equals the one recorded at provision, and (read back with oci-spec) its
/// network namespace is still the recorded holder's `/proc/<pid>/ns/net`.
fn config_hash_result(ctx: &Ctx, st: &SlotState) -> Result<String, String> {
    let Some(want) = &st.config_sha256 else {
        return Err("no config.json sha256 recorded (provision did not finish)".into());
    };
    let bundle = ctx.paths.bundle();
    let h = config_sha256(&bundle).map_err(|e| e.to_string())?;
    if &h != want {
        return Err(format!(
            "config.json sha256 {h} != {want} recorded at provision (tampered)"
        ));
    }
    let spec = read_bundle_spec(&bundle).map_err(|e| e.to_string())?;
    let netns = spec
        .linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .and_then(|n| {
            n.iter()
                .find(|n| n.typ() == oci_spec::runtime::LinuxNamespaceType::Network)
        })
        .and_then(|n| n.path().clone());
    match (&st.holder, netns) {
        (Some(hd), Some(p)) if p == hd.netns_path() => Ok(format!(
            "sha256 {h}; network namespace {} (the holder's)",
            p.display()
        )),
        (None, _) => Ok(format!("sha256 {h}; no holder recorded")),
        (Some(hd), p) => Err(format!(
            "config.json names network namespace {p:?}, not the holder's {}",
            hd.netns_path().display()
        )),
    }
}

fn holder_result(st: &SlotState) -> Result<String, String> {
    let Some(h) = &st.holder else {
        return Err("no holder recorded".into());
    };
    h.verify().map_err(|e| e.to_string()).map(|_| {
        format!(
            "pid {} start time {} netns inode {}",
            h.pid, h.start_time, h.netns_inode
        )
    })
}

const HOLDER_FACT: &str = "the holder is alive with the recorded pid, start time and netns inode";

/// Re-verifies the holder right before a namespace entry, checkpoint, restore or ready check.
fn holder_gate(ctx: &mut Ctx, st: &SlotState, before: &str) -> Result<ProcessIdentity, SlotError> {
    let r = holder_result(st).map(|d| format!("{d} (before {before})"));
    ctx.gate("holder-identity", HOLDER_FACT, r)?;
    Ok(st.holder.expect("checked"))
}

/// The slot's runtime: its binary, the slot's private `--root`, and always `--criu`.
fn runtime(st: &SlotState, rt: &Path, cr: &Path) -> Runtime {
    Runtime::new(rt, st.runtime_root.clone(), Some(cr.to_path_buf()))
}

/// Container status per `runtime state`: `Ok(None)` = proven absent.
fn container_status(rt: &Runtime, id: &str) -> Result<Option<String>, String> {
    rt.state(id)
        .map(|o| o.map(|s| s.status))
        .map_err(|e| e.to_string())
}

/// Kills and deletes the container if present ([`ContainerGuard::release`]: kill, delete
/// --force, prove gone), retried for up to 10 s, then proves it gone via `runtime state`.
fn stop_container_proven(ctx: &mut Ctx, rt: &Runtime, id: &str) -> Result<(), SlotError> {
    let before = container_status(rt, id);
    stop_container_proven_from(ctx, rt, id, before)
}

/// [`stop_container_proven`] from a `runtime state` answer (`before`) this verb already has,
/// queried while it held the slot lock. If that answer is "does not exist" it is the proof:
/// only a verb holding the slot lock creates a container in the slot's private runtime root,
/// so nothing can have created one since. Otherwise the container is stopped and a new
/// `runtime state` proves it gone.
fn stop_container_proven_from(
    ctx: &mut Ctx,
    rt: &Runtime,
    id: &str,
    before: Result<Option<String>, String>,
) -> Result<(), SlotError> {
    if let Ok(None) = &before {
        return ctx.gate(
            "container-stopped",
            "the container is proven gone by runtime state",
            Ok(format!(
                "runtime state {id}: does not exist (queried under the slot lock; nothing to stop)"
            )),
        );
    }
    if let Ok(Some(_)) = &before {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = ContainerGuard::new(rt, id).release();
            ctx.rt_log(
                "kill + delete --force + state (ContainerGuard::release)",
                r.as_ref(),
            );
            if r.is_ok() || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let r = match container_status(rt, id) {
        Ok(None) => Ok(format!(
            "runtime state {id}: does not exist (before: {})",
            match before {
                Ok(Some(s)) => s,
                Ok(None) => "absent".into(),
                Err(e) => e,
            }
        )),
        Ok(Some(s)) => Err(format!("runtime state {id}: still {s}")),
        Err(e) => Err(e),
    };
    ctx.gate(
        "container-stopped",
        "the container is proven gone by runtime state",
        r,
    )
}

// ------------------------------------------------------------------ provision

fn provision(ctx: &mut Ctx) -> Result<(String, Option<SlotState>), SlotError> {
    let r = layout::check_state_dir(&ctx.paths.state_dir, StateDirUse::Create);
    ctx.gate("state-dir", STATE_DIR_FACT, r)?;
    criu_config_gate(ctx, true)?;
    // Binaries (must exist and be recognised: host refusal otherwise).
    let rt_path = ctx
        .args
        .runtime
        .clone()
        .unwrap_or_else(host::default_runtime);
    let cr_path = ctx.args.criu.clone().unwrap_or_else(host::default_criu);
    let mut pins = Vec::new();
    for (name, p, kind) in [
        ("runtime-binary", &rt_path, BinaryKind::Runtime),
        ("criu-binary", &cr_path, BinaryKind::Criu),
    ] {
        let r = host::binary_facts(p, kind).map_err(|e| e.to_string());
        let d = r.as_ref().map(|f| {
            format!(
                "{} version {} sha256 {} (recorded)",
                f.path, f.version, f.sha256
            )
        });
        ctx.host_gate(
            name,
            "the binary exists, is recognised and is hashed at provision",
            d.map_err(|e| e.clone()),
        )?;
        let f = r.expect("checked");
        ctx.fact(
            name.trim_end_matches("-binary"),
            json!({"path": f.path, "version": f.version, "sha256": f.sha256}),
        );
        pins.push(BinaryPin {
            path: PathBuf::from(&f.path),
            sha256: f.sha256,
            version: Some(f.version),
        });
    }
    let (rt_pin, cr_pin) = (pins[0].clone(), pins[1].clone());

    let probe = probe_gate(ctx, &rt_pin, &cr_pin)?;

    // Image pin (qcow2).
    let image_kind = match &ctx.args.image {
        None => "embedded",
        Some(p) if p.extension().is_some_and(|e| e == "qcow2") => "qcow2",
        Some(_) => "directory",
    };
    if let (Some(img), "qcow2") = (ctx.args.image.clone(), image_kind) {
        let want = ctx.args.image_sha256.clone().unwrap_or_default();
        let t = Instant::now();
        let r = match file_sha256(&img) {
            Ok(h) if h == want => Ok(format!("{} sha256 {h}", img.display())),
            Ok(h) => Err(format!(
                "{} sha256 {h} != --image-sha256 {want}",
                img.display()
            )),
            Err(e) => Err(e),
        };
        ctx.timings.insert("image-sha256".into(), ms_since(t));
        ctx.gate("image-sha256", "the qcow2 image has the pinned sha256", r)?;
    }
    if let (Some(img), "directory") = (ctx.args.image.clone(), image_kind) {
        let r = match fs::metadata(&img) {
            Ok(m) if m.is_dir() => Ok(format!("{} is a directory, used as-is", img.display())),
            Ok(_) => Err(format!(
                "{} is neither a directory nor a .qcow2 file",
                img.display()
            )),
            Err(e) => Err(format!("{}: {e}", img.display())),
        };
        ctx.gate("image-present", "the image directory exists", r)?;
    }

    // Every check above created nothing; the slot directory is created only now.
    let marker = match layout::create_slot(&ctx.paths) {
        Ok(m) => {
            let d = format!(
                "{} created (mkdir), marker id {}",
                ctx.paths.root.display(),
                m.id
            );
            ctx.gate(
                "slot-fresh",
                "the slot directory did not exist (fresh state only)",
                Ok(d),
            )?;
            m
        }
        Err((true, d)) => {
            ctx.gate(
                "slot-fresh",
                "the slot directory did not exist (fresh state only)",
                Err(d),
            )?;
            unreachable!()
        }
        Err((false, d)) => return Err(ctx.run_err("slot-create", d)),
    };
    ctx.enter_slot()?;

    let mut st = SlotState {
        schema_version: STATE_SCHEMA_VERSION,
        slot: ctx.paths.slot,
        owner_id: marker.id.clone(),
        phase: Phase::Provisioning,
        created_at: support::now_rfc3339(),
        updated_at: String::new(),
        container_id: ctx.paths.container_id(),
        runtime_root: ctx.paths.runtime_root(),
        cgroups_path: ctx.paths.cgroups_path(&marker.id),
        runtime: rt_pin,
        criu: cr_pin,
        probe_gate: probe,
        image: None,
        overlay: None,
        holder: None,
        config_sha256: None,
        resources: SLOT_RESOURCES,
        snapshot: None,
        restores: 0,
        last_verb: Some("provision".into()),
        last_ok: false,
    };
    ctx.save(&mut st)?;
    ctx.journal("step", true, "state written: provisioning");
    let r = provision_steps(ctx, &mut st, image_kind);
    match r {
        Ok(summary) => {
            st.phase = Phase::Ready;
            st.last_ok = true;
            ctx.save(&mut st)?;
            Ok((summary, Some(st)))
        }
        Err(e) => {
            // Guards inside provision_steps have released what was started.
            st.phase = Phase::ProvisionFailed;
            st.holder = None;
            if let Some(o) = st.overlay.as_mut() {
                o.mounted = mounts::is_mounted(&o.merged);
            }
            let _ = st.save(&ctx.paths.state());
            Err(e)
        }
    }
}

fn probe_gate(ctx: &mut Ctx, rt: &BinaryPin, cr: &BinaryPin) -> Result<ProbeGateRecord, SlotError> {
    let fact = "a netprobe evidence folder proves the holder path for these runtime and CRIU binaries (it reproduces under netprobe verify, every file hashed; verdict runtime-empty-ns or runtime-preserves-netns, external-netns passed, same sha256)";
    if ctx.args.no_probe_gate {
        let reason = ctx.args.reason.clone().unwrap_or_default();
        ctx.gates.record(
            "probe-verdict",
            fact,
            false,
            format!("OVERRIDDEN by --no-probe-gate: {reason}"),
        );
        ctx.extra_diffs.push(format!(
            "The probe gate was overridden at provision (--no-probe-gate): {reason}"
        ));
        return Ok(ProbeGateRecord {
            mode: "override".into(),
            evidence_dir: None,
            verdict: None,
            reason: Some(reason),
        });
    }
    let Some(dir) = ctx.args.probe_evidence.clone() else {
        ctx.gate(
            "probe-verdict",
            fact,
            Err("no --probe-evidence DIR (or --no-probe-gate --reason TEXT) given".into()),
        )?;
        unreachable!()
    };
    let r = probe_evidence_proves(&dir, rt, cr);
    let code = r.as_ref().ok().map(|(c, _)| c.as_str().to_string());
    ctx.gate("probe-verdict", fact, r.map(|(_, d)| d))?;
    Ok(ProbeGateRecord {
        mode: "evidence".into(),
        evidence_dir: Some(dir),
        verdict: code,
        reason: None,
    })
}

/// Proves the probe verdict from the evidence in `dir`, never from what `netprobe-result.json`
/// says alone: [`probe::verify::verify`] re-checks every artifact's sha256, re-runs the
/// assertions, recomputes the verdict and requires every file of the folder to be one of the
/// hashed artifacts (an emptied or shortened artifact list hides nothing); then the recomputed
/// verdict must be a passing one, external-netns must pass, and the probe must have run the same runtime and
/// CRIU binaries (sha256) as this provision. Returns the verdict and the gate detail, or the
/// first mismatch.
fn probe_evidence_proves(
    dir: &Path,
    rt: &BinaryPin,
    cr: &BinaryPin,
) -> Result<(VerdictCode, String), String> {
    let shown = dir.display();
    // Parses and validates netprobe-result.json against its schema, then re-checks everything.
    let v = probe::verify::verify(dir).map_err(|e| format!("{shown}: {e}"))?;
    if !v.reproduced() {
        let first = v.mismatches.first().cloned().unwrap_or_else(|| {
            format!(
                "verdict: recorded {}, the evidence gives {}",
                v.recorded.code, v.verdict.code
            )
        });
        return Err(format!(
            "{shown}: the evidence does not reproduce the recorded result (as `netprobe verify` \
             reports): {first}"
        ));
    }
    let res = read_result(dir).map_err(|e| format!("{shown}: {e}"))?;
    let code = v.verdict.code;
    if !matches!(
        code,
        VerdictCode::RuntimeEmptyNs | VerdictCode::RuntimePreservesNetns
    ) {
        return Err(format!(
            "{shown}: verdict {code} (recomputed from the evidence), need runtime-empty-ns or \
             runtime-preserves-netns"
        ));
    }
    let ext = res.rung(RungName::ExternalNetns).map(|r| r.status);
    if ext != Some(RungStatus::Pass) {
        return Err(format!(
            "{shown}: external-netns rung status {ext:?}, need pass"
        ));
    }
    for (what, ran, now) in [
        ("runtime", res.host.runtime.as_ref(), rt),
        ("CRIU", res.host.criu.as_ref(), cr),
    ] {
        let sha = ran.map(|b| b.sha256.as_str()).unwrap_or_default();
        if sha != now.sha256 {
            return Err(format!(
                "{shown}: probe ran {what} sha256 {sha:?}, now {} ({})",
                now.sha256,
                now.path.display()
            ));
        }
    }
    Ok((
        code,
        format!(
            "{shown}: verified ({} artifacts sha256-checked, {} assertions re-run), verdict {code} \
             recomputed, external-netns pass, runtime and CRIU sha256 match",
            v.artifacts, v.assertions
        ),
    ))
}

fn mkdirs(ctx: &Ctx, dirs: &[PathBuf]) -> Result<(), SlotError> {
    for d in dirs {
        fs::create_dir_all(d).map_err(|e| ctx.run_err("mkdir", format!("{}: {e}", d.display())))?;
    }
    Ok(())
}

fn provision_steps(
    ctx: &mut Ctx,
    st: &mut SlotState,
    image_kind: &str,
) -> Result<String, SlotError> {
    let p = ctx.paths.clone();
    let image_dir = p.image_dir();
    let overlay_dir = p.overlay_dir();
    mkdirs(
        ctx,
        &[
            image_dir.clone(),
            overlay_dir.clone(),
            p.bundle(),
            p.rootfs(),
            p.runtime_root(),
        ],
    )?;

    // 1. Image (read-only lower).
    let t = Instant::now();
    let mut qsd_guard = None;
    let mut loop_guard = None;
    let mut lower_guard = None;
    let image = match image_kind {
        "embedded" => {
            let dir = image_dir.join("rootfs");
            oci::build_busybox_rootfs(&dir).map_err(|e| ctx.run_err("image", e.to_string()))?;
            ImageState::plain_directory("embedded", dir)
        }
        "directory" => {
            let dir = fs::canonicalize(ctx.args.image.as_ref().expect("image"))
                .map_err(|e| ctx.run_err("image", e.to_string()))?;
            ImageState::plain_directory("directory", dir)
        }
        _ => {
            let src = fs::canonicalize(ctx.args.image.as_ref().expect("image"))
                .map_err(|e| ctx.run_err("image", e.to_string()))?;
            let export = image_dir.join("export.raw");
            let lower = image_dir.join("lower");
            mkdirs(ctx, std::slice::from_ref(&lower))?;
            let mut img = ImageState {
                kind: "qcow2".into(),
                source: src.clone(),
                sha256: ctx.args.image_sha256.clone(),
                lower: lower.clone(),
                export_file: Some(export.clone()),
                qsd_pid: None,
                loop_device: None,
                fstype: None,
            };
            let q = mounts::qsd_start(
                &src,
                &export,
                &image_dir.join("qsd.pid"),
                &ctx.ev_path("qemu-storage-daemon.log"),
            )
            .map_err(|e| ctx.run_err("fuse-export", e))?;
            img.qsd_pid = Some(q.pid);
            qsd_guard = Some(q);
            st.image = Some(img.clone());
            ctx.save(st)?;
            let l = mounts::loop_attach(&export).map_err(|e| ctx.run_err("loop-attach", e))?;
            img.loop_device = Some(l.device.clone());
            let dev = l.device.clone();
            loop_guard = Some(l);
            st.image = Some(img.clone());
            ctx.save(st)?;
            let (g, fstype) =
                mounts::mount_ro(&dev, &lower).map_err(|e| ctx.run_err("image-mount", e))?;
            lower_guard = Some(g);
            img.fstype = Some(fstype);
            img
        }
    };
    ctx.timings.insert("image".into(), ms_since(t));
    ctx.fact("image", serde_json::to_value(&image).unwrap_or_default());
    st.image = Some(image.clone());
    ctx.save(st)?;

    // 2. Overlay: lower = image, upper/work per run.
    let t = Instant::now();
    let ov = OverlayState {
        merged: p.rootfs(),
        run: 1,
        mounted: false,
    };
    let (upper, work) = (ov.upper(&overlay_dir, 1), ov.work(&overlay_dir, 1));
    mkdirs(ctx, &[upper.clone(), work.clone()])?;
    let overlay_guard = mounts::mount_overlay(&image.lower, &upper, &work, &ov.merged)
        .map_err(|e| ctx.run_err("overlay", e))?;
    st.overlay = Some(OverlayState {
        mounted: true,
        ..ov
    });
    ctx.save(st)?;
    ctx.timings.insert("overlay".into(), ms_since(t));

    // 3. Holder (`netprobe __holder --lo-up`), identity proven by the handshake and /proc before
    // holder.json. `holder` kills it on drop (failure, panic) until detached below.
    let t = Instant::now();
    let exe = ctx.args.holder_exe.clone().unwrap_or_else(ns::default_exe);
    let holder = Holder::spawn(&HolderOptions {
        exe: exe.clone(),
        lo_up: true,
    })
    .map_err(|e| ctx.run_err("holder", e.to_string()))?;
    let hid = *holder.identity();
    st.holder = Some(hid);
    ctx.save(st)?;
    holder_gate(ctx, st, "writing holder.json")?;
    let own_ns = ns::own_netns_inode().map_err(|e| ctx.run_err("holder", e.to_string()))?;
    ctx.gate(
        "holder-private-netns",
        "the holder's network namespace is not netprobe's",
        if hid.netns_inode != own_ns {
            Ok(format!("holder netns {} != host {own_ns}", hid.netns_inode))
        } else {
            Err("holder shares netprobe's netns".into())
        },
    )?;
    let hj = json!({
        "schema_version": 1,
        "pid": hid.pid,
        "start_time": hid.start_time,
        "netns_inode": hid.netns_inode,
        "netns_path": hid.netns_path().display().to_string(),
        "exe": exe.display().to_string(),
        "created_at": support::now_rfc3339(),
    });
    crate::evidence::validate_holder(&hj).map_err(|e| ctx.run_err("holder.json", e.join("; ")))?;
    let hj_bytes = serde_json::to_vec_pretty(&hj).unwrap_or_default();
    support::atomic_write(&p.holder(), &hj_bytes)
        .map_err(|e| ctx.run_err("holder.json", e.to_string()))?;
    ctx.ev_write("holder.json", &hj_bytes);
    ctx.fact("holder", hj);
    ctx.timings.insert("holder".into(), ms_since(t));

    // 4. config.json (oci-spec) and its hash.
    let info = write_bundle(
        &p.bundle(),
        &BundleSpec {
            rootfs: p.rootfs(),
            readonly_root: false,
            args: vec!["/bin/sh".into(), "/init.sh".into()],
            netns: NetnsSpec::Path(hid.netns_path()),
            resources: Some(st.resources),
            hostname: format!("slot-{}", p.slot),
            cgroups_path: Some(st.cgroups_path.clone()),
        },
    )
    .map_err(|e| ctx.run_err("config.json", e.to_string()))?;
    let sha = info.sha256;
    st.config_sha256 = Some(sha.clone());
    ctx.save(st)?;
    let r = config_hash_result(ctx, st);
    ctx.gate(
        "config-hash",
        "config.json has the sha256 recorded at provision",
        r,
    )?;
    ctx.fact("config_sha256", sha.clone());
    if let Ok(b) = fs::read(p.config()) {
        ctx.ev_write("config.json", &b);
    }

    // 5. Container (guarded: killed and deleted on failure or panic until disarmed).
    let rt = runtime(st, &st.runtime.path.clone(), &st.criu.path.clone());
    let id = st.container_id.clone();
    let r = refuse_existing(&rt, &id);
    ctx.rt_log("state (refuse existing)", r.as_ref());
    ctx.gate(
        "container-absent",
        "no container with this slot's id exists under its runtime root",
        r.map(|_| format!("runtime state {id}: does not exist"))
            .map_err(|e| e.to_string()),
    )?;
    holder_gate(ctx, st, "runtime create")?;
    let mut container_guard = ContainerGuard::new(&rt, &id);
    let t = Instant::now();
    let r = rt.create(&id, &p.bundle(), &p.root.join("container.pid"));
    ctx.rt_log("create", r.as_ref());
    r.map_err(|e| ctx.run_err("runtime-create", e.to_string()))?;
    let r = rt.start(&id);
    ctx.rt_log("start", r.as_ref());
    r.map_err(|e| ctx.run_err("runtime-start", e.to_string()))?;
    ctx.timings.insert("create-start".into(), ms_since(t));

    // 6. Ready gates.
    ready_gates(ctx, st, "provision", || timed(|| rt.state(&id)))?;

    // Everything recorded: keep it past this function.
    container_guard.disarm();
    let holder = holder.detach();
    overlay_guard.disarm();
    if let Some(g) = lower_guard {
        g.disarm();
    }
    if let Some(g) = loop_guard {
        g.disarm();
    }
    if let Some(g) = qsd_guard {
        g.disarm();
    }
    Ok(format!(
        "provisioned: container {id} running in holder pid {} netns {}, config.json sha256 {sha}",
        holder.pid, holder.netns_inode
    ))
}

/// Ready gates: lo UP with 127.0.0.1/8 in the container's netns, the guest server answers 200
/// from inside the namespace, the container runs in the holder's netns (runtime state), cgroup
/// limits read back. Returns the captured network state.
///
/// `state` yields the container's `runtime state` and how long that query took (ms); the
/// caller may have started it on another thread so it overlaps the in-process checks before it.
fn ready_gates(
    ctx: &mut Ctx,
    st: &SlotState,
    when: &str,
    state: impl FnOnce() -> (Result<Option<oci::ContainerState>, OciError>, u64),
) -> Result<NetState, SlotError> {
    let h = holder_gate(ctx, st, &format!("{when} ready checks"))?;
    let t = Instant::now();
    let cap = net::capture(&h.netns_path());
    ctx.timings
        .insert(format!("{when}-netstate-capture"), ms_since(t));
    let cap = cap.map_err(|e| ctx.run_err("netstate-capture", e))?;
    ctx.ev_write(
        &format!("netstate-{when}.json"),
        cap.to_canonical_json().as_bytes(),
    );
    let d = net::lo_detail(&cap);
    ctx.gate(
        "lo-up-127",
        "lo is UP with 127.0.0.1/8 in the container's network namespace",
        if cap.lo_up_with_127() { Ok(d) } else { Err(d) },
    )?;

    let fact =
        "the guest server answers GET / with 200 on 127.0.0.1:<port> from inside the namespace";
    match guest_port(st) {
        Some(port) => {
            let t = Instant::now();
            let r = net::http_get_in_netns(&h.netns_path(), port, Duration::from_secs(20));
            ctx.timings
                .insert(format!("{when}-guest-http"), ms_since(t));
            ctx.gate(
                "guest-http",
                fact,
                r.map(|l| {
                    format!(
                        "127.0.0.1:{port}: {l} (new connection from a thread in netns {})",
                        h.netns_inode
                    )
                }),
            )?;
        }
        None => ctx.gates.record(
            "guest-http",
            fact,
            false,
            format!(
                "not applicable: the image declares no guest server (/{})",
                net::GUEST_PORT_FILE
            ),
        ),
    }

    // Container in the holder's netns, limits from its cgroup.
    let t = Instant::now();
    let (state, query_ms) = state();
    ctx.timings
        .insert(format!("{when}-runtime-state"), ms_since(t));
    ctx.timings
        .insert(format!("{when}-runtime-state-query"), query_ms);
    ctx.rt_log("state", state.as_ref().map(|_| &()));
    let state = state.map_err(|e| ctx.run_err("runtime-state", e.to_string()))?;
    let pid = state.as_ref().map(|s| s.pid).unwrap_or(0);
    let status = state
        .as_ref()
        .map(|s| s.status.clone())
        .unwrap_or_else(|| "absent".into());
    let r = match ProcessIdentity::read(pid) {
        Ok(c) if status == "running" && c.netns_inode == h.netns_inode => Ok(format!(
            "runtime state running, init pid {pid}, netns inode {} = holder's",
            c.netns_inode
        )),
        Ok(c) => Err(format!(
            "status {status}, init pid {pid} netns inode {} vs holder {}",
            c.netns_inode, h.netns_inode
        )),
        Err(e) => Err(format!("status {status}: {e}")),
    };
    ctx.gate(
        "container-in-holder-netns",
        "the container runs (runtime state) in the holder's network namespace",
        r,
    )?;
    ctx.fact(&format!("{when}_container_pid"), pid);
    let t = Instant::now();
    let r = read_limits(pid, &st.resources);
    ctx.timings
        .insert(format!("{when}-cgroup-readback"), ms_since(t));
    ctx.gate("cgroup-limits", "cpu quota/period and memory limit/memsw read back from the container's cgroup equal config.json", r)?;

    Ok(cap)
}

/// The guest server port: [`oci::INIT_HTTP_PORT`] for the embedded image, else the one the image
/// declares in [`net::GUEST_PORT_FILE`], if any.
fn guest_port(st: &SlotState) -> Option<u16> {
    let img = st.image.as_ref()?;
    if img.kind == "embedded" {
        return Some(oci::INIT_HTTP_PORT);
    }
    let t = fs::read_to_string(img.lower.join(net::GUEST_PORT_FILE)).ok()?;
    t.trim().parse::<u16>().ok().filter(|p| *p > 0)
}

fn cgroup_dir(pid: i32, controller: &str) -> Result<PathBuf, String> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map_err(|e| format!("/proc/{pid}/cgroup: {e}"))?;
    for l in text.lines() {
        let mut it = l.splitn(3, ':');
        let (_, ctrls, path) = (it.next(), it.next().unwrap_or(""), it.next().unwrap_or(""));
        if ctrls.split(',').any(|c| c == controller) {
            let base = Path::new("/sys/fs/cgroup").join(ctrls);
            return Ok(base.join(path.trim_start_matches('/')));
        }
    }
    Err(format!(
        "pid {pid} has no {controller} cgroup (cgroup v1 expected)"
    ))
}

fn read_limits(pid: i32, want: &oci::Resources) -> Result<String, String> {
    let rd = |p: PathBuf| -> Result<i64, String> {
        fs::read_to_string(&p)
            .map_err(|e| format!("{}: {e}", p.display()))?
            .trim()
            .parse::<i64>()
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let cpu = cgroup_dir(pid, "cpu")?;
    let mem = cgroup_dir(pid, "memory")?;
    let quota = rd(cpu.join("cpu.cfs_quota_us"))?;
    let period = rd(cpu.join("cpu.cfs_period_us"))?;
    let limit = rd(mem.join("memory.limit_in_bytes"))?;
    let memsw_p = mem.join("memory.memsw.limit_in_bytes");
    let memsw = if memsw_p.exists() {
        Some(rd(memsw_p)?)
    } else {
        None
    };
    let obs = format!(
        "{}: cfs_quota_us {quota} cfs_period_us {period}; {}: limit_in_bytes {limit} memsw.limit_in_bytes {}",
        cpu.display(),
        mem.display(),
        memsw
            .map(|v| v.to_string())
            .unwrap_or_else(|| "absent (no swap accounting)".into())
    );
    let ok = quota == want.cpu_quota
        && period as u64 == want.cpu_period
        && limit == want.memory_limit
        && memsw.is_none_or(|m| m == want.memory_swap);
    if ok {
        Ok(obs)
    } else {
        Err(format!("{obs}; asked {want:?}"))
    }
}

// ------------------------------------------------------------------ snapshot

fn common_gates(ctx: &mut Ctx, st: &SlotState) -> Result<Runtime, SlotError> {
    let t = Instant::now();
    criu_config_gate(ctx, true)?;
    ctx.timings.insert("gate-criu-config".into(), ms_since(t));
    let t = Instant::now();
    let (rt, cr) = binary_gates(ctx, st, true)?;
    ctx.timings.insert("gate-binaries".into(), ms_since(t));
    let t = Instant::now();
    let r = config_hash_result(ctx, st);
    ctx.gate(
        "config-hash",
        "config.json has the sha256 recorded at provision",
        r,
    )?;
    let r = holder_result(st);
    ctx.gate("holder-identity", HOLDER_FACT, r)?;
    ctx.timings.insert("gate-config-holder".into(), ms_since(t));
    Ok(runtime(st, &rt, &cr))
}

fn snapshot(ctx: &mut Ctx, st: &mut SlotState) -> Result<String, SlotError> {
    let rt = common_gates(ctx, st)?;
    let id = st.container_id.clone();
    let r = match container_status(&rt, &id) {
        Ok(Some(s)) if s == "running" => Ok(format!("runtime state {id}: running")),
        Ok(Some(s)) => Err(format!("runtime state {id}: {s}, need running")),
        Ok(None) => Err(format!(
            "runtime state {id}: does not exist (nothing to snapshot; phase {:?})",
            st.phase
        )),
        Err(e) => Err(e),
    };
    ctx.gate(
        "container-running",
        "the container is running (runtime state)",
        r,
    )?;
    let ov = st
        .overlay
        .clone()
        .ok_or_else(|| ctx.run_err("overlay", "no overlay recorded"))?;
    let r = if mounts::is_mounted(&ov.merged) {
        Ok(format!("{} mounted, run {}", ov.merged.display(), ov.run))
    } else {
        Err(format!("{} is not mounted", ov.merged.display()))
    };
    ctx.gate(
        "overlay-mounted",
        "the container rootfs overlay is mounted",
        r,
    )?;

    let prev_phase = st.phase;
    st.phase = Phase::Snapshotting;
    ctx.save(st)?;
    let sid = format!(
        "{}-{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ"),
        &support::random_hex(4)
    );
    let tmp = ctx.paths.root.join(format!("snapshot.tmp-{sid}"));
    ctx.journal("step", true, &format!("snapshot into {}", tmp.display()));
    let res = snapshot_steps(ctx, st, &rt, &tmp, &sid, &ov);
    match res {
        Ok(s) => Ok(s),
        Err(e) => {
            // The previous complete snapshot (if any) is untouched; the tmp folder is never used.
            let gone = matches!(container_status(&rt, &id), Ok(None));
            st.phase = if gone {
                Phase::SnapshotFailed
            } else {
                prev_phase
            };
            let _ = st.save(&ctx.paths.state());
            Err(e)
        }
    }
}

fn snapshot_steps(
    ctx: &mut Ctx,
    st: &mut SlotState,
    rt: &Runtime,
    tmp: &Path,
    sid: &str,
    ov: &OverlayState,
) -> Result<String, SlotError> {
    mkdirs(ctx, &[tmp.to_path_buf()])?;
    let h = holder_gate(ctx, st, "recording the network state")?;
    let cap = ctx.time("netstate-capture", || net::capture(&h.netns_path()));
    let cap = cap.map_err(|e| ctx.run_err("netstate-capture", e))?;
    let d = net::lo_detail(&cap);
    ctx.gate(
        "lo-up-127",
        "lo is UP with 127.0.0.1/8 before the checkpoint",
        if cap.lo_up_with_127() { Ok(d) } else { Err(d) },
    )?;
    // The canonical NetState JSON: the bytes the network-fidelity gate compares at restore.
    let cap = cap.to_canonical_json();
    support::atomic_write(&tmp.join("netstate.json"), cap.as_bytes())
        .map_err(|e| ctx.run_err("netstate-write", e.to_string()))?;
    ctx.ev_write("netstate-before.json", cap.as_bytes());

    holder_gate(ctx, st, "checkpoint")?;
    let images = tmp.join("checkpoint");
    let work = ctx.ev_path("criu-work");
    mkdirs(ctx, &[images.clone(), work.clone()])?;
    let id = st.container_id.clone();
    let r = ctx.time_with_lock_inherited("checkpoint", || rt.checkpoint(&id, &images, &work, &[]));
    ctx.rt_log("checkpoint", r.as_ref());
    if let Err(e) = r {
        let dump = fs::read_to_string(work.join("dump.log")).unwrap_or_default();
        let known = if dump.contains("Can't get 1:16 opt: Operation not supported") {
            "\ndiagnosis: CRIU could not read SO_PASSCRED of an inet socket (EOPNOTSUPP). Kernels >= 6.16 restrict SO_PASSCRED/SO_PASSSEC to AF_UNIX/AF_NETLINK sockets and this CRIU treats the error as fatal, so no container holding a TCP/UDP socket (e.g. the guest server) can be checkpointed on this host; a CRIU with the upstream fix is needed."
        } else {
            ""
        };
        return Err(ctx.run_err("runtime-checkpoint", format!("{e}{known}")));
    }
    stop_container_proven(ctx, rt, &id)?;

    // The container is gone: the upper is exactly as at checkpoint time.
    let upper = ov.upper(&ctx.paths.overlay_dir(), ov.run);
    let r = ctx.time("upper-save", || {
        support::copy_tree(&upper, &tmp.join("upper"))
    });
    r.map_err(|e| ctx.run_err("upper-save", e))?;
    support::sync_fs(tmp).map_err(|e| ctx.run_err("fsync", e))?;

    let files = inventory(&images).map_err(|e| ctx.run_err("manifest", e.to_string()))?;
    let manifest = json!({
        "id": sid,
        "created_at": support::now_rfc3339(),
        "container_id": id,
        "holder": h,
        "config_sha256": st.config_sha256,
        "netstate_sha256": support::sha256_bytes(cap.as_bytes()),
        "upper_run": ov.run,
        "checkpoint_files": files,
        "runtime": st.runtime, "criu": st.criu,
    });
    support::atomic_write(
        &tmp.join("manifest.json"),
        &serde_json::to_vec_pretty(&manifest).unwrap_or_default(),
    )
    .map_err(|e| ctx.run_err("manifest", e.to_string()))?;
    support::fsync_dir(tmp).map_err(|e| ctx.run_err("fsync", e.to_string()))?;
    let name = format!("snapshot-{sid}");
    let dst = ctx.paths.root.join(&name);
    fs::rename(tmp, &dst).map_err(|e| ctx.run_err("snapshot-rename", e.to_string()))?;
    support::fsync_dir(&ctx.paths.root).map_err(|e| ctx.run_err("fsync", e.to_string()))?;
    let old = st.snapshot.replace(SnapshotRef {
        dir: name.clone(),
        created_at: support::now_rfc3339(),
        netstate_sha256: support::sha256_bytes(cap.as_bytes()),
    });
    st.phase = Phase::Checkpointed;
    ctx.save(st)?;
    if let Some(o) = old {
        let _ = support::remove_tree_same_fs(&ctx.paths.root.join(o.dir));
    }
    ctx.fact(
        "snapshot",
        json!({"dir": dst, "checkpoint_files": files.len()}),
    );
    ctx.ev_write(
        "manifest.json",
        &serde_json::to_vec_pretty(&manifest).unwrap_or_default(),
    );
    Ok(format!(
        "snapshot {name} complete ({} checkpoint files); container stopped by the checkpoint",
        files.len()
    ))
}

/// The `snapshot-complete` gate: the referenced snapshot has a manifest and every checkpoint file
/// and the network state hash as recorded.
fn snapshot_complete(ctx: &Ctx, st: &SlotState) -> Result<(PathBuf, String), String> {
    let Some(s) = &st.snapshot else {
        let tmps = stale_tmp(&ctx.paths.root);
        return Err(format!(
            "no complete snapshot recorded{}",
            if tmps.is_empty() {
                String::new()
            } else {
                format!(" (interrupted, never used: {})", tmps.join(", "))
            }
        ));
    };
    let dir = ctx.paths.root.join(&s.dir);
    let m: Value = fs::read(dir.join("manifest.json"))
        .map_err(|e| format!("{}/manifest.json: {e}", dir.display()))
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))?;
    let net =
        fs::read_to_string(dir.join("netstate.json")).map_err(|e| format!("netstate.json: {e}"))?;
    if support::sha256_bytes(net.as_bytes()) != s.netstate_sha256
        || m["netstate_sha256"] != s.netstate_sha256
    {
        return Err("netstate.json does not match its recorded sha256".into());
    }
    let files: Vec<ImageFile> = serde_json::from_value(m["checkpoint_files"].clone())
        .map_err(|e| format!("manifest checkpoint_files: {e}"))?;
    let now = inventory(&dir.join("checkpoint")).map_err(|e| e.to_string())?;
    if now != files {
        let names = |v: &[ImageFile]| {
            v.iter()
                .map(|f| format!("{} ({} bytes, {})", f.name, f.bytes, f.sha256))
                .collect::<Vec<_>>()
        };
        let (want, got) = (names(&files), names(&now));
        let missing: Vec<&String> = want.iter().filter(|w| !got.contains(w)).collect();
        let extra: Vec<&String> = got.iter().filter(|g| !want.contains(g)).collect();
        return Err(format!(
            "checkpoint images differ from the manifest: recorded but not found {missing:?}; found but not recorded {extra:?}"
        ));
    }
    if !dir.join("upper").is_dir() {
        return Err("snapshot has no saved upper".into());
    }
    Ok((
        dir.clone(),
        format!(
            "{}: manifest, {} checkpoint files and netstate verified",
            dir.display(),
            files.len()
        ),
    ))
}

fn stale_tmp(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(root)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("snapshot.tmp-"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

// ------------------------------------------------------------------ restore / reset

fn restore(ctx: &mut Ctx, st: &mut SlotState, reset: bool) -> Result<String, SlotError> {
    let id = st.container_id.clone();
    // The container's `runtime state` is read-only, so it is queried on a second thread while
    // the gates below hash the binaries; its answer is used only after the runtime-binary gate
    // has proven the binary that gave it (same path, same sha256).
    let (paths_rt, paths_cr) = binary_paths(ctx, st);
    let query_rt = runtime(st, &paths_rt, &paths_cr);
    let (gates, (before, before_ms)) = std::thread::scope(|s| {
        let q = s.spawn(|| timed(|| container_status(&query_rt, &id)));
        let gates = common_gates(ctx, st).and_then(|rt| {
            let t = Instant::now();
            let snap = snapshot_complete(ctx, st);
            ctx.timings.insert("gate-snapshot".into(), ms_since(t));
            let (snap_dir, _) = snap.clone().unwrap_or_default();
            ctx.gate(
                "snapshot-complete",
                "a complete snapshot exists (manifest and hashes verified)",
                snap.map(|(_, d)| d),
            )?;
            Ok((rt, snap_dir))
        });
        let t = Instant::now();
        let before = q.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        ctx.timings.insert("runtime-state-wait".into(), ms_since(t));
        (gates, before)
    });
    let (rt, snap_dir) = gates?;
    ctx.timings.insert("runtime-state-query".into(), before_ms);
    let t = Instant::now();
    if reset {
        // Destructive: stop the current container (proven), after every gate above passed.
        stop_container_proven_from(ctx, &rt, &id, before)?;
    } else {
        let r = match before {
            Ok(None) => Ok(format!("runtime state {id}: does not exist")),
            Ok(Some(s)) => Err(format!(
                "runtime state {id}: {s}; restore needs no container (use reset)"
            )),
            Err(e) => Err(e),
        };
        ctx.gate(
            "container-absent",
            "no container exists for this slot (runtime state)",
            r,
        )?;
    }
    ctx.timings.insert("gate-container".into(), ms_since(t));
    let t = Instant::now();
    st.phase = Phase::Restoring;
    ctx.save(st)?;
    ctx.timings.insert("state-save".into(), ms_since(t));

    // Upper reset to the snapshot's, as a new run.
    let ov = st
        .overlay
        .clone()
        .ok_or_else(|| ctx.run_err("overlay", "no overlay recorded"))?;
    let image = st
        .image
        .clone()
        .ok_or_else(|| ctx.run_err("image", "no image recorded"))?;
    let odir = ctx.paths.overlay_dir();
    let t = Instant::now();
    mounts::unmount(&ov.merged).map_err(|e| ctx.run_err("overlay-unmount", e))?;
    let run = ov.run + 1;
    let (upper, work) = (ov.upper(&odir, run), ov.work(&odir, run));
    let _ = support::remove_tree_same_fs(&upper);
    let _ = support::remove_tree_same_fs(&work);
    support::copy_tree(&snap_dir.join("upper"), &upper)
        .map_err(|e| ctx.run_err("upper-reset", e))?;
    mkdirs(ctx, std::slice::from_ref(&work))?;
    let g = mounts::mount_overlay(&image.lower, &upper, &work, &ov.merged)
        .map_err(|e| ctx.run_err("overlay", e))?;
    g.disarm();
    st.overlay = Some(OverlayState {
        run,
        mounted: true,
        ..ov.clone()
    });
    ctx.save(st)?;
    // The previous run's upper and work folders are removed off the critical path: beside the
    // gates that follow the restore (or at once if the restore does not happen or fails).
    let old_run = [ov.upper(&odir, ov.run), ov.work(&odir, ov.run)];
    let remove_old_run = || {
        for old in &old_run {
            let _ = support::remove_tree_same_fs(old);
        }
    };
    ctx.timings.insert("upper-reset".into(), ms_since(t));

    // Restore.
    let t = Instant::now();
    let holder = holder_gate(ctx, st, "restore");
    if holder.is_err() {
        remove_old_run();
    }
    holder?;
    ctx.timings.insert("gate-holder".into(), ms_since(t));
    let work = ctx.ev_path("criu-work");
    mkdirs(ctx, std::slice::from_ref(&work))?;
    let bundle = ctx.paths.bundle();
    let pidf = ctx.paths.root.join("container.pid");
    let images = snap_dir.join("checkpoint");
    let r = ctx.time_with_lock_inherited("restore", || {
        rt.restore(&id, &bundle, &images, &work, &pidf, &[])
    });
    ctx.rt_log("restore", r.as_ref());
    if let Err(e) = r {
        remove_old_run();
        return Err(restore_failed(
            ctx,
            st,
            &rt,
            ctx.run_err("runtime-restore", e.to_string()),
        ));
    }

    // The restored container's `runtime state` is queried on a second thread while the network
    // state is captured and compared in-process; the ready gates take its answer. The previous
    // run's folders are removed on a third.
    std::thread::scope(|s| {
        let q = s.spawn(|| timed(|| rt.state(&id)));
        s.spawn(remove_old_run);
        let state = move || q.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        restored_gates(ctx, st, &rt, &snap_dir, reset, state)
    })
}

/// The gates after a successful runtime restore: holder, network state byte-equal to the one
/// recorded at snapshot (else fail closed with the diff), then the ready gates. A failed gate
/// stops the restored container ([`restore_failed`]) and keeps the holder for a retry.
fn restored_gates(
    ctx: &mut Ctx,
    st: &mut SlotState,
    rt: &Runtime,
    snap_dir: &Path,
    reset: bool,
    state: impl FnOnce() -> (Result<Option<oci::ContainerState>, OciError>, u64),
) -> Result<String, SlotError> {
    // Gates: network state byte-equal to the recorded one, then the ready gates.
    let h = match holder_gate(ctx, st, "network-fidelity check") {
        Ok(h) => h,
        Err(e) => return Err(restore_failed(ctx, st, rt, e)),
    };
    // The snapshot's netstate.json was verified against its sha256 by `snapshot-complete`.
    let recorded = fs::read_to_string(snap_dir.join("netstate.json")).unwrap_or_default();
    let cap = ctx.time("netstate-capture", || net::capture(&h.netns_path()));
    let observed = match cap {
        Ok(c) => c,
        Err(e) => {
            return Err(restore_failed(
                ctx,
                st,
                rt,
                ctx.run_err("netstate-capture", e),
            ));
        }
    };
    let cap = observed.to_canonical_json();
    let t = Instant::now();
    ctx.ev_write("netstate-recorded.json", recorded.as_bytes());
    ctx.ev_write("netstate-after.json", cap.as_bytes());
    ctx.timings.insert("evidence-netstate".into(), ms_since(t));
    if cap != recorded {
        // NetState::diff: one `- kind: {json}` / `+ kind: {json}` line per differing element.
        let diff = match NetState::from_json(&recorded) {
            Ok(rec) => {
                let mut d = rec.diff(&observed).join("\n");
                if d.is_empty() {
                    d = "(same elements, different bytes)".into();
                }
                d + "\n"
            }
            Err(e) => format!("recorded netstate.json is not a NetState: {e}\n"),
        };
        ctx.ev_write("netstate-diff.txt", diff.as_bytes());
        let e = ctx
            .gate(
                "net-fidelity",
                "the network state after restore is byte-equal to the one recorded at snapshot",
                Err(format!(
                    "{} bytes recorded vs {} observed; diff saved as netstate-diff.txt",
                    recorded.len(),
                    cap.len()
                )),
            )
            .expect_err("unproven");
        return Err(restore_failed(ctx, st, rt, e.with_diff(diff)));
    }
    let r = Ok(format!(
        "{} bytes, sha256 {}",
        cap.len(),
        support::sha256_bytes(cap.as_bytes())
    ));
    ctx.gate(
        "net-fidelity",
        "the network state after restore is byte-equal to the one recorded at snapshot",
        r,
    )?;
    let t = Instant::now();
    let ready = ready_gates(ctx, st, if reset { "reset" } else { "restore" }, state);
    ctx.timings.insert("ready-gates".into(), ms_since(t));
    if let Err(e) = ready {
        return Err(restore_failed(ctx, st, rt, e));
    }
    let t = Instant::now();
    st.phase = Phase::Running;
    st.restores += 1;
    st.last_verb = Some(ctx.verb().into());
    st.last_ok = true;
    ctx.save(st)?;
    ctx.timings.insert("state-save-end".into(), ms_since(t));
    ctx.fact("restores", st.restores);
    Ok(format!(
        "{} from {}: network state byte-equal ({} bytes), container running, guest answers",
        if reset { "reset" } else { "restored" },
        snap_dir
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        cap.len()
    ))
}

/// A failed restore: the restored container (if any) is stopped and proven gone so the restore
/// can be retried; the holder, the snapshot and the mounts are kept.
fn restore_failed(ctx: &mut Ctx, st: &mut SlotState, rt: &Runtime, e: SlotError) -> SlotError {
    let id = st.container_id.clone();
    let _ = stop_container_proven(ctx, rt, &id);
    st.phase = Phase::RestoreFailed;
    let _ = st.save(&ctx.paths.state());
    ctx.journal(
        "step",
        false,
        "restore failed closed; holder kept for a retry",
    );
    e
}

// ------------------------------------------------------------------ cleanup

fn cleanup(ctx: &mut Ctx, st: &mut SlotState) -> Result<String, SlotError> {
    // Facts that protect no step cleanup takes are recorded, not blocking.
    criu_config_gate(ctx, false)?;
    let (rt_path, cr_path) = binary_gates(ctx, st, false)?;
    let r = config_hash_result(ctx, st);
    let (ok, d) = match r {
        Ok(d) => (true, d),
        Err(d) => (false, format!("{d} (cleanup does not read config.json)")),
    };
    ctx.gates.record(
        "config-hash",
        "config.json has the sha256 recorded at provision",
        ok,
        d,
    );
    let holder_r = holder_result(st);
    st.phase = Phase::Cleaning;
    ctx.save(st)?;
    let rt = runtime(st, &rt_path, &cr_path);
    let id = st.container_id.clone();
    let mut problems = Vec::new();

    // 1. Container proven gone (blocking: nothing is unmounted under a live container).
    let t = Instant::now();
    stop_container_proven(ctx, &rt, &id)?;
    ctx.timings.insert("container-stop".into(), ms_since(t));

    // 2. Overlay, image mount, loop device, FUSE export.
    let t = Instant::now();
    if let Some(ov) = st.overlay.as_mut() {
        if let Err(e) = mounts::unmount(&ov.merged) {
            problems.push(e);
        }
        ov.mounted = mounts::is_mounted(&ov.merged);
    }
    if let Some(img) = st.image.clone()
        && img.kind == "qcow2"
    {
        if let Err(e) = mounts::unmount(&img.lower) {
            problems.push(e);
        }
        if let Some(export) = &img.export_file {
            let mut loops: Vec<PathBuf> = img.loop_device.iter().cloned().collect();
            loops.extend(mounts::loops_backed_by(export));
            loops.dedup();
            for l in loops {
                if let Err(e) = mounts::loop_detach(&l, Some(export)) {
                    problems.push(e);
                }
            }
            let mut pids: Vec<i32> = img.qsd_pid.into_iter().collect();
            pids.extend(mounts::qsd_pids_mentioning(&export.to_string_lossy()));
            pids.dedup();
            for pid in pids {
                if let Err(e) = mounts::qsd_stop(pid, export) {
                    problems.push(e);
                }
            }
            if mounts::is_mounted(export) {
                problems.push(format!("FUSE export {} still mounted", export.display()));
            }
        }
    }
    // Anything else still mounted inside the slot (deepest first).
    let mut left: Vec<PathBuf> = mounts::mount_points()
        .into_iter()
        .filter(|m| m.starts_with(&ctx.paths.root))
        .collect();
    left.sort_by_key(|m| std::cmp::Reverse(m.as_os_str().len()));
    for m in left {
        if let Err(e) = mounts::unmount(&m) {
            problems.push(e);
        }
    }
    ctx.timings.insert("unmount".into(), ms_since(t));

    // 3. Interrupted snapshots: a snapshot is complete only after its rename, so a
    // `snapshot.tmp-*` folder is never evidence and never used; nothing runs in it any more (the
    // container is gone and the lock, inherited by the runtime and CRIU, is ours).
    let mut removed = Vec::new();
    for name in stale_tmp(&ctx.paths.root) {
        match support::remove_tree_same_fs(&ctx.paths.root.join(&name)) {
            Ok(()) => removed.push(name),
            Err(e) => problems.push(format!("stale {name} not removed: {e}")),
        }
    }
    let removed_detail = if removed.is_empty() {
        String::new()
    } else {
        let d = format!(
            "removed the interrupted snapshot folder(s) {} (never evidence: a snapshot is complete only after its rename)",
            removed.join(", ")
        );
        ctx.journal("step", true, &d);
        format!("; {d}")
    };
    ctx.fact("stale_snapshot_tmp_removed", removed);

    // 4. Holder, through its pidfd, only if it is still the recorded process.
    let t = Instant::now();
    let holder_detail = match (&st.holder, holder_r) {
        (None, _) => "no holder recorded".to_string(),
        (Some(h), Ok(_)) => match ns::stop_by_identity(h, Duration::from_secs(5)) {
            Ok(()) => format!("holder pid {} stopped through its pidfd", h.pid),
            Err(NsError::Gone { .. }) => format!("holder pid {} was already gone", h.pid),
            Err(e) => {
                let e = e.to_string();
                problems.push(e.clone());
                e
            }
        },
        (Some(h), Err(e)) => format!("holder pid {} not signalled: {e}", h.pid),
    };
    let holder_gone = st.holder.map(|h| h.verify().is_err()).unwrap_or(true);
    ctx.gates.record(
        "holder-identity",
        HOLDER_FACT,
        !holder_gone,
        holder_detail.clone(),
    );
    ctx.timings.insert("holder-stop".into(), ms_since(t));
    if holder_gone {
        st.holder = None;
    }
    let r = if problems.is_empty() {
        Ok("container gone, mounts released, FUSE export stopped, holder stopped".to_string())
    } else {
        Err(problems.join("; "))
    };
    ctx.gate("released", "every resource of the slot is released", r)?;
    st.phase = Phase::Clean;
    ctx.save(st)?;
    Ok(format!(
        "slot clean ({holder_detail}){removed_detail}; evidence kept in {}",
        ctx.paths.evidence().display()
    ))
}

// ------------------------------------------------------------------ status

fn status(ctx: &mut Ctx) -> Result<SlotOutcome, SlotError> {
    let p = ctx.paths.clone();
    // The same gate as every other verb; only a state dir that does not exist yet (or an empty
    // one) is accepted, as `provision` would adopt it: then the document says `exists: false`.
    let r = layout::check_state_dir(&p.state_dir, StateDirUse::Inspect);
    ctx.gate("state-dir", STATE_DIR_FACT, r)?;
    let exists = fs::symlink_metadata(&p.root).is_ok();
    let owner = if exists {
        Some(layout::check_owner(&p))
    } else {
        None
    };
    if let Some(Err((_, d))) = &owner {
        ctx.gate(
            "ownership-marker",
            "the slot directory carries our ownership marker",
            Err(d.clone()),
        )?;
    }
    let st = if exists {
        SlotState::load(&p.state()).ok()
    } else {
        None
    };
    let busy = exists && SlotLock::acquire(&p.lock()).is_err();
    let mut live = json!({});
    if let Some(st) = &st {
        let holder = match holder_result(st) {
            Ok(d) => json!({"alive": true, "detail": d}),
            Err(d) => json!({"alive": false, "detail": d}),
        };
        // The runtime is queried only if it is still the binary recorded at provision.
        let container = match file_sha256(&st.runtime.path) {
            Ok(h) if h == st.runtime.sha256 => {
                let rt = runtime(st, &st.runtime.path, &st.criu.path);
                match rt.state(&st.container_id) {
                    Ok(Some(c)) => {
                        json!({"status": c.status, "detail": format!("init pid {}", c.pid)})
                    }
                    Ok(None) => {
                        json!({"status": "absent", "detail": "runtime state: does not exist"})
                    }
                    Err(e) => json!({"status": "unknown", "detail": e.to_string()}),
                }
            }
            Ok(h) => {
                json!({"status": "unknown", "detail": format!("runtime {} sha256 {h} differs from provision; not run", st.runtime.path.display())})
            }
            Err(e) => json!({"status": "unknown", "detail": e}),
        };
        let img = st.image.as_ref();
        live = json!({
            "holder": holder,
            "container": container,
            "overlay_mounted": st.overlay.as_ref().is_some_and(|o| mounts::is_mounted(&o.merged)),
            "image_mounted": img.is_some_and(|i| i.kind == "qcow2" && mounts::is_mounted(&i.lower)),
            "fuse_export_running": img.and_then(|i| i.qsd_pid.zip(i.export_file.clone())).is_some_and(|(pid, f)| mounts::qsd_is_ours(pid, &f)),
            "loop_attached": img.and_then(|i| i.loop_device.clone().zip(i.export_file.clone())).is_some_and(|(d, f)| mounts::loop_backing_file(&d).as_deref() == Some(f.as_path())),
        });
    }
    let snap = st.as_ref().map(|s| snapshot_complete(ctx, s));
    let journal = layout::journal_read(&p.journal());
    let declared = ctx.declared(st.as_ref());
    let doc = json!({
        "schema_version": STATE_SCHEMA_VERSION,
        "tool": "netprobe",
        "tool_version": env!("CARGO_PKG_VERSION"),
        "slot": p.slot,
        "slot_dir": p.root,
        "exists": exists,
        "owned": matches!(owner, Some(Ok(_))),
        "busy": busy,
        "state": st,
        "live": live,
        "snapshot": match &snap {
            Some(Ok((_, d))) => json!({"complete": true, "detail": d}),
            Some(Err(d)) => json!({"complete": false, "detail": d}),
            None => json!({"complete": false, "detail": "no slot"}),
        },
        "stale_snapshot_tmp": if exists { stale_tmp(&p.root) } else { vec![] },
        "journal_entries": journal.len(),
        "last_journal_entry": journal.last(),
        "declared_differences": declared,
    });
    Ok(SlotOutcome {
        verb: Verb::Status,
        slot: p.slot,
        phase: st.as_ref().map(|s| s.phase),
        summary: format!("phase {:?}", st.as_ref().map(|s| s.phase)),
        gates: ctx.gates.gates.clone(),
        timings_ms: BTreeMap::new(),
        facts: BTreeMap::new(),
        declared_differences: declared,
        evidence: None,
        status: Some(doc),
    })
}
