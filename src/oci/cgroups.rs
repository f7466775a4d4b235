//! A container's cgroup directories left behind by a runtime that was killed mid-call.
//!
//! runc (and crun) create `<hierarchy>/<container id>` in every cgroup hierarchy at `create`
//! and `restore` (the default `cgroupsPath` is `/<id>`), and remove them at `delete`. A runtime
//! killed part-way through a restore (a timeout, an interruption) can leave them with no state
//! the runtime could delete by. Container ids are netprobe's own (`netprobe-<rung>-<pid>-…`),
//! so a directory of exactly that name is this container's: its processes (if any survived)
//! are killed and the directories removed, deepest first.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// cgroup mount points of this mount namespace (`/proc/self/mountinfo`, types `cgroup` and
/// `cgroup2`).
fn cgroup_mounts() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let fstype = post.split(' ').next()?;
            matches!(fstype, "cgroup" | "cgroup2").then(|| pre.split(' ').nth(4))?
        })
        .map(PathBuf::from)
        .collect()
}

/// Every directory at or below `dir`, deepest first.
fn dirs_deepest_first(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(
                rd.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
        out.push(d);
    }
    out.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    out
}

/// This process's own cgroup paths (`/proc/self/cgroup`, one per hierarchy, `/` left out): a
/// relative `cgroupsPath` (the runtime's default when none is given) is created below them in
/// cgroup v1, e.g. `memory:/process_api/<hash>` gives `<memory mount>/process_api/<hash>/<id>`.
fn own_cgroup_paths() -> Vec<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut out: Vec<String> = text
        .lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .map(|p| p.trim_matches('/').to_string())
        .filter(|p| !p.is_empty() && !p.split('/').any(|c| c == ".."))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Kills what is left in `<hierarchy>/<id>` and `<hierarchy>/<this process's cgroup>/<id>`
/// (every hierarchy: runc puts a relative `cgroupsPath` below the caller's own cgroup in cgroup
/// v1, which on a host whose processes sit in a nested memory cgroup is not the root) and
/// removes those directories.
/// Returns the directories that could not be removed (empty when nothing is left). Bounded:
/// at most ~2 s of retries for processes that are still exiting.
pub fn remove_leftover_cgroups(id: &str) -> Vec<PathBuf> {
    if id.is_empty() || id.contains('/') || id.starts_with('.') {
        return Vec::new();
    }
    let own = own_cgroup_paths();
    let tops: Vec<PathBuf> = cgroup_mounts()
        .into_iter()
        .flat_map(|m| {
            let nested: Vec<PathBuf> = own.iter().map(|p| m.join(p).join(id)).collect();
            std::iter::once(m.join(id)).chain(nested)
        })
        .collect();
    remove_cgroup_trees(&tops).1
}

/// Removes each cgroup directory in `tops` that exists, with everything below it, deepest
/// first, killing (SIGKILL) any process left in one. Bounded: at most ~2 s of retries for
/// processes that are still exiting. Returns how many directories were removed and those that
/// could not be (empty when nothing is left).
pub fn remove_cgroup_trees(tops: &[PathBuf]) -> (usize, Vec<PathBuf>) {
    let deadline = Instant::now() + Duration::from_secs(2);
    let (mut removed, mut left) = (0, Vec::new());
    for top in tops.iter().filter(|d| d.is_dir()) {
        for d in dirs_deepest_first(top) {
            loop {
                for pid in crate::cgroup::procs::read_lenient(&d) {
                    // SAFETY: plain kill(2) of a process in a cgroup of netprobe's own container.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
                match std::fs::remove_dir(&d) {
                    Ok(()) => {
                        removed += 1;
                        break;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(_) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(_) => {
                        left.push(d.clone());
                        break;
                    }
                }
            }
        }
    }
    (removed, left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_could_name_another_directory_are_refused() {
        assert!(remove_leftover_cgroups("").is_empty());
        assert!(remove_leftover_cgroups("../x").is_empty());
        assert!(remove_leftover_cgroups(".hidden").is_empty());
    }

    /// A container cgroup left below this process's own (nested) cgroup — where runc puts a
    /// relative `cgroupsPath` in cgroup v1 — is found and removed, with its child. Needs root.
    #[test]
    fn leftovers_below_our_own_cgroup_are_removed() {
        assert!(nix::unistd::geteuid().is_root(), "needs root (cgroupfs)");
        let id = format!("netprobe-unit-leftover-{}", std::process::id());
        let own = own_cgroup_paths();
        let mounts = cgroup_mounts();
        assert!(
            !mounts.is_empty(),
            "no cgroup mount in /proc/self/mountinfo"
        );
        // The deepest own path that exists in some mount (a nested v1 cgroup if there is one).
        let dir = mounts
            .iter()
            .flat_map(|m| own.iter().map(move |p| m.join(p)))
            .find(|d| d.is_dir())
            .unwrap_or_else(|| mounts[0].clone())
            .join(&id);
        std::fs::create_dir(&dir).unwrap();
        std::fs::create_dir(dir.join("child")).unwrap();
        assert!(remove_leftover_cgroups(&id).is_empty(), "{}", dir.display());
        assert!(!dir.exists(), "{} left behind", dir.display());
    }

    #[test]
    fn deepest_first_lists_children_before_parents() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("a/b/c")).unwrap();
        let d = dirs_deepest_first(&t.path().join("a"));
        assert_eq!(d.first().unwrap(), &t.path().join("a/b/c"));
        assert_eq!(d.last().unwrap(), &t.path().join("a"));
    }
}
