//! Small helpers only the slot driver needs: random ids, recursive copy with fsync, removal that
//! never crosses a mount, timing. Atomic writes, hashes and time come from
//! [`crate::evidence`] ([`crate::evidence::replace_atomic`], [`crate::evidence::sha256_file`],
//! [`crate::evidence::sha256_hex`], [`crate::evidence::now_rfc3339`]).

use std::fs::{self, File};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The bound of a short helper run by the slot driver (`blkid`, `partx`, `losetup`,
/// `qemu-storage-daemon --daemonize` until it has daemonized, `sync -f`).
pub const TOOL_LIMIT: Duration = Duration::from_secs(60);

/// The bound of `cp -a` of an upper tree.
pub const COPY_LIMIT: Duration = Duration::from_secs(1800);

/// Runs `cmd` as a bounded process tree ([`crate::proc::run_tree`]: its own process group,
/// killed as a whole when `limit` fires or netprobe is interrupted), stdin from /dev/null;
/// stdout and stderr are piped and returned unless the caller redirected them already (then
/// pass `pipe` false).
///
/// Errors: the [`crate::proc::TreeError`] (spawn, wait, timeout, interruption).
pub fn run_bounded(
    cmd: &mut Command,
    limit: Duration,
    pipe: bool,
) -> Result<crate::proc::TreeOutput, crate::proc::TreeError> {
    cmd.stdin(Stdio::null());
    if pipe {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    crate::proc::run_tree(cmd, limit, None)
}

/// `n` random bytes from `/dev/urandom`, hex encoded (falls back to time and pid).
pub fn random_hex(n: usize) -> String {
    let mut buf = vec![0u8; n];
    if File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_err()
    {
        let s = format!("{}-{}", crate::evidence::unix_nanos(), std::process::id());
        return crate::evidence::sha256_hex(s.as_bytes())[..2 * n.min(32)].to_string();
    }
    hex::encode(buf)
}

/// Why a file-tree helper failed.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// The helper program could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// `cp` or `sync`.
        program: &'static str,
        /// The spawn error.
        #[source]
        source: std::io::Error,
    },
    /// The helper program failed; its stderr is kept.
    #[error("{command}: {stderr}")]
    Failed {
        /// The command line, e.g. `cp -a SRC DST`.
        command: String,
        /// Its stderr, trimmed.
        stderr: String,
    },
    /// A mount point lies below the tree to remove (never deleted through).
    #[error("refusing to remove {}: {} is mounted below it", dir.display(), mount.display())]
    MountBelow {
        /// The tree.
        dir: std::path::PathBuf,
        /// The mount point found below it.
        mount: std::path::PathBuf,
    },
    /// Removing the tree failed.
    #[error("remove {}: {source}", dir.display())]
    Remove {
        /// The tree.
        dir: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Runs `program args…` as a bounded process tree (at most `limit`), its stderr captured.
/// Errors: [`TreeError::Spawn`] or
/// [`TreeError::Failed`] naming `command`.
fn run_tool(
    program: &'static str,
    args: &[&std::ffi::OsStr],
    command: String,
    limit: Duration,
) -> Result<(), TreeError> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = match crate::proc::run_tree(&mut cmd, limit, None) {
        Ok(o) => o,
        Err(crate::proc::TreeError::Spawn { source, .. }) => {
            return Err(TreeError::Spawn { program, source });
        }
        Err(e) => {
            return Err(TreeError::Failed {
                command,
                stderr: e.to_string(),
            });
        }
    };
    if out.status.success() {
        Ok(())
    } else {
        Err(TreeError::Failed {
            command,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Copies a directory tree with `cp -a` (ownership, modes, times, xattrs — including overlayfs
/// `trusted.overlay.*` — device nodes and whiteouts preserved), then `sync -f` on the target's
/// filesystem so the copy is durable before it is used.
///
/// Errors: `cp` or `sync` could not run or failed ([`TreeError`], their stderr kept).
pub fn copy_tree(src: &Path, dst: &Path) -> Result<(), TreeError> {
    copy_tree_unsynced(src, dst)?;
    sync_fs(dst)
}

/// `cp -a SRC DST` as a bounded process tree, without the `sync -f` of [`copy_tree`]: for a
/// working copy that nothing needs after a crash (the next overlay run's upper: a crashed host
/// loses the running container with it, and the snapshot's saved upper is the durable copy).
///
/// Errors: [`TreeError::Spawn`] or [`TreeError::Failed`] naming the `cp` command.
pub fn copy_tree_unsynced(src: &Path, dst: &Path) -> Result<(), TreeError> {
    let command = format!("cp -a {} {}", src.display(), dst.display());
    run_tool(
        "cp",
        &[
            "-a".as_ref(),
            "--".as_ref(),
            src.as_os_str(),
            dst.as_os_str(),
        ],
        command,
        COPY_LIMIT,
    )
}

/// `sync -f PATH`: flushes the filesystem holding `path`.
///
/// Errors: [`TreeError::Spawn`] or [`TreeError::Failed`].
pub fn sync_fs(path: &Path) -> Result<(), TreeError> {
    let command = format!("sync -f {}", path.display());
    run_tool(
        "sync",
        &["-f".as_ref(), path.as_os_str()],
        command,
        TOOL_LIMIT,
    )
}

/// Removes a directory tree that netprobe created inside the slot, refusing to cross a mount
/// point (a mount below it is an error, never deleted through).
///
/// Errors: [`TreeError::MountBelow`] or [`TreeError::Remove`].
pub fn remove_tree_same_fs(dir: &Path) -> Result<(), TreeError> {
    if !dir.exists() {
        return Ok(());
    }
    if let Some(m) = crate::ns::mountinfo::mounts_under(dir).into_iter().next() {
        return Err(TreeError::MountBelow {
            dir: dir.to_path_buf(),
            mount: m,
        });
    }
    fs::remove_dir_all(dir).map_err(|source| TreeError::Remove {
        dir: dir.to_path_buf(),
        source,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_helper_whose_child_holds_the_pipes_ends_at_its_bound() {
        // The helper forks a grandchild that keeps stdout open and hangs: the bound ends both.
        let t = std::time::Instant::now();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & echo started; sleep 30"]);
        let e = run_bounded(&mut cmd, Duration::from_millis(500), true).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(10), "{e}");
        assert!(e.to_string().contains("sh"), "{e}");
        let ok = run_bounded(Command::new("echo").arg("hi"), TOOL_LIMIT, true).unwrap();
        assert_eq!(ok.stdout, b"hi\n");
    }
}
