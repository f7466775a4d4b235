//! cgroup limit read-back over fixture trees (no root needed): a unified (v2) host with a runc
//! container in a systemd scope, this machine's hybrid layout and a plain v1 host; the evidence
//! names every file read, and bad trees give typed errors.

use std::fs;
use std::path::Path;

use netprobe::cgroup::{CgroupError, CgroupHost, CgroupMode, read_limits, read_limits_at};
use netprobe::oci::Resources;

const WANT: Resources = Resources {
    cpu_quota: 400_000,
    cpu_period: 100_000,
    memory_limit: 4 << 30,
    memory_swap: 4 << 30,
};
const PID: i32 = 4242;
const SCOPE: &str = "/system.slice/netprobe-slot-0-1a2b3c4d.scope";

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn unified(swap: Option<&str>) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    write(
        r,
        "proc/self/mountinfo",
        "25 22 0:23 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
    );
    write(r, &format!("proc/{PID}/cgroup"), &format!("0::{SCOPE}\n"));
    write(
        r,
        "sys/fs/cgroup/cgroup.controllers",
        "cpuset cpu io memory hugetlb pids rdma misc\n",
    );
    let dir = format!("sys/fs/cgroup{SCOPE}");
    write(r, &format!("{dir}/cpu.max"), "400000 100000\n");
    write(r, &format!("{dir}/memory.max"), "4294967296\n");
    if let Some(s) = swap {
        write(r, &format!("{dir}/memory.swap.max"), s);
    }
    d
}

fn v1_tree(mountinfo: &str, cpu_dir: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    write(r, "proc/self/mountinfo", mountinfo);
    write(
        r,
        &format!("proc/{PID}/cgroup"),
        "9:name=systemd:/\n4:memory:/netprobe/slot-0-1a2b3c4d\n1:cpu:/netprobe/slot-0-1a2b3c4d\n0::/\n",
    );
    let c = format!("sys/fs/cgroup/{cpu_dir}/netprobe/slot-0-1a2b3c4d");
    write(r, &format!("{c}/cpu.cfs_quota_us"), "400000\n");
    write(r, &format!("{c}/cpu.cfs_period_us"), "100000\n");
    let m = "sys/fs/cgroup/memory/netprobe/slot-0-1a2b3c4d";
    write(r, &format!("{m}/memory.limit_in_bytes"), "4294967296\n");
    write(
        r,
        &format!("{m}/memory.memsw.limit_in_bytes"),
        "4294967296\n",
    );
    d
}

#[test]
fn unified_reads_v2_files_and_names_them() {
    let _baton = crate::common::baton(module_path!());
    let d = unified(Some("0\n"));
    let l = read_limits_at(d.path(), PID).unwrap();
    assert_eq!(l.mode, CgroupMode::Unified);
    assert_eq!((l.cpu_quota, l.cpu_period), (400_000, 100_000));
    assert_eq!((l.memory_limit, l.memory_swap), (4 << 30, Some(4 << 30)));
    let names: Vec<String> = l
        .files
        .iter()
        .map(|f| f.path.strip_prefix(d.path()).unwrap().display().to_string())
        .collect();
    let dir = format!("sys/fs/cgroup{SCOPE}");
    assert_eq!(
        names,
        [
            format!("proc/{PID}/cgroup"),
            format!("{dir}/cpu.max"),
            format!("{dir}/memory.max"),
            format!("{dir}/memory.swap.max")
        ]
    );
    let ok = l.check(&WANT).unwrap();
    assert!(
        ok.contains("cpu.max = \"400000 100000\"") && ok.contains("memory.swap.max = \"0\""),
        "{ok}"
    );
}

#[test]
fn unified_swap_and_unlimited() {
    let _baton = crate::common::baton(module_path!());
    // Swap allowed (max) where the config asked for none: the gate must fail.
    let d = unified(Some("max\n"));
    let l = read_limits_at(d.path(), PID).unwrap();
    assert_eq!(l.memory_swap, Some(-1));
    let e = l.check(&WANT).unwrap_err();
    assert!(e.contains("asked"), "{e}");
    // No swap accounting: the file is absent, accepted and said so.
    let d = unified(None);
    let l = read_limits_at(d.path(), PID).unwrap();
    assert_eq!(l.memory_swap, None);
    assert!(
        l.check(&WANT)
            .unwrap()
            .contains("absent (no swap accounting)")
    );
    // cpu.max "max": unlimited quota.
    write(
        d.path(),
        &format!("sys/fs/cgroup{SCOPE}/cpu.max"),
        "max 100000\n",
    );
    assert_eq!(read_limits_at(d.path(), PID).unwrap().cpu_quota, -1);
    write(d.path(), &format!("sys/fs/cgroup{SCOPE}/cpu.max"), "lots\n");
    let e = read_limits_at(d.path(), PID).unwrap_err();
    assert!(matches!(e, CgroupError::Parse { .. }), "{e}");
    assert!(e.to_string().contains("cpu.max"), "{e}");
}

#[test]
fn unified_without_memory_controller_is_refused() {
    let _baton = crate::common::baton(module_path!());
    let d = unified(Some("0\n"));
    write(
        d.path(),
        "sys/fs/cgroup/cgroup.controllers",
        "cpuset cpu io pids\n",
    );
    let e = read_limits_at(d.path(), PID).unwrap_err();
    assert!(
        matches!(&e, CgroupError::ControllersMissing { missing, .. } if missing == &["memory"]),
        "{e}"
    );
    assert_eq!(e.exit_code(), 3);
}

#[test]
fn unified_process_without_0_line() {
    let _baton = crate::common::baton(module_path!());
    let d = unified(Some("0\n"));
    write(d.path(), &format!("proc/{PID}/cgroup"), "1:cpu:/x\n");
    let e = read_limits_at(d.path(), PID).unwrap_err();
    assert!(matches!(e, CgroupError::NotInCgroup { .. }), "{e}");
    assert!(e.to_string().contains("0::"), "{e}");
}

#[test]
fn hybrid_reads_v1_files() {
    let _baton = crate::common::baton(module_path!());
    // This machine's layout: cpu and cpuacct separate, name=systemd, cgroup2 at unified.
    let mi = "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
              35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
              40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n\
              41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
    let d = v1_tree(mi, "cpu");
    let host = CgroupHost::detect(d.path()).unwrap();
    assert_eq!(host.mode, CgroupMode::Hybrid);
    let l = read_limits(&host, PID).unwrap();
    assert_eq!(
        (l.cpu_quota, l.memory_limit, l.memory_swap),
        (400_000, 4 << 30, Some(4 << 30))
    );
    let ok = l.check(&WANT).unwrap();
    for f in [
        "cpu.cfs_quota_us",
        "cpu.cfs_period_us",
        "memory.limit_in_bytes",
        "memory.memsw.limit_in_bytes",
    ] {
        assert!(ok.contains(f), "{f} not named: {ok}");
    }
}

#[test]
fn v1_combined_cpu_hierarchy_and_unlimited_memory() {
    let _baton = crate::common::baton(module_path!());
    let mi = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
              35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
    let d = v1_tree(mi, "cpu,cpuacct");
    let m = "sys/fs/cgroup/memory/netprobe/slot-0-1a2b3c4d";
    write(
        d.path(),
        &format!("{m}/memory.limit_in_bytes"),
        "9223372036854771712\n",
    );
    let l = read_limits_at(d.path(), PID).unwrap();
    assert_eq!(l.mode, CgroupMode::V1);
    assert_eq!(l.memory_limit, -1);
    assert!(l.check(&WANT).is_err());
}

#[test]
fn no_cgroups_at_all() {
    let _baton = crate::common::baton(module_path!());
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "proc/self/mountinfo",
        "22 1 0:21 / /sys rw - sysfs sysfs rw\n",
    );
    let e = read_limits_at(d.path(), PID).unwrap_err();
    assert!(matches!(e, CgroupError::NoCgroupMounts { .. }), "{e}");
    assert_eq!(e.exit_code(), 3);
}

#[test]
fn live_host_detects_hybrid_here() {
    let _baton = crate::common::baton(module_path!());
    // This machine kind is hybrid cgroup v1 (DESIGN.md §2); its own cgroup is readable.
    let h = CgroupHost::detect(Path::new("/")).unwrap();
    assert_eq!(h.mode, CgroupMode::Hybrid, "{h:?}");
    h.require_limit_controllers().unwrap();
}

#[test]
fn dirs_gone_after_cleanup() {
    let _baton = crate::common::baton(module_path!());
    let d = unified(Some("0\n"));
    let l = read_limits_at(d.path(), PID).unwrap();
    let e = l.dirs_gone().unwrap_err();
    assert!(e.contains(SCOPE), "{e}");
    fs::remove_dir_all(d.path().join(format!("sys/fs/cgroup{SCOPE}"))).unwrap();
    assert!(l.dirs_gone().unwrap().contains(SCOPE));
}

/// Hybrid, as on this machine kind: runc places the container in every hierarchy (controllers,
/// the named `name=systemd` one and the unified one) under one path; `dirs_gone` checks them
/// all, not only the cpu and memory directories the limits came from.
#[test]
fn dirs_gone_checks_every_hierarchy_of_the_container() {
    let _baton = crate::common::baton(module_path!());
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    let c = "/netprobe/slot-0-1a2b3c4d";
    write(
        r,
        "proc/self/mountinfo",
        "30 25 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
         31 25 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
         33 25 0:29 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n\
         34 25 0:30 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n\
         35 25 0:31 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer\n\
         32 25 0:28 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
    );
    write(
        r,
        &format!("proc/{PID}/cgroup"),
        &format!(
            "9:name=systemd:{c}\n8:pids:{c}\n6:freezer:/other\n4:memory:{c}\n1:cpu:{c}\n3:blkio:{c}\n0::{c}\n"
        ),
    );
    write(
        r,
        &format!("sys/fs/cgroup/cpu{c}/cpu.cfs_quota_us"),
        "400000\n",
    );
    write(
        r,
        &format!("sys/fs/cgroup/cpu{c}/cpu.cfs_period_us"),
        "100000\n",
    );
    write(
        r,
        &format!("sys/fs/cgroup/memory{c}/memory.limit_in_bytes"),
        "4294967296\n",
    );
    for h in ["pids", "systemd", "unified", "freezer"] {
        fs::create_dir_all(r.join(format!("sys/fs/cgroup/{h}{c}"))).unwrap();
    }
    let l = read_limits_at(r, PID).unwrap();
    let e = l.dirs_gone().unwrap_err();
    for h in ["cpu", "memory", "pids", "systemd", "unified"] {
        assert!(
            e.contains(&format!("/sys/fs/cgroup/{h}{c}")),
            "{h} not checked: {e}"
        );
    }
    // freezer: the process sat in another cgroup there; blkio: not mounted in this tree.
    assert!(!e.contains("freezer") && !e.contains("blkio"), "{e}");
    for h in ["cpu", "memory", "systemd", "unified"] {
        fs::remove_dir_all(r.join(format!("sys/fs/cgroup/{h}{c}"))).unwrap();
    }
    let e = l.dirs_gone().unwrap_err();
    assert!(
        e.contains("pids") && !e.contains("cpu"),
        "only pids left: {e}"
    );
    fs::remove_dir_all(r.join(format!("sys/fs/cgroup/pids{c}"))).unwrap();
    let ok = l.dirs_gone().unwrap();
    assert_eq!(ok.matches(c).count(), 5, "{ok}");
    // The mounts cannot be read again: nothing proven.
    fs::remove_file(r.join("proc/self/mountinfo")).unwrap();
    let e = l.dirs_gone().unwrap_err();
    assert!(e.contains("cannot list"), "{e}");
}
