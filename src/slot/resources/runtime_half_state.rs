//! A runtime's half-written container state in the slot's private runtime root, left when the
//! runtime was killed mid-create or mid-restore: the runtime then says the container does not
//! exist, yet refuses to create or restore one with its id ("container with given ID already
//! exists"). Removed only once no process of the container is left (the callers' gates), and
//! only when it holds nothing but what the runtime writes before its state file.
//!
//! runc: `<root>/<id>/` without `state.json`, holding at most `criu-root` — the folder runc's
//! `Restore` (libcontainer/criu_linux.go, runc 1.x) bind-mounts the rootfs on for CRIU and
//! unmounts and removes when it returns; a killed runc leaves both. crun: see
//! [`super::crun_leftovers::remove_half_state`].

use crate::oci::RuntimeKind;
use crate::slot::record::verb_run::VerbRun;
use crate::slot::resources::mounts;
use crate::slot::state::SlotState;
use std::path::{Path, PathBuf};

/// Why a runtime's half-written state (or another leftover of a killed runtime) was not
/// removed; the messages say what to inspect.
#[derive(Debug, thiserror::Error)]
pub enum HalfStateError {
    /// A folder or file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The folder or file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// runc's state folder without `state.json` holds more than `criu-root`.
    #[error("{}: runc state folder without state.json holds {names:?} (not only {RUNC_CRIU_ROOT}); not removed: inspect it and remove it by hand", dir.display())]
    RuncForeign {
        /// The state folder.
        dir: PathBuf,
        /// What it holds.
        names: Vec<String>,
    },
    /// crun's state folder without `status` holds more than `config.json`.
    #[error("{}: crun state folder without `status` holds {names:?} (not only config.json); not removed: inspect it and remove it by hand", dir.display())]
    CrunForeign {
        /// The state folder.
        dir: PathBuf,
        /// What it holds.
        names: Vec<String>,
    },
    /// A mount in it could not be unmounted.
    #[error(transparent)]
    Unmount(#[from] mounts::MountError),
    /// `rmdir` failed; `what` adds what the folder is (may be empty).
    #[error("rmdir {}: {source}{what}", path.display())]
    Rmdir {
        /// The folder.
        path: PathBuf,
        /// Said after the error, e.g. " (crun's folder for masked directories)".
        what: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A recursive removal (`remove`) or a file's (`rm`) failed.
    #[error("{action} {}: {source}", path.display())]
    Remove {
        /// `remove` or `rm`.
        action: &'static str,
        /// The folder or file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// runc's temporary pid file is not a regular file.
    #[error("{} is not a regular file (runc's temporary pid file would be); not removed: inspect it and remove it by hand", .0.display())]
    PidTempNotAFile(PathBuf),
    /// Several of the above, joined by `; `.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Several(Vec<HalfStateError>),
}

impl HalfStateError {
    /// A [`HalfStateError::Read`] of `path`.
    pub(crate) fn read(path: &Path) -> impl FnOnce(std::io::Error) -> HalfStateError + '_ {
        move |source| HalfStateError::Read {
            path: path.to_path_buf(),
            source,
        }
    }

    /// A [`HalfStateError::Rmdir`] of `path`, `what` said after the error.
    pub(crate) fn rmdir<'p>(
        path: &'p Path,
        what: &'static str,
    ) -> impl FnOnce(std::io::Error) -> HalfStateError + 'p {
        move |source| HalfStateError::Rmdir {
            path: path.to_path_buf(),
            what,
            source,
        }
    }

    /// A [`HalfStateError::Remove`] of `path` by `action` (`remove`, `rm`).
    pub(crate) fn remove<'p>(
        action: &'static str,
        path: &'p Path,
    ) -> impl FnOnce(std::io::Error) -> HalfStateError + 'p {
        move |source| HalfStateError::Remove {
            action,
            path: path.to_path_buf(),
            source,
        }
    }

    /// `self` and then `e`, as one error.
    fn and(self, e: HalfStateError) -> HalfStateError {
        match self {
            HalfStateError::Several(mut v) => {
                v.push(e);
                HalfStateError::Several(v)
            }
            first => HalfStateError::Several(vec![first, e]),
        }
    }
}

/// What runc writes in `<root>/<id>/` before `state.json`.
const RUNC_CRIU_ROOT: &str = "criu-root";

/// Removes a half-written runc state folder `<root>/<id>/` (no `state.json`; at most
/// `criu-root`, unmounted first if mounted). Returns what was done (`None`: nothing to do —
/// no folder, or a full state).
///
/// Errors: the folder holds anything else (named: not removed), or an unmount or removal
/// failed.
pub fn remove_runc_half_state(root: &Path, id: &str) -> Result<Option<String>, HalfStateError> {
    let dir = root.join(id);
    if !dir.is_dir() || dir.join("state.json").exists() {
        return Ok(None);
    }
    let names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(HalfStateError::read(&dir))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if names.iter().any(|n| n != RUNC_CRIU_ROOT) {
        return Err(HalfStateError::RuncForeign { dir, names });
    }
    let mut done = Vec::new();
    let criu_root = dir.join(RUNC_CRIU_ROOT);
    if criu_root.is_dir() {
        if mounts::is_mounted(&criu_root) {
            mounts::unmount(&criu_root)?;
            done.push(format!("unmounted {}", criu_root.display()));
        }
        std::fs::remove_dir(&criu_root).map_err(HalfStateError::rmdir(&criu_root, ""))?;
    }
    std::fs::remove_dir(&dir).map_err(HalfStateError::rmdir(&dir, ""))?;
    done.push(format!("removed {}", dir.display()));
    Ok(Some(format!(
        "runc's half-written state of an interrupted create or restore (no state.json): {}",
        done.join(", ")
    )))
}

/// `Some(detail)` when `<root>/<id>/` holds nothing but a half-written state — runc's (no
/// `state.json`; at most `criu-root`) or crun's (no `status`; only `config.json`): the runtime
/// then has no container of that id (crun's `state` even fails on it), which is the proof of
/// absence the restore gates use. Read-only.
pub fn only_half_state(root: &Path, id: &str) -> Option<String> {
    let dir = root.join(id);
    if !dir.is_dir() {
        return None;
    }
    let names: Vec<String> = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let only = |allowed: &[&str]| names.iter().all(|n| allowed.contains(&n.as_str()));
    if only(&[RUNC_CRIU_ROOT]) {
        Some(format!(
            "{}: runc's half-written state only ({names:?}, no state.json): no container",
            dir.display()
        ))
    } else if only(&["config.json"]) {
        Some(format!(
            "{}: crun's half-written state only (config.json, no status): no container",
            dir.display()
        ))
    } else {
        None
    }
}

/// The runtime's `criu-root` in the bundle (crun makes `<bundle>/criu-root` for CRIU's root
/// and leaves it when killed; the retry then fails with "File exists"): unmounted if mounted
/// and removed when empty. Returns what was done.
///
/// Errors: it holds files (named: not removed), or the unmount or `rmdir` failed.
pub fn remove_bundle_criu_root(bundle: &Path) -> Result<Option<String>, HalfStateError> {
    let d = bundle.join(RUNC_CRIU_ROOT);
    if !d.is_dir() {
        return Ok(None);
    }
    let mut done = Vec::new();
    if mounts::is_mounted(&d) {
        mounts::unmount(&d)?;
        done.push(format!("unmounted {}", d.display()));
    }
    std::fs::remove_dir(&d).map_err(HalfStateError::rmdir(
        &d,
        " (the runtime's CRIU root, left by a killed restore; not emptied: inspect it)",
    ))?;
    done.push(format!("removed {}", d.display()));
    Ok(Some(format!(
        "the runtime's CRIU root left in the bundle by a killed restore: {}",
        done.join(", ")
    )))
}

/// The temporary pid file runc writes beside `--pid-file` (`.<name>`, opened `O_EXCL`, written,
/// then renamed onto `<name>`: `createPidFile` in runc's utils_linux.go, runc 1.x), left when
/// runc was killed between the two: every later create or restore with that `--pid-file` then
/// fails ("file exists"). Removed when it is a regular file (never followed). Returns what was
/// done (`None`: nothing there).
///
/// Errors: it is not a regular file, or the removal failed (named).
pub fn remove_runtime_pid_temp(pid_file: &Path) -> Result<Option<String>, HalfStateError> {
    let Some(name) = pid_file.file_name() else {
        return Ok(None);
    };
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    let tmp = pid_file.with_file_name(tmp_name);
    match std::fs::symlink_metadata(&tmp) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(HalfStateError::read(&tmp)(e)),
        Ok(m) if !m.is_file() => Err(HalfStateError::PidTempNotAFile(tmp)),
        Ok(_) => std::fs::remove_file(&tmp)
            .map(|()| {
                Some(format!(
                    "runc's temporary pid file left by a killed create or restore, removed: {}",
                    tmp.display()
                ))
            })
            .map_err(HalfStateError::remove("rm", &tmp)),
    }
}

/// CRIU's mounts left under the slot's evidence folders (its cgroup yard
/// `criu-work/.criu.cgyard.*`, when CRIU and netprobe were killed together): unmounted
/// deepest first. Returns the mount points released.
pub fn release_criu_work_mounts(evidence: &Path) -> Vec<String> {
    let left = crate::ns::mountinfo::mounts_under(evidence);
    crate::ns::mountinfo::unmount_under(evidence, |m| {
        nix::mount::umount2(m, nix::mount::MntFlags::MNT_DETACH)
    });
    left.iter().map(|m| m.display().to_string()).collect()
}

/// The half-written state of the slot's container, for its runtime kind, removed
/// ([`remove_runc_half_state`] or [`super::crun_leftovers::remove_half_state`]), with the bundle's
/// `criu-root` ([`remove_bundle_criu_root`]), runc's temporary pid file
/// ([`remove_runtime_pid_temp`]) and CRIU's work mounts under the evidence
/// ([`release_criu_work_mounts`]) when `leftovers`, and recorded in the journal and the facts
/// (`runtime_half_state`). Only called once the container is proven gone
/// and no process of it is left. Returns the refusal when one was left in place.
pub(crate) fn remove(run: &mut VerbRun, st: &SlotState, leftovers: bool) -> Option<String> {
    let mut r = match run.runtime_kind(&st.runtime.path) {
        RuntimeKind::Crun => {
            super::crun_leftovers::remove_half_state(&st.runtime_root, &st.container_id)
        }
        RuntimeKind::Runc => remove_runc_half_state(&st.runtime_root, &st.container_id),
    };
    // Then (`leftovers`: only once nothing of the container is left) what else a killed
    // restore leaves: the bundle's criu-root, CRIU's work mounts.
    let (extra, work) = if leftovers {
        (
            vec![
                remove_bundle_criu_root(&run.paths.bundle()),
                remove_runtime_pid_temp(&run.paths.root.join("container.pid")),
            ],
            release_criu_work_mounts(&run.paths.evidence()),
        )
    } else {
        (Vec::new(), Vec::new())
    };
    let mut also = Vec::new();
    for x in extra {
        match x {
            Ok(Some(d)) => also.push(d),
            Ok(None) => {}
            Err(e) => {
                r = Err(match r {
                    Err(r0) => r0.and(e),
                    Ok(_) => e,
                })
            }
        }
    }
    if !work.is_empty() {
        also.push(format!(
            "CRIU's work mounts left by a killed verb, detached: {}",
            work.join(", ")
        ));
    }
    if !also.is_empty() {
        r = r.map(|d| Some(d.into_iter().chain(also).collect::<Vec<_>>().join("; ")));
    }
    let r = r.map(|d| d.map(|d| (d.clone(), d.into())));
    run.record_release(r, "runtime_half_state", "runtime_half_state")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_folder_without_state_and_with_at_most_criu_root_is_removed() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(remove_runc_half_state(t.path(), "c").unwrap(), None);
        let d = t.path().join("c");
        std::fs::create_dir_all(d.join("criu-root")).unwrap();
        std::fs::write(d.join("state.json"), "{}").unwrap();
        assert_eq!(
            remove_runc_half_state(t.path(), "c").unwrap(),
            None,
            "a full state is the runtime's"
        );
        std::fs::remove_file(d.join("state.json")).unwrap();
        std::fs::write(d.join("exec.fifo"), "").unwrap();
        let e = remove_runc_half_state(t.path(), "c")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"exec.fifo\"") && e.contains("not removed"),
            "{e}"
        );
        std::fs::remove_file(d.join("exec.fifo")).unwrap();
        let done = remove_runc_half_state(t.path(), "c").unwrap().unwrap();
        assert!(
            done.contains("no state.json") && done.contains("removed"),
            "{done}"
        );
        assert!(!d.exists());
        // Only a half state: the proof of absence; anything else is the runtime's to tell.
        std::fs::create_dir_all(d.join("criu-root")).unwrap();
        assert!(
            only_half_state(t.path(), "c")
                .unwrap()
                .contains("runc's half-written")
        );
        std::fs::remove_dir(d.join("criu-root")).unwrap();
        std::fs::write(d.join("config.json"), "{}").unwrap();
        assert!(
            only_half_state(t.path(), "c")
                .unwrap()
                .contains("crun's half-written")
        );
        std::fs::write(d.join("status"), "").unwrap();
        assert_eq!(only_half_state(t.path(), "c"), None);
        std::fs::remove_file(d.join("status")).unwrap();
        std::fs::remove_file(d.join("config.json")).unwrap();
        assert_eq!(only_half_state(t.path(), "none"), None);
        std::fs::remove_dir(&d).unwrap();
        // The bundle's criu-root: removed when empty, named when not.
        let b = t.path().join("bundle");
        assert_eq!(remove_bundle_criu_root(&b).unwrap(), None);
        std::fs::create_dir_all(b.join("criu-root")).unwrap();
        std::fs::write(b.join("criu-root/x"), "").unwrap();
        assert!(
            remove_bundle_criu_root(&b)
                .unwrap_err()
                .to_string()
                .contains("not emptied")
        );
        std::fs::remove_file(b.join("criu-root/x")).unwrap();
        assert!(
            remove_bundle_criu_root(&b)
                .unwrap()
                .unwrap()
                .contains("removed")
        );
        assert!(!b.join("criu-root").exists());
        // An empty folder (runc killed before criu-root) goes too.
        std::fs::create_dir(&d).unwrap();
        assert!(remove_runc_half_state(t.path(), "c").unwrap().is_some());
        assert!(!d.exists());
    }

    /// Trial 21: runc killed between writing `.container.pid` and renaming it left the slot
    /// unable to restore ("file exists"): the temporary is removed; anything but a regular file
    /// is named and left.
    #[test]
    fn runc_s_temporary_pid_file_is_removed_and_only_a_regular_file() {
        let t = tempfile::tempdir().unwrap();
        let pid = t.path().join("container.pid");
        assert_eq!(remove_runtime_pid_temp(&pid).unwrap(), None);
        std::fs::write(t.path().join(".container.pid"), "11953").unwrap();
        let d = remove_runtime_pid_temp(&pid).unwrap().unwrap();
        assert!(d.contains("removed") && d.contains(".container.pid"), "{d}");
        assert!(!t.path().join(".container.pid").exists());
        std::os::unix::fs::symlink("/etc/passwd", t.path().join(".container.pid")).unwrap();
        let e = remove_runtime_pid_temp(&pid).unwrap_err().to_string();
        assert!(
            e.contains("not a regular file") && e.contains("not removed"),
            "{e}"
        );
        assert!(std::fs::symlink_metadata(t.path().join(".container.pid")).is_ok());
    }
}
