//! Slot profiles: a TOML file naming everything about a guest that the slot driver must not
//! guess (image, rootfs overlay options, process, capabilities, resources, mounts, display,
//! readiness, cgroup driver).
//!
//! - [`model`]: the data model ([`Profile`], serde, `deny_unknown_fields`); JSON Schema
//!   `evidence-schema/slot-profile.schema.json`.
//! - [`load`] / [`parse`]: read, parse, resolve relative paths, [`validate`]; a
//!   [`LoadedProfile`] carries the exact bytes' sha256 (recorded in the slot state and re-checked
//!   on every verb like `config.json`).
//! - [`builtin_default`]: the embedded busybox image as a profile ([`BUILTIN_DEFAULT_TOML`]).
//! - [`verify_image`]: the image exists and (qcow2) its sha256 equals the pin.
//! - [`apply`]: a profile applied to an oci-spec [`oci_spec::runtime::Spec`].
//! - [`overlay`]: the `[overlay]` table (the rootfs overlay's mount options) and its checks.

pub mod apply;
pub mod error;
pub mod model;
pub mod overlay;

use crate::evidence::fsio::printable;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use apply::apply_profile;
pub use error::{ProfileError, Result};
pub use model::{
    CgroupDriver, Confinement, DOCKER_DEFAULT_CAPS, DisplaySpec, EvidenceSpec, Image, InputProbe,
    MAX_MEMORY_BYTES, Mounts, Network, PROFILE_SCHEMA_VERSION, PartitionSel, Process, Profile,
    Publish, READINESS_TIMEOUT_FLOOR_MS, READINESS_TIMEOUT_MAX_MS, Readiness, ResourceLimits,
    SCREEN_SAMPLE_MS, STILL_MS_RANGE, Security, Tmpfs, UserSpec, default_publish_addr,
};
pub use overlay::{DEFAULT_OVERLAY_OPTIONS, OverlaySpec};

/// The built-in default profile: netprobe's embedded busybox image, its `/init.sh` (busybox
/// httpd on 0.0.0.0:5000) as init, and exactly today's slot `config.json` otherwise (runc's
/// spec capabilities AUDIT_WRITE/KILL/NET_BIND_SERVICE, 4 CPUs, 4 GiB, no swap). The
/// `/etc/netprobe-guest-port` convention is its `network.guest_port`.
pub const BUILTIN_DEFAULT_TOML: &str = r#"# netprobe's built-in default slot profile (the embedded busybox image).
schema_version = 1
name = "embedded-busybox"
description = "netprobe's embedded busybox rootfs: busybox httpd on 0.0.0.0:5000 as init"
readiness_timeout_ms = 10000

[image]
kind = "embedded"

[process]
args = ["/bin/sh", "/init.sh"]

[security]
capabilities = ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]
seccomp = "none"
apparmor = "none"

[resources]
cpu_quota = 400000
cpu_period = 100000
memory_bytes = 4294967296
swap_bytes = 0

[network]
guest_port = 5000

[[readiness]]
kind = "tcp"
port = 5000
"#;

/// A parsed and validated profile with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedProfile {
    /// The profile (relative paths already resolved against the file's directory).
    pub profile: Profile,
    /// The file, or `None` for the built-in default.
    pub source: Option<PathBuf>,
    /// Lower-case hex sha256 of the exact bytes parsed.
    pub sha256: String,
}

/// Reads and parses the profile at `path` (see [`parse`]): a regular file (a symlink to one is
/// followed) of at most [`crate::evidence::CONFIG_READ_CAP`] bytes (1 MiB), UTF-8.
///
/// Errors: [`ProfileError::Read`] (missing, unreadable, not a regular file — e.g. `/dev/zero`
/// or a FIFO —, over 1 MiB, not UTF-8), and those of [`parse`].
pub fn load(path: &Path) -> Result<LoadedProfile> {
    let text = crate::evidence::read_bounded_text(
        path,
        crate::evidence::CONFIG_READ_CAP,
        crate::evidence::Symlinks::Follow,
    )
    .map_err(|source| ProfileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut lp = parse(&text, path, base)?;
    lp.source = Some(path.to_path_buf());
    Ok(lp)
}

/// The built-in default profile ([`BUILTIN_DEFAULT_TOML`]).
pub fn builtin_default() -> LoadedProfile {
    parse(
        BUILTIN_DEFAULT_TOML,
        Path::new("<built-in>"),
        Path::new("/"),
    )
    .expect("the built-in profile is valid (unit-tested)")
}

/// Parses profile `text` (named `name` in errors), resolves relative image paths against
/// `base`, and [`validate`]s it. Does not touch the image (see [`verify_image`]).
///
/// A `readiness_timeout_ms` below [`READINESS_TIMEOUT_FLOOR_MS`] is raised to it, so the
/// profile carries (and the slot records) the time the checks get.
///
/// Errors: [`ProfileError::Parse`] (syntax, unknown or missing key, wrong type: toml's message
/// names the key and line; the fix says to add a missing key, to correct or remove another),
/// [`ProfileError::Field`] (see [`validate`]).
pub fn parse(text: &str, name: &Path, base: &Path) -> Result<LoadedProfile> {
    let mut profile: Profile = toml::from_str(text).map_err(|e| {
        // toml quotes the offending line: a control character in it (a binary file given as a
        // profile, an escape sequence) is shown escaped, never sent to the terminal, and the
        // quote is cut at 4 KiB.
        let message = printable(e.to_string().trim_end(), 4096);
        let fix = if message.contains("evidence.keep:") {
            "give evidence.keep a whole number of at least 1, or remove the key"
        } else if message.contains("missing field") {
            "add the missing key (a missing table, e.g. `image`, is written as [image] with its \
             keys: kind = \"directory\", path = \"rootfs\")"
        } else {
            "correct or remove that key"
        };
        ProfileError::Parse {
            path: name.to_path_buf(),
            message,
            fix: fix.into(),
        }
    })?;
    let abs = |p: &mut PathBuf| {
        if p.is_relative() {
            *p = base.join(&*p);
        }
    };
    match &mut profile.image {
        Image::Embedded => {}
        Image::Directory { path } => abs(path),
        Image::Qcow2 {
            path, sha256_file, ..
        } => {
            abs(path);
            if let Some(f) = sha256_file {
                abs(f);
            }
        }
    }
    validate(&profile, name)?;
    profile.readiness_timeout_ms = profile.readiness_timeout_ms.max(READINESS_TIMEOUT_FLOOR_MS);
    Ok(LoadedProfile {
        profile,
        source: None,
        sha256: hex::encode(Sha256::digest(text.as_bytes())),
    })
}

fn field(name: &Path, field: &str, problem: String, fix: &str) -> ProfileError {
    ProfileError::Field {
        path: name.to_path_buf(),
        field: field.into(),
        problem,
        fix: fix.into(),
    }
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Checks what serde cannot: `schema_version`, non-empty args, absolute cwd, capability names,
/// limits ([`validate_resources`]), the tmpfs mounts ([`validate_mounts`]),
/// `readiness_timeout_ms` at most [`READINESS_TIMEOUT_MAX_MS`], the qcow2 pin (exactly one of `sha256`/`sha256_file`, 64 hex
/// digits), the overlay options ([`overlay::validate`]), the display, and that an `x-display`
/// readiness check has a `[display]`.
///
/// Errors: [`ProfileError::Field`] naming the field and the fix.
pub fn validate(p: &Profile, name: &Path) -> Result<()> {
    if p.schema_version != PROFILE_SCHEMA_VERSION {
        return Err(field(
            name,
            "schema_version",
            format!("{} is not supported", p.schema_version),
            "set schema_version = 1",
        ));
    }
    if p.process.args.is_empty() || p.process.args[0].is_empty() {
        return Err(field(
            name,
            "process.args",
            "is empty".into(),
            "give the init's argv, e.g. [\"/usr/bin/python3\", \"/opt/app/supervisor.py\"]",
        ));
    }
    if !p.process.cwd.starts_with('/') {
        return Err(field(
            name,
            "process.cwd",
            format!("{:?} is not absolute", p.process.cwd),
            "use an absolute path inside the container, e.g. \"/\"",
        ));
    }
    if let Some(bad) = p.process.env.iter().find(|e| !e.contains('=')) {
        return Err(field(
            name,
            "process.env",
            format!("{bad:?} has no '='"),
            "write each entry as NAME=value",
        ));
    }
    for c in &p.security.capabilities {
        if apply::parse_capability(c).is_none() {
            return Err(field(
                name,
                "security.capabilities",
                format!("{c:?} is not a Linux capability name"),
                "use names like CAP_CHOWN (capabilities(7)); the default is Docker's set",
            ));
        }
    }
    validate_resources(p, name)?;
    validate_mounts(p, name)?;
    validate_image(p, name)?;
    overlay::validate(&p.overlay, name)?;
    validate_display(p, name)
}

/// `[resources]`: a positive CPU quota (or -1) and period; `memory_bytes` in 1 ..=
/// [`MAX_MEMORY_BYTES`] (or -1: no limit) and `swap_bytes` in 0 ..= [`MAX_MEMORY_BYTES`], so
/// that memory + swap (OCI `memory.swap`) is a limit the kernel takes (i64::MAX + i64::MAX
/// wrapped to -2, which runc failed to write to `memory.memsw.limit_in_bytes`).
///
/// Errors: [`ProfileError::Field`] `resources.cpu_quota`, `resources.memory_bytes` or
/// `resources.swap_bytes`.
pub fn validate_resources(p: &Profile, name: &Path) -> Result<()> {
    let r = &p.resources;
    if r.cpu_period == 0 || r.cpu_quota == 0 || r.cpu_quota < -1 {
        return Err(field(
            name,
            "resources.cpu_quota",
            format!("quota {} / period {}", r.cpu_quota, r.cpu_period),
            "give a positive quota (or -1 for none) and a positive period, e.g. 400000/100000",
        ));
    }
    if r.memory_bytes == 0 || r.memory_bytes < -1 || r.memory_bytes > MAX_MEMORY_BYTES {
        return Err(field(
            name,
            "resources.memory_bytes",
            format!("{} bytes is not a usable memory limit", r.memory_bytes),
            "give memory_bytes between 1 and 1099511627776 (1 TiB), or -1 for no limit, e.g. 4294967296 (4 GiB)",
        ));
    }
    if r.swap_bytes < 0 || r.swap_bytes > MAX_MEMORY_BYTES {
        return Err(field(
            name,
            "resources.swap_bytes",
            format!("{} bytes is not a usable swap allowance", r.swap_bytes),
            "give swap_bytes (swap beyond memory_bytes) between 0 and 1099511627776 (1 TiB), e.g. 0",
        ));
    }
    Ok(())
}

/// `[[mounts.tmpfs]]`: each path absolute, without a `..` component, not `/`, `/dev`, `/proc`,
/// `/sys` or below `/proc` or `/sys` (the runtime mounts those itself and refuses or breaks on
/// a tmpfs there), not given twice; each size not 0 (tmpfs's `size=0` is no limit); each mode
/// octal.
///
/// Errors: [`ProfileError::Field`] `mounts.tmpfs.path`, `mounts.tmpfs.size_bytes` or
/// `mounts.tmpfs.mode`.
pub fn validate_mounts(p: &Profile, name: &Path) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for t in &p.mounts.tmpfs {
        let bad = |problem: String, fix: &str| Err(field(name, "mounts.tmpfs.path", problem, fix));
        let path = Path::new(&t.path);
        if !t.path.starts_with('/') {
            return bad(
                format!("{:?} is not absolute", t.path),
                "use an absolute path inside the container, e.g. \"/tmp\"",
            );
        }
        if path
            .components()
            .any(|c| c == std::path::Component::ParentDir)
        {
            return bad(
                format!("{:?} has a `..` component", t.path),
                "write the path without `..`, e.g. \"/tmp\"",
            );
        }
        let clean: PathBuf = path.components().collect();
        let reserved = ["/", "/dev", "/proc", "/sys"]
            .iter()
            .any(|r| clean == Path::new(r))
            || clean.starts_with("/proc")
            || clean.starts_with("/sys");
        if reserved {
            return bad(
                format!(
                    "{:?} is the container's root or a mount the runtime makes itself",
                    t.path
                ),
                "mount the tmpfs on a directory of the guest such as \"/tmp\" or \"/run\" (not /, /dev, /proc, /sys)",
            );
        }
        if !seen.insert(clean) {
            return bad(
                format!("{:?} is given twice", t.path),
                "keep one [[mounts.tmpfs]] per path",
            );
        }
        if t.size_bytes == Some(0) {
            return Err(field(
                name,
                "mounts.tmpfs.size_bytes",
                "0 is no limit at all for tmpfs (`size=0`: it may fill the memory)".into(),
                "give a size in bytes, e.g. 536870912 (512 MiB), or leave size_bytes out for tmpfs's default of half the RAM",
            ));
        }
        if u32::from_str_radix(&t.mode, 8).is_err() {
            return Err(field(
                name,
                "mounts.tmpfs.mode",
                format!("{:?} is not octal", t.mode),
                "write the mode in octal, e.g. \"1777\"",
            ));
        }
    }
    Ok(())
}

fn validate_image(p: &Profile, name: &Path) -> Result<()> {
    if let Image::Qcow2 {
        sha256,
        sha256_file,
        partition,
        ..
    } = &p.image
    {
        match (sha256, sha256_file) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(field(
                    name,
                    "image.sha256",
                    "a qcow2 image needs exactly one of sha256 and sha256_file".into(),
                    "pin it: sha256 = \"<64 hex digits>\" (sha256sum IMAGE), or sha256_file = \"IMAGE.sha256\"",
                ));
            }
            (Some(h), None) if !is_sha256_hex(h) => {
                return Err(field(
                    name,
                    "image.sha256",
                    format!("{h:?} is not 64 lower-case hex digits"),
                    "paste the first column of `sha256sum IMAGE`",
                ));
            }
            _ => {}
        }
        if matches!(partition, PartitionSel::Number(0)) {
            return Err(field(
                name,
                "image.partition",
                "partition numbers start at 1".into(),
                "give 1-based number, a GPT name, or \"auto\"",
            ));
        }
    }
    Ok(())
}

fn validate_display(p: &Profile, name: &Path) -> Result<()> {
    if let Some(d) = &p.display
        && (d.width == 0 || d.height == 0 || !matches!(d.depth, 24 | 32))
    {
        return Err(field(
            name,
            "display",
            format!("{}x{} depth {}", d.width, d.height, d.depth),
            "give the X server's screen, e.g. width = 1920, height = 1080, depth = 24",
        ));
    }
    if let Some(i) = p
        .display
        .and_then(|d| d.input.map(|i| (d, i)))
        .map(|(d, i)| {
            (
                i,
                !(i.key.is_ascii_graphic() || i.key == ' ')
                    || i.width == 0
                    || i.height == 0
                    || i.x + i.width > d.width
                    || i.y + i.height > d.height,
            )
        })
        && i.1
    {
        return Err(field(
            name,
            "display.input",
            format!(
                "key {:?} region {}x{}+{}+{}",
                i.0.key, i.0.width, i.0.height, i.0.x, i.0.y
            ),
            "give one printable ASCII key and a non-empty region inside the screen",
        ));
    }
    if p.readiness_timeout_ms > READINESS_TIMEOUT_MAX_MS {
        return Err(field(
            name,
            "readiness_timeout_ms",
            format!("{} ms is more than the 1-hour cap", p.readiness_timeout_ms),
            "give at most 3600000 (1 hour; values below 20000 are raised to 20 s), e.g. 60000",
        ));
    }
    readiness_fits(name, p)?;
    if p.network.guest_port == Some(0) {
        return Err(field(
            name,
            "network.guest_port",
            "0 is not a port".into(),
            "give the port the guest's server listens on, or remove the key",
        ));
    }
    validate_publish(p, name)
}

/// The guest ports a profile serves: `network.guest_port` and the port of every `tcp` or
/// `http` readiness check, ascending, each once. A published port must be one of them.
pub fn served_ports(p: &Profile) -> Vec<u16> {
    let mut v: Vec<u16> = p.network.guest_port.into_iter().collect();
    for r in &p.readiness {
        match r {
            Readiness::Tcp { port } | Readiness::Http { port, .. } => v.push(*port),
            Readiness::XDisplay
            | Readiness::ActiveWindow { .. }
            | Readiness::AppDrawn
            | Readiness::ScreenQuiescent { .. } => {}
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// `[[network.publish]]`: ports 1-65535, each host port once, each guest port one the profile
/// serves ([`served_ports`]). Errors: [`ProfileError::Field`] naming the entry and the fix.
fn validate_publish(p: &Profile, name: &Path) -> Result<()> {
    let served = served_ports(p);
    for (i, e) in p.network.publish.iter().enumerate() {
        let key = format!("network.publish[{i}]");
        if e.host_port == 0 || e.guest_port == 0 {
            return Err(field(
                name,
                &key,
                format!(
                    "host_port {} guest_port {}: 0 is not a port",
                    e.host_port, e.guest_port
                ),
                "give ports from 1 to 65535",
            ));
        }
        if p.network.publish[..i]
            .iter()
            .any(|o| o.host_port == e.host_port)
        {
            return Err(field(
                name,
                &key,
                format!("host port {} is published twice", e.host_port),
                "publish each host port once",
            ));
        }
        if !served.contains(&e.guest_port) {
            return Err(field(
                name,
                &key,
                format!(
                    "guest port {} is not served by this profile (it serves {})",
                    e.guest_port,
                    ports_list(&served)
                ),
                "publish network.guest_port or the port of a tcp or http readiness check",
            ));
        }
    }
    Ok(())
}

/// `[5000, 8080]` as `5000, 8080`, or `no port` when empty.
pub fn ports_list(ports: &[u16]) -> String {
    match ports.is_empty() {
        true => "no port".into(),
        false => ports
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// What [`verify_image`] proved.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ImageCheck {
    /// The image path (None for the embedded image).
    pub path: Option<PathBuf>,
    /// The sha256 computed now (qcow2 only).
    pub sha256: Option<String>,
}

/// Checks the profile's image before use: a directory exists and is a directory; a qcow2 exists,
/// its pin is read (`sha256`, or the first word of `sha256_file`) and equals the sha256 of the
/// image's bytes (streamed).
///
/// Errors: [`ProfileError::Field`] (`image.path` missing or of the wrong kind,
/// `image.sha256_file` unreadable or malformed), [`ProfileError::Sha256Mismatch`].
pub fn verify_image(lp: &LoadedProfile) -> Result<ImageCheck> {
    let name = lp
        .source
        .clone()
        .unwrap_or_else(|| PathBuf::from("<built-in>"));
    let missing = |path: &Path, what: &str, fix: &str| {
        field(
            &name,
            "image.path",
            format!("{} is not {what}", path.display()),
            fix,
        )
    };
    match &lp.profile.image {
        Image::Embedded => Ok(ImageCheck {
            path: None,
            sha256: None,
        }),
        Image::Directory { path } => {
            if !path.is_dir() {
                return Err(missing(
                    path,
                    "an existing directory",
                    "point image.path at the guest's root filesystem directory",
                ));
            }
            Ok(ImageCheck {
                path: Some(path.clone()),
                sha256: None,
            })
        }
        Image::Qcow2 {
            path,
            sha256,
            sha256_file,
            ..
        } => {
            if !path.is_file() {
                return Err(missing(
                    path,
                    "an existing file",
                    "point image.path at the .qcow2 (the desktop guest: run `bash host/build-desktop-image.sh`)",
                ));
            }
            let (fname, expected) = match (sha256, sha256_file) {
                (Some(h), _) => ("image.sha256", h.clone()),
                (None, Some(f)) => ("image.sha256_file", read_pin(&name, f)?),
                (None, None) => unreachable!("validate() requires a pin"),
            };
            let (actual, _) = crate::evidence::sha256_file(path).map_err(|e| {
                field(
                    &name,
                    "image.path",
                    format!("{}: {e}", path.display()),
                    "make the image readable",
                )
            })?;
            if actual != expected {
                return Err(ProfileError::Sha256Mismatch {
                    path: name,
                    field: fname.into(),
                    image: path.clone(),
                    expected,
                    actual,
                });
            }
            Ok(ImageCheck {
                path: Some(path.clone()),
                sha256: Some(actual),
            })
        }
    }
}

fn read_pin(name: &Path, f: &Path) -> Result<String> {
    let text = crate::evidence::read_bounded_text(
        f,
        crate::evidence::CONFIG_READ_CAP,
        crate::evidence::Symlinks::Follow,
    )
    .map_err(|e| {
        field(
            name,
            "image.sha256_file",
            format!("{}: {e}", f.display()),
            "give the sha256sum file written beside the image (host/build-desktop-image.sh writes IMAGE.sha256)",
        )
    })?;
    let h = text.split_whitespace().next().unwrap_or("").to_string();
    if !is_sha256_hex(&h) {
        return Err(field(
            name,
            "image.sha256_file",
            format!(
                "{} does not start with 64 lower-case hex digits",
                f.display()
            ),
            "write it with `sha256sum IMAGE > IMAGE.sha256`",
        ));
    }
    Ok(h)
}

/// The readiness checks fit the rest of the profile: display checks need `[display]`, `app-drawn`
/// needs `[display.input]`, `still_ms` lies in [`model::STILL_MS_RANGE`], a window name is not
/// empty.
///
/// Errors: [`ProfileError::Field`] on `readiness`, naming the check and the fix.
fn readiness_fits(name: &Path, p: &Profile) -> Result<()> {
    for r in &p.readiness {
        let (article, kind) = match r {
            Readiness::XDisplay => ("an", "x-display"),
            Readiness::ActiveWindow { .. } => ("an", "active-window"),
            Readiness::AppDrawn => ("an", "app-drawn"),
            Readiness::ScreenQuiescent { .. } => ("a", "screen-quiescent"),
            Readiness::Tcp { .. } | Readiness::Http { .. } => continue,
        };
        if p.display.is_none() && r.needs_display() {
            return Err(field(
                name,
                "readiness",
                format!("{article} {kind} check without a [display] table"),
                &format!("add [display] (number, width, height, depth) or remove the {kind} check"),
            ));
        }
        match r {
            Readiness::AppDrawn if p.display.and_then(|d| d.input).is_none() => {
                return Err(field(
                    name,
                    "readiness",
                    "an app-drawn check without a [display.input] region".into(),
                    "add [display.input] (key, x, y, width, height: the application's window) or remove the app-drawn check",
                ));
            }
            Readiness::ScreenQuiescent { still_ms }
                if !model::STILL_MS_RANGE.contains(still_ms) =>
            {
                return Err(field(
                    name,
                    "readiness",
                    format!("screen-quiescent still_ms {still_ms} is outside 250..=60000"),
                    "give still_ms from 250 to 60000 milliseconds (default 2000)",
                ));
            }
            Readiness::ActiveWindow { name: w } if w.trim().is_empty() => {
                return Err(field(
                    name,
                    "readiness",
                    "an active-window check with an empty name".into(),
                    "give the WM_NAME of the window that must have the focus, e.g. name = \"netprobe-typing\"",
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
