use super::*;
use crate::cgroup::{CgroupDriver, CgroupMode, DriverChoice, ManageCgroupsMode};

/// A cgroup v2 host under `root/fakehost` whose container cgroup holds `procs`, and the
/// slot's cgroup record read back from it (as provision records it).
pub(crate) fn fake_cgroup(root: &Path, procs: &str) -> super::super::cgroups::SlotCgroup {
    let r = root.join("fakehost");
    let scope = "/netprobe/slot-1-1a2b3c4d";
    let write = |rel: &str, text: &str| {
        let p = r.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "proc/self/mountinfo",
        "25 22 0:23 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n",
    );
    write("proc/4242/cgroup", &format!("0::{scope}\n"));
    write("sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n");
    let dir = format!("sys/fs/cgroup{scope}");
    write(&format!("{dir}/cpu.max"), "400000 100000\n");
    write(&format!("{dir}/memory.max"), "4294967296\n");
    write(&format!("{dir}/memory.swap.max"), "0\n");
    write(&format!("{dir}/cgroup.procs"), procs);
    let rb = crate::cgroup::read_limits_at(&r, 4242).unwrap();
    super::super::cgroups::SlotCgroup {
        mode: CgroupMode::Unified,
        driver: DriverChoice {
            driver: CgroupDriver::Cgroupfs,
            source: "test".into(),
            systemd_pid1: false,
            pid1: "init".into(),
        },
        unit: None,
        manage_cgroups_mode: ManageCgroupsMode::Soft,
        manage_cgroups_reason: "test".into(),
        last_readback: Some(rb),
    }
}

#[test]
fn a_left_process_is_named_with_the_way_on() {
    let (d, mut st) = crate::slot::gate::pure_checks::tests::fixture();
    st.cgroup = Some(fake_cgroup(d.path(), ""));
    let ok = no_container_procs(&st).unwrap();
    assert!(
        ok.contains("no process in the container's cgroup (1 directories"),
        "{ok}"
    );
    // Directories that are gone (after cleanup) are said to be gone, not listed as empty.
    let gone = fake_cgroup(d.path(), "");
    let dirs = gone
        .last_readback
        .as_ref()
        .unwrap()
        .container_dirs()
        .unwrap();
    for dir in &dirs {
        std::fs::remove_dir_all(dir).unwrap();
    }
    st.cgroup = Some(gone);
    let ok = no_container_procs(&st).unwrap();
    assert!(
        ok.starts_with("no process: the container's cgroup directories are gone (1: "),
        "{ok}"
    );
    st.cgroup = Some(fake_cgroup(d.path(), "31493\n31764\n"));
    let e = no_container_procs(&st).unwrap_err();
    assert!(e.contains("processes 31493 31764 still run"), "{e}");
    assert!(
        e.contains("kill -9 31493 31764") && e.contains("netprobe slot cleanup"),
        "{e}"
    );
}

#[test]
fn procs_reads_pids_and_a_missing_dir_holds_none() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(procs(&d.path().join("gone")).unwrap(), Vec::<i32>::new());
    std::fs::write(d.path().join("cgroup.procs"), "").unwrap();
    assert!(procs(d.path()).unwrap().is_empty());
    std::fs::write(d.path().join("cgroup.procs"), "31493\n31764\n").unwrap();
    assert_eq!(procs(d.path()).unwrap(), vec![31493, 31764]);
    std::fs::write(d.path().join("cgroup.procs"), "x\n").unwrap();
    assert!(procs(d.path()).is_err());
    // A directory without cgroup.procs is not a cgroup: it cannot be told.
    let plain = d.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    assert!(
        procs(&plain)
            .unwrap_err()
            .to_string()
            .contains("cannot read")
    );
}

#[test]
fn netns_members_finds_the_processes_in_one_namespace() {
    // This test process and a child in its netns (the host's, with pid 1 in it too, whose
    // ns/net is refused here: net/dev decides); a namespace nobody is in.
    let me = std::process::id() as i32;
    let proc_root = Path::new("/proc");
    let mark = netns_mark(proc_root, me).unwrap();
    assert_eq!(mark.ns_inode, crate::ns::own_netns_inode().unwrap());
    let mut child = std::process::Command::new("sleep")
        .arg("5")
        .spawn()
        .unwrap();
    let found = netns_members(proc_root, mark, &[me]).unwrap().found;
    assert!(
        found
            .iter()
            .any(|(p, c)| *p == child.id() as i32 && c == "sleep"),
        "{found:?}"
    );
    assert!(!found.iter().any(|(p, _)| *p == me), "{found:?}");
    let elsewhere = NetnsMark {
        ns_inode: 1,
        net_dev_inode: Some(1),
    };
    let none = netns_members(proc_root, elsewhere, &[]).unwrap().found;
    assert!(none.is_empty(), "{none:?}");
    child.kill().unwrap();
    child.wait().unwrap();
    let e = netns_members(Path::new("/nonexistent-proc"), mark, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot read"), "{e}");
}

#[test]
fn a_stranger_in_the_holders_netns_is_named() {
    let (_d, mut st) = crate::slot::gate::pure_checks::tests::fixture();
    st.holder = None;
    assert!(
        no_netns_strangers(&st, Path::new("/proc"))
            .unwrap_err()
            .contains("no holder")
    );
    // A /proc with the holder (pid 100) and processes in its namespace (links to this
    // process's own namespace files: no root needed).
    let d = tempfile::tempdir().unwrap();
    let add = |pid: i32, comm: &str| {
        let p = d.path().join(pid.to_string());
        std::fs::create_dir_all(p.join("ns")).unwrap();
        std::fs::create_dir_all(p.join("net")).unwrap();
        std::os::unix::fs::symlink("/proc/self/ns/net", p.join("ns/net")).unwrap();
        std::os::unix::fs::symlink("/proc/self/net/dev", p.join("net/dev")).unwrap();
        std::fs::write(p.join("comm"), format!("{comm}\n")).unwrap();
    };
    add(100, "netprobe");
    let holder = crate::ns::ProcessIdentity {
        pid: 100,
        start_time: 0,
        netns_inode: crate::ns::own_netns_inode().unwrap(),
    };
    st.holder = Some(holder);
    let ok = no_netns_strangers(&st, d.path()).unwrap();
    assert!(ok.contains("no process but the holder (pid 100)"), "{ok}");
    add(200, "sleep");
    let e = no_netns_strangers(&st, d.path()).unwrap_err();
    assert!(e.contains("processes 200 (sleep) run"), "{e}");
    assert!(
        e.contains("`kill -9 200`") && e.contains("netprobe slot cleanup"),
        "{e}"
    );
    // Many: 20 named, the rest counted.
    for pid in 201..225 {
        add(pid, "x");
    }
    let e = no_netns_strangers(&st, d.path()).unwrap_err();
    assert!(e.contains("219 (x) and 5 more run"), "{e}");
    assert!(!e.contains("220 (x)"), "{e}");
    // The holder gone (cleanup after it died): whoever is still in its namespace is named.
    st.holder = Some(crate::ns::ProcessIdentity { pid: 999, ..holder });
    let e = no_netns_strangers(&st, d.path()).unwrap_err();
    assert!(e.contains("processes 100 (netprobe), 200 (sleep)"), "{e}");
    assert!(
        e.contains("whose holder (pid 999) is gone, though the runtime"),
        "{e}"
    );
    // No namespace cookie recorded: the inode alone cannot prove the namespace is the
    // slot's (a later one may reuse it), and the message says so.
    assert!(e.contains("records no namespace cookie"), "{e}");
    // The slot's cookie recorded and equal: named, with no such doubt.
    let own = crate::ns::netns_cookie_of(Path::new("/proc/self/ns/net")).unwrap();
    st.holder_netns_cookie = Some(own);
    let e = no_netns_strangers(&st, d.path()).unwrap_err();
    assert!(e.contains("processes 100 (netprobe), 200 (sleep)"), "{e}");
    assert!(!e.contains("records no namespace cookie"), "{e}");
    // Another cookie recorded: these processes are in a later namespace that reuses the
    // inode (another slot's holder and container), not the slot's: nobody is named.
    st.holder_netns_cookie = Some(own + 1);
    let ok = no_netns_strangers(&st, d.path()).unwrap();
    assert!(ok.contains("is gone and no process is left"), "{ok}");
    assert!(
        ok.contains("pids 100 200 201") && ok.contains("later namespace that reuses inode"),
        "{ok}"
    );
    st.holder_netns_cookie = None;
    // The holder's pid now in another namespace (reused): gone too; nobody is left in the
    // recorded one.
    st.holder = Some(crate::ns::ProcessIdentity {
        netns_inode: 1,
        ..holder
    });
    let ok = no_netns_strangers(&st, d.path()).unwrap();
    assert!(ok.contains("is gone and no process is left"), "{ok}");
    let empty = tempfile::tempdir().unwrap();
    st.holder = Some(holder);
    let ok = no_netns_strangers(&st, empty.path()).unwrap();
    assert!(ok.contains("the holder (pid 100) is gone"), "{ok}");
}

#[test]
fn no_read_back_proves_nothing() {
    let (_d, mut st) = crate::slot::gate::pure_checks::tests::fixture();
    st.cgroup = None;
    let e = no_container_procs(&st).unwrap_err();
    assert!(e.contains("no cgroup read-back"), "{e}");
}
