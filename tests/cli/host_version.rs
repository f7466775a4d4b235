//! Version parsing, binary_facts errors, pins, cgroup mode and os-release parsing.
//! Runs without root.

use netprobe::criu::parse_criu_version;
use netprobe::evidence::result::{BinaryFacts, HostFacts};
use netprobe::host::facts::{cgroup_mode_from, pretty_name};
use netprobe::host::pins::{short_sha, thousands};
use netprobe::host::{
    BinaryKind, HostError, binary_facts, check_pins, parse_runtime_version, pin_differences,
    pin_differences_with_paths, pins,
};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

#[test]
fn criu_version_lines() {
    let _baton = crate::common::baton(module_path!());
    assert_eq!(parse_criu_version("Version: 4.1.1\n"), Some("4.1.1".into()));
    assert_eq!(
        parse_criu_version("Version: 3.17.1\nGitID: v3.17.1\n"),
        Some("3.17.1".into())
    );
    assert_eq!(
        parse_criu_version("  Version:   4.3  \n"),
        Some("4.3".into())
    );
    assert_eq!(parse_criu_version(""), None);
    assert_eq!(parse_criu_version("Version: \n"), None);
    assert_eq!(parse_criu_version("runc version 1.1.5\n"), None);
}

#[test]
fn runtime_version_lines() {
    let _baton = crate::common::baton(module_path!());
    let runc = "runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev\ngo: go1.19.8\nlibseccomp: 2.5.4\n";
    assert_eq!(
        parse_runtime_version(runc),
        Some(("runc".into(), "1.1.5+ds1".into()))
    );
    let runc152 = "runc version 1.5.2\ncommit: v1.5.2-0-g29dd3dc\nspec: 1.3.0\ngo: go1.26.8\n";
    assert_eq!(
        parse_runtime_version(runc152),
        Some(("runc".into(), "1.5.2".into()))
    );
    let crun = "crun version 1.8.1\ncommit: f8a096be060b22ccd3d5f3ebe44108517fbf6c30\nrundir: /run/crun\nspec: 1.0.0\n+SYSTEMD +SELINUX +APPARMOR +CAP +SECCOMP +EBPF +YAJL\n";
    assert_eq!(
        parse_runtime_version(crun),
        Some(("crun".into(), "1.8.1".into()))
    );
    assert_eq!(parse_runtime_version(""), None);
    assert_eq!(parse_runtime_version("Version: 4.1.1\n"), None);
    assert_eq!(
        parse_runtime_version("GNU bash, version 5.2.15(1)-release\n"),
        None
    );
    assert_eq!(parse_runtime_version("runc version\n"), None);
    assert_eq!(parse_runtime_version("Runc version 1.0\n"), None);
}

#[test]
fn missing_path_is_not_found() {
    let _baton = crate::common::baton(module_path!());
    let e = binary_facts(
        Path::new("/nonexistent/netprobe-test/runc"),
        BinaryKind::Runtime,
    )
    .unwrap_err();
    assert!(matches!(e, HostError::NotFound { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("/nonexistent/netprobe-test/runc"), "{msg}");
    assert!(msg.contains("host/setup.sh"), "{msg}");

    let e = binary_facts(Path::new("netprobe-no-such-binary-xyz"), BinaryKind::Criu).unwrap_err();
    assert!(matches!(e, HostError::NotFound { .. }), "{e:?}");
    assert!(e.to_string().contains("$PATH"), "{e}");
}

#[test]
fn non_executable_file_is_refused() {
    let _baton = crate::common::baton(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("runc");
    std::fs::write(&f, "#!/bin/sh\necho runc version 1.0.0\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = binary_facts(&f, BinaryKind::Runtime).unwrap_err();
    assert!(matches!(e, HostError::NotExecutable { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("chmod +x"), "{msg}");
    assert!(msg.contains(&f.display().to_string()), "{msg}");
}

/// A file that is no program (`/etc/passwd`, also a data file with execute bits) is refused as
/// such; the message never advises `chmod +x`.
#[test]
fn a_file_that_is_no_program_is_not_advised_chmod() {
    let _baton = crate::common::baton(module_path!());
    let e = binary_facts(Path::new("/etc/passwd"), BinaryKind::Runtime).unwrap_err();
    assert!(matches!(e, HostError::NotAProgram { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(!msg.contains("chmod"), "{msg}");
    assert!(msg.contains("is not an executable program"), "{msg}");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("criu");
    netprobe::evidence::fsio::write_executable(&f, "just text\n", 0o755).unwrap();
    let e = binary_facts(&f, BinaryKind::Criu).unwrap_err();
    assert!(matches!(e, HostError::NotAProgram { .. }), "{e:?}");
}

#[test]
fn directory_is_not_a_regular_file() {
    let _baton = crate::common::baton(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let e = binary_facts(dir.path(), BinaryKind::Criu).unwrap_err();
    assert!(matches!(e, HostError::NotRegularFile { .. }), "{e:?}");
}

#[test]
fn bin_true_is_not_an_oci_runtime() {
    let _baton = crate::common::baton(module_path!());
    let e = binary_facts(Path::new("/bin/true"), BinaryKind::Runtime).unwrap_err();
    assert!(matches!(e, HostError::NotRecognised { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("/bin/true does not look like an OCI runtime (its --version printed: "),
        "{msg}"
    );
    let e = binary_facts(Path::new("/bin/true"), BinaryKind::Criu).unwrap_err();
    assert!(e.to_string().contains("does not look like a CRIU"), "{e}");
}

#[test]
fn real_binaries_when_installed() {
    let _baton = crate::common::baton(module_path!());
    // Facts about the installed runc / CRIU, when present (skipped otherwise).
    if Path::new("/usr/bin/runc").exists() {
        let f = binary_facts(Path::new("/usr/bin/runc"), BinaryKind::Runtime).unwrap();
        assert!(f.version.starts_with(|c: char| c.is_ascii_digit()), "{f:?}");
        assert_eq!(f.sha256.len(), 64);
        assert!(f.bytes > 0);
    }
    let criu = netprobe::host::default_criu();
    if criu.is_absolute() {
        let f = binary_facts(&criu, BinaryKind::Criu).unwrap();
        assert!(f.version_output.contains("Version:"), "{f:?}");
    }
}

fn facts(path: &str, version: &str, out: &str, sha: &str, bytes: u64) -> BinaryFacts {
    BinaryFacts {
        path: path.into(),
        version: version.into(),
        version_output: out.into(),
        sha256: sha.into(),
        bytes,
        script_interpreter: None,
        installed_sha256: None,
    }
}

#[test]
fn pins_match_and_mismatch() {
    let _baton = crate::common::baton(module_path!());
    let p = pins();
    let pinned_runc = facts(
        "/opt/runc/runc-1.5.2",
        "1.5.2",
        "runc version 1.5.2\n",
        p.runtime.sha256.as_deref().unwrap(),
        p.runtime.bytes.unwrap(),
    );
    let pinned_criu = facts(
        "/opt/criu/sbin/criu",
        "4.3",
        "Version: 4.3\n",
        "ab".repeat(32).as_str(),
        1234,
    );
    // A CRIU pin names no sha256: `--version` alone never matches it (a script can print it).
    assert!(!check_pins(&pinned_criu, None)[0].matches);
    let mut other_install = pinned_criu.clone();
    other_install.installed_sha256 = Some("cd".repeat(32));
    assert!(!check_pins(&other_install, None)[0].matches);
    // Set-up recorded these bytes for this path: matched.
    let mut pinned_criu = pinned_criu;
    pinned_criu.installed_sha256 = Some("ab".repeat(32));
    let checks = check_pins(&pinned_criu, Some(&pinned_runc));
    assert_eq!(checks.len(), 2);
    assert!(checks.iter().all(|c| c.matches), "{checks:?}");
    assert!(pin_differences(&checks).is_empty());

    // Same version, wrong size: not a match.
    let mut near = pinned_runc.clone();
    near.bytes += 1;
    assert!(!check_pins(&pinned_criu, Some(&near))[1].matches);

    let old_runc = facts(
        "/usr/bin/runc",
        "1.1.5+ds1",
        "runc version 1.1.5+ds1\ncommit: x\n",
        &format!("1a2b{}", "0".repeat(60)),
        9999,
    );
    let old_criu = facts(
        "/opt/criu-4.1.1/sbin/criu",
        "4.1.1",
        "Version: 4.1.1\n",
        &format!("cdef{}", "0".repeat(60)),
        2_500_000,
    );
    let checks = check_pins(&old_criu, Some(&old_runc));
    assert_eq!(checks[0].name, "criu");
    assert_eq!(checks[1].name, "runtime");
    assert!(!checks[0].matches && !checks[1].matches);
    let host = HostFacts {
        kernel_release: "6.18".into(),
        kernel_version: "#1".into(),
        machine: "x86_64".into(),
        os: None,
        cgroup: "v1".into(),
        criu: Some(old_criu.clone()),
        runtime: Some(old_runc.clone()),
    };
    let s = pin_differences_with_paths(&checks, &host);
    assert_eq!(
        s,
        vec![
            "criu /opt/criu-4.1.1/sbin/criu is CRIU 4.1.1 (sha256 cdef…, 2,500,000 bytes), not the pinned CRIU 4.3".to_string(),
            "runtime /usr/bin/runc is runc 1.1.5+ds1 (sha256 1a2b…, 9,999 bytes), not the pinned runc 1.5.2 (sha256 599f…, 10,866,512 bytes)".to_string(),
        ]
    );
    let s = pin_differences(&checks);
    assert_eq!(
        s[1],
        "runtime is version 1.1.5+ds1 (sha256 1a2b…, 9,999 bytes), not the pinned runc 1.5.2 (sha256 599f…, 10,866,512 bytes)"
    );
    // No runtime: only the CRIU check.
    assert_eq!(check_pins(&old_criu, None).len(), 1);
}

#[test]
fn number_and_hash_formatting() {
    let _baton = crate::common::baton(module_path!());
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(9999), "9,999");
    assert_eq!(thousands(10_866_512), "10,866,512");
    assert_eq!(short_sha("599f6f94"), "599f…");
}

#[test]
fn cgroup_modes() {
    let _baton = crate::common::baton(module_path!());
    let v1 = "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n";
    let hybrid = format!("{v1}cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n");
    assert_eq!(cgroup_mode_from(false, v1), "v1");
    assert_eq!(cgroup_mode_from(false, &hybrid), "hybrid");
    assert_eq!(cgroup_mode_from(true, &hybrid), "v2");
    assert_eq!(
        cgroup_mode_from(false, "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"),
        "v2"
    );
}

#[test]
fn os_release_pretty_name() {
    let _baton = crate::common::baton(module_path!());
    let t =
        "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n";
    assert_eq!(
        pretty_name(t).as_deref(),
        Some("Debian GNU/Linux 12 (bookworm)")
    );
    assert_eq!(
        pretty_name("PRETTY_NAME=Alpine\n").as_deref(),
        Some("Alpine")
    );
    assert_eq!(pretty_name("ID=x\n"), None);
}

#[test]
fn host_facts_here() {
    let _baton = crate::common::baton(module_path!());
    let h = netprobe::host::host_facts(None, None);
    assert!(!h.kernel_release.is_empty());
    assert!(!h.machine.is_empty());
    assert!(["v1", "v2", "hybrid"].contains(&h.cgroup.as_str()), "{h:?}");
}
