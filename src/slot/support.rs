//! Small helpers the slot driver needs: atomic writes, sha256, time, random ids, CRIU config
//! refusal, recursive copy with fsync. Some of these belong to `evidence`/`host`; they live here
//! until those modules expose them (see the module report).

use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes `bytes` to `path` atomically: a temporary sibling (`.<name>.tmp-<pid>`), `fsync`,
/// `rename`, then `fsync` of the directory.
///
/// Errors: any I/O error; the temporary file is removed on failure.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let res = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        fsync_dir(dir)
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res
}

/// `fsync` of a directory (makes renames and creations in it durable).
pub fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Lower-case hex SHA-256 of a file's content, read in 64 KiB blocks.
///
/// Errors: the file cannot be opened or read.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// Lower-case hex SHA-256 of bytes.
pub fn sha256_bytes(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// Now, RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

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
        return sha256_bytes(s.as_bytes())[..2 * n.min(32)].to_string();
    }
    hex::encode(buf)
}

/// CRIU configuration files present on this host (DESIGN.md section 2): `/etc/criu/default.conf`,
/// `$HOME/.criu/default.conf`, `/etc/criu/runc.conf`, and `$CRIU_CONFIG_FILE` when set and
/// non-empty. Any of these silently changes CRIU's behaviour; netprobe refuses to run.
/// (Belongs to `host::refuse_criu_config`; kept here until that lands.)
pub fn criu_config_files() -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut cands = vec![
        PathBuf::from("/etc/criu/default.conf"),
        PathBuf::from("/etc/criu/runc.conf"),
    ];
    if let Ok(home) = std::env::var("HOME") {
        cands.push(Path::new(&home).join(".criu/default.conf"));
    }
    cands.push(PathBuf::from("/root/.criu/default.conf"));
    for c in cands {
        if fs::symlink_metadata(&c).is_ok() && !found.contains(&c) {
            found.push(c);
        }
    }
    if let Ok(v) = std::env::var("CRIU_CONFIG_FILE")
        && !v.is_empty()
    {
        found.push(PathBuf::from(format!("$CRIU_CONFIG_FILE={v}")));
    }
    found
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
