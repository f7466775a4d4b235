//! Small helpers only the slot driver needs: random ids, recursive copy with fsync, removal that
//! never crosses a mount, timing. Atomic writes, hashes and time come from
//! [`crate::evidence`] ([`crate::evidence::replace_atomic`], [`crate::evidence::sha256_file`],
//! [`crate::evidence::sha256_hex`], [`crate::evidence::now_rfc3339`]).

use std::fs::{self, File};
use std::io::Read;
use std::path::Path;
use std::process::Command;

/// `n` random bytes from `/dev/urandom`, hex encoded (falls back to time and pid).
pub fn random_hex(n: usize) -> String {
    let mut buf = vec![0u8; n];
    if File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_err()
    {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let s = format!("{t}-{}", std::process::id());
        return crate::evidence::sha256_hex(s.as_bytes())[..2 * n.min(32)].to_string();
    }
    hex::encode(buf)
}

/// Copies a directory tree with `cp -a` (ownership, modes, times, xattrs — including overlayfs
/// `trusted.overlay.*` — device nodes and whiteouts preserved), then `sync -f` on the target's
/// filesystem so the copy is durable before it is used.
///
/// Errors: `cp` or `sync` failed (their stderr in the message).
pub fn copy_tree(src: &Path, dst: &Path) -> Result<(), String> {
    let out = Command::new("cp")
        .arg("-a")
        .arg("--")
        .arg(src)
        .arg(dst)
        .output()
        .map_err(|e| format!("cannot run cp: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cp -a {} {}: {}",
            src.display(),
            dst.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    sync_fs(dst)
}

/// `sync -f PATH`: flushes the filesystem holding `path`.
pub fn sync_fs(path: &Path) -> Result<(), String> {
    let out = Command::new("sync")
        .arg("-f")
        .arg(path)
        .output()
        .map_err(|e| format!("cannot run sync: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "sync -f {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Removes a directory tree that netprobe created inside the slot, refusing to cross a mount
/// point (a mount below it is an error, never deleted through).
///
/// Errors: a mount point inside, or an I/O error.
pub fn remove_tree_same_fs(dir: &Path) -> Result<(), String> {
    if !dir.exists() {
        return Ok(());
    }
    let mounts = super::mounts::mount_points();
    if let Some(m) = mounts.iter().find(|m| m.starts_with(dir)) {
        return Err(format!(
            "refusing to remove {}: {} is mounted below it",
            dir.display(),
            m.display()
        ));
    }
    fs::remove_dir_all(dir).map_err(|e| format!("remove {}: {e}", dir.display()))
}

/// Milliseconds elapsed since `t` (monotonic clock).
pub fn ms_since(t: std::time::Instant) -> u64 {
    t.elapsed().as_millis() as u64
}

/// Runs `f` and returns its value with its duration in whole milliseconds (monotonic clock).
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let t = std::time::Instant::now();
    let out = f();
    (out, ms_since(t))
}
