//! The state directory's checks (`state-dir` gate): not a symlink, a directory at its real
//! path, owned by the effective uid, not group- or world-writable, carrying
//! [`STATE_DIR_MARKER`] or empty; created with its marker by `provision`
//! ([`StateDirUse::Create`]). Its layout: [`super::slot_dir`].

use super::slot_dir::STATE_DIR_MARKER;
use crate::slot::gate::Observed;
use crate::slot::record::evidence_writes;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// How [`check_state_dir`] treats a state directory that is not (yet) one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateDirUse {
    /// `provision`: a missing directory is created (mode 0700, parent must exist) and the marker
    /// is written into an empty one.
    Create,
    /// Every verb on an existing slot: the directory must exist and carry the marker.
    Existing,
    /// `status`: as [`StateDirUse::Existing`], except that a directory that does not exist yet,
    /// or an empty one (both of which `provision` would adopt), is proven with nothing written.
    Inspect,
}

/// Checks the state directory: not a symlink, a directory, owned by the effective uid, not
/// group- or world-writable, and either carrying [`STATE_DIR_MARKER`] or empty (see
/// [`StateDirUse`] for what happens to a missing or empty one).
///
/// Returns the observed facts for the `state-dir` gate: `Ok(detail)` when proven, `Err(detail)`.
pub fn check_state_dir(dir: &Path, how: StateDirUse) -> Observed {
    let create = how == StateDirUse::Create;
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if how == StateDirUse::Inspect {
                return Ok(format!(
                    "{} does not exist yet (no slot was provisioned here)",
                    dir.display()
                ));
            }
            if !create {
                return Err(format!(
                    "{} does not exist (no slot was provisioned here; `{} provision --state-dir {}` creates it)",
                    dir.display(),
                    crate::slot::next_step::COMMAND,
                    crate::shell::arg(dir)
                ));
            }
            // A concurrent provision may create it between the stat and here: then it is
            // checked below like any existing folder.
            match fs::create_dir(dir) {
                Ok(()) => fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
                    .map_err(|e| refused_write(dir, &format!("chmod {}", dir.display()), &e))?,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(refused_write(
                        dir,
                        &format!("cannot create {}", dir.display()),
                        &e,
                    ));
                }
            }
        }
        Err(e) => return Err(format!("cannot stat {}: {e}", dir.display())),
        Ok(_) => {}
    }
    let md =
        fs::symlink_metadata(dir).map_err(|e| format!("cannot stat {}: {e}", dir.display()))?;
    if md.file_type().is_symlink() {
        return Err(symlinked_state_dir(dir));
    }
    if !md.is_dir() {
        return Err(format!(
            "{} is not a directory; give --state-dir a directory (a missing one is created by {})",
            dir.display(),
            crate::slot::next_step::bare("provision")
        ));
    }
    // A symlink higher up (or `..`) is no more followed than the folder's own: mountinfo names a
    // slot's mounts by the real path, so a cleanup given another would not see them.
    match fs::canonicalize(dir) {
        Ok(real) if real != dir => {
            return Err(format!(
                "{} is not its real path {} (a folder above it is a symlink, or it holds `..`); netprobe does not follow a symlink for --state-dir (a slot's state, mounts and runtime root name the path it was provisioned under, and mountinfo names its mounts by the real one): pass `--state-dir {}`",
                dir.display(),
                real.display(),
                crate::shell::arg(&real)
            ));
        }
        Ok(_) => {}
        Err(e) => return Err(format!("cannot resolve {}: {e}", dir.display())),
    }
    let euid = nix::unistd::geteuid().as_raw();
    if md.uid() != euid {
        return Err(format!(
            "{} is owned by uid {}, not by us (uid {euid})",
            dir.display(),
            md.uid()
        ));
    }
    if md.mode() & 0o022 != 0 {
        return Err(format!(
            "{} is group- or world-writable (mode {:o})",
            dir.display(),
            md.mode() & 0o7777
        ));
    }
    let marker = dir.join(STATE_DIR_MARKER);
    match fs::symlink_metadata(&marker) {
        Ok(m) if m.is_file() => Ok(format!(
            "{}: directory, uid {euid}, mode {:o}, marker present",
            dir.display(),
            md.mode() & 0o7777
        )),
        Ok(_) => Err(format!("{} is not a regular file", marker.display())),
        Err(_) => unmarked(dir, how, &md, euid, &marker),
    }
}

/// The `state-dir` gate's words for a `--state-dir` that is a symlink: not followed (a slot's
/// state, mounts and runtime root name the path it was provisioned under, and a link can be
/// pointed elsewhere later); the fix is the real path, named (shell-quoted) when the link
/// resolves, else the link's target as read and why it does not resolve.
fn symlinked_state_dir(dir: &Path) -> String {
    let fix = match fs::canonicalize(dir) {
        Ok(real) => format!(
            "it leads to {}: pass that path, `--state-dir {}`",
            real.display(),
            crate::shell::arg(&real)
        ),
        Err(e) => format!(
            "it points to {}, which does not resolve ({e}): pass the real path of the state directory",
            fs::read_link(dir).map_or_else(
                |e| format!("(unreadable: {e})"),
                |t| t.display().to_string()
            )
        ),
    };
    format!(
        "{} is a symlink; netprobe does not follow a symlink for --state-dir (a slot's state, mounts and runtime root name the path it was provisioned under); {fix}",
        dir.display()
    )
}

/// `what: e` for a write into the state directory `dir` that failed; when the filesystem
/// refused it (read-only, full, a quota, permissions:
/// [`evidence_writes::state_dir_refused`]) also the filesystem and the fix, then
/// "provision again" (only provision creates a state directory or its marker).
fn refused_write(dir: &Path, what: &str, e: &std::io::Error) -> String {
    match evidence_writes::state_dir_refused(dir, e) {
        Some(fs) => format!(
            "{what}: {e}: the state directory cannot be made ready; {fs}, then provision again"
        ),
        None => format!("{what}: {e}"),
    }
}

/// A state folder without its marker: a concurrent provision's marker written meanwhile is
/// accepted; an empty folder is adopted (`Create`: the marker is written) or proven empty
/// (`Inspect`); anything else is not ours.
fn unmarked(dir: &Path, how: StateDirUse, md: &fs::Metadata, euid: u32, marker: &Path) -> Observed {
    let create = how == StateDirUse::Create;
    let empty = fs::read_dir(dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .next()
        .is_none();
    // A concurrent provision may have written the marker since it was looked for.
    let marked_since = fs::symlink_metadata(marker).is_ok_and(|m| m.is_file());
    if !empty && marked_since {
        return Ok(format!(
            "{}: directory, uid {euid}, mode {:o}, marker present (written by a concurrent provision)",
            dir.display(),
            md.mode() & 0o7777
        ));
    }
    if !empty {
        return Err(format!(
            "{} is not empty and has no {STATE_DIR_MARKER} marker: not ours; give --state-dir the folder the slots were provisioned in, or a new (or empty) folder for new slots",
            dir.display()
        ));
    }
    if how == StateDirUse::Inspect {
        return Ok(format!(
            "{}: empty directory, uid {euid}, no marker yet (nothing written)",
            dir.display()
        ));
    }
    if !create {
        return Err(format!(
            "{} has no {STATE_DIR_MARKER} marker",
            dir.display()
        ));
    }
    write_marker(dir, marker)
        .map_err(|e| refused_write(dir, &format!("cannot write {}", marker.display()), &e))?;
    Ok(format!(
        "{}: created, uid {euid}, marker written",
        dir.display()
    ))
}

/// Creates the state folder's marker in place (`O_CREAT|O_EXCL`, never through a symlink, then
/// `fsync` of the file and the folder): no temporary name ever shows in the folder, so a
/// concurrent provision into the same new folder never sees a foreign entry, and the one that
/// finds the marker made by the other takes it (readers check only that it is a regular file).
///
/// Errors: the marker cannot be created or synced (the OS error; the caller names the file).
fn write_marker(dir: &Path, marker: &Path) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let made = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(marker);
    match made {
        Ok(mut f) => f
            .write_all(format!("{} state directory\n", crate::slot::next_step::COMMAND).as_bytes())
            .and_then(|()| f.sync_all())
            .and_then(|()| crate::evidence::fsync_dir(dir)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slot::resources::slot_dir::SlotPaths;

    /// Trial 21: `--state-dir link/` (a symlink with a trailing slash, which `lstat` follows)
    /// passed the symlink refusal; the paths drop the slash, so the link is refused.
    #[test]
    fn a_symlinked_state_dir_given_with_a_trailing_slash_is_still_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        for given in [
            format!("{}/", link.display()),
            format!("{}/./", link.display()),
        ] {
            let p = SlotPaths::new(Path::new(&given), 3);
            assert_eq!(p.state_dir, link, "{given}");
            assert_eq!(p.root, link.join("slot-3"));
            let e = check_state_dir(&p.state_dir, StateDirUse::Create).unwrap_err();
            assert!(e.contains("is a symlink"), "{given}: {e}");
        }
        // A symlink above the state directory: refused too, naming the real path.
        let below = real.join("sd");
        fs::create_dir(&below).unwrap();
        fs::set_permissions(&below, fs::Permissions::from_mode(0o700)).unwrap();
        let via_link = SlotPaths::new(&link.join("sd"), 3);
        let e = check_state_dir(&via_link.state_dir, StateDirUse::Create).unwrap_err();
        assert!(
            e.contains(&format!("is not its real path {}", below.display()))
                && e.contains(&format!("pass `--state-dir {}`", below.display())),
            "{e}"
        );
        assert!(check_state_dir(&below, StateDirUse::Create).is_ok());
    }

    #[test]
    fn concurrent_creations_of_one_new_state_dir_all_take_it() {
        for round in 0..40 {
            let tmp = tempfile::tempdir().unwrap();
            let sd = tmp.path().join("state");
            let results: Vec<Observed> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..4)
                    .map(|_| s.spawn(|| check_state_dir(&sd, StateDirUse::Create)))
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for r in &results {
                assert!(r.is_ok(), "round {round}: {results:?}");
            }
            let names: Vec<_> = fs::read_dir(&sd)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(names, vec![std::ffi::OsString::from(STATE_DIR_MARKER)]);
            assert!(check_state_dir(&sd, StateDirUse::Existing).is_ok());
        }
    }
}
