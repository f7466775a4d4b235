//! Directories of an evidence folder that hold no file. An artifact list names files only, so a
//! directory added to a folder with nothing in it would pass every check of the files; `verify`
//! (run folders, [`crate::probe::verify`]) and the slot verb folders' `artifacts` check
//! ([`crate::report`]'s `slot_artifacts`) flag each such directory that no producer makes.
//!
//! Producers do leave directories with no file in evidence, which are therefore accepted: a run
//! creates each rung's folder before the rung's first step, and a CRIU rung's `images/` before
//! `criu dump` or the runtime's checkpoint (a rung that fails before either writes leaves them
//! empty); a slot verb creates `criu-work/`, its runtime's work path, before its checkpoint or
//! restore; and CRIU makes its cgroup yard, `.criu.cgyard.XXXXXX` (`mkdtemp` in its working
//! directory, criu/cgroup.c `prepare_cgroup_sfd`), in its work directory — a rung's folder, or
//! a verb's `criu-work/` — which a CRIU killed at a step's bound leaves behind, emptied when
//! netprobe detaches the mounts in it.

use super::error::{EvidenceError, io_err};
use std::fs;
use std::path::Path;

/// The name CRIU gives its cgroup yard: `.criu.cgyard.` and the six `[A-Za-z0-9]` of `mkdtemp`.
pub fn is_criu_cgroup_yard(name: &str) -> bool {
    name.strip_prefix(".criu.cgyard.")
        .is_some_and(|s| s.len() == 6 && s.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Every directory under `root` (relative `/`-separated path, sorted) that holds no file at any
/// depth and is not accepted by `made_by_producer`; below a directory reported, nothing more is
/// reported (its sub-directories are part of it), below an accepted one each sub-directory is
/// judged again. Any entry that is not a directory (a file, a symlink, a FIFO) counts as a file:
/// the inventory judges those.
///
/// Errors: [`EvidenceError::Io`] naming a directory that cannot be listed.
pub fn fileless_dirs(
    root: &Path,
    made_by_producer: &dyn Fn(&str) -> bool,
) -> Result<Vec<String>, EvidenceError> {
    let mut out = Vec::new();
    walk(root, "", made_by_producer, &mut out)?;
    out.sort();
    Ok(out)
}

/// Walks `dir` (relative path `prefix`), pushing its fileless sub-directories to `out`; returns
/// whether it holds a file at any depth.
fn walk(
    dir: &Path,
    prefix: &str,
    made_by_producer: &dyn Fn(&str) -> bool,
    out: &mut Vec<String>,
) -> Result<bool, EvidenceError> {
    let mut holds_file = false;
    for entry in fs::read_dir(dir).map_err(io_err("list", dir))? {
        let entry = entry.map_err(io_err("list", dir))?;
        let path = entry.path();
        let rel = super::dir::rel_path(prefix, &entry.file_name().to_string_lossy());
        if !entry
            .file_type()
            .map_err(io_err("inspect", &path))?
            .is_dir()
        {
            holds_file = true;
            continue;
        }
        let mut below = Vec::new();
        let sub_holds = walk(&path, &rel, made_by_producer, &mut below)?;
        if sub_holds || made_by_producer(&rel) {
            out.extend(below);
        } else {
            out.push(rel);
        }
        holds_file |= sub_holds;
    }
    Ok(holds_file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_fileless_directories_no_producer_makes_are_listed() {
        let d = tempfile::tempdir().unwrap();
        let mk = |p: &str| fs::create_dir_all(d.path().join(p)).unwrap();
        mk("criu/images");
        fs::write(d.path().join("criu/dump.log"), "x").unwrap();
        mk("criu/.criu.cgyard.Ab12Cd");
        mk("criu/images/added");
        mk("added/deeper");
        mk("kernel");
        mk("full/sub");
        fs::write(d.path().join("full/sub/f"), "x").unwrap();
        mk("full/empty");
        let producer = |rel: &str| {
            matches!(rel, "criu" | "criu/images" | "kernel")
                || rel.strip_prefix("criu/").is_some_and(is_criu_cgroup_yard)
        };
        assert_eq!(
            fileless_dirs(d.path(), &producer).unwrap(),
            vec!["added", "criu/images/added", "full/empty"]
        );
        // With no producer, every fileless directory is listed (its top-most one).
        assert_eq!(
            fileless_dirs(d.path(), &|_| false).unwrap(),
            vec![
                "added",
                "criu/.criu.cgyard.Ab12Cd",
                "criu/images",
                "full/empty",
                "kernel"
            ]
        );
    }

    #[test]
    fn cgroup_yard_names_are_mkdtemp_names() {
        assert!(is_criu_cgroup_yard(".criu.cgyard.aZ09xy"));
        for bad in [
            ".criu.cgyard.",
            ".criu.cgyard.abcde",
            ".criu.cgyard.abc-ef",
            "cgyard",
        ] {
            assert!(!is_criu_cgroup_yard(bad), "{bad}");
        }
    }
}
