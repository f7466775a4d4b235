//! What to run next: the `netprobe slot` commands that refusals, advice, notes and failed gates
//! tell the user to run. Every such text is built here, so the command's spelling (back-quoted,
//! `--slot N --state-dir DIR` with DIR shell-quoted) is written once.

use super::resources::slot_dir::SlotPaths;
use std::path::Path;

/// The slot driver's command as typed: `netprobe slot` (also the noun in "a netprobe slot").
pub(crate) const COMMAND: &str = "netprobe slot";

/// The way out of a slot that cannot go on, without its flags: "`netprobe slot cleanup` this
/// slot and provision another".
pub(crate) const CLEANUP_AND_PROVISION_ANOTHER: &str =
    "`netprobe slot cleanup` this slot and provision another";

/// `` `netprobe slot VERB` `` (back-quoted, no flags), e.g. "run `netprobe slot status` again".
pub(crate) fn bare(verb: &str) -> String {
    format!("`{COMMAND} {verb}`")
}

/// `--slot N --state-dir DIR`, DIR shell-quoted ([`crate::shell::arg`]).
pub(crate) fn flags(slot: u32, state_dir: &Path) -> String {
    format!("--slot {slot} --state-dir {}", crate::shell::arg(state_dir))
}

/// `` `netprobe slot VERB --slot N --state-dir DIR` `` for slot `slot` in `state_dir`
/// (back-quoted, DIR shell-quoted).
pub(crate) fn command(verb: &str, slot: u32, state_dir: &Path) -> String {
    format!("`{COMMAND} {verb} {}`", flags(slot, state_dir))
}

/// [`command`] for the slot at `p`.
pub(crate) fn on_slot(verb: &str, p: &SlotPaths) -> String {
    command(verb, p.slot, &p.state_dir)
}

/// "`netprobe slot status --slot N --state-dir DIR` gives the next step" for the slot at `p`.
pub(crate) fn status_gives_next_step(p: &SlotPaths) -> String {
    format!("{} gives the next step", on_slot("status", p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_spelled_once() {
        let p = SlotPaths::new(Path::new("/var/lib/np"), 3);
        assert_eq!(
            on_slot("reset", &p),
            "`netprobe slot reset --slot 3 --state-dir /var/lib/np`"
        );
        assert_eq!(bare("status"), "`netprobe slot status`");
        assert_eq!(
            status_gives_next_step(&p),
            "`netprobe slot status --slot 3 --state-dir /var/lib/np` gives the next step"
        );
    }
}
