//! Where a new evidence folder may not go: inside a folder netprobe already wrote — a run's
//! evidence folder, a matrix folder, a slot state directory or a slot's evidence. Files added
//! there are files that folder's record does not list (`netprobe verify` of a run then fails it:
//! "file … is in the folder but not among the recorded artifacts"), and netprobe never reuses or
//! overwrites evidence. [`EvidenceDir::create`](super::EvidenceDir::create) (`run`, `cgroup`)
//! and `netprobe matrix` refuse such a path before anything is created.
//!
//! The one exception is a matrix's part: `netprobe matrix` names its folder to each part it
//! starts (`netprobe run --part-of-matrix <matrix folder> --evidence <matrix folder>/<part>`),
//! and the part checks that claim against its own evidence path and the matrix's note
//! ([`refuse_inside_evidence`]). The names of the files that mark each kind of folder are
//! defined here, below the modules that write them (`matrix::model`, `slot::layout` and
//! `report::slot_view` name theirs from these): this module imports neither.

use super::EvidenceError;
use super::dir::{INCOMPLETE_FILE, INTERRUPTED_FILE};
use super::result::RESULT_FILE;
use std::path::{Path, PathBuf};

/// File name of the matrix result inside a matrix folder (`matrix::model::MATRIX_FILE`).
pub const MATRIX_FILE: &str = "matrix.json";
/// Name of a slot state directory's marker file (`slot::layout::STATE_DIR_MARKER`).
pub const SLOT_STATE_DIR_MARKER: &str = ".netprobe-state-dir";
/// Name of a slot folder's ownership marker (`slot::layout::OWNER_FILE`); a slot folder holds
/// it beside its `evidence/` folder.
pub const SLOT_OWNER_FILE: &str = "owner.json";
/// Name of a slot verb's outcome document in its evidence folder.
pub const SLOT_VERB_FILE: &str = "verb.json";
/// Name of the gates an interrupted slot verb had evaluated (`slot::interruption`).
pub const SLOT_GATES_SO_FAR_FILE: &str = "gates-so-far.json";
/// The files of a slot verb's evidence folder that its `verb.json`'s `artifacts` never lists
/// (and `netprobe report` does not require listed): `verb.json` itself; what may be written
/// after it — by a signal that came as the verb ended (`interrupted.txt`, `gates-so-far.json`)
/// or by a verb whose end could not write all it should (`incomplete.txt`, which only grows);
/// the reports `netprobe report` derives into the folder (`report.md`, `report.html`).
pub const SLOT_VERB_UNLISTED: [&str; 6] = [
    SLOT_VERB_FILE,
    INTERRUPTED_FILE,
    SLOT_GATES_SO_FAR_FILE,
    INCOMPLETE_FILE,
    "report.md",
    "report.html",
];

/// The files that mark a folder netprobe wrote, each with what that folder is. The first found
/// (in this order) names the folder.
const MARKERS: [(&str, &str); 6] = [
    (RESULT_FILE, "the evidence folder of a run"),
    (MATRIX_FILE, "the matrix folder"),
    // Before the notes: an interrupted slot verb leaves both its verb.json and a note.
    (SLOT_VERB_FILE, "the evidence folder of a slot verb"),
    (
        INTERRUPTED_FILE,
        "the evidence folder of an interrupted run, matrix or slot verb",
    ),
    (
        INCOMPLETE_FILE,
        "the evidence folder of a run, matrix or slot verb that did not finish",
    ),
    (SLOT_STATE_DIR_MARKER, "the slot state directory"),
];

/// How the `incomplete.txt` a running matrix writes first into its folder begins:
/// `netprobe matrix (pid P) ` with P the matrix's pid. `netprobe matrix` writes its note with
/// it; a part reads it to tell that the folder it was named is its matrix's.
pub fn matrix_note_head(pid: u32) -> String {
    format!("netprobe matrix (pid {pid}) ")
}

/// The folder netprobe wrote that `path` would be created in, if any: the nearest folder above
/// `path` holding one of [`MARKERS`], or a slot folder (`owner.json` and `evidence/`). Folders
/// are compared by their real path: the part of `path` that exists is resolved (symlinks,
/// `..`), so a link into an evidence folder is caught too.
///
/// `matrix` is the folder `netprobe matrix` named to this process, its part
/// (`--part-of-matrix`; `None` for every other run): `path` may then be created directly in it,
/// once it is proven to be the folder of the running matrix that started this process — `path`'s
/// real parent, holding that matrix's `incomplete.txt` (first line [`matrix_note_head`] of this
/// process's parent pid) and no other marker (no `matrix.json`, result or `interrupted.txt`).
/// The folders above it are refused as for any run.
///
/// Errors: [`EvidenceError::NotAMatrixPart`] (`matrix` given and not proven, naming why),
/// [`EvidenceError::InsideEvidence`] naming `path`, the folder, the file that marks it and the
/// fix. A path whose existing part cannot be resolved is let through (creating it then fails
/// with its own error), unless `matrix` is given (nothing is proven then).
pub fn refuse_inside_evidence(path: &Path, matrix: Option<&Path>) -> Result<(), EvidenceError> {
    let Some(start) = real_parent(path) else {
        return match matrix {
            None => Ok(()),
            Some(m) => Err(not_a_part(
                path,
                m,
                "the folder --evidence would be created in cannot be resolved".into(),
            )),
        };
    };
    if let Some(m) = matrix {
        check_part(path, &start, m)?;
    }
    for folder in start.ancestors() {
        let Some((marker, what)) = marked(folder) else {
            continue;
        };
        if matrix.is_some() && folder == start.as_path() {
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

fn not_a_part(path: &Path, matrix: &Path, why: String) -> EvidenceError {
    EvidenceError::NotAMatrixPart {
        path: path.to_path_buf(),
        matrix: matrix.to_path_buf(),
        why,
    }
}

/// Proves that `start`, the real folder the part's evidence folder `path` would be created
/// in, is `matrix`, the folder of the running matrix that started this process (see
/// [`refuse_inside_evidence`]).
fn check_part(path: &Path, start: &Path, matrix: &Path) -> Result<(), EvidenceError> {
    let not = |why: String| not_a_part(path, matrix, why);
    let real = std::fs::canonicalize(matrix)
        .map_err(|e| not(format!("the folder cannot be resolved ({e})")))?;
    if real != start {
        return Err(not(format!(
            "--evidence is not directly in it (it would be created in {})",
            start.display()
        )));
    }
    let other = MARKERS
        .iter()
        .copied()
        .chain(slot_folder(&real))
        .find(|(m, _)| *m != INCOMPLETE_FILE && real.join(m).is_file());
    if let Some((marker, what)) = other {
        return Err(not(format!(
            "it holds {marker}, which makes it {what}, not the folder of a running matrix"
        )));
    }
    let ppid = std::os::unix::process::parent_id();
    let note = real.join(INCOMPLETE_FILE);
    if !note.is_file() {
        return Err(not(format!(
            "it holds no {INCOMPLETE_FILE}: no matrix is running in it"
        )));
    }
    let first = super::dir::note_first_line(&note);
    if !first.starts_with(&matrix_note_head(ppid)) {
        return Err(not(format!(
            "its {INCOMPLETE_FILE} does not name this process's parent (pid {ppid}) as the matrix writing it; it says: {first}"
        )));
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
    slot_folder(folder)
}

/// `folder` as a slot folder (`owner.json` beside an `evidence/` folder), if it is one.
fn slot_folder(folder: &Path) -> Option<(&'static str, &'static str)> {
    (folder.join(SLOT_OWNER_FILE).is_file() && folder.join("evidence").is_dir())
        .then_some((SLOT_OWNER_FILE, "the slot folder"))
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
            let e = refuse_inside_evidence(&p, None).unwrap_err().to_string();
            assert!(e.contains(&ev.display().to_string()), "{inside}: {e}");
            assert!(e.contains("choose a folder outside it"), "{e}");
        }
        refuse_inside_evidence(&tmp.path().join("sibling/new"), None).unwrap();
        // A symlink into the folder is resolved.
        std::os::unix::fs::symlink(ev.join("criu"), tmp.path().join("link")).unwrap();
        assert!(refuse_inside_evidence(&tmp.path().join("link/new"), None).is_err());
    }

    #[test]
    fn an_interrupted_slot_verb_folder_is_named_a_slot_verbs() {
        let tmp = tempfile::tempdir().unwrap();
        for f in [SLOT_VERB_FILE, INTERRUPTED_FILE] {
            std::fs::write(tmp.path().join(f), b"{}").unwrap();
        }
        let e = refuse_inside_evidence(&tmp.path().join("x"), None).unwrap_err();
        assert!(
            e.to_string().contains("the evidence folder of a slot verb"),
            "{e}"
        );
        std::fs::remove_file(tmp.path().join(SLOT_VERB_FILE)).unwrap();
        let e = refuse_inside_evidence(&tmp.path().join("x"), None).unwrap_err();
        assert!(
            e.to_string()
                .contains("interrupted run, matrix or slot verb"),
            "{e}"
        );
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
            let e = refuse_inside_evidence(&tmp.path().join("x"), None).unwrap_err();
            assert!(e.to_string().contains(marker), "{e}");
        }
    }

    #[test]
    fn only_a_part_of_the_matrix_that_started_us_goes_into_its_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let m = tmp.path();
        let note = format!(
            "{}started at now and has not finished\n",
            matrix_note_head(std::os::unix::process::parent_id())
        );
        std::fs::write(m.join(INCOMPLETE_FILE), note).unwrap();
        refuse_inside_evidence(&m.join("kernel"), Some(m)).unwrap();
        // Not told it is a part: refused as any run is.
        let e = refuse_inside_evidence(&m.join("kernel"), None).unwrap_err();
        assert!(matches!(e, EvidenceError::InsideEvidence { .. }), "{e}");
        // Deeper than a part's folder, or beside the named folder: the claim is refused.
        let e = refuse_inside_evidence(&m.join("kernel/deeper"), Some(m)).unwrap_err();
        assert!(e.to_string().contains("is not directly in it"), "{e}");
        std::fs::write(m.join(INTERRUPTED_FILE), b"interrupted\n").unwrap();
        let e = refuse_inside_evidence(&m.join("kernel"), Some(m)).unwrap_err();
        assert!(e.to_string().contains("it holds interrupted.txt"), "{e}");
    }

    /// A folder that is not a running matrix's, named by hand as the matrix: refused, saying
    /// why, whatever it holds.
    #[test]
    fn a_run_that_names_a_folder_not_its_running_matrix_is_refused() {
        let ppid = std::os::unix::process::parent_id();
        let cases: [(&[(&str, String)], &str); 6] = [
            (&[], "it holds no incomplete.txt"),
            (
                &[(INCOMPLETE_FILE, format!("{}started", matrix_note_head(0)))],
                &format!("does not name this process's parent (pid {ppid})"),
            ),
            (
                &[(
                    INCOMPLETE_FILE,
                    format!("netprobe run (pid {ppid}) started"),
                )],
                "as the matrix writing it",
            ),
            (
                &[
                    (
                        INCOMPLETE_FILE,
                        format!("{}started", matrix_note_head(ppid)),
                    ),
                    (MATRIX_FILE, "{}".into()),
                ],
                "it holds matrix.json, which makes it the matrix folder",
            ),
            (
                &[(RESULT_FILE, "{}".into())],
                "it holds netprobe-result.json",
            ),
            (
                &[
                    (
                        INCOMPLETE_FILE,
                        format!("{}started", matrix_note_head(ppid)),
                    ),
                    (SLOT_OWNER_FILE, "{}".into()),
                ],
                "it holds owner.json, which makes it the slot folder",
            ),
        ];
        for (files, why) in cases {
            let tmp = tempfile::tempdir().unwrap();
            std::fs::create_dir(tmp.path().join("evidence")).unwrap();
            for (f, text) in files {
                std::fs::write(tmp.path().join(f), text).unwrap();
            }
            let e =
                refuse_inside_evidence(&tmp.path().join("kernel"), Some(tmp.path())).unwrap_err();
            assert!(matches!(e, EvidenceError::NotAMatrixPart { .. }), "{e}");
            let t = e.to_string();
            assert!(t.contains(why), "{why:?} not in {t}");
            assert!(t.contains("leave it out"), "{t}");
        }
        // A path outside every folder netprobe wrote, with a made-up matrix: refused too.
        let tmp = tempfile::tempdir().unwrap();
        let e = refuse_inside_evidence(&tmp.path().join("a/x"), Some(&tmp.path().join("b")))
            .unwrap_err();
        assert!(e.to_string().contains("cannot be resolved"), "{e}");
    }
}
