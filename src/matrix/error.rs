//! The errors of the matrix module besides [`super::MatrixError`]: a `matrix.json` that cannot
//! be loaded, `netprobe matrix` arguments that do not hold, a part stopped at its time bound,
//! and a part folder that names no binary.

use crate::evidence::BoundedReadError;
use std::path::PathBuf;

/// Why a matrix folder's `matrix.json` cannot be loaded ([`super::model::load_matrix`]); each
/// text names the file.
#[derive(Debug, thiserror::Error)]
pub enum MatrixLoadError {
    /// No readable `matrix.json`, and the folder's `interrupted.txt` says a signal stopped it.
    #[error(
        "{}: {source}: {} is a matrix that was interrupted ({} says: {first_line}), so it has no result; pass a matrix folder that finished",
        file.display(), dir.display(), note.display()
    )]
    Interrupted {
        /// `<dir>/matrix.json`.
        file: PathBuf,
        /// The matrix folder.
        dir: PathBuf,
        /// Its `interrupted.txt`.
        note: PathBuf,
        /// The note's first line.
        first_line: String,
        /// The read error.
        #[source]
        source: BoundedReadError,
    },
    /// No readable `matrix.json`, and the folder's `incomplete.txt` says it did not finish.
    #[error(
        "{}: {source}: {} is a matrix that did not finish ({} says: {first_line}), so it has no result; pass a matrix folder that finished",
        file.display(), dir.display(), note.display()
    )]
    Unfinished {
        /// `<dir>/matrix.json`.
        file: PathBuf,
        /// The matrix folder.
        dir: PathBuf,
        /// Its `incomplete.txt`.
        note: PathBuf,
        /// The note's first line.
        first_line: String,
        /// The read error.
        #[source]
        source: BoundedReadError,
    },
    /// No readable `matrix.json` (missing, too large, a special file).
    #[error("{}: {source} (is {} a matrix folder?)", file.display(), dir.display())]
    Unreadable {
        /// `<dir>/matrix.json`.
        file: PathBuf,
        /// The folder given.
        dir: PathBuf,
        /// The read error.
        #[source]
        source: BoundedReadError,
    },
    /// `matrix.json` is not JSON.
    #[error("{}: not JSON: {source}", file.display())]
    NotJson {
        /// The file.
        file: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// `matrix.json` violates `matrix.schema.json`.
    #[error("{}: {}", file.display(), problems.join("; "))]
    Schema {
        /// The file.
        file: PathBuf,
        /// Each violation.
        problems: Vec<String>,
    },
    /// `matrix.json` validates but is not a matrix result netprobe reads.
    #[error("{}: {source}", file.display())]
    Shape {
        /// The file.
        file: PathBuf,
        /// The deserialiser's error.
        #[source]
        source: serde_json::Error,
    },
}

/// A verdict name that is none of [`crate::evidence::result::VerdictCode::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown verdict {given:?}; one of: {known}")]
pub struct UnknownVerdict {
    /// The name given.
    pub given: String,
    /// The known names, comma-separated.
    pub known: String,
}

impl UnknownVerdict {
    /// The error for `given`, listing every verdict name.
    pub fn new(given: &str) -> Self {
        let all: Vec<&str> = crate::evidence::result::VerdictCode::ALL
            .iter()
            .map(|v| v.as_str())
            .collect();
        UnknownVerdict {
            given: given.to_string(),
            known: all.join(", "),
        }
    }
}

/// Why `netprobe matrix`'s arguments do not make a matrix ([`super::cli::options`]): exit 2.
#[derive(Debug, thiserror::Error)]
pub enum MatrixArgsError {
    /// The `--config` file cannot be read.
    #[error(
        "--config {}: {source}; give the matrix's TOML file (a few KiB; at most 1 MiB)",
        path.display()
    )]
    ConfigRead {
        /// The file.
        path: PathBuf,
        /// The read error.
        #[source]
        source: BoundedReadError,
    },
    /// The `--config` file is not the matrix TOML.
    #[error("--config {}: {source}", path.display())]
    ConfigParse {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: toml::de::Error,
    },
    /// An expectation names an unknown verdict.
    #[error(transparent)]
    Verdict(#[from] UnknownVerdict),
    /// A runtime or CRIU is given twice.
    #[error(
        "{flag} {} is given twice (the same file after resolving links, counting the command line and --config together): give each binary once; two builds of one version go in as two different files",
        path.display()
    )]
    Duplicate {
        /// `--runtime` or `--criu`.
        flag: &'static str,
        /// The second mention.
        path: PathBuf,
    },
    /// An expectation's runtime is none of the matrix's runtimes.
    #[error(
        "expectation {runtime}={verdict}: {runtime:?} names no runtime of this matrix (runtimes: {given}); give a runtime's path as given or its file name, or `*` for all"
    )]
    UnknownRuntime {
        /// The runtime named.
        runtime: String,
        /// The expected verdict's name.
        verdict: &'static str,
        /// The matrix's runtimes, comma-separated, or `none`.
        given: String,
    },
}

/// How a part that outlived its time bound was stopped, or why waiting for it failed.
#[derive(Debug, thiserror::Error)]
pub enum PartStop {
    /// The part ended in time, but `wait` failed.
    #[error("it ended, but waiting for it failed: {0}")]
    WaitFailed(#[source] std::io::Error),
    /// SIGTERM, and it exited `ms` later.
    #[error("SIGTERM; it exited after {ms} ms")]
    Terminated {
        /// Milliseconds from SIGTERM to its exit.
        ms: u128,
    },
    /// SIGTERM, no exit within `waited_s`, then SIGKILL.
    #[error("SIGTERM; no exit within {waited_s} s, then SIGKILL")]
    Killed {
        /// Seconds waited after SIGTERM.
        waited_s: u64,
    },
    /// SIGKILL at once: no pidfd to send SIGTERM through.
    #[error("SIGKILL (no pidfd to send SIGTERM through)")]
    KilledWithoutPidfd,
}

/// A part folder whose name names no runtime and CRIU of `matrix.json`'s binaries.
#[derive(Debug, thiserror::Error)]
#[error("part {folder}: its folder name names no runtime and CRIU of matrix.json's binaries")]
pub struct UnknownPartFolder {
    /// The part's folder name.
    pub folder: String,
}
