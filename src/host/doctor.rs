//! `netprobe doctor`: every prerequisite, found or not, with the command that fixes it.

use super::binary::{BinaryKind, binary_facts, find_in_path};
use super::config::criu_config_files;
use super::facts::cgroup_mode;
use crate::criu::{CmdOutcome, Criu, CriuError};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The fix for anything `host/setup.sh` installs.
pub const SETUP_FIX: &str = "run: sudo bash host/setup.sh";

/// One prerequisite as checked by [`doctor`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prereq {
    /// Short stable name (e.g. `root`, `criu`, `criu check`, `iptables-restore`).
    pub name: String,
    /// Whether `netprobe run` needs it (`false`: only some options or the slot driver do, or it
    /// is informational).
    pub required: bool,
    /// Whether it is satisfied.
    pub found: bool,
    /// What was observed (path, version line, the failure).
    pub detail: String,
    /// The command that fixes it (empty when `found`).
    pub fix: String,
    /// What uses it when it is not `required` (e.g. `run --strace`, `slot driver images`),
    /// shown on its line; empty when `required`.
    pub used_by: String,
}

/// Checks every prerequisite, in this order: root; CRIU at `criu` present with its version;
/// `criu check` passes; no CRIU config file; `iptables-restore` (CRIU's default network lock);
/// the OCI runtime at `runtime` with its version; a statically linked `busybox` (the embedded
/// rootfs); `ip`, `unshare`; `nsenter` (tests and benchmarks only); `strace` (only for `--strace`); the cgroup mode
/// (informational); `/dev/fuse`, `losetup`, `qemu-storage-daemon`, `mkfs.ext4`, `qemu-img` (slot
/// driver images, not required). Never fails: each problem becomes a `found = false` entry.
pub fn doctor(criu: &Path, runtime: &Path) -> Vec<Prereq> {
    let mut out = Vec::new();
    let root = nix::unistd::geteuid().is_root();
    out.push(prereq(
        "root",
        true,
        root,
        format!("effective uid {}", nix::unistd::geteuid()),
        "run netprobe with sudo",
    ));
    out.extend(criu_prereqs(criu));
    if let Ok(f) = binary_facts(criu, BinaryKind::Criu) {
        out.push(inet_socket_prereq(
            &f.version,
            &nix::sys::utsname::uname()
                .map(|u| u.release().to_string_lossy().into_owned())
                .unwrap_or_default(),
        ));
    }
    out.push(criu_config_prereq());
    out.push(tool_row(&IPTABLES));
    out.push(tool_row(&NFT));
    out.push(runtime_prereq(runtime));
    out.push(busybox_static());
    out.extend(BASE_TOOLS.iter().map(tool_row));
    out.push(prereq(
        "cgroup",
        false,
        true,
        format!("cgroup {}", cgroup_mode()),
        "",
    ));
    let fuse = Path::new("/dev/fuse").exists();
    out.push(prereq(
        "/dev/fuse",
        false,
        fuse,
        if fuse {
            "/dev/fuse present".to_string()
        } else {
            "/dev/fuse missing (slot driver images)".to_string()
        },
        "run: sudo modprobe fuse (and apt-get install fuse3)",
    ));
    out.extend(IMAGE_TOOLS.iter().map(tool_row));
    out
}

/// A program found in `PATH`: name, required, the argument that prints its version (`None`:
/// none), the fix.
type ToolRow = (&'static str, bool, Option<&'static str>, &'static str);

/// CRIU's default network lock.
const IPTABLES: ToolRow = (
    "iptables-restore",
    true,
    Some("--version"),
    "run: sudo apt-get install iptables (CRIU's default network lock calls iptables-restore)",
);

/// The captured network state runs `nft list ruleset`.
const NFT: ToolRow = (
    "nft",
    true,
    Some("--version"),
    "run: sudo apt-get install nftables (the captured network state runs nft list ruleset)",
);

/// The tools of the ladder, the tests and `--strace`, in the order `doctor` lists them.
const BASE_TOOLS: [ToolRow; 4] = [
    ("ip", true, Some("-V"), "run: sudo apt-get install iproute2"),
    (
        "unshare",
        true,
        Some("--version"),
        "run: sudo apt-get install util-linux",
    ),
    (
        "nsenter",
        false,
        Some("--version"),
        "run: sudo apt-get install util-linux (used by the tests and the benchmarks' shell peer)",
    ),
    (
        "strace",
        false,
        Some("-V"),
        "run: sudo apt-get install strace (needed only for --strace)",
    ),
];

/// The slot driver's image tools and the image builds' (not required by `netprobe run`).
const IMAGE_TOOLS: [ToolRow; 5] = [
    (
        "losetup",
        false,
        Some("--version"),
        "run: sudo apt-get install util-linux (slot driver images)",
    ),
    (
        "qemu-storage-daemon",
        false,
        Some("--version"),
        "run: sudo apt-get install qemu-utils (slot driver images)",
    ),
    (
        "partx",
        false,
        Some("--version"),
        "run: sudo apt-get install util-linux (slot driver images with a partition table)",
    ),
    (
        "mkfs.ext4",
        false,
        Some("-V"),
        "run: sudo apt-get install e2fsprogs (the tests and image builds)",
    ),
    (
        "qemu-img",
        false,
        Some("--version"),
        "run: sudo apt-get install qemu-utils (the tests and image builds)",
    ),
];

fn tool_row(t: &ToolRow) -> Prereq {
    tool(t.0, t.1, t.2, t.3)
}

/// `criu` (present, with its version) and `criu check` (passes).
fn criu_prereqs(criu: &Path) -> [Prereq; 2] {
    match binary_facts(criu, BinaryKind::Criu) {
        Ok(f) => {
            let (ok, detail) = match Criu::new(&f.path).check() {
                Ok(o) => (true, one_line(&o.tail(1))),
                Err(e) => (false, criu_check_detail(&e)),
            };
            [
                prereq(
                    "criu",
                    true,
                    true,
                    format!("{} version {}", f.path, f.version),
                    "",
                ),
                prereq(
                    "criu check",
                    true,
                    ok,
                    detail,
                    &format!(
                        "run: sudo {} check -v4 and fix what it names",
                        crate::shell::arg(&f.path)
                    ),
                ),
            ]
        }
        Err(e) => [
            prereq(
                "criu",
                true,
                false,
                e.to_string(),
                &format!(
                    "{SETUP_FIX} (installs CRIU 4.3, the default, into /opt/criu-4.3 and builds 4.2.1 and 4.1.1 into /opt/criu-4.2.1 and /opt/criu-4.1.1), or pass --criu PATH"
                ),
            ),
            prereq(
                "criu check",
                true,
                false,
                "not run: CRIU is missing".to_string(),
                SETUP_FIX,
            ),
        ],
    }
}

/// The first two numeric components of a version (`4.1.1` → (4, 1), `6.18.0-1-amd64` → (6, 18)).
fn major_minor(v: &str) -> Option<(u32, u32)> {
    let mut it = v
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Whether CRIU `criu_version` fails to dump a process holding an inet socket on kernel
/// `kernel_release`: CRIU before 4.2 treats `SO_PASSCRED` on an inet socket as fatal, and
/// kernels from 6.16 refuse it there (`Can't get 1:16 opt`; docs/GUIDE.md, "Debian 12's own criu").
/// Unknown versions: false (nothing claimed).
pub fn criu_inet_sockets_fail(criu_version: &str, kernel_release: &str) -> bool {
    match (major_minor(criu_version), major_minor(kernel_release)) {
        (Some(c), Some(k)) => c < (4, 2) && k >= (6, 16),
        _ => false,
    }
}

/// Optional: CRIU can dump inet sockets on this kernel (the slot driver's guest server holds
/// one; the ladder's rungs do not).
fn inet_socket_prereq(criu_version: &str, kernel_release: &str) -> Prereq {
    let fails = criu_inet_sockets_fail(criu_version, kernel_release);
    prereq(
        "criu inet sockets",
        false,
        !fails,
        if fails {
            format!(
                "CRIU {criu_version} on kernel {kernel_release}: cannot dump a process holding an inet socket (kernels >= 6.16 refuse SO_PASSCRED there and CRIU < 4.2 treats that as fatal: `Can't get 1:16 opt`); the ladder is unaffected, the slot driver's guest server cannot be checkpointed"
            )
        } else {
            format!(
                "CRIU {criu_version} on kernel {kernel_release}: not in the range where inet sockets cannot be dumped (CRIU < 4.2 on kernels >= 6.16)"
            )
        },
        "use CRIU 4.2 or later (e.g. --criu /opt/criu-4.2.1/sbin/criu, built by host/setup.sh)",
    )
}

/// No CRIU config file (they silently change checkpoint behaviour).
fn criu_config_prereq() -> Prereq {
    let files = criu_config_files();
    let fix = files
        .iter()
        .map(|f| {
            let from_env = std::env::var_os(crate::criu::CRIU_CONFIG_ENV)
                .is_some_and(|v| std::path::Path::new(&v) == f.as_path());
            if f.exists() && !from_env {
                let mut disabled = f.as_os_str().to_owned();
                disabled.push(".disabled");
                format!(
                    "mv {} {}",
                    crate::shell::arg(f),
                    crate::shell::arg(&disabled)
                )
            } else {
                "unset CRIU_CONFIG_FILE".to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    prereq(
        "no CRIU config file",
        true,
        files.is_empty(),
        if files.is_empty() {
            "none of /etc/criu/default.conf, ~/.criu/default.conf, /etc/criu/runc.conf, $CRIU_CONFIG_FILE".to_string()
        } else {
            format!(
                "{} (CRIU config files silently change checkpoint behaviour)",
                files
                    .iter()
                    .map(|f| config_entry(f))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        &fix,
    )
}

/// One entry of the CRIU-config line: a file that is present, or `$CRIU_CONFIG_FILE` as set —
/// saying when it names no file (CRIU skips a config file it cannot open, `parse_config()` in
/// criu/config.c; netprobe still refuses the variable: setting it asks to configure CRIU).
fn config_entry(f: &Path) -> String {
    let from_env =
        std::env::var_os(crate::criu::CRIU_CONFIG_ENV).is_some_and(|v| Path::new(&v) == f);
    match (from_env, f.exists()) {
        (true, true) => format!(
            "CRIU_CONFIG_FILE={} is set and the file exists",
            f.display()
        ),
        (true, false) => format!(
            "CRIU_CONFIG_FILE={} is set (no such file: CRIU would skip it, but netprobe refuses the variable as a request to configure CRIU)",
            f.display()
        ),
        (false, _) => format!("present: {}", f.display()),
    }
}

/// The OCI runtime at `runtime`, with its version.
fn runtime_prereq(runtime: &Path) -> Prereq {
    match binary_facts(runtime, BinaryKind::Runtime) {
        Ok(f) => prereq(
            "runtime",
            true,
            true,
            format!("{} version {}", f.path, f.version),
            "",
        ),
        Err(e) => prereq(
            "runtime",
            true,
            false,
            e.to_string(),
            &format!("{SETUP_FIX} (installs runc), or pass --runtime PATH"),
        ),
    }
}

/// True when every `required` prerequisite is `found`.
pub fn doctor_ok(prereqs: &[Prereq]) -> bool {
    prereqs.iter().filter(|p| p.required).all(|p| p.found)
}

fn prereq(name: &str, required: bool, found: bool, detail: String, fix: &str) -> Prereq {
    Prereq {
        name: name.to_string(),
        used_by: match required {
            true => String::new(),
            false => used_by(name).to_string(),
        },
        required,
        found,
        detail,
        fix: if found {
            String::new()
        } else {
            fix.to_string()
        },
    }
}

/// What uses optional prerequisite `name` (its doctor line says so).
fn used_by(name: &str) -> &'static str {
    match name {
        "strace" => "run --strace",
        "nsenter" => "the tests and benchmarks",
        "criu inet sockets" => "the slot driver's guest server",
        "cgroup" => "information only",
        "mkfs.ext4" | "qemu-img" => "the tests and image builds",
        "partx" => "slot driver images with a partition table",
        _ => "slot driver images",
    }
}

fn criu_check_detail(e: &CriuError) -> String {
    match e {
        CriuError::Failed { outcome, tail, .. } => {
            format!("criu check failed ({}): {tail}", outcome.status_text())
        }
        other => other.to_string(),
    }
}

fn one_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

/// A tool looked up in `$PATH`, with the first line of its version output in the detail.
fn tool(name: &str, required: bool, version_arg: Option<&str>, fix: &str) -> Prereq {
    match find_in_path(Path::new(name)) {
        None => prereq(
            name,
            required,
            false,
            format!("not in $PATH={}", std::env::var("PATH").unwrap_or_default()),
            fix,
        ),
        Some(p) => {
            let version = version_arg
                .and_then(|arg| {
                    let mut cmd = Command::new(&p);
                    cmd.arg(arg);
                    CmdOutcome::run(&mut cmd, Some(Duration::from_secs(10))).ok()
                })
                .map(|o| one_line(&format!("{}{}", o.stdout, o.stderr)))
                .filter(|l| !l.is_empty());
            let detail = match version {
                Some(v) => format!("{} ({v})", p.display()),
                None => p.display().to_string(),
            };
            prereq(name, required, true, detail, fix)
        }
    }
}

fn busybox_static() -> Prereq {
    let fix =
        "run: sudo apt-get install busybox-static (the embedded rootfs needs a static busybox)";
    match find_in_path(Path::new("busybox")) {
        None => prereq(
            "busybox static",
            true,
            false,
            "busybox not in $PATH".to_string(),
            fix,
        ),
        Some(p) => match elf_is_static(&p) {
            Ok(true) => prereq(
                "busybox static",
                true,
                true,
                format!("{} is statically linked", p.display()),
                fix,
            ),
            Ok(false) => prereq(
                "busybox static",
                true,
                false,
                format!("{} is dynamically linked (has PT_INTERP)", p.display()),
                fix,
            ),
            Err(e) => prereq(
                "busybox static",
                true,
                false,
                format!("{}: {e}", p.display()),
                fix,
            ),
        },
    }
}

/// Why [`elf_is_static`] cannot tell whether a file is statically linked.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    /// The file could not be opened.
    #[error("cannot open: {0}")]
    Open(#[source] std::io::Error),
    /// The file could not be read.
    #[error("cannot read: {0}")]
    Read(#[source] std::io::Error),
    /// No `\x7fELF` magic (or shorter than an ELF header).
    #[error("not an ELF file")]
    NotElf,
    /// `EI_DATA` is not little-endian.
    #[error("not a little-endian ELF file")]
    NotLittleEndian,
    /// `EI_CLASS` is neither 32- nor 64-bit.
    #[error("unknown ELF class")]
    UnknownClass,
    /// The header ends before `e_phoff`/`e_phentsize`/`e_phnum`.
    #[error("truncated ELF header")]
    TruncatedHeader,
    /// A program header lies beyond the first MiB read.
    #[error("truncated program headers")]
    TruncatedProgramHeaders,
}

/// Whether the ELF file at `path` is statically linked: it has no `PT_INTERP` program header.
/// Handles 32- and 64-bit little-endian ELF. Errors: [`ElfError`] saying why it cannot tell
/// (unreadable, not ELF, big-endian, truncated).
pub fn elf_is_static(path: &Path) -> Result<bool, ElfError> {
    let mut f = std::fs::File::open(path).map_err(ElfError::Open)?;
    let mut buf = Vec::new();
    f.by_ref()
        .take(1 << 20)
        .read_to_end(&mut buf)
        .map_err(ElfError::Read)?;
    elf_has_no_interp(&buf)
}

fn elf_has_no_interp(b: &[u8]) -> Result<bool, ElfError> {
    if b.len() < 0x34 || &b[..4] != b"\x7fELF" {
        return Err(ElfError::NotElf);
    }
    if b[5] != 1 {
        return Err(ElfError::NotLittleEndian);
    }
    let u16_at = |o: usize| {
        b.get(o..o + 2)
            .map(|s| u16::from_le_bytes([s[0], s[1]]) as usize)
    };
    let u32_at = |o: usize| {
        b.get(o..o + 4)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize)
    };
    let u64_at = |o: usize| {
        b.get(o..o + 8).map(|s| {
            let mut a = [0u8; 8];
            a.copy_from_slice(s);
            u64::from_le_bytes(a) as usize
        })
    };
    let (phoff, phentsize, phnum) = match b[4] {
        1 => (u32_at(0x1c), u16_at(0x2a), u16_at(0x2c)),
        2 => (u64_at(0x20), u16_at(0x36), u16_at(0x38)),
        _ => return Err(ElfError::UnknownClass),
    };
    let (Some(phoff), Some(phentsize), Some(phnum)) = (phoff, phentsize, phnum) else {
        return Err(ElfError::TruncatedHeader);
    };
    const PT_INTERP: usize = 3;
    for i in 0..phnum {
        let p_type = u32_at(phoff + i * phentsize).ok_or(ElfError::TruncatedProgramHeaders)?;
        if p_type == PT_INTERP {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each optional line says what uses it: strace is `run --strace`'s, not the slot driver's.
    #[test]
    fn optional_prerequisites_name_what_uses_them() {
        let row = |t: &ToolRow| prereq(t.0, t.1, false, String::new(), t.3);
        let used: Vec<(String, String)> = BASE_TOOLS
            .iter()
            .chain(&IMAGE_TOOLS)
            .map(row)
            .filter(|p| !p.required)
            .map(|p| (p.name, p.used_by))
            .collect();
        let pair = |n: &str, u: &str| (n.to_string(), u.to_string());
        assert!(used.contains(&pair("strace", "run --strace")), "{used:?}");
        assert!(
            used.contains(&pair("nsenter", "the tests and benchmarks")),
            "{used:?}"
        );
        // The slot driver runs losetup, qemu-storage-daemon and partx; only the tests and the
        // image builds run mkfs.ext4 and qemu-img.
        for (n, u) in [
            ("losetup", "slot driver images"),
            ("qemu-storage-daemon", "slot driver images"),
            ("partx", "slot driver images with a partition table"),
            ("mkfs.ext4", "the tests and image builds"),
            ("qemu-img", "the tests and image builds"),
        ] {
            assert!(used.contains(&pair(n, u)), "{n}: {used:?}");
        }
        assert_eq!(row(&IPTABLES).used_by, "");
    }

    #[test]
    fn inet_socket_limit_is_criu_before_4_2_on_kernels_from_6_16() {
        assert!(criu_inet_sockets_fail("4.1.1", "6.18.0-1-amd64"));
        assert!(criu_inet_sockets_fail("4.1", "6.16.0"));
        assert!(criu_inet_sockets_fail("3.17.1", "7.0.1"));
        assert!(!criu_inet_sockets_fail("4.2.1", "6.18.0"));
        assert!(!criu_inet_sockets_fail("4.3", "6.18.0"));
        assert!(!criu_inet_sockets_fail("4.1.1", "6.15.9"));
        assert!(!criu_inet_sockets_fail("unknown", "6.18.0"));
        let p = inet_socket_prereq("4.1.1", "6.18.0");
        assert!(!p.found && !p.required, "a warning, not a refusal: {p:?}");
        assert!(
            p.detail.contains("Can't get 1:16 opt") && p.fix.contains("4.2"),
            "{p:?}"
        );
        assert!(inet_socket_prereq("4.3", "6.18.0").found);
    }
}
