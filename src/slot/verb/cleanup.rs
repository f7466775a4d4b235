//! `cleanup`: container proven gone (blocking: nothing is unmounted under a live container),
//! overlay, image mount, loop device and FUSE export released, anything else mounted in the
//! slot unmounted deepest first, interrupted snapshots removed, the holder stopped through its
//! pidfd, the slot marked clean; evidence kept.

use crate::ns::{self, NsError};
use crate::slot::Verb;
use crate::slot::error::SlotError;
use crate::slot::error::StepId;
use crate::slot::gate::publish_gates;
use crate::slot::gate::pure_checks;
use crate::slot::gate::shared_gates::{self, stop_container_proven};
use crate::slot::gate::{CLEANUP_GATES, GateId, Observed, UNMOUNT_GATES};
use crate::slot::record::verb_run::VerbRun;
use crate::slot::resources::cgroups;
use crate::slot::resources::criu_net_lock;
use crate::slot::resources::crun_leftovers;
use crate::slot::resources::fs_tools;
use crate::slot::resources::leftover_procs;
use crate::slot::resources::mounts;
use crate::slot::resources::runtime_half_state;
use crate::slot::state::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Runs `cleanup` on the loaded slot state.
pub(crate) fn cleanup(run: &mut VerbRun, st: &mut SlotState) -> Result<String, SlotError> {
    // Facts that protect no step cleanup takes are recorded, not blocking.
    shared_gates::criu_config_gate(run, false)?;
    let (rt_path, cr_path) = shared_gates::binary_gates(run, st, true, false)?;
    let r = pure_checks::config_hash(&run.paths.bundle(), st)
        .map_err(|d| format!("{d} (cleanup does not read config.json)"));
    run.record(GateId::ConfigHash, r);
    let holder_r = pure_checks::holder(st);
    run.clear(StepId::Cleanup, &CLEANUP_GATES)?;
    st.phase = Phase::after(Verb::Cleanup, VerbEnd::Began, st.phase);
    run.save(st)?;
    let rt = run.runtime(st, &rt_path, &cr_path);
    let id = st.container_id.clone();

    let t = Instant::now();
    let crun = run.runtime_kind(&rt_path) == crate::oci::RuntimeKind::Crun;
    if crun {
        let _ = runtime_half_state::remove(run, st, false);
    }
    stop_container_proven(run, &*rt, &id)?;
    run.took("container-stop", t);
    // The container is proven gone: its cgroups (and crun's `.proxy-crun`) must be too.
    let mut cgroup_problem =
        crun_leftovers::cgroups(run, st, true, crun_leftovers::CgroupRelease::After);
    if crun && let Err(e) = crun_leftovers::remove_empty_directory(&st.runtime_root) {
        cgroup_problem = Some(cgroup_problem.map_or(e.to_string(), |p| format!("{p}; {e}")));
    }
    // Then its scope (systemd), and the last limit read-back's directories proven gone.
    let t = Instant::now();
    let mut cgroup_problems = Vec::new();
    cgroups::cleanup(run, st, &mut cgroup_problems);
    run.took("cgroup-release", t);

    // A process the runtime does not know may still run in the slot's netns (moved out of the
    // container's cgroup): nothing is unmounted or stopped under it; named with the way on.
    let r = match st.holder {
        None => {
            Ok("state.json records no holder: no network namespace of the slot to search".into())
        }
        Some(_) => leftover_procs::no_netns_strangers(st, &run.env.proc_root),
    };
    run.gate(GateId::NetnsEmpty, r)?;
    run.clear(StepId::Unmount, &UNMOUNT_GATES)?;
    let t = Instant::now();
    let half = runtime_half_state::remove(run, st, true);
    let mut problems = unmount_all(run, st);
    problems.extend(half);
    problems.extend(cgroup_problems);
    run.took("unmount", t);
    let mut removed_detail = shared_gates::remove_stale_snapshots(run, &mut problems);
    sweep_own_tmp(run, st, &mut removed_detail);
    // CRIU's lock a killed verb left in the holder's netns (`slot status` shows it): recorded,
    // not removed — the namespace is the holder's, stopped below.
    if let Some(d) = criu_net_lock::at_cleanup(run, st) {
        removed_detail.push_str(&format!("; {d}"));
    }

    let t = Instant::now();
    let mut holder_detail = stop_holder(run, st, holder_r, &mut problems);
    run.took("holder-stop", t);
    // The holder owned the published ports' sockets: proven closed now.
    match publish_gates::closed_proof(run, st) {
        Ok(Some(d)) => holder_detail.push_str(&format!("; {d}")),
        Ok(None) => {}
        Err(e) => problems.extend(e),
    }
    problems.extend(cgroup_problem);
    let r = if problems.is_empty() {
        Ok(released_detail(run, st, &holder_detail))
    } else {
        Err(problems.join("; "))
    };
    run.gate(GateId::Released, r)?;
    st.phase = Phase::after(Verb::Cleanup, VerbEnd::Succeeded, st.phase);
    run.save(st)?;
    Ok(format!(
        "slot clean ({holder_detail}){removed_detail}; evidence kept in {}",
        run.paths.evidence().display()
    ))
}

/// What this slot's verbs killed by SIGKILL left in the temporary folder: the CRIU PATH folders
/// and runc logs named with this slot's owner tag (`…-<pid>-slot-<owner id>-…`,
/// [`crate::oci::TmpOwner::Slot`]) whose process no longer exists, removed and named (facts
/// `stale_criu_path_dirs_removed`, `stale_runc_logs_removed`, and `removed_detail`). Another
/// slot's, or a probe run's, are never taken: they are not provably this slot's.
fn sweep_own_tmp(run: &mut VerbRun, st: &SlotState, removed_detail: &mut String) {
    let owner = crate::oci::TmpOwner::Slot(&st.owner_id);
    type Sweep = fn(&std::path::Path, crate::oci::TmpOwner<'_>) -> Vec<PathBuf>;
    let sweeps: [(Sweep, &str, &str); 2] = [
        (
            crate::oci::sweep_stale_criu_path_dirs,
            "stale_criu_path_dirs_removed",
            "this slot's CRIU PATH folders of netprobe processes that no longer exist (killed before they could remove them)",
        ),
        (
            crate::oci::sweep_stale_runc_logs,
            "stale_runc_logs_removed",
            "this slot's runc --log files of netprobe processes that no longer exist",
        ),
    ];
    for (sweep, fact, what) in sweeps {
        let names: Vec<String> = sweep(&std::env::temp_dir(), owner)
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        if names.is_empty() {
            continue;
        }
        let d = format!("removed {what}: {}", names.join(", "));
        run.record_release::<String>(Ok(Some((d.clone(), names.into()))), fact, fact);
        removed_detail.push_str(&format!("; {d}"));
    }
}

/// The `released` gate's detail, each part from what was just checked: the container (proven
/// gone by `runtime state` above), what is still mounted under the slot (mountinfo, now), the
/// FUSE export (a qcow2 image only; else said to be none), and the holder (`holder_detail`).
fn released_detail(run: &VerbRun, st: &SlotState, holder_detail: &str) -> String {
    let left = crate::ns::mountinfo::mounts_under(&run.paths.root);
    let mounts = if left.is_empty() {
        format!(
            "nothing mounted under {} (mountinfo)",
            run.paths.root.display()
        )
    } else {
        let l: Vec<String> = left.iter().map(|p| p.display().to_string()).collect();
        format!("still mounted: {}", l.join(", "))
    };
    let export = match st.image.as_ref().and_then(|i| i.export_file.as_ref()) {
        Some(e) if !mounts::is_mounted(e) => format!("FUSE export {} stopped", e.display()),
        Some(e) => format!("FUSE export {} still mounted", e.display()),
        None => "no FUSE export (the image is not a qcow2 disk)".to_string(),
    };
    format!(
        "container {} proven gone (runtime state); {mounts}; {export}; {holder_detail}",
        st.container_id
    )
}

/// Overlay, image mount, loop device, FUSE export, then anything else still mounted inside the
/// slot (deepest first). Returns the problems met.
fn unmount_all(run: &VerbRun, st: &mut SlotState) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(ov) = st.overlay.as_mut() {
        if let Err(e) = mounts::unmount(&ov.merged) {
            problems.push(e.to_string());
        }
        ov.mounted = mounts::is_mounted(&ov.merged);
        // The last run's upper is kept with the evidence; what earlier runs and interrupted
        // verbs left beside it is not.
        if !ov.mounted {
            for stale in OverlayState::runs_except(&run.paths.overlay_dir(), ov.run) {
                if let Err(e) = fs_tools::remove_tree_same_fs(&stale) {
                    problems.push(format!("{}: {e}", stale.display()));
                }
            }
        }
    }
    if let Some(img) = st.image.clone()
        && img.kind == ImageKind::Qcow2
    {
        if let Err(e) = mounts::unmount(&img.lower) {
            problems.push(e.to_string());
        }
        if let Some(export) = &img.export_file {
            release_export(&img, export, &mut problems);
        }
    }
    let (_, left) = crate::ns::mountinfo::unmount_under(&run.paths.root, mounts::unmount);
    problems.extend(left.iter().map(ToString::to_string));
    problems
}

/// Loop devices backed by the qcow2's FUSE export, then the `qemu-storage-daemon` serving it.
fn release_export(img: &ImageState, export: &std::path::Path, problems: &mut Vec<String>) {
    let mut loops: Vec<PathBuf> = img.loop_device.iter().cloned().collect();
    loops.extend(mounts::loops_backed_by(export));
    loops.dedup();
    for l in loops {
        if let Err(e) = mounts::loop_detach(&l, Some(export)) {
            problems.push(e.to_string());
        }
    }
    let mut pids: Vec<i32> = img.qsd_pid.into_iter().collect();
    pids.extend(mounts::qsd_pids_mentioning(&export.to_string_lossy()));
    pids.dedup();
    for pid in pids {
        if let Err(e) = mounts::qsd_stop(pid, export) {
            problems.push(e.to_string());
        }
    }
    if mounts::is_mounted(export) {
        problems.push(format!("FUSE export {} still mounted", export.display()));
    }
}

/// The holder, through its pidfd, only if it is still the recorded process (`holder_r`, the
/// identity check made before anything was released).
fn stop_holder(
    run: &mut VerbRun,
    st: &mut SlotState,
    holder_r: Observed,
    problems: &mut Vec<String>,
) -> String {
    let detail = match (&st.holder, holder_r) {
        (None, _) => pure_checks::no_holder_detail(&run.paths),
        (Some(h), Ok(_)) => match ns::stop_by_identity(h, Duration::from_secs(5)) {
            Ok(()) => format!("holder pid {} stopped through its pidfd", h.pid),
            Err(NsError::Gone { .. }) => format!("holder pid {} was already gone", h.pid),
            Err(e) => {
                let e = e.to_string();
                problems.push(e.clone());
                e
            }
        },
        // Said in cleanup's own words (the identity errors' advice is to run cleanup).
        (Some(h), Err(e)) => match h.verify() {
            Err(NsError::Gone { .. }) => format!("holder pid {} was already gone", h.pid),
            Err(NsError::IdentityChanged { found, .. }) => format!(
                "holder pid {} not signalled: that pid is now another process ({found})",
                h.pid
            ),
            Err(e2) => format!("holder pid {} not signalled: {e2}", h.pid),
            Ok(_) => format!(
                "holder pid {} not signalled: it could not be proven when cleanup began ({e})",
                h.pid
            ),
        },
    };
    let holder_gone = st.holder.map(|h| h.verify().is_err()).unwrap_or(true);
    run.record(
        GateId::HolderIdentity,
        if holder_gone {
            Err(detail.clone())
        } else {
            Ok(detail.clone())
        },
    );
    if holder_gone {
        st.holder = None;
    }
    detail
}
