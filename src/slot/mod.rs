//! The slot driver: `netprobe slot VERB --slot N --state-dir DIR` with verbs `provision`,
//! `snapshot`, `restore`, `reset`, `cleanup`, `status`, each behind fail-closed gates
//! (ARCHITECTURE.md section 5).
//!
//! Entry point: [`run_verb`]. Every verb validates the slot number, checks the state directory,
//! proves the slot's ownership marker and takes the slot's exclusive lock before anything else;
//! then it evaluates its gates (any unproven gate fails closed before a destructive step), writes
//! its own evidence folder in the slot (`evidence/<seq>-<verb>/`: `gates.json`, `timings.json`,
//! `verb.json`, logs and network-state captures) and appends to the slot journal.
//!
//! Module map, by job: [`verb`] — one file per verb (`provision`, `snapshot`, `restore` for
//! restore and reset, `cleanup`, `status` with its `status_advice`, `prune`); [`record`] — the
//! verb's record (`verb_run::VerbRun`: enter, lock, evidence, journal, timings, finish; the
//! journal; the checked evidence writes; the one end writer used by the verb's end and its
//! interruption note); [`resources`] — the host-side resources (slot folder and state
//! directory, lock, mounts, cgroups, sealed binaries, published ports, what a runtime or CRIU
//! leaves behind); [`gate`] — [`GateId`] (name, fact, class; the per-verb lists of gates before
//! the first destructive step) and the gates and checks (pure checks unit-tested without root,
//! the gates several verbs share, image, checkpoint images, network, display, readiness);
//! [`state`] (`state.json`, [`Phase::after`], the one table of phase transitions);
//! `next_step` (the `netprobe slot` commands the texts tell the user to run); [`error`]. The
//! runtime is reached only through [`crate::oci::RuntimeOps`] and [`crate::oci::Container`], so
//! the gate order is unit-tested with a recording fake.

pub mod error;
pub mod gate;
#[cfg(test)]
mod host_fault_tests;
mod next_step;
mod profile_record;
pub mod record;
pub mod resources;
pub mod state;
#[cfg(test)]
mod tests;
pub mod verb;

pub use error::{FailedAt, SlotError, StepError, StepId};
pub use gate::{Gate, GateClass, GateId, GateLog, Observed};
pub use record::journal::JournalEvent;
pub use resources::slot_dir::{SlotPaths, parse_slot};
pub use resources::slot_lock::SlotLock;
pub use state::{ImageKind, Phase, ProbeGateMode, SlotState, StateError, VerbEnd};

use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A slot verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verb {
    /// Create a fresh slot: image, overlay, holder, bundle, container, ready gates.
    Provision,
    /// Record the network state, checkpoint the container, save the overlay upper.
    Snapshot,
    /// Restore from the complete snapshot (container must be proven gone), with the gates.
    Restore,
    /// Container proven gone, upper reset to the snapshot's, restore with the same gates.
    Reset,
    /// Release everything (container, mounts, FUSE export, holder); evidence kept.
    Cleanup,
    /// Print the slot state as JSON (schema `evidence-schema/slot-state.schema.json`).
    Status,
}

impl Verb {
    /// The verb as written on the command line and in evidence.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Provision => "provision",
            Verb::Snapshot => "snapshot",
            Verb::Restore => "restore",
            Verb::Reset => "reset",
            Verb::Cleanup => "cleanup",
            Verb::Status => "status",
        }
    }

    /// Every verb, in lifecycle order.
    pub const ALL: [Verb; 6] = [
        Verb::Provision,
        Verb::Snapshot,
        Verb::Restore,
        Verb::Reset,
        Verb::Cleanup,
        Verb::Status,
    ];

    /// Parses a verb. Errors: `None` for an unknown verb.
    pub fn parse(s: &str) -> Option<Verb> {
        Verb::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// The arguments of `netprobe slot VERB`. The CLI's clap subcommands decide which verb takes
/// which flag and check the flags' shape (`--image-sha256` format, `--no-probe-gate` with
/// `--reason`, not with `--probe-evidence`); [`run_verb`] checks, however the arguments were
/// built, the slot number and the rules of [`gate::pure_checks::usage_checks`] (override reason, qcow2
/// pin). Verbs other than provision ignore the provision-only fields.
#[derive(Debug, Clone)]
pub struct SlotArgs {
    /// The verb.
    pub verb: Verb,
    /// The slot number as typed (validated here: digits only, 0..=999, no leading zero).
    pub slot: String,
    /// The state directory (`--state-dir`); must not be a symlink; created by `provision`.
    pub state_dir: PathBuf,
    /// `--image`: a directory (used as-is) or a `.qcow2` file (needs `image_sha256`). Default:
    /// the embedded busybox rootfs. Provision only.
    pub image: Option<PathBuf>,
    /// `--image-sha256`: lower-case hex sha256 of the qcow2. Provision only.
    pub image_sha256: Option<String>,
    /// `--profile FILE`: the slot profile (TOML, `evidence-schema/slot-profile.schema.json`);
    /// excludes `--image`. `None`: the built-in default profile (today's busybox slot) or the
    /// `--image` flags. Provision only.
    pub profile: Option<PathBuf>,
    /// `--probe-evidence DIR`: a netprobe evidence directory with a passing verdict. Provision only.
    pub probe_evidence: Option<PathBuf>,
    /// `--no-probe-gate`: provision without probe evidence (needs `reason`; recorded in the slot).
    pub no_probe_gate: bool,
    /// `--reason TEXT` for `--no-probe-gate`.
    pub reason: Option<String>,
    /// `--runtime PATH`. Provision default: [`crate::host::default_runtime`] (runc in PATH);
    /// later verbs default to the path recorded at provision (a different path is accepted only
    /// with the same sha256).
    pub runtime: Option<PathBuf>,
    /// `--criu PATH`. Provision default: [`crate::host::default_criu`] (CRIU 4.2.1 at
    /// `/opt/criu-4.2.1/sbin/criu`); later verbs as for `runtime`. runc is always given it with
    /// `--criu`.
    pub criu: Option<PathBuf>,
    /// The netprobe executable the holder is started from (`EXE __holder --report-fd N
    /// --lo-up`). `None`: [`crate::ns::default_exe`] (`$NETPROBE_EXE`, else the running
    /// executable — right for the CLI). Library callers whose executable is not netprobe (tests)
    /// must set it, e.g. to `env!("CARGO_BIN_EXE_netprobe")`. Provision only (later verbs never
    /// start a holder).
    pub holder_exe: Option<PathBuf>,
    /// `--cgroup-driver`: `systemd` or `cgroupfs`. `None`: systemd where systemd is pid 1, else
    /// cgroupfs ([`crate::cgroup::DriverChoice::choose`]). Provision only (later verbs use the
    /// driver recorded in the state).
    pub cgroup_driver: Option<crate::cgroup::CgroupDriver>,
    /// `--publish [HOST_ADDR:]HOST_PORT:GUEST_PORT` (repeatable; [`resources::published_ports::parse_publish`]),
    /// added to the profile's `[[network.publish]]`. Provision only.
    pub publish: Vec<crate::profile::Publish>,
    /// `--allow-script-binaries REASON`: accept a runtime or CRIU that is a `#!` script (the
    /// `runtime-binary`/`criu-binary` gates refuse one otherwise: the slot would seal and prove
    /// the script, not the program it runs); the reason is recorded in `state.json` and the
    /// verb's facts. Provision only.
    pub allow_script_binaries: Option<String>,
    /// `--json`: the CLI prints [`SlotOutcome::to_json`] instead of [`SlotOutcome::render`].
    pub json: bool,
}

impl SlotArgs {
    /// Arguments for `verb` on `slot` in `state_dir`, every option unset.
    pub fn new(verb: Verb, slot: impl Into<String>, state_dir: impl Into<PathBuf>) -> Self {
        SlotArgs {
            verb,
            slot: slot.into(),
            state_dir: state_dir.into(),
            image: None,
            image_sha256: None,
            profile: None,
            probe_evidence: None,
            no_probe_gate: false,
            reason: None,
            runtime: None,
            criu: None,
            holder_exe: None,
            cgroup_driver: None,
            publish: Vec::new(),
            allow_script_binaries: None,
            json: false,
        }
    }
}

/// What a successful verb did.
#[derive(Debug, Clone, Serialize)]
pub struct SlotOutcome {
    /// The verb.
    pub verb: Verb,
    /// The slot number.
    pub slot: u32,
    /// The slot's phase after the verb.
    pub phase: Option<Phase>,
    /// One line for people.
    pub summary: String,
    /// Every gate evaluated, in order.
    pub gates: Vec<Gate>,
    /// Named step timings, milliseconds (monotonic clock).
    pub timings_ms: BTreeMap<String, u64>,
    /// Facts (holder identity, config sha256, snapshot, cgroup readback, ...).
    pub facts: BTreeMap<String, serde_json::Value>,
    /// The declared differences that accompany every number here.
    pub declared_differences: Vec<String>,
    /// This verb's evidence folder (absent for `status`).
    pub evidence: Option<PathBuf>,
    /// For `status`: the status document (schema `evidence-schema/slot-state.schema.json`).
    pub status: Option<serde_json::Value>,
}

impl SlotOutcome {
    /// The outcome as JSON (for `status`, the status document itself).
    pub fn to_json(&self) -> serde_json::Value {
        if let Some(s) = &self.status {
            return s.clone();
        }
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// The outcome for people: summary, gates, timings, declared differences, evidence folder.
    pub fn render(&self) -> String {
        if let Some(s) = &self.status {
            return format!("{s:#}");
        }
        let mut out = format!(
            "slot {} {}: {}\n",
            self.slot,
            self.verb.as_str(),
            self.summary
        );
        for g in &self.gates {
            out.push_str(&format!(
                "  gate {:<22} {} {}\n",
                g.name,
                if g.proven {
                    "proven  "
                } else if g.blocking {
                    "FAILED  "
                } else {
                    "recorded"
                },
                g.detail
            ));
        }
        if !self.timings_ms.is_empty() {
            let t: Vec<String> = self
                .timings_ms
                .iter()
                .map(|(k, v)| format!("{k} {v} ms"))
                .collect();
            out.push_str(&format!("  timings: {}\n", t.join(", ")));
        }
        out.push_str("  declared differences:\n");
        for d in &self.declared_differences {
            out.push_str(&format!("   - {d}\n"));
        }
        if let Some(e) = &self.evidence {
            out.push_str(&format!("  evidence: {}\n", e.display()));
        }
        out
    }
}

/// The slot's container resources: 4 CPUs (cfs quota 400000 µs per 100000 µs period), 4 GiB
/// memory, no swap (memory + swap = memory).
pub const SLOT_RESOURCES: crate::oci::Resources = crate::oci::Resources {
    cpu_quota: 400_000,
    cpu_period: 100_000,
    memory_limit: 4 * 1024 * 1024 * 1024,
    memory_swap: 4 * 1024 * 1024 * 1024,
};

/// The declared differences of the slot arm; every number the slot driver prints or writes
/// carries them (plus the binaries recorded at provision, added per slot).
pub const DECLARED_DIFFERENCES: &[&str] = &[
    "The network namespace is HARNESS-OWNED and is not part of the CRIU image: runc always passes empty-ns for a namespace it creates, so each slot runs in a private namespace created and brought up (lo) by a persistent holder process (netprobe __holder) and named by path in config.json; CRIU records only an external key and the same namespace must exist at restore.",
    "The holder's memory and CPU are outside the container's cgroup: they are costs of the harness and are NOT inside the container's limits.",
    "TCP connections inside the namespace are not preserved across a restore (--tcp-established is not used); the guest server is checked with a new connection.",
    "snapshot stops the container (runtime checkpoint without --leave-running) so that the overlay upper is saved exactly as it was at checkpoint time.",
    EMBEDDED_IMAGE_DIFFERENCE,
];

/// The declared difference of a slot on the embedded image (and of a verb that has no slot state
/// to say otherwise); a slot on another image declares that image instead
/// (`VerbRun::declared`).
pub const EMBEDDED_IMAGE_DIFFERENCE: &str = "The default image is netprobe's embedded busybox rootfs (init: busybox httpd on 0.0.0.0:5000), a stand-in for the image's own server.";

/// Runs one slot verb. See the module docs for the order of checks.
///
/// Errors: [`SlotError`] naming the slot and the failed gate or step; exit codes from
/// [`SlotError::exit_class`] ([`crate::exit::ExitClass`]): 1 a gate failed, 2 usage or a
/// verb's own record (evidence, journal, last `state.json` update) not all written
/// ([`SlotError::evidence_incomplete`]), 3 host refused, 4 could not run.
pub fn run_verb(args: &SlotArgs) -> Result<SlotOutcome, SlotError> {
    let env = record::verb_run::SlotEnv {
        make_runtime: &record::verb_run::real_runtime,
        require_root: true,
        trace: None,
        proc_root: std::path::PathBuf::from("/proc"),
    };
    run_with(args, &env)
}

/// [`run_verb`] in an environment (the real one, or a recording fake runtime in unit tests).
fn run_with(args: &SlotArgs, env: &record::verb_run::SlotEnv) -> Result<SlotOutcome, SlotError> {
    let raw = args.slot.clone();
    let n = resources::slot_dir::parse_slot(&raw)?;
    gate::pure_checks::usage_checks(args, &raw)?;
    if env.require_root && !nix::unistd::geteuid().is_root() {
        return Err(SlotError::host(
            &raw,
            FailedAt::Root,
            "netprobe slot needs root (namespaces, mounts, runc, CRIU)",
        ));
    }
    let paths = SlotPaths::new(&args.state_dir, n);
    let mut vr = record::verb_run::VerbRun::new(args, raw, paths, env);
    let res = match args.verb {
        Verb::Status => return verb::status::status(&mut vr),
        Verb::Provision => verb::provision::provision(&mut vr),
        Verb::Snapshot => with_existing(&mut vr, verb::snapshot::snapshot),
        Verb::Restore => with_existing(&mut vr, |r, s| verb::restore::restore(r, s, false)),
        Verb::Reset => with_existing(&mut vr, |r, s| verb::restore::restore(r, s, true)),
        Verb::Cleanup => with_existing(&mut vr, verb::cleanup::cleanup),
    };
    vr.finish(res)
}

/// When `state.json` does not exist and the journal proves that no verb got as far as making
/// anything — no `step` entry (a provision journals its first, `state written`, right after it
/// writes `state.json`; every other step comes after the verb's gates and its state) and no
/// `end` that succeeded —: the slot's provision ended before it recorded anything (its
/// journal's last provision `end`, quoted) and what to do. `None` when the file exists, or when
/// the journal records a slot that was made ([`journal_made`]: then what is left must be
/// released by hand, which `slot status` spells out).
fn missing_state_why(paths: &SlotPaths) -> Option<String> {
    if paths.state().exists() {
        return None;
    }
    let journal = record::journal::journal_read(&paths.journal());
    if journal_made(&journal).is_some() {
        return None;
    }
    let last_end = journal
        .into_iter()
        .rev()
        .find(|e| e.verb == "provision" && e.event == JournalEvent::End);
    let ended = match last_end {
        Some(e) => format!("its provision ended at {} ({})", e.at, e.detail),
        None => "no provision of it recorded an end".to_string(),
    };
    Some(format!(
        ": slot {} has no state: {ended} before recording anything, so there is nothing to release or restore; keep its evidence ({}), move {} away, and provision another slot number",
        paths.slot,
        paths.evidence().display(),
        paths.root.display()
    ))
}

/// The newest journal entry proving that a verb on the slot made something: a `step` (taken
/// only once `state.json` was written) or an `end` that succeeded.
fn journal_made(
    journal: &[record::journal::JournalEntry],
) -> Option<&record::journal::JournalEntry> {
    journal
        .iter()
        .rev()
        .find(|e| e.event == JournalEvent::Step || (e.event == JournalEvent::End && e.ok))
}

/// The `slot-state` gate's words after `state.json`'s read error, when no verb can run: the
/// journal proves nothing was made ([`missing_state_why`]); or `state.json` is missing
/// although the journal records a made slot (its newest such entry quoted); or it cannot be
/// read. The last two point to `slot status`, whose `advice` lists what to release by hand.
fn no_state_why(paths: &SlotPaths) -> String {
    if let Some(why) = missing_state_why(paths) {
        return why;
    }
    let status = format!(
        "{} says what to release by hand (its `advice`)",
        next_step::on_slot("status", paths)
    );
    let journal = record::journal::journal_read(&paths.journal());
    match journal_made(&journal) {
        Some(e) if !paths.state().exists() => format!(
            "; state.json is missing although the journal records a provisioned slot (its {} {} at {}: {}), so its container, holder and mounts may still be live and no verb can run on this slot: do not move the slot folder away or provision over it; {status}, then provision another slot number",
            e.verb, e.event, e.at, e.detail
        ),
        _ => format!("; no verb can run on this slot: {status}"),
    }
}

/// Enter an existing slot (state dir, marker, lock, evidence), load and check its state, run
/// `f`, record the verb's end in the state.
fn with_existing(
    vr: &mut record::verb_run::VerbRun,
    f: impl FnOnce(&mut record::verb_run::VerbRun, &mut SlotState) -> Result<String, SlotError>,
) -> Result<(String, Option<SlotState>), SlotError> {
    let t = std::time::Instant::now();
    vr.enter_existing()?;
    vr.took("enter", t);
    let mut st = match SlotState::load(&vr.paths.state()) {
        Ok(s) if s.slot == vr.paths.slot => s,
        Ok(s) => {
            return Err(vr.fail(
                GateId::SlotState,
                format!("state.json names slot {}", s.slot),
            ));
        }
        Err(e) => {
            // No state at all (a provision stopped before it): nothing to release. Else what
            // is left must be released by hand, which `slot status` spells out.
            let why = no_state_why(&vr.paths);
            return Err(vr.fail(GateId::SlotState, format!("{e}{why}")));
        }
    };
    vr.gate(GateId::SlotState, Ok(format!("phase {:?}", st.phase)))?;
    if vr.args.verb != Verb::Cleanup {
        let r = if st.phase == Phase::Clean {
            Err(format!(
                "slot {}: state.json records phase clean (a cleanup released its container, \
                 mounts and holder), and a slot is never re-provisioned in place; provision a \
                 new slot number, or — once {} shows nothing live (holder, \
                 mounts) — remove the slot folder {} after keeping its evidence ({})",
                vr.paths.slot,
                next_step::bare("status"),
                vr.paths.root.display(),
                vr.paths.evidence().display()
            ))
        } else {
            Ok(format!("phase {:?}", st.phase))
        };
        vr.gate(GateId::SlotNotClean, r)?;
    }
    let r = f(vr, &mut st);
    // A binary re-hashed to its pin (and proven, whether the verb then passed or not) is
    // compared by stat again from the next verb on.
    for d in vr.refreshed.apply(&mut st) {
        vr.journal(JournalEvent::Step, true, &d);
    }
    st.last_verb = Some(vr.verb().into());
    st.last_ok = r.is_ok();
    if let Err(e) = st.save_if_changed(&vr.paths.state()) {
        // The phase the verb saved stands; its last_verb and last_ok did not reach the file.
        let file = vr.paths.state().display().to_string();
        let why = format!("update of last_verb and last_ok: {e}");
        let fault = match &e {
            state::StateError::Write { source, .. } => {
                record::evidence_writes::WriteFault::of_io(source)
            }
            _ => record::evidence_writes::WriteFault::Other,
        };
        vr.unwritten
            .push(record::evidence_writes::Unwritten { file, why, fault });
    }
    r.map(|s| (s, Some(st)))
}
