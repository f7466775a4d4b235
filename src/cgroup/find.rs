//! Finding cgroup folders by name in every cgroup hierarchy mounted, without knowing where a
//! runtime put them: a container whose `config.json` names no `cgroupsPath` lands under the
//! cgroup the runtime ran in, which differs per hierarchy and per invoking process (e.g.
//! `memory/<supervisor>/<session>/netprobe-oci-…`), and a slot whose `state.json` cannot be
//! read no longer says which path it used.

use std::path::PathBuf;

/// Every folder whose name `wanted` accepts, in every cgroup hierarchy `/proc/self/mountinfo`
/// lists, at most `depth` levels below its root and never below a match: the folder's name and
/// path, hierarchy by hierarchy. Unreadable folders are skipped (nothing is found there).
pub fn dirs_named(depth: usize, wanted: impl Fn(&str) -> bool) -> Vec<(String, PathBuf)> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| super::parse_mountinfo(&t))
        .unwrap_or_default();
    let mut found = Vec::new();
    let mut level: Vec<PathBuf> = mounts.into_iter().map(|m| m.mount_point).collect();
    for _ in 0..depth {
        let mut next = Vec::new();
        for dir in level {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = e.file_name().to_string_lossy().into_owned();
                match wanted(&name) {
                    true => found.push((name, e.path())),
                    false => next.push(e.path()),
                }
            }
        }
        level = next;
    }
    found
}
