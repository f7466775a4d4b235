//! For commands that keep no release registry (the slot verbs: what they start is recorded in
//! the slot and meant to outlive them, and every verb tolerates being killed at any point):
//! SIGINT/SIGTERM/SIGHUP kill the process tree of the step being run, then end netprobe with
//! `128 + signal`. (`netprobe run` uses [`crate::ns::cleanup::install_signal_handler`], which
//! also releases what the run started.)

/// Starts a thread that waits for SIGINT, SIGTERM or SIGHUP; on the first one it kills every
/// running process tree ([`super::kill_running_trees`]), says so on stderr, and exits with
/// `128 + signal` (130, 143, 129).
///
/// Errors: the handler could not be installed (signal-hook's error).
pub fn install_tree_killer() -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::Builder::new()
        .name("netprobe-tree-killer".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                eprintln!("netprobe: interrupted by signal {sig}: stopping the current step");
                for what in super::kill_running_trees() {
                    eprintln!("netprobe:   killed the process tree of {what}");
                }
                std::process::exit(128 + sig);
            }
        })?;
    Ok(())
}
