//! CRIU configuration files: netprobe refuses to run while any is present (ARCHITECTURE.md section 2).

use super::error::HostError;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// System-wide CRIU config files: `/etc/criu/default.conf` is read by every CRIU run (CRIU
/// `criu/config.c`, next to `$HOME/.criu/default.conf`); `/etc/criu/runc.conf` is the file runc
/// asks CRIU to read over RPC unless the `org.criu.config` annotation names another
/// (ARCHITECTURE.md section 2).
pub const SYSTEM_CONFIG_FILES: [&str; 2] = ["/etc/criu/default.conf", "/etc/criu/runc.conf"];

/// The CRIU config files that would affect a run here, in this order: `/etc/criu/default.conf`,
/// `$HOME/.criu/default.conf`, `/etc/criu/runc.conf` (only those that exist), then
/// `$CRIU_CONFIG_FILE` whenever it is set and non-empty, even if it names a missing file (setting
/// it is a request to configure CRIU).
pub fn criu_config_files() -> Vec<PathBuf> {
    criu_config_files_in(
        Path::new("/"),
        std::env::var_os("HOME").as_deref(),
        std::env::var_os(crate::criu::CRIU_CONFIG_ENV).as_deref(),
    )
}

/// As [`criu_config_files`], with the file-system root, `$HOME` and `$CRIU_CONFIG_FILE` given
/// explicitly (for tests): `/etc/...` paths are looked up under `root`, the home file under
/// `home`, and the returned paths are the ones that were checked.
pub fn criu_config_files_in(
    root: &Path,
    home: Option<&OsStr>,
    env_file: Option<&OsStr>,
) -> Vec<PathBuf> {
    let mut candidates = vec![root.join(SYSTEM_CONFIG_FILES[0].trim_start_matches('/'))];
    if let Some(h) = home.filter(|h| !h.is_empty()) {
        candidates.push(Path::new(h).join(".criu/default.conf"));
    }
    candidates.push(root.join(SYSTEM_CONFIG_FILES[1].trim_start_matches('/')));
    let mut found: Vec<PathBuf> = candidates.into_iter().filter(|p| p.exists()).collect();
    if let Some(f) = env_file.filter(|f| !f.is_empty()) {
        found.push(PathBuf::from(f));
    }
    found
}

/// `Ok(())` when [`criu_config_files`] is empty. Errors: [`HostError::CriuConfigFile`] naming
/// every file and how to move it away (`mv F F.disabled`, or unset `$CRIU_CONFIG_FILE`).
pub fn refuse_criu_config() -> Result<(), HostError> {
    refuse_files(criu_config_files())
}

/// `Ok(())` when `files` is empty, else [`HostError::CriuConfigFile`] for them.
pub fn refuse_files(files: Vec<PathBuf>) -> Result<(), HostError> {
    if files.is_empty() {
        Ok(())
    } else {
        Err(HostError::CriuConfigFile { files })
    }
}
