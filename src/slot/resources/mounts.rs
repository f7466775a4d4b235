//! The slot's image and rootfs mounts, each behind an RAII guard:
//! a `.qcow2` is served read-only by `qemu-storage-daemon` (FUSE export, `writable=off`, no
//! conversion), attached to a read-only loop device, and its filesystem mounted read-only; a
//! directory image is used as-is (proven unchanged by its metadata manifest:
//! [`crate::slot::gate::image_unchanged`]). The container's rootfs is an overlay: lower = the image,
//! upper + work = per-run directories in the slot.
//!
//! Guards undo their step on drop (failure or panic) unless [`disarm`](MountGuard::disarm)ed once
//! the slot state records the resource; `cleanup` then releases it from the recorded facts.

use nix::mount::{MntFlags, MsFlags};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::ns::mountinfo::mount_points;
use crate::proc::TreeError;
use crate::slot::resources::partition::{
    Partition, PartitionInfo, partitions, probe_fstype, select_partition,
};
use nix::errno::Errno;

/// Why a mount step failed; each message names the program or call, its arguments and what
/// it answered.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// A helper program (`losetup`, `qemu-storage-daemon`) could not run.
    #[error("cannot run {program}: {source}")]
    Run {
        /// The program.
        program: &'static str,
        /// Why its bounded run did not complete.
        #[source]
        source: TreeError,
    },
    /// `umount2` failed (`lazy`: the `MNT_DETACH` after 5 s of `EBUSY`).
    #[error("umount{} {}: {source}", if *.lazy { " -l" } else { "" }, target.display())]
    Unmount {
        /// The mount point.
        target: PathBuf,
        /// Whether it was the lazy detach.
        lazy: bool,
        /// The errno.
        #[source]
        source: Errno,
    },
    /// An overlay path holds a character of the overlay option syntax.
    #[error("overlay path {0:?} contains ',' ':' or '\\'")]
    OverlayPath(String),
    /// An overlay option is empty or holds a `,`.
    #[error("overlay option {0:?} is empty or contains ','")]
    OverlayOption(String),
    /// The overlay mount failed (the whole option string named).
    #[error("mount overlay ({opts}) on {}: {source}", merged.display())]
    Overlay {
        /// The option string.
        opts: String,
        /// The mount point.
        merged: PathBuf,
        /// The errno.
        #[source]
        source: Errno,
    },
    /// The read-only mount of a block device failed.
    #[error("mount -o ro -t {fstype} {} {}: {source}", dev.display(), target.display())]
    ReadOnly {
        /// The filesystem type probed.
        fstype: String,
        /// The block device.
        dev: PathBuf,
        /// The mount point.
        target: PathBuf,
        /// The errno.
        #[source]
        source: Errno,
    },
    /// The image's partition table could not be read, or no partition matches.
    #[error(transparent)]
    Partition(#[from] crate::slot::resources::partition::PartitionError),
    /// `losetup` failed (its stderr).
    #[error("losetup {}: {stderr}", file.display())]
    Losetup {
        /// The backing file.
        file: PathBuf,
        /// losetup's stderr, trimmed.
        stderr: String,
    },
    /// `losetup --show` printed something other than a loop device.
    #[error("losetup printed {0:?}, not a loop device")]
    NotALoop(String),
    /// The loop device is backed by another file than ours.
    #[error("{} is backed by {}, not by {}: not ours, left alone", device.display(), backing.display(), expected.display())]
    NotOurs {
        /// The loop device.
        device: PathBuf,
        /// Its backing file.
        backing: PathBuf,
        /// The file the slot recorded.
        expected: PathBuf,
    },
    /// The loop device was still attached after [`LOOP_DETACH_WAIT`].
    #[error("losetup -d {}: still attached after {waited_ms} ms ({why}): the device is open elsewhere", device.display())]
    StillAttached {
        /// The loop device.
        device: PathBuf,
        /// [`LOOP_DETACH_WAIT`] in milliseconds.
        waited_ms: u128,
        /// losetup's stderr, or that the detach was deferred.
        why: String,
    },
    /// A file could not be created (the export file, the daemon's log).
    #[error("create {}: {source}", path.display())]
    Create {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The daemon's log file handle could not be duplicated.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// `qemu-storage-daemon` exited with an error (its log).
    #[error("qemu-storage-daemon exited with {status}: {log}")]
    QsdExited {
        /// Its exit status.
        status: std::process::ExitStatus,
        /// Its log, trimmed.
        log: String,
    },
    /// The daemon's pidfile or FUSE export did not appear in 10 s.
    #[error("qemu-storage-daemon: no pidfile or FUSE export at {} after 10 s", .0.display())]
    QsdNoExport(PathBuf),
    /// The daemon did not exit after SIGTERM and SIGKILL.
    #[error("qemu-storage-daemon pid {0} did not exit")]
    QsdAlive(i32),
}

/// Runs a short helper as a bounded process tree, stdout and stderr piped
/// ([`super::fs_tools::run_bounded`], [`super::fs_tools::TOOL_LIMIT`]).
pub(in crate::slot) fn bounded(cmd: &mut Command) -> Result<crate::proc::TreeOutput, TreeError> {
    super::fs_tools::run_bounded(cmd, super::fs_tools::TOOL_LIMIT, true)
}

/// True when `path` is a mount point in this mount namespace.
pub fn is_mounted(path: &Path) -> bool {
    mount_points().iter().any(|m| m == path)
}

/// A mount that is unmounted on drop unless disarmed.
#[derive(Debug)]
pub struct MountGuard {
    target: PathBuf,
    armed: bool,
}

impl MountGuard {
    /// Keeps the mount after the guard is dropped (the slot state now records it).
    pub fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for MountGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = unmount(&self.target);
        }
    }
}

/// Unmounts `target` if mounted; retries `EBUSY` for up to 5 s, then detaches lazily.
///
/// Errors: the unmount failed for another reason.
pub fn unmount(target: &Path) -> Result<(), MountError> {
    if !is_mounted(target) {
        return Ok(());
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match nix::mount::umount2(target, MntFlags::empty()) {
            Ok(()) => return Ok(()),
            Err(nix::errno::Errno::EBUSY) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Err(nix::errno::Errno::EBUSY) => {
                return nix::mount::umount2(target, MntFlags::MNT_DETACH).map_err(|source| {
                    MountError::Unmount {
                        target: target.to_path_buf(),
                        lazy: true,
                        source,
                    }
                });
            }
            Err(nix::errno::Errno::EINVAL) if !is_mounted(target) => return Ok(()),
            Err(source) => {
                return Err(MountError::Unmount {
                    target: target.to_path_buf(),
                    lazy: false,
                    source,
                });
            }
        }
    }
}

/// Mounts an overlay at `merged`: `lowerdir=lower,upperdir=upper,workdir=work` followed by
/// `options` (the profile's `[overlay] options` as [`crate::profile::OverlaySpec::effective`]
/// gives them, recorded in the slot state; today's default `index=off`).
///
/// Errors: a path containing `,` `:` or `\` (overlay option syntax), an option containing `,`,
/// or the mount failed (the message names the whole option string).
pub fn mount_overlay(
    lower: &Path,
    upper: &Path,
    work: &Path,
    merged: &Path,
    options: &[String],
) -> Result<MountGuard, MountError> {
    mount_overlay_with(lower, upper, work, merged, options, None)
}

/// [`mount_overlay`] with overlayfs' `volatile` added (Linux 5.10+): no sync of the upper's
/// filesystem at all, also not the whole-filesystem `syncfs` that unmounting a non-volatile
/// overlay does (measured here: with 300 MB of the host's writes pending, a reset's unmount
/// flushed them all, 101–107 ms; with `volatile` 1 ms). The slot's upper is disposable — every
/// reset mounts a fresh copy of the snapshot's saved upper with a new empty `workdir` (where
/// overlayfs leaves its `work/incompat/volatile` mark) — so nothing is lost that a sync would
/// keep: after a host crash the slot is cleaned and provisioned again. A snapshot's saved upper
/// is netprobe's own copy, made durable by the snapshot's `syncfs`, not by the overlay. A kernel that refuses `volatile`
/// (`EINVAL`) gets the plain mount. Returns the guard and, when the plain mount was taken, the
/// refused mount's message (None: `volatile` applied).
///
/// Errors: as [`mount_overlay`] (an `EINVAL` for another reason fails the plain mount too).
pub fn mount_overlay_volatile(
    lower: &Path,
    upper: &Path,
    work: &Path,
    merged: &Path,
    options: &[String],
) -> Result<(MountGuard, Option<String>), MountError> {
    match mount_overlay_with(lower, upper, work, merged, options, Some("volatile")) {
        Ok(g) => Ok((g, None)),
        Err(
            refused @ MountError::Overlay {
                source: Errno::EINVAL,
                ..
            },
        ) => mount_overlay(lower, upper, work, merged, options)
            .map(|g| (g, Some(refused.to_string()))),
        Err(e) => Err(e),
    }
}

/// The overlay mount of [`mount_overlay`], with `extra` appended to the options.
fn mount_overlay_with(
    lower: &Path,
    upper: &Path,
    work: &Path,
    merged: &Path,
    options: &[String],
    extra: Option<&str>,
) -> Result<MountGuard, MountError> {
    for p in [lower, upper, work] {
        let s = p.to_string_lossy();
        if s.contains([',', ':', '\\']) {
            return Err(MountError::OverlayPath(s.into_owned()));
        }
    }
    if let Some(o) = options.iter().find(|o| o.contains(',') || o.is_empty()) {
        return Err(MountError::OverlayOption(o.clone()));
    }
    let mut opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    );
    for o in options.iter().map(String::as_str).chain(extra) {
        opts.push(',');
        opts.push_str(o);
    }
    nix::mount::mount(
        Some("overlay"),
        merged,
        Some("overlay"),
        MsFlags::empty(),
        Some(opts.as_str()),
    )
    .map_err(|source| MountError::Overlay {
        opts: opts.clone(),
        merged: merged.to_path_buf(),
        source,
    })?;
    Ok(MountGuard {
        target: merged.to_path_buf(),
        armed: true,
    })
}

/// Mounts the filesystem on a block device read-only (`MS_RDONLY`, type from a low-level probe
/// `blkid -p`, never blkid's cache, which keeps stale types for re-used loop devices; default
/// ext4).
///
/// Errors: the mount failed.
pub fn mount_ro(dev: &Path, target: &Path) -> Result<(MountGuard, String), MountError> {
    let fstype = bounded(
        Command::new("blkid")
            .args(["-p", "-o", "value", "-s", "TYPE"])
            .arg(dev),
    )
    .ok()
    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    .filter(|s| !s.is_empty())
    .unwrap_or_else(|| "ext4".into());
    let data = if fstype.starts_with("ext") {
        Some("noload")
    } else {
        None
    };
    nix::mount::mount(
        Some(dev),
        target,
        Some(fstype.as_str()),
        MsFlags::MS_RDONLY,
        data,
    )
    .map_err(|source| MountError::ReadOnly {
        fstype: fstype.clone(),
        dev: dev.to_path_buf(),
        target: target.to_path_buf(),
        source,
    })?;
    Ok((
        MountGuard {
            target: target.to_path_buf(),
            armed: true,
        },
        fstype,
    ))
}

/// A read-only loop device over a file; detached on drop unless disarmed.
#[derive(Debug)]
pub struct LoopGuard {
    /// The loop device, e.g. `/dev/loop3`.
    pub device: PathBuf,
    armed: bool,
}

impl LoopGuard {
    /// Keeps the loop device attached after the guard is dropped.
    pub fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for LoopGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = loop_detach(&self.device, None);
        }
    }
}

/// `losetup --find --show --read-only` over the image's root filesystem: the whole FILE when it
/// has no partition table, else the partition [`Partition::Auto`] picks (by offset and size
/// limit, see [`loop_attach_partition`]). The loop device's backing file is FILE either way.
///
/// Errors: those of [`loop_attach_partition`].
pub fn loop_attach(file: &Path) -> Result<LoopGuard, MountError> {
    loop_attach_partition(file, &Partition::Auto).map(|(g, _)| g)
}

/// `losetup --find --show --read-only [--offset O --sizelimit S] FILE` for the partition `sel`
/// names (see [`partitions`] and [`select_partition`]); also returns that partition (None: the
/// whole file, which has no partition table).
///
/// Errors: the partition table cannot be read, `sel` names no partition (the message lists the
/// partitions), or losetup failed (its stderr).
pub fn loop_attach_partition(
    file: &Path,
    sel: &Partition,
) -> Result<(LoopGuard, Option<PartitionInfo>), MountError> {
    let parts = partitions(file)?;
    let fstypes: Vec<Option<String>> = parts.iter().map(|p| probe_fstype(file, p.start)).collect();
    let part = select_partition(file, &parts, &fstypes, sel)?.cloned();
    let mut range = Vec::new();
    if let Some(p) = &part {
        range = vec![
            "--offset".to_string(),
            p.start.to_string(),
            "--sizelimit".to_string(),
            p.size.to_string(),
        ];
    }
    let out = bounded(
        Command::new("losetup")
            .args(["--find", "--show", "--read-only"])
            .args(&range)
            .arg(file),
    )
    .map_err(|source| MountError::Run {
        program: "losetup",
        source,
    })?;
    if !out.status.success() {
        return Err(MountError::Losetup {
            file: file.to_path_buf(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !dev.starts_with("/dev/loop") {
        return Err(MountError::NotALoop(dev));
    }
    Ok((
        LoopGuard {
            device: PathBuf::from(dev),
            armed: true,
        },
        part,
    ))
}

/// The backing file of a loop device (`/sys/block/loopN/loop/backing_file`), if attached.
pub fn loop_backing_file(device: &Path) -> Option<PathBuf> {
    let name = device.file_name()?.to_str()?;
    let s = fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).ok()?;
    Some(PathBuf::from(
        s.trim_end_matches('\n').trim_end_matches(" (deleted)"),
    ))
}

/// Detaches a loop device; when `expect_backing` is given, only if it is still backed by that
/// file (a loop device re-used by someone else is never detached).
///
/// Errors: losetup -d failed, the device is backed by another file, or it is still attached
/// [`LOOP_DETACH_WAIT`] later (open elsewhere: the kernel defers its detach).
pub fn loop_detach(device: &Path, expect_backing: Option<&Path>) -> Result<(), MountError> {
    let Some(back) = loop_backing_file(device) else {
        return Ok(());
    };
    if let Some(exp) = expect_backing
        && back != exp
    {
        return Err(MountError::NotOurs {
            device: device.to_path_buf(),
            backing: back,
            expected: exp.to_path_buf(),
        });
    }
    // A device still open elsewhere (a probe, a scan) is busy: `losetup -d` fails or the
    // kernel defers the detach. Retried, bounded, until the device is really gone, so the
    // caller's "released" is true.
    // Gone, or already re-used for another file by someone else (never detached by us then).
    let gone = || loop_backing_file(device).is_none_or(|b| b != back);
    let deadline = std::time::Instant::now() + LOOP_DETACH_WAIT;
    loop {
        let out = bounded(Command::new("losetup").arg("-d").arg(device)).map_err(|source| {
            MountError::Run {
                program: "losetup",
                source,
            }
        })?;
        if gone() {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(MountError::StillAttached {
                device: device.to_path_buf(),
                waited_ms: LOOP_DETACH_WAIT.as_millis(),
                why: if out.status.success() {
                    "detach deferred until closed".to_string()
                } else {
                    String::from_utf8_lossy(&out.stderr).trim().to_string()
                },
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        if gone() {
            return Ok(());
        }
    }
}

/// How long [`loop_detach`] waits for a deferred detach to complete.
pub const LOOP_DETACH_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Loop devices currently backed by `file`.
pub fn loops_backed_by(file: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Ok(rd) = fs::read_dir("/sys/block") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with("loop") {
                let dev = PathBuf::from(format!("/dev/{name}"));
                if loop_backing_file(&dev).as_deref() == Some(file) {
                    v.push(dev);
                }
            }
        }
    }
    v
}

/// A running `qemu-storage-daemon` serving a qcow2 read-only as a FUSE export; stopped on drop
/// unless disarmed.
#[derive(Debug)]
pub struct QsdGuard {
    /// The daemon's pid (from its pidfile).
    pub pid: i32,
    /// The FUSE export file (a regular file in the slot, the export's mount point).
    pub export_file: PathBuf,
    armed: bool,
}

impl QsdGuard {
    /// Keeps the daemon running after the guard is dropped.
    pub fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for QsdGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = qsd_stop(self.pid, &self.export_file);
        }
    }
}

fn qemu_opt_escape(p: &Path) -> String {
    p.to_string_lossy().replace(',', ",,")
}

/// Starts `qemu-storage-daemon --daemonize` with a read-only file blockdev, a read-only qcow2
/// blockdev on it, and a FUSE export (`writable=off`) on `export_file` (created empty if missing).
/// The daemon's output goes to `log`.
///
/// Errors: the daemon did not start, or its pidfile or the FUSE mount did not appear in 10 s.
pub fn qsd_start(
    qcow2: &Path,
    export_file: &Path,
    pidfile: &Path,
    log: &Path,
) -> Result<QsdGuard, MountError> {
    let create = |path: &Path| {
        let path = path.to_path_buf();
        move |source| MountError::Create { path, source }
    };
    if !export_file.exists() {
        fs::write(export_file, b"").map_err(create(export_file))?;
    }
    let _ = fs::remove_file(pidfile);
    let logf = fs::File::create(log).map_err(create(log))?;
    let logf2 = logf.try_clone()?;
    // Bounded until it has daemonized (the daemon itself setsid()s out of the group and keeps
    // running; its output goes to `log`, not to pipes).
    let mut qsd = Command::new("qemu-storage-daemon");
    qsd.arg("--blockdev")
        .arg(format!(
            "driver=file,node-name=file0,filename={},read-only=on",
            qemu_opt_escape(qcow2)
        ))
        .arg("--blockdev")
        .arg("driver=qcow2,node-name=img0,file=file0,read-only=on")
        .arg("--export")
        .arg(format!(
            "type=fuse,id=exp0,node-name=img0,mountpoint={},writable=off",
            qemu_opt_escape(export_file)
        ))
        .arg("--pidfile")
        .arg(pidfile)
        .arg("--daemonize")
        .stdin(Stdio::null())
        .stdout(logf)
        .stderr(logf2);
    let status = super::fs_tools::run_bounded(&mut qsd, super::fs_tools::TOOL_LIMIT, false)
        .map_err(|source| MountError::Run {
            program: "qemu-storage-daemon",
            source,
        })?
        .status;
    if !status.success() {
        let log_text = fs::read_to_string(log).unwrap_or_default();
        return Err(MountError::QsdExited {
            status,
            log: log_text.trim().to_string(),
        });
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pid = fs::read_to_string(pidfile)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok());
        if let Some(pid) = pid
            && is_mounted(export_file)
        {
            return Ok(QsdGuard {
                pid,
                export_file: export_file.to_path_buf(),
                armed: true,
            });
        }
        if Instant::now() > deadline {
            if let Some(pid) = pid {
                let _ = qsd_stop(pid, export_file);
            }
            return Err(MountError::QsdNoExport(export_file.to_path_buf()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// True when `pid` is a live `qemu-storage-daemon` whose command line names `export_file`.
pub fn qsd_is_ours(pid: i32, export_file: &Path) -> bool {
    let Ok(cmd) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let cmd = String::from_utf8_lossy(&cmd);
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat
        .rsplit(')')
        .next()
        .map(|r| r.trim_start().starts_with('Z'))
        .unwrap_or(true);
    !zombie
        && cmd.contains("qemu-storage-daemon")
        && cmd.contains(&format!("mountpoint={}", qemu_opt_escape(export_file)))
}

/// Stops the daemon (SIGTERM, then SIGKILL after 5 s) if `pid` is still ours, then makes sure the
/// FUSE export is unmounted.
///
/// Errors: the process did not exit, or the export stayed mounted.
pub fn qsd_stop(pid: i32, export_file: &Path) -> Result<(), MountError> {
    if qsd_is_ours(pid, export_file) {
        let p = nix::unistd::Pid::from_raw(pid);
        let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while qsd_is_ours(pid, export_file) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if qsd_is_ours(pid, export_file) {
            let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGKILL);
            std::thread::sleep(Duration::from_millis(200));
        }
        if qsd_is_ours(pid, export_file) {
            return Err(MountError::QsdAlive(pid));
        }
    }
    if is_mounted(export_file) {
        unmount(export_file)?;
    }
    Ok(())
}

/// Pids of live `qemu-storage-daemon` processes whose command line mentions `needle`.
pub fn qsd_pids_mentioning(needle: &str) -> Vec<i32> {
    let mut v = Vec::new();
    if let Ok(rd) = fs::read_dir("/proc") {
        for e in rd.flatten() {
            if let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>()
                && let Ok(c) = fs::read(format!("/proc/{pid}/cmdline"))
            {
                let c = String::from_utf8_lossy(&c);
                if c.contains("qemu-storage-daemon") && c.contains(needle) {
                    v.push(pid);
                }
            }
        }
    }
    v
}
