//! Words that match the case (issue: a hostile trial's wording findings), each through the
//! real binary on a real input: exit code and the exact sentence.
use std::path::Path;
use std::process::Command;

use crate::common::EXE;

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(EXE).args(args).output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `netprobe cgroup --driver systemd` where systemd is not pid 1 (this host, CI): exit 3, and
/// the way out names `cgroup`'s own flag.
#[test]
fn cgroup_refusal_names_its_own_flag() {
    let _baton = crate::common::baton(module_path!());
    assert!(
        !Path::new("/run/systemd/system").exists(),
        "this test needs a host where systemd is not pid 1 (the CI container)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let ev = tmp.path().join("ev");
    let (code, _, err) = run(&[
        "cgroup",
        "--driver",
        "systemd",
        "--evidence",
        ev.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("use the cgroupfs driver (`netprobe cgroup --driver cgroupfs`; `slot provision --cgroup-driver cgroupfs`, or `cgroup_driver = \"cgroupfs\"` in a slot profile) or leave the driver unset for the default"),
        "{err}"
    );
    assert!(!ev.exists() || std::fs::read_dir(&ev).unwrap().count() <= 1);
}

/// A `netdev-9.img` whose entry has a key of wire type 6 at its third byte: `netprobe images`
/// exits 2 naming that byte's offset in the file, not the entry's start.
#[test]
fn a_protobuf_wire_type_error_names_the_bad_byte() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let mut img = Vec::new();
    img.extend_from_slice(&0x5456_4319u32.to_ne_bytes()); // IMG_COMMON_MAGIC
    img.extend_from_slice(&0x5737_3951u32.to_ne_bytes()); // NETDEV_MAGIC
    let entry = [0x08u8, 0x01, 0x0e, 0x00];
    img.extend_from_slice(&(entry.len() as u32).to_ne_bytes());
    img.extend_from_slice(&entry);
    std::fs::write(tmp.path().join("netdev-9.img"), &img).unwrap();
    let (code, _, err) = run(&["images", tmp.path().to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("netdev-9.img: offset 14: protobuf:"), "{err}");
}

/// A CRIU whose `criu check` fails: the refusal (exit 3) quotes its output and guesses nothing.
#[test]
fn a_failing_criu_check_is_quoted_not_guessed() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let criu = tmp.path().join("criu");
    std::fs::write(
        &criu,
        "#!/bin/sh\ncase \"$1\" in\n--version) echo 'Version: 4.3'; exit 0;;\ncheck) echo 'Error (criu/cr-check.c:1): seccomp filter is off in this test' >&2; exit 1;;\nesac\nexit 2\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&criu, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ev = tmp.path().join("ev");
    let (code, _, err) = run(&[
        "run",
        "--phases",
        "kernel",
        "--criu",
        criu.to_str().unwrap(),
        "--evidence",
        ev.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains(&format!(
            "criu check failed for {} (exit code 1); its output: Error (criu/cr-check.c:1): seccomp filter is off in this test (`{} check -v4` lists every check)",
            criu.display(),
            criu.display()
        )),
        "{err}"
    );
    assert!(!err.contains("cannot checkpoint on this kernel"), "{err}");
}
