//! A cgroup's processes: the one reader of `cgroup.procs` (v1 and v2 alike: one pid per line,
//! in no set order, possibly repeated).

use std::path::{Path, PathBuf};

/// The file in a cgroup folder that lists its processes.
pub const PROCS_FILE: &str = "cgroup.procs";

/// Why a cgroup's `cgroup.procs` could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum ProcsError {
    /// The file could not be read (a missing folder included: see [`read_or_none_if_gone`]).
    #[error("cannot read {}: {source}", file.display())]
    Read {
        /// `<dir>/cgroup.procs`.
        file: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// An entry is not a pid.
    #[error("{}: {entry:?}: {source}", file.display())]
    Parse {
        /// `<dir>/cgroup.procs`.
        file: PathBuf,
        /// The entry as read.
        entry: String,
        /// Why it is not a pid.
        #[source]
        source: std::num::ParseIntError,
    },
}

/// The pids listed in `dir/cgroup.procs`, in the file's order.
///
/// Errors: [`ProcsError::Read`] when the file cannot be read (also when `dir` does not exist),
/// [`ProcsError::Parse`] for an entry that is not a pid.
pub fn read(dir: &Path) -> Result<Vec<i32>, ProcsError> {
    let file = dir.join(PROCS_FILE);
    match std::fs::read_to_string(&file) {
        Ok(text) => parse(&text, &file),
        Err(source) => Err(ProcsError::Read { file, source }),
    }
}

/// [`read`], but a folder that does not exist (a cgroup already removed) holds no process:
/// `Ok(empty)`. A `cgroup.procs` missing from a folder that exists is still an error.
pub fn read_or_none_if_gone(dir: &Path) -> Result<Vec<i32>, ProcsError> {
    match read(dir) {
        Err(ProcsError::Read { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound && !dir.exists() =>
        {
            Ok(Vec::new())
        }
        r => r,
    }
}

/// The pids listed in `dir/cgroup.procs` for a best-effort sweep: none when the file cannot be
/// read, entries that are not pids skipped.
pub fn read_lenient(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join(PROCS_FILE))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The pids in `text`, the contents of `file` (named in errors).
fn parse(text: &str, file: &Path) -> Result<Vec<i32>, ProcsError> {
    text.split_whitespace()
        .map(|p| {
            p.parse::<i32>().map_err(|source| ProcsError::Parse {
                file: file.to_path_buf(),
                entry: p.to_string(),
                source,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pids_and_names_the_file_in_errors() {
        let d = tempfile::tempdir().unwrap();
        assert!(
            read_or_none_if_gone(&d.path().join("gone"))
                .unwrap()
                .is_empty()
        );
        assert!(matches!(
            read(&d.path().join("gone")),
            Err(ProcsError::Read { .. })
        ));
        std::fs::write(d.path().join(PROCS_FILE), "31493\n31764\n").unwrap();
        assert_eq!(read(d.path()).unwrap(), vec![31493, 31764]);
        assert_eq!(read_lenient(d.path()), vec![31493, 31764]);
        std::fs::write(d.path().join(PROCS_FILE), "x\n7\n").unwrap();
        let e = read(d.path()).unwrap_err().to_string();
        assert!(
            e.ends_with("cgroup.procs: \"x\": invalid digit found in string"),
            "{e}"
        );
        assert_eq!(read_lenient(d.path()), vec![7]);
    }
}
