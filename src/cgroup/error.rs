//! [`CgroupError`]: why the container's cgroup or its limits could not be read, or why the
//! requested cgroup driver does not fit the host.

use std::path::PathBuf;

/// Why a cgroup fact could not be established. Every message names the input and the way out.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file (under the given root).
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// mountinfo lists no cgroup (v1) and no cgroup2 file system at all.
    #[error(
        "{mountinfo} lists neither a cgroup v1 nor a cgroup v2 mount: mount cgroup2 on /sys/fs/cgroup (or the v1 cpu and memory hierarchies) and run again"
    )]
    NoCgroupMounts {
        /// The mountinfo file read.
        mountinfo: PathBuf,
    },
    /// The controllers the limit read-back needs (cpu, memory) are not available.
    #[error(
        "cgroup {mode} host without the {missing:?} controller(s) ({detail}): the container's limits cannot be read back; enable them (cgroup v2: `+cpu +memory` in the root's cgroup.subtree_control; v1: mount the hierarchies)"
    )]
    ControllersMissing {
        /// `v1`, `hybrid` or `unified`.
        mode: String,
        /// The missing controllers, e.g. `["memory"]`.
        missing: Vec<String>,
        /// Where they were looked for.
        detail: String,
    },
    /// `/proc/PID/cgroup` has no line for the controller (v1) or no `0::` line (v2).
    #[error("{path} has no {what} line: is pid {pid} alive and inside a container's cgroup?")]
    NotInCgroup {
        /// The process.
        pid: i32,
        /// The file read.
        path: PathBuf,
        /// `cpu controller`, `memory controller` or `0:: (cgroup v2)`.
        what: String,
    },
    /// A limit file held something that is not a limit.
    #[error("{path}: cannot parse {value:?}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Its content, trimmed.
        value: String,
        /// What was expected.
        reason: String,
    },
    /// The systemd cgroup driver was asked for on a host where systemd is not pid 1.
    #[error(
        "the systemd cgroup driver needs systemd as pid 1, but this host's pid 1 is {pid1:?} ({marker} absent): use the cgroupfs driver (`netprobe cgroup --driver cgroupfs`; `slot provision --cgroup-driver cgroupfs`, or `cgroup_driver = \"cgroupfs\"` in a slot profile) or leave the driver unset for the default"
    )]
    SystemdNotPid1 {
        /// `/proc/1/comm` of the host, trimmed.
        pid1: String,
        /// The `sd_booted()` marker directory looked for.
        marker: PathBuf,
    },
    /// An unknown cgroup driver name.
    #[error("unknown cgroup driver {0:?}: use \"systemd\" or \"cgroupfs\"")]
    UnknownDriver(String),
    /// A systemd cgroupsPath part is malformed.
    #[error(
        "bad systemd cgroupsPath part {part:?}: {reason} (expected slice:prefix:name, e.g. system.slice:netprobe:slot-0)"
    )]
    BadSystemdPath {
        /// The offending part.
        part: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `systemctl` could not be run or failed.
    #[error("`{argv}` failed: {detail}")]
    Systemctl {
        /// The command line.
        argv: String,
        /// Exit status and stderr, or the spawn error.
        detail: String,
    },
    /// `systemctl show` output lacked a property or held a value that is not one.
    #[error("systemctl show {unit}: property {property}: {reason}")]
    UnitProperty {
        /// The unit.
        unit: String,
        /// The property, e.g. `MemoryMax`.
        property: String,
        /// What is wrong.
        reason: String,
    },
    /// A read-back records no `/proc/PID/cgroup` (its first file).
    #[error("no /proc/PID/cgroup recorded")]
    NoProcCgroupRecorded,
    /// A read-back's first file is not a `/proc/PID/cgroup` of its pid.
    #[error("{} is not a /proc/PID/cgroup", path.display())]
    NotProcCgroup {
        /// The file recorded first.
        path: PathBuf,
    },
}

/// A value of `systemctl show` that is not one ([`super::systemd::parse_timespan_us`], byte
/// counts); the text goes into [`CgroupError::UnitProperty`]'s reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitValueError {
    /// A time span token has a unit systemd does not print.
    #[error("unknown time unit in {0:?}")]
    UnknownTimeUnit(String),
    /// A time span token's number does not parse.
    #[error("bad number in {0:?}")]
    BadNumber(String),
    /// The time span is empty.
    #[error("empty time span")]
    EmptyTimeSpan,
    /// A byte count is neither a number nor `infinity`.
    #[error("bad byte count {0:?}")]
    BadByteCount(String),
}

impl CgroupError {
    /// The CLI exit class (README's table): 3 (host refused) for a host that lacks cgroups,
    /// controllers or systemd as pid 1; 2 (usage) for a malformed driver name or path; 4 (a phase
    /// could not run) for everything else.
    pub fn exit_class(&self) -> crate::exit::ExitClass {
        use crate::exit::ExitClass;
        match self {
            Self::NoCgroupMounts { .. }
            | Self::ControllersMissing { .. }
            | Self::SystemdNotPid1 { .. } => ExitClass::HostRefused,
            Self::UnknownDriver(_) | Self::BadSystemdPath { .. } => ExitClass::Usage,
            _ => ExitClass::CouldNotRun,
        }
    }

    /// The process exit code of [`CgroupError::exit_class`]: 2, 3 or 4.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.exit_class().code())
    }
}

/// Result with [`CgroupError`].
pub type Result<T> = std::result::Result<T, CgroupError>;

/// Map an I/O error on `path` into [`CgroupError::Io`].
pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.to_path_buf(),
        source,
    }
}
