//! The slot profile's data model: a TOML file (serde, every table `deny_unknown_fields`) naming
//! what the slot driver must not guess about a guest. JSON Schema:
//! `evidence-schema/slot-profile.schema.json` (the same document as JSON).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Docker's default capability set (moby `oci/caps/defaults.go`), written out: the default of
/// [`Security::capabilities`].
pub const DOCKER_DEFAULT_CAPS: [&str; 14] = [
    "CAP_AUDIT_WRITE",
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_MKNOD",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_RAW",
    "CAP_SETFCAP",
    "CAP_SETGID",
    "CAP_SETPCAP",
    "CAP_SETUID",
    "CAP_SYS_CHROOT",
];

/// The least time the readiness checks get, milliseconds (20 s): a smaller
/// `readiness_timeout_ms` is raised to it.
pub const READINESS_TIMEOUT_FLOOR_MS: u64 = 20_000;

/// The largest `readiness_timeout_ms` a profile may give, milliseconds (1 hour): provision must
/// end; a guest that needs longer is broken.
pub const READINESS_TIMEOUT_MAX_MS: u64 = 3_600_000;

/// The largest `resources.memory_bytes` and `resources.swap_bytes`, bytes (1 TiB each): far
/// above any guest, and their sum (OCI `memory.swap`) stays a value the kernel accepts.
pub const MAX_MEMORY_BYTES: i64 = 1 << 40;

/// The current profile format version (`schema_version`).
pub const PROFILE_SCHEMA_VERSION: u32 = 1;

/// A slot profile (one TOML file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Format version; must be [`PROFILE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Short name, e.g. `desktop` (evidence and reports show it).
    pub name: String,
    /// One line for people.
    #[serde(default)]
    pub description: String,
    /// The guest's root filesystem.
    pub image: Image,
    /// Mount options of the container's rootfs overlay over the image (default `index=off`).
    #[serde(default)]
    pub overlay: super::overlay::OverlaySpec,
    /// The container's init process.
    pub process: Process,
    /// Capabilities, seccomp, AppArmor.
    #[serde(default)]
    pub security: Security,
    /// cgroup limits.
    #[serde(default)]
    pub resources: ResourceLimits,
    /// Extra mounts (tmpfs `/tmp`, `/dev/shm` size).
    #[serde(default)]
    pub mounts: Mounts,
    /// The guest's network facts (the port its server listens on inside the netns).
    #[serde(default)]
    pub network: Network,
    /// The guest's X display, if it has one (enables the display gates).
    #[serde(default)]
    pub display: Option<DisplaySpec>,
    /// Checks that must pass before provision reports ready, run in this order (a display or
    /// guest port not listed here is still checked after them).
    #[serde(default)]
    pub readiness: Vec<Readiness>,
    /// How long all readiness checks together may take, milliseconds (default 60000). A value
    /// below [`READINESS_TIMEOUT_FLOOR_MS`] is raised to it when the profile is parsed (so the
    /// recorded value is the one used); one above [`READINESS_TIMEOUT_MAX_MS`] is refused.
    #[serde(default = "default_readiness_timeout_ms")]
    pub readiness_timeout_ms: u64,
    /// The cgroup driver the runtime is told to use; None: the runtime's default.
    #[serde(default)]
    pub cgroup_driver: Option<CgroupDriver>,
    /// Retention of the slot's evidence (`[evidence] keep = N`). Default: every verb folder is
    /// kept (not serialized, so a profile without it records the same bytes as before).
    #[serde(default, skip_serializing_if = "EvidenceSpec::is_default")]
    pub evidence: EvidenceSpec,
}

/// `[evidence]`: how much of a slot's evidence its verbs keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct EvidenceSpec {
    /// After each verb that succeeded, the slot driver removes the oldest verb folders beyond
    /// the `keep` newest, as `netprobe slot prune --keep N` does (the provision's, the last
    /// snapshot's, a failed verb's and a folder a kept one refers to are always kept; each
    /// removal journalled with its `verb.json` sha256 and why). A whole number of at least 1;
    /// `None`: nothing is removed.
    #[serde(
        default,
        deserialize_with = "keep_from_toml",
        skip_serializing_if = "Option::is_none"
    )]
    pub keep: Option<std::num::NonZeroU32>,
}

impl EvidenceSpec {
    fn is_default(&self) -> bool {
        *self == EvidenceSpec::default()
    }
}

/// The words of a bad `evidence.keep` (the key, what is wrong, the fix).
pub const KEEP_FIX: &str = "evidence.keep: give the number of verb folders to keep, a whole number of at least 1 (e.g. keep = 20), or remove the key to keep every folder";

/// `evidence.keep` as written: a whole number from 1 to 4294967295; `0`, a negative number, a
/// fraction or anything that is not a number is refused naming the key and the fix
/// ([`KEEP_FIX`]).
fn keep_from_toml<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<std::num::NonZeroU32>, D::Error> {
    struct Keep;
    impl serde::de::Visitor<'_> for Keep {
        type Value = std::num::NonZeroU32;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(KEEP_FIX)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            let why = match v {
                0 => "0 would remove every verb folder",
                v if v < 0 => "a negative number",
                _ => "too large",
            };
            u32::try_from(v)
                .ok()
                .and_then(std::num::NonZeroU32::new)
                .ok_or_else(|| E::custom(format!("{v}: {why}; {KEEP_FIX}")))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
        }
    }
    d.deserialize_any(Keep).map(Some)
}

fn default_readiness_timeout_ms() -> u64 {
    60_000
}

/// Where the root filesystem comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Image {
    /// netprobe's embedded busybox rootfs (the built-in default profile).
    Embedded,
    /// A root filesystem directory (used as the overlay's lower layer, never written).
    Directory {
        /// The directory; relative paths are relative to the profile file.
        path: PathBuf,
    },
    /// A qcow2 disk (bare filesystem or partitioned), served read-only.
    Qcow2 {
        /// The `.qcow2` file; relative paths are relative to the profile file.
        path: PathBuf,
        /// The pinned sha256 (64 lower-case hex digits). Exactly one of `sha256` and
        /// `sha256_file` is required.
        #[serde(default)]
        sha256: Option<String>,
        /// A `sha256sum`-format file holding the pin (what host/build-desktop-image.sh writes
        /// beside a build that is not bit-reproducible).
        #[serde(default)]
        sha256_file: Option<PathBuf>,
        /// Which partition holds the root filesystem: a number, a GPT name, or `"auto"`.
        #[serde(default)]
        partition: PartitionSel,
    },
}

/// The profile's partition choice: `partition = 2` (number), `partition = "root"` (GPT name) or
/// `partition = "auto"` (the default: the root filesystem is found; a disk without a partition
/// table is one filesystem).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PartitionSel {
    /// 1-based partition number.
    Number(u32),
    /// `"auto"` or a GPT partition name.
    Name(String),
}

impl Default for PartitionSel {
    fn default() -> Self {
        PartitionSel::Name("auto".into())
    }
}

impl PartitionSel {
    /// True for the name `"auto"`.
    pub fn is_auto(&self) -> bool {
        matches!(self, PartitionSel::Name(n) if n == "auto")
    }
}

/// The container's init process (OCI `process`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    /// argv; must not be empty.
    pub args: Vec<String>,
    /// `NAME=value` entries added after netprobe's `PATH=…` (a `PATH=` here replaces it).
    #[serde(default)]
    pub env: Vec<String>,
    /// Working directory inside the container (absolute; default `/`).
    #[serde(default = "default_cwd")]
    pub cwd: String,
    /// The user the process runs as.
    #[serde(default)]
    pub user: UserSpec,
}

fn default_cwd() -> String {
    "/".into()
}

/// Numeric user and groups (OCI `process.user`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct UserSpec {
    /// User id (default 0).
    #[serde(default)]
    pub uid: u32,
    /// Group id (default 0).
    #[serde(default)]
    pub gid: u32,
    /// Supplementary group ids.
    #[serde(default)]
    pub additional_gids: Vec<u32>,
}

/// Capabilities and confinement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Security {
    /// Capability names (`CAP_…`) for the bounding, effective and permitted sets (inheritable
    /// and ambient stay empty). Default: [`DOCKER_DEFAULT_CAPS`].
    #[serde(default = "docker_caps")]
    pub capabilities: Vec<String>,
    /// seccomp: only `"none"` (netprobe sets no filter; stated so that nobody assumes one).
    #[serde(default)]
    pub seccomp: Confinement,
    /// AppArmor: only `"none"` (no profile is applied).
    #[serde(default)]
    pub apparmor: Confinement,
    /// `process.noNewPrivileges` (default true).
    #[serde(default = "yes")]
    pub no_new_privileges: bool,
}

fn docker_caps() -> Vec<String> {
    DOCKER_DEFAULT_CAPS.iter().map(|s| s.to_string()).collect()
}

fn yes() -> bool {
    true
}

impl Default for Security {
    fn default() -> Self {
        Security {
            capabilities: docker_caps(),
            seccomp: Confinement::None,
            apparmor: Confinement::None,
            no_new_privileges: true,
        }
    }
}

/// A confinement setting netprobe states rather than applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Confinement {
    /// No filter / profile.
    #[default]
    None,
}

/// cgroup limits. Defaults: 4 CPUs (400000/100000), 4 GiB, no swap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceLimits {
    /// CFS quota, microseconds per period (default 400000).
    #[serde(default = "default_quota")]
    pub cpu_quota: i64,
    /// CFS period, microseconds (default 100000).
    #[serde(default = "default_period")]
    pub cpu_period: u64,
    /// Memory limit, bytes (default 4 GiB = 4294967296).
    #[serde(default = "default_memory")]
    pub memory_bytes: i64,
    /// Swap allowed beyond `memory_bytes`, bytes (default 0: no swap; OCI `memory.swap` is
    /// memory + this).
    #[serde(default)]
    pub swap_bytes: i64,
}

fn default_quota() -> i64 {
    400_000
}
fn default_period() -> u64 {
    100_000
}
fn default_memory() -> i64 {
    4 << 30
}

impl ResourceLimits {
    /// OCI `memory.swap` (cgroup v1 `memory.memsw.limit_in_bytes`), bytes: memory + swap, or -1
    /// (no limit) when `memory_bytes` is -1. Saturates instead of wrapping (a validated profile
    /// stays far below: [`MAX_MEMORY_BYTES`] each).
    pub fn memory_swap(&self) -> i64 {
        if self.memory_bytes < 0 {
            -1
        } else {
            self.memory_bytes.saturating_add(self.swap_bytes)
        }
    }
}

impl Default for ResourceLimits {
    fn default() -> Self {
        ResourceLimits {
            cpu_quota: default_quota(),
            cpu_period: default_period(),
            memory_bytes: default_memory(),
            swap_bytes: 0,
        }
    }
}

/// Extra mounts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Mounts {
    /// tmpfs mounts (e.g. `/tmp`).
    #[serde(default)]
    pub tmpfs: Vec<Tmpfs>,
    /// Size of `/dev/shm`, bytes (None: the runtime's default, 64 MiB in runc's spec).
    #[serde(default)]
    pub dev_shm_bytes: Option<u64>,
}

/// One tmpfs mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tmpfs {
    /// Absolute path inside the container.
    pub path: String,
    /// Size limit, bytes (None: tmpfs default, half of RAM).
    #[serde(default)]
    pub size_bytes: Option<u64>,
    /// Mode, octal string (default "1777").
    #[serde(default = "default_mode")]
    pub mode: String,
}

fn default_mode() -> String {
    "1777".into()
}

/// Network facts of the guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// TCP port the guest's server listens on inside its netns (replaces the
    /// `/etc/netprobe-guest-port` file of the embedded image); None: no server.
    #[serde(default)]
    pub guest_port: Option<u16>,
    /// Guest ports published on the host (`[[network.publish]]`): the holder listens on
    /// `host_addr:host_port` in the host's namespace and forwards each connection to
    /// `127.0.0.1:guest_port` inside the slot's. Empty: none (not serialized, so a profile
    /// without it records the same bytes as before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub publish: Vec<Publish>,
}

/// One published guest port: `[[network.publish]]` in a profile, `--publish
/// [HOST_ADDR:]HOST_PORT:GUEST_PORT` on `slot provision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Publish {
    /// The host address the listening socket binds (IPv4 or IPv6); default `127.0.0.1`. A
    /// non-loopback address exposes the guest beyond this host (the operator named it).
    #[serde(default = "default_publish_addr")]
    pub host_addr: std::net::IpAddr,
    /// The host TCP port, 1-65535.
    pub host_port: u16,
    /// The guest's TCP port on 127.0.0.1 inside the slot's namespace, 1-65535.
    pub guest_port: u16,
}

/// `127.0.0.1`: where a published port listens unless an address is named.
pub fn default_publish_addr() -> std::net::IpAddr {
    std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
}

/// The guest's X display.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DisplaySpec {
    /// Display number N (`:N`, socket `/tmp/.X11-unix/XN` in the guest).
    pub number: u32,
    /// Expected root window width, pixels.
    pub width: u32,
    /// Expected root window height, pixels.
    pub height: u32,
    /// Expected root window depth, bits.
    pub depth: u8,
    /// The input gate's probe (after restore: this key must change this region); None: no
    /// input gate.
    #[serde(default)]
    pub input: Option<InputProbe>,
}

/// The input gate's probe: a key sent through XTEST and the screen region it must change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputProbe {
    /// One printable ASCII character (its keysym is its code point), e.g. `"q"`.
    pub key: char,
    /// Left edge of the application's region, pixels.
    pub x: u32,
    /// Top edge, pixels.
    pub y: u32,
    /// Width, pixels.
    pub width: u32,
    /// Height, pixels.
    pub height: u32,
}

/// A readiness check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Readiness {
    /// A TCP connect to `port` in the guest's netns succeeds.
    Tcp {
        /// The port.
        port: u16,
    },
    /// `GET path` on `port` in the guest's netns answers `status`.
    Http {
        /// The port.
        port: u16,
        /// The request path, e.g. `/health`.
        path: String,
        /// The expected HTTP status code.
        status: u16,
    },
    /// The profile's display answers with its geometry and depth.
    XDisplay,
    /// The window the window manager says has the focus (EWMH `_NET_ACTIVE_WINDOW`) has this
    /// `WM_NAME` (waited for): what the input gate's key needs.
    ActiveWindow {
        /// The window's `WM_NAME`, e.g. `netprobe-typing`.
        name: String,
    },
    /// The profile's `display.input` region holds more than one colour (waited for): what the
    /// snapshot's `app-drawn` gate needs. Needs `[display.input]`.
    AppDrawn,
    /// No pixel of the screen changed for `still_ms` milliseconds, screenshots
    /// [`SCREEN_SAMPLE_MS`] apart (waited for): what the snapshot's `screen-quiescent` gate needs.
    ScreenQuiescent {
        /// How long the screen must stay still, milliseconds (default 2000, from 250 to 60000).
        #[serde(default = "default_still_ms")]
        still_ms: u64,
    },
}

/// How often the `screen-quiescent` readiness check takes a screenshot, milliseconds.
pub const SCREEN_SAMPLE_MS: u64 = 250;
/// The shortest and longest `still_ms` of a `screen-quiescent` readiness check, milliseconds.
pub const STILL_MS_RANGE: std::ops::RangeInclusive<u64> = 250..=60_000;

fn default_still_ms() -> u64 {
    2000
}

impl Readiness {
    /// True for the checks that look at the profile's display (they need `[display]`).
    pub fn needs_display(&self) -> bool {
        matches!(
            self,
            Readiness::XDisplay
                | Readiness::ActiveWindow { .. }
                | Readiness::AppDrawn
                | Readiness::ScreenQuiescent { .. }
        )
    }
}

/// cgroup driver of the runtime (`runc --systemd-cgroup` for systemd): the slot's own type,
/// `cgroup::CgroupDriver` (`"systemd"` / `"cgroupfs"` in the profile).
pub use crate::cgroup::CgroupDriver;
