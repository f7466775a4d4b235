//! `status`: the slot state as JSON (schema `evidence-schema/slot-state.schema.json`), with
//! live facts (holder, container, mounts, FUSE export, loop device), snapshot completeness and
//! the journal's last entry. Changes nothing; takes no lock.

use super::checks;
use super::error::SlotError;
use super::gate::GateId;
use super::layout::{self, SlotLock, SlotPaths, StateDirUse};
use super::mounts;
use super::run::VerbRun;
use super::state::*;
use super::{SlotOutcome, Verb};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs;

/// Runs `status`.
pub(crate) fn status(run: &mut VerbRun) -> Result<SlotOutcome, SlotError> {
    let p = run.paths.clone();
    // The same gate as every other verb; only a state dir that does not exist yet (or an empty
    // one) is accepted, as `provision` would adopt it: then the document says `exists: false`.
    let r = layout::check_state_dir(&p.state_dir, StateDirUse::Inspect);
    run.gate(GateId::StateDir, r)?;
    let exists = fs::symlink_metadata(&p.root).is_ok();
    let owner = if exists {
        Some(layout::check_owner(&p))
    } else {
        None
    };
    if let Some(Err((_, d))) = &owner {
        return Err(run.fail(GateId::OwnershipMarker, d.clone()));
    }
    let st = if exists {
        SlotState::load(&p.state()).ok()
    } else {
        None
    };
    let busy = exists && SlotLock::acquire(&p.lock()).is_err();
    let live = st
        .as_ref()
        .map(|st| live_facts(run, st))
        .unwrap_or(json!({}));
    let snap = st.as_ref().map(|s| checks::snapshot_complete(&p.root, s));
    let journal = layout::journal_read(&p.journal());
    let declared = run.declared(st.as_ref());
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
        "stale_snapshot_tmp": if exists { checks::stale_tmp(&p.root) } else { vec![] },
        "journal_entries": journal.len(),
        "last_journal_entry": journal.last(),
        "declared_differences": declared,
        "advice": st.as_ref().and_then(|s| super::advice::advice(
            s.phase,
            &p,
            super::advice::Container::from_live(&live),
            matches!(snap, Some(Ok(_))),
            super::advice::last_verb(&p.evidence()),
        )),
    });
    Ok(SlotOutcome {
        verb: Verb::Status,
        slot: p.slot,
        phase: st.as_ref().map(|s| s.phase),
        summary: format!("phase {:?}", st.as_ref().map(|s| s.phase)),
        gates: run.gates.gates.clone(),
        timings_ms: BTreeMap::new(),
        facts: BTreeMap::new(),
        declared_differences: declared,
        evidence: None,
        status: Some(doc),
    })
}

/// What is alive now: holder, container (the runtime is run only if it is still the binary
/// recorded at provision), overlay and image mounts, FUSE export, loop device.
fn live_facts(run: &mut VerbRun, st: &SlotState) -> Value {
    let holder = match checks::holder(st) {
        Ok(d) => json!({"alive": true, "detail": d}),
        Err(d) => json!({"alive": false, "detail": d}),
    };
    let container = match checks::file_sha256(&st.runtime.path) {
        Ok(h) if h == st.runtime.sha256 => {
            let rt = run.runtime(st, &st.runtime.path, &st.criu.path);
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
    // Only when the runtime has no container: then any process in its cgroup or beside the
    // holder in the slot's netns is one it lost track of (the restore gates refuse on them).
    let left = if container["status"] == "absent" {
        let one = |r: Result<String, String>| match r {
            Ok(d) => json!({"none": true, "detail": d}),
            Err(d) => json!({"none": false, "detail": d}),
        };
        json!({
            "cgroup": one(super::cgroup_procs::no_container_procs(st)),
            "netns": one(super::cgroup_procs::no_netns_strangers(st, &run.env.proc_root)),
        })
    } else {
        Value::Null
    };
    let img = st.image.as_ref();
    json!({
        "holder": holder,
        "container": container,
        "left_processes": left,
        "overlay_mounted": st.overlay.as_ref().is_some_and(|o| mounts::is_mounted(&o.merged)),
        "image_mounted": img.is_some_and(|i| i.kind == ImageKind::Qcow2 && mounts::is_mounted(&i.lower)),
        "fuse_export_running": img.and_then(|i| i.qsd_pid.zip(i.export_file.clone())).is_some_and(|(pid, f)| mounts::qsd_is_ours(pid, &f)),
        "loop_attached": img.and_then(|i| i.loop_device.clone().zip(i.export_file.clone())).is_some_and(|(d, f)| mounts::loop_backing_file(&d).as_deref() == Some(f.as_path())),
    })
}

/// What to do with a slot whose provision did not finish (interrupted or failed): a slot is
/// never re-provisioned in place (gate `slot-fresh`), so `slot cleanup` of this slot (it
/// releases what is left and marks the slot clean), then another slot number.
pub(crate) fn unfinished_provision_advice(p: &SlotPaths) -> String {
    format!(
        "a slot is never re-provisioned in place: run `netprobe slot cleanup --slot {} \
         --state-dir {}` (it releases whatever is left and marks the slot clean), then provision \
         another slot number, or move {} away after keeping its evidence ({})",
        p.slot,
        p.state_dir.display(),
        p.root.display(),
        p.evidence().display()
    )
}
