//! Unit tests of the slot checks, and fixtures (a slot state with this process as holder,
//! bundles and snapshots) that other slot modules' tests share.

use super::*;
use crate::criu::inventory::{inventory, inventory_with_blake3};
use crate::ns::ProcessIdentity;
use crate::oci::{BundleSpec, NetnsSpec, write_bundle};
use crate::slot::state::*;

/// A slot state whose holder is this test process (alive, no root needed), with pins for
/// `rt` and `cr` and no snapshot.
pub(crate) fn state_with_self_holder(root: &Path, rt: &Path, cr: &Path) -> SlotState {
    let pin = |p: &Path| BinaryPin {
        path: p.to_path_buf(),
        sha256: file_sha256(p).unwrap(),
        version: None,
        kind: None,
        sealed: None,
        script: None,
    };
    SlotState {
        schema_version: STATE_SCHEMA_VERSION,
        slot: 1,
        owner_id: "test".into(),
        phase: Phase::Running,
        created_at: String::new(),
        updated_at: String::new(),
        container_id: "netprobe-slot-test".into(),
        runtime_root: root.join("runtime-root"),
        cgroups_path: "/np/test".into(),
        runtime: pin(rt),
        criu: pin(cr),
        probe_gate: ProbeGateRecord {
            mode: ProbeGateMode::Override,
            evidence_dir: None,
            verdict: None,
            reason: Some("unit test".into()),
        },
        image: None,
        cgroup: None,
        overlay: None,
        holder: Some(ProcessIdentity::read(std::process::id() as i32).unwrap()),
        holder_netns_cookie: None,
        config_sha256: None,
        resources: crate::slot::SLOT_RESOURCES,
        profile: None,
        published_ports: Vec::new(),
        snapshot: None,
        restores: 0,
        last_verb: None,
        last_ok: true,
    }
}

/// Writes a bundle naming the holder's netns and records its hash in `st`.
pub(crate) fn bundle_for(st: &mut SlotState, bundle: &Path, rootfs: &Path) {
    fs::create_dir_all(rootfs).unwrap();
    let info = write_bundle(
        bundle,
        &BundleSpec {
            rootfs: rootfs.to_path_buf(),
            readonly_root: false,
            args: vec!["/bin/sh".into()],
            netns: NetnsSpec::Path(st.holder.unwrap().netns_path()),
            resources: Some(st.resources),
            hostname: "slot-1".into(),
            cgroups_path: Some(st.cgroups_path.clone()),
        },
    )
    .unwrap();
    st.config_sha256 = Some(info.sha256);
}

/// Writes a complete snapshot `snapshot-t` into `root` and records it in `st`.
pub(crate) fn snapshot_for(st: &mut SlotState, root: &Path) -> PathBuf {
    let dir = root.join("snapshot-t");
    fs::create_dir_all(dir.join("checkpoint")).unwrap();
    fs::create_dir_all(dir.join("upper/etc")).unwrap();
    fs::write(dir.join("upper/etc/hostname"), b"guest").unwrap();
    fs::write(dir.join("checkpoint/core-1.img"), b"core").unwrap();
    let net = "{\"links\":[]}";
    fs::write(dir.join("netstate.json"), net).unwrap();
    let files = inventory_with_blake3(&dir.join("checkpoint")).unwrap();
    let upper = crate::evidence::tree_digest(&dir.join("upper")).unwrap();
    let m = serde_json::json!({"netstate_sha256": sha256_hex(net.as_bytes()), "checkpoint_files": files, "upper": upper});
    st.snapshot = Some(SnapshotRef {
        dir: "snapshot-t".into(),
        created_at: String::new(),
        netstate_sha256: sha256_hex(net.as_bytes()),
        screen: None,
        upper: Some(upper),
        manifest_sha256: None,
        checkpoint_stats: None,
    });
    write_manifest(st, &dir, &m);
    dir
}

/// Writes the snapshot's manifest and records its sha256 in `st`, as `snapshot` does.
pub(crate) fn write_manifest(st: &mut SlotState, dir: &Path, m: &serde_json::Value) {
    let b = m.to_string();
    fs::write(dir.join("manifest.json"), &b).unwrap();
    st.snapshot.as_mut().unwrap().manifest_sha256 = Some(sha256_hex(b.as_bytes()));
}

/// A temporary folder with two small "binaries" and a state whose holder is this process.
pub(crate) fn fixture() -> (tempfile::TempDir, SlotState) {
    let d = tempfile::tempdir().unwrap();
    let (rt, cr) = (d.path().join("runc"), d.path().join("criu"));
    fs::write(&rt, b"runtime").unwrap();
    fs::write(&cr, b"criu").unwrap();
    let st = state_with_self_holder(d.path(), &rt, &cr);
    (d, st)
}

#[test]
fn config_hash_proves_hash_and_holder_netns() {
    let (d, mut st) = fixture();
    let bundle = d.path().join("bundle");
    assert!(
        config_hash(&bundle, &st)
            .unwrap_err()
            .contains("no config.json sha256")
    );
    bundle_for(&mut st, &bundle, &d.path().join("rootfs"));
    let ok = config_hash(&bundle, &st).unwrap();
    assert!(ok.contains("(the holder's)"), "{ok}");
    let mut other = st.clone();
    other.holder.as_mut().unwrap().pid = 1;
    assert!(
        config_hash(&bundle, &other)
            .unwrap_err()
            .contains("not the holder's")
    );
    let cfg = bundle.join("config.json");
    let mut text = fs::read_to_string(&cfg).unwrap();
    text.push(' ');
    fs::write(&cfg, text).unwrap();
    let e = config_hash(&bundle, &st).unwrap_err();
    assert!(
        e.contains("(tampered)") && e.contains("put back the provisioned config.json"),
        "{e}"
    );
}

#[test]
fn holder_identity_compares_pid_start_time_and_netns() {
    let (_d, mut st) = fixture();
    assert!(holder(&st).unwrap().starts_with("pid "));
    st.holder.as_mut().unwrap().start_time += 1;
    assert!(holder(&st).is_err());
    st.holder = None;
    assert_eq!(holder(&st).unwrap_err(), "no holder recorded");
}

#[test]
fn binary_pin_names_the_swap() {
    let (d, st) = fixture();
    let rt = d.path().join("runc");
    assert!(binary_pin(&rt, file_sha256(&rt), &st.runtime).is_ok());
    fs::write(&rt, b"swapped").unwrap();
    let e = binary_pin(&rt, file_sha256(&rt), &st.runtime).unwrap_err();
    assert!(e.contains("binary swapped?"), "{e}");
    assert!(
        file_sha256(&d.path().join("gone"))
            .unwrap_err()
            .contains("cannot hash")
    );
}

#[test]
fn a_changed_upper_is_named_path_by_path_against_the_manifest() {
    let d = tempfile::tempdir().unwrap();
    let up = d.path().join("upper");
    fs::create_dir_all(up.join("etc")).unwrap();
    fs::write(up.join("etc/hosts"), b"127.0.0.1 localhost\n").unwrap();
    let (_, l) = crate::evidence::tree_listing(&up).unwrap();
    let m = serde_json::json!({ "upper_entries": l });
    assert_eq!(
        upper_paths_differing(&up, &m),
        "against manifest.json's listing: no path differs"
    );
    fs::write(up.join("etc/hosts"), b"10.0.0.1 evil\n").unwrap();
    fs::write(up.join("x"), b"").unwrap();
    assert_eq!(
        upper_paths_differing(&up, &m),
        "against manifest.json's listing: changed ./etc/hosts; added ./x"
    );
    let old = serde_json::json!({});
    assert!(upper_paths_differing(&up, &old).contains("records no per-path listing"));
    let gone = d.path().join("gone");
    assert!(upper_paths_differing(&gone, &m).contains("cannot be named"));
}

#[test]
fn snapshot_completeness_is_checked_file_by_file() {
    let (d, mut st) = fixture();
    fs::create_dir(d.path().join("snapshot.tmp-x")).unwrap();
    let e = snapshot_complete(d.path(), &st).unwrap_err();
    assert!(e.contains("interrupted, never used: snapshot.tmp-x"), "{e}");
    let dir = snapshot_for(&mut st, d.path());
    let (_, detail) = snapshot_complete(d.path(), &st).unwrap();
    assert!(
        detail.contains("1 checkpoint files (blake3 as recorded)"),
        "{detail}"
    );
    // Same size, other content: named with the algorithm that proved it.
    fs::write(dir.join("checkpoint/core-1.img"), b"CORE").unwrap();
    let e = snapshot_complete(d.path(), &st).unwrap_err();
    assert!(
        e.contains("(blake3): changed core-1.img (4 bytes, blake3 ") && e.contains("cleanup"),
        "{e}"
    );
    fs::write(dir.join("checkpoint/core-1.img"), b"core").unwrap();
    // The folder moved away: said so, with the way on.
    let away = d.path().join("moved");
    fs::rename(&dir, &away).unwrap();
    let e = snapshot_complete(d.path(), &st).unwrap_err();
    assert!(
        e.contains("that state.json records is gone")
            && e.contains("`netprobe slot snapshot` takes a new one"),
        "{e}"
    );
    fs::rename(&away, &dir).unwrap();
    older_manifest_is_proven_by_sha256(d.path(), &mut st, &dir);
    an_unrecorded_or_changed_image_is_named(d.path(), &st, &dir);
    let m = the_reference_screen_is_hashed(d.path(), &mut st, &dir);
    a_changed_saved_upper_is_seen(d.path(), &st, &dir);
    an_edited_or_unrecorded_manifest_proves_nothing(d.path(), &mut st, &dir, &m);
}

// The steps of `snapshot_completeness_is_checked_file_by_file`, in its order, on the snapshot
// `dir` of the slot folder `root` with state `st`; each but the last leaves the snapshot complete.

/// A manifest of an older netprobe (no `blake3`) is proven by sha256; then the blake3 one again.
fn older_manifest_is_proven_by_sha256(root: &Path, st: &mut SlotState, dir: &Path) {
    let mut m: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let b3 = m["checkpoint_files"].clone();
    m["checkpoint_files"] =
        serde_json::to_value(inventory(&dir.join("checkpoint")).unwrap()).unwrap();
    write_manifest(st, dir, &m);
    let (_, detail) = snapshot_complete(root, st).unwrap();
    assert!(
        detail.contains("1 checkpoint files (sha256 as recorded)"),
        "{detail}"
    );
    fs::write(dir.join("checkpoint/core-1.img"), b"CORE").unwrap();
    let e = snapshot_complete(root, st).unwrap_err();
    assert!(
        e.contains("(sha256): changed core-1.img (4 bytes, sha256 "),
        "{e}"
    );
    fs::write(dir.join("checkpoint/core-1.img"), b"core").unwrap();
    m["checkpoint_files"] = b3;
    write_manifest(st, dir, &m);
}

/// A checkpoint file the manifest does not list, and a byte changed in a listed one, are named.
fn an_unrecorded_or_changed_image_is_named(root: &Path, st: &SlotState, dir: &Path) {
    fs::write(dir.join("checkpoint/extra.img"), b"x").unwrap();
    let e = snapshot_complete(root, st).unwrap_err();
    assert!(e.contains("not recorded extra.img"), "{e}");
    fs::remove_file(dir.join("checkpoint/extra.img")).unwrap();
    // A byte changed in a recorded image: named as changed, old and new hash.
    let img = fs::read_dir(dir.join("checkpoint"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_file())
        .unwrap();
    let kept = fs::read(&img).unwrap();
    let mut flipped = kept.clone();
    flipped.push(b'!');
    fs::write(&img, &flipped).unwrap();
    let e = snapshot_complete(root, st).unwrap_err();
    let name = img.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        e.contains(&format!("changed {name} (")) && e.contains(" → "),
        "{e}"
    );
    fs::write(&img, &kept).unwrap();
}

/// The reference screen is hashed like the rest; returns the manifest as written (with it).
fn the_reference_screen_is_hashed(
    root: &Path,
    st: &mut SlotState,
    dir: &Path,
) -> serde_json::Value {
    let png = dir.join("screen.png");
    fs::write(&png, b"png bytes").unwrap();
    let sha = sha256_hex(b"png bytes");
    let a = crate::x11::PngArtifact {
        file: "screen.png".into(),
        sha256: sha.clone(),
    };
    st.snapshot.as_mut().unwrap().screen = Some(a.clone());
    let mut m: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    m["screen"] = serde_json::to_value(&a).unwrap();
    write_manifest(st, dir, &m);
    let (_, detail) = snapshot_complete(root, st).unwrap();
    assert!(
        detail.contains(&format!("screen.png sha256 {sha}")),
        "{detail}"
    );
    fs::write(&png, b"other bytes").unwrap();
    let e = snapshot_complete(root, st).unwrap_err();
    assert!(
        e.contains("reference screen changed")
            && e.contains("`netprobe slot snapshot` takes a new one"),
        "{e}"
    );
    fs::remove_file(&png).unwrap();
    assert!(
        snapshot_complete(root, st)
            .unwrap_err()
            .contains("screen.png")
    );
    fs::write(&png, b"png bytes").unwrap();
    m["screen"]["sha256"] = "0".repeat(64).into();
    write_manifest(st, dir, &m);
    assert!(snapshot_complete(root, st).is_err());
    m["screen"] = serde_json::to_value(&a).unwrap();
    write_manifest(st, dir, &m);
    assert!(snapshot_complete(root, st).is_ok());
    m
}

/// The saved upper: a file added, changed or removed is seen, and an upper gone is named.
fn a_changed_saved_upper_is_seen(root: &Path, st: &SlotState, dir: &Path) {
    let evil = dir.join("upper/evil");
    fs::write(&evil, b"hacked").unwrap();
    let e = snapshot_complete(root, st).unwrap_err();
    assert!(
        e.contains("the saved upper changed since the snapshot"),
        "{e}"
    );
    assert!(e.contains("netprobe slot cleanup"), "names the way on: {e}");
    fs::remove_file(&evil).unwrap();
    fs::write(dir.join("upper/etc/hostname"), b"other").unwrap();
    assert!(snapshot_complete(root, st).is_err());
    fs::write(dir.join("upper/etc/hostname"), b"guest").unwrap();
    assert!(snapshot_complete(root, st).is_ok());
    fs::remove_dir_all(dir.join("upper")).unwrap();
    let e = snapshot_complete(root, st).unwrap_err();
    assert!(e.contains("saved upper cannot be hashed"), "{e}");
    fs::create_dir_all(dir.join("upper/etc")).unwrap();
    fs::write(dir.join("upper/etc/hostname"), b"guest").unwrap();
    // (re-made with the same modes: tempdir defaults)
    let ok = snapshot_complete(root, st);
    assert!(ok.is_ok(), "{ok:?}");
}

/// An edited manifest is seen, a state without the manifest's sha256 or the upper's digest
/// proves nothing, and an edited netstate.json is named; `m`: the manifest as written.
fn an_edited_or_unrecorded_manifest_proves_nothing(
    root: &Path,
    st: &mut SlotState,
    dir: &Path,
    m: &serde_json::Value,
) {
    let mut text = fs::read_to_string(dir.join("manifest.json")).unwrap();
    text = text.replace(
        "\"netstate_sha256\"",
        "\"holder\":{\"pid\":1},\"netstate_sha256\"",
    );
    fs::write(dir.join("manifest.json"), &text).unwrap();
    let e = snapshot_complete(root, st).unwrap_err();
    assert!(e.contains("the manifest changed since the snapshot"), "{e}");
    write_manifest(st, dir, m);
    let mut old = st.clone();
    old.snapshot.as_mut().unwrap().manifest_sha256 = None;
    assert!(
        snapshot_complete(root, &old)
            .unwrap_err()
            .contains("not proven")
    );
    let mut old = st.clone();
    old.snapshot.as_mut().unwrap().upper = None;
    assert!(
        snapshot_complete(root, &old)
            .unwrap_err()
            .contains("no digest of the saved upper")
    );
    fs::write(dir.join("netstate.json"), b"{}").unwrap();
    let e = snapshot_complete(root, st).unwrap_err();
    assert!(
        e.contains(&format!(
            "/netstate.json has sha256 {}, state.json records {}",
            sha256_hex(b"{}"),
            st.snapshot.as_ref().unwrap().netstate_sha256
        )) && e.contains("`netprobe slot snapshot` takes a new one"),
        "{e}"
    );
}

#[test]
fn probe_evidence_refuses_a_folder_without_a_result() {
    let (d, st) = fixture();
    let e = probe_evidence(d.path(), &st.runtime, &st.criu).unwrap_err();
    assert!(e.starts_with(&d.path().display().to_string()), "{e}");
}

#[test]
fn usage_checks_keep_the_reason_and_pin_rules() {
    let mut a = SlotArgs::new(Verb::Restore, "1", "/tmp/x");
    assert!(usage_checks(&a, "1").is_ok());
    a.verb = Verb::Provision;
    let d = tempfile::tempdir().unwrap();
    let q = d.path().join("x.qcow2");
    a.image = Some(q.clone());
    let e = usage_checks(&a, "1").unwrap_err();
    assert!(e.message.contains("pinned with --image-sha256") && e.exit_code() == 2);
    a.image_sha256 = Some("a".repeat(64));
    // Pinned but missing: named, with the fix, before anything is made.
    let e = usage_checks(&a, "1").unwrap_err();
    assert!(
        e.exit_code() == 2
            && e.message.contains(&format!("--image {}: ", q.display()))
            && e.message
                .contains("give --image an existing root filesystem directory"),
        "{}",
        e.message
    );
    fs::create_dir(&q).unwrap();
    assert!(
        usage_checks(&a, "1")
            .unwrap_err()
            .message
            .contains("not a regular file")
    );
    fs::remove_dir(&q).unwrap();
    fs::write(&q, b"disk").unwrap();
    assert!(usage_checks(&a, "1").is_ok());
    // A directory image: there and a directory, or named.
    let (mut b, f) = (a.clone(), d.path().join("rootfs"));
    b.image_sha256 = None;
    b.image = Some(f.clone());
    assert!(
        usage_checks(&b, "1")
            .unwrap_err()
            .message
            .contains("No such file")
    );
    fs::write(&f, b"x").unwrap();
    assert!(
        usage_checks(&b, "1")
            .unwrap_err()
            .message
            .contains("neither a directory")
    );
    a.no_probe_gate = true;
    assert!(
        usage_checks(&a, "1")
            .unwrap_err()
            .message
            .contains("needs --reason")
    );
    a.reason = Some("  ".into());
    assert!(
        usage_checks(&a, "1")
            .unwrap_err()
            .message
            .contains("must not be blank")
    );
    a.reason = Some("r".into());
    assert!(usage_checks(&a, "1").is_ok());
}

#[test]
fn image_pin_rule() {
    let q = Path::new("/x.qcow2");
    let d = Path::new("/rootfs");
    assert!(
        image_pin(Some(q), None)
            .unwrap_err()
            .to_string()
            .contains("--image-sha256")
    );
    assert!(
        image_pin(Some(d), Some("a"))
            .unwrap_err()
            .to_string()
            .contains("qcow2 image only")
    );
    assert!(image_pin(Some(q), Some("a")).is_ok());
    assert!(image_pin(Some(d), None).is_ok());
    assert!(image_pin(None, None).is_ok());
}
