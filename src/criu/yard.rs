//! CRIU's root yard: the temporary folder a restore of a mount namespace builds its mount trees
//! in, and what a CRIU killed mid-restore leaves of it.
//!
//! Mirrors `create_mnt_roots()` in criu/mount.c (CRIU 4.x): `mkdtemp("/tmp/.criu.mntns.XXXXXX")`,
//! `chmod 0777`, called by `prepare_namespace_before_tasks()` when the images hold a mount
//! namespace (every runc and crun restore). CRIU removes it itself (`__depopulate_roots_yard()`,
//! `cleanup_mnt_ns()`) when it ends on its own, success or error; a CRIU killed with SIGKILL —
//! by netprobe at a step's bound or on an interruption, or by the next run's sweep — leaves an
//! empty folder in `/tmp` for ever (its mounts lived in CRIU's own mount namespace and went with
//! it). The path is hard-coded in CRIU (no `TMPDIR`), and CRIU's log names it from its first
//! debug line on (`mnt: … Will mount N @ /tmp/.criu.mntns.XXXXXX/…`, about 0.3 ms after the
//! `mkdtemp`), so the yard of one killed CRIU is found in that CRIU's own `restore.log`, never
//! guessed from what else is in `/tmp` (another CRIU's yard, in use, looks the same).

use memchr::memmem;
use std::path::{Path, PathBuf};

/// The yard's path before its six `mkdtemp` characters.
pub const YARD_PREFIX: &str = "/tmp/.criu.mntns.";

/// The `mkdtemp` characters of a yard name: `[A-Za-z0-9]`, six of them.
const SUFFIX_LEN: usize = 6;

/// Every yard a CRIU log names, in order of first mention, each once (CRIU 4.x builds one per
/// run). Bytes that are not a full `YARD_PREFIX` + six `[A-Za-z0-9]` are not a yard.
pub fn yards_named_in(log: &[u8]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for at in memmem::find_iter(log, YARD_PREFIX.as_bytes()) {
        let start = at + YARD_PREFIX.len();
        let Some(suffix) = log.get(start..start + SUFFIX_LEN) else {
            continue;
        };
        let ends = log
            .get(start + SUFFIX_LEN)
            .is_none_or(|b| !b.is_ascii_alphanumeric());
        if !suffix.iter().all(u8::is_ascii_alphanumeric) || !ends {
            continue;
        }
        let p = PathBuf::from(format!("{YARD_PREFIX}{}", String::from_utf8_lossy(suffix)));
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// `path` is a yard's name: [`YARD_PREFIX`] then six `[A-Za-z0-9]`, nothing else.
pub fn is_yard_name(path: &Path) -> bool {
    let s = path.to_string_lossy();
    s.strip_prefix(YARD_PREFIX).is_some_and(|rest| {
        rest.len() == SUFFIX_LEN && rest.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// What [`release`] did with one yard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum YardRelease {
    /// The empty folder was removed (`rmdir`).
    Removed,
    /// It was already gone: the CRIU had removed it before it was killed.
    Absent,
    /// Left in place, with why: not empty, busy, not a yard's name, or another error.
    Kept(String),
}

/// Removes the yard `path` with `rmdir(2)` only — never recursively: a yard that is not empty
/// (or a mount point here) is not what a killed CRIU leaves, and is kept. Call it only once the
/// CRIU that named `path` in its log is dead.
pub fn release(path: &Path) -> YardRelease {
    if !is_yard_name(path) {
        return YardRelease::Kept(format!(
            "{}: not a CRIU root yard's name ({YARD_PREFIX}XXXXXX)",
            path.display()
        ));
    }
    match std::fs::remove_dir(path) {
        Ok(()) => YardRelease::Removed,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => YardRelease::Absent,
        Err(e) => YardRelease::Kept(format!("{}: {e}", path.display())),
    }
}

/// The yards the CRIU log `log` names, each [`release`]d, with what became of it. A log that
/// cannot be read names none.
pub fn release_named_in(log: &Path) -> Vec<(PathBuf, YardRelease)> {
    let text = std::fs::read(log).unwrap_or_default();
    yards_named_in(&text)
        .into_iter()
        .map(|y| {
            let r = release(&y);
            (y, r)
        })
        .collect()
}

/// What became of each released yard, e.g. "/tmp/.criu.mntns.AbC123: removed"
/// (`, `-joined); `None` when there was none.
pub fn outcomes(released: &[(PathBuf, YardRelease)]) -> Option<String> {
    if released.is_empty() {
        return None;
    }
    let parts: Vec<String> = released
        .iter()
        .map(|(p, r)| match r {
            YardRelease::Removed => format!("{}: removed", p.display()),
            YardRelease::Absent => format!("{}: already gone", p.display()),
            YardRelease::Kept(why) => format!("kept ({why})"),
        })
        .collect();
    Some(parts.join(", "))
}

/// Registers, for an interruption (which kills every running step's tree before it releases),
/// the release of the yards named in the CRIU log `log`, listed as `CRIU root yard named in
/// LOG: <outcomes>` (or `none named`). Drop the registration once the step has ended.
pub fn register_release(log: PathBuf) -> crate::ns::cleanup::Registration {
    crate::ns::cleanup::register_reporting(
        format!("CRIU root yard named in {}", log.display()),
        move || Some(outcomes(&release_named_in(&log)).unwrap_or_else(|| "none named".into())),
    )
}

/// Every folder in `tmp` whose name is a yard's (`.criu.mntns.XXXXXX`), sorted: what `doctor`
/// counts when no CRIU runs on the host (then none is in use).
pub fn yards_in(tmp: &Path) -> Vec<PathBuf> {
    let prefix = YARD_PREFIX.trim_start_matches("/tmp/");
    let mut out: Vec<PathBuf> = std::fs::read_dir(tmp)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_prefix(prefix).is_some_and(|rest| {
                rest.len() == SUFFIX_LEN && rest.bytes().all(|b| b.is_ascii_alphanumeric())
            }) && e.file_type().is_ok_and(|t| t.is_dir())
        })
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// Some process under `proc_root` (`/proc`) is a CRIU (its `comm` is `criu`): a yard in `/tmp`
/// may then be in use.
pub fn criu_running(proc_root: &Path) -> bool {
    std::fs::read_dir(proc_root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .any(|e| std::fs::read(e.path().join("comm")).is_ok_and(|c| c.trim_ascii_end() == b"criu"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_names_its_yard_once_in_order() {
        let log = b"(00.044023) mnt: Reading mountpoint images (id 13 pid 1)\n\
(00.044052) mnt: \t\tWill mount 58 @ /tmp/.criu.mntns.2x9Ge9/mnt-0000000058 /sys/firmware\n\
(00.067101)      1: mnt: Move the root to /tmp/.criu.mntns.2x9Ge9/13-0000000000\n\
(00.067200) other /tmp/.criu.mntns.Zz0099\n";
        assert_eq!(
            yards_named_in(log),
            vec![
                PathBuf::from("/tmp/.criu.mntns.2x9Ge9"),
                PathBuf::from("/tmp/.criu.mntns.Zz0099")
            ]
        );
    }

    #[test]
    fn partial_or_odd_names_are_not_yards() {
        for log in [
            &b"/tmp/.criu.mntns.abc"[..],
            b"/tmp/.criu.mntns.abcdefg/x",
            b"/tmp/.criu.mntns.ab-def/x",
            b"/tmp/.criu.mntns.",
            b"/tmp/.criu.cgyard.abcdef",
        ] {
            assert!(
                yards_named_in(log).is_empty(),
                "{}",
                String::from_utf8_lossy(log)
            );
        }
        assert_eq!(
            yards_named_in(b"end /tmp/.criu.mntns.abcdef"),
            vec![PathBuf::from("/tmp/.criu.mntns.abcdef")]
        );
    }

    #[test]
    fn release_refuses_what_is_not_a_yard_and_never_recurses() {
        for bad in [
            "/tmp",
            "/tmp/.criu.mntns.abc",
            "/tmp/.criu.mntns.abcdef/../x",
        ] {
            assert!(
                matches!(release(Path::new(bad)), YardRelease::Kept(_)),
                "{bad}"
            );
        }
        assert!(is_yard_name(Path::new("/tmp/.criu.mntns.A1b2C3")));
        assert!(!is_yard_name(Path::new("/var/tmp/.criu.mntns.A1b2C3")));
    }

    #[test]
    fn the_outcomes_say_what_became_of_each() {
        assert_eq!(outcomes(&[]), None);
        let s = outcomes(&[
            (
                PathBuf::from("/tmp/.criu.mntns.aaaaaa"),
                YardRelease::Removed,
            ),
            (
                PathBuf::from("/tmp/.criu.mntns.bbbbbb"),
                YardRelease::Absent,
            ),
        ])
        .unwrap();
        assert_eq!(
            s,
            "/tmp/.criu.mntns.aaaaaa: removed, /tmp/.criu.mntns.bbbbbb: already gone"
        );
    }

    #[test]
    fn a_criu_is_found_by_its_comm() {
        let d = tempfile::tempdir().unwrap();
        for (pid, comm) in [("12", "runc\n"), ("self", "criu\n")] {
            std::fs::create_dir(d.path().join(pid)).unwrap();
            std::fs::write(d.path().join(pid).join("comm"), comm).unwrap();
        }
        assert!(!criu_running(d.path()), "self is not a pid");
        std::fs::create_dir(d.path().join("13")).unwrap();
        std::fs::write(d.path().join("13/comm"), "criu\n").unwrap();
        assert!(criu_running(d.path()));
    }

    #[test]
    fn yards_in_lists_only_yard_folders() {
        let d = tempfile::tempdir().unwrap();
        for n in [
            ".criu.mntns.abc123",
            ".criu.mntns.x",
            ".criu.cgyard.abc123",
            "other",
        ] {
            std::fs::create_dir(d.path().join(n)).unwrap();
        }
        std::fs::write(d.path().join(".criu.mntns.fil123"), b"").unwrap();
        assert_eq!(
            yards_in(d.path()),
            vec![d.path().join(".criu.mntns.abc123")]
        );
    }
}
