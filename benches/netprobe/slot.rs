//! Section `slot`: the slot driver's `restore` and `reset` against a bare `runc restore` of the
//! same images (gates included on netprobe's side).
//!
//! Pending: the slot driver (`netprobe::slot::run_verb`, `netprobe slot …`) is not in `main`
//! yet. Until it is, this section asks the built binary and reports that it cannot run.

use crate::Config;
use crate::stats::note;
use std::process::Command;

/// Runs the section: today only detects whether the built binary has the slot driver.
pub fn run(_cfg: &Config) -> Result<(), String> {
    let exe = crate::netprobe_exe();
    let tmp = tempfile::Builder::new()
        .prefix("netprobe-bench-slot-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let o = Command::new(&exe)
        .args(["slot", "status", "--slot", "1", "--state-dir"])
        .arg(tmp.path().join("state"))
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    let stderr = String::from_utf8_lossy(&o.stderr);
    if stderr.contains("not in this build") {
        note(
            "slot",
            "NOT MEASURED: the slot driver is not in this build (`netprobe slot` says: \
             \"the slot driver is not in this build yet\"); restore/reset vs bare \
             `runc restore` pending",
        );
        return Ok(());
    }
    Err(format!(
        "the slot driver exists now (status exit {}): this section still needs its \
         restore/reset vs `runc restore` comparison",
        o.status
    ))
}
