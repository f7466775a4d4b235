//! The gate framework: every gate names the fact it must prove, whether it proved it, and what
//! was observed. Any unproven gate fails the verb closed before the destructive step it protects.

use super::error::{ErrorKind, SlotError};
use serde::{Deserialize, Serialize};

/// One evaluated gate, as written to `gates.json` in the verb's evidence folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gate {
    /// Stable gate name, e.g. `ownership-marker`, `holder-identity`, `net-fidelity`.
    pub name: String,
    /// The fact the gate must prove, as a sentence.
    pub fact: String,
    /// True only when the fact was proven. Anything that could not be read is `false`.
    pub proven: bool,
    /// What was observed (values, paths, hashes).
    pub detail: String,
    /// True when an unproven gate stops the verb (always, except facts recorded by `cleanup`
    /// and `status` that protect no step those verbs take).
    pub blocking: bool,
    /// Exit class on failure: `gate` (exit 1) or `host` (exit 3).
    pub class: String,
}

/// The gates evaluated so far by one verb, in order.
#[derive(Debug, Default, Clone, Serialize)]
pub struct GateLog {
    /// The gates, in evaluation order.
    pub gates: Vec<Gate>,
}

impl GateLog {
    /// Records a blocking gate; returns an error naming `slot` and the gate when not proven.
    ///
    /// Errors: [`ErrorKind::Gate`] (exit 1) when `proven` is false.
    pub fn check(
        &mut self,
        slot: &str,
        name: &str,
        fact: &str,
        proven: bool,
        detail: impl Into<String>,
    ) -> Result<(), SlotError> {
        self.push(
            slot,
            name,
            fact,
            proven,
            detail.into(),
            true,
            ErrorKind::Gate,
        )
    }

    /// Records a blocking host gate (exit 3 when not proven, e.g. a CRIU config file present).
    ///
    /// Errors: [`ErrorKind::HostRefused`] when `proven` is false.
    pub fn check_host(
        &mut self,
        slot: &str,
        name: &str,
        fact: &str,
        proven: bool,
        detail: impl Into<String>,
    ) -> Result<(), SlotError> {
        self.push(
            slot,
            name,
            fact,
            proven,
            detail.into(),
            true,
            ErrorKind::HostRefused,
        )
    }

    /// Records a non-blocking fact (used by `cleanup` and `status` for facts that protect no
    /// step they take). Never fails.
    pub fn record(&mut self, name: &str, fact: &str, proven: bool, detail: impl Into<String>) {
        self.gates.push(Gate {
            name: name.into(),
            fact: fact.into(),
            proven,
            detail: detail.into(),
            blocking: false,
            class: "gate".into(),
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        slot: &str,
        name: &str,
        fact: &str,
        proven: bool,
        detail: String,
        blocking: bool,
        kind: ErrorKind,
    ) -> Result<(), SlotError> {
        self.gates.push(Gate {
            name: name.into(),
            fact: fact.into(),
            proven,
            detail: detail.clone(),
            blocking,
            class: if kind == ErrorKind::HostRefused {
                "host".into()
            } else {
                "gate".into()
            },
        });
        if proven {
            return Ok(());
        }
        let mut e = SlotError::gate(slot, name, format!("{fact} — not proven: {detail}"));
        e.kind = kind;
        Err(e)
    }

    /// The gate named `name`, if evaluated.
    pub fn get(&self, name: &str) -> Option<&Gate> {
        self.gates.iter().find(|g| g.name == name)
    }

    /// True when every blocking gate evaluated so far is proven.
    pub fn all_proven(&self) -> bool {
        self.gates.iter().filter(|g| g.blocking).all(|g| g.proven)
    }
}
