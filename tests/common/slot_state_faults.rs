//! The steps of `lifecycle_faults` (tests/slot_faults/slot_faults.rs) on slot 11's state.json: out of step
//! with the overlay mount, unreadable, or naming a folder outside the slot as its snapshot.

use super::slot_support::*;
use netprobe::slot::{SlotState, Verb};
use std::path::Path;

/// state.json's overlay run out of step with the mount: snapshot refuses; put back. Returns the
/// state as it was.
pub fn an_overlay_run_out_of_step_is_refused(sd: &Path) -> SlotState {
    // state.json's overlay run out of step with the mount: snapshot refuses before the
    // checkpoint, the container keeps running.
    let mut s = state(sd, 11);
    let mut good = s.clone();
    s.overlay.as_mut().unwrap().run += 1;
    s.save(&sd.join("slot-11/state.json")).unwrap();
    let e = err(&args(Verb::Snapshot, "11", sd));
    assert_gate_err(&e, "11", "overlay-mounted", 1);
    assert!(e.message.contains("but state.json records run"), "{e}");
    good.save(&sd.join("slot-11/state.json")).unwrap();
    assert_eq!(
        ok(Verb::Status, "11", sd).to_json()["live"]["container"]["status"],
        "running"
    );
    good
}

/// state.json unreadable: status says why and what to release by hand (`good`: the state as it
/// was), a verb points at it; put back. Returns state.json's bytes.
pub fn status_without_a_readable_state(sd: &Path, good: &SlotState) -> Vec<u8> {
    // state.json unreadable: status says why, what holder.json and the mounts still tell, and
    // what to release by hand (no verb can run).
    let sj = sd.join("slot-11/state.json");
    let kept = std::fs::read(&sj).unwrap();
    std::fs::write(&sj, b"{").unwrap();
    let doc = ok(Verb::Status, "11", sd).to_json();
    assert_valid(&slot_state_validator(), &doc);
    assert!(
        doc["state_error"].as_str().is_some_and(|e| !e.is_empty()),
        "{doc:#}"
    );
    assert_eq!(doc["live"]["holder"]["alive"], true, "{doc:#}");
    assert!(
        doc["live"]["mounts_under_slot"]
            .as_array()
            .is_some_and(|m| !m.is_empty()),
        "{doc:#}"
    );
    // The container runs: the runtime root holds its entry, and the advice deletes it.
    assert_eq!(
        doc["live"]["runtime_state_entry"]["exists"], true,
        "{doc:#}"
    );
    let advice = doc["advice"].as_str().unwrap_or_default();
    assert!(
        advice.contains("state.json cannot be read") && advice.contains("delete -f"),
        "{doc:#}"
    );
    // Its cgroup folders, found by the owner id (owner.json), one per hierarchy, are named in
    // the advice's release list.
    let cg = doc["live"]["cgroup_dirs"].as_array().unwrap().clone();
    let leaf = good.cgroups_path.rsplit('/').next().unwrap().to_string();
    assert!(
        !cg.is_empty()
            && cg.iter().all(|d| d.as_str().unwrap().ends_with(&leaf)
                && std::path::Path::new(d.as_str().unwrap()).is_dir()),
        "{doc:#}"
    );
    assert!(
        advice.contains("cgroup folder(s) (`live.cgroup_dirs`: `rmdir` each"),
        "{advice}"
    );
    // The runtime to delete the container with is the one the provision recorded.
    assert!(
        advice.contains("(the runtime provision recorded: ")
            && advice.contains("-provision/verb.json"),
        "{doc:#}"
    );
    // A verb refused on it points at that advice.
    let e = err(&args(Verb::Reset, "11", sd));
    assert_gate_err(&e, "11", "slot-state", 1);
    assert!(
        e.message.contains("netprobe slot status --slot 11")
            && e.message.contains("what to release by hand"),
        "{e}"
    );
    std::fs::write(&sj, &kept).unwrap();
    kept
}

/// state.json (`kept`: its bytes) edited to name a folder outside the slot (in `tmp`) as its
/// snapshot: refused at load, the folder kept.
pub fn a_snapshot_folder_outside_the_slot_is_refused(sd: &Path, tmp: &Path, kept: &[u8]) {
    let sj = sd.join("slot-11/state.json");
    // state.json edited to name a folder outside the slot as its snapshot (an absolute path or
    // `..`): refused at load (slot-state), so no restore reads images from there and no
    // snapshot removes it as "the previous snapshot".
    let victim = tmp.join("victim");
    std::fs::create_dir_all(victim.join("sub")).unwrap();
    std::fs::write(victim.join("sub/data"), b"x").unwrap();
    for dir in [victim.to_string_lossy().to_string(), "../../victim".into()] {
        let mut j: serde_json::Value = serde_json::from_slice(kept).unwrap();
        assert!(j["snapshot"]["dir"].is_string(), "{j:#}");
        j["snapshot"]["dir"] = dir.clone().into();
        std::fs::write(&sj, serde_json::to_vec(&j).unwrap()).unwrap();
        for verb in [Verb::Snapshot, Verb::Restore, Verb::Reset] {
            let e = err(&args(verb, "11", sd));
            assert_gate_err(&e, "11", "slot-state", 1);
            assert!(
                e.message.contains("not a snapshot folder name"),
                "{dir}: {e}"
            );
        }
        assert!(
            victim.join("sub/data").is_file(),
            "{dir}: the victim was removed"
        );
    }
    std::fs::write(&sj, kept).unwrap();
}
