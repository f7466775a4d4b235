//! A qcow2 image built by the test from the busybox rootfs (mkfs.ext4 -d, qemu-img convert),
//! pinned by sha256 and mounted read-only through qemu-storage-daemon's FUSE export + a loop device.
mod slot_support;
use netprobe::slot::{SlotArgs, Verb, run_verb};
use slot_support::*;

#[test]
fn qcow2_image_cycle_and_wrong_pin() {
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
    let holders = holder_pids(&sd);
    ok(Verb::Cleanup, "21", &sd);
    assert_released(&sd, &holders);
    assert_eq!(
        std::fs::read(&q).unwrap(),
        before,
        "the qcow2 is never written or converted"
    );
}
