//! The built-in busybox rootfs and the check every rootfs must pass.
//!
//! The built-in rootfs is what the `oci` and `external-netns` rungs run `sleep` in, and what the
//! slot driver (ARCHITECTURE.md section 5) runs `/init.sh` (busybox httpd on 0.0.0.0:5000) in.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::error::{OciError, Result, io_err};

/// Where [`build_busybox_rootfs`] takes busybox from: Debian's `busybox-static` package.
pub const DEFAULT_BUSYBOX: &str = "/bin/busybox";

/// Port the rootfs's `/init.sh` serves HTTP on, inside the container (all addresses).
pub const INIT_HTTP_PORT: u16 = 5000;

/// Applets linked into `bin/` (those the busybox binary actually has; see `busybox --list`).
/// `sh` and `sleep` are mandatory: the probes run `sleep`, `/init.sh` needs `sh`.
const APPLETS: &[&str] = &[
    "sh", "ash", "sleep", "httpd", "cat", "ls", "echo", "ip", "wget", "nc", "ps", "mkdir", "rm",
    "cp", "mv", "ln", "true", "false", "env", "id", "hostname", "ifconfig", "netstat", "grep",
    "sed", "head", "tail", "kill", "mount", "umount", "date", "uname", "touch", "chmod", "printf",
    "test", "[", "ping", "pidof", "stat", "readlink", "wc", "sync",
];

/// Applets without which the rootfs is refused.
const REQUIRED_APPLETS: &[&str] = &["sh", "sleep", "httpd"];

/// Content of `/init.sh`: the slot driver's guest server, in the foreground (exec, so the
/// container's init is httpd itself and a SIGTERM/SIGKILL reaches it).
pub const INIT_SH: &str = "#!/bin/sh\n\
# netprobe guest server: serves /var/www on 0.0.0.0:5000 in the foreground.\n\
exec /bin/busybox httpd -f -p 0.0.0.0:5000 -h /var/www\n";

/// Build a minimal busybox rootfs in `dir` from [`DEFAULT_BUSYBOX`] (`/bin/busybox`).
///
/// See [`build_busybox_rootfs_from`] for the layout and errors.
pub fn build_busybox_rootfs(dir: &Path) -> Result<()> {
    build_busybox_rootfs_from(dir, Path::new(DEFAULT_BUSYBOX))
}

/// Build a minimal busybox rootfs in `dir` (created if missing; must be empty if present) from
/// the static busybox binary `busybox`.
///
/// Layout: `bin/busybox` (a copy, mode 0755) plus relative symlinks `bin/<applet> -> busybox` for
/// the applets the binary has among sh, sleep, httpd, cat, ls, echo, ip, wget, nc, ps, …;
/// directories `proc sys dev tmp etc var/www root`; `etc/passwd` and `etc/group` (root and
/// nobody); `var/www/index.html`; and `/init.sh` (mode 0755) which runs
/// `busybox httpd -f -p 0.0.0.0:5000 -h /var/www` in the foreground.
///
/// Errors: [`OciError::BusyboxMissing`] when `busybox` is not a regular file;
/// [`OciError::BusyboxNotStatic`] when it is not ELF or has a `PT_INTERP` header (dynamically
/// linked — e.g. Debian's `busybox` rather than `busybox-static`); [`OciError::BusyboxApplet`]
/// when sh, sleep or httpd is missing; [`OciError::RootfsDirNotEmpty`]; [`OciError::Io`].
pub fn build_busybox_rootfs_from(dir: &Path, busybox: &Path) -> Result<()> {
    let meta = fs::metadata(busybox).map_err(|_| OciError::BusyboxMissing {
        path: busybox.to_path_buf(),
    })?;
    if !meta.is_file() {
        return Err(OciError::BusyboxMissing {
            path: busybox.to_path_buf(),
        });
    }
    check_static_elf(busybox)?;
    let available = list_applets(busybox)?;
    for req in REQUIRED_APPLETS {
        if !available.iter().any(|a| a == req) {
            return Err(OciError::BusyboxApplet {
                path: busybox.to_path_buf(),
                applet: (*req).to_string(),
            });
        }
    }

    match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(OciError::RootfsDirNotEmpty {
                    path: dir.to_path_buf(),
                });
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(io_err("create directory", dir))?;
        }
        Err(e) => return Err(io_err("read directory", dir)(e)),
    }

    for sub in ["bin", "proc", "sys", "dev", "tmp", "etc", "var/www", "root"] {
        let p = dir.join(sub);
        fs::create_dir_all(&p).map_err(io_err("create directory", &p))?;
    }
    set_mode(&dir.join("tmp"), 0o1777)?;

    let bb = dir.join("bin/busybox");
    fs::copy(busybox, &bb).map_err(io_err("copy busybox to", &bb))?;
    set_mode(&bb, 0o755)?;
    crate::evidence::fsio::wait_no_writer(&bb, crate::evidence::fsio::NO_WRITER_WAIT)
        .map_err(io_err("wait for the last writer of", &bb))?;
    for applet in APPLETS {
        if available.iter().any(|a| a == applet) {
            let link = dir.join("bin").join(applet);
            symlink("busybox", &link).map_err(io_err("create symlink", &link))?;
        }
    }

    write_file(
        &dir.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
        0o644,
    )?;
    write_file(
        &dir.join("etc/group"),
        "root:x:0:\nnogroup:x:65534:\n",
        0o644,
    )?;
    write_file(&dir.join("etc/hostname"), "netprobe\n", 0o644)?;
    write_file(
        &dir.join("var/www/index.html"),
        "<!doctype html><title>netprobe</title><p>netprobe guest server</p>\n",
        0o644,
    )?;
    let init = dir.join("init.sh");
    crate::evidence::fsio::write_executable(&init, INIT_SH, 0o755)
        .map_err(io_err("write", &init))?;
    Ok(())
}

/// Check that `dir` is usable as a container rootfs for netprobe: it exists, is a directory and
/// holds an executable `sleep` at `bin/sleep` or `usr/bin/sleep` (a symlink is followed *inside*
/// the rootfs: a relative target such as `busybox` resolves next to the link, an absolute one
/// such as `/bin/busybox` under `dir`).
///
/// Errors: [`OciError::RootfsMissing`], [`OciError::RootfsNotDir`], [`OciError::RootfsNoSleep`]
/// (lists every path looked at).
pub fn check_rootfs(dir: &Path) -> Result<()> {
    let meta = match fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(OciError::RootfsMissing {
                path: dir.to_path_buf(),
            });
        }
        Err(e) => return Err(io_err("stat", dir)(e)),
    };
    if !meta.is_dir() {
        return Err(OciError::RootfsNotDir {
            path: dir.to_path_buf(),
        });
    }
    let looked = sleep_candidates(dir);
    if looked.iter().any(|p| executable_in_rootfs(dir, p, 0)) {
        return Ok(());
    }
    Err(OciError::RootfsNoSleep {
        path: dir.to_path_buf(),
        looked,
    })
}

/// Whether `path` (inside `root`) is, after resolving symlinks within `root` (at most 16 hops),
/// a regular file with an execute bit.
fn executable_in_rootfs(root: &Path, path: &Path, depth: u32) -> bool {
    if depth > 16 {
        return false;
    }
    let Ok(meta) = fs::symlink_metadata(path) else {
        return false;
    };
    if meta.file_type().is_symlink() {
        let Ok(target) = fs::read_link(path) else {
            return false;
        };
        let next = if target.is_absolute() {
            root.join(target.strip_prefix("/").unwrap_or(&target))
        } else {
            path.parent().unwrap_or(root).join(target)
        };
        return executable_in_rootfs(root, &next, depth + 1);
    }
    meta.is_file() && meta.permissions().mode() & 0o111 != 0
}

/// Refuse anything but a static ELF executable: ELF magic, then no `PT_INTERP` program header.
fn check_static_elf(path: &Path) -> Result<()> {
    let refuse = |reason: String| OciError::BusyboxNotStatic {
        path: path.to_path_buf(),
        reason,
    };
    let mut f = fs::File::open(path).map_err(io_err("open", path))?;
    let mut buf = Vec::new();
    // Program headers sit near the start; 64 KiB is far more than any busybox needs.
    f.by_ref()
        .take(64 * 1024)
        .read_to_end(&mut buf)
        .map_err(io_err("read", path))?;
    if buf.len() < 64 || &buf[0..4] != b"\x7fELF" {
        return Err(refuse("not an ELF file".into()));
    }
    let is64 = match buf[4] {
        1 => false,
        2 => true,
        c => return Err(refuse(format!("unknown ELF class {c}"))),
    };
    let le = match buf[5] {
        1 => true,
        2 => false,
        d => return Err(refuse(format!("unknown ELF data encoding {d}"))),
    };
    let rd = |off: usize, n: usize| -> Option<u64> {
        let b = buf.get(off..off + n)?;
        let mut v = 0u64;
        for i in 0..n {
            let byte = if le { b[n - 1 - i] } else { b[i] };
            v = (v << 8) | u64::from(byte);
        }
        Some(v)
    };
    let (phoff, phentsize, phnum) = if is64 {
        (rd(0x20, 8), rd(0x36, 2), rd(0x38, 2))
    } else {
        (rd(0x1c, 4), rd(0x2a, 2), rd(0x2c, 2))
    };
    let (Some(phoff), Some(phentsize), Some(phnum)) = (phoff, phentsize, phnum) else {
        return Err(refuse("truncated ELF header".into()));
    };
    const PT_INTERP: u64 = 3;
    for i in 0..phnum {
        let off = (phoff + i * phentsize) as usize;
        let Some(p_type) = rd(off, 4) else {
            return Err(refuse("program headers beyond the first 64 KiB".into()));
        };
        if p_type == PT_INTERP {
            let (o, s) = if is64 {
                (rd(off + 8, 8), rd(off + 32, 8))
            } else {
                (rd(off + 4, 4), rd(off + 16, 4))
            };
            let interp = match (o, s) {
                (Some(o), Some(s)) => buf
                    .get(o as usize..(o + s) as usize)
                    .map(|b| {
                        String::from_utf8_lossy(b)
                            .trim_end_matches('\0')
                            .to_string()
                    })
                    .unwrap_or_else(|| "?".into()),
                _ => "?".into(),
            };
            return Err(refuse(format!("dynamically linked, interpreter {interp}")));
        }
    }
    Ok(())
}

/// Run `busybox --list` (directly, no shell) and return the applet names.
fn list_applets(busybox: &Path) -> Result<Vec<String>> {
    let mut cmd = Command::new(busybox);
    cmd.arg("--list")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = crate::proc::run_tree(&mut cmd, std::time::Duration::from_secs(30), None)
        .map_err(|e| io_err("run --list on", busybox)(std::io::Error::other(e.to_string())))?;
    if !out.status.success() {
        return Err(OciError::BusyboxNotStatic {
            path: busybox.to_path_buf(),
            reason: format!("`busybox --list` exited with {}", out.status),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect())
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io_err("chmod", path))
}

fn write_file(path: &Path, content: &str, mode: u32) -> Result<()> {
    fs::write(path, content).map_err(io_err("write", path))?;
    set_mode(path, mode)
}

/// Paths [`check_rootfs`] looks at for `sleep`, in order (for messages and tests).
pub fn sleep_candidates(dir: &Path) -> Vec<PathBuf> {
    vec![dir.join("bin/sleep"), dir.join("usr/bin/sleep")]
}
