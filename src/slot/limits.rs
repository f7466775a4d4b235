//! The `cgroup-limits` gate's read-back, as a pure function of a cgroup root folder and a
//! process's `/proc/<pid>/cgroup` text (cgroup v1: `cpu` and `memory` controllers), so it is
//! unit-tested over a temporary folder. The live call reads `/proc/<pid>/cgroup` and uses
//! `/sys/fs/cgroup` ([`read_limits_of_pid`]).

use super::gate::Observed;
use crate::oci::Resources;
use std::fs;
use std::path::{Path, PathBuf};

/// The host's cgroup root.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The v1 cgroup folder of `controller` for a process whose `/proc/<pid>/cgroup` is
/// `proc_cgroup`: `<root>/<controllers>/<path>`.
///
/// Errors: no line names `controller` (e.g. a cgroup v2-only process).
pub fn cgroup_dir(root: &Path, proc_cgroup: &str, controller: &str) -> Result<PathBuf, String> {
    for l in proc_cgroup.lines() {
        let mut it = l.splitn(3, ':');
        let (_, ctrls, path) = (it.next(), it.next().unwrap_or(""), it.next().unwrap_or(""));
        if ctrls.split(',').any(|c| c == controller) {
            return Ok(root.join(ctrls).join(path.trim_start_matches('/')));
        }
    }
    Err(format!("no {controller} cgroup (cgroup v1 expected)"))
}

/// Reads back cpu quota/period and memory limit (and memsw when swap accounting exists) from
/// the cgroup folders under `root` named by `proc_cgroup`, and compares them with `want`.
/// Returns the observed values as a gate detail (`<cpu dir>: cfs_quota_us Q cfs_period_us P;
/// <memory dir>: limit_in_bytes L memsw.limit_in_bytes M`).
///
/// Errors: the detail (plus `; asked …`) when a value differs, or the file that could not be
/// read or parsed.
pub fn read_limits(root: &Path, proc_cgroup: &str, want: &Resources) -> Observed {
    let rd = |p: PathBuf| -> Result<i64, String> {
        fs::read_to_string(&p)
            .map_err(|e| format!("{}: {e}", p.display()))?
            .trim()
            .parse::<i64>()
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let cpu = cgroup_dir(root, proc_cgroup, "cpu")?;
    let mem = cgroup_dir(root, proc_cgroup, "memory")?;
    let quota = rd(cpu.join("cpu.cfs_quota_us"))?;
    let period = rd(cpu.join("cpu.cfs_period_us"))?;
    let limit = rd(mem.join("memory.limit_in_bytes"))?;
    let memsw_p = mem.join("memory.memsw.limit_in_bytes");
    let memsw = if memsw_p.exists() {
        Some(rd(memsw_p)?)
    } else {
        None
    };
    let obs = format!(
        "{}: cfs_quota_us {quota} cfs_period_us {period}; {}: limit_in_bytes {limit} memsw.limit_in_bytes {}",
        cpu.display(),
        mem.display(),
        memsw
            .map(|v| v.to_string())
            .unwrap_or_else(|| "absent (no swap accounting)".into())
    );
    let ok = quota == want.cpu_quota
        && period as u64 == want.cpu_period
        && limit == want.memory_limit
        && memsw.is_none_or(|m| m == want.memory_swap);
    if ok {
        Ok(obs)
    } else {
        Err(format!("{obs}; asked {want:?}"))
    }
}

/// [`read_limits`] for the live process `pid` under [`CGROUP_ROOT`].
///
/// Errors: `/proc/<pid>/cgroup` unreadable (named), or those of [`read_limits`] (prefixed with
/// the pid when the controller is missing).
pub fn read_limits_of_pid(pid: i32, want: &Resources) -> Observed {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map_err(|e| format!("/proc/{pid}/cgroup: {e}"))?;
    read_limits(Path::new(CGROUP_ROOT), &text, want).map_err(|e| {
        if e.starts_with("no ") {
            format!("pid {pid} has {e}")
        } else {
            e
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const WANT: Resources = crate::slot::SLOT_RESOURCES;

    fn tree(memsw: Option<&str>, quota: &str) -> (tempfile::TempDir, String) {
        let d = tempfile::tempdir().unwrap();
        let cpu = d.path().join("cpu,cpuacct/np/slot-1");
        let mem = d.path().join("memory/np/slot-1");
        fs::create_dir_all(&cpu).unwrap();
        fs::create_dir_all(&mem).unwrap();
        fs::write(cpu.join("cpu.cfs_quota_us"), quota).unwrap();
        fs::write(cpu.join("cpu.cfs_period_us"), "100000\n").unwrap();
        fs::write(mem.join("memory.limit_in_bytes"), "4294967296\n").unwrap();
        if let Some(m) = memsw {
            fs::write(mem.join("memory.memsw.limit_in_bytes"), m).unwrap();
        }
        let text = "12:memory:/np/slot-1\n4:cpu,cpuacct:/np/slot-1\n0::/\n".to_string();
        (d, text)
    }

    #[test]
    fn limits_read_back_from_a_given_root() {
        let (d, text) = tree(Some("4294967296\n"), "400000\n");
        let ok = read_limits(d.path(), &text, &WANT).unwrap();
        assert!(
            ok.contains("cfs_quota_us 400000 cfs_period_us 100000"),
            "{ok}"
        );
        assert!(ok.contains("memsw.limit_in_bytes 4294967296"), "{ok}");
        let (d, text) = tree(None, "400000\n");
        let ok = read_limits(d.path(), &text, &WANT).unwrap();
        assert!(ok.contains("absent (no swap accounting)"), "{ok}");
    }

    #[test]
    fn a_different_or_missing_limit_fails() {
        let (d, text) = tree(Some("8589934592"), "400000");
        let e = read_limits(d.path(), &text, &WANT).unwrap_err();
        assert!(e.contains("asked"), "{e}");
        let (d, text) = tree(None, "-1");
        assert!(read_limits(d.path(), &text, &WANT).is_err());
        let e = read_limits(d.path(), "0::/\n", &WANT).unwrap_err();
        assert!(e.contains("no cpu cgroup"), "{e}");
        let e = read_limits(Path::new("/nonexistent"), &text, &WANT).unwrap_err();
        assert!(e.contains("/nonexistent/cpu,cpuacct"), "{e}");
    }
}
