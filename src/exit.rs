//! The exit class of every netprobe command: the one place the exit-code table of docs/REFERENCE.md lives
//! in code. The probe ladder ([`crate::probe::runner::LadderError`]), the slot driver
//! ([`crate::slot::SlotError`]) and the CLI all map their outcome to an [`ExitClass`].
//!
//! | code | class | meaning |
//! |---|---|---|
//! | 0 | [`ExitClass::Ok`] | ran; with `--expect`, the verdict matched; `verify` reproduced the result |
//! | 1 | [`ExitClass::Gate`] | the verdict differs from `--expect`; a slot gate failed; `verify` did not reproduce; `diff` saw the verdict change |
//! | 2 | [`ExitClass::Usage`] | bad arguments, unknown or out-of-order phase, an existing evidence folder (or one inside a folder netprobe wrote), an evidence folder netprobe cannot write into (also a full disk before the result, and a slot verb that could not write all of its own record), a malformed slot number, a folder without a readable result |
//! | 3 | [`ExitClass::HostRefused`] | not root, CRIU config file present, missing prerequisite, `criu check` fails, a leftover container of the same id |
//! | 4 | [`ExitClass::CouldNotRun`] | a phase could not run (its evidence is kept); a slot verb could not run |
//! | 128+N | — | interrupted by signal N (see [`crate::ns::cleanup`]) |

use serde::{Deserialize, Serialize};

/// The class of a command's outcome, which decides its exit code (docs/REFERENCE.md's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExitClass {
    /// Exit 0: ran and (with `--expect`) matched.
    Ok,
    /// Exit 1: a gate could not prove its fact, a verdict differs from `--expect`, or `verify`
    /// did not reproduce. Written as `gate` in slot error JSON.
    Gate,
    /// Exit 2: bad command line or input.
    Usage,
    /// Exit 3: the host refused (not root, CRIU config file, missing prerequisite).
    HostRefused,
    /// Exit 4: a step or phase could not run.
    CouldNotRun,
}

impl ExitClass {
    /// The process exit code: 0, 1, 2, 3 or 4.
    pub fn code(self) -> u8 {
        match self {
            ExitClass::Ok => 0,
            ExitClass::Gate => 1,
            ExitClass::Usage => 2,
            ExitClass::HostRefused => 3,
            ExitClass::CouldNotRun => 4,
        }
    }

    /// The class as written in JSON (`ok`, `gate`, `usage`, `host-refused`, `could-not-run`).
    pub fn as_str(self) -> &'static str {
        match self {
            ExitClass::Ok => "ok",
            ExitClass::Gate => "gate",
            ExitClass::Usage => "usage",
            ExitClass::HostRefused => "host-refused",
            ExitClass::CouldNotRun => "could-not-run",
        }
    }
}

impl From<ExitClass> for std::process::ExitCode {
    fn from(c: ExitClass) -> Self {
        std::process::ExitCode::from(c.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_readme_table() {
        let all = [
            ExitClass::Ok,
            ExitClass::Gate,
            ExitClass::Usage,
            ExitClass::HostRefused,
            ExitClass::CouldNotRun,
        ];
        let codes: Vec<u8> = all.iter().map(|c| c.code()).collect();
        assert_eq!(codes, [0, 1, 2, 3, 4]);
        assert_eq!(
            serde_json::to_value(ExitClass::HostRefused).unwrap(),
            "host-refused"
        );
        for c in all {
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
    }
}
