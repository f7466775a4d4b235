//! `restore` and `reset`: every gate (binaries, config, holder, complete snapshot; for restore
//! no container, for reset the container stopped and proven gone) before anything destructive;
//! then the upper reset to the snapshot's as a new overlay run, the runtime restore, and the
//! gates after it (network state byte-equal to the recorded one, else fail closed with the
//! diff; ready gates). A failed restore keeps the holder so it can be retried.

use super::reset_upper::{PreparedUpper, reset_upper};
use crate::netlink::NetState;
use crate::oci::{Container, RuntimeOps};
use crate::slot::JournalEvent;
use crate::slot::Verb;
use crate::slot::error::StepId;
use crate::slot::error::{SlotError, StepError};
use crate::slot::gate::Observed;
use crate::slot::gate::display_gates;
use crate::slot::gate::image_unchanged;
use crate::slot::gate::publish_gates;
use crate::slot::gate::pure_checks;
use crate::slot::gate::shared_gates::{
    self, StateAnswer, holder_gate, mkdirs, stop_container_proven,
};
use crate::slot::gate::{GateId, RESET_GATES, RESTORE_GATES};
use crate::slot::record::gate_claims;
use crate::slot::record::verb_run::VerbRun;
use crate::slot::resources::cgroups;
use crate::slot::resources::criu_net_lock;
use crate::slot::resources::crun_leftovers;
use crate::slot::resources::fs_tools::{self, timed};
use crate::slot::resources::leftover_procs;
use crate::slot::resources::runtime_half_state;
use crate::slot::state::*;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Runs `restore` (`reset` false) or `reset` (`reset` true) on the loaded slot state.
pub(crate) fn restore(
    run: &mut VerbRun,
    st: &mut SlotState,
    reset: bool,
) -> Result<String, SlotError> {
    let prep = PreparedUpper::start(run, st);
    // The phase the verb found decides whose CRIU lock may be in the holder's netns.
    let found_phase = st.phase;
    let (rt, snap_dir, began) = match gates(run, st, reset) {
        Ok(g) => g,
        Err(e) => {
            if let Some(p) = prep {
                p.discard();
            }
            return Err(e);
        }
    };
    if !began {
        save_began(run, st)?;
    }

    let ov = st
        .overlay
        .clone()
        .ok_or_else(|| run.step_err(StepId::Overlay, StepError::Missing("no overlay recorded")))?;
    let t = Instant::now();
    let old_run = reset_upper(run, st, &ov, &snap_dir, prep)?;
    let remove_old_run = || {
        for old in &old_run {
            let _ = fs_tools::remove_tree_same_fs(old);
        }
    };
    run.took("upper-reset", t);

    // Restore.
    let t = Instant::now();
    let h = match holder_gate(run, st, "restore") {
        Ok(h) => h,
        Err(e) => {
            remove_old_run();
            return Err(e);
        }
    };
    run.took("gate-holder", t);
    let t_prep = Instant::now();
    let work = run.ev_path("criu-work");
    mkdirs(run, std::slice::from_ref(&work))?;
    let id = st.container_id.clone();
    let mut c = Container::new(
        &*rt,
        &id,
        run.paths.bundle(),
        run.paths.root.join("container.pid"),
    );
    let images = snap_dir.join("checkpoint");
    let extra = cgroups::manage_cgroups_args(run, st);
    // Registered before the container (released after it, newest first): an interrupted restore
    // leaves CRIU's network lock in the holder's netns otherwise.
    let _unlock = st
        .holder
        .map(|h| criu_net_lock::on_signal(h, run.ev.clone()));
    // A lock a verb killed with SIGKILL left (not the complete snapshot's dump's) is removed
    // and proven gone before the runtime restore, else the restore is refused.
    if let Err(e) = criu_net_lock::before_restore(run, &h, found_phase) {
        remove_old_run();
        return Err(e);
    }
    // The display gates' whole-screen memory is made ready while CRIU restores.
    let bufs = display_gates::prepare_buffers(st);
    run.took("restore-prep", t_prep);
    let r = run.time_with_lock_inherited("restore", || c.restore(&images, &work, &extra));
    run.rt_log("restore", r.as_ref());
    criu_net_lock::lock_method_fact(run, &images);
    // A failed restore or gate stops the container itself ([`restore_failed`]); so does an
    // interruption until every gate after the restore passed (fail closed: an ungated container
    // never looks like a slot in service), proven by `runtime state` in the release list.
    let on_signal = c.disarm_keeping_signal();
    if let Err(e) = r {
        remove_old_run();
        let e = run.step_err(StepId::RuntimeRestore, e);
        return Err(restore_failed(run, st, &*rt, e));
    }
    // CRIU's restore log: no gate reads it after a restore that succeeded; stored compressed
    // beside the gates that follow.
    run.compress_beside("criu-work/restore.log");

    // The restored container's `runtime state` (for runc decided in-process from its
    // `state.json`, as runc does: `oci::runc_state`) is queried on a second thread while the
    // network state is captured and compared; the ready gates take its answer. The previous
    // run's folders are removed on a third.
    std::thread::scope(|s| {
        let q = s.spawn(|| {
            let ((r, how), ms) = timed(|| rt.state_quick(&id));
            (r, ms, how)
        });
        s.spawn(remove_old_run);
        let state = move || q.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        let restored = Restored {
            snap_dir: &snap_dir,
            bufs,
            on_signal,
        };
        restored_gates(run, st, &*rt, restored, reset, state)
    })
}

/// Every gate before the first destructive step. The container's `runtime state` is read-only,
/// so it is queried on a second thread while the gates hash the binaries; its answer is used
/// only after the runtime-binary gate has proven the binary that gave it (same path, same
/// sha256). The snapshot's files are re-hashed on a third thread at the same time, and the
/// image's manifest walked (or its qcow2 `stat`ed) on a fourth (read-only too);
/// `snapshot-complete` and `image-unchanged` are decided and recorded after the common gates,
/// in their place. For reset, the running container is then stopped and proven gone. When the
/// runtime root already proves the container absent (nothing to stop), the scans behind
/// `cgroup-empty` and `netns-empty` ([`LeftProcs`]) run on a fifth thread as well and are
/// recorded in their place (timing `gate-leftovers`).
///
/// Returns the runtime, the snapshot's folder and whether the verb's `restoring` phase is saved
/// already: reset saves it before it stops a container (its first destructive step), so that
/// no interruption or failure from there on leaves phase `running` over a stopped container; a
/// failure after that stop leaves `restore-failed` ([`VerbEnd::Failed`]).
fn gates(
    run: &mut VerbRun,
    st: &mut SlotState,
    reset: bool,
) -> Result<(Box<dyn RuntimeOps>, PathBuf, bool), SlotError> {
    let id = st.container_id.clone();
    let (paths_rt, paths_cr) = shared_gates::binary_paths(run, st);
    let query_rt = run.runtime(st, &paths_rt, &paths_cr);
    let root = run.paths.root.clone();
    let paths = run.paths.clone();
    // No `<root>/<id>` under the slot lock is the proof of absence without starting the runtime
    // (a Go process on the 2 cores the hashes need); else `runtime state` tells.
    // A half-written state only (a runtime killed mid-restore; crun's `state` fails on it) is
    // no container either; it is removed once every gate passed.
    let absent = query_rt
        .absent_by_root(&id)
        .or_else(|| runtime_half_state::only_half_state(&st.runtime_root, &id));
    let proc_root = run.env.proc_root.clone();
    let (gates, (before, before_ms), early) = std::thread::scope(|s| {
        let q = s.spawn(|| match absent {
            Some(_) => (Ok(None), 0),
            None => timed(|| shared_gates::container_status_quick(&*query_rt, &id)),
        });
        let snap = s.spawn(|| timed(|| pure_checks::snapshot_complete(&root, st)));
        let image = s.spawn(|| timed(|| image_unchanged::image_unchanged(st, &paths)));
        // With the container already proven absent nothing is stopped before `cgroup-empty` and
        // `netns-empty`, so their scans of the cgroup and of every process's `ns/net` run
        // here beside the other gates' work; recorded below in their place.
        let leftovers = absent
            .is_some()
            .then(|| s.spawn(|| timed(|| LeftProcs::scan(st, &proc_root))));
        let t = Instant::now();
        let common = shared_gates::common_gates(run, st);
        run.took("gate-common", t);
        let gates = common.and_then(|rt| {
            let t = Instant::now();
            let (snap, snap_ms) = snap.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            run.took("gate-snapshot-wait", t);
            run.timing("gate-snapshot", snap_ms);
            let (dir, d) = snap.map_err(|e| run.fail(GateId::SnapshotComplete, e))?;
            run.gate(GateId::SnapshotComplete, Ok(d))?;
            let t = Instant::now();
            let (image, image_ms) = image
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            run.took("gate-image-wait", t);
            run.timing("gate-image", image_ms);
            run.gate(GateId::ImageUnchanged, image)?;
            Ok((rt, dir))
        });
        let t = Instant::now();
        let before = q.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        run.took("runtime-state-wait", t);
        let early = leftovers.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        (gates, before, early)
    });
    let (rt, snap_dir) = gates?;
    if let Some((_, ms)) = &early {
        run.timing("gate-leftovers", *ms);
    }
    let left = |st: &SlotState| match early {
        Some((l, _)) => l,
        None => LeftProcs::scan(st, &proc_root),
    };
    match &absent {
        Some(_) => run.fact("container_absence_proof", "runtime-root-entry"),
        None => {
            run.timing("runtime-state-query", before_ms);
        }
    }
    let t = Instant::now();
    let mut began = false;
    if reset {
        let before = shared_gates::ContainerBefore {
            answer: before,
            absent,
        };
        began = stop_for_reset(run, st, &*rt, before, left)?;
    } else {
        let r = match before {
            Ok(None) => Ok(match absent {
                Some(p) => format!("{p}: no container {id} under the runtime root"),
                None => format!("runtime state {id}: does not exist"),
            }),
            Ok(Some(s)) => Err(format!(
                "runtime state {id}: {s}; restore needs no container (use reset)"
            )),
            Err(e) => Err(e.to_string()),
        };
        run.gate(GateId::ContainerAbsent, r)?;
        left(st).record(run)?;
        run.clear(StepId::Restore, &RESTORE_GATES)?;
        clear_half_state(run, st)?;
    }
    run.took("gate-container", t);
    Ok((rt, snap_dir, began))
}

/// How long the processes of a container the runtime just killed (SIGKILL, `delete --force`)
/// may take to leave its cgroup and the slot's namespace: the runtime reports the container gone
/// once its init is, while the kernel may still be tearing down the others (a GNOME guest's
/// dozens of processes, on a loaded machine).
const KILLED_EXIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(3);

/// `scan`, taken right after the runtime killed the container, scanned again every 20 ms while
/// a process is left, until none is or [`KILLED_EXIT_LIMIT`] passed: the last scan decides
/// `cgroup-empty` and `netns-empty` as before (a process still there after the limit fails
/// them). A wait is recorded as timing `left-procs-wait` and fact `left_procs_waited_ms`.
fn killed_gone(run: &mut VerbRun, st: &SlotState, proc_root: &Path, scan: LeftProcs) -> LeftProcs {
    let t = Instant::now();
    let mut scan = scan;
    while (scan.cgroup.is_err() || scan.netns.is_err()) && t.elapsed() < KILLED_EXIT_LIMIT {
        std::thread::sleep(std::time::Duration::from_millis(20));
        scan = LeftProcs::scan(st, proc_root);
    }
    let waited = fs_tools::ms_since(t);
    if waited > 0 {
        run.timing("left-procs-wait", waited);
        run.fact("left_procs_waited_ms", waited);
    }
    scan
}

/// Reset's first destructive step, after every gate before it passed: the phase saying a
/// restore is under way saved when there is a container to stop (`before`: the `runtime state`
/// answer; `absent`: the runtime root's proof of absence), the container stopped and proven gone,
/// then `cgroup-empty`, `netns-empty` (`left`: their scans) and the half-written runtime state
/// removed. Returns whether the phase was saved. A failure after the save leaves
/// `restore-failed` ([`VerbEnd::Failed`]: `container_gone` when the stop was proven).
///
/// Errors: the first gate or step that failed.
fn stop_for_reset(
    run: &mut VerbRun,
    st: &mut SlotState,
    rt: &dyn RuntimeOps,
    before: shared_gates::ContainerBefore,
    left: impl FnOnce(&SlotState) -> LeftProcs,
) -> Result<bool, SlotError> {
    run.clear(StepId::ContainerStop, &RESET_GATES)?;
    let id = st.container_id.clone();
    let stops = !matches!(before.answer, Ok(None));
    if stops {
        save_began(run, st)?;
    }
    let stopped = shared_gates::stop_container_proven_from(run, rt, &id, before);
    let gone = stopped.is_ok();
    let r = stopped
        .and_then(|()| {
            let scan = left(st);
            let proc_root = run.env.proc_root.clone();
            match stops {
                true => killed_gone(run, st, &proc_root, scan).record(run),
                false => scan.record(run),
            }
        })
        .and_then(|()| clear_half_state(run, st));
    if let Err(e) = r {
        if stops {
            let end = VerbEnd::Failed {
                container_gone: gone,
            };
            st.phase = Phase::after(run.args.verb, end, st.phase);
            let _ = run.save(st);
        }
        return Err(e);
    }
    Ok(stops)
}

/// Saves the phase that says the verb is under way (`restoring`: [`VerbEnd::Began`]), before its
/// first destructive step (timing `state-save`).
///
/// Errors: `state.json` could not be written (step `state-write`).
fn save_began(run: &mut VerbRun, st: &mut SlotState) -> Result<(), SlotError> {
    let t = Instant::now();
    st.phase = Phase::after(run.args.verb, VerbEnd::Began, st.phase);
    run.save(st)?;
    run.took("state-save", t);
    Ok(())
}

/// What `cgroup-empty` and `netns-empty` decide: no process left in the container's cgroup
/// ([`leftover_procs::no_container_procs`]) and none beside the holder in the slot's
/// network namespace ([`leftover_procs::no_netns_strangers`]). Read-only scans (the
/// cgroup's `cgroup.procs`, every process's `ns/net`), so they may run on another thread.
struct LeftProcs {
    cgroup: Observed,
    netns: Observed,
}

impl LeftProcs {
    /// Both scans, now.
    fn scan(st: &SlotState, proc_root: &Path) -> LeftProcs {
        LeftProcs {
            cgroup: leftover_procs::no_container_procs(st),
            netns: leftover_procs::no_netns_strangers(st, proc_root),
        }
    }

    /// Records `cgroup-empty` then `netns-empty`.
    ///
    /// Errors: the first that failed, as its gate's error.
    fn record(self, run: &mut VerbRun) -> Result<(), SlotError> {
        run.gate(GateId::CgroupEmpty, self.cgroup)?;
        run.gate(GateId::NetnsEmpty, self.netns)
    }
}

/// The container proven absent and no process of it left: a half-written runtime state under
/// its id (runc or crun killed mid-restore: the runtime says it does not exist, yet refuses the
/// id) is removed before the restore ([`runtime_half_state::remove`]); for crun also the
/// container's empty cgroups and their `.proxy-crun` in every hierarchy, which a crun killed
/// mid-restore leaves and on which its next restore fails ("write to `devices.deny`: Invalid
/// argument", [`crun_leftovers::cgroups`]).
///
/// Errors: a step error naming what was refused (the folder holds something else; a cgroup
/// that is not empty).
fn clear_half_state(run: &mut VerbRun, st: &SlotState) -> Result<(), SlotError> {
    if let Some(e) = runtime_half_state::remove(run, st, true) {
        return Err(run.step_err(StepId::RuntimeHalfState, e));
    }
    if run.runtime_kind(&st.runtime.path) == crate::oci::RuntimeKind::Crun
        && let Some(e) =
            crun_leftovers::cgroups(run, st, true, crun_leftovers::CgroupRelease::BeforeRestore)
    {
        return Err(run.step_err(StepId::RuntimeHalfState, e));
    }
    Ok(())
}

/// The `net-fidelity` gate ([`crate::slot::gate::net_fidelity::compare`]): the captured state's canonical
/// bytes equal the recorded ones and nothing of CRIU's lock or a changed address flag is found;
/// else the field-path diff is saved (`netstate-diff.txt`) and attached to the error.
fn net_fidelity(
    run: &mut VerbRun,
    recorded: &str,
    observed: &NetState,
) -> Result<usize, SlotError> {
    let cap = observed.to_canonical_json();
    let t = Instant::now();
    run.ev_write("netstate-recorded.json", recorded.as_bytes());
    run.ev_write("netstate-after.json", cap.as_bytes());
    run.took("evidence-netstate", t);
    if let Err(m) = crate::slot::gate::net_fidelity::compare(recorded, observed, &cap) {
        run.ev_write("netstate-diff.txt", m.diff.as_bytes());
        return Err(run.fail(GateId::NetFidelity, m.detail).with_diff(m.diff));
    }
    let d = format!(
        "{} bytes, sha256 {}",
        cap.len(),
        crate::evidence::sha256_hex(cap.as_bytes())
    );
    run.gate(GateId::NetFidelity, Ok(d))?;
    Ok(cap.len())
}

/// What a successful runtime restore hands to its gates ([`restored_gates`]).
struct Restored<'a> {
    /// The snapshot folder restored from.
    snap_dir: &'a Path,
    /// The whole-screen memory prepared during the restore (a profile with a display).
    bufs: Option<display_gates::PreparedBuffers>,
    /// The container's release registration for an interruption.
    on_signal: Option<crate::ns::cleanup::Registration>,
}

/// The gates after a successful runtime restore: holder, network state byte-equal to the one
/// recorded at snapshot, then the ready gates, then the display gates (with `bufs`, the
/// whole-screen memory prepared during the restore, for a profile with a display). A failed gate stops the restored container
/// ([`restore_failed`]) and keeps the holder for a retry; an interruption stops it too, through
/// `on_signal` (the container's release registration), dropped only once every gate passed.
fn restored_gates(
    run: &mut VerbRun,
    st: &mut SlotState,
    rt: &dyn RuntimeOps,
    restored: Restored<'_>,
    reset: bool,
    state: impl FnOnce() -> StateAnswer,
) -> Result<String, SlotError> {
    let Restored {
        snap_dir,
        bufs,
        on_signal,
    } = restored;
    // A signal seen since the runtime restore stops the verb here, not after every gate ran:
    // the release then stops the ungated container (`on_signal`), and the interruption note
    // says what to do next.
    crate::ns::cleanup::checkpoint();
    let h = match holder_gate(run, st, "network-fidelity check") {
        Ok(h) => h,
        Err(e) => return Err(restore_failed(run, st, rt, e)),
    };
    // The snapshot's netstate.json was verified against its sha256 by `snapshot-complete`.
    let recorded =
        crate::evidence::read_recorded_text(&snap_dir.join("netstate.json")).unwrap_or_default();
    // The guest's HTTP answer (read-only: one new connection) is asked for beside the capture;
    // `guest-http` is recorded in its place among the ready gates.
    let guest = shared_gates::start_guest_check(st, &h);
    let checked = shared_gates::holder_netstate(run, &h, "netstate-capture")
        .and_then(|observed| net_fidelity(run, &recorded, &observed).map(|n| (n, observed)));
    let (bytes, observed) = match checked {
        Ok(c) => c,
        Err(e) => return Err(restore_failed(run, st, rt, e)),
    };
    let t = Instant::now();
    // The ready gates check the state net-fidelity just captured (nothing ran in between).
    let when = if reset { "reset" } else { "restore" };
    let ready = shared_gates::ready_gates(run, st, when, Some(observed), Some(guest), state);
    run.took("ready-gates", t);
    if let Err(e) = ready {
        return Err(restore_failed(run, st, rt, e));
    }
    let pid = run
        .fact_of(&format!("{}_container_pid", run.verb()))
        .and_then(|v| v.as_i64())
        .unwrap_or(0) as i32;
    crate::ns::cleanup::checkpoint();
    let bufs = bufs.and_then(display_gates::PreparedBuffers::join);
    if let Err(e) = display_gates::restored_gates(run, st, pid, snap_dir, bufs) {
        return Err(restore_failed(run, st, rt, e));
    }
    // Published ports: accepting (a snapshot whose resume was lost left the holder quiesced),
    // and a request through each reaches the restored guest.
    publish_gates::resume_if_published(run, st, &h);
    if let Err(e) = publish_gates::published_gate(run, st, when) {
        return Err(restore_failed(run, st, rt, e));
    }
    // Every gate passed: the container is the slot's, kept whatever comes now.
    drop(on_signal);
    let t = Instant::now();
    st.phase = Phase::after(run.args.verb, VerbEnd::Succeeded, st.phase);
    st.restores += 1;
    st.last_verb = Some(run.verb().into());
    st.last_ok = true;
    run.save(st)?;
    run.took("state-save-end", t);
    run.fact("restores", st.restores);
    // Every sentence of the outcome is what a gate recorded ([`gate_claims::gate_claims`]).
    Ok(format!(
        "{} from {} ({bytes} bytes of network state): {}",
        if reset { "reset" } else { "restored" },
        snap_dir
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        gate_claims::gate_claims(&run.gate_log(), &gate_claims::RESTORED_CLAIMS),
    ))
}

/// After a failed restore whose container the runtime proved gone: the processes still in the
/// container's own cgroup (every hierarchy of the last read-back; a CRIU restore task that
/// escaped the runtime's process group) are killed with SIGKILL and waited for (2 s at most),
/// recorded in the fact `restore_leftovers_killed`. Processes outside the cgroup are never
/// touched (the `netns-empty` gate names them).
fn kill_cgroup_leftovers(run: &mut VerbRun, st: &SlotState) {
    let Some(pids) = leftover_procs::container_pids(st) else {
        return;
    };
    if pids.is_empty() {
        return;
    }
    for p in &pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*p),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let deadline = Instant::now() + std::time::Duration::from_secs(2);
    while leftover_procs::container_pids(st).is_some_and(|p| !p.is_empty())
        && Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let left = leftover_procs::container_pids(st).unwrap_or_default();
    let d = format!(
        "killed processes {:?} left in the container's cgroup by the failed restore; {}",
        pids,
        if left.is_empty() {
            "none is left".to_string()
        } else {
            format!("still there: {left:?}")
        }
    );
    run.journal(JournalEvent::Step, left.is_empty(), &d);
    run.fact("restore_leftovers_killed", d);
}

/// A failed restore: the restored container (if any) is stopped and proven gone so the restore
/// can be retried; the holder, the snapshot and the mounts are kept.
fn restore_failed(
    run: &mut VerbRun,
    st: &mut SlotState,
    rt: &dyn RuntimeOps,
    e: SlotError,
) -> SlotError {
    let id = st.container_id.clone();
    let crun = run.runtime_kind(&st.runtime.path) == crate::oci::RuntimeKind::Crun;
    if crun {
        let _ = runtime_half_state::remove(run, st, false);
    }
    let gone = stop_container_proven(run, rt, &id).is_ok();
    // A task CRIU forked into its own session survives the kill of the runtime's group: it is
    // in the container's cgroup (the slot's own), holds the slot lock and waits forever.
    if gone {
        kill_cgroup_leftovers(run, st);
    }
    if crun {
        crun_leftovers::cgroups(run, st, gone, crun_leftovers::CgroupRelease::After);
    }
    // runc killed mid-restore leaves `<root>/<id>/criu-root` mounted and no state.json: removed
    // (so the retry can restore the id) once nothing of the container is left.
    if gone
        && leftover_procs::no_container_procs(st).is_ok()
        && leftover_procs::no_netns_strangers(st, &run.env.proc_root).is_ok()
    {
        let _ = runtime_half_state::remove(run, st, true);
    }
    // CRIU's network lock, left by a CRIU that failed before its unlock (or the dump's, when
    // the restore never got to it): removed only once the container is proven gone.
    let lock_note = if gone {
        criu_net_lock::after_failure(run, st)
    } else {
        None
    };
    let end = VerbEnd::Failed {
        container_gone: true,
    };
    let verb = if run.args.verb == Verb::Reset {
        Verb::Reset
    } else {
        Verb::Restore
    };
    st.phase = Phase::after(verb, end, st.phase);
    let _ = st.save(&run.paths.state());
    run.journal(
        JournalEvent::Step,
        false,
        "restore failed closed; holder kept for a retry",
    );
    match lock_note {
        Some(n) => e.with_note(&n),
        None => e,
    }
}
