//! The upper reset to the snapshot's at `restore` and `reset`: the next overlay run's upper,
//! copied from the snapshot's saved upper beside the gates ([`PreparedUpper`]), proven by the
//! `upper-copy` gate, and mounted as a new overlay run once every gate passed ([`reset_upper`]).

use crate::slot::error::StepId;
use crate::slot::error::{SlotError, StepError};
use crate::slot::gate::GateId;
use crate::slot::gate::pure_checks;
use crate::slot::gate::shared_gates::{self, mkdirs};
use crate::slot::record::verb_run::VerbRun;
use crate::slot::resources::fs_tools;
use crate::slot::resources::mounts;
use crate::slot::state::*;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The next overlay run's upper, copied from the recorded snapshot's saved upper on its own
/// thread while the gates run. Not destructive: a new folder (`overlay/upper-<run+1>`; not made
/// when that folder exists already); the live upper is untouched until
/// [`reset_upper`], after every gate passed. A copy that failed, or made from another folder than
/// the one the snapshot gate proved, is not used.
pub(super) struct PreparedUpper {
    /// `<snapshot>/upper`, copied from.
    src: PathBuf,
    /// `overlay/upper-<run+1>`, copied to.
    upper: PathBuf,
    copy: std::thread::JoinHandle<Result<(), PreparedUpperError>>,
}

/// Why the upper copied beside the gates is not used (then it is copied again after the
/// unmount).
#[derive(Debug, thiserror::Error)]
enum PreparedUpperError {
    /// The target was there already (an interrupted attempt's, or the mounted run's).
    #[error("{} exists", .0.display())]
    Exists(PathBuf),
    /// The copy failed.
    #[error(transparent)]
    Copy(#[from] fs_tools::TreeError),
    /// It was copied from another snapshot folder than the one restored.
    #[error("copied from {}, not {}", copied.display(), wanted.display())]
    OtherSource {
        /// The folder copied from.
        copied: PathBuf,
        /// The folder restored.
        wanted: PathBuf,
    },
}

/// Why the snapshot's `manifest.json` beside its saved upper could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
struct ManifestReadError {
    /// The manifest.
    path: PathBuf,
    /// The read or parse error.
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl PreparedUpper {
    /// Starts the copy; `None` when the state records no snapshot or no overlay (the gates
    /// then fail, or the upper is copied in [`reset_upper`]).
    pub(super) fn start(run: &VerbRun, st: &SlotState) -> Option<PreparedUpper> {
        let (snap, ov) = (st.snapshot.as_ref()?, st.overlay.as_ref()?);
        let src = run.paths.root.join(&snap.dir).join("upper");
        let upper = ov.upper(&run.paths.overlay_dir(), ov.run + 1);
        let (s, u) = (src.clone(), upper.clone());
        let copy = std::thread::spawn(move || {
            if u.exists() {
                // Left by an interrupted attempt, and maybe the upper of the overlay mounted
                // now: removed only after the unmount, in `reset_upper`.
                return Err(PreparedUpperError::Exists(u));
            }
            fs_tools::copy_tree_unsynced(&s, &u).map_err(|e| {
                let _ = fs_tools::remove_tree_same_fs(&u);
                PreparedUpperError::Copy(e)
            })
        });
        Some(PreparedUpper { src, upper, copy })
    }

    /// Waits for the copy; the upper it made when it succeeded from `src`.
    fn take(self, src: &Path) -> Result<PathBuf, PreparedUpperError> {
        let r = self
            .copy
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        match r {
            Ok(()) if self.src == src => Ok(self.upper),
            Ok(()) => {
                let _ = fs_tools::remove_tree_same_fs(&self.upper);
                Err(PreparedUpperError::OtherSource {
                    copied: self.src,
                    wanted: src.to_path_buf(),
                })
            }
            Err(e) => Err(e),
        }
    }

    /// Waits for the copy and removes what it made (a gate failed).
    pub(super) fn discard(self) {
        let made = matches!(self.copy.join(), Ok(Ok(())));
        if made {
            let _ = fs_tools::remove_tree_same_fs(&self.upper);
        }
    }
}

/// The upper reset to the snapshot's, as a new overlay run (unmount, the prepared copy — or a
/// copy now when it is missing or failed —, mount). Returns every other run's upper and work
/// folders (the previous run's, and what interrupted verbs left), to be removed off the
/// critical path.
pub(super) fn reset_upper(
    run: &mut VerbRun,
    st: &mut SlotState,
    ov: &OverlayState,
    snap_dir: &Path,
    prep: Option<PreparedUpper>,
) -> Result<Vec<PathBuf>, SlotError> {
    let image = st
        .image
        .clone()
        .ok_or_else(|| run.step_err(StepId::Image, StepError::Missing("no image recorded")))?;
    let odir = run.paths.overlay_dir();
    let next = ov.run + 1;
    let (upper, work) = (ov.upper(&odir, next), ov.work(&odir, next));
    let src = snap_dir.join("upper");
    let t = Instant::now();
    let prepared = match prep.map(|p| p.take(&src)) {
        Some(Ok(u)) if u == upper => true,
        Some(Ok(u)) => {
            let _ = fs_tools::remove_tree_same_fs(&u);
            false
        }
        Some(Err(e)) => {
            run.fact("upper_prepared_copy_unused", e.to_string());
            false
        }
        None => false,
    };
    run.took("upper-copy-wait", t);
    let want = st.snapshot.as_ref().and_then(|s| s.upper.clone());
    if prepared {
        // Proven before the live overlay is unmounted.
        upper_copy_gate(run, &upper, &src, want.as_ref())?;
    }
    mounts::unmount(&ov.merged).map_err(|e| run.step_err(StepId::OverlayUnmount, e))?;
    if !prepared {
        let _ = fs_tools::remove_tree_same_fs(&upper);
        fs_tools::copy_tree_unsynced(&src, &upper)
            .map_err(|e| run.step_err(StepId::UpperReset, e))?;
        upper_copy_gate(run, &upper, &src, want.as_ref())?;
    }
    let _ = fs_tools::remove_tree_same_fs(&work);
    mkdirs(run, std::slice::from_ref(&work))?;
    let (g, refused) =
        mounts::mount_overlay_volatile(&image.lower, &upper, &work, &ov.merged, &ov.options)
            .map_err(|e| run.step_err(StepId::Overlay, e))?;
    g.disarm();
    let volatile = shared_gates::volatile_fact(run, refused);
    st.overlay = Some(OverlayState {
        run: next,
        mounted: true,
        volatile,
        ..ov.clone()
    });
    run.save(st)?;
    // The previous run's folders, and any other run's an interrupted verb left behind.
    Ok(OverlayState::runs_except(&odir, next))
}

/// The snapshot's `manifest.json` beside its saved upper `src` (`<snapshot>/upper`), parsed.
///
/// Errors: a sentence naming the file when it cannot be read or parsed.
fn manifest_of(src: &Path) -> Result<serde_json::Value, ManifestReadError> {
    let path = src.with_file_name("manifest.json");
    let err = |source: Box<dyn std::error::Error + Send + Sync>| ManifestReadError {
        path: path.clone(),
        source,
    };
    let b = crate::evidence::read_recorded(&path).map_err(|e| err(e.into()))?;
    serde_json::from_slice(&b).map_err(|e| err(e.into()))
}

/// The `upper-copy` gate: the copy `upper` has the tree digest recorded for the snapshot's saved
/// upper (`want`; none recorded proves nothing). What is mounted is what was saved, whatever
/// happened to the snapshot folder while the copy ran. A refusal names the paths that differ
/// from the listing in the manifest beside `src` (the saved upper copied from).
fn upper_copy_gate(
    run: &mut VerbRun,
    upper: &Path,
    src: &Path,
    want: Option<&crate::evidence::TreeDigest>,
) -> Result<(), SlotError> {
    let t = Instant::now();
    let r = match (want, crate::evidence::tree_digest(upper)) {
        (None, _) => Err("state.json records no digest of the snapshot's saved upper".to_string()),
        (Some(_), Err(e)) => Err(format!("the copy cannot be hashed: {e}")),
        (Some(w), Ok(now)) if now == *w => Ok(format!(
            "{}: tree sha256 {}, {} entries, {} bytes, as saved",
            upper.display(),
            now.sha256,
            now.entries,
            now.bytes
        )),
        (Some(w), Ok(now)) => Err(format!(
            "{}: tree sha256 {} ({} entries, {} bytes), the saved upper's is {} ({} entries, {} bytes): the snapshot's upper changed while it was copied ({})",
            upper.display(),
            now.sha256,
            now.entries,
            now.bytes,
            w.sha256,
            w.entries,
            w.bytes,
            manifest_of(src).map_or_else(
                |e| format!("the paths that differ cannot be named: {e}"),
                |m| pure_checks::upper_paths_differing(upper, &m)
            )
        )),
    };
    run.took("gate-upper-copy", t);
    run.gate(GateId::UpperCopy, r)
}
