//! Errors of the slot driver and their exit codes (DESIGN.md section 6).

use std::fmt;
use std::path::PathBuf;

/// What kind of failure a [`SlotError`] is; decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A gate could not prove its fact (exit 1). The slot was left as it was before the
    /// destructive step the gate protects.
    Gate,
    /// Bad command line: unknown or malformed slot number, missing or contradictory flags (exit 2).
    Usage,
    /// The host refused: not root, a CRIU config file present, a prerequisite missing (exit 3).
    HostRefused,
    /// A step could not run (a runtime, CRIU, mount or I/O failure after the gates passed) (exit 4).
    CouldNotRun,
}

/// A failed slot verb. `Display` names the slot and, for gate failures, the gate.
///
/// Source: produced by [`crate::slot::run_verb`]; the CLI maps it to an exit code with
/// [`SlotError::exit_code`].
#[derive(Debug, Clone)]
pub struct SlotError {
    /// The kind, which decides the exit code.
    pub kind: ErrorKind,
    /// The slot as given on the command line (raw text, possibly malformed).
    pub slot: String,
    /// The gate that failed (for [`ErrorKind::Gate`] and [`ErrorKind::HostRefused`] gates), or
    /// the step that could not run (for [`ErrorKind::CouldNotRun`]).
    pub gate: Option<Box<str>>,
    /// One or more lines for people: the fact that could not be proven and what was observed.
    pub message: String,
    /// A diff (network state recorded vs observed) when the network-fidelity gate failed.
    pub diff: Option<Box<str>>,
    /// The evidence folder of this verb, when one was written.
    pub evidence: Option<Box<std::path::Path>>,
}

impl SlotError {
    /// A usage error (exit 2).
    pub fn usage(slot: &str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Usage, slot, None, message)
    }

    /// A gate failure (exit 1) naming the gate.
    pub fn gate(slot: &str, gate: &str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Gate, slot, Some(gate), message)
    }

    /// A host refusal (exit 3) naming the gate or prerequisite.
    pub fn host(slot: &str, gate: &str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::HostRefused, slot, Some(gate), message)
    }

    /// A step that could not run (exit 4) naming the step.
    pub fn run(slot: &str, step: &str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::CouldNotRun, slot, Some(step), message)
    }

    fn new(kind: ErrorKind, slot: &str, gate: Option<&str>, message: impl Into<String>) -> Self {
        SlotError {
            kind,
            slot: slot.to_string(),
            gate: gate.map(Box::from),
            message: message.into(),
            diff: None,
            evidence: None,
        }
    }

    /// Attaches the network-state diff (recorded vs observed).
    pub fn with_diff(mut self, diff: String) -> Self {
        self.diff = Some(diff.into_boxed_str());
        self
    }

    /// Attaches the evidence folder of the verb, unless one is already attached.
    pub fn with_evidence(mut self, dir: PathBuf) -> Self {
        if self.evidence.is_none() {
            self.evidence = Some(dir.into_boxed_path());
        }
        self
    }

    /// The process exit code: 1 gate failed, 2 usage, 3 host refused, 4 could not run.
    pub fn exit_code(&self) -> i32 {
        match self.kind {
            ErrorKind::Gate => 1,
            ErrorKind::Usage => 2,
            ErrorKind::HostRefused => 3,
            ErrorKind::CouldNotRun => 4,
        }
    }

    /// The error as JSON (`kind`, `slot`, `gate`, `message`, `diff`, `evidence`, `exit_code`),
    /// for `--json` output.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": match self.kind {
                ErrorKind::Gate => "gate",
                ErrorKind::Usage => "usage",
                ErrorKind::HostRefused => "host-refused",
                ErrorKind::CouldNotRun => "could-not-run",
            },
            "slot": self.slot,
            "gate": self.gate,
            "message": self.message,
            "diff": self.diff,
            "evidence": self.evidence,
            "exit_code": self.exit_code(),
        })
    }
}

impl fmt::Display for SlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let slot = if self.slot.is_empty() {
            "?"
        } else {
            &self.slot
        };
        match (&self.kind, &self.gate) {
            (ErrorKind::Gate, Some(g)) => {
                write!(f, "slot {slot}: gate `{g}` failed: {}", self.message)?
            }
            (ErrorKind::HostRefused, Some(g)) => write!(
                f,
                "slot {slot}: host refused (gate `{g}`): {}",
                self.message
            )?,
            (ErrorKind::CouldNotRun, Some(g)) => {
                write!(f, "slot {slot}: step `{g}` could not run: {}", self.message)?
            }
            (ErrorKind::Usage, _) => write!(f, "slot {slot}: usage: {}", self.message)?,
            (_, None) => write!(f, "slot {slot}: {}", self.message)?,
        }
        if let Some(d) = &self.diff {
            write!(
                f,
                "\nnetwork state diff (- recorded at snapshot, + observed now):\n{d}"
            )?;
        }
        if let Some(e) = &self.evidence {
            write!(f, "\nevidence: {}", e.display())?;
        }
        Ok(())
    }
}

impl std::error::Error for SlotError {}
