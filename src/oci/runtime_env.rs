//! How the OCI runtime process is set up around its argv: which CLI it speaks
//! ([`RuntimeKind`]), the private `PATH` folder that points it at the requested CRIU
//! ([`CriuPathDir`]), and crun's private mount namespace on this host ([`CrunNamespace`]).
//! Used by [`super::runtime::Runtime`]; see that module's doc for why.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::error::{Result, io_err};

/// Which OCI runtime CLI a binary speaks, from the first line of its `--version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    /// runc (`runc version X`): sets `EmptyNs = CLONE_NEWNET` for checkpoint and restore.
    Runc,
    /// crun (`crun version X`, built `+CRIU`): keeps the network namespace.
    Crun,
}

impl RuntimeKind {
    /// `runc` or `crun`.
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeKind::Runc => "runc",
            RuntimeKind::Crun => "crun",
        }
    }

    /// The kind named by a `--version` output (`runc version 1.4.3+ds1…` → Runc, `crun version
    /// 1.28…` → Crun); `None` for any other program (youki, a shell, …).
    pub fn from_version_output(output: &str) -> Option<RuntimeKind> {
        match crate::host::parse_runtime_version(output)?.0.as_str() {
            "runc" => Some(RuntimeKind::Runc),
            "crun" => Some(RuntimeKind::Crun),
            _ => None,
        }
    }

    /// Options this kind always gets for `checkpoint` and `restore`: none for runc;
    /// `--manage-cgroups-mode=ignore` for crun. crun cannot see this host's cgroup2 mount (it is
    /// detached in crun's mount namespace), so the container stays in the caller's cgroup2
    /// cgroup — the hierarchy's root — and CRIU's default (`soft`) mode would dump every cgroup
    /// below it and recreate all of them, nested, at each restore (measured here: 165,887
    /// directories after a few dozen crun cycles). crun places the restored container in its
    /// own cgroup v1 cgroups itself.
    pub fn checkpoint_restore_args(self) -> &'static [&'static str] {
        match self {
            RuntimeKind::Runc => &[],
            RuntimeKind::Crun => &["--manage-cgroups-mode=ignore"],
        }
    }

    /// A guess from the file name alone (`crun*` → Crun, anything else → Runc), for callers that
    /// have not run `--version`; [`Runtime::with_kind`] sets the proven kind.
    pub fn guess_from_path(path: &Path) -> RuntimeKind {
        match path.file_name().and_then(|n| n.to_str()) {
            Some(n) if n.starts_with("crun") => RuntimeKind::Crun,
            _ => RuntimeKind::Runc,
        }
    }
}

/// crun's default state folder, where crun 1.28 expects `.empty-directory` (see the module doc).
pub const CRUN_DEFAULT_ROOT: &str = "/run/crun";

/// The cgroup2 mount of a hybrid cgroup host, which crun refuses (detached for crun only).
pub const HYBRID_UNIFIED_MOUNT: &str = "/sys/fs/cgroup/unified";

/// What netprobe changes in how crun runs on this host (declared differences), empty for runc.
/// `hybrid`: whether [`HYBRID_UNIFIED_MOUNT`] is mounted here.
pub fn crun_quirks(kind: RuntimeKind, hybrid: bool) -> Vec<String> {
    if kind != RuntimeKind::Crun {
        return vec![];
    }
    let mut d = vec![format!(
        "crun runs in a private mount namespace where its private state folder is bind-mounted on {CRUN_DEFAULT_ROOT} (--root {CRUN_DEFAULT_ROOT}): crun 1.28 with another --root records {CRUN_DEFAULT_ROOT}/.empty-directory for directory maskedPaths at checkpoint but looks under <root>/.empty-directory at restore"
    )];
    d.push("crun checkpoints and restores with --manage-cgroups-mode=ignore: CRIU neither dumps nor restores the container's cgroups (crun creates them at restore from config.json)".to_string());
    if hybrid {
        d.push(format!(
            "crun runs with {HYBRID_UNIFIED_MOUNT} detached in its private mount namespace and --cgroup-manager=cgroupfs (crun refuses hybrid cgroups): the container's cgroups are the host's cgroup v1 hierarchies only"
        ));
    }
    d
}

/// Whether [`HYBRID_UNIFIED_MOUNT`] is a mount point here (hybrid cgroup host).
pub fn host_is_hybrid() -> bool {
    fs::read_to_string("/proc/self/mountinfo")
        .map(|m| {
            m.lines()
                .any(|l| l.split(' ').nth(4) == Some(HYBRID_UNIFIED_MOUNT))
        })
        .unwrap_or(false)
}

/// The name of every [`CriuPathDir`] in the temporary folder starts with this, then the pid of
/// the netprobe process that made it and `-` (and, for a slot's runtime, its owner tag:
/// [`SLOT_TAG_PREFIX`]).
pub const CRIU_PATH_PREFIX: &str = "netprobe-criu-path-";

/// After `<prefix><pid>-`, the names a slot's runtime makes in the temporary folder carry
/// `slot-<owner id>-` (the id of the slot's `owner.json`, random per slot lifetime): so a slot's
/// `cleanup` takes only what its own verbs left ([`TmpOwner::Slot`]), and the probe runs' stale
/// sweep leaves a slot's leftovers to that slot ([`TmpOwner::Untagged`]).
pub const SLOT_TAG_PREFIX: &str = "slot-";

/// Whose leftovers in the temporary folder a sweep takes, by the owner tag in their names
/// ([`SLOT_TAG_PREFIX`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TmpOwner<'a> {
    /// Names without an owner tag: a probe run's (and a slot verb's of a netprobe before the
    /// tag).
    Untagged,
    /// Names tagged with this slot owner id only (never an untagged name, never another id).
    Slot(&'a str),
}

impl TmpOwner<'_> {
    /// Whether `after_pid` (a name's rest after `<prefix><pid>-`) is this owner's.
    fn owns(self, after_pid: &str) -> bool {
        let tagged = after_pid.strip_prefix(SLOT_TAG_PREFIX);
        match self {
            TmpOwner::Untagged => tagged.is_none(),
            TmpOwner::Slot(id) => {
                !id.is_empty()
                    && tagged
                        .and_then(|t| t.strip_prefix(id))
                        .is_some_and(|t| t.starts_with('-'))
            }
        }
    }
}

/// The owner tag a slot owner id gives the runtime's temporary names (`slot-<id>`), or `None`
/// when the id is not 1 to 64 lowercase hex digits (as `owner.json` writes it): anything else
/// could name another folder, so such names stay untagged and no slot's cleanup takes them.
pub fn slot_owner_tag(owner_id: &str) -> Option<String> {
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    (!owner_id.is_empty() && owner_id.len() <= 64 && owner_id.bytes().all(hex))
        .then(|| format!("{SLOT_TAG_PREFIX}{owner_id}"))
}

/// The prefix of a temporary name this process makes: `<base><pid>-`, then `<tag>-` when the
/// runtime has an owner tag ([`slot_owner_tag`]).
pub(crate) fn tmp_name_prefix(base: &str, tag: Option<&str>) -> String {
    let pid = std::process::id();
    match tag {
        Some(t) => format!("{base}{pid}-{t}-"),
        None => format!("{base}{pid}-"),
    }
}

/// The entries of `tmp` named `<prefix><pid>-…` (and ending in `suffix`) that belong to
/// `owner` ([`TmpOwner`]) and whose netprobe process has exited (`kill(pid, 0)` answers
/// `ESRCH`, or a zombie not reaped yet: [`crate::proc::exited`]): what a SIGKILL left behind. A name without a pid, of a live process, or of another
/// owner is not listed.
pub fn left_by_dead_processes(
    tmp: &Path,
    prefix: &str,
    suffix: &str,
    owner: TmpOwner<'_>,
) -> Vec<fs::DirEntry> {
    let Ok(entries) = fs::read_dir(tmp) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix(prefix)
                .filter(|r| r.ends_with(suffix))
                .and_then(|r| r.split_once('-'))
                .filter(|(_, after)| owner.owns(after))
                .and_then(|(pid, _)| pid.parse::<i32>().ok())
                .filter(|p| *p > 0)
                .is_some_and(crate::proc::exited)
        })
        .collect()
}

/// The names a [`CriuPathDir`] may hold, each a symlink: `criu` and the runtime's (`runc`,
/// `crun`, [`RuntimeKind::as_str`]).
const EXEC_LINK_NAMES: [&str; 3] = ["criu", "runc", "crun"];

/// Removes the CRIU PATH folders ([`CriuPathDir`]) of `owner` in `tmp` that a netprobe process
/// killed with SIGKILL left behind: a folder named `netprobe-criu-path-<pid>-…` whose pid no
/// longer exists and that holds nothing but symlinks named `criu`, `runc` or `crun` (the CRIU
/// and runtime links [`CriuPathDir::new`] makes), or nothing (killed before it made them). A
/// folder of a live process or of another owner, an unexpected content or a name without a pid
/// is left alone. Returns the folders removed.
pub fn sweep_stale_criu_path_dirs(tmp: &Path, owner: TmpOwner<'_>) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for e in left_by_dead_processes(tmp, CRIU_PATH_PREFIX, "", owner) {
        let dir = e.path();
        // Empty when the process was killed between making the folder and the symlinks.
        let only_links = fs::read_dir(&dir).is_ok_and(|d| {
            d.flatten().all(|e| {
                EXEC_LINK_NAMES.iter().any(|n| e.file_name() == *n)
                    && e.file_type().is_ok_and(|t| t.is_symlink())
            })
        });
        if only_links && fs::remove_dir_all(&dir).is_ok() {
            removed.push(dir);
        }
    }
    removed
}

/// The name of every temporary runc `--log` file starts with this, then the pid of the netprobe
/// process that made it and `-` (`netprobe-runc-<pid>-XXXXXX.log`; a slot's runtime adds its
/// owner tag: `netprobe-runc-<pid>-slot-<id>-XXXXXX.log`).
pub const RUNC_LOG_PREFIX: &str = "netprobe-runc-";

/// Removes the runc `--log` files of `owner` in `tmp` that a netprobe process killed with
/// SIGKILL left behind: `netprobe-runc-<pid>-….log` whose pid no longer exists. A file of a
/// live process or of another owner, or a name without a pid, is left alone. Returns the files
/// removed.
pub fn sweep_stale_runc_logs(tmp: &Path, owner: TmpOwner<'_>) -> Vec<PathBuf> {
    left_by_dead_processes(tmp, RUNC_LOG_PREFIX, ".log", owner)
        .into_iter()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|f| fs::remove_file(f).is_ok())
        .collect()
}

/// Whether the kernel would name a process executed from `path` by a number: the command name
/// (`comm`) is the last component of the path given to `execve(2)`, so a sealed copy run as
/// `/proc/<holder pid>/fd/<n>` (or `/dev/fd/<n>`) shows in `ps` as `<n>`. Such a runtime is run
/// through a symlink named after its kind instead ([`CriuPathDir::new`]).
pub(crate) fn named_by_number(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A private folder holding a `criu` symlink to the requested CRIU (put first in the spawned
/// runtime's `PATH`), and, for a runtime executed from a descriptor path ([`named_by_number`]),
/// a `runc`/`crun` symlink to it through which it is executed, so the kernel names the process
/// `runc`/`crun` (the binary run is still the one the symlink points at, e.g. the slot's sealed
/// copy); removed when dropped (and on interruption). Named `netprobe-criu-path-<pid>-…`
/// (`…-<pid>-slot-<id>-…` for a slot's runtime) so that one left by a killed process is found
/// by its owner ([`sweep_stale_criu_path_dirs`]).
pub(crate) struct CriuPathDir {
    _dir: tempfile::TempDir,
    runtime_link: Option<PathBuf>,
    _on_signal: crate::ns::cleanup::Registration,
}

impl CriuPathDir {
    /// Creates the folder, its name carrying `tag` when given ([`tmp_name_prefix`]), with a
    /// `criu` symlink to `criu` when given (a bare name is resolved through `PATH`, a relative
    /// path made absolute; `cmd` then gets `PATH=<folder>:<netprobe's PATH>`) and a symlink named
    /// `runtime.0` to `runtime.1` when given ([`CriuPathDir::runtime_link`]).
    ///
    /// Errors: [`OciError::Io`] when the folder or a symlink cannot be created.
    pub(crate) fn new(
        criu: Option<&Path>,
        runtime: Option<(RuntimeKind, &Path)>,
        cmd_env: &mut Vec<(OsString, OsString)>,
        tag: Option<&str>,
    ) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix(&tmp_name_prefix(CRIU_PATH_PREFIX, tag))
            .tempdir()
            .map_err(io_err(
                "create the CRIU PATH folder in",
                std::env::temp_dir(),
            ))?;
        let p = dir.path().to_path_buf();
        let on_signal =
            crate::ns::cleanup::register(format!("CRIU PATH folder {}", p.display()), move || {
                let _ = fs::remove_dir_all(&p);
            });
        if let Some(criu) = criu {
            let target = crate::host::find_in_path(criu).unwrap_or_else(|| criu.to_path_buf());
            let target = std::path::absolute(&target).unwrap_or(target);
            let link = dir.path().join("criu");
            std::os::unix::fs::symlink(&target, &link).map_err(io_err("symlink", &link))?;
            let rest = std::env::var_os("PATH").unwrap_or_else(|| {
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()
            });
            let mut path = OsString::from(dir.path());
            path.push(":");
            path.push(rest);
            cmd_env.push(("PATH".into(), path));
        }
        let runtime_link = match runtime {
            Some((kind, target)) => {
                let link = dir.path().join(kind.as_str());
                std::os::unix::fs::symlink(target, &link).map_err(io_err("symlink", &link))?;
                Some(link)
            }
            None => None,
        };
        Ok(Self {
            _dir: dir,
            runtime_link,
            _on_signal: on_signal,
        })
    }

    /// The runtime's symlink in the folder (`<folder>/runc`, `<folder>/crun`), when made.
    pub(crate) fn runtime_link(&self) -> Option<&Path> {
        self.runtime_link.as_deref()
    }
}

/// How one crun call runs: in a private mount namespace (made in the child before exec) where
/// the private state folder is bind-mounted on [`CRUN_DEFAULT_ROOT`] and, on a hybrid host,
/// [`HYBRID_UNIFIED_MOUNT`] is detached. Nothing changes in the host's mount namespace.
pub(crate) struct CrunNamespace {
    root: std::ffi::CString,
    target: std::ffi::CString,
    unified: Option<std::ffi::CString>,
}

impl CrunNamespace {
    /// Prepares the paths (creating the private root and, if missing, `/run/crun`).
    ///
    /// Errors: [`OciError::Io`] when either folder cannot be created.
    pub(crate) fn new(root: &Path) -> Result<Self> {
        use std::os::unix::ffi::OsStrExt;
        fs::create_dir_all(root).map_err(io_err("create directory", root))?;
        let target = Path::new(CRUN_DEFAULT_ROOT);
        fs::create_dir_all(target).map_err(io_err("create directory", target))?;
        let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap_or_default();
        Ok(Self {
            root: c(root),
            target: c(target),
            unified: host_is_hybrid().then(|| c(Path::new(HYBRID_UNIFIED_MOUNT))),
        })
    }

    /// Makes `cmd`'s child enter the namespace before exec.
    pub(crate) fn apply(self, cmd: &mut Command) {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure only makes async-signal-safe system calls on data prepared before
        // the fork (no allocation).
        unsafe {
            cmd.pre_exec(move || {
                let none = std::ptr::null();
                if libc::unshare(libc::CLONE_NEWNS) != 0
                    || libc::mount(
                        none,
                        c"/".as_ptr(),
                        none,
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(u) = &self.unified
                    && libc::umount2(u.as_ptr(), libc::MNT_DETACH) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::mount(
                    self.root.as_ptr(),
                    self.target.as_ptr(),
                    none,
                    libc::MS_BIND,
                    std::ptr::null(),
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_folders_of_dead_processes_holding_only_criu_are_swept() {
        let tmp = tempfile::tempdir().unwrap();
        // A pid above the kernel's largest pid_max (4194304) never exists.
        let mk = |name: &str, extra: bool| {
            let d = tmp.path().join(name);
            fs::create_dir(&d).unwrap();
            std::os::unix::fs::symlink("/nonexistent/criu", d.join("criu")).unwrap();
            if extra {
                fs::write(d.join("other"), b"x").unwrap();
            }
            d
        };
        let dead = mk("netprobe-criu-path-99999999-abc", false);
        let alive = mk(
            &format!("netprobe-criu-path-{}-abc", std::process::id()),
            false,
        );
        let unexpected = mk("netprobe-criu-path-99999998-abc", true);
        let no_pid = mk("netprobe-criu-path-abcdef", false);
        let empty = tmp.path().join("netprobe-criu-path-99999997-abc");
        fs::create_dir(&empty).unwrap();
        // A slot's (tagged): never an untagged sweep's.
        let slot = mk("netprobe-criu-path-99999996-slot-0a1b-abc", false);
        let mut swept = sweep_stale_criu_path_dirs(tmp.path(), TmpOwner::Untagged);
        swept.sort();
        assert_eq!(swept, vec![empty.clone(), dead.clone()]);
        assert!(!dead.exists() && !empty.exists());
        assert!(alive.exists() && unexpected.exists() && no_pid.exists() && slot.exists());
    }

    /// A folder holding the runtime's symlink too (`runc`, `crun`: a sealed copy run by name)
    /// is swept; one holding any other name, or a `runc` that is not a symlink, is left.
    #[test]
    fn folders_with_the_runtimes_link_are_swept_and_only_those() {
        let tmp = tempfile::tempdir().unwrap();
        let mk = |name: &str, links: &[&str], file: Option<&str>| {
            let d = tmp.path().join(name);
            fs::create_dir(&d).unwrap();
            for l in links {
                std::os::unix::fs::symlink("/proc/1/fd/8", d.join(l)).unwrap();
            }
            if let Some(f) = file {
                fs::write(d.join(f), b"x").unwrap();
            }
            d
        };
        let runc = mk("netprobe-criu-path-99999999-a", &["criu", "runc"], None);
        let crun = mk("netprobe-criu-path-99999998-a", &["crun"], None);
        let other = mk("netprobe-criu-path-99999997-a", &["criu", "youki"], None);
        let regular = mk("netprobe-criu-path-99999996-a", &["criu"], Some("runc"));
        let mut swept = sweep_stale_criu_path_dirs(tmp.path(), TmpOwner::Untagged);
        swept.sort();
        assert_eq!(swept, vec![crun, runc]);
        assert!(other.exists() && regular.exists());
    }

    #[test]
    fn only_a_descriptor_path_names_a_process_by_a_number() {
        for p in ["/proc/123/fd/8", "/dev/fd/3"] {
            assert!(named_by_number(Path::new(p)), "{p}");
        }
        for p in ["/opt/runc-1.4.3/sbin/runc", "runc", "/", "/usr/bin/crun1"] {
            assert!(!named_by_number(Path::new(p)), "{p}");
        }
    }

    /// A slot's sweep takes only the names tagged with its own owner id: never another slot's
    /// (even one whose id starts with it), never an untagged name, never a live process's.
    #[test]
    fn a_slot_sweep_takes_only_its_own_tagged_leftovers() {
        let tmp = tempfile::tempdir().unwrap();
        let mk = |name: &str| {
            let d = tmp.path().join(name);
            fs::create_dir(&d).unwrap();
            std::os::unix::fs::symlink("/nonexistent/criu", d.join("criu")).unwrap();
            d
        };
        let mine = mk("netprobe-criu-path-99999999-slot-0a1b-abc");
        let other = mk("netprobe-criu-path-99999998-slot-ffff-abc");
        let longer = mk("netprobe-criu-path-99999997-slot-0a1bc-abc");
        let untagged = mk("netprobe-criu-path-99999996-abc");
        let live = mk(&format!(
            "netprobe-criu-path-{}-slot-0a1b-abc",
            std::process::id()
        ));
        let log = tmp.path().join("netprobe-runc-99999999-slot-0a1b-x1.log");
        let other_log = tmp.path().join("netprobe-runc-99999999-slot-ffff-x1.log");
        fs::write(&log, b"").unwrap();
        fs::write(&other_log, b"").unwrap();
        assert_eq!(
            sweep_stale_criu_path_dirs(tmp.path(), TmpOwner::Slot("0a1b")),
            vec![mine.clone()]
        );
        assert_eq!(
            sweep_stale_runc_logs(tmp.path(), TmpOwner::Slot("0a1b")),
            vec![log.clone()]
        );
        assert!(sweep_stale_criu_path_dirs(tmp.path(), TmpOwner::Slot("")).is_empty());
        assert!(other.exists() && longer.exists() && untagged.exists() && live.exists());
        assert!(other_log.exists());
    }

    #[test]
    fn only_a_hex_owner_id_tags_the_names() {
        assert_eq!(slot_owner_tag("0a1b").as_deref(), Some("slot-0a1b"));
        for bad in ["", "0A1B", "../x", "0a-1b", &"a".repeat(65)] {
            assert_eq!(slot_owner_tag(bad), None, "{bad:?}");
        }
        let p = tmp_name_prefix(CRIU_PATH_PREFIX, Some("slot-0a1b"));
        assert_eq!(
            p,
            format!("netprobe-criu-path-{}-slot-0a1b-", std::process::id())
        );
    }

    #[test]
    fn only_runc_logs_of_dead_processes_are_swept() {
        let tmp = tempfile::tempdir().unwrap();
        let mk = |name: &str| {
            let f = tmp.path().join(name);
            fs::write(&f, b"level=error").unwrap();
            f
        };
        let dead = mk("netprobe-runc-99999999-a1b2c3.log");
        let alive = mk(&format!("netprobe-runc-{}-a1b2c3.log", std::process::id()));
        let old_name = mk("netprobe-runc-a1b2c3.log");
        let not_log = mk("netprobe-runc-99999999-a1b2c3.txt");
        assert_eq!(
            sweep_stale_runc_logs(tmp.path(), TmpOwner::Untagged),
            vec![dead.clone()]
        );
        assert!(!dead.exists());
        assert!(alive.exists() && old_name.exists() && not_log.exists());
    }
}
