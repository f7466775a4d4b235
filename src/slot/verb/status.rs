//! `status`: the slot state as JSON (schema `evidence-schema/slot-state.schema.json`), with
//! live facts (holder, container, mounts, FUSE export, loop device), snapshot completeness and
//! the journal's last entry. Changes nothing; takes no lock.

use super::status_doc::{
    ContainerNow, HolderNow, LeftNow, Live, LiveFacts, NoneLeft, ProvenNow, RuntimeEntryNow,
    SealedNow, SnapshotNow, StatusDoc, UnrecordedLive, VolatileNow,
};
use crate::slot::error::SlotError;
use crate::slot::gate::GateId;
use crate::slot::gate::Observed;
use crate::slot::gate::ObservedWith;
use crate::slot::gate::image_unchanged;
use crate::slot::gate::publish_gates;
use crate::slot::gate::pure_checks;
use crate::slot::gate::shared_gates;
use crate::slot::next_step;
use crate::slot::record::journal;
use crate::slot::record::verb_run::VerbRun;
use crate::slot::resources::cgroups;
use crate::slot::resources::criu_net_lock;
use crate::slot::resources::leftover_procs;
use crate::slot::resources::mounts;
use crate::slot::resources::slot_dir::{self, SlotPaths};
use crate::slot::resources::slot_lock;
use crate::slot::resources::state_dir::{self, StateDirUse};
use crate::slot::state::*;
use crate::slot::{SlotOutcome, Verb};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;

/// Runs `status`.
pub(crate) fn status(run: &mut VerbRun) -> Result<SlotOutcome, SlotError> {
    let p = run.paths.clone();
    // The same gate as every other verb; only a state dir that does not exist yet (or an empty
    // one) is accepted, as `provision` would adopt it: then the document says `exists: false`.
    let r = state_dir::check_state_dir(&p.state_dir, StateDirUse::Inspect);
    run.gate(GateId::StateDir, r)?;
    let exists = fs::symlink_metadata(&p.root).is_ok();
    let owner = if exists {
        Some(slot_dir::check_owner(&p))
    } else {
        None
    };
    if let Some(Err((_, d))) = &owner {
        return Err(run.fail(GateId::OwnershipMarker, d.clone()));
    }
    let (st, state_error) = match exists.then(|| SlotState::load(&p.state())) {
        Some(Ok(s)) => (Some(s), None),
        Some(Err(e)) => (None, Some(e.to_string())),
        None => (None, None),
    };
    // Tried and dropped at once: status never holds the lock while a verb wants it.
    let probe = match exists {
        true => slot_lock::probe(&p.lock()),
        false => slot_lock::LockProbe::Free,
    };
    // One scan of who holds it for every word about it.
    let held_by = (probe == slot_lock::LockProbe::Held).then(|| slot_lock::held_by(&p.lock()));
    let lock_error = match &probe {
        slot_lock::LockProbe::Unusable(e) => Some(e.clone()),
        _ => None,
    };
    let busy = held_by.is_some();
    let live = match (&st, &state_error) {
        (Some(st), _) => live_facts(run, st, busy),
        (None, Some(_)) => stateless_live_facts(
            &p,
            owner
                .as_ref()
                .and_then(|o| o.as_ref().ok())
                .map(|(m, _)| m.id.as_str()),
        ),
        (None, None) => Live::NoSlot {},
    };
    let snap = st
        .as_ref()
        .map(|s| pure_checks::snapshot_complete(&p.root, s));
    let journal = journal::journal_read(&p.journal());
    // Declared differences are the slot's: none for a slot that does not exist.
    let declared = if exists {
        run.declared(st.as_ref())
    } else {
        Vec::new()
    };
    let snapshot = match &snap {
        Some(Ok((_, d))) => (true, d.clone()),
        Some(Err(d)) => (false, d.0.clone()),
        None if state_error.is_some() => (
            false,
            "state.json cannot be read (`state_error`): the snapshot it records is unknown".into(),
        ),
        None => (false, "no slot".into()),
    };
    let advice = match exists {
        false => Some(absent_slot_advice(&p)),
        true => status_advice(
            &p,
            held_by.as_ref(),
            lock_error.as_deref(),
            state_error.as_deref(),
            st.as_ref(),
            &live,
            snap.as_ref().is_some_and(|s| s.is_ok()),
        ),
    };
    let doc = StatusDoc {
        schema_version: STATE_SCHEMA_VERSION,
        tool: "netprobe",
        tool_version: env!("CARGO_PKG_VERSION"),
        slot: p.slot,
        slot_dir: p.root.clone(),
        exists,
        owned: matches!(owner, Some(Ok(_))),
        busy,
        lock_error,
        state: st.clone(),
        state_error,
        live,
        snapshot: SnapshotNow {
            complete: snapshot.0,
            detail: snapshot.1,
        },
        stale_snapshot_tmp: if exists {
            pure_checks::stale_tmp(&p.root)
        } else {
            vec![]
        },
        journal_entries: journal.len(),
        last_journal_entry: journal.last().cloned(),
        declared_differences: declared.clone(),
        advice,
    };
    let doc = serde_json::to_value(&doc).map_err(|e| {
        run.step_err(
            crate::slot::error::StepId::StatusDocument,
            crate::slot::error::StepError::encode("status", e),
        )
    })?;
    Ok(SlotOutcome {
        verb: Verb::Status,
        slot: p.slot,
        phase: st.as_ref().map(|s| s.phase),
        summary: format!("phase {:?}", st.as_ref().map(|s| s.phase)),
        gates: run.gate_log().gates,
        timings_ms: BTreeMap::new(),
        facts: BTreeMap::new(),
        declared_differences: declared,
        evidence: None,
        status: Some(doc),
    })
}

/// The status document's `advice` for a slot folder that does not exist: the state directory
/// itself is missing (a mistyped `--state-dir`?), or it holds no such slot (never provisioned
/// there, or moved away). Names the slot folders it does hold.
fn absent_slot_advice(p: &SlotPaths) -> String {
    if !p.state_dir.exists() {
        return format!(
            "the state directory {} does not exist: no slot was provisioned there; check `--state-dir` (it is the one given at provision), or {} creates it with this slot",
            p.state_dir.display(),
            next_step::on_slot("provision", p)
        );
    }
    let mut slots: Vec<String> = fs::read_dir(&p.state_dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("slot-"))
                .collect()
        })
        .unwrap_or_default();
    slots.sort();
    format!(
        "{} holds no slot {} (never provisioned there, or moved away){}; `{} provision --slot {} --state-dir {}` makes it",
        p.state_dir.display(),
        p.slot,
        match slots.is_empty() {
            true => String::from("; it holds no slot folder at all"),
            false => format!("; it holds {}", slots.join(", ")),
        },
        next_step::COMMAND,
        p.slot,
        p.state_dir.display()
    )
}

/// The status document's `advice`: a lock held by no netprobe process (a killed verb's runtime
/// or CRIU task: how long it has run, and `kill -9` if it still holds the lock when asked
/// again), a running verb (wait), else what the phase needs next
/// ([`super::status_advice::advice`]), after a lock no verb can take. `snapshot_ok`: the snapshot
/// recorded in the state is complete.
fn status_advice(
    p: &SlotPaths,
    held_by: Option<&slot_lock::HeldBy>,
    lock_error: Option<&str>,
    state_error: Option<&str>,
    st: Option<&SlotState>,
    live: &Live,
    snapshot_ok: bool,
) -> Option<String> {
    let facts = match live {
        Live::Recorded(f) => Some(&**f),
        _ => None,
    };
    match held_by {
        // Held by no netprobe process: what a killed verb left (same scan as the names).
        Some(by) if !by.orphans.is_empty() => {
            Some(format!("the slot lock is {}", by.orphan_sentence))
        }
        // A verb runs: what it is doing looks like a lost container; wait for it.
        Some(by) => Some(format!(
            "a verb is running on this slot (its lock is held by {}); its runtime and CRIU processes are not a lost container: wait for it to end, then run {} again",
            by.text,
            next_step::bare("status")
        )),
        None => {
            let next = match (state_error, live) {
                (Some(e), Live::Unrecorded(u)) => Some(unreadable_state_advice(p, e, u)),
                (Some(e), _) => Some(unreadable_state_advice(p, e, &UnrecordedLive::default())),
                (None, _) => st.zip(facts).and_then(|(s, f)| {
                    crate::slot::verb::status_advice::advice(
                        s.phase,
                        p,
                        crate::slot::verb::status_advice::Container::from_live(f),
                        s.holder.map(|h| h.pid).filter(|_| f.holder.alive),
                        snapshot_ok,
                        super::status_advice::last_verb(&p.evidence()),
                    )
                }),
            };
            let with_facts = |f: &dyn Fn(&SlotState, &LiveFacts) -> Option<String>| {
                st.zip(facts).and_then(|(s, l)| f(s, l))
            };
            let overlay = with_facts(&|s, l| overlay_unmounted_note(p, s.phase, l, snapshot_ok));
            let lock = with_facts(&|s, l| criu_lock_note(s.phase, l));
            // An image changed since provision stops every later verb but cleanup.
            let changed = facts
                .and_then(|f| f.image_unchanged.as_ref())
                .is_some_and(|i| !i.proven);
            let image = changed.then(|| {
                "the image changed since provision (`live.image_unchanged` names what): snapshot, restore and reset refuse (gate image-unchanged) until the slot is cleaned up and another provisioned".to_string()
            });
            // A limit changed by hand: the next snapshot refuses it (gate cgroup-limits).
            let limits = facts.map(|f| &f.cgroup_limits).filter(|l| l["equal"] == false).map(|l| {
                format!(
                    "the container's cgroup limits differ from config.json (`live.cgroup_limits`: {}): snapshot refuses (gate cgroup-limits) until the value is put back",
                    l["differences"]
                        .as_array()
                        .map(|d| d.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("; "))
                        .unwrap_or_default()
                )
            });
            let next = [
                image,
                limits,
                next,
                lock,
                overlay,
                facts.and_then(overlay_volatile_note),
            ]
            .into_iter()
            .flatten()
            .reduce(|a, b| format!("{a}; {b}"));
            // A lock no verb can take comes first; what the phase needs follows it.
            match (lock_error, next) {
                (Some(e), next) => Some(format!(
                    "no verb can take the slot lock: {e}; make the state directory writable (a read-only mount, a full disk or permissions), then run {} again{}",
                    next_step::bare("status"),
                    next.map(|n| format!("; then: {n}")).unwrap_or_default()
                )),
                (None, next) => next,
            }
        }
    }
}

/// What is alive now: holder, container (the runtime is run only if it is still the binary
/// recorded at provision), processes a lost container left (only when the runtime has none and
/// no verb holds the lock: `busy`), overlay and image mounts, FUSE export, loop device.
fn live_facts(run: &mut VerbRun, st: &SlotState, busy: bool) -> Live {
    let holder = match pure_checks::holder(st) {
        Ok(detail) => HolderNow {
            alive: true,
            detail,
        },
        Err(detail) => HolderNow {
            alive: false,
            detail,
        },
    };
    let [s_rt, s_cr] = shared_gates::sealed_copies_now(st);
    let shown = |s: &Option<ObservedWith<(std::path::PathBuf, String)>>| {
        s.as_ref()
            .map(|r| proven(r.as_ref().map(|(_, d)| d.clone()).map_err(|e| e.0.clone())))
    };
    let sealed = SealedNow {
        runtime: shown(&s_rt),
        criu: shown(&s_cr),
    };
    // The holder's proven copies run when there are; else the files, if they still hash to
    // what provision recorded.
    let copy =
        |s: Option<ObservedWith<(std::path::PathBuf, String)>>| s.and_then(|r| r.ok()).map(|c| c.0);
    let (rt_copy, cr_copy) = (copy(s_rt), copy(s_cr));
    let rt_hash = match &rt_copy {
        Some(_) => Ok(st.runtime.sha256.clone()),
        None => pure_checks::file_sha256(&st.runtime.path),
    };
    let mut container_pid = None;
    let now = |status: &str, detail: String| ContainerNow {
        status: status.to_string(),
        detail,
    };
    let container = match rt_hash {
        Ok(h) if h == st.runtime.sha256 => {
            let rt_path = rt_copy.unwrap_or(st.runtime.path.clone());
            let cr_path = cr_copy.unwrap_or(st.criu.path.clone());
            let rt = run.runtime(st, &rt_path, &cr_path);
            match rt.state(&st.container_id) {
                Ok(Some(c)) => {
                    container_pid = Some(c.pid);
                    now(&c.status, format!("init pid {}", c.pid))
                }
                Ok(None) => now("absent", "runtime state: does not exist".into()),
                Err(e) => now("unknown", e.to_string()),
            }
        }
        Ok(h) => now(
            "unknown",
            format!(
                "runtime {} sha256 {h} differs from provision; not run",
                st.runtime.path.display()
            ),
        ),
        Err(e) => now("unknown", e),
    };
    // Only when the runtime has no container: then any process in its cgroup or beside the
    // holder in the slot's netns is one it lost track of (the restore gates refuse on them).
    // (Not while a verb runs: its runtime and CRIU processes are not a lost container. Not for
    // a clean slot: cleanup checked both — gates netns-empty and cgroup-released (the directories
    // gone) in its evidence — and the holder that named the namespace is stopped and no longer recorded.)
    let left = if container.status == "absent" && !busy && st.phase != Phase::Clean {
        let one = |r: Observed| {
            let p = proven(r);
            NoneLeft {
                none: p.proven,
                detail: p.detail,
            }
        };
        Some(LeftNow {
            cgroup: one(leftover_procs::no_container_procs(st)),
            netns: one(leftover_procs::no_netns_strangers(st, &run.env.proc_root)),
        })
    } else {
        None
    };
    let img = st.image.as_ref();
    // The `image-unchanged` gate's check, where it is cheap (a walk of a directory image's
    // metadata, one stat of a qcow2): never a whole-file hash of a qcow2 with no recorded stat.
    let image_unchanged = match img {
        Some(i) if i.manifest.is_some() || i.file_stat.is_some() => {
            Some(proven(image_unchanged::image_unchanged(st, &run.paths)))
        }
        _ => None,
    };
    // Read-only: the holder re-verified, its netns entered, the ruleset captured there.
    let criu_lock = st.holder.map(|h| criu_net_lock::look(&h));
    let limits = match (container.status.as_str(), container_pid) {
        ("running", Some(pid)) => cgroups::limits_now(st, pid),
        _ => Value::Null,
    };
    Live::Recorded(Box::new(LiveFacts {
        cgroup_limits: limits,
        holder,
        criu_network_lock: criu_lock,
        image_unchanged,
        sealed_copies: sealed,
        container,
        left_processes: left,
        overlay_mounted: st
            .overlay
            .as_ref()
            .is_some_and(|o| mounts::is_mounted(&o.merged)),
        overlay_volatile: overlay_volatile(st),
        image_mounted: img
            .is_some_and(|i| i.kind == ImageKind::Qcow2 && mounts::is_mounted(&i.lower)),
        fuse_export_running: img
            .and_then(|i| i.qsd_pid.zip(i.export_file.clone()))
            .is_some_and(|(pid, f)| mounts::qsd_is_ours(pid, &f)),
        loop_attached: img
            .and_then(|i| i.loop_device.clone().zip(i.export_file.clone()))
            .is_some_and(|(d, f)| mounts::loop_backing_file(&d).as_deref() == Some(f.as_path())),
        published_ports: publish_gates::live(st),
    }))
}

/// An observation as `proven` and its detail.
fn proven(r: Observed) -> ProvenNow {
    match r {
        Ok(detail) => ProvenNow {
            proven: true,
            detail,
        },
        Err(detail) => ProvenNow {
            proven: false,
            detail,
        },
    }
}

/// `live.overlay_volatile`: `state.json`'s `overlay.volatile` beside what the mount table says
/// of the overlay on the slot's rootfs (`volatile` among its options), and whether they agree;
/// null when no overlay is recorded or none is mounted there.
fn overlay_volatile(st: &SlotState) -> Option<VolatileNow> {
    let ov = st.overlay.as_ref()?;
    crate::ns::mountinfo::overlay_is_volatile(&ov.merged).map(|mounted| VolatileNow {
        recorded: ov.volatile,
        mounted,
        agrees: mounted == ov.volatile,
    })
}

/// The advice when the phase says the container runs on its overlay (`ready`, `running`) but
/// the mount table shows none on the slot's rootfs (`live.overlay_mounted` false: unmounted by
/// other hands): a snapshot refuses (gate `overlay-mounted`); `slot reset` mounts a new overlay
/// run and restores the snapshot onto it, else (no complete snapshot) `slot cleanup`. `None`
/// otherwise.
pub(crate) fn overlay_unmounted_note(
    p: &SlotPaths,
    phase: Phase,
    live: &LiveFacts,
    snapshot_ok: bool,
) -> Option<String> {
    if !matches!(phase, Phase::Ready | Phase::Running) || live.overlay_mounted {
        return None;
    }
    let cmd = |verb: &str| next_step::on_slot(verb, p);
    Some(format!(
        "no overlay is mounted on the slot's rootfs (`live.overlay_mounted`: unmounted by other hands), so a snapshot refuses (gate overlay-mounted); {}",
        match snapshot_ok {
            true => format!(
                "{} mounts a new overlay run and restores the snapshot onto it",
                cmd("reset")
            ),
            false => format!(
                "no complete snapshot exists to restore: {} releases what is left, then provision another slot number",
                cmd("cleanup")
            ),
        }
    ))
}

/// The advice when `live.criu_network_lock` shows CRIU's lock in the holder's netns in any phase
/// but `checkpointed` (there it is the complete snapshot's dump's, which the restore unlocks):
/// a verb that did not finish left it (a first snapshot killed with SIGKILL while the runtime
/// and CRIU finished the dump without netprobe), its rules drop the namespace's traffic, and
/// what each verb does with it. `None` otherwise.
pub(crate) fn criu_lock_note(phase: Phase, live: &LiveFacts) -> Option<String> {
    let lock = live.criu_network_lock.as_ref()?;
    if phase == Phase::Checkpointed || lock.status != criu_net_lock::LockPresence::Present {
        return None;
    }
    Some(format!(
        "CRIU's network lock is in the holder's network namespace (`live.criu_network_lock`: {}) in phase {}, so it is not a complete snapshot's (a checkpoint or restore that did not finish leaves it, e.g. a snapshot killed with SIGKILL whose runtime finished the dump without netprobe): its rules drop the namespace's packets CRIU did not mark, so the guest is unreachable while it stays; a restore or reset removes it before its runtime restore and refuses if it cannot (gate no-criu-lock), a snapshot removes it before it records the network state, and cleanup leaves it to the namespace, whose holder it stops (its evidence records the lock: fact criu_network_lock_at_cleanup)",
        lock.detail,
        phase.name()
    ))
}

/// The advice when `live.overlay_volatile` disagrees with `state.json` (the overlay was
/// remounted by other hands since the last verb): what each says, and that the next restore or
/// reset mounts a new overlay run as its verb does (volatile when the kernel accepts it);
/// `None` when they agree or nothing is mounted.
pub(crate) fn overlay_volatile_note(live: &LiveFacts) -> Option<String> {
    let ov = live.overlay_volatile.as_ref()?;
    if ov.agrees {
        return None;
    }
    let word = |v: bool| match v {
        true => "with `volatile`",
        false => "without `volatile`",
    };
    Some(format!(
        "the overlay on the slot's rootfs is mounted {} but state.json records it {} (`live.overlay_volatile`): it was remounted by other hands; the next `slot restore` or `slot reset` mounts a new overlay run, volatile when the kernel accepts it",
        word(ov.mounted),
        word(ov.recorded)
    ))
}

/// What can be told of a slot whose `state.json` cannot be read: the holder `holder.json`
/// records (alive or not, proven by pid, start time and netns inode), the mounts under the
/// slot folder (`/proc/self/mountinfo`) and whether the slot's runtime root holds an entry for
/// its container (`runtime_state_entry`: path and `exists`; the runtime keeps its state of a
/// container in `<root>/<id>`, so none there is no container to delete).
fn stateless_live_facts(p: &SlotPaths, owner_id: Option<&str>) -> Live {
    let holder = match crate::evidence::read_recorded(&p.holder())
        .map_err(|e| format!("{}: {e}", p.holder().display()))
        .and_then(|b| {
            serde_json::from_slice::<crate::ns::ProcessIdentity>(&b)
                .map_err(|e| format!("{}: {e}", p.holder().display()))
        }) {
        Ok(h) => match h.verify() {
            Ok(_) => HolderNow {
                alive: true,
                detail: format!("{} (from holder.json)", h),
            },
            Err(e) => HolderNow {
                alive: false,
                detail: format!("{} (from holder.json): {e}", h),
            },
        },
        Err(e) => HolderNow {
            alive: false,
            detail: e,
        },
    };
    let mounts: Vec<String> = crate::ns::mountinfo::mounts_under(&p.root)
        .iter()
        .map(|m| m.display().to_string())
        .collect();
    let entry = p.runtime_root().join(p.container_id());
    Live::Unrecorded(UnrecordedLive {
        holder,
        mounts_under_slot: mounts,
        cgroup_dirs: owner_id
            .map(|id| container_cgroup_dirs(p.slot, id))
            .unwrap_or_default(),
        runtime_state_entry: Some(RuntimeEntryNow {
            path: entry.display().to_string(),
            exists: entry.symlink_metadata().is_ok(),
        }),
    })
}

/// The container cgroup folders of slot `slot` whose lifetime id is `owner_id` (owner.json)
/// still in any hierarchy: `slot-N-<id8>` (cgroupfs) or `netprobe-slot-N-<id8>.scope`
/// (systemd), found by name ([`crate::cgroup::find::dirs_named`]).
fn container_cgroup_dirs(slot: u32, owner_id: &str) -> Vec<String> {
    let leaf = format!("slot-{slot}-{}", &owner_id[..owner_id.len().min(8)]);
    let scope = format!("netprobe-{leaf}.scope");
    let mut dirs: Vec<String> = crate::cgroup::find::dirs_named(4, |n| n == leaf || n == scope)
        .into_iter()
        .map(|(_, d)| d.display().to_string())
        .collect();
    dirs.sort();
    dirs
}

/// The advice for a slot whose `state.json` cannot be read: no verb can run on it (gate
/// `slot-state`), and netprobe keeps no copy of it; what to release by hand, in order.
/// A slot whose provision ended (interrupted, failed) before it wrote `state.json`, with no
/// holder alive and nothing mounted under it (`live`), holds nothing to release: then the
/// advice is the `slot-state` gate's own (keep the evidence, move the folder, another number).
pub(crate) fn unreadable_state_advice(p: &SlotPaths, e: &str, live: &UnrecordedLive) -> String {
    let nothing_live =
        !live.holder.alive && live.mounts_under_slot.is_empty() && live.cgroup_dirs.is_empty();
    if nothing_live && let Some(why) = crate::slot::missing_state_why(p) {
        return why.trim_start_matches(": ").to_string();
    }
    let runtime = match provisioned_runtime(p) {
        // The runtime root holds no state of the container: nothing to delete.
        _ if let Some(entry) = live.runtime_state_entry.as_ref().filter(|e| !e.exists) => format!(
            "none: the runtime root holds no {} (`live.runtime_state_entry`), so the runtime has no container of this slot to delete",
            entry.path
        ),
        Some((path, from)) => format!(
            "`{} --root {} delete -f {}` (the runtime provision recorded: {})",
            crate::shell::arg(&path),
            crate::shell::arg(p.runtime_root()),
            p.container_id(),
            from.display()
        ),
        None => format!(
            "`<runtime> --root {} delete -f {}`, with the runtime it was provisioned with (no provision's verb.json under {} names it)",
            crate::shell::arg(p.runtime_root()),
            p.container_id(),
            p.evidence().display()
        ),
    };
    format!(
        "state.json cannot be read ({e}): no verb can run on this slot (gate slot-state) and netprobe keeps no copy of it; put back a copy if you have one, else release by hand, in this order: the container ({runtime}), every mount under {} deepest first (`live.mounts_under_slot`), the holder (`live.holder`: `kill` its pid){}; keep the evidence ({}), then provision another slot number",
        p.root.display(),
        match live.cgroup_dirs.len() {
            0 => String::new(),
            n => format!(
                ", the container's {n} cgroup folder(s) (`live.cgroup_dirs`: `rmdir` each once no process is in it)"
            ),
        },
        p.evidence().display()
    )
}

/// The runtime binary the slot's newest provision recorded (`facts.runtime.path` of
/// `evidence/NNNN-provision/verb.json`) and that file; `None` when no provision's `verb.json`
/// can be read or names none.
fn provisioned_runtime(p: &SlotPaths) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    super::status_advice::verb_folders(&p.evidence())
        .into_iter()
        .rev()
        .filter(|d| {
            d.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("-provision"))
        })
        .find_map(|d| {
            let f = d.join("verb.json");
            let b = crate::evidence::read_recorded(&f).ok()?;
            let doc: Value = serde_json::from_slice(&b).ok()?;
            let path = doc["facts"]["runtime"]["path"].as_str()?;
            Some((std::path::PathBuf::from(path), f))
        })
}

/// What to do with a slot whose provision did not finish (interrupted or failed): a slot is
/// never re-provisioned in place (gate `slot-fresh`), so `slot cleanup` of this slot (it
/// releases what is left and marks the slot clean), then another slot number. Moving the folder
/// away is offered only once that cleanup has run: before it, it would leak whatever is live.
pub(crate) fn unfinished_provision_advice(p: &SlotPaths) -> String {
    format!(
        "a slot is never re-provisioned in place: run {} (it releases whatever is left and marks \
         the slot clean), then provision another slot number; do not move {} away before that \
         cleanup has run (its container, holder and mounts would be left running with no owner)",
        next_step::on_slot("cleanup", p),
        p.root.display(),
    )
}

/// The way out for `provision` refused at `slot-fresh` (the slot folder exists), from what its
/// `state.json` says now: phase clean (a cleanup released everything) — another slot number, or
/// the folder moved away after keeping its evidence; any other phase — its container, holder
/// and mounts may be live, so `slot cleanup` first (moving the folder away would leak them);
/// `state.json` unreadable — the `slot-state` gate's words ([`crate::slot::no_state_why`]: nothing to
/// release when the journal proves nothing was made, else `slot status` says what to release by
/// hand); and first of all, a folder with a readable `state.json` whose ownership marker is not
/// proven — the marker check's words ([`slot_dir::check_owner`]), since `slot cleanup`
/// would refuse it too.
pub(crate) fn existing_slot_way_out(p: &SlotPaths) -> String {
    // Without a proven marker no verb (cleanup included) touches the folder: beside a readable
    // state.json, the marker check's own words say what it records and what to release by hand.
    let loaded = SlotState::load(&p.state());
    if let (Ok(_), Err((true, why))) = (&loaded, slot_dir::check_owner(p)) {
        return why;
    }
    let cleanup = next_step::on_slot("cleanup", p);
    match loaded {
        Ok(st) if st.phase == Phase::Clean => format!(
            "its state.json records phase clean (a cleanup released its container, mounts and \
             holder): provision another slot number, or move {} away after keeping its evidence \
             ({}) and provision again",
            p.root.display(),
            p.evidence().display()
        ),
        Ok(st) => format!(
            "its state.json records phase {}, so its container, holder and mounts may still be \
             live: moving the folder away would leave them running with no owner; {cleanup} \
             releases them and marks the slot clean; then provision another slot number (or, \
             once it is clean, move {} away after keeping its evidence and provision again)",
            st.phase.name(),
            p.root.display()
        ),
        Err(e) => format!(
            "its state.json cannot be read ({e}){}",
            crate::slot::no_state_why(p)
        ),
    }
}
