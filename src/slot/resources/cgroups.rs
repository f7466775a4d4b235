//! The slot's cgroups (issue 15 wired into the driver): the host's mode and the cgroup driver
//! chosen at provision and kept in `state.json` ([`SlotCgroup`]); the `cgroupsPath` for the
//! driver; the `cgroup-limits` gate read back from the v1 or v2 files ([`crate::cgroup`]); with
//! the systemd driver the `cgroup-unit-limits` gate (the scope unit's properties, aligned where
//! the runtime left one out); CRIU's `--manage-cgroups-mode` for snapshot and restore; and at
//! cleanup the scope removed and the container's cgroup directories proven gone.

use super::slot_dir::SlotPaths;
use crate::cgroup::systemd::{self, ScopeRemoval, SystemdCgroupsPath};
use crate::cgroup::{
    CgroupDriver, CgroupHost, CgroupMode, DriverChoice, LimitReadback, ManageCgroupsMode,
    read_limits,
};
use crate::slot::error::SlotError;
use crate::slot::gate::GateId;
use crate::slot::gate::Observed;
use crate::slot::record::verb_run::VerbRun;
use crate::slot::state::SlotState;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::{Path, PathBuf};

/// The slot's cgroup facts, chosen at provision (`cgroup` in `state.json`; absent in states
/// written before it existed, which mean cgroupfs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotCgroup {
    /// The host's mode at provision (`v1`, `hybrid`, `unified`).
    pub mode: CgroupMode,
    /// The driver and why ([`DriverChoice::choose`]).
    pub driver: DriverChoice,
    /// systemd driver: the scope unit runc creates (`netprobe-slot-N-<id8>.scope`).
    pub unit: Option<String>,
    /// CRIU's `--manage-cgroups-mode` for snapshot and restore.
    pub manage_cgroups_mode: ManageCgroupsMode,
    /// Why that mode ([`ManageCgroupsMode::for_driver`]).
    pub manage_cgroups_reason: String,
    /// The last `cgroup-limits` read-back (every file named); cleanup proves its directories
    /// gone.
    #[serde(default)]
    pub last_readback: Option<LimitReadback>,
}

impl SlotCgroup {
    /// Whether the runtime must be given `--systemd-cgroup`.
    pub fn systemd(&self) -> bool {
        self.driver.driver == CgroupDriver::Systemd
    }
}

/// Whether the slot's runtime uses the systemd cgroup driver (false for states without
/// [`SlotCgroup`]).
pub(crate) fn uses_systemd(st: &SlotState) -> bool {
    st.cgroup.as_ref().is_some_and(SlotCgroup::systemd)
}

/// provision, before anything is created: the host has the cpu and memory controllers
/// (v1 or v2) and the chosen driver fits it (`--cgroup-driver`, else the profile's
/// `cgroup_driver` (`profile_driver`, source `profile`); default systemd where systemd is pid 1,
/// else cgroupfs). Gate `cgroup-host` (a host refusal, exit 3). `runtime_version` is the
/// runtime's recorded version (for the manage-cgroups mode).
pub(crate) fn provision_gate(
    run: &mut VerbRun,
    runtime_version: &str,
    profile_driver: Option<crate::cgroup::CgroupDriver>,
) -> Result<SlotCgroup, SlotError> {
    let root = Path::new("/");
    let requested = run.args.cgroup_driver.or(profile_driver);
    let from_profile = run.args.cgroup_driver.is_none() && profile_driver.is_some();
    let r = CgroupHost::detect(root).and_then(|h| {
        h.require_limit_controllers()?;
        let mut c = DriverChoice::choose(root, requested)?;
        if from_profile {
            c.source = "profile".into();
        }
        Ok((h, c))
    });
    let (host, choice) = r.map_err(|e| {
        let from = match (&run.args.profile, from_profile) {
            (Some(p), true) => format!(
                "the profile {} sets cgroup_driver = \"{}\" (no --cgroup-driver given): ",
                p.display(),
                requested.map(|d| d.as_str()).unwrap_or_default()
            ),
            _ => String::new(),
        };
        run.fail(GateId::CgroupHost, format!("{from}{e}"))
    })?;
    let d = format!(
        "cgroup {} host ({}), driver {} ({}; systemd pid 1: {}, pid 1 {:?})",
        host.mode,
        host.mountinfo.display(),
        choice.driver,
        choice.source,
        choice.systemd_pid1,
        choice.pid1
    );
    run.gate(GateId::CgroupHost, Ok(d))?;
    let (mcg, reason) = ManageCgroupsMode::for_driver(choice.driver, runtime_version);
    let cg = SlotCgroup {
        mode: host.mode,
        driver: choice,
        unit: None,
        manage_cgroups_mode: mcg,
        manage_cgroups_reason: reason,
        last_readback: None,
    };
    run.fact_json("cgroup", &cg);
    Ok(cg)
}

/// The slot's `linux.cgroupsPath` and, for systemd, its scope unit: cgroupfs
/// `/netprobe/slot-N-<id8>` ([`SlotPaths::cgroups_path`]), systemd
/// `system.slice:netprobe:slot-N-<id8>` (unit `netprobe-slot-N-<id8>.scope`).
pub(crate) fn cgroups_path(
    paths: &SlotPaths,
    owner_id: &str,
    driver: CgroupDriver,
) -> (String, Option<String>) {
    match driver {
        CgroupDriver::Cgroupfs => (paths.cgroups_path(owner_id), None),
        CgroupDriver::Systemd => {
            let p = SystemdCgroupsPath::for_slot(paths.slot, owner_id);
            (p.to_cgroups_path(), Some(p.unit()))
        }
    }
}

/// `["--manage-cgroups-mode", MODE]` for the runtime's checkpoint and restore, recorded as the
/// facts `manage_cgroups_mode` and `manage_cgroups_reason` (none for states without
/// [`SlotCgroup`]: the runtime's default).
///
/// crun always checkpoints and restores with `--manage-cgroups-mode=ignore` (its own quirk,
/// [`crate::oci::RuntimeKind::checkpoint_restore_args`]): no second, conflicting mode is passed
/// for it, and the facts say so.
pub(crate) fn manage_cgroups_args(run: &mut VerbRun, st: &SlotState) -> Vec<String> {
    let Some(cg) = &st.cgroup else {
        return Vec::new();
    };
    if run.runtime_kind(&st.runtime.path) == crate::oci::RuntimeKind::Crun {
        run.fact("manage_cgroups_mode", "ignore");
        run.fact(
            "manage_cgroups_reason",
            "crun: checkpoint and restore always pass --manage-cgroups-mode=ignore (crun creates the container's cgroups at restore from config.json)",
        );
        return Vec::new();
    }
    run.fact("manage_cgroups_mode", cg.manage_cgroups_mode.as_str());
    run.fact("manage_cgroups_reason", cg.manage_cgroups_reason.clone());
    vec![
        "--manage-cgroups-mode".into(),
        cg.manage_cgroups_mode.as_str().into(),
    ]
}

/// The gate detail of a read-back: each limit file's name and value (`cpu.cfs_quota_us 400000`,
/// `cpu.max 400000 100000`, …), then [`LimitReadback::check`]'s line naming every path.
fn limits_detail(rb: &LimitReadback, line: String) -> String {
    let short: Vec<String> = rb
        .files
        .iter()
        .skip(1)
        .map(|f| {
            let name = f.path.file_name().unwrap_or_default().to_string_lossy();
            format!("{name} {}", f.value)
        })
        .collect();
    format!("{}: {}; {line}", rb.cgroup_dir.display(), short.join(" "))
}

/// The `cgroup-limits` gate for the container's init `pid` (`when`: provision, restore, reset):
/// the limits read back from its cgroup files (v1 or v2 as the host is) equal `st.resources`;
/// the read-back is written as `cgroup-limits-<when>.json` and kept in the state for cleanup.
/// With the systemd driver, then [`unit_gate`].
pub(crate) fn limits_gates(
    run: &mut VerbRun,
    st: &mut SlotState,
    pid: i32,
    when: &str,
) -> Result<(), SlotError> {
    let rb = CgroupHost::detect(Path::new("/")).and_then(|h| read_limits(&h, pid));
    let rb = match rb {
        Ok(rb) => rb,
        Err(e) => return Err(run.fail(GateId::CgroupLimits, format!("pid {pid}: {e}"))),
    };
    run.ev_write_json(&format!("cgroup-limits-{when}.json"), &rb);
    let r = rb.check(&st.resources);
    let r = match r {
        Ok(l) => Ok(limits_detail(&rb, l)),
        Err(l) => Err(limits_detail(&rb, l)),
    };
    let proc_cgroup = rb.files[0].value.clone();
    if let Some(cg) = st.cgroup.as_mut() {
        cg.last_readback = Some(rb);
    }
    run.gate(GateId::CgroupLimits, r)?;
    match st.cgroup.as_ref().and_then(|c| c.unit.clone()) {
        Some(unit) if uses_systemd(st) => unit_gate(run, st, &unit, pid, &proc_cgroup, when),
        _ => Ok(()),
    }
}

/// The `cgroup-limits` gate at snapshot, before the checkpoint: the limits of the running
/// container's init `pid` read back from its cgroup files must still equal `st.resources`
/// (`config.json`'s), else the snapshot is refused naming each file and both values
/// ([`LimitReadback::differences`]): a limit changed by hand since provision, restore or reset
/// would be checkpointed silently, and the restore's runtime makes a fresh cgroup from
/// `config.json`. Written as `cgroup-limits-snapshot.json`.
pub(crate) fn snapshot_limits_gate(
    run: &mut VerbRun,
    st: &SlotState,
    pid: i32,
) -> Result<(), SlotError> {
    let rb = CgroupHost::detect(Path::new("/")).and_then(|h| read_limits(&h, pid));
    let rb = match rb {
        Ok(rb) => rb,
        Err(e) => return Err(run.fail(GateId::CgroupLimits, format!("pid {pid}: {e}"))),
    };
    run.ev_write_json("cgroup-limits-snapshot.json", &rb);
    let diff = rb.differences(&st.resources);
    let r = match (rb.check(&st.resources), diff.is_empty()) {
        (Ok(l), true) => Ok(limits_detail(&rb, l)),
        (r, _) => Err(format!(
            "the container's cgroup limits changed since they were set: {}; a snapshot would checkpoint a container that ran under other limits than the slot's (and its restore would get config.json's): put the value back (or {}); {}",
            diff.join("; "),
            crate::slot::next_step::CLEANUP_AND_PROVISION_ANOTHER,
            limits_detail(&rb, r.unwrap_or_else(|e| e))
        )),
    };
    run.gate(GateId::CgroupLimits, r)
}

/// `slot status`'s `live.cgroup_limits`: the limits of the running container's init `pid` read
/// back now from its cgroup files against `config.json`'s (`st.resources`): `equal`, and the
/// differences (file and both values) or the files read.
pub(crate) fn limits_now(st: &SlotState, pid: i32) -> serde_json::Value {
    let rb = CgroupHost::detect(Path::new("/")).and_then(|h| read_limits(&h, pid));
    match rb {
        Ok(rb) => {
            let diff = rb.differences(&st.resources);
            let detail = match rb.check(&st.resources) {
                Ok(l) | Err(l) => limits_detail(&rb, l),
            };
            serde_json::json!({
                "equal": diff.is_empty(),
                "differences": diff,
                "detail": detail,
            })
        }
        Err(e) => {
            serde_json::json!({"equal": null, "differences": [], "detail": format!("pid {pid}: {e}")})
        }
    }
}

/// The `cgroup-unit-limits` gate (systemd driver): the scope unit as runc created it
/// (recorded), every limit runc left out of it set on it ([`systemd::align_unit`], a declared
/// difference), then read again: `CPUQuotaPerSecUSec`, `MemoryMax`, `MemorySwapMax` equal
/// `st.resources` and the process's `0::` line is the unit's `ControlGroup`. Written as
/// `cgroup-unit-<when>.json`.
fn unit_gate(
    run: &mut VerbRun,
    st: &SlotState,
    unit: &str,
    pid: i32,
    proc_cgroup: &str,
    when: &str,
) -> Result<(), SlotError> {
    let fail = |run: &mut VerbRun, e: crate::cgroup::CgroupError| {
        run.fail(GateId::CgroupUnitLimits, format!("{unit}: {e}"))
    };
    let u0 = systemd::show_unit(unit).map_err(|e| fail(run, e))?;
    let aligned = systemd::align_unit(&u0, &st.resources).map_err(|e| fail(run, e))?;
    let u = systemd::show_unit(unit).map_err(|e| fail(run, e))?;
    run.ev_write_json(
        &format!("cgroup-unit-{when}.json"),
        &json!({"as_created": u0, "aligned": aligned, "checked": u}),
    );
    if !aligned.is_empty() {
        run.declare(format!(
            "The runtime left limits out of the scope unit {unit}; netprobe set them on the unit (systemctl set-property --runtime) so that systemd keeps them: {}.",
            aligned.join("; ")
        ));
    }
    let want = format!("0::{}", u.control_group);
    let in_unit = !u.control_group.is_empty() && proc_cgroup.lines().any(|l| l == want);
    let r = match u.check(&st.resources) {
        Ok(d) if in_unit => Ok(format!(
            "{d}; /proc/{pid}/cgroup has {want} = the unit's ControlGroup"
        )),
        Ok(d) => Err(format!(
            "{d}; /proc/{pid}/cgroup {proc_cgroup:?} lacks {want} (the unit's ControlGroup)"
        )),
        Err(d) => Err(d),
    };
    run.gate(GateId::CgroupUnitLimits, r)
}

/// What cleanup found about the slot's cgroups (evidence `cgroup-cleanup.json`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CgroupCleanup {
    /// systemd: the scope's removal (`stopped: true` means the runtime had left it).
    pub scope: Option<ScopeRemoval>,
    /// The last read-back's directories: `gone: …` or `still there: …`.
    pub dirs: Option<Observed>,
    /// cgroupfs: the parents runc created for `/netprobe/…` and leaves (shared by slots).
    pub parents_left: Vec<PathBuf>,
}

/// cleanup, after the container is proven gone: systemd → the scope removed; both drivers →
/// the last read-back's directories gone; cgroupfs → the shared parents runc leaves are
/// listed (declared, not removed: another slot may be creating its cgroup under them). Problems
/// are appended to `problems` (the `released` gate); the record goes to
/// `cgroup-cleanup.json` and the `cgroup-released` gate (recorded).
pub(crate) fn cleanup(run: &mut VerbRun, st: &SlotState, problems: &mut Vec<String>) {
    let Some(cg) = &st.cgroup else {
        return;
    };
    let mut found = Vec::new();
    let scope = match (&cg.unit, cg.systemd()) {
        (Some(unit), true) => match systemd::remove_scope(unit) {
            Ok(s) => {
                if s.stopped {
                    found.push(format!(
                        "the runtime left the scope {} ({}); stopped it: {}",
                        s.unit, s.before, s.after
                    ));
                } else {
                    found.push(format!("{}: {} after the container", s.unit, s.after));
                }
                Some(s)
            }
            Err(e) => {
                problems.push(format!("scope {unit}: {e}"));
                found.push(format!("scope {unit}: {e}"));
                None
            }
        },
        _ => None,
    };
    let dirs = cg.last_readback.as_ref().map(LimitReadback::dirs_gone);
    let mut unread_left = false;
    match &dirs {
        Some(Ok(d)) => found.push(format!("cgroup directories {d}")),
        Some(Err(d)) => {
            problems.push(format!("cgroup directories {d}"));
            found.push(format!("cgroup directories {d}"));
        }
        None => {
            // No read-back (provision stopped before it): the recorded cgroups path, in every
            // hierarchy mounted now, must be gone.
            let left: Vec<String> = super::crun_leftovers::cgroup_dirs(&st.cgroups_path)
                .into_iter()
                .filter(|d| d.symlink_metadata().is_ok())
                .map(|d| d.display().to_string())
                .collect();
            if left.is_empty() {
                found.push(format!(
                    "no cgroup read-back recorded; the slot's cgroups path {} is in no hierarchy",
                    st.cgroups_path
                ));
            } else {
                let d = format!(
                    "no cgroup read-back recorded; the slot's cgroups path {} is still there: {}",
                    st.cgroups_path,
                    left.join(", ")
                );
                problems.push(d.clone());
                found.push(d);
                unread_left = true;
            }
        }
    }
    let parents_left = parents_left(cg);
    if !parents_left.is_empty() {
        let l: Vec<String> = parents_left
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        run.declare(format!(
            "The cgroupfs driver's parent cgroup directories ({}) are left: runc creates them and leaves them, and they are shared by every slot (removing one could fail another slot's runtime create).",
            l.join(", ")
        ));
    }
    let rec = CgroupCleanup {
        scope,
        dirs,
        parents_left,
    };
    run.ev_write_json("cgroup-cleanup.json", &rec);
    let ok = rec.dirs.as_ref().is_none_or(|d| d.is_ok())
        && !unread_left
        && (!cg.systemd() || rec.scope.as_ref().is_some_and(|s| !s.stopped));
    let d = found.join("; ");
    run.record(GateId::CgroupReleased, if ok { Ok(d) } else { Err(d) });
}

/// cgroupfs: the existing parents (`…/netprobe`) of the container's directories in every
/// hierarchy ([`LimitReadback::container_dirs`]; those of the limit files when it cannot list
/// them).
fn parents_left(cg: &SlotCgroup) -> Vec<PathBuf> {
    if cg.systemd() {
        return Vec::new();
    }
    let Some(rb) = &cg.last_readback else {
        return Vec::new();
    };
    let dirs = rb.container_dirs().unwrap_or_else(|_| {
        rb.files
            .iter()
            .skip(1)
            .filter_map(|f| f.path.parent().map(Path::to_path_buf))
            .collect()
    });
    let mut v: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|d| d.parent().map(Path::to_path_buf))
        .filter(|p| p.ends_with("netprobe") && p.is_dir())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Registers, while provision creates and starts the container, the removal of the slot's
/// cgroup directories on an interruption (cgroupfs driver; registered before the container,
/// so it runs after the container's release): a runtime killed in `create` leaves them with no
/// state to delete them by. `None` for the systemd driver (its scope is the unit's) or a state
/// without a cgroup record.
pub(crate) fn on_signal_remove_dirs(st: &SlotState) -> Option<crate::ns::cleanup::Registration> {
    let cg = st.cgroup.as_ref()?;
    if cg.systemd() {
        return None;
    }
    let path = st.cgroups_path.clone();
    Some(crate::ns::cleanup::register_reporting(
        format!("the slot's cgroup directories ({path})"),
        move || {
            let dirs = super::crun_leftovers::cgroup_dirs(&path);
            let (removed, left) = crate::oci::cgroups::remove_cgroup_trees(&dirs);
            Some(if left.is_empty() {
                format!("{removed} removed (none left in any hierarchy)")
            } else {
                let left: Vec<String> = left.iter().map(|d| d.display().to_string()).collect();
                format!("FAILED: {removed} removed, left: {}", left.join(", "))
            })
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::read_limits_at;
    use std::fs;

    const PID: i32 = 4242;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    /// A unified host with the slot's container in its systemd scope.
    fn v2_tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let scope = "/system.slice/netprobe-slot-0-1a2b3c4d.scope";
        write(
            r,
            "proc/self/mountinfo",
            "25 22 0:23 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n",
        );
        write(r, &format!("proc/{PID}/cgroup"), &format!("0::{scope}\n"));
        write(
            r,
            "sys/fs/cgroup/cgroup.controllers",
            "cpuset cpu io memory pids\n",
        );
        let dir = format!("sys/fs/cgroup{scope}");
        write(r, &format!("{dir}/cpu.max"), "400000 100000\n");
        write(r, &format!("{dir}/memory.max"), "4294967296\n");
        write(r, &format!("{dir}/memory.swap.max"), "0\n");
        d
    }

    /// This machine's kind: hybrid, the cgroupfs driver's `/netprobe/slot-N-<id8>`.
    fn v1_tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(
            r,
            "proc/self/mountinfo",
            "30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
             31 25 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
             32 25 0:28 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
        );
        write(
            r,
            &format!("proc/{PID}/cgroup"),
            "4:memory:/netprobe/slot-0-1a2b3c4d\n2:cpu,cpuacct:/netprobe/slot-0-1a2b3c4d\n0::/\n",
        );
        let c = "sys/fs/cgroup/cpu,cpuacct/netprobe/slot-0-1a2b3c4d";
        write(r, &format!("{c}/cpu.cfs_quota_us"), "400000\n");
        write(r, &format!("{c}/cpu.cfs_period_us"), "100000\n");
        let m = "sys/fs/cgroup/memory/netprobe/slot-0-1a2b3c4d";
        write(r, &format!("{m}/memory.limit_in_bytes"), "4294967296\n");
        d
    }

    fn cg(driver: CgroupDriver, rb: Option<LimitReadback>) -> SlotCgroup {
        SlotCgroup {
            mode: CgroupMode::Hybrid,
            driver: DriverChoice {
                driver,
                source: "default".into(),
                systemd_pid1: false,
                pid1: "init".into(),
            },
            unit: None,
            manage_cgroups_mode: ManageCgroupsMode::Soft,
            manage_cgroups_reason: "test".into(),
            last_readback: rb,
        }
    }

    #[test]
    fn gate_detail_names_v2_files_and_values() {
        let d = v2_tree();
        let rb = read_limits_at(d.path(), PID).unwrap();
        let want = crate::slot::SLOT_RESOURCES;
        let ok = limits_detail(&rb, rb.check(&want).unwrap());
        for s in [
            "cpu.max 400000 100000",
            "memory.max 4294967296",
            "memory.swap.max 0",
            "netprobe-slot-0-1a2b3c4d.scope/memory.swap.max = \"0\"",
            "cgroup unified",
        ] {
            assert!(ok.contains(s), "{s:?} in {ok}");
        }
        let mut other = want;
        other.memory_limit = 1 << 30;
        let e = limits_detail(&rb, rb.check(&other).unwrap_err());
        assert!(
            e.contains("asked") && e.contains("memory.max 4294967296"),
            "{e}"
        );
    }

    #[test]
    fn gate_detail_names_v1_files_and_parents_left() {
        let d = v1_tree();
        let rb = read_limits_at(d.path(), PID).unwrap();
        let ok = limits_detail(&rb, rb.check(&crate::slot::SLOT_RESOURCES).unwrap());
        for s in [
            "cpu.cfs_quota_us 400000",
            "cpu.cfs_period_us 100000",
            "memory.limit_in_bytes 4294967296",
            "/cpu,cpuacct/netprobe/slot-0-1a2b3c4d/cpu.cfs_quota_us = \"400000\"",
            "absent (no swap accounting)",
        ] {
            assert!(ok.contains(s), "{s:?} in {ok}");
        }
        // cgroupfs: the shared `netprobe` parents are listed (left, declared); systemd: none.
        let c = cg(CgroupDriver::Cgroupfs, Some(rb.clone()));
        let root = d.path().join("sys/fs/cgroup");
        assert_eq!(
            parents_left(&c),
            [
                root.join("cpu,cpuacct/netprobe"),
                root.join("memory/netprobe")
            ]
        );
        assert!(parents_left(&cg(CgroupDriver::Systemd, Some(rb))).is_empty());
        assert!(parents_left(&cg(CgroupDriver::Cgroupfs, None)).is_empty());
    }

    #[test]
    fn cgroups_path_per_driver() {
        let p = SlotPaths::new(Path::new("/sd"), 3);
        let (cf, u) = cgroups_path(&p, "1a2b3c4d5e6f", CgroupDriver::Cgroupfs);
        assert_eq!((cf.as_str(), u), ("/netprobe/slot-3-1a2b3c4d", None));
        let (sd, u) = cgroups_path(&p, "1a2b3c4d5e6f", CgroupDriver::Systemd);
        assert_eq!(sd, "system.slice:netprobe:slot-3-1a2b3c4d");
        assert_eq!(u.as_deref(), Some("netprobe-slot-3-1a2b3c4d.scope"));
    }

    #[test]
    fn runtime_flag_follows_the_recorded_driver() {
        let d = tempfile::tempdir().unwrap();
        let (rt, cr) = (d.path().join("rt"), d.path().join("cr"));
        fs::write(&rt, b"rt").unwrap();
        fs::write(&cr, b"cr").unwrap();
        let mut st =
            crate::slot::gate::pure_checks::tests::state_with_self_holder(d.path(), &rt, &cr);
        assert!(
            !uses_systemd(&st),
            "a state without cgroup facts is cgroupfs"
        );
        st.cgroup = Some(cg(CgroupDriver::Systemd, None));
        assert!(uses_systemd(&st));
        // States written before the field existed still load (cgroup: None).
        let mut v = serde_json::to_value(&st).unwrap();
        v.as_object_mut().unwrap().remove("cgroup");
        let old: SlotState = serde_json::from_value(v).unwrap();
        assert_eq!(old.cgroup, None);
    }

    /// The slot's cgroup directories in every hierarchy are removed by the shared
    /// `remove_cgroup_trees` (root: real cgroupfs).
    #[test]
    fn slot_cgroup_dirs_are_removed_in_every_hierarchy() {
        assert!(nix::unistd::geteuid().is_root(), "needs root (cgroupfs)");
        let path = format!("/netprobe-unit-{}/slot-x", std::process::id());
        let dirs = super::super::crun_leftovers::cgroup_dirs(&path);
        assert!(!dirs.is_empty());
        for d in &dirs {
            std::fs::create_dir_all(d).unwrap();
        }
        let (removed, left) = crate::oci::cgroups::remove_cgroup_trees(&dirs);
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(removed, dirs.len());
        for d in &dirs {
            assert!(!d.exists(), "{}", d.display());
            let _ = std::fs::remove_dir(d.parent().unwrap());
        }
    }
}
