//! `doctor` over the real host: every prerequisite is listed with a fix for each missing one.

use netprobe::host::{default_criu, default_runtime, doctor, doctor_ok};

#[test]
fn doctor_lists_every_prerequisite() {
    let _baton = crate::common::baton(module_path!());
    let p = doctor(&default_criu(), &default_runtime());
    let names: Vec<&str> = p.iter().map(|x| x.name.as_str()).collect();
    for n in [
        "root",
        "criu",
        "criu check",
        "no CRIU config file",
        "iptables-restore",
        "nft",
        "runtime",
        "busybox static",
        "ip",
        "unshare",
        "nsenter",
        "strace",
        "cgroup",
        "/dev/fuse",
        "losetup",
        "qemu-storage-daemon",
        "mkfs.ext4",
        "qemu-img",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    for x in &p {
        eprintln!(
            "{:22} required={} found={} {} {}",
            x.name, x.required, x.found, x.detail, x.fix
        );
        assert!(x.found || !x.fix.is_empty(), "{x:?} has no fix");
        assert!(!x.found || x.fix.is_empty(), "{x:?} found but has a fix");
    }
    let ok = doctor_ok(&p);
    assert_eq!(ok, p.iter().filter(|x| x.required).all(|x| x.found));
    // On the prepared host (root, host/setup.sh run) everything required is present.
    if crate::common::is_root() && default_criu().is_absolute() {
        assert!(ok, "{p:#?}");
    }
}

#[test]
fn doctor_reports_missing_binaries_with_fixes() {
    let _baton = crate::common::baton(module_path!());
    let p = doctor(
        std::path::Path::new("/nonexistent/criu"),
        std::path::Path::new("/bin/true"),
    );
    let criu = p.iter().find(|x| x.name == "criu").unwrap();
    assert!(
        !criu.found && criu.fix.contains("host/setup.sh"),
        "{criu:?}"
    );
    let check = p.iter().find(|x| x.name == "criu check").unwrap();
    assert!(!check.found);
    let rt = p.iter().find(|x| x.name == "runtime").unwrap();
    assert!(
        !rt.found && rt.detail.contains("does not look like an OCI runtime"),
        "{rt:?}"
    );
    assert!(!doctor_ok(&p));
}
