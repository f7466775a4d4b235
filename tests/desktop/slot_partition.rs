//! Partitioned qcow2 disks on the slot's image path (real qemu-storage-daemon FUSE export, real
//! read-only loop devices with --offset/--sizelimit, real read-only mounts): a tiny GPT disk made
//! here (EFI FAT + ext4 root with /etc/os-release) and the desktop guest image of
//! host/build-desktop-image.sh. Every daemon, loop device and mount is released by its guard.

use crate::common;

use std::path::Path;
use std::process::Command;

use netprobe::slot::resources::mounts::{
    self, loop_attach, loop_attach_partition, mount_ro, qsd_start,
};
use netprobe::slot::resources::partition::{self, Partition};

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A 48 MiB GPT disk as qcow2: 1 "EFI" (FAT, 8 MiB), 2 "root" (ext4 with etc/os-release).
fn tiny_disk(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("rootdir");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/os-release"), "ID=netprobe-tiny\n").unwrap();
    let (esp, ext, raw) = (dir.join("esp"), dir.join("root.ext4"), dir.join("disk.raw"));
    run(Command::new("mkfs.vfat")
        .args(["-C", "-n", "EFI"])
        .arg(&esp)
        .arg("8192"));
    run(Command::new("mkfs.ext4")
        .args(["-q", "-F", "-L", "root", "-d"])
        .arg(&root)
        .arg(&ext)
        .arg("32M"));
    run(Command::new("truncate").args(["-s", "48M"]).arg(&raw));
    run(Command::new("sgdisk")
        .args(["-n", "1:1M:+8M", "-t", "1:EF00", "-c", "1:EFI"])
        .args(["-n", "2:9M:+32M", "-t", "2:8300", "-c", "2:root"])
        .arg(&raw));
    for (f, seek) in [(&esp, "1"), (&ext, "9")] {
        run(Command::new("dd")
            .arg(format!("if={}", f.display()))
            .arg(format!("of={}", raw.display()))
            .args([
                "bs=1M",
                &format!("seek={seek}"),
                "conv=notrunc",
                "status=none",
            ]));
    }
    let q = dir.join("tiny.qcow2");
    run(Command::new("qemu-img")
        .args(["convert", "-f", "raw", "-O", "qcow2"])
        .arg(&raw)
        .arg(&q));
    q
}

#[test]
fn tiny_gpt_disk_mounts_its_root_by_auto_number_and_label() {
    let _baton = crate::common::baton(module_path!());
    common::require_root();
    let dir = tempfile::Builder::new()
        .prefix("netprobe-part-")
        .tempdir()
        .unwrap();
    let q = tiny_disk(dir.path());
    let export = dir.path().join("export.raw");
    let qsd = qsd_start(
        &q,
        &export,
        &dir.path().join("qsd.pid"),
        &dir.path().join("qsd.log"),
    )
    .unwrap();
    let parts = partition::partitions(&export).unwrap();
    assert_eq!(
        parts
            .iter()
            .map(|p| (p.number, p.name.as_str()))
            .collect::<Vec<_>>(),
        vec![(1, "EFI"), (2, "root")]
    );
    assert_eq!(parts[1].start, 9 << 20);
    let lower = dir.path().join("lower");
    std::fs::create_dir(&lower).unwrap();
    for sel in [
        Partition::Auto,
        Partition::Number(2),
        Partition::Label("root".into()),
    ] {
        let (lg, part) = loop_attach_partition(&export, &sel).unwrap();
        assert_eq!(part.as_ref().map(|p| p.number), Some(2), "{sel:?}");
        assert_eq!(
            mounts::loop_backing_file(&lg.device).as_deref(),
            Some(export.as_path())
        );
        let (mg, fstype) = mount_ro(&lg.device, &lower).unwrap();
        assert_eq!(fstype, "ext4");
        assert_eq!(
            std::fs::read_to_string(lower.join("etc/os-release")).unwrap(),
            "ID=netprobe-tiny\n"
        );
        assert!(
            std::fs::write(lower.join("x"), b"").is_err(),
            "mounted read-only"
        );
        drop(mg);
        drop(lg);
    }
    // The EFI partition by number is a FAT filesystem, not the root (this kernel has no vfat
    // driver, so it is probed, not mounted).
    let (lg, part) = loop_attach_partition(&export, &Partition::Number(1)).unwrap();
    assert_eq!(part.unwrap().name, "EFI");
    assert_eq!(
        partition::probe_fstype(&lg.device, 0).as_deref(),
        Some("vfat")
    );
    drop(lg);
    let e = loop_attach_partition(&export, &Partition::Label("nope".into()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("image.partition") && e.contains("2 (name \"root\", 32 MiB, ext4)"),
        "{e}"
    );
    assert!(mounts::loops_backed_by(&export).is_empty(), "no loop left");
    drop(qsd);
    assert!(!mounts::is_mounted(&export), "FUSE export released");
}

#[test]
fn desktop_guest_image_mounts_its_ext4_root() {
    let _baton = crate::common::baton(module_path!());
    common::require_root();
    let img = common::desktop_image();
    let dir = tempfile::Builder::new()
        .prefix("netprobe-part-desk-")
        .tempdir()
        .unwrap();
    let export = dir.path().join("export.raw");
    let qsd = qsd_start(
        &img.qcow2,
        &export,
        &dir.path().join("qsd.pid"),
        &dir.path().join("qsd.log"),
    )
    .unwrap();
    let lower = dir.path().join("lower");
    std::fs::create_dir(&lower).unwrap();
    let lg = loop_attach(&export).unwrap();
    let (mg, fstype) = mount_ro(&lg.device, &lower).unwrap();
    assert_eq!(fstype, "ext4");
    let os = std::fs::read_to_string(lower.join("etc/os-release")).unwrap();
    assert!(os.contains("VERSION_CODENAME=bookworm"), "{os}");
    assert!(lower.join("opt/netprobe/supervisor.py").is_file());
    assert!(
        lower
            .join("usr/lib/xorg/modules/drivers/dummy_drv.so")
            .is_file()
    );
    drop(mg);
    drop(lg);
    drop(qsd);
    assert!(!mounts::is_mounted(&export));
}

/// `losetup -d` of a device someone still holds open only marks it for detach (autoclear):
/// `loop_detach` returns once the device is really gone, so "no loop left" is true when a guard
/// was dropped.
#[test]
fn a_deferred_loop_detach_is_waited_for() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("blob");
    std::fs::write(&f, vec![0u8; 1 << 20]).unwrap();
    let out = Command::new("losetup")
        .args(["--find", "--show", "--read-only"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dev = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().to_string());
    let held = std::fs::File::open(&dev).unwrap();
    let release = std::thread::spawn(move || {
        // Longer than losetup's own retries on a busy device.
        std::thread::sleep(std::time::Duration::from_millis(1500));
        drop(held);
    });
    let t = std::time::Instant::now();
    let r = mounts::loop_detach(&dev, Some(&f));
    // Looked at the moment loop_detach returned, before the holder thread is joined.
    let (attached, waited) = (mounts::loop_backing_file(&dev), t.elapsed());
    release.join().unwrap();
    assert!(r.is_ok(), "{r:?}");
    assert!(
        attached.is_none(),
        "{} still attached when loop_detach returned",
        dev.display()
    );
    assert!(
        waited >= std::time::Duration::from_millis(1400),
        "waited for the close"
    );
    assert!(mounts::loops_backed_by(&f).is_empty());
}
