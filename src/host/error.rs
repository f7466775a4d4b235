//! [`HostError`]: why netprobe refuses to run on this host (the CLI maps it to exit code 3).

use std::path::PathBuf;

/// Why the host is refused. Every message names the input and the way out.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The effective uid is not 0.
    #[error("netprobe needs root (namespaces, CRIU): run it with sudo")]
    NotRoot,
    /// One or more CRIU configuration files are present (or `$CRIU_CONFIG_FILE` is set).
    #[error("{}", config_message(.files))]
    CriuConfigFile {
        /// The files, in the order CRIU would read them; a `$CRIU_CONFIG_FILE` entry may not exist.
        files: Vec<PathBuf>,
    },
    /// A bare name is not in `$PATH`, or a path does not exist.
    #[error(
        "{what} {name:?} not found ({searched}): install it (run: sudo bash host/setup.sh) or pass its path"
    )]
    NotFound {
        /// `CRIU` or `OCI runtime`.
        what: String,
        /// The name or path as given.
        name: PathBuf,
        /// Where it was looked for (`no such file` or the `$PATH` searched).
        searched: String,
    },
    /// The path exists but is not a regular file (directory, device, …).
    #[error("{what} {path} is not a regular file: pass the path of the executable itself")]
    NotRegularFile {
        /// `CRIU` or `OCI runtime`.
        what: String,
        /// The resolved path.
        path: PathBuf,
    },
    /// The path is a regular file that is no program at all: neither an ELF executable nor a
    /// `#!` script (e.g. `/etc/passwd`). Never advise making it executable.
    #[error(
        "{what} {path} is not an executable program (neither an ELF binary nor a #! script; it starts with {start:?}): pass the path of the {what} binary (`netprobe doctor` lists what it finds)"
    )]
    NotAProgram {
        /// `CRIU` or `OCI runtime`.
        what: String,
        /// The resolved path.
        path: PathBuf,
        /// Its first bytes (at most 16), lossy UTF-8.
        start: String,
    },
    /// The path is a program (ELF or `#!`) without any execute bit.
    #[error("{what} {path} is not executable: chmod +x {path} or pass another binary")]
    NotExecutable {
        /// `CRIU` or `OCI runtime`.
        what: String,
        /// The resolved path.
        path: PathBuf,
    },
    /// The binary could not be read (hash) or run (`--version`).
    #[error("{what} {path}: {detail}")]
    Unusable {
        /// `CRIU` or `OCI runtime`.
        what: String,
        /// The resolved path.
        path: PathBuf,
        /// What failed, with the OS error.
        detail: String,
    },
    /// `--version` output was not recognised.
    #[error(
        "{path} does not look like {article} {what} (its --version printed: {output:?}); pass the path of the {what} binary (`netprobe doctor` lists what it finds; run: sudo bash host/setup.sh)"
    )]
    NotRecognised {
        /// `CRIU` or `OCI runtime`.
        what: String,
        /// `a` or `an`.
        article: String,
        /// The resolved path.
        path: PathBuf,
        /// The verbatim output (stdout then stderr), truncated to 400 characters.
        output: String,
    },
    /// `criu check` failed.
    #[error(
        "criu check failed for {path} ({status}); its output: {tail} (`{path} check -v4` lists every check)"
    )]
    CriuCheckFailed {
        /// The CRIU binary.
        path: PathBuf,
        /// `exit code N`, `signal N`, or why it could not run.
        status: String,
        /// The last lines of its output.
        tail: String,
    },
}

fn config_message(files: &[PathBuf]) -> String {
    let mut parts = Vec::new();
    for f in files {
        let d = f.display();
        let from_env = std::env::var_os(crate::criu::CRIU_CONFIG_ENV)
            .is_some_and(|v| std::path::Path::new(&v) == f.as_path());
        if f.exists() && !from_env {
            parts.push(format!(
                "CRIU config file {d} is present: move it away, e.g. mv {d} {d}.disabled: \
                 CRIU config files silently change checkpoint behaviour"
            ));
        } else {
            parts.push(format!(
                "CRIU_CONFIG_FILE={d} is set in the environment: unset it (env -u CRIU_CONFIG_FILE), \
                 CRIU config files silently change checkpoint behaviour"
            ));
        }
    }
    if parts.is_empty() {
        "CRIU config files present".to_string()
    } else {
        parts.join("; ")
    }
}
