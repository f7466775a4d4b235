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

/// Kills what is left in `<hierarchy>/<id>` (every hierarchy) and removes those directories.
/// Returns the directories that could not be removed (empty when nothing is left). Bounded:
/// at most ~2 s of retries for processes that are still exiting.
pub fn remove_leftover_cgroups(id: &str) -> Vec<PathBuf> {
    if id.is_empty() || id.contains('/') || id.starts_with('.') {
        return Vec::new();
    }
    let tops: Vec<PathBuf> = cgroup_mounts()
        .into_iter()
        .map(|m| m.join(id))
        .filter(|d| d.is_dir())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut left = Vec::new();
    for top in tops {
        for d in dirs_deepest_first(&top) {
            loop {
                let procs = std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
                for pid in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
                    // SAFETY: plain kill(2) of a process in this container's own cgroup.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
                match std::fs::remove_dir(&d) {
                    Ok(()) => break,
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
    left
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

    #[test]
    fn deepest_first_lists_children_before_parents() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("a/b/c")).unwrap();
        let d = dirs_deepest_first(&t.path().join("a"));
        assert_eq!(d.first().unwrap(), &t.path().join("a/b/c"));
        assert_eq!(d.last().unwrap(), &t.path().join("a"));
    }
}
