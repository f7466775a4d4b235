//! [`LadderError`]: why `netprobe run` produced no result, and its exit class; [`writing`] and
//! [`writing_into`] turn an evidence error into one.

use crate::evidence::{self, EvidenceDir};
use crate::exit::ExitClass;
use crate::host;
use std::path::PathBuf;

/// Why a ladder run did not produce a result; its exit class comes from the variant (docs/REFERENCE.md's
/// table, [`ExitClass`]). (Named apart from [`crate::criu::RunError`], a CRIU command's error.)
#[derive(Debug, thiserror::Error)]
pub enum LadderError {
    /// Bad input (`--phases`): exit 2.
    #[error("{0}")]
    Usage(String),
    /// The `--rootfs` cannot serve the runtime rungs: exit 2.
    #[error(transparent)]
    Rootfs(crate::oci::OciError),
    /// The evidence folder cannot be created (exists, not empty, being written): exit 2.
    #[error(transparent)]
    EvidenceFolder(evidence::EvidenceError),
    /// The host refused (not root, CRIU config file, missing prerequisite): exit 3.
    #[error(transparent)]
    HostRefused(#[from] host::HostError),
    /// The evidence folder refused a write before the result was written (full disk, quota,
    /// read-only remount, I/O error): no result, `incomplete.txt` keeps the reason when it could
    /// be written. "Cannot write into" the folder, as when it is refused at the start: exit 2.
    #[error(
        "cannot write into the evidence folder {}: could not {action} {}: {source}; no \
         netprobe-result.json was written ({}/incomplete.txt keeps the reason); free space on \
         its filesystem, or fix what refuses the write (read-only mount, permissions, quota), \
         then run netprobe again with a new --evidence folder",
        .folder.display(),
        .file.display(),
        .folder.display()
    )]
    EvidenceWrite {
        /// The evidence folder.
        folder: PathBuf,
        /// What was being done, e.g. `write`, `syncfs`.
        action: &'static str,
        /// The file it was done to (the name it was to have, not its temporary one).
        file: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Evidence handling failed otherwise (a result that does not validate, a file that cannot
    /// be read back to be listed) or after the result was written: exit 4.
    #[error("{what}: {source}")]
    Evidence {
        /// What was being written, e.g. `writing host.json`.
        what: String,
        /// The evidence error.
        #[source]
        source: evidence::EvidenceError,
    },
}

impl LadderError {
    /// The exit class of this error.
    pub fn exit_class(&self) -> ExitClass {
        match self {
            LadderError::Usage(_)
            | LadderError::Rootfs(_)
            | LadderError::EvidenceFolder(_)
            | LadderError::EvidenceWrite { .. } => ExitClass::Usage,
            LadderError::HostRefused(_) => ExitClass::HostRefused,
            LadderError::Evidence { .. } => ExitClass::CouldNotRun,
        }
    }

    /// The process exit code for this error (docs/REFERENCE.md's table).
    pub fn exit_code(&self) -> i32 {
        i32::from(self.exit_class().code())
    }
}

pub(super) fn writing(
    what: impl Into<String>,
) -> impl FnOnce(evidence::EvidenceError) -> LadderError {
    let what = what.into();
    move |source| LadderError::Evidence { what, source }
}

/// As [`writing`], for what happens before the result is written: a write the folder `ev`
/// refuses (ENOSPC, EDQUOT, EROFS, EIO, …) is [`LadderError::EvidenceWrite`] (exit 2).
pub(super) fn writing_into<'a>(
    ev: &'a EvidenceDir,
    what: impl Into<String> + 'a,
) -> impl FnOnce(evidence::EvidenceError) -> LadderError + 'a {
    const WRITES: [&str; 9] = [
        "create",
        "write",
        "copy into",
        "fsync",
        "fsync directory",
        "link into place",
        "syncfs",
        "chmod",
        "write into",
    ];
    move |e| match e {
        evidence::EvidenceError::Io {
            action,
            path,
            source,
        } if WRITES.contains(&action) => LadderError::EvidenceWrite {
            folder: ev.root().to_path_buf(),
            action,
            file: evidence::dir::written_name(&path),
            source,
        },
        e => writing(what)(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladder_errors_carry_their_exit_class_and_cause() {
        let host = LadderError::from(host::HostError::NotRoot);
        assert_eq!(
            (host.exit_class(), host.exit_code()),
            (ExitClass::HostRefused, 3)
        );
        let io = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let ev = evidence::EvidenceError::Io {
            action: "write",
            path: "/e/host.json".into(),
            source: io,
        };
        let e = writing("writing host.json")(ev);
        assert_eq!(e.exit_code(), 4);
        assert!(e.to_string().starts_with("writing host.json: "), "{e}");
        assert!(std::error::Error::source(&e).is_some());
        // Before the result, a write the folder refuses is "cannot write into" it (2), naming
        // the file by the name it was to have; reading back stays 4.
        let tmp = tempfile::tempdir().unwrap();
        let dir = EvidenceDir::create(&tmp.path().join("ev")).unwrap();
        let full = evidence::EvidenceError::Io {
            action: "write",
            path: dir.root().join(".netprobe-tmp-42-7-netprobe-result.json"),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        };
        let e = writing_into(&dir, "writing netprobe-result.json")(full);
        assert_eq!(e.exit_code(), 2, "{e}");
        let msg = e.to_string();
        for needle in [
            format!(
                "cannot write into the evidence folder {}",
                dir.root().display()
            ),
            format!(
                "could not write {}/netprobe-result.json:",
                dir.root().display()
            ),
            "No space left on device".to_string(),
            "free space on its filesystem".to_string(),
        ] {
            assert!(msg.contains(&needle), "{needle:?} not in {msg}");
        }
        let read = evidence::EvidenceError::Io {
            action: "hash",
            path: dir.root().join("host.json"),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        assert_eq!(writing_into(&dir, "listing")(read).exit_code(), 4);
    }
}
