//! The processes left in a slot container's cgroup directories: the proof that no process of
//! the container runs when the runtime says it has no container (its root entry was removed,
//! or it lost track), checked before a restore brings a second one up.

use super::state::SlotState;
use std::path::{Path, PathBuf};

/// Every directory of the container's cgroup, in each hierarchy of the last `cgroup-limits`
/// read-back ([`crate::cgroup::LimitReadback::container_dirs`]), holds no process: `Ok` with
/// the detail (a directory that does not exist holds none). `Err` names each directory that
/// holds processes, with their pids and the way on, or says why it cannot be told (no read-back
/// recorded, a `cgroup.procs` unreadable): fail closed.
pub(crate) fn no_container_procs(st: &SlotState) -> Result<String, String> {
    let rb = st
        .cgroup
        .as_ref()
        .and_then(|c| c.last_readback.as_ref())
        .ok_or("state.json records no cgroup read-back: the container's cgroup is unknown")?;
    let dirs = rb.container_dirs()?;
    let mut busy: Vec<(PathBuf, Vec<i32>)> = Vec::new();
    for d in &dirs {
        let pids = procs(d)?;
        if !pids.is_empty() {
            busy.push((d.clone(), pids));
        }
    }
    if busy.is_empty() {
        return Ok(format!(
            "no process in the container's cgroup ({} directories: {})",
            dirs.len(),
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let mut all: Vec<i32> = busy.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    all.sort_unstable();
    all.dedup();
    let pids = all.iter().map(i32::to_string).collect::<Vec<_>>().join(" ");
    Err(format!(
        "processes {pids} still run in the container's cgroup ({}) though the runtime has no container {}: a container the runtime lost track of (e.g. its state under the runtime root was removed) would run beside the restored one; stop them (`kill -9 {pids}`) or `netprobe slot cleanup` this slot",
        busy.iter()
            .map(|(d, _)| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        st.container_id
    ))
}

/// The pids in `dir/cgroup.procs`; none when `dir` does not exist.
fn procs(dir: &Path) -> Result<Vec<i32>, String> {
    let f = dir.join("cgroup.procs");
    match std::fs::read_to_string(&f) {
        Ok(t) => t
            .split_whitespace()
            .map(|p| {
                p.parse::<i32>()
                    .map_err(|e| format!("{}: {p:?}: {e}", f.display()))
            })
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !dir.exists() => Ok(Vec::new()),
        Err(e) => Err(format!("cannot read {}: {e}", f.display())),
    }
}

#[cfg(test)]
pub(crate) mod tests {
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
        let (d, mut st) = super::super::checks::tests::fixture();
        st.cgroup = Some(fake_cgroup(d.path(), ""));
        let ok = no_container_procs(&st).unwrap();
        assert!(
            ok.contains("no process in the container's cgroup (1 directories"),
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
        assert!(procs(&plain).unwrap_err().contains("cannot read"));
    }

    #[test]
    fn no_read_back_proves_nothing() {
        let (_d, mut st) = super::super::checks::tests::fixture();
        st.cgroup = None;
        let e = no_container_procs(&st).unwrap_err();
        assert!(e.contains("no cgroup read-back"), "{e}");
    }
}
