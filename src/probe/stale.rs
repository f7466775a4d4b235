//! What probe runs killed with SIGKILL left behind, found and released by the next run.
//!
//! A SIGKILL runs no clean-up: a `netprobe run` (or a matrix part) killed in the middle of a
//! runtime rung leaves the runtime or CRIU it was waiting for (each in its own process group,
//! carrying [`crate::proc::RUN_PID_ENV`]), its holder (a `netprobe __holder` re-parented to init), the container
//! (its init re-parented too, in the cgroup the runtime named after the container id), the
//! work area under `/var/tmp` with the runtime's `--root`, and its temporary CRIU PATH folder
//! and runc log. Each carries the pid of the run that made it — the holder's `--run-pid <pid>`
//! ([`crate::ns::RUN_PID_ARG`]), the container id `netprobe-<rung>-<pid>-<nanos>`
//! ([`crate::oci::unique_container_id`]), `/var/tmp/netprobe-<pid>-…`
//! ([`crate::probe::util::WorkArea`]), `netprobe-criu-path-<pid>-…` and
//! `netprobe-runc-<pid>-….log` — and is released only when that pid no longer exists
//! (`kill(pid, 0)` answers `ESRCH`) or is a zombie not reaped yet ([`crate::proc::exited`]): what a live run (or a slot, whose holder has no
//! `--run-pid` and whose cgroups live under `netprobe/`) owns is never touched. A pid reused
//! by another process keeps its leftovers in place (never a wrong kill). The CRIU PATH folders
//! and runc logs a slot's verbs make carry that slot's owner tag
//! (`netprobe-criu-path-<pid>-slot-<id>-…`, [`crate::oci::SLOT_TAG_PREFIX`]): they are that
//! slot's, taken only by its `slot cleanup`, never by this sweep.

use crate::cgroup::procs::read_lenient;
use crate::evidence::result::RungName;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the sweep waits for killed processes to leave (`/proc` or their cgroup).
const GONE_WAIT: Duration = Duration::from_secs(3);

/// What the sweep released (`stale-swept.json` in the next run's evidence folder), each as
/// the path or `pid N (command line)` it was; `problems` names what it could not release.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct Swept {
    /// Programs of dead runs still running (a runtime or CRIU marked
    /// [`crate::proc::RUN_PID_ENV`]), killed with their process group and gone.
    pub processes: Vec<String>,
    /// Holders of dead runs, killed (SIGKILL) and gone.
    pub holders: Vec<String>,
    /// Container cgroups of dead runs: their processes killed, the folder removed (one entry
    /// per hierarchy).
    pub container_cgroups: Vec<String>,
    /// Processes that were still in those container cgroups (the container's init and what it
    /// forked), killed (SIGKILL): `pid N (command line) in container ID`.
    pub container_processes: Vec<String>,
    /// Work areas of dead runs, removed after every mount below them was detached.
    pub work_areas: Vec<String>,
    /// CRIU PATH folders of dead runs ([`crate::oci::sweep_stale_criu_path_dirs`]).
    pub criu_path_dirs: Vec<String>,
    /// runc `--log` files of dead runs ([`crate::oci::sweep_stale_runc_logs`]).
    pub runc_logs: Vec<String>,
    /// CRIU root yards (`/tmp/.criu.mntns.XXXXXX`, [`crate::criu::yard`]) named in the
    /// `restore.log` a killed CRIU of a dead run had open, removed.
    pub criu_yards: Vec<String>,
    /// What could not be released, and why.
    pub problems: Vec<String>,
}

impl Swept {
    /// Nothing was found.
    pub fn is_empty(&self) -> bool {
        *self == Swept::default()
    }

    /// One line: how many of each were released, and the problems' count.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        for (n, what) in [
            (self.processes.len(), "runtime/CRIU process(es)"),
            (self.holders.len(), "holder(s)"),
            (self.container_cgroups.len(), "container cgroup folder(s)"),
            (self.container_processes.len(), "container process(es)"),
            (self.work_areas.len(), "work area(s)"),
            (self.criu_path_dirs.len(), "CRIU PATH folder(s)"),
            (self.runc_logs.len(), "runc log(s)"),
            (self.criu_yards.len(), "CRIU root yard(s)"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        if !self.problems.is_empty() {
            parts.push(format!("{} not released", self.problems.len()));
        }
        parts.join(", ")
    }
}

/// The run `pid` has exited: reaped, or a zombie nobody reaped yet ([`crate::proc::exited`]).
fn dead(pid: i32) -> bool {
    crate::proc::exited(pid)
}

/// `pid` has left: no `/proc/<pid>` or a zombie (its parent, init, has not reaped it yet).
fn gone(proc_root: &Path, pid: i32) -> bool {
    match std::fs::read_to_string(proc_root.join(format!("{pid}/stat"))) {
        Err(_) => true,
        Ok(s) => s
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// The run pid of a holder command line (`argv` split on NUL): `Some(pid)` when it is
/// `<exe> __holder … --run-pid <pid> …`, else `None` (a slot's holder, any other process).
pub fn holder_run_pid(cmdline: &[u8]) -> Option<i32> {
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    if args.get(1) != Some(&crate::ns::HOLDER_ARG.as_bytes()) {
        return None;
    }
    let i = args
        .iter()
        .position(|a| *a == crate::ns::RUN_PID_ARG.as_bytes())?;
    std::str::from_utf8(args.get(i + 1)?).ok()?.parse().ok()
}

/// The run pid of a probe container's cgroup folder name `netprobe-<rung>-<pid>-<nanos>`
/// (`<rung>` one of the runtime rungs), else `None`.
pub fn container_run_pid(name: &str) -> Option<i32> {
    let rest = name.strip_prefix("netprobe-")?;
    let mut it = rest.rsplitn(3, '-');
    let (nanos, pid, rung) = (it.next()?, it.next()?, it.next()?);
    let runtime_rung = [RungName::Oci, RungName::ExternalNetns]
        .iter()
        .any(|r| r.as_str() == rung);
    (runtime_rung && !nanos.is_empty() && nanos.bytes().all(|b| b.is_ascii_digit()))
        .then(|| pid.parse().ok())
        .flatten()
}

/// The run pid in a process's environment (`environ`: NUL-separated), when it carries
/// [`crate::proc::RUN_PID_ENV`].
pub fn environ_run_pid(environ: &[u8]) -> Option<i32> {
    let key = format!("{}=", crate::proc::RUN_PID_ENV);
    environ
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(key.as_bytes()))
        .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
}

/// The processes under `proc_root` that `run_pid_of` (given a `/proc/<pid>` folder) ties to a
/// run that no longer exists, and have not left: pid and `pid N (command line)`.
fn of_dead_runs(proc_root: &Path, run_pid_of: impl Fn(&Path) -> Option<i32>) -> Vec<(i32, String)> {
    let Ok(entries) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if run_pid_of(&e.path()).is_some_and(dead) && !gone(proc_root, pid) {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let text = String::from_utf8_lossy(&cmd).replace('\0', " ");
            found.push((pid, format!("pid {pid} ({})", text.trim_end())));
        }
    }
    found
}

/// The programs of dead runs still running under `proc_root` (marked in their environment).
fn dead_runs_processes(proc_root: &Path) -> Vec<(i32, String)> {
    of_dead_runs(proc_root, |d| {
        environ_run_pid(&std::fs::read(d.join("environ")).ok()?)
    })
}

/// The holders of dead runs under `proc_root` (`--run-pid` on their command line).
fn dead_runs_holders(proc_root: &Path) -> Vec<(i32, String)> {
    of_dead_runs(proc_root, |d| {
        holder_run_pid(&std::fs::read(d.join("cmdline")).ok()?)
    })
}

/// Kills (SIGKILL) each of `found` — with its process group when `groups` and the group is
/// its own (`run_tree` makes each program a group leader; never netprobe's) — waits up to
/// [`GONE_WAIT`] for each to leave, and records it in `done` or, still there, in `problems`.
fn kill_and_wait(
    proc_root: &Path,
    found: Vec<(i32, String)>,
    groups: bool,
    done: &mut Vec<String>,
    problems: &mut Vec<String>,
) {
    let own = nix::unistd::getpgrp().as_raw();
    for (pid, _) in &found {
        let pgid = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(*pid)))
            .map(|p| p.as_raw())
            .unwrap_or(0);
        if groups && pgid == *pid && pgid != own {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(-pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let deadline = Instant::now() + GONE_WAIT;
    for (pid, what) in found {
        while !gone(proc_root, pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        match gone(proc_root, pid) {
            true => done.push(what),
            false => problems.push(format!(
                "{what}: still there {} s after SIGKILL",
                GONE_WAIT.as_secs()
            )),
        }
    }
}

/// How deep below a hierarchy's root a probe container's cgroup is looked for: the runtime
/// puts a container whose `config.json` names no `cgroupsPath` under the cgroup the runtime
/// itself ran in, which differs per hierarchy and per invoking process (e.g.
/// `memory/<supervisor>/<session>/netprobe-oci-…`).
const CGROUP_DEPTH: usize = 4;

/// Every probe container cgroup folder (`netprobe-<rung>-<pid>-<nanos>`) in every cgroup
/// hierarchy mounted, at most [`CGROUP_DEPTH`] levels below its root (never below a match):
/// the folder's name and path.
pub fn probe_container_cgroups() -> Vec<(String, PathBuf)> {
    crate::cgroup::find::dirs_named(CGROUP_DEPTH, |n| container_run_pid(n).is_some())
}

/// The folders of the containers of dead runs ([`probe_container_cgroups`] whose run pid no
/// longer exists), grouped by name (one per hierarchy).
fn dead_container_cgroups() -> Vec<(String, Vec<PathBuf>)> {
    let mut by_name: std::collections::BTreeMap<String, Vec<PathBuf>> = Default::default();
    for (name, path) in probe_container_cgroups() {
        if container_run_pid(&name).is_some_and(dead) {
            by_name.entry(name).or_default().push(path);
        }
    }
    by_name.into_iter().collect()
}

/// The processes in the cgroup folders `dirs` of container `name` (each pid once, whatever
/// the number of hierarchies listing it): `pid N (command line) in container NAME`.
fn container_processes(name: &str, dirs: &[PathBuf]) -> Vec<String> {
    let mut pids: Vec<i32> = dirs.iter().flat_map(|d| read_lenient(d)).collect();
    pids.sort_unstable();
    pids.dedup();
    pids.into_iter()
        .map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let text = String::from_utf8_lossy(&cmd).replace('\0', " ");
            format!("pid {pid} ({}) in container {name}", text.trim_end())
        })
        .collect()
}

/// Kills every process of each dead run's container cgroup (thawed first: a v1 freezer or v2
/// `cgroup.freeze` a killed CRIU left frozen would hold SIGKILL), waits for the folders to
/// empty and removes them.
fn sweep_container_cgroups(out: &mut Swept) {
    for (name, dirs) in dead_container_cgroups() {
        out.container_processes
            .extend(container_processes(&name, &dirs));
        for d in &dirs {
            let _ = std::fs::write(d.join("freezer.state"), "THAWED");
            let _ = std::fs::write(d.join("cgroup.freeze"), "0");
            for pid in read_lenient(d) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        let deadline = Instant::now() + GONE_WAIT;
        while dirs.iter().any(|d| !read_lenient(d).is_empty()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        for d in dirs {
            match std::fs::remove_dir(&d) {
                // Gone already: the dead run's runtime removes the cgroup once its init died.
                Ok(()) => out.container_cgroups.push(d.display().to_string()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    out.container_cgroups.push(d.display().to_string())
                }
                Err(e) => out.problems.push(format!(
                    "{} (container {name} of a killed run): rmdir: {e}; processes left: {:?}",
                    d.display(),
                    read_lenient(&d)
                )),
            }
        }
    }
}

/// The `restore.log` files process `pid` has open (a CRIU restoring keeps its log open; the
/// yard it built is named there), from `<proc_root>/<pid>/fd`.
fn open_restore_logs(proc_root: &Path, pid: i32) -> Vec<PathBuf> {
    let Ok(fds) = std::fs::read_dir(proc_root.join(pid.to_string()).join("fd")) else {
        return Vec::new();
    };
    fds.flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|p| p.file_name().is_some_and(|n| n == "restore.log"))
        .collect()
}

/// Once the CRIUs that had `logs` open are dead: removes the root yards those logs name.
fn release_yards(logs: &[PathBuf], out: &mut Swept) {
    use crate::criu::yard::{YardRelease, release_named_in};
    for log in logs {
        for (yard, r) in release_named_in(log) {
            match r {
                YardRelease::Removed => out.criu_yards.push(yard.display().to_string()),
                YardRelease::Absent => {}
                YardRelease::Kept(why) => out.problems.push(format!("CRIU root yard {why}")),
            }
        }
    }
}

/// What [`sweep`] would release now, without releasing anything (`netprobe doctor`): the same
/// lists, `problems` empty.
pub fn find(proc_root: &Path, var_tmp: &Path, tmp: &Path) -> Swept {
    let names =
        |v: Vec<std::fs::DirEntry>| v.iter().map(|e| e.path().display().to_string()).collect();
    use crate::oci::{CRIU_PATH_PREFIX, RUNC_LOG_PREFIX, TmpOwner, left_by_dead_processes};
    Swept {
        processes: dead_runs_processes(proc_root)
            .into_iter()
            .map(|(_, w)| w)
            .collect(),
        holders: dead_runs_holders(proc_root)
            .into_iter()
            .map(|(_, w)| w)
            .collect(),
        container_processes: dead_container_cgroups()
            .iter()
            .flat_map(|(name, dirs)| container_processes(name, dirs))
            .collect(),
        container_cgroups: dead_container_cgroups()
            .into_iter()
            .flat_map(|(_, dirs)| dirs)
            .map(|d| d.display().to_string())
            .collect(),
        work_areas: names(left_by_dead_processes(
            var_tmp,
            crate::probe::util::WORK_AREA_PREFIX,
            "",
            TmpOwner::Untagged,
        )),
        criu_path_dirs: names(left_by_dead_processes(
            tmp,
            CRIU_PATH_PREFIX,
            "",
            TmpOwner::Untagged,
        )),
        runc_logs: names(left_by_dead_processes(
            tmp,
            RUNC_LOG_PREFIX,
            ".log",
            TmpOwner::Untagged,
        )),
        criu_yards: dead_runs_processes(proc_root)
            .into_iter()
            .flat_map(|(pid, _)| open_restore_logs(proc_root, pid))
            .flat_map(|log| {
                crate::criu::yard::yards_named_in(&std::fs::read(log).unwrap_or_default())
            })
            .filter(|y| y.is_dir())
            .map(|y| y.display().to_string())
            .collect(),
        problems: Vec::new(),
    }
}

impl Swept {
    /// Every entry of every list, in the lists' order.
    pub fn items(&self) -> Vec<&str> {
        [
            &self.processes,
            &self.holders,
            &self.container_cgroups,
            &self.container_processes,
            &self.work_areas,
            &self.criu_path_dirs,
            &self.runc_logs,
            &self.criu_yards,
        ]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect()
    }
}

/// Finds and releases what probe runs killed with SIGKILL left (see the module doc), in
/// order: holders, containers (by their cgroups), work areas (mounts below detached first),
/// the temporary CRIU PATH folders and runc logs. `proc_root` is `/proc`; `var_tmp` is
/// `/var/tmp` and `tmp` the temporary folder (parameters for tests).
pub fn sweep(proc_root: &Path, var_tmp: &Path, tmp: &Path) -> Swept {
    let mut out = Swept::default();
    // A runtime or CRIU first: a restore left running would bring a holder back after its
    // sweep.
    let found = dead_runs_processes(proc_root);
    let logs: Vec<PathBuf> = found
        .iter()
        .flat_map(|(pid, _)| open_restore_logs(proc_root, *pid))
        .collect();
    kill_and_wait(
        proc_root,
        found,
        true,
        &mut out.processes,
        &mut out.problems,
    );
    release_yards(&logs, &mut out);
    let found = dead_runs_holders(proc_root);
    kill_and_wait(proc_root, found, false, &mut out.holders, &mut out.problems);
    sweep_container_cgroups(&mut out);
    let untagged = crate::oci::TmpOwner::Untagged;
    let area = crate::probe::util::WORK_AREA_PREFIX;
    for e in crate::oci::left_by_dead_processes(var_tmp, area, "", untagged) {
        let p = e.path();
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        match crate::probe::util::remove_work_area(&p) {
            true => out.work_areas.push(p.display().to_string()),
            false => out.problems.push(format!(
                "{}: left in place: a mount below it could not be detached",
                p.display()
            )),
        }
    }
    let names = |v: Vec<PathBuf>| v.iter().map(|p| p.display().to_string()).collect();
    out.criu_path_dirs = names(crate::oci::sweep_stale_criu_path_dirs(tmp, untagged));
    out.runc_logs = names(crate::oci::sweep_stale_runc_logs(tmp, untagged));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_criu_s_yard_is_found_through_its_open_log() {
        let proc_root = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let fd = proc_root.path().join("4242/fd");
        std::fs::create_dir_all(&fd).unwrap();
        let log = work.path().join("restore.log");
        std::os::unix::fs::symlink(&log, fd.join("4")).unwrap();
        std::os::unix::fs::symlink(work.path().join("other.log"), fd.join("5")).unwrap();
        assert_eq!(open_restore_logs(proc_root.path(), 4242), vec![log.clone()]);
        assert!(open_restore_logs(proc_root.path(), 4243).is_empty());
        let n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
            % 10_000;
        let y = PathBuf::from(format!("/tmp/.criu.mntns.sw{n:04}"));
        std::fs::create_dir(&y).unwrap();
        std::fs::write(
            &log,
            format!("mnt: Move the root to {}/13-0\n", y.display()),
        )
        .unwrap();
        let mut out = Swept::default();
        release_yards(&[log], &mut out);
        assert_eq!(out.criu_yards, vec![y.display().to_string()]);
        assert!(!y.exists() && out.problems.is_empty());
        assert!(
            out.summary().contains("1 CRIU root yard(s)"),
            "{}",
            out.summary()
        );
    }

    #[test]
    fn a_holder_names_its_run_and_a_slot_holder_none() {
        assert_eq!(
            holder_run_pid(b"/x/netprobe\0__holder\0--report-fd\x007\0--lo-up\0--run-pid\x00412\0"),
            Some(412)
        );
        assert_eq!(
            holder_run_pid(b"/x/netprobe\0__holder\0--report-fd\x007\0--keep-fd\x008\0"),
            None
        );
        assert_eq!(holder_run_pid(b"sleep\0--run-pid\x00412\0"), None);
        assert_eq!(holder_run_pid(b"/x/netprobe\0__holder\0--run-pid\0"), None);
    }

    #[test]
    fn a_marked_environment_names_its_run() {
        let key = crate::proc::RUN_PID_ENV;
        let env = format!("PATH=/bin\0{key}=77\0HOME=/\0");
        assert_eq!(environ_run_pid(env.as_bytes()), Some(77));
        assert_eq!(environ_run_pid(b"PATH=/bin\0HOME=/\0"), None);
        let other = format!("X{key}=5\0");
        assert_eq!(environ_run_pid(other.as_bytes()), None);
    }

    #[test]
    fn a_probe_container_cgroup_names_its_run() {
        assert_eq!(
            container_run_pid("netprobe-external-netns-22530-1796421548665148979"),
            Some(22530)
        );
        assert_eq!(container_run_pid("netprobe-oci-7-12"), Some(7));
        // A slot's cgroup parent, another rung's name, a malformed id.
        assert_eq!(container_run_pid("netprobe"), None);
        assert_eq!(container_run_pid("netprobe-criu-7-12"), None);
        assert_eq!(container_run_pid("netprobe-oci-x-12"), None);
        assert_eq!(container_run_pid("netprobe-oci-7-"), None);
        assert_eq!(container_run_pid("slot-3-abcdef12"), None);
    }

    #[test]
    fn a_zombie_or_a_missing_pid_has_left() {
        let tmp = tempfile::tempdir().unwrap();
        for (pid, stat) in [(1, "1 (a b) S 0"), (2, "2 (x) y) Z 1"), (3, "3 (t) R 1")] {
            std::fs::create_dir_all(tmp.path().join(pid.to_string())).unwrap();
            std::fs::write(tmp.path().join(format!("{pid}/stat")), stat).unwrap();
        }
        assert!(!gone(tmp.path(), 1));
        assert!(gone(tmp.path(), 2));
        assert!(!gone(tmp.path(), 3));
        assert!(gone(tmp.path(), 4));
    }

    #[test]
    fn the_summary_counts_what_was_released() {
        let s = Swept {
            holders: vec!["pid 1".into()],
            container_cgroups: vec!["/a".into(), "/b".into()],
            problems: vec!["x".into()],
            ..Swept::default()
        };
        assert_eq!(
            s.summary(),
            "1 holder(s), 2 container cgroup folder(s), 1 not released"
        );
        assert!(Swept::default().is_empty() && !s.is_empty());
    }
}
