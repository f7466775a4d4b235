//! Today's pins for real (root; installed by host/setup.sh → host/install-pins.sh): crun 1.28 +
//! CRIU 4.3 ends `runtime-preserves-netns` with the oci rung passing on its own evidence; runc
//! 1.4.3 + CRIU 4.3 ends `runtime-empty-ns`; the runtime reaches the requested CRIU through its
//! PATH and the rung fails when CRIU's own log names another; runc 1.1.5 keeps working; an
//! unknown runtime and a runtime whose loader or library is missing are refused with exit 3.

use crate::common;
use common::cli::{netprobe, text};
use netprobe::evidence::result::{RunResult, RungName, Status, VerdictCode};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const CRIU_4_3: &str = "/opt/criu-4.3/sbin/criu";
const CRIU_4_2: &str = "/opt/criu-4.2.1/sbin/criu";
const RUNC_1_4: &str = "/opt/runc-1.4.3/sbin/runc";
const CRUN: &str = "/opt/crun-1.28/bin/crun";

fn require_pins() {
    crate::common::require_root();
    for b in [CRIU_4_3, CRIU_4_2, RUNC_1_4, CRUN] {
        assert!(
            Path::new(b).is_file(),
            "{b} is missing: run sudo bash host/setup.sh"
        );
    }
}

fn read_result(dir: &Path) -> RunResult {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("netprobe-result.json")).unwrap()).unwrap();
    netprobe::evidence::validate_result(&v).expect("result validates against the schema");
    serde_json::from_value(v).unwrap()
}

fn run(runtime: &str, criu: &str, ev: &Path, expect: &str) -> (Output, RunResult) {
    let o = netprobe(&[
        "run",
        "--runtime",
        runtime,
        "--criu",
        criu,
        "--evidence",
        ev.to_str().unwrap(),
        "--expect",
        expect,
    ]);
    let r = read_result(ev);
    (o, r)
}

fn rung(r: &RunResult, name: RungName) -> &netprobe::evidence::result::RungResult {
    r.rungs.iter().find(|x| x.name == name).unwrap()
}

fn assertion_passed(r: &RunResult, name: RungName, id: &str) -> bool {
    rung(r, name)
        .assertions
        .iter()
        .find(|a| a.id == id)
        .unwrap_or_else(|| panic!("{name}/{id} missing"))
        .passed
}

/// The pid facts of the runtime rungs are gone (no container, no restored sleep left).
fn assert_containers_gone(r: &RunResult) {
    for name in [RungName::Oci, RungName::ExternalNetns] {
        for k in ["container_pid_before", "container_pid_after"] {
            if let Some(pid) = rung(r, name).facts.get(k).and_then(|v| v.as_i64()) {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                assert!(!stat.contains("(sleep)"), "{name} {k} {pid} still runs");
            }
        }
    }
}

/// No cgroup named after one of the run's containers is left in any hierarchy, cgroup2
/// included (CRIU's default cgroup mode once recreated the whole cgroup2 tree at each crun
/// restore).
fn assert_no_cgroup_left(r: &RunResult) {
    let ids: Vec<String> = [RungName::Oci, RungName::ExternalNetns]
        .iter()
        .filter_map(|n| rung(r, *n).facts.get("container_id"))
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    assert_eq!(ids.len(), 2);
    for h in std::fs::read_dir("/sys/fs/cgroup").unwrap() {
        let h = h.unwrap().path();
        let out = Command::new("find")
            .arg(&h)
            .args(["-maxdepth", "4", "-type", "d"])
            .output()
            .unwrap();
        let listing = String::from_utf8_lossy(&out.stdout);
        for id in &ids {
            assert!(
                !listing.contains(id.as_str()),
                "cgroup of {id} left in {}",
                h.display()
            );
        }
    }
}

#[test]
fn crun_with_criu_4_3_preserves_the_netns_on_its_own_evidence() {
    let _baton = crate::common::baton(module_path!());
    require_pins();
    let tmp = tempfile::tempdir().unwrap();
    let ev = tmp.path().join("crun");
    let (o, r) = run(CRUN, CRIU_4_3, &ev, "runtime-preserves-netns");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(r.verdict.code, VerdictCode::RuntimePreservesNetns);
    let oci = rung(&r, RungName::Oci);
    assert_eq!(oci.status, Status::Pass, "{oci:?}");
    for id in [
        "state-preserved",
        "netns-image",
        "netdev-image",
        "ifaddr-image",
        "link-dumped-after-netns",
    ] {
        assert!(assertion_passed(&r, RungName::Oci, id), "oci/{id}");
        assert!(
            r.verdict.rests_on.contains(&format!("oci/{id}")),
            "verdict rests on oci/{id}: {:?}",
            r.verdict.rests_on
        );
    }
    // The runc signature does not hold for crun.
    assert!(!assertion_passed(&r, RungName::Oci, "no-netns-image"));
    assert_eq!(oci.facts["runtime_kind"], "crun");
    assert_eq!(oci.facts["state_byte_equal"], true);
    for name in [RungName::Oci, RungName::ExternalNetns] {
        let f = &rung(&r, name).facts;
        assert_eq!(f["criu_version_dump_log"], "4.3", "{name}");
        assert_eq!(f["criu_version_restore_log"], "4.3", "{name}");
    }
    // Images of the netns itself are in the evidence.
    let images: Vec<String> = std::fs::read_dir(ev.join("oci/images"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for p in ["netns-", "netdev-", "ifaddr-"] {
        assert!(images.iter().any(|i| i.starts_with(p)), "{p}*: {images:?}");
    }
    // The host quirks netprobe handled are declared, and the pin difference too.
    let d = r.declared_differences.join("\n");
    assert!(d.contains("/sys/fs/cgroup/unified detached"), "{d}");
    assert!(d.contains("--cgroup-manager=cgroupfs"), "{d}");
    assert!(d.contains(".empty-directory"), "{d}");
    assert!(d.contains("is crun 1.28"), "{d}");
    // Nothing of crun's private mount namespace shows on the host.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        mounts.contains(" /sys/fs/cgroup/unified "),
        "the host's cgroup2 mount must stay"
    );
    assert!(!mounts.contains(" /run/crun "), "{mounts}");
    assert_containers_gone(&r);
    assert_no_cgroup_left(&r);
    assert!(d.contains("--manage-cgroups-mode=ignore"), "{d}");
    // verify re-runs the assertions on the preserved logs and agrees.
    let v = netprobe(&["verify", ev.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(0), "{}", text(&v));
}

#[test]
fn runc_1_4_3_with_criu_4_3_is_runtime_empty_ns_through_path() {
    let _baton = crate::common::baton(module_path!());
    require_pins();
    let tmp = tempfile::tempdir().unwrap();
    let ev = tmp.path().join("runc");
    let (o, r) = run(RUNC_1_4, CRIU_4_3, &ev, "runtime-empty-ns");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(r.verdict.code, VerdictCode::RuntimeEmptyNs);
    let oci = rung(&r, RungName::Oci);
    assert_eq!(oci.facts["runtime_kind"], "runc");
    assert_eq!(oci.facts["criu_version_dump_log"], "4.3");
    assert_eq!(oci.facts["criu_version_restore_log"], "4.3");
    // Never --criu (runc 1.4 removed it): the runtime's argv has none.
    let ck = std::fs::read_to_string(ev.join("oci/runtime-checkpoint.json")).unwrap();
    assert!(!ck.contains("--criu"), "{ck}");
    let d = r.declared_differences.join("\n");
    assert!(d.contains("is runc 1.4.3+ds1"), "{d}");
    assert!(d.contains("not the pinned runc 1.5.2"), "{d}");
    assert!(!d.contains("crun runs"), "{d}");
    assert_containers_gone(&r);
}

#[test]
fn runc_1_1_5_follows_the_requested_criu_too() {
    let _baton = crate::common::baton(module_path!());
    require_pins();
    let runc = netprobe::host::find_in_path(Path::new("runc")).expect("runc in PATH");
    let tmp = tempfile::tempdir().unwrap();
    let ev = tmp.path().join("old");
    let o = netprobe(&[
        "run",
        "--phases",
        "kernel,criu,oci",
        "--runtime",
        runc.to_str().unwrap(),
        "--criu",
        CRIU_4_2,
        "--evidence",
        ev.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = read_result(&ev);
    let oci = rung(&r, RungName::Oci);
    assert_eq!(oci.status, Status::Fail, "runc empties the netns");
    assert_eq!(oci.facts["criu_version_dump_log"], "4.2.1");
    assert_eq!(oci.facts["criu_version_restore_log"], "4.2.1");
}

/// A "CRIU" that says it is 4.3 but runs 4.2.1 for the runtime: the rung must not pass.
fn lying_criu(dir: &Path) -> PathBuf {
    let p = dir.join("criu");
    netprobe::evidence::fsio::write_executable(&p,
        format!(
            "#!/bin/sh\ncase \"$1\" in --version|check) exec {CRIU_4_3} \"$@\";; esac\nexec {CRIU_4_2} \"$@\"\n"
        ), 0o755).unwrap();
    p
}

#[test]
fn a_rung_whose_log_names_another_criu_fails_closed() {
    let _baton = crate::common::baton(module_path!());
    require_pins();
    let tmp = tempfile::tempdir().unwrap();
    let criu = lying_criu(tmp.path());
    let ev = tmp.path().join("ev");
    let o = netprobe(&[
        "run",
        "--phases",
        "kernel,criu,oci",
        "--runtime",
        CRUN,
        "--criu",
        criu.to_str().unwrap(),
        "--evidence",
        ev.to_str().unwrap(),
    ]);
    let r = read_result(&ev);
    let oci = rung(&r, RungName::Oci);
    assert_eq!(oci.status, Status::Error, "{}", text(&o));
    let err = oci.error.as_deref().unwrap_or("");
    assert!(err.contains("criu identity"), "{err}");
    // Only what was proven: the CRIU first in the runtime's PATH said 4.3, its log says 4.2.1.
    assert!(
        err.contains(&format!(
            "the CRIU first in the runtime's PATH, {}, reports CRIU 4.3 (--version), but the CRIU that ran says 4.2.1 in its own log",
            criu.display()
        )),
        "{err}"
    );
    assert!(
        !err.contains("did not use the CRIU first in its PATH"),
        "{err}"
    );
    assert_ne!(r.verdict.code, VerdictCode::RuntimePreservesNetns);
    assert_containers_gone(&r);
}

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    netprobe::evidence::fsio::write_executable(&p, body, 0o755).unwrap();
    p
}

fn refused(runtime: &Path) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let ev = tmp.path().join("ev");
    let o = netprobe(&[
        "run",
        "--runtime",
        runtime.to_str().unwrap(),
        "--criu",
        CRIU_4_3,
        "--evidence",
        ev.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(!ev.exists(), "a refused run writes no evidence folder");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn unknown_runtime_is_refused_with_exit_3() {
    let _baton = crate::common::baton(module_path!());
    require_pins();
    let tmp = tempfile::tempdir().unwrap();
    let youki = script(
        tmp.path(),
        "youki",
        "#!/bin/sh\necho 'youki version 0.7.0'\necho 'commit: 0'\n",
    );
    let err = refused(&youki);
    assert!(err.contains("runc or crun"), "{err}");
    assert!(err.contains("youki"), "{err}");
}

#[test]
fn missing_loader_and_library_are_named_with_exit_3() {
    let _baton = crate::common::baton(module_path!());
    require_pins();
    let tmp = tempfile::tempdir().unwrap();
    let patchelf = |args: &[&str]| {
        let o = Command::new("patchelf")
            .args(args)
            .output()
            .expect("patchelf (host/setup.sh)");
        assert!(o.status.success(), "{}", text(&o));
    };
    let no_loader = tmp.path().join("runc-no-loader");
    std::fs::copy(RUNC_1_4, &no_loader).unwrap();
    patchelf(&[
        "--set-interpreter",
        "/nonexistent-netprobe/ld-linux-x86-64.so.2",
        no_loader.to_str().unwrap(),
    ]);
    let err = refused(&no_loader);
    assert!(
        err.contains("loader) /nonexistent-netprobe/ld-linux-x86-64.so.2 is missing"),
        "{err}"
    );

    let no_lib = tmp.path().join("runc-no-lib");
    std::fs::copy(RUNC_1_4, &no_lib).unwrap();
    patchelf(&[
        "--replace-needed",
        "libseccomp.so.2",
        "libnetprobe-test-missing.so.9",
        no_lib.to_str().unwrap(),
    ]);
    let err = refused(&no_lib);
    assert!(
        err.contains("shared library libnetprobe-test-missing.so.9 is missing"),
        "{err}"
    );
}

#[test]
fn parsers_for_the_evidence() {
    let _baton = crate::common::baton(module_path!());
    use netprobe::oci::RuntimeKind;
    assert_eq!(
        RuntimeKind::from_version_output("runc version 1.4.3+ds1\ncommit: x\n"),
        Some(RuntimeKind::Runc)
    );
    assert_eq!(
        RuntimeKind::from_version_output("crun version 1.28\ncommit: x\n+CRIU\n"),
        Some(RuntimeKind::Crun)
    );
    assert_eq!(
        RuntimeKind::from_version_output("youki version 0.7.0"),
        None
    );
    assert_eq!(
        netprobe::probe::runtime_cycle::criu_version_in_log(
            "(00.000000) CRIU run id = x\n(00.000070) Version: 4.3 (gitid 0)\n"
        )
        .as_deref(),
        Some("4.3")
    );
    assert_eq!(
        netprobe::probe::runtime_cycle::criu_version_in_log("(00.0) nothing\n"),
        None
    );
    assert_eq!(
        netprobe::host::missing_library(
            "runc: error while loading shared libraries: libseccomp.so.2: cannot open shared object file: No such file or directory\n"
        )
        .as_deref(),
        Some("libseccomp.so.2")
    );
    assert!(netprobe::oci::crun_quirks(RuntimeKind::Runc, true).is_empty());
    assert_eq!(
        netprobe::oci::crun_quirks(RuntimeKind::Crun, false).len(),
        2
    );
    assert_eq!(netprobe::oci::crun_quirks(RuntimeKind::Crun, true).len(), 3);
}

#[test]
fn defaults_follow_the_pins() {
    let _baton = crate::common::baton(module_path!());
    require_pins();
    // The newest /opt/runc-<version>/sbin/runc wins, by numeric components.
    let tmp = tempfile::tempdir().unwrap();
    for v in ["1.3.6", "1.10.0", "1.4.3", "notaversion"] {
        let d = tmp.path().join(format!("runc-{v}/sbin"));
        std::fs::create_dir_all(&d).unwrap();
        script(&d, "runc", "#!/bin/sh\n");
    }
    std::fs::create_dir_all(tmp.path().join("runc-2.0.0/sbin")).unwrap(); // no binary
    assert_eq!(
        netprobe::host::newest_runc_under(tmp.path()),
        Some(tmp.path().join("runc-1.10.0/sbin/runc"))
    );
    assert_eq!(
        netprobe::host::pinned_default_criu(),
        PathBuf::from(CRIU_4_3)
    );
    let newest = netprobe::host::pinned_default_runtime();
    assert_eq!(
        Some(newest.clone()),
        netprobe::host::newest_runc_under(Path::new("/opt"))
    );

    // `netprobe run` without --runtime/--criu uses that pair and declares the runc pin mismatch.
    let ev = tmp.path().join("ev");
    let o = netprobe(&[
        "run",
        "--phases",
        "kernel,criu,oci",
        "--evidence",
        ev.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = read_result(&ev);
    let host = &r.host;
    assert_eq!(host.criu.as_ref().unwrap().path, CRIU_4_3);
    assert_eq!(
        host.runtime.as_ref().unwrap().path,
        newest.display().to_string()
    );
    let version = &host.runtime.as_ref().unwrap().version;
    if version != "1.5.2" {
        let d = r.declared_differences.join("\n");
        assert!(
            d.contains(&format!("is runc {version}")) && d.contains("not the pinned runc 1.5.2"),
            "{d}"
        );
        assert!(String::from_utf8_lossy(&o.stdout).contains("not the pinned runc 1.5.2"));
    }
    assert!(
        !r.declared_differences
            .iter()
            .any(|d| d.contains("not the pinned CRIU"))
    );
}

#[test]
fn crun_checkpoint_and_restore_leave_cgroups_to_crun() {
    let _baton = crate::common::baton(module_path!());
    use netprobe::oci::RuntimeKind;
    assert_eq!(
        RuntimeKind::Crun.checkpoint_restore_args(),
        &["--manage-cgroups-mode=ignore"]
    );
    assert!(RuntimeKind::Runc.checkpoint_restore_args().is_empty());
}
