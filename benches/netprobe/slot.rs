//! Section `slot`: the slot driver's `restore` and `reset` against a bare `runc restore` of the
//! same images.

use crate::Config;
use crate::stats::note;

/// Runs the section.
pub fn run(_cfg: &Config) -> Result<(), String> {
    note("slot", "slot driver not available yet");
    Ok(())
}
