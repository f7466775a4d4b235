//! Read a process's cgroup limits back from the cgroup file system, v1 or v2, naming every file
//! read (the evidence of the slot's `cgroup-limits` gate).
//!
//! v2 (`Documentation/admin-guide/cgroup-v2.rst`): the process's cgroup is the `0::` line of
//! `/proc/PID/cgroup`; `cpu.max` is `"$MAX $PERIOD"` (µs, `max` = unlimited), `memory.max` and
//! `memory.swap.max` are bytes or `max` (`memory.swap.max` is absent without swap accounting).
//! runc writes OCI `memory.swap` (memory + swap) as `memory.swap.max = swap - memory`
//! (`ConvertMemorySwapToCgroupV2Value`), so "no swap" is `0` there.
//! v1: `cpu.cfs_quota_us` (-1 = unlimited), `cpu.cfs_period_us`, `memory.limit_in_bytes`,
//! `memory.memsw.limit_in_bytes` (memory + swap; absent without swap accounting); an unlimited v1
//! memory limit reads as PAGE_COUNTER_MAX rounded to a page (9223372036854771712).

use std::fs;
use std::path::{Path, PathBuf};

use super::error::{CgroupError, Result, io_err};
use super::mode::{CgroupHost, CgroupMode};
use crate::oci::Resources;

/// v1 memory values at or above this are "unlimited" (PAGE_COUNTER_MAX * page size, rounded).
const V1_UNLIMITED_FLOOR: i64 = 0x7FFF_FFFF_FFFF_F000;

/// One file read during a read-back: the evidence.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileRead {
    /// The file, under the root given.
    pub path: PathBuf,
    /// Its content, trimmed.
    pub value: String,
}

/// The limits of one process's cgroup, normalised to OCI `linux.resources` units (µs, bytes; -1
/// unlimited), with the files they came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LimitReadback {
    /// The host's mode when read.
    pub mode: CgroupMode,
    /// The process.
    pub pid: i32,
    /// v2: the cgroup directory; v1: the cpu hierarchy's directory (memory's is in `files`).
    pub cgroup_dir: PathBuf,
    /// CPU quota per period, µs; -1 = unlimited (`max` / `-1`).
    pub cpu_quota: i64,
    /// CPU period, µs.
    pub cpu_period: u64,
    /// Memory limit, bytes; -1 = unlimited.
    pub memory_limit: i64,
    /// Memory + swap, bytes (OCI `memory.swap` semantics); -1 = unlimited; None when the kernel
    /// has no swap accounting (the file is absent).
    pub memory_swap: Option<i64>,
    /// Every file read, in order (`/proc/PID/cgroup` first).
    pub files: Vec<FileRead>,
}

impl LimitReadback {
    /// Compare with what config.json asked for. Ok/Err both carry one line naming every file
    /// and value read; Err adds what was asked. A missing swap file (no swap accounting) is
    /// accepted and said so.
    pub fn check(&self, want: &Resources) -> std::result::Result<String, String> {
        let files: Vec<String> = self
            .files
            .iter()
            .map(|f| format!("{} = {:?}", f.path.display(), f.value))
            .collect();
        let swap = match self.memory_swap {
            Some(s) => s.to_string(),
            None => "absent (no swap accounting)".into(),
        };
        let obs = format!(
            "cgroup {} (pid {}): cpu quota {} period {} µs, memory {} bytes, memory+swap {swap}; read: {}",
            self.mode,
            self.pid,
            self.cpu_quota,
            self.cpu_period,
            self.memory_limit,
            files.join(", ")
        );
        let ok = self.cpu_quota == want.cpu_quota
            && self.cpu_period == want.cpu_period
            && self.memory_limit == want.memory_limit
            && self.memory_swap.is_none_or(|m| m == want.memory_swap);
        if ok {
            Ok(obs)
        } else {
            Err(format!("{obs}; asked {want:?}"))
        }
    }
}

impl LimitReadback {
    /// Each limit that differs from `want`, one sentence each naming the file it was read from
    /// and both values (normalised units: µs, bytes, -1 unlimited), e.g. `memory limit 2147483648
    /// bytes in /sys/fs/cgroup/memory/x/memory.limit_in_bytes ("2147483648"), config.json
    /// 4294967296`. Empty when every limit equals `want` (a missing swap file is not a
    /// difference: no swap accounting).
    pub fn differences(&self, want: &Resources) -> Vec<String> {
        let file = |names: &[&str]| {
            self.files
                .iter()
                .find(|f| {
                    f.path
                        .file_name()
                        .is_some_and(|n| names.iter().any(|w| n == *w))
                })
                .map(|f| format!("{} ({:?})", f.path.display(), f.value))
                .unwrap_or_else(|| "(no file read)".into())
        };
        let mut out = Vec::new();
        let mut one = |what: &str, got: String, names: &[&str], asked: String| {
            out.push(format!(
                "{what} {got} in {}, config.json {asked}",
                file(names)
            ))
        };
        if self.cpu_quota != want.cpu_quota {
            let f = ["cpu.cfs_quota_us", "cpu.max"];
            one(
                "cpu quota",
                format!("{} µs", self.cpu_quota),
                &f,
                format!("{} µs", want.cpu_quota),
            );
        }
        if self.cpu_period != want.cpu_period {
            let f = ["cpu.cfs_period_us", "cpu.max"];
            one(
                "cpu period",
                format!("{} µs", self.cpu_period),
                &f,
                format!("{} µs", want.cpu_period),
            );
        }
        if self.memory_limit != want.memory_limit {
            let f = ["memory.limit_in_bytes", "memory.max"];
            one(
                "memory limit",
                format!("{} bytes", self.memory_limit),
                &f,
                format!("{} bytes", want.memory_limit),
            );
        }
        if let Some(s) = self.memory_swap.filter(|s| *s != want.memory_swap) {
            let f = ["memory.memsw.limit_in_bytes", "memory.swap.max"];
            one(
                "memory+swap",
                format!("{s} bytes"),
                &f,
                format!("{} bytes", want.memory_swap),
            );
        }
        out
    }

    /// The container's cgroup directories in every hierarchy: the directories of the limit
    /// files read, and those of each line of the recorded `/proc/PID/cgroup` (`files[0]`) whose
    /// path is the container's (the cpu line's on v1, the `0::` line's on v2; `/` never is),
    /// mapped through the mounts of the host the read-back was taken under (its root is where
    /// `files[0]` lies; `<root>/proc/self/mountinfo` read again). Hierarchies where the process
    /// sat in another cgroup are not the container's and are left out.
    ///
    /// Errors: [`CgroupError::NoProcCgroupRecorded`], [`CgroupError::NotProcCgroup`], or
    /// [`CgroupHost::detect`]'s error when the host's mounts cannot be read (then the other
    /// hierarchies cannot be checked).
    pub fn container_dirs(&self) -> Result<Vec<PathBuf>> {
        let mut dirs: Vec<PathBuf> = self
            .files
            .iter()
            .skip(1)
            .filter_map(|f| f.path.parent().map(Path::to_path_buf))
            .collect();
        let first = self
            .files
            .first()
            .ok_or(CgroupError::NoProcCgroupRecorded)?;
        let root = first
            .path
            .ends_with(format!("proc/{}/cgroup", self.pid))
            .then(|| first.path.ancestors().nth(3))
            .flatten()
            .ok_or_else(|| CgroupError::NotProcCgroup {
                path: first.path.clone(),
            })?;
        let host = CgroupHost::detect(root)?;
        let lines: Vec<(&str, &str, &str)> = first
            .value
            .lines()
            .filter_map(|l| {
                let mut it = l.splitn(3, ':');
                Some((it.next()?, it.next()?, it.next()?.trim()))
            })
            .collect();
        let own = lines
            .iter()
            .find(|(h, c, _)| match self.mode {
                CgroupMode::Unified => *h == "0" && c.is_empty(),
                _ => c.split(',').any(|c| c == "cpu"),
            })
            .map(|(_, _, p)| *p)
            .filter(|p| *p != "/");
        for (h, c, p) in &lines {
            if Some(*p) != own {
                continue;
            }
            if let Some(m) = host.mount_of_line(h, c) {
                dirs.push(host.cgroup_dir(m, p));
            }
        }
        let mut seen = std::collections::HashSet::new();
        dirs.retain(|d| seen.insert(d.clone()));
        Ok(dirs)
    }

    /// After cleanup: every directory of [`LimitReadback::container_dirs`] no longer exists.
    /// Ok/Err name them (Err: those still there, or why they cannot be listed).
    pub fn dirs_gone(&self) -> std::result::Result<String, String> {
        let dirs = self
            .container_dirs()
            .map_err(|e| format!("cannot list the container's cgroup directories: {e}"))?;
        let left: Vec<String> = dirs
            .iter()
            .filter(|d| d.symlink_metadata().is_ok())
            .map(|d| d.display().to_string())
            .collect();
        let all: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        if left.is_empty() {
            Ok(format!("gone: {}", all.join(", ")))
        } else {
            Err(format!("still there: {}", left.join(", ")))
        }
    }
}

/// Detect the host under `root` (`/` live) and read `pid`'s limits: [`CgroupHost::detect`] then
/// [`read_limits`].
///
/// Errors: as those two.
pub fn read_limits_at(root: &Path, pid: i32) -> Result<LimitReadback> {
    let host = CgroupHost::detect(root)?;
    read_limits(&host, pid)
}

/// Read `pid`'s limits on `host`: `<root>/proc/PID/cgroup`, then v2 files (unified) or v1 files
/// (v1, hybrid).
///
/// Errors: [`CgroupError::ControllersMissing`] (cpu or memory not available),
/// [`CgroupError::NotInCgroup`], [`CgroupError::Io`] (a limit file missing: e.g. the controller
/// is not enabled for that cgroup), [`CgroupError::Parse`].
pub fn read_limits(host: &CgroupHost, pid: i32) -> Result<LimitReadback> {
    host.require_limit_controllers()?;
    let pc = host.root.join(format!("proc/{pid}/cgroup"));
    let text = fs::read_to_string(&pc).map_err(io_err(&pc))?;
    let mut files = vec![FileRead {
        path: pc.clone(),
        value: text.trim().to_string(),
    }];
    match host.mode {
        CgroupMode::Unified => read_v2(host, pid, &pc, &text, files),
        CgroupMode::V1 | CgroupMode::Hybrid => {
            let cpu = v1_dir(host, pid, &pc, &text, "cpu")?;
            let mem = v1_dir(host, pid, &pc, &text, "memory")?;
            let quota = read_i64(&cpu.join("cpu.cfs_quota_us"), &mut files)?;
            let period = read_i64(&cpu.join("cpu.cfs_period_us"), &mut files)?;
            let limit = v1_bytes(read_i64(&mem.join("memory.limit_in_bytes"), &mut files)?);
            let memsw_p = mem.join("memory.memsw.limit_in_bytes");
            let memsw = if memsw_p.exists() {
                Some(v1_bytes(read_i64(&memsw_p, &mut files)?))
            } else {
                None
            };
            Ok(LimitReadback {
                mode: host.mode,
                pid,
                cgroup_dir: cpu,
                cpu_quota: quota,
                cpu_period: period.max(0) as u64,
                memory_limit: limit,
                memory_swap: memsw,
                files,
            })
        }
    }
}

fn read_v2(
    host: &CgroupHost,
    pid: i32,
    pc: &Path,
    text: &str,
    mut files: Vec<FileRead>,
) -> Result<LimitReadback> {
    let path = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| CgroupError::NotInCgroup {
            pid,
            path: pc.to_path_buf(),
            what: "0:: (cgroup v2)".into(),
        })?;
    let m = host.v2_mount().expect("unified mode has a cgroup2 mount");
    let dir = host.cgroup_dir(m, path.trim());
    let cpu_p = dir.join("cpu.max");
    let cpu = read(&cpu_p, &mut files)?;
    let mut it = cpu.split_whitespace();
    let (q, p) = (it.next().unwrap_or(""), it.next().unwrap_or(""));
    let bad = |reason: &str| CgroupError::Parse {
        path: cpu_p.clone(),
        value: cpu.clone(),
        reason: reason.into(),
    };
    let cpu_quota = if q == "max" {
        -1
    } else {
        q.parse::<i64>()
            .map_err(|_| bad("expected \"max|QUOTA PERIOD\""))?
    };
    let cpu_period = p
        .parse::<u64>()
        .map_err(|_| bad("expected a period in µs after the quota"))?;
    let mem_p = dir.join("memory.max");
    let memory_limit = v2_bytes(&mem_p, &read(&mem_p, &mut files)?)?;
    let swap_p = dir.join("memory.swap.max");
    let memory_swap = if swap_p.exists() {
        let swap = v2_bytes(&swap_p, &read(&swap_p, &mut files)?)?;
        Some(if swap < 0 || memory_limit < 0 {
            -1
        } else {
            memory_limit + swap
        })
    } else {
        None
    };
    Ok(LimitReadback {
        mode: host.mode,
        pid,
        cgroup_dir: dir,
        cpu_quota,
        cpu_period,
        memory_limit,
        memory_swap,
        files,
    })
}

/// The directory of `pid`'s v1 cgroup for `controller`.
fn v1_dir(host: &CgroupHost, pid: i32, pc: &Path, text: &str, controller: &str) -> Result<PathBuf> {
    let mount = host
        .v1_mount(controller)
        .expect("require_limit_controllers checked the v1 hierarchy");
    for l in text.lines() {
        let mut it = l.splitn(3, ':');
        let (_, ctrls, path) = (it.next(), it.next().unwrap_or(""), it.next().unwrap_or(""));
        if !ctrls.is_empty() && ctrls.split(',').any(|c| c == controller) {
            return Ok(host.cgroup_dir(mount, path));
        }
    }
    Err(CgroupError::NotInCgroup {
        pid,
        path: pc.to_path_buf(),
        what: format!("{controller} controller"),
    })
}

fn read(p: &Path, files: &mut Vec<FileRead>) -> Result<String> {
    let v = fs::read_to_string(p).map_err(io_err(p))?.trim().to_string();
    files.push(FileRead {
        path: p.to_path_buf(),
        value: v.clone(),
    });
    Ok(v)
}

/// Read a v1 integer file.
fn read_i64(p: &Path, files: &mut Vec<FileRead>) -> Result<i64> {
    let v = read(p, files)?;
    v.parse::<i64>().map_err(|_| CgroupError::Parse {
        path: p.to_path_buf(),
        value: v,
        reason: "expected an integer".into(),
    })
}

fn v1_bytes(v: i64) -> i64 {
    if v >= V1_UNLIMITED_FLOOR { -1 } else { v }
}

fn v2_bytes(p: &Path, v: &str) -> Result<i64> {
    if v == "max" {
        return Ok(-1);
    }
    v.parse::<i64>().map_err(|_| CgroupError::Parse {
        path: p.to_path_buf(),
        value: v.into(),
        reason: "expected bytes or \"max\"".into(),
    })
}
