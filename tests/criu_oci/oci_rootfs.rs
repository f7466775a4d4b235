//! Busybox rootfs builder and rootfs check, including bad inputs.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use netprobe::oci::{
    INIT_SH, OciError, build_busybox_rootfs, build_busybox_rootfs_from, check_rootfs,
};

#[test]
fn busybox_rootfs_has_layout_applets_and_init() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("rootfs");
    build_busybox_rootfs(&root).unwrap();
    check_rootfs(&root).unwrap();

    let bb = root.join("bin/busybox");
    assert!(bb.is_file());
    assert_ne!(
        std::fs::metadata(&bb).unwrap().permissions().mode() & 0o111,
        0
    );
    for applet in [
        "sh", "sleep", "httpd", "cat", "ls", "echo", "ip", "wget", "nc",
    ] {
        let link = root.join("bin").join(applet);
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            Path::new("busybox"),
            "{applet}"
        );
    }
    for d in ["proc", "sys", "dev", "tmp", "etc", "var/www"] {
        assert!(root.join(d).is_dir(), "{d}");
    }
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap();
    assert!(passwd.starts_with("root:x:0:0:"));
    assert!(
        std::fs::read_to_string(root.join("etc/group"))
            .unwrap()
            .starts_with("root:x:0:")
    );
    assert!(root.join("var/www/index.html").is_file());
    let init = root.join("init.sh");
    assert_eq!(std::fs::read_to_string(&init).unwrap(), INIT_SH);
    assert!(INIT_SH.contains("busybox httpd -f -p 0.0.0.0:5000 -h /var/www"));
    assert_eq!(
        std::fs::metadata(&init).unwrap().permissions().mode() & 0o777,
        0o755
    );
}

#[test]
fn dynamic_busybox_is_refused() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    // /bin/ls on Debian is dynamically linked: stands in for a non-static busybox.
    let e = build_busybox_rootfs_from(&tmp.path().join("r"), Path::new("/bin/ls")).unwrap_err();
    assert!(matches!(e, OciError::BusyboxNotStatic { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("dynamically linked"), "{msg}");
    assert!(msg.contains("busybox-static"), "{msg}");
    assert!(!tmp.path().join("r").exists(), "nothing built on refusal");

    // Not ELF at all.
    let txt = tmp.path().join("notelf");
    std::fs::write(&txt, "#!/bin/sh\n").unwrap();
    let e = build_busybox_rootfs_from(&tmp.path().join("r"), &txt).unwrap_err();
    assert!(e.to_string().contains("not an ELF file"), "{e}");

    let e = build_busybox_rootfs_from(&tmp.path().join("r"), Path::new("/nonexistent/busybox"))
        .unwrap_err();
    assert!(matches!(e, OciError::BusyboxMissing { .. }), "{e}");
}

#[test]
fn non_empty_target_is_refused() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("keep.txt"), "mine").unwrap();
    let e = build_busybox_rootfs(tmp.path()).unwrap_err();
    assert!(matches!(e, OciError::RootfsDirNotEmpty { .. }), "{e}");
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("keep.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn check_rootfs_names_what_is_missing() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    let e = check_rootfs(dir).unwrap_err();
    let msg = e.to_string();
    let d = dir.display();
    assert!(
        msg.contains(&format!(
            "rootfs {d} has no sleep (looked for {d}/bin/sleep, {d}/usr/bin/sleep)"
        )),
        "{msg}"
    );
    assert!(msg.contains("omit --rootfs to use the built-in busybox rootfs"));

    // Not executable → still refused.
    std::fs::write(dir.join("bin/sleep"), "x").unwrap();
    assert!(matches!(
        check_rootfs(dir).unwrap_err(),
        OciError::RootfsNoSleep { .. }
    ));
    // An absolute symlink resolves inside the rootfs, not on the host.
    std::fs::remove_file(dir.join("bin/sleep")).unwrap();
    std::os::unix::fs::symlink("/usr/bin/sleep", dir.join("bin/sleep")).unwrap();
    assert!(
        check_rootfs(dir).is_err(),
        "host /usr/bin/sleep must not count"
    );
    std::fs::create_dir_all(dir.join("usr/bin")).unwrap();
    std::fs::copy("/bin/busybox", dir.join("usr/bin/sleep")).unwrap();
    check_rootfs(dir).unwrap();

    let e = check_rootfs(&dir.join("missing")).unwrap_err();
    assert!(matches!(e, OciError::RootfsMissing { .. }), "{e}");
    let file = dir.join("file");
    std::fs::write(&file, "").unwrap();
    let e = check_rootfs(&file).unwrap_err();
    assert!(matches!(e, OciError::RootfsNotDir { .. }), "{e}");
}
