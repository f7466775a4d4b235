//! The built `netprobe` binary as the tests run it: without `CRIU_CONFIG_FILE` (a CRIU config
//! file would be refused), its output kept whole for the assertion messages.

use std::process::{Command, Output};

pub use super::EXE;

/// Runs `netprobe ARGS…` to completion.
pub fn netprobe(args: &[&str]) -> Output {
    Command::new(EXE)
        .args(args)
        .env_remove("CRIU_CONFIG_FILE")
        .output()
        .expect("spawn netprobe")
}

/// Exit code, stdout and stderr of `o`, for an assertion message.
pub fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
