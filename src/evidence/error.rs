//! [`EvidenceError`]: every error of evidence handling, each naming the path and what to do.

use std::io;
use std::path::{Path, PathBuf};

/// Errors of evidence handling. Each names the path and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    /// `create` was given a folder that already holds files.
    #[error(
        "evidence folder {0} already exists and is not empty; choose a new --evidence folder \
         (netprobe never reuses or overwrites evidence)"
    )]
    NotEmpty(PathBuf),
    /// The path exists but is not a directory (a new evidence folder was asked for).
    #[error("evidence path {0} exists and is not a directory; choose a new --evidence folder")]
    NotADirectory(PathBuf),
    /// A new evidence folder was asked for at a symlink: it is not followed.
    #[error(
        "evidence path {} is a symlink; netprobe does not follow symlinks for --evidence: give \
         the real path{}",
        .path.display(),
        .real.as_ref().map(|r| format!(" (here {})", r.display())).unwrap_or_default()
    )]
    Symlink {
        /// The path as given.
        path: PathBuf,
        /// Where it leads, when that resolves.
        real: Option<PathBuf>,
    },
    /// An existing evidence folder was asked for (`verify`, reading a result) and the path is
    /// not a directory.
    #[error(
        "{} is not a directory: it must be an evidence folder (a directory holding \
         netprobe-result.json); pass {}",
        .path.display(),
        .folder.as_ref().map_or_else(
            || "the folder a `netprobe run --evidence` wrote".to_string(),
            |f| format!("the evidence folder that holds it, {}", f.display())
        )
    )]
    NotAnEvidenceFolder {
        /// The path as given.
        path: PathBuf,
        /// The nearest folder above it holding `netprobe-result.json`, if any.
        folder: Option<PathBuf>,
    },
    /// The path lies inside a folder netprobe already wrote (a run's or matrix's evidence, a
    /// slot state directory or a slot's evidence): see [`super::enclosing`].
    #[error(
        "--evidence {}: refusing a path inside {what} {} (it holds {marker}): netprobe never \
         writes into existing evidence, and files added there would break it; choose a folder \
         outside it",
        .path.display(),
        .folder.display()
    )]
    InsideEvidence {
        /// The path as given.
        path: PathBuf,
        /// The folder netprobe wrote that holds it (its real path).
        folder: PathBuf,
        /// What that folder is, e.g. `the evidence folder of a run`.
        what: &'static str,
        /// The file that marks it, e.g. `netprobe-result.json`.
        marker: &'static str,
    },
    /// `--part-of-matrix` (passed by `netprobe matrix` to each part it starts) names a folder
    /// that is not proven to be the folder of the running matrix that started this process, or
    /// `--evidence` is not directly in it: see [`super::enclosing::refuse_inside_evidence`].
    #[error(
        "--evidence {} --part-of-matrix {}: {why}; --part-of-matrix is passed by `netprobe \
         matrix` to the parts it starts, and only they can prove it: leave it out and choose an \
         --evidence folder outside every folder netprobe wrote",
        .path.display(),
        .matrix.display()
    )]
    NotAMatrixPart {
        /// The evidence path as given.
        path: PathBuf,
        /// The matrix folder as named.
        matrix: PathBuf,
        /// What is not so, e.g. `it holds no incomplete.txt: no matrix is running in it`.
        why: String,
    },
    /// Another netprobe holds the folder (it is writing evidence into it right now).
    #[error(
        "evidence folder {0} is being written by another netprobe; choose a new --evidence folder"
    )]
    InUse(PathBuf),
    /// The folder holds no result because what wrote it (a run, a matrix, a slot verb) was
    /// interrupted: `interrupted.txt` says by what, when and what to do; its first line is
    /// quoted.
    #[error(
        "evidence folder {0} holds no netprobe-result.json: what wrote it was interrupted; \
         {0}/interrupted.txt says: {1}; its files are kept but prove nothing"
    )]
    Interrupted(PathBuf, String),
    /// The folder holds no result because the run that wrote it did not finish
    /// (`incomplete.txt` is still there; it holds the reason when it could be written).
    #[error(
        "evidence folder {0} holds no netprobe-result.json: what wrote it did not finish \
         ({0}/incomplete.txt says: {2}{1}); its files are kept but prove nothing; free space or \
         fix the cause, then run it again with a new --evidence folder"
    )]
    Incomplete(PathBuf, String, String),
    /// `open` / `read_result` was given a folder that does not exist.
    #[error(
        "evidence folder {0} does not exist; pass the folder a `netprobe run --evidence` wrote"
    )]
    Missing(PathBuf),
    /// A file of that name already exists in the evidence folder.
    #[error(
        "refusing to overwrite {0}: evidence is never overwritten; write it under a new name \
         or use a new --evidence folder"
    )]
    Exists(PathBuf),
    /// A relative path given to `write`/`adopt` is not a plain relative path.
    #[error(
        "invalid evidence path {rel:?}: {reason}; use a relative `/`-separated path such as \
         `criu/dump.log`"
    )]
    BadPath {
        /// The path as given.
        rel: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An I/O operation failed.
    #[error("could not {action} {path}: {source}; {}", io_hint(action))]
    Io {
        /// What was being done (e.g. `create`, `read`, `fsync`).
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A file was expected to be JSON (or a value could not be serialized).
    #[error("{path}: invalid JSON: {source}; the file is damaged or not written by this netprobe")]
    Json {
        /// The file (or the file about to be written).
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// A result does not match `netprobe-result.schema.json`.
    #[error(
        "{path} does not match evidence-schema/netprobe-result.schema.json: {}; \
         a result must be fixed before it is written or trusted",
        .errors.join("; ")
    )]
    Invalid {
        /// The result file (to be written, or read).
        path: PathBuf,
        /// Every violation, `"<JSON pointer>: <message>"`.
        errors: Vec<String>,
    },
    /// The evidence folder contains something netprobe never writes (symlink, socket, …).
    #[error(
        "{0} is neither a regular file nor a directory; evidence folders hold only files \
         netprobe wrote — remove it or use a fresh folder"
    )]
    NotAFile(PathBuf),
}

pub(super) fn io_err<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> EvidenceError + 'a {
    move |source| EvidenceError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// What to check after a failed `action`: free space matters only to what writes.
fn io_hint(action: &str) -> &'static str {
    if matches!(action, "read" | "open" | "list" | "inspect" | "resolve") {
        "check the path and its permissions"
    } else {
        "check the path, free space and permissions"
    }
}
