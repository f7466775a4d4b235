//! crun as the slot's runtime (issue 12 part 3): what a failed crun restore leaves and how the
//! slot releases it. Measured here with crun 1.28 + CRIU 4.3 (a restore CRIU refused): crun
//! leaves
//!
//! - a state folder `<runtime root>/<container id>/` holding only `config.json` (no `status`),
//!   so every later `crun state` fails with "open `…/status`: No such file or directory" and
//!   the next verb cannot prove the container absent; and
//! - an empty `.proxy-crun` cgroup under the slot's cgroup in every hierarchy
//!   (`/sys/fs/cgroup/<controller>/<cgroupsPath>/.proxy-crun`), plus the slot's own (empty)
//!   cgroup folders, which break the next restore.
//!
//! Both are the slot's own (its private runtime root; its `cgroupsPath`, which carries the
//! slot's marker id): an empty one is removed, anything else is refused with its path named.

use crate::cgroup::mode::parse_mountinfo;
use crate::cgroup::procs::ProcsError;
use crate::oci::RuntimeKind;
use crate::slot::record::verb_run;
use crate::slot::resources::runtime_half_state::HalfStateError;
use std::path::{Path, PathBuf};

/// The cgroup crun creates under the container's cgroup at restore.
pub const PROXY_CGROUP: &str = ".proxy-crun";

/// The runtime's kind from `<rt> --version` ([`RuntimeKind::from_version_output`]; 30 s bound,
/// stdin `/dev/null`), and how it was found. When `--version` cannot run or names neither runc
/// nor crun, the kind is guessed from the file name ([`RuntimeKind::guess_from_path`]) and the
/// second value says so (the binary itself was recognised at provision and is proven by sha256
/// before any runtime call).
pub fn detect_kind(rt: &Path) -> (RuntimeKind, String) {
    let mut cmd = std::process::Command::new(rt);
    cmd.arg("--version");
    let out = crate::criu::CmdOutcome::run(&mut cmd, Some(std::time::Duration::from_secs(30)));
    let why = match out {
        Ok(o) => {
            let text = format!("{}{}", o.stdout, o.stderr);
            if let Some(k) = RuntimeKind::from_version_output(&text) {
                let first = text.lines().next().unwrap_or("").trim().to_string();
                return (k, format!("{} --version: {first}", rt.display()));
            }
            format!("{} --version names neither runc nor crun", rt.display())
        }
        Err(e) => format!("{} --version: {e}", rt.display()),
    };
    let k = RuntimeKind::guess_from_path(rt);
    (
        k,
        format!("{why}; guessed {} from the file name", k.as_str()),
    )
}

/// Removes a half-written crun state folder `<root>/<id>/` (no `status`, nothing but
/// `config.json`). Returns what was done (`None`: nothing to do).
///
/// Errors: the folder holds other files (named), or removing it failed.
pub fn remove_half_state(root: &Path, id: &str) -> Result<Option<String>, HalfStateError> {
    let dir = root.join(id);
    if !dir.is_dir() || dir.join("status").exists() {
        return Ok(None);
    }
    let names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(HalfStateError::read(&dir))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if names.iter().any(|n| n != "config.json") {
        return Err(HalfStateError::CrunForeign { dir, names });
    }
    std::fs::remove_dir_all(&dir).map_err(HalfStateError::remove("remove", &dir))?;
    Ok(Some(format!(
        "removed crun's half-written state folder {} (config.json only, no status)",
        dir.display()
    )))
}

/// The slot's cgroup folder `cgroups_path` in every cgroup (v1 and v2) hierarchy mounted here
/// (mount root `/`), existing or not. Source: `/proc/self/mountinfo`.
pub fn cgroup_dirs(cgroups_path: &str) -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = parse_mountinfo(&text)
        .into_iter()
        .filter(|m| m.mount_root == "/")
        .map(|m| m.mount_point.join(cgroups_path.trim_start_matches('/')))
        .collect();
    dirs.dedup();
    dirs
}

/// Processes in cgroup `dir` (`cgroup.procs`, pids as it lists them), or the read error.
fn procs(dir: &Path) -> Result<Vec<String>, ProcsError> {
    crate::cgroup::procs::read(dir).map(|pids| pids.iter().map(i32::to_string).collect())
}

/// A [`ProcsError`] as a cgroup release names it: the file and the OS error (no "cannot read").
fn unreadable(e: &ProcsError) -> String {
    match e {
        ProcsError::Read { file, source } => format!("{}: {source}", file.display()),
        e => e.to_string(),
    }
}

/// Why one cgroup folder was not removed, as a sentence naming it ([`release_cgroups`]).
#[derive(Debug, thiserror::Error)]
pub enum CgroupLeft {
    /// Its `cgroup.procs` could not be read.
    #[error("{what}: {}", unreadable(source))]
    Unreadable {
        /// Which folder: crun's `.proxy-crun` cgroup or the slot's own.
        what: &'static str,
        /// The read error.
        #[source]
        source: ProcsError,
    },
    /// The folder could not be listed.
    #[error("{what}: {}: {source}", dir.display())]
    List {
        /// Which folder.
        what: &'static str,
        /// The folder.
        dir: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// It has child cgroups.
    #[error("{what}: {} has child cgroups {children:?}: not removed", dir.display())]
    Children {
        /// Which folder.
        what: &'static str,
        /// The folder.
        dir: PathBuf,
        /// The child cgroups' names.
        children: Vec<String>,
    },
    /// `rmdir` failed.
    #[error("{what}: rmdir {}: {source}", dir.display())]
    Rmdir {
        /// Which folder.
        what: &'static str,
        /// The folder.
        dir: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Folders (one per cgroup v1 hierarchy) that hold the same processes, with the way on.
    #[error(
        "{what}: {} {} processes {list}: not removed (a container's init ignores SIGTERM: `kill -9 {list}`, then run cleanup again)",
        dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "),
        if dirs.len() == 1 { "holds" } else { "hold" },
        list = pids.join(" ")
    )]
    Busy {
        /// Which folders.
        what: &'static str,
        /// The folders.
        dirs: Vec<PathBuf>,
        /// The pids they hold, as `cgroup.procs` lists them.
        pids: Vec<String>,
    },
}

/// Every cgroup folder [`release_cgroups`] could not remove, in the order met, those holding
/// processes last; shown joined by `; `.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct CgroupsLeft(pub Vec<CgroupLeft>);

/// Why an empty-cgroup removal was refused.
enum Refusal {
    /// The folder holds these processes (pids as `cgroup.procs` lists them).
    Procs(Vec<String>),
    /// Anything else.
    Other(CgroupLeft),
}

/// Removes the cgroup folder `dir` (`what` names it) if it holds no process and no child
/// cgroup (`rmdir`).
///
/// Errors: [`Refusal::Procs`] when it holds processes; [`Refusal::Other`] when it has child
/// cgroups, cannot be read, or `rmdir` fails.
fn remove_empty_cgroup(what: &'static str, dir: &Path) -> Result<(), Refusal> {
    let pids =
        procs(dir).map_err(|source| Refusal::Other(CgroupLeft::Unreadable { what, source }))?;
    if !pids.is_empty() {
        return Err(Refusal::Procs(pids));
    }
    let children: Vec<String> = std::fs::read_dir(dir)
        .map_err(|source| {
            Refusal::Other(CgroupLeft::List {
                what,
                dir: dir.to_path_buf(),
                source,
            })
        })?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if !children.is_empty() {
        return Err(Refusal::Other(CgroupLeft::Children {
            what,
            dir: dir.to_path_buf(),
            children,
        }));
    }
    std::fs::remove_dir(dir).map_err(|source| {
        Refusal::Other(CgroupLeft::Rmdir {
            what,
            dir: dir.to_path_buf(),
            source,
        })
    })
}

/// One [`CgroupLeft::Busy`] per (kind, process list) of the folders that still hold processes,
/// naming every folder with those processes (one per cgroup v1 hierarchy) and the way on once.
fn busy_sentences(busy: &[(&'static str, PathBuf, Vec<String>)]) -> Vec<CgroupLeft> {
    let mut groups: Vec<(&'static str, &[String], Vec<PathBuf>)> = Vec::new();
    for (what, dir, pids) in busy {
        match groups
            .iter_mut()
            .find(|(w, p, _)| w == what && *p == pids.as_slice())
        {
            Some((_, _, dirs)) => dirs.push(dir.clone()),
            None => groups.push((what, pids, vec![dir.clone()])),
        }
    }
    groups
        .into_iter()
        .map(|(what, pids, dirs)| CgroupLeft::Busy {
            what,
            dirs,
            pids: pids.to_vec(),
        })
        .collect()
}

/// Releases the `.proxy-crun` cgroups under the slot's cgroup `cgroups_path` in every
/// hierarchy; with `whole`, also the slot's own cgroup folders (the container is proven gone).
/// Returns the removed folders.
///
/// Errors: [`CgroupsLeft`], every folder that is not empty (processes or child cgroups) or
/// could not be removed, named — fail closed, nothing is forced. Folders holding the same
/// processes (one per cgroup v1 hierarchy) are named in one sentence with one way on.
pub fn release_cgroups(cgroups_path: &str, whole: bool) -> Result<Vec<PathBuf>, CgroupsLeft> {
    let mut removed = Vec::new();
    let mut problems = Vec::new();
    let mut busy: Vec<(&'static str, PathBuf, Vec<String>)> = Vec::new();
    let mut refused = |what: &'static str, dir: PathBuf, e: Refusal| match e {
        Refusal::Procs(pids) => busy.push((what, dir, pids)),
        Refusal::Other(e) => problems.push(e),
    };
    for dir in cgroup_dirs(cgroups_path) {
        let proxy = dir.join(PROXY_CGROUP);
        if proxy.is_dir() {
            let what = "crun's .proxy-crun cgroup";
            match remove_empty_cgroup(what, &proxy) {
                Ok(()) => removed.push(proxy),
                Err(e) => refused(what, proxy, e),
            }
        }
        if whole && dir.is_dir() {
            let what = "the slot's cgroup";
            match remove_empty_cgroup(what, &dir) {
                Ok(()) => removed.push(dir),
                Err(e) => refused(what, dir, e),
            }
        }
    }
    problems.extend(busy_sentences(&busy));
    if problems.is_empty() {
        Ok(removed)
    } else {
        Err(CgroupsLeft(problems))
    }
}

/// The empty folder crun keeps in its state root for directory `maskedPaths`.
pub const EMPTY_DIRECTORY: &str = ".empty-directory";

/// Removes crun's `<root>/.empty-directory` (an empty folder crun creates in its state root
/// for directory `maskedPaths`) once the container is proven gone. Returns whether it was there.
///
/// Errors: it is not empty (named), or `rmdir` failed.
pub fn remove_empty_directory(root: &Path) -> Result<bool, HalfStateError> {
    let d = root.join(EMPTY_DIRECTORY);
    if !d.is_dir() {
        return Ok(false);
    }
    std::fs::remove_dir(&d)
        .map(|()| true)
        .map_err(HalfStateError::rmdir(
            &d,
            " (crun's folder for masked directories)",
        ))
}

/// Which step releases the slot's crun cgroups, and so the facts it records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CgroupRelease {
    /// Before a restore's or reset's runtime restore (the container proven absent, no process of
    /// it left): what a crun killed mid-restore left. Facts `cgroups_released_before_restore`,
    /// `cgroups_left_before_restore`.
    BeforeRestore,
    /// After a failed restore, or at cleanup. Facts `cgroups_released`, `cgroups_left`.
    After,
}

impl CgroupRelease {
    /// The (released, left) fact names.
    fn facts(self) -> (&'static str, &'static str) {
        match self {
            CgroupRelease::BeforeRestore => (
                "cgroups_released_before_restore",
                "cgroups_left_before_restore",
            ),
            CgroupRelease::After => ("cgroups_released", "cgroups_left"),
        }
    }
}

/// [`release_cgroups`] of the slot's `cgroupsPath` (`whole`: the container is proven gone, so
/// its own cgroup folders go too), recorded in the journal and the facts `when` names
/// ([`CgroupRelease`]). Returns the problem (folders named) when something could not be
/// released.
///
/// Before a restore this is what makes a crun killed mid-restore (with netprobe) not fail the
/// next restore: crun had made the container's cgroup and `.proxy-crun` below it in every v1
/// hierarchy, and crun's restore writes `a` to the container cgroup's `devices.deny` first,
/// which the kernel refuses with EINVAL while that cgroup has a child (`devcgroup_update_access`
/// in security/device_cgroup.c: `css_has_online_children`): "write to `devices.deny`: Invalid
/// argument".
pub(crate) fn cgroups(
    run: &mut verb_run::VerbRun,
    st: &crate::slot::state::SlotState,
    whole: bool,
    when: CgroupRelease,
) -> Option<String> {
    let r = release_cgroups(&st.cgroups_path, whole).map(|removed| {
        let list: Vec<String> = removed.iter().map(|p| p.display().to_string()).collect();
        (!list.is_empty()).then(|| {
            (
                format!("removed empty cgroups {}", list.join(", ")),
                list.into(),
            )
        })
    });
    let (done, left) = when.facts();
    run.record_release(r, done, left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_state_is_removed_only_when_config_only() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(remove_half_state(t.path(), "c").unwrap(), None);
        let d = t.path().join("c");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("config.json"), "{}").unwrap();
        std::fs::write(d.join("other"), "x").unwrap();
        let e = remove_half_state(t.path(), "c").unwrap_err().to_string();
        assert!(e.contains("\"other\"") && e.contains("not removed"), "{e}");
        std::fs::remove_file(d.join("other")).unwrap();
        std::fs::write(d.join("status"), "").unwrap();
        assert_eq!(
            remove_half_state(t.path(), "c").unwrap(),
            None,
            "a full state is kept"
        );
        std::fs::remove_file(d.join("status")).unwrap();
        assert!(remove_half_state(t.path(), "c").unwrap().is_some());
        assert!(!d.exists());
    }

    #[test]
    fn folders_holding_the_same_processes_are_named_once() {
        let p = |s: &str| PathBuf::from(s);
        let pids = vec!["31493".to_string()];
        let busy = vec![
            (
                "the slot's cgroup",
                p("/sys/fs/cgroup/cpu/n/s"),
                pids.clone(),
            ),
            (
                "the slot's cgroup",
                p("/sys/fs/cgroup/memory/n/s"),
                pids.clone(),
            ),
            (
                "the slot's cgroup",
                p("/sys/fs/cgroup/pids/n/s"),
                vec!["7".into()],
            ),
        ];
        let s: Vec<String> = busy_sentences(&busy)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(s.len(), 2, "{s:?}");
        assert_eq!(
            s[0],
            "the slot's cgroup: /sys/fs/cgroup/cpu/n/s, /sys/fs/cgroup/memory/n/s hold processes 31493: not removed (a container's init ignores SIGTERM: `kill -9 31493`, then run cleanup again)"
        );
        assert!(s[1].contains("/pids/n/s holds processes 7"), "{s:?}");
        assert!(busy_sentences(&[]).is_empty());
    }

    #[test]
    fn cgroup_dirs_cover_every_hierarchy() {
        let dirs = cgroup_dirs("/netprobe/slot-x");
        assert!(!dirs.is_empty());
        assert!(
            dirs.iter().all(|d| d.ends_with("netprobe/slot-x")),
            "{dirs:?}"
        );
    }
}
