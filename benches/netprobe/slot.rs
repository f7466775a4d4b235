//! Section `slot`: the slot driver's `restore` and `reset` against a bare `runc restore` of the
//! same images (gates included on netprobe's side).
//!
//! Not implemented yet: the slot driver reached `main` (772fcf2) after this bench's final run.
//! To do: provision (`--no-probe-gate`) + snapshot a slot in a temp state dir, then alternate
//! `netprobe slot restore|reset` with `runc --root R restore --image-path <slot images>
//! --bundle <slot bundle> --detach ID` (+ kill/delete between runs, untimed), cleanup on drop.

use crate::Config;
use crate::stats::note;

/// Runs the section: reports that it is not implemented yet.
pub fn run(_cfg: &Config) -> Result<(), String> {
    note(
        "slot",
        "NOT MEASURED: restore/reset vs bare `runc restore` is not implemented yet (the slot \
         driver landed in main after the bench's final run)",
    );
    Ok(())
}
