//! The cgroup driver: `cgroupfs` (the runtime writes cgroup files itself) or `systemd` (the
//! runtime asks systemd over D-Bus for a transient scope unit and systemd writes the files), the
//! runtime flag and `cgroupsPath` that go with it, and CRIU's `--manage-cgroups` mode for it.
//!
//! Sources: runc(8) global option `--systemd-cgroup` ("enable systemd cgroup support, expects
//! cgroupsPath to be of form "slice:prefix:name" for e.g. "system.slice:runc:434234""); runc's
//! systemd manager names the unit `<prefix>-<name>.scope` inside `<slice>`; `sd_booted(3)`:
//! systemd is pid 1 iff `/run/systemd/system/` exists; runc checkpoint/restore
//! `--manage-cgroups-mode` (`soft` default, `full`, `strict`; `ignore` since runc 1.2.0,
//! opencontainers/runc#3546).

use std::path::{Path, PathBuf};

use super::error::{CgroupError, Result};

/// Which component writes the container's cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupDriver {
    /// The runtime creates and writes the cgroup directory itself (runc's default).
    Cgroupfs,
    /// systemd creates a transient scope unit with the limits as unit properties
    /// (`--systemd-cgroup`); the unit must be stopped for the cgroup to go.
    Systemd,
}

impl CgroupDriver {
    /// `cgroupfs` or `systemd` (the profile field's values).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cgroupfs => "cgroupfs",
            Self::Systemd => "systemd",
        }
    }

    /// The runtime's global flags for this driver: `["--systemd-cgroup"]` or none. They go
    /// before the verb on every call (create, state, checkpoint, restore, delete), since runc
    /// records the manager in its state but needs the flag to pick it for a restore.
    pub fn runtime_global_args(self) -> &'static [&'static str] {
        match self {
            Self::Cgroupfs => &[],
            Self::Systemd => &["--systemd-cgroup"],
        }
    }
}

impl std::fmt::Display for CgroupDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for CgroupDriver {
    type Err = CgroupError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "cgroupfs" => Ok(Self::Cgroupfs),
            "systemd" => Ok(Self::Systemd),
            other => Err(CgroupError::UnknownDriver(other.into())),
        }
    }
}

/// `sd_booted()` under `root`: `<root>/run/systemd/system` is a directory. Also returns pid 1's
/// `comm` (for messages; `?` when unreadable).
pub fn systemd_booted(root: &Path) -> (bool, String) {
    let marker = root.join("run/systemd/system");
    let comm = std::fs::read_to_string(root.join("proc/1/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    (marker.is_dir(), comm)
}

/// The driver a slot uses and why (recorded in the slot's state and evidence).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DriverChoice {
    /// The driver.
    pub driver: CgroupDriver,
    /// `requested` (the `--cgroup-driver` flag), `profile` (the profile's `cgroup_driver`;
    /// set by the slot) or `default`.
    pub source: String,
    /// Whether systemd is pid 1 on the host (`sd_booted`).
    pub systemd_pid1: bool,
    /// Pid 1's `comm`.
    pub pid1: String,
}

impl DriverChoice {
    /// Choose the driver under `root` (`/` live): the requested one, else systemd where systemd
    /// is pid 1 and cgroupfs elsewhere.
    ///
    /// Errors: [`CgroupError::SystemdNotPid1`] (exit class 3) when systemd is requested on a host
    /// whose pid 1 is not systemd.
    pub fn choose(root: &Path, requested: Option<CgroupDriver>) -> Result<Self> {
        let (booted, pid1) = systemd_booted(root);
        let (driver, source) = match requested {
            Some(CgroupDriver::Systemd) if !booted => {
                return Err(CgroupError::SystemdNotPid1 {
                    pid1,
                    marker: PathBuf::from("/run/systemd/system"),
                });
            }
            Some(d) => (d, "requested"),
            None if booted => (CgroupDriver::Systemd, "default"),
            None => (CgroupDriver::Cgroupfs, "default"),
        };
        Ok(Self {
            driver,
            source: source.into(),
            systemd_pid1: booted,
            pid1,
        })
    }
}

/// CRIU's cgroup handling at checkpoint/restore (`runc checkpoint|restore
/// --manage-cgroups-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ManageCgroupsMode {
    /// CRIU restores cgroup properties only for cgroups it creates (runc's default).
    Soft,
    /// CRIU does not dump or restore cgroups; the runtime has put the container in its cgroup.
    Ignore,
}

impl ManageCgroupsMode {
    /// The value for `--manage-cgroups-mode`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Soft => "soft",
            Self::Ignore => "ignore",
        }
    }

    /// The mode for `driver` with a runtime of `runtime_version` (`runc --version`'s first line,
    /// e.g. `runc version 1.1.5+ds1`), and why. cgroupfs: `soft` (the runtime creates the cgroup
    /// before CRIU restores into it, so CRIU sets nothing on it). systemd: `ignore` where the
    /// runtime has it (runc ≥ 1.2.0): the scope belongs to systemd and CRIU must neither create
    /// nor write cgroups under it; older runtimes only know `soft`, which leaves the unit's
    /// properties alone too (CRIU writes properties only of cgroups it creates) — recorded.
    pub fn for_driver(driver: CgroupDriver, runtime_version: &str) -> (Self, String) {
        match driver {
            CgroupDriver::Cgroupfs => (
                Self::Soft,
                "cgroupfs: the runtime creates the container's cgroup before CRIU restores into it; soft (CRIU restores properties only of cgroups it creates)".into(),
            ),
            CgroupDriver::Systemd if runc_at_least(runtime_version, (1, 2)) => (
                Self::Ignore,
                format!("systemd: the scope unit is systemd's; CRIU must not create or write cgroups ({runtime_version} has ignore)"),
            ),
            CgroupDriver::Systemd => (
                Self::Soft,
                format!("systemd: ignore would keep CRIU off the unit's cgroup, but {runtime_version:?} has no ignore mode (runc < 1.2.0); soft writes properties only of cgroups CRIU creates"),
            ),
        }
    }
}

/// Whether a `runc version X.Y.Z…` line is at least `min` (major, minor). Other runtimes
/// (crun: `crun version 1.28`) are compared the same way.
fn runc_at_least(line: &str, min: (u32, u32)) -> bool {
    let v = line
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()));
    let Some(v) = v else { return false };
    let mut it = v.split(|c: char| !c.is_ascii_digit());
    let major = it.next().and_then(|s| s.parse::<u32>().ok()).unwrap_or(0);
    let minor = it.next().and_then(|s| s.parse::<u32>().ok()).unwrap_or(0);
    (major, minor) >= min
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_with(systemd: bool, comm: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc/1")).unwrap();
        std::fs::write(d.path().join("proc/1/comm"), format!("{comm}\n")).unwrap();
        if systemd {
            std::fs::create_dir_all(d.path().join("run/systemd/system")).unwrap();
        }
        d
    }

    #[test]
    fn default_follows_pid1() {
        let s = root_with(true, "systemd");
        let c = DriverChoice::choose(s.path(), None).unwrap();
        assert_eq!(
            (c.driver, c.source.as_str()),
            (CgroupDriver::Systemd, "default")
        );
        let n = root_with(false, "bash");
        let c = DriverChoice::choose(n.path(), None).unwrap();
        assert_eq!(
            (c.driver, c.pid1.as_str()),
            (CgroupDriver::Cgroupfs, "bash")
        );
        let c = DriverChoice::choose(s.path(), Some(CgroupDriver::Cgroupfs)).unwrap();
        assert_eq!(
            (c.driver, c.source.as_str()),
            (CgroupDriver::Cgroupfs, "requested")
        );
    }

    #[test]
    fn systemd_where_not_pid1_is_refused() {
        let n = root_with(false, "tini");
        let e = DriverChoice::choose(n.path(), Some(CgroupDriver::Systemd)).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        let m = e.to_string();
        assert!(m.contains("\"tini\"") && m.contains("cgroupfs"), "{m}");
    }

    #[test]
    fn driver_names_and_flags() {
        assert_eq!(
            "systemd".parse::<CgroupDriver>().unwrap(),
            CgroupDriver::Systemd
        );
        let e = "sd".parse::<CgroupDriver>().unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            CgroupDriver::Systemd.runtime_global_args(),
            ["--systemd-cgroup"]
        );
        assert!(CgroupDriver::Cgroupfs.runtime_global_args().is_empty());
    }

    #[test]
    fn manage_cgroups_mode_per_driver() {
        let m = |d, v| ManageCgroupsMode::for_driver(d, v).0;
        assert_eq!(
            m(CgroupDriver::Cgroupfs, "runc version 1.4.3"),
            ManageCgroupsMode::Soft
        );
        assert_eq!(
            m(CgroupDriver::Systemd, "runc version 1.1.5+ds1"),
            ManageCgroupsMode::Soft
        );
        assert_eq!(
            m(CgroupDriver::Systemd, "runc version 1.2.0"),
            ManageCgroupsMode::Ignore
        );
        assert_eq!(
            m(CgroupDriver::Systemd, "runc version 1.10.1"),
            ManageCgroupsMode::Ignore
        );
        assert_eq!(m(CgroupDriver::Systemd, "garbage"), ManageCgroupsMode::Soft);
        assert_eq!(ManageCgroupsMode::Ignore.as_str(), "ignore");
    }
}
