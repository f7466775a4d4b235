//! Bad slot input: malformed slot numbers are usage errors, and a state directory that is a
//! symlink, not ours, or a file is refused naming the slot and the gate, with the documented exit
//! code; status of a state directory or slot that is not there says so.
use crate::common::slot_support;
use netprobe::slot::{SlotArgs, Verb};
use slot_support::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn malformed_slot_numbers_are_usage_errors() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    for bad in [
        "",
        "-1",
        "+1",
        "01",
        "1000",
        "12345678901234567890",
        "1/../2",
        "../1",
        "a",
        " 1",
        "1 ",
        "1.0",
        "٣",
    ] {
        let e = err(&SlotArgs::new(Verb::Status, bad, tmp.path()));
        assert_eq!(e.exit_code(), 2, "{bad:?}: {e}");
        assert!(e.to_string().contains("slot"), "{e}");
    }
    assert!(netprobe::slot::parse_slot("0").is_ok() && netprobe::slot::parse_slot("999").is_ok());
    // Usage: --no-probe-gate without a reason; qcow2 without a pin.
    let mut a = SlotArgs::new(Verb::Provision, "1", tmp.path().join("s"));
    a.no_probe_gate = true;
    assert_eq!(err(&a).exit_code(), 2);
    let mut a = SlotArgs::new(Verb::Provision, "1", tmp.path().join("s"));
    a.image = Some(tmp.path().join("x.qcow2"));
    assert_eq!(err(&a).exit_code(), 2);
    // A missing --image is bad input too (exit 2, named with the fix), as a profile's is.
    let mut a = SlotArgs::new(Verb::Provision, "1", tmp.path().join("s"));
    a.image = Some(tmp.path().join("no-such-rootfs"));
    a.no_probe_gate = true;
    a.reason = Some("usage test".into());
    let e = err(&a);
    assert_eq!(e.exit_code(), 2, "{e}");
    assert!(
        e.to_string().contains("--image") && e.to_string().contains("no-such-rootfs"),
        "{e}"
    );
    assert!(
        !tmp.path().join("s").exists(),
        "a usage error creates nothing"
    );
}

#[test]
fn state_dir_symlink_or_not_ours() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    // Not followed; the error names where the link leads and the path to pass instead.
    let real_path = std::fs::canonicalize(&real).unwrap();
    for verb in [Verb::Provision, Verb::Snapshot, Verb::Cleanup, Verb::Status] {
        let e = err(&args(verb, "3", &link));
        assert_gate_err(&e, "3", "state-dir", 1);
        assert!(
            e.message.contains(&format!(
                "{} is a symlink; netprobe does not follow a symlink for --state-dir",
                link.display()
            )) && e.message.contains(&format!(
                "it leads to {0}: pass that path, `--state-dir {0}`",
                real_path.display()
            )),
            "{e}"
        );
    }
    // A dangling link: its target as read, and why it does not resolve.
    let dangling = tmp.path().join("dangling");
    std::os::unix::fs::symlink(tmp.path().join("gone"), &dangling).unwrap();
    let e = err(&args(Verb::Provision, "3", &dangling));
    assert_gate_err(&e, "3", "state-dir", 1);
    assert!(
        e.message.contains(&format!(
            "it points to {}, which does not resolve",
            tmp.path().join("gone").display()
        )),
        "{e}"
    );
    assert!(
        !tmp.path().join("gone").exists(),
        "nothing made through the link"
    );
    // A regular file as the state dir: every verb, status included, refuses it by the same gate.
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"not a state dir").unwrap();
    for verb in Verb::ALL {
        let e = err(&args(verb, "3", &file));
        assert_gate_err(&e, "3", "state-dir", 1);
        assert!(
            e.message.contains("not a directory"),
            "{}: {e}",
            verb.as_str()
        );
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"not a state dir");
    // Not there yet, or empty (provision would adopt both): status says `exists: false`.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o700)).unwrap();
    for sd in [tmp.path().join("not-yet"), empty.clone()] {
        let doc = ok(Verb::Status, "3", &sd).to_json();
        assert_eq!(doc["exists"], false, "{doc}");
        assert_eq!(doc["declared_differences"], serde_json::json!([]), "{doc}");
        // The advice says which: no such state directory (a mistyped path?), or no such slot.
        let advice = doc["advice"].as_str().unwrap_or_else(|| panic!("{doc}"));
        let said = match sd == empty {
            true => {
                "holds no slot 3 (never provisioned there, or moved away); it holds no slot folder at all"
            }
            false => "does not exist: no slot was provisioned there; check `--state-dir`",
        };
        assert!(advice.contains(said), "{advice}");
        assert_valid(&slot_state_validator(), &doc);
    }
    assert!(
        !tmp.path().join("not-yet").exists(),
        "status creates nothing"
    );
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        0,
        "status writes nothing"
    );
    // Not ours: non-empty, no marker.
    std::fs::write(real.join("somebody-elses-file"), b"x").unwrap();
    let e = err(&args(Verb::Provision, "3", &real));
    assert_gate_err(&e, "3", "state-dir", 1);
    assert!(
        e.message.contains("not ours") && e.message.contains("a new (or empty) folder"),
        "{e}"
    );
    // Not ours: another owner.
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    nix::unistd::chown(&other, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let e = err(&args(Verb::Provision, "3", &other));
    assert_gate_err(&e, "3", "state-dir", 1);
    // World-writable.
    let ww = tmp.path().join("ww");
    std::fs::create_dir(&ww).unwrap();
    std::fs::set_permissions(&ww, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert_gate_err(&err(&args(Verb::Provision, "3", &ww)), "3", "state-dir", 1);
    assert_eq!(
        std::fs::read_dir(&real).unwrap().count(),
        1,
        "nothing written into a dir not ours"
    );
    // A slot directory without our marker is never touched.
    let sd = tmp.path().join("sd");
    let _ = run(Verb::Status, "1", &sd);
    std::fs::create_dir(&sd).unwrap();
    std::fs::set_permissions(&sd, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(sd.join(".netprobe-state-dir"), b"x").unwrap();
    std::fs::create_dir(sd.join("slot-4")).unwrap();
    std::fs::write(sd.join("slot-4/data"), b"keep").unwrap();
    for verb in [
        Verb::Snapshot,
        Verb::Restore,
        Verb::Reset,
        Verb::Cleanup,
        Verb::Status,
    ] {
        assert_gate_err(&err(&args(verb, "4", &sd)), "4", "ownership-marker", 1);
    }
    assert_gate_err(&err(&args(Verb::Provision, "4", &sd)), "4", "slot-fresh", 1);
    assert_eq!(std::fs::read(sd.join("slot-4/data")).unwrap(), b"keep");
    // A slot number never provisioned: provision is named as the way on.
    let e = err(&args(Verb::Restore, "5", &sd));
    assert_gate_err(&e, "5", "ownership-marker", 1);
    assert!(
        e.to_string().contains(&format!(
            "run `netprobe slot provision --slot 5 --state-dir {}` first",
            sd.display()
        )),
        "{e}"
    );
    assert_eq!(std::fs::read_dir(sd.join("slot-4")).unwrap().count(), 1);
}

/// Unmounts a test's read-only bind mount when dropped (also when the test fails).
struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// A state directory on a read-only filesystem — one `provision` would create there, or an
/// empty one it would mark — is refused at gate `state-dir` (exit 1, nothing made) naming the
/// filesystem (type, source, mount point) and the fix, as a slot folder that cannot be made is.
#[test]
fn a_state_dir_on_a_read_only_filesystem_names_the_filesystem_and_the_fix() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let ro = tmp.path().join("ro");
    std::fs::create_dir_all(ro.join("empty")).unwrap();
    std::fs::set_permissions(ro.join("empty"), std::fs::Permissions::from_mode(0o700)).unwrap();
    use nix::mount::{MsFlags, mount};
    mount(Some(&ro), &ro, None::<&str>, MsFlags::MS_BIND, None::<&str>).unwrap();
    let _unmount = Unmount(ro.clone());
    mount(
        None::<&str>,
        &ro,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
        None::<&str>,
    )
    .unwrap();
    for (sd, what) in [
        (
            ro.join("new"),
            format!("cannot create {}", ro.join("new").display()),
        ),
        (
            ro.join("empty"),
            format!(
                "cannot write {}",
                ro.join("empty/.netprobe-state-dir").display()
            ),
        ),
    ] {
        let e = err(&args(Verb::Provision, "83", &sd));
        assert_gate_err(&e, "83", "state-dir", 1);
        assert!(
            e.message.contains(&format!("{what}: Read-only file system"))
                && e.message.contains(&format!(
                    "the state directory {} is on the ",
                    sd.display()
                ))
                && e.message.contains(&format!(" mounted at {}", ro.display()))
                && e.message.contains(&format!(
                    "fix: remount {} read-write, or give --state-dir a folder on a writable filesystem, then provision again",
                    ro.display()
                )),
            "{e}"
        );
    }
    assert!(!ro.join("new").exists());
    assert_eq!(std::fs::read_dir(ro.join("empty")).unwrap().count(), 0);
}
