//! `snapshot`: holder re-verified, network state recorded, runtime checkpoint (which stops the
//! container), container proven gone, overlay upper saved; the snapshot becomes complete only
//! by its final rename (a `snapshot.tmp-*` folder is never used).

use crate::criu::inventory::inventory_with_blake3;
use crate::evidence::{fsync_dir, now_rfc3339, replace_atomic, sha256_hex};
use crate::oci::{Container, RuntimeOps};
use crate::slot::JournalEvent;
use crate::slot::Verb;
use crate::slot::error::StepId;
use crate::slot::error::{SlotError, StepError};
use crate::slot::gate::Observed;
use crate::slot::gate::checkpoint_images;
use crate::slot::gate::display_gates;
use crate::slot::gate::image_unchanged;
use crate::slot::gate::publish_gates;
use crate::slot::gate::shared_gates::{self, holder_gate, mkdirs, stop_container_proven};
use crate::slot::gate::{CHECKPOINT_GATES, GateId, SNAPSHOT_GATES};
use crate::slot::next_step::{self, CLEANUP_AND_PROVISION_ANOTHER};
use crate::slot::record::verb_run::VerbRun;
use crate::slot::resources::cgroups;
use crate::slot::resources::criu_net_lock;
use crate::slot::resources::fs_tools;
use crate::slot::resources::mounts;
use crate::slot::resources::slot_dir;
use crate::slot::state::*;
use crate::x11::PngArtifact;
use serde_json::json;
use std::fs;
use std::path::Path;

/// The diagnosis added to a failed checkpoint whose `dump.log` shows CRIU 4.1's SO_PASSCRED
/// failure on kernels >= 6.16.
fn passcred_diagnosis() -> String {
    format!(
        "\ndiagnosis: CRIU could not read SO_PASSCRED of an inet socket (EOPNOTSUPP). Kernels >= 6.16 restrict SO_PASSCRED/SO_PASSSEC to AF_UNIX/AF_NETLINK sockets and this CRIU treats the error as fatal, so no container holding a TCP/UDP socket (e.g. the guest server) can be checkpointed on this host; a CRIU with the upstream fix is needed (host/setup.sh installs CRIU 4.2.1 and 4.3 under /opt, whose snapshots of the embedded guest this project's tests run on such kernels): {CLEANUP_AND_PROVISION_ANOTHER} with `--criu` one of them."
    )
}

/// Runs `snapshot` on the loaded slot state.
pub(crate) fn snapshot(run: &mut VerbRun, st: &mut SlotState) -> Result<String, SlotError> {
    let rt = shared_gates::common_gates(run, st)?;
    let id = st.container_id.clone();
    let r = match shared_gates::container_status(&*rt, &id) {
        Ok(Some(s)) if s == "running" => Ok(format!("runtime state {id}: running")),
        Ok(Some(s)) => Err(format!(
            "runtime state {id}: {s}, need running: only a running container is checkpointed; {} (a paused container is resumed, a stopped one reset)",
            next_step::status_gives_next_step(&run.paths)
        )),
        Ok(None) => Err(format!(
            "runtime state {id}: the runtime has no such container (nothing it can checkpoint; phase {:?}): {}",
            st.phase,
            if st.snapshot.is_some() {
                format!(
                    "run {} (or `reset`) first, then snapshot the running container",
                    next_step::bare("restore")
                )
            } else {
                format!(
                    "no snapshot exists to restore one from; {} this slot (it names any process still left in the container's cgroup) and provision another",
                    next_step::bare("cleanup")
                )
            }
        )),
        Err(e) => Err(e.to_string()),
    };
    run.gate(GateId::ContainerRunning, r)?;
    let r = container_gated(st.phase, &run.paths);
    run.gate(GateId::ContainerGated, r)?;
    // The image under the container is the one provision recorded: a snapshot of a guest
    // running on other files would be restored onto the recorded ones.
    let t = std::time::Instant::now();
    let r = image_unchanged::image_unchanged(st, &run.paths);
    run.took("gate-image", t);
    run.gate(GateId::ImageUnchanged, r)?;
    let ov = st
        .overlay
        .clone()
        .ok_or_else(|| run.step_err(StepId::Overlay, StepError::Missing("no overlay recorded")))?;
    let want = ov.upper(&run.paths.overlay_dir(), ov.run);
    let r = match crate::ns::mountinfo::overlay_upper(&ov.merged) {
        Some(u) if u == want && u.is_dir() => Ok(format!(
            "{} mounted, upperdir {} (run {}, as state.json records)",
            ov.merged.display(),
            u.display(),
            ov.run
        )),
        Some(u) => Err(format!(
            "the overlay at {} has upperdir {}, but state.json records run {} (upperdir {}){}: the upper that would be saved is not the one the container writes; {CLEANUP_AND_PROVISION_ANOTHER}",
            ov.merged.display(),
            u.display(),
            ov.run,
            want.display(),
            if u.is_dir() {
                ""
            } else {
                ", and that folder does not exist"
            }
        )),
        None if mounts::is_mounted(&ov.merged) => Err(format!(
            "{} is mounted, but not as an overlay",
            ov.merged.display()
        )),
        None => Err(format!("{} is not mounted", ov.merged.display())),
    };
    run.gate(GateId::OverlayMounted, r)?;

    run.clear(StepId::Snapshot, &SNAPSHOT_GATES)?;
    let prev_phase = st.phase;
    st.phase = Phase::after(Verb::Snapshot, VerbEnd::Began, prev_phase);
    run.save(st)?;
    let sid = format!(
        "{}-{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ"),
        &fs_tools::random_hex(4)
    );
    let tmp = run.paths.root.join(format!("snapshot.tmp-{sid}"));
    run.journal(
        JournalEvent::Step,
        true,
        &format!("snapshot into {}", tmp.display()),
    );
    let res = snapshot_steps(run, st, &*rt, &tmp, &sid, &ov);
    if res.is_err() {
        // The previous complete snapshot (if any) is untouched; the tmp folder is never used.
        // One a refusal left empty (a gate failed before anything was written into it) is
        // removed (`rmdir`: only when empty); one holding files stays, as the failure left it.
        let _ = fs::remove_dir(&tmp);
        let container_gone = matches!(shared_gates::container_status(&*rt, &id), Ok(None));
        let end = VerbEnd::Failed { container_gone };
        st.phase = Phase::after(Verb::Snapshot, end, prev_phase);
        let _ = st.save(&run.paths.state());
    }
    res
}

/// Gate `container-gated`: the running container is one whose state the slot's gates proved —
/// provisioned or restored through every gate (`ready`, `running`), or still the one a snapshot
/// that did not finish began from (`snapshotting`, `snapshot-failed`: a snapshot begins only
/// from a gated container). A restore or reset that did not pass its gates (`restoring`: killed,
/// its runtime and CRIU may have finished on their own; `restore-failed`) leaves a container
/// nothing proved, and a snapshot of it would replace the last proven one. Pure.
pub(crate) fn container_gated(phase: Phase, p: &slot_dir::SlotPaths) -> Observed {
    let name = serde_json::to_value(phase)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    let reset = next_step::on_slot("reset", p);
    match phase {
        Phase::Ready | Phase::Running | Phase::Snapshotting | Phase::SnapshotFailed => Ok(format!(
            "phase {name}: the container passed every gate of the verb that brought it up"
        )),
        Phase::Restoring | Phase::RestoreFailed => Err(format!(
            "phase {name}: the running container comes from a restore or reset that did not pass its gates (interrupted, killed or failed closed), so its state is unproven and a snapshot of it would replace the last proven one; {reset} restores the snapshot through every gate, then snapshot again"
        )),
        Phase::Provisioning
        | Phase::ProvisionFailed
        | Phase::Checkpointed
        | Phase::Cleaning
        | Phase::Clean => Err(format!(
            "phase {name}: no verb brought a container up through its gates here; {}",
            next_step::status_gives_next_step(p)
        )),
    }
}

/// Network state recorded (the canonical bytes the `net-fidelity` gate compares at restore),
/// then the checkpoint, which stops the container.
fn checkpoint(
    run: &mut VerbRun,
    st: &SlotState,
    rt: &dyn RuntimeOps,
    tmp: &Path,
) -> Result<(crate::ns::ProcessIdentity, String, Option<PngArtifact>), SlotError> {
    let pid = match rt.state(&st.container_id) {
        Ok(Some(s)) => s.pid,
        _ => 0,
    };
    let screen = display_gates::snapshot_gate(run, st, pid, tmp)?;
    let h = holder_gate(run, st, "recording the network state")?;
    let mut cap = shared_gates::holder_netstate(run, &h, "netstate-capture")?;
    let unlocked = !crate::netlink::netfilter::criu_lock(&cap.netfilter).is_empty();
    if unlocked {
        // Left by a checkpoint or restore of this slot that did not finish (e.g. killed with
        // SIGKILL): removed as CRIU's own unlock does, recorded, and the state captured again
        // (its side files `netfilter-unlocked.txt`, `sysctls-other-unlocked.json`).
        criu_net_lock::before_capture(run, &h);
        cap = shared_gates::holder_netstate(run, &h, "unlocked-netstate-capture")?;
    }
    shared_gates::lo_gate(run, &cap)?;
    let lock = crate::netlink::netfilter::criu_lock(&cap.netfilter);
    let released = criu_net_lock::LockStep::BeforeCapture.file();
    let r = match lock.is_empty() {
        true => Ok(format!(
            "no CRIU chain or table in iptables, ip6tables or nftables{}",
            if unlocked {
                format!(
                    " (after removing the lock a verb that did not finish had left: {released}, captured again)"
                )
            } else {
                String::new()
            }
        )),
        false => Err(format!(
            "CRIU's network lock is in the namespace and could not be removed ({}; see {released}): the snapshot would record it and every restore would fail at net-fidelity; {CLEANUP_AND_PROVISION_ANOTHER}",
            lock.join(", ")
        )),
    };
    run.gate(GateId::NoCriuLock, r)?;
    let cap = cap.to_canonical_json();
    let path = tmp.join("netstate.json");
    replace_atomic(&path, cap.as_bytes())
        .map_err(|e| run.step_err(StepId::NetstateWrite, StepError::io(&path)(e)))?;
    run.ev_write("netstate-before.json", cap.as_bytes());

    // Published ports: the holder stops accepting and resets the forwarded connections (CRIU
    // cannot dump an established one); resumed after the checkpoint, whatever it came to.
    let quiet = publish_gates::quiesce_gate(run, st, &h)?;
    holder_gate(run, st, "checkpoint")?;
    cgroups::snapshot_limits_gate(run, st, pid)?;
    run.clear(StepId::RuntimeCheckpoint, &CHECKPOINT_GATES)?;
    let images = tmp.join("checkpoint");
    let work = run.ev_path("criu-work");
    mkdirs(run, &[images.clone(), work.clone()])?;
    let mut c = Container::new(rt, &st.container_id, run.paths.bundle(), "");
    let extra = cgroups::manage_cgroups_args(run, st);
    // An interrupted checkpoint (its runtime and CRIU killed) leaves the container frozen:
    // thawed on the way out, as a failed checkpoint leaves it running; and CRIU's network
    // lock in the holder's netns, removed after the thaw (released newest first).
    let unlock = criu_net_lock::on_signal(h, run.ev.clone());
    let thaw = rt.on_signal_thaw(&st.container_id);
    let r =
        run.time_with_lock_inherited("checkpoint", || c.checkpoint(None, &images, &work, &extra));
    drop(thaw);
    drop(unlock);
    if let Some(q) = quiet {
        q.resume(run);
    }
    run.rt_log("checkpoint", r.as_ref());
    if let Err(e) = r {
        let dump = fs::read_to_string(work.join("dump.log")).unwrap_or_default();
        let known = if dump.contains("Can't get 1:16 opt: Operation not supported") {
            passcred_diagnosis()
        } else {
            String::new()
        };
        // A CRIU that did not end on its own (killed at the step's bound) leaves its lock.
        let left = criu_net_lock::after_failure(run, st).unwrap_or_default();
        return Err(run
            .step_err(StepId::RuntimeCheckpoint, e)
            .with_note(&format!("{known}{left}")));
    }
    criu_net_lock::lock_method_fact(run, &images);
    // CRIU's dump log: no gate reads it after a checkpoint that succeeded.
    run.compress_beside("criu-work/dump.log");
    Ok((h, cap, screen))
}

fn snapshot_steps(
    run: &mut VerbRun,
    st: &mut SlotState,
    rt: &dyn RuntimeOps,
    tmp: &Path,
    sid: &str,
    ov: &OverlayState,
) -> Result<String, SlotError> {
    mkdirs(run, &[tmp.to_path_buf()])?;
    let (h, cap, screen) = checkpoint(run, st, rt, tmp)?;
    let id = st.container_id.clone();
    stop_container_proven(run, rt, &id)?;

    // The container is gone: the upper is exactly as at checkpoint time.
    let upper = ov.upper(&run.paths.overlay_dir(), ov.run);
    let r = run.time("upper-save", || {
        fs_tools::copy_tree(&upper, &tmp.join("upper"))
    });
    r.map_err(|e| run.step_err(StepId::UpperSave, e))?;
    fs_tools::sync_fs(tmp).map_err(|e| run.step_err(StepId::Fsync, e))?;
    let saved = tmp.join("upper");
    let (upper_digest, upper_entries) = run
        .time("upper-digest", || crate::evidence::tree_listing(&saved))
        .map_err(|e| run.step_err(StepId::UpperDigest, e))?;

    let images = tmp.join("checkpoint");
    let (files, checkpoint_stats) = run
        .time("manifest", || {
            checkpoint_images::hashed_with_stats(&images, || inventory_with_blake3(&images))
        })
        .map_err(|e| run.step_err(StepId::Manifest, e))?;
    let manifest = json!({
        "id": sid,
        "created_at": now_rfc3339(),
        "container_id": id,
        "holder": h,
        "config_sha256": st.config_sha256,
        "netstate_sha256": sha256_hex(cap.as_bytes()),
        "upper_run": ov.run,
        "upper": upper_digest,
        "upper_entries": upper_entries,
        "screen": screen,
        "checkpoint_files": files,
        "runtime": st.runtime, "criu": st.criu,
    });
    let mpath = tmp.join("manifest.json");
    let mbytes = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| run.step_err(StepId::Manifest, StepError::encode("manifest.json", e)))?;
    replace_atomic(&mpath, &mbytes)
        .map_err(|e| run.step_err(StepId::Manifest, StepError::io(&mpath)(e)))?;
    fsync_dir(tmp).map_err(|e| run.step_err(StepId::Fsync, StepError::io(tmp)(e)))?;
    let name = format!("snapshot-{sid}");
    let dst = run.paths.root.join(&name);
    fs::rename(tmp, &dst)
        .map_err(|e| run.step_err(StepId::SnapshotRename, StepError::io(&dst)(e)))?;
    let root = run.paths.root.clone();
    fsync_dir(&root).map_err(|e| run.step_err(StepId::Fsync, StepError::io(&root)(e)))?;
    let old = st.snapshot.replace(SnapshotRef {
        dir: name.clone(),
        created_at: now_rfc3339(),
        netstate_sha256: sha256_hex(cap.as_bytes()),
        screen: screen.clone(),
        upper: Some(upper_digest.clone()),
        manifest_sha256: Some(sha256_hex(&mbytes)),
        checkpoint_stats,
    });
    st.phase = Phase::after(Verb::Snapshot, VerbEnd::Succeeded, st.phase);
    run.save(st)?;
    // The previous snapshot is replaced: removed once the new one is recorded (its name was
    // checked when state.json was loaded), and the removal is a fact of this verb.
    if let Some(o) =
        old.filter(|o| o.dir != name && crate::slot::state::is_snapshot_dir_name(&o.dir))
    {
        let path = root.join(&o.dir);
        let removed = fs_tools::remove_tree_same_fs(&path);
        run.fact(
            "previous_snapshot",
            json!({"dir": path, "removed": removed.is_ok(),
                   "error": removed.err().map(|e| e.to_string())}),
        );
    }
    run.fact(
        "snapshot",
        json!({"dir": dst, "checkpoint_files": files.len()}),
    );
    run.ev_write("manifest.json", &mbytes);
    // What earlier snapshots that did not finish left (never used).
    let mut left = Vec::new();
    let removed = shared_gates::remove_stale_snapshots(run, &mut left);
    if !left.is_empty() {
        run.fact("stale_snapshot_tmp_left", left);
    }
    Ok(format!(
        "snapshot {name} complete ({} checkpoint files); container stopped by the checkpoint{removed}",
        files.len()
    ))
}

#[cfg(test)]
#[path = "snapshot_tests.rs"]
mod tests;
