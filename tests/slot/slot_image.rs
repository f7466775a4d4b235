//! A qcow2 image built by the test from the busybox rootfs (mkfs.ext4 -d, qemu-img convert),
//! pinned by sha256 and mounted read-only through qemu-storage-daemon's FUSE export + a loop device;
//! and the `image-unchanged` gate over a qcow2, a directory image and the embedded image.
use crate::common::slot_support;
use netprobe::slot::{SlotArgs, Verb, run_verb};
use slot_support::*;

#[test]
fn qcow2_image_cycle_and_wrong_pin() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![21, 22]);
    let (q, sha) = build_qcow2(tmp.path());
    let before = std::fs::read(&q).unwrap();

    // Wrong pin: refused before anything is mounted.
    let mut a: SlotArgs = args(Verb::Provision, "22", &sd);
    a.image = Some(q.clone());
    a.image_sha256 = Some("0".repeat(64));
    let e = run_verb(&a).unwrap_err();
    assert_eq!(e.exit_code(), 1, "{e}");
    assert_eq!(e.gate.as_deref(), Some("image-sha256"));
    assert_released(&sd, &[]);

    let mut a = args(Verb::Provision, "21", &sd);
    a.image = Some(q.clone());
    a.image_sha256 = Some(sha.clone());
    let p = run_verb(&a).unwrap_or_else(|e| panic!("{e}"));
    assert!(gate(&p, "image-sha256").proven);
    let img = state(&sd, 21).image.unwrap();
    assert_eq!(img.kind, "qcow2");
    // --image without --profile: the built-in default profile with this image, recorded so.
    let pr = state(&sd, 21).profile.expect("a profile record");
    assert!(pr.image_from_flags && pr.source.is_none(), "{pr:?}");
    assert_eq!(pr.sha256, netprobe::profile::builtin_default().sha256);
    match &pr.profile.image {
        netprobe::profile::Image::Qcow2 { path, sha256, .. } => {
            assert_eq!(path, &std::fs::canonicalize(&q).unwrap());
            assert_eq!(sha256.as_deref(), Some(sha.as_str()));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(img.sha256.as_deref(), Some(sha.as_str()));
    let dev = img.loop_device.clone().unwrap();
    let ro = std::fs::read_to_string(format!(
        "/sys/block/{}/ro",
        dev.file_name().unwrap().to_string_lossy()
    ))
    .unwrap();
    assert_eq!(ro.trim(), "1", "loop device is read-only");
    let mi = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let lower = mi
        .lines()
        .find(|l| l.contains(&*img.lower.to_string_lossy()))
        .unwrap();
    assert!(
        lower.split(' ').nth(5).unwrap().starts_with("ro"),
        "{lower}"
    );
    let st = ok(Verb::Status, "21", &sd).to_json();
    assert_valid(&slot_state_validator(), &st);
    assert!(st["state"]["image"]["file_stat"]["ino"].is_u64(), "{st}");
    assert_eq!(st["live"]["fuse_export_running"], true);
    assert_eq!(st["live"]["loop_attached"], true);

    assert!(
        gate(&p, "guest-http").proven,
        "{:?}",
        gate(&p, "guest-http")
    );
    let snap = ok(Verb::Snapshot, "21", &sd);
    let ph = gate(&snap, "profile-hash");
    assert!(
        ph.proven && ph.detail.contains("<built-in> (with the --image image)"),
        "{ph:?}"
    );
    let r = ok(Verb::Restore, "21", &sd);
    assert!(
        gate(&r, "guest-http").proven,
        "{:?}",
        gate(&r, "guest-http")
    );
    let r = ok(Verb::Reset, "21", &sd);
    assert!(
        gate(&r, "guest-http").proven,
        "{:?}",
        gate(&r, "guest-http")
    );
    // The qcow2 is proven by the stat it had when hashed to its pin, not hashed again.
    let g = gate(&r, "image-unchanged");
    assert!(g.proven && g.detail.contains("not re-hashed"), "{g:?}");
    assert_eq!(img.file_stat, state(&sd, 21).image.unwrap().file_stat);
    assert!(img.file_stat.is_some() && img.manifest.is_none(), "{img:?}");
    // Its stat changed (times set, the same bytes): the next reset refuses before it stops the
    // container.
    let t = std::process::Command::new("touch")
        .arg(&q)
        .status()
        .unwrap();
    assert!(t.success());
    let e = run(Verb::Reset, "21", &sd).unwrap_err();
    assert_eq!(
        (e.exit_code(), e.gate.as_deref()),
        (1, Some("image-unchanged")),
        "{e}"
    );
    assert!(
        e.message.contains("changed since it was hashed to the pin")
            && e.message.contains("mtime, ctime"),
        "{e}"
    );
    assert_eq!(
        ok(Verb::Status, "21", &sd).to_json()["live"]["container"]["status"],
        "running"
    );
    let holders = holder_pids(&sd);
    ok(Verb::Cleanup, "21", &sd);
    assert_released(&sd, &holders);
    assert_eq!(
        std::fs::read(&q).unwrap(),
        before,
        "the qcow2 is never written or converted"
    );
}

/// `image-unchanged` refused `e` naming `file`, with exit 1, and the verb's `timings.json`
/// names the gate's step.
fn refused_at_image_gate(e: &netprobe::slot::SlotError, file: &str) {
    assert_eq!(
        (e.exit_code(), e.gate.as_deref()),
        (1, Some("image-unchanged")),
        "{e}"
    );
    assert!(
        e.message
            .contains(&format!("changed ./{file} (size 8 → 12, mtime, ctime)"))
            && e.message.contains("then provision a new slot"),
        "{e}"
    );
    let ev = e.evidence.as_deref().expect("the verb's evidence folder");
    let t: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ev.join("timings.json")).unwrap()).unwrap();
    assert!(t.get("gate-image").is_some(), "{t}");
}

/// A directory image is the overlay's lower in place: provision records its manifest, and a file
/// edited in it after the snapshot stops restore and reset at `image-unchanged` (exit 1, the
/// file named), before anything is touched: the holder, the snapshot and the phase are kept.
#[test]
fn an_edited_directory_image_is_refused_before_restore_and_reset() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![83]);
    let img = http_image(tmp.path());
    std::fs::write(img.join("var/www/index.html"), b"ORIGINAL").unwrap();
    provision_dir("83", &sd, &img).unwrap_or_else(|e| panic!("{e}"));
    let st = state(&sd, 83);
    let m = st
        .image
        .as_ref()
        .unwrap()
        .manifest
        .clone()
        .expect("a manifest");
    assert!(m.entries > 10, "{m:?}");
    let listing: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sd.join("slot-83/image-manifest.json")).unwrap())
            .unwrap();
    assert_eq!(listing["sha256"], m.sha256.as_str());
    let doc = ok(Verb::Status, "83", &sd).to_json();
    assert_valid(&slot_state_validator(), &doc);
    assert_eq!(doc["state"]["image"]["manifest"]["entries"], m.entries);
    let snap = ok(Verb::Snapshot, "83", &sd);
    let g = gate(&snap, "image-unchanged");
    assert!(
        g.proven && g.detail.contains("as recorded at provision"),
        "{g:?}"
    );
    let snap_dir = sd
        .join("slot-83")
        .join(state(&sd, 83).snapshot.unwrap().dir);
    let holders = holder_pids(&sd);

    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(img.join("var/www/index.html"), b"CHANGED, too").unwrap();
    // Through the binary: exit 1, the file named on stderr.
    let (code, out, err) = cli_slot("restore", "83", &sd, &[]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains("image-unchanged") && err.contains("./var/www/index.html"),
        "{err}"
    );
    refused_at_image_gate(
        &run(Verb::Restore, "83", &sd).unwrap_err(),
        "var/www/index.html",
    );
    refused_at_image_gate(
        &run(Verb::Reset, "83", &sd).unwrap_err(),
        "var/www/index.html",
    );
    // Nothing was destroyed: the snapshot, the holder, the phase.
    assert!(snap_dir.join("manifest.json").is_file());
    let after = state(&sd, 83);
    assert_eq!(after.phase, netprobe::slot::Phase::Checkpointed);
    assert_eq!(after.holder, st.holder);
    assert!(holders.iter().all(|p| !gone(*p)), "{holders:?}");

    ok(Verb::Cleanup, "83", &sd);
    assert_released(&sd, &holders);
}

/// The embedded image is a plain folder in the slot (`image/rootfs`): a file edited there while
/// the restored container runs stops snapshot (the last proven snapshot kept), reset (the
/// container not stopped) and restore at `image-unchanged`.
#[test]
fn an_edited_embedded_image_is_refused_before_snapshot_reset_and_restore() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![84]);
    let p = ok(Verb::Provision, "84", &sd);
    assert!(
        p.timings_ms.contains_key("image-manifest"),
        "{:?}",
        p.timings_ms
    );
    let st = state(&sd, 84);
    let img = st.image.clone().unwrap();
    assert_eq!(
        (img.kind, img.lower.clone()),
        (
            netprobe::slot::ImageKind::Embedded,
            sd.join("slot-84/image/rootfs")
        )
    );
    assert!(img.manifest.is_some());
    ok(Verb::Snapshot, "84", &sd);
    let r = ok(Verb::Restore, "84", &sd);
    assert!(gate(&r, "image-unchanged").proven);
    let snap_dir = sd
        .join("slot-84")
        .join(state(&sd, 84).snapshot.unwrap().dir);
    let holders = holder_pids(&sd);

    let live = |sd: &std::path::Path| ok(Verb::Status, "84", sd).to_json();
    let doc = live(&sd);
    assert_eq!(doc["live"]["image_unchanged"]["proven"], true, "{doc:#}");
    let html = img.lower.join("var/www/index.html");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let was = std::fs::read(&html).unwrap();
    std::fs::write(&html, [&was[..], b" (edited)"].concat()).unwrap();
    for verb in [Verb::Snapshot, Verb::Reset, Verb::Restore] {
        let e = run(verb, "84", &sd).unwrap_err();
        assert_eq!(
            (e.exit_code(), e.gate.as_deref()),
            (1, Some("image-unchanged")),
            "{verb:?}: {e}"
        );
        assert!(
            e.message.contains(&format!(
                "changed ./var/www/index.html (size {} → {}, mtime, ctime)",
                was.len(),
                was.len() + 9
            )),
            "{e}"
        );
        assert_eq!(
            ok(Verb::Status, "84", &sd).to_json()["live"]["container"]["status"],
            "running",
            "{verb:?} left the container running"
        );
    }
    // Status says so before any verb is tried: the check, and the advice.
    let doc = live(&sd);
    assert_eq!(doc["live"]["image_unchanged"]["proven"], false, "{doc:#}");
    assert!(
        doc["live"]["image_unchanged"]["detail"]
            .as_str()
            .unwrap()
            .contains("changed ./var/www/index.html"),
        "{doc:#}"
    );
    assert!(
        doc["advice"]
            .as_str()
            .is_some_and(|a| a.starts_with("the image changed since provision")),
        "{doc:#}"
    );
    assert_valid(&slot_state_validator(), &doc);
    assert!(snap_dir.join("manifest.json").is_file());
    assert_eq!(state(&sd, 84).phase, netprobe::slot::Phase::Running);
    assert!(holders.iter().all(|p| !gone(*p)), "{holders:?}");

    ok(Verb::Cleanup, "84", &sd);
    assert_released(&sd, &holders);
}
