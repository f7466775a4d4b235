//! cgroups as the slot needs them: the host's mode (v1, hybrid, unified) from mountinfo, a
//! container's limits read back from its cgroup files (v1 or v2) with every file named, and the
//! cgroup driver (cgroupfs or systemd): its choice, the runtime flag, `cgroupsPath`, the systemd
//! unit's properties, the scope's removal, and CRIU's `--manage-cgroups` mode.
//!
//! Every function that touches the file system takes a root (`/` on a live host), so unit tests
//! run over fixture trees for every mode without root.

pub mod check;
pub mod driver;
pub mod error;
pub mod limits;
pub mod mode;
pub mod systemd;

pub use driver::{CgroupDriver, DriverChoice, ManageCgroupsMode, systemd_booted};
pub use error::{CgroupError, Result};
pub use limits::{FileRead, LimitReadback, read_limits, read_limits_at};
pub use mode::{CgroupHost, CgroupMode, CgroupMount, CgroupVersion, parse_mountinfo};
