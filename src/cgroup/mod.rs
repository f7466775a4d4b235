//! cgroups as the slot needs them: the host's mode (v1, hybrid, unified) from mountinfo, a
//! container's limits read back from its cgroup files (v1 or v2) with every file named, and the
//! cgroup driver (cgroupfs or systemd): its choice, the runtime flag, `cgroupsPath`, the systemd
//! unit's properties, the scope's removal, and CRIU's `--manage-cgroups` mode.
//!
//! Every function that touches the file system takes a root (`/` on a live host), so unit tests
//! run over fixture trees for every mode without root.
//!
//! # Wiring into the slot (done in `crate::slot::cgroups`; `check::run_check` is the same
//! sequence on its own)
//! 1. Profile field / slot option `cgroup-driver = "systemd" | "cgroupfs"` parsed with
//!    `CgroupDriver::from_str` (bad name: exit 2).
//! 2. provision, before anything is started: `CgroupHost::detect("/")` +
//!    `require_limit_controllers()` (exit 3), `DriverChoice::choose("/", requested)` (systemd
//!    where it is not pid 1: exit 3); keep the choice and the mode in the slot state.
//!    `cgroupsPath`: cgroupfs as today (`/netprobe/slot-N-<id8>`), systemd
//!    `systemd::SystemdCgroupsPath::for_slot(N, id).to_cgroups_path()`
//!    (`system.slice:netprobe:slot-N-<id8>`, unit `netprobe-slot-N-<id8>.scope`).
//! 3. Every runtime the slot builds: `Runtime::with_systemd_cgroup(driver == Systemd)` (all
//!    verbs, including state, delete, checkpoint, restore).
//! 4. Ready gate `cgroup-limits` (after provision, restore and reset): `read_limits(&host, pid)`
//!    → `LimitReadback::check(&st.resources)`; the readback JSON is the gate's evidence (every
//!    file named). systemd in addition: `systemd::show_unit` (as created, recorded), then
//!    `systemd::align_unit` (runc 1.1.5 leaves `MemorySwapMax=infinity`; record what was set as
//!    a declared difference), `show_unit` again → `UnitLimits::check` as gate
//!    `cgroup-unit-limits`, and the process's `0::` line = the unit's `ControlGroup`.
//! 5. snapshot / restore / reset: `ManageCgroupsMode::for_driver(driver, runtime_version)` →
//!    `["--manage-cgroups-mode", mode]` in `extra` of `Runtime::checkpoint` and
//!    `Runtime::restore`; mode and reason recorded as slot facts.
//! 6. cleanup, after the container is proven gone: systemd → `systemd::remove_scope(unit)`
//!    (evidence; `stopped: true` means the runtime had left it); both drivers →
//!    `LimitReadback::dirs_gone()` on the last readback. runc leaves the parent directories it
//!    created for a cgroupfs path (`/netprobe`): shared by slots, left (declared).
//!    The slot records it all as gate `cgroup-released` (recorded, not blocking) and a problem
//!    of gate `released`.

pub mod check;
pub mod driver;
pub mod error;
pub mod find;
pub mod limits;
pub mod mode;
pub mod systemd;

pub use driver::{CgroupDriver, DriverChoice, ManageCgroupsMode, systemd_booted};
pub use error::{CgroupError, Result, UnitValueError};
pub use limits::{FileRead, LimitReadback, read_limits, read_limits_at};
pub use mode::{CgroupHost, CgroupMode, CgroupMount, CgroupVersion, parse_mountinfo};
