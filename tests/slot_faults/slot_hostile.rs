//! Faults of a hostile trial set up for real on a slot (slots 80-89): each is named, fails with
//! its exit code and leaves nothing behind.
use crate::common::slot_support;
use netprobe::slot::Verb;
use slot_support::*;
use std::path::Path;

/// `nft` inside the netns of the slot's holder.
fn nft(h: &netprobe::ns::ProcessIdentity, script: &str) {
    let st = std::process::Command::new("nsenter")
        .arg(format!("--net=/proc/{}/ns/net", h.pid))
        .args(["nft", script])
        .status()
        .unwrap();
    assert!(st.success(), "nft {script}");
}

/// The `facts` of a verb's `verb.json` in evidence folder `ev`.
fn facts_of(ev: &Path) -> serde_json::Value {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ev.join("verb.json")).unwrap()).unwrap();
    v["facts"].clone()
}

/// An empty table and an empty chain named like CRIU's lock, planted in the slot's netns: each
/// filters nothing, and each is named and fails closed (restore: `net-fidelity`, then removed by
/// the failed restore when it is CRIU's form; snapshot: `no-criu-lock` when it cannot be
/// removed); the lock method CRIU recorded is a fact of snapshot and restore.
#[test]
fn criu_named_tables_and_chains_are_never_nothing() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![80]);
    provision_dir("80", &sd, &sleep_image(tmp.path())).unwrap_or_else(|e| panic!("{e}"));
    let s = ok(Verb::Snapshot, "80", &sd);
    assert_eq!(
        s.facts["criu_network_lock_method"], "iptables (inventory.img network_lock_method 0)",
        "{:?}",
        s.facts
    );
    let h = state(&sd, 80).holder.unwrap();

    // Between snapshot and restore: an empty `table inet CRIU-x` (a base chain, policy accept).
    nft(
        &h,
        "add table inet CRIU-x; add chain inet CRIU-x input { type filter hook input priority 0; policy accept; }",
    );
    let e = err(&args(Verb::Restore, "80", &sd));
    assert_gate_err(&e, "80", "net-fidelity", 1);
    assert!(
        e.message
            .contains("CRIU's network lock left in the namespace: nftables: table inet CRIU-x"),
        "{e}"
    );
    let ev = e.evidence.as_deref().unwrap();
    assert_eq!(
        facts_of(ev)["criu_network_lock_method"],
        "iptables (inventory.img network_lock_method 0)"
    );
    assert!(lock_in(&h).is_empty(), "{:?}", lock_in(&h));
    ok(Verb::Restore, "80", &sd);

    // A chain `CRIU-y` in a table of another name: named by status, and the snapshot, which
    // cannot remove what is not CRIU's own form, fails `no-criu-lock` naming it.
    nft(
        &h,
        "add table inet np80; add chain inet np80 CRIU-y { type filter hook output priority 0; policy accept; }",
    );
    let st = ok(Verb::Status, "80", &sd);
    let live = &st.status.as_ref().unwrap()["live"]["criu_network_lock"];
    assert_eq!(live["status"], "present", "{live}");
    assert!(
        live["detail"]
            .as_str()
            .unwrap()
            .starts_with("nftables: chain CRIU-y in table inet np80 in the netns of holder pid"),
        "{live}"
    );
    let e = err(&args(Verb::Snapshot, "80", &sd));
    assert_gate_err(&e, "80", "no-criu-lock", 1);
    assert!(
        e.message.contains(
            "CRIU's network lock is in the namespace and could not be removed (nftables: chain CRIU-y in table inet np80; see criu-lock-released-before-capture.txt)"
        ),
        "{e}"
    );
    nft(&h, "delete table inet np80");
    let pids = holder_pids(&sd);
    ok(Verb::Cleanup, "80", &sd);
    assert_released(&sd, &pids);
}

/// A memory limit written by hand into the container's cgroup file after provision: `slot
/// status` reads the live files and marks it, the snapshot refuses it (gate `cgroup-limits`,
/// naming the file and both values) before the checkpoint, and passes once it is put back.
#[test]
fn a_cgroup_limit_changed_by_hand_is_named() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![81]);
    provision_dir("81", &sd, &sleep_image(tmp.path())).unwrap_or_else(|e| panic!("{e}"));
    let st = state(&sd, 81);
    let want = st.resources.memory_limit;
    let rb = st.cgroup.unwrap().last_readback.unwrap();
    let file = rb
        .files
        .iter()
        .find(|f| f.path.ends_with("memory.limit_in_bytes") || f.path.ends_with("memory.max"))
        .unwrap()
        .path
        .clone();
    let old = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, "2147483648").unwrap();
    let expected = format!(
        "memory limit 2147483648 bytes in {} (\"2147483648\"), config.json {want} bytes",
        file.display()
    );

    let s = ok(Verb::Status, "81", &sd);
    let doc = s.status.unwrap();
    let live = &doc["live"]["cgroup_limits"];
    assert_eq!(live["equal"], false, "{live}");
    assert_eq!(live["differences"][0], expected.as_str(), "{live}");
    assert!(
        doc["advice"]
            .as_str()
            .unwrap_or_default()
            .contains("snapshot refuses (gate cgroup-limits)"),
        "{doc:#}"
    );

    let e = err(&args(Verb::Snapshot, "81", &sd));
    assert_gate_err(&e, "81", "cgroup-limits", 1);
    assert!(
        e.message.contains(&format!(
            "the container's cgroup limits changed since they were set: {expected}; a snapshot would checkpoint"
        )),
        "{e}"
    );
    assert!(
        e.evidence
            .as_deref()
            .unwrap()
            .join("cgroup-limits-snapshot.json")
            .exists()
    );
    assert_eq!(
        state(&sd, 81).snapshot,
        None,
        "a refused snapshot records none"
    );

    std::fs::write(&file, old.trim()).unwrap();
    let s = ok(Verb::Status, "81", &sd);
    assert_eq!(s.status.unwrap()["live"]["cgroup_limits"]["equal"], true);
    let snap = ok(Verb::Snapshot, "81", &sd);
    assert!(gate(&snap, "cgroup-limits").proven, "{:?}", snap.gates);
    let pids = holder_pids(&sd);
    ok(Verb::Cleanup, "81", &sd);
    assert_released(&sd, &pids);
}
