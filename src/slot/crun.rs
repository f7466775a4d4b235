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
use crate::oci::RuntimeKind;
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
pub fn remove_half_state(root: &Path, id: &str) -> Result<Option<String>, String> {
    let dir = root.join(id);
    if !dir.is_dir() || dir.join("status").exists() {
        return Ok(None);
    }
    let names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if names.iter().any(|n| n != "config.json") {
        return Err(format!(
            "{}: crun state folder without `status` holds {names:?} (not only config.json); not removed: inspect it and remove it by hand",
            dir.display()
        ));
    }
    std::fs::remove_dir_all(&dir).map_err(|e| format!("remove {}: {e}", dir.display()))?;
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

/// Processes in cgroup `dir` (`cgroup.procs`), or the read error.
fn procs(dir: &Path) -> Result<Vec<String>, String> {
    let p = dir.join("cgroup.procs");
    std::fs::read_to_string(&p)
        .map(|t| t.lines().map(str::to_string).collect())
        .map_err(|e| format!("{}: {e}", p.display()))
}

/// Removes cgroup `dir` when it has no process and no child cgroup.
///
/// Errors: it holds processes or child cgroups (named), or `rmdir` failed.
fn remove_empty_cgroup(dir: &Path) -> Result<(), String> {
    let pids = procs(dir)?;
    if !pids.is_empty() {
        let list = pids.join(" ");
        return Err(format!(
            "{} holds processes {list}: not removed (a container's init ignores SIGTERM: `kill -9 {list}`, then run cleanup again)",
            dir.display()
        ));
    }
    let children: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if !children.is_empty() {
        return Err(format!(
            "{} has child cgroups {children:?}: not removed",
            dir.display()
        ));
    }
    std::fs::remove_dir(dir).map_err(|e| format!("rmdir {}: {e}", dir.display()))
}

/// Releases the `.proxy-crun` cgroups under the slot's cgroup `cgroups_path` in every
/// hierarchy; with `whole`, also the slot's own cgroup folders (the container is proven gone).
/// Returns the removed folders.
///
/// Errors: every folder that is not empty (processes or child cgroups) or could not be
/// removed, named, joined by `; ` — fail closed, nothing is forced.
pub fn release_cgroups(cgroups_path: &str, whole: bool) -> Result<Vec<PathBuf>, String> {
    let mut removed = Vec::new();
    let mut problems = Vec::new();
    for dir in cgroup_dirs(cgroups_path) {
        let proxy = dir.join(PROXY_CGROUP);
        if proxy.is_dir() {
            match remove_empty_cgroup(&proxy) {
                Ok(()) => removed.push(proxy),
                Err(e) => problems.push(format!("crun's {PROXY_CGROUP} cgroup: {e}")),
            }
        }
        if whole && dir.is_dir() {
            match remove_empty_cgroup(&dir) {
                Ok(()) => removed.push(dir),
                Err(e) => problems.push(format!("the slot's cgroup: {e}")),
            }
        }
    }
    if problems.is_empty() {
        Ok(removed)
    } else {
        Err(problems.join("; "))
    }
}

/// The empty folder crun keeps in its state root for directory `maskedPaths`.
pub const EMPTY_DIRECTORY: &str = ".empty-directory";

/// Removes crun's `<root>/.empty-directory` (an empty folder crun creates in its state root
/// for directory `maskedPaths`) once the container is proven gone. Returns whether it was there.
///
/// Errors: it is not empty (named), or `rmdir` failed.
pub fn remove_empty_directory(root: &Path) -> Result<bool, String> {
    let d = root.join(EMPTY_DIRECTORY);
    if !d.is_dir() {
        return Ok(false);
    }
    std::fs::remove_dir(&d).map(|()| true).map_err(|e| {
        format!(
            "rmdir {}: {e} (crun's folder for masked directories)",
            d.display()
        )
    })
}

/// [`remove_half_state`] of the slot's container in its private runtime root, recorded in the
/// journal and the facts (`crun_half_state`); a refusal is recorded, and the following
/// `runtime state` then fails naming the folder.
pub(crate) fn half_state(run: &mut super::run::VerbRun, st: &super::state::SlotState) {
    match remove_half_state(&st.runtime_root, &st.container_id) {
        Ok(None) => {}
        Ok(Some(d)) => {
            run.journal("step", true, &d);
            run.fact("crun_half_state", d);
        }
        Err(e) => {
            run.journal("step", false, &e);
            run.fact("crun_half_state", e);
        }
    }
}

/// [`release_cgroups`] of the slot's `cgroupsPath` (`whole`: the container is proven gone, so
/// its own cgroup folders go too), recorded in the journal and the facts (`cgroups_released`).
/// Returns the problem (folders named) when something could not be released.
pub(crate) fn cgroups(
    run: &mut super::run::VerbRun,
    st: &super::state::SlotState,
    whole: bool,
) -> Option<String> {
    match release_cgroups(&st.cgroups_path, whole) {
        Ok(removed) => {
            if !removed.is_empty() {
                let list: Vec<String> = removed.iter().map(|p| p.display().to_string()).collect();
                run.journal(
                    "step",
                    true,
                    &format!("removed empty cgroups {}", list.join(", ")),
                );
                run.fact("cgroups_released", list);
            }
            None
        }
        Err(e) => {
            run.journal("step", false, &e);
            run.fact("cgroups_left", e.clone());
            Some(e)
        }
    }
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
        let e = remove_half_state(t.path(), "c").unwrap_err();
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
    fn cgroup_dirs_cover_every_hierarchy() {
        let dirs = cgroup_dirs("/netprobe/slot-x");
        assert!(!dirs.is_empty());
        assert!(
            dirs.iter().all(|d| d.ends_with("netprobe/slot-x")),
            "{dirs:?}"
        );
    }
}
