//! Where a new evidence folder may not go: inside a folder netprobe already wrote — a run's
//! evidence folder, a matrix folder, a slot state directory or a slot's evidence. Files added
//! there are files that folder's record does not list (`netprobe verify` of a run then fails it:
//! "file … is in the folder but not among the recorded artifacts"), and netprobe never reuses or
//! overwrites evidence. [`EvidenceDir::create`](super::EvidenceDir::create) (`run`, `cgroup`)
//! and `netprobe matrix` refuse such a path before anything is created.

use super::EvidenceError;
use super::dir::{INCOMPLETE_FILE, INTERRUPTED_FILE};
use super::result::RESULT_FILE;
use std::path::{Path, PathBuf};

/// The files that mark a folder netprobe wrote, each with what that folder is. The first found
/// (in this order) names the folder.
const MARKERS: [(&str, &str); 6] = [
    (RESULT_FILE, "the evidence folder of a run"),
    (crate::matrix::model::MATRIX_FILE, "the matrix folder"),
    (
        INTERRUPTED_FILE,
        "the evidence folder of an interrupted run or matrix",
    ),
    (
        INCOMPLETE_FILE,
        "the evidence folder of a run or matrix that did not finish",
    ),
    (
        crate::slot::layout::STATE_DIR_MARKER,
        "the slot state directory",
    ),
    ("verb.json", "the evidence folder of a slot verb"),
];

/// The folder netprobe wrote that `path` would be created in, if any: the nearest folder above
/// `path` holding one of [`MARKERS`], or a slot folder (`owner.json` and `evidence/`). Folders
/// are compared by their real path: the part of `path` that exists is resolved (symlinks,
/// `..`), so a link into an evidence folder is caught too.
///
/// A part of a running matrix is allowed: the matrix runs `netprobe run --evidence
/// <matrix>/<part>` while its folder holds its `incomplete.txt` (first line `netprobe matrix
/// (pid P)`, P = this process's parent), and no `matrix.json`, result or `interrupted.txt`.
///
/// Errors: [`EvidenceError::InsideEvidence`] naming `path`, the folder, the file that marks
/// it and the fix. A path whose existing part cannot be resolved is let through (creating it
/// then fails with its own error).
pub fn refuse_inside_evidence(path: &Path) -> Result<(), EvidenceError> {
    let Some(start) = real_parent(path) else {
        return Ok(());
    };
    for folder in start.ancestors() {
        let Some((marker, what)) = marked(folder) else {
            continue;
        };
        if folder == start.as_path() && is_running_matrix(folder) {
            continue;
        }
        return Err(EvidenceError::InsideEvidence {
            path: path.to_path_buf(),
            folder: folder.to_path_buf(),
            what,
            marker,
        });
    }
    Ok(())
}

/// The real path of the folder `path` would be created in: `path` made absolute and resolved
/// one component at a time — an existing one to its real path (symlinks followed), `..` to the
/// folder above, a missing one kept as it is (`create_dir_all` makes it a plain folder) — and
/// its parent taken.
fn real_parent(path: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(path)
    };
    let mut real = PathBuf::from("/");
    for c in abs.components() {
        match c {
            Component::Normal(name) => {
                let next = real.join(name);
                real = if std::fs::symlink_metadata(&next).is_ok() {
                    std::fs::canonicalize(&next).unwrap_or(next)
                } else {
                    next
                };
            }
            Component::ParentDir => {
                real.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    real.parent().map(Path::to_path_buf)
}

/// The marker file `folder` holds and what that makes it, if any.
fn marked(folder: &Path) -> Option<(&'static str, &'static str)> {
    if let Some(m) = MARKERS.iter().find(|(m, _)| folder.join(m).is_file()) {
        return Some(*m);
    }
    (folder.join(crate::slot::layout::OWNER_FILE).is_file() && folder.join("evidence").is_dir())
        .then_some((crate::slot::layout::OWNER_FILE, "the slot folder"))
}

/// `folder` is the folder of the matrix that started this process, still running: only its
/// `incomplete.txt`, written by our parent.
fn is_running_matrix(folder: &Path) -> bool {
    let done = [
        RESULT_FILE,
        crate::matrix::model::MATRIX_FILE,
        INTERRUPTED_FILE,
    ];
    if done.iter().any(|f| folder.join(f).exists()) {
        return false;
    }
    let first = super::dir::note_first_line(&folder.join(INCOMPLETE_FILE));
    first.starts_with(&format!(
        "netprobe matrix (pid {}) ",
        std::os::unix::process::parent_id()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_below_a_marked_folder_is_refused_and_a_sibling_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let ev = tmp.path().join("ev");
        std::fs::create_dir_all(ev.join("criu/images")).unwrap();
        std::fs::write(ev.join(RESULT_FILE), b"{}").unwrap();
        for inside in [
            "ev/criu/images/sub",
            "ev/new/deeper",
            "ev/criu",
            "sib/../ev/x",
        ] {
            let p = tmp.path().join(inside);
            let e = refuse_inside_evidence(&p).unwrap_err().to_string();
            assert!(e.contains(&ev.display().to_string()), "{inside}: {e}");
            assert!(e.contains("choose a folder outside it"), "{e}");
        }
        refuse_inside_evidence(&tmp.path().join("sibling/new")).unwrap();
        // A symlink into the folder is resolved.
        std::os::unix::fs::symlink(ev.join("criu"), tmp.path().join("link")).unwrap();
        assert!(refuse_inside_evidence(&tmp.path().join("link/new")).is_err());
    }

    #[test]
    fn every_marker_counts_but_a_foreign_matrix_note_does_not_exempt() {
        for (marker, _) in MARKERS {
            let tmp = tempfile::tempdir().unwrap();
            std::fs::write(
                tmp.path().join(marker),
                b"netprobe matrix (pid 0) started\n",
            )
            .unwrap();
            let e = refuse_inside_evidence(&tmp.path().join("x")).unwrap_err();
            assert!(e.to_string().contains(marker), "{e}");
        }
    }

    #[test]
    fn only_a_part_of_the_matrix_that_started_us_goes_into_its_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let note = format!(
            "netprobe matrix (pid {}) started at now and has not finished\n",
            std::os::unix::process::parent_id()
        );
        std::fs::write(tmp.path().join(INCOMPLETE_FILE), note).unwrap();
        refuse_inside_evidence(&tmp.path().join("kernel")).unwrap();
        assert!(refuse_inside_evidence(&tmp.path().join("kernel/deeper")).is_err());
        std::fs::write(tmp.path().join(INTERRUPTED_FILE), b"interrupted\n").unwrap();
        assert!(refuse_inside_evidence(&tmp.path().join("kernel")).is_err());
    }
}
