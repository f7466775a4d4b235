//! Sentences a verb prints only from checks that ran: the outcome and the journal of a restore
//! or reset repeat what each of its closing gates recorded — proven, not proven, or "not
//! applicable" (a gate recorded as a fact, e.g. `guest-http` for an image that declares no
//! guest server) — instead of a fixed "container running, guest answers".

use crate::slot::gate::{GateId, GateLog};

/// The gates whose records close a restore or reset, in the order they are printed.
pub(crate) const RESTORED_CLAIMS: [GateId; 3] = [
    GateId::NetFidelity,
    GateId::GuestHttp,
    GateId::ContainerInHolderNetns,
];

/// `"<gate>: <what it recorded>"` for each of `ids`, joined by `"; "`. A proven gate prints its
/// detail; a gate recorded as not proven prints its detail as recorded (so "not applicable: …"
/// reads as such), prefixed `NOT PROVEN` unless it says it is not applicable; a gate that was
/// never evaluated prints `not checked`.
pub(crate) fn gate_claims(gates: &GateLog, ids: &[GateId]) -> String {
    ids.iter()
        .map(|id| match gates.get(*id) {
            None => format!("{}: not checked", id.name()),
            Some(g) if g.proven => format!("{}: {}", g.name, g.detail),
            Some(g) if g.detail.starts_with("not applicable") => {
                format!("{}: {}", g.name, g.detail)
            }
            Some(g) => format!("{}: NOT PROVEN: {}", g.name, g.detail),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_applicable_is_printed_as_such_and_nothing_is_claimed_unchecked() {
        let mut log = GateLog::default();
        log.check("1", GateId::NetFidelity, Ok("12 bytes, sha256 ab".into()))
            .unwrap();
        log.record(
            GateId::GuestHttp,
            Err(
                "not applicable: the image declares no guest server (/etc/netprobe-guest-port)"
                    .into(),
            ),
        );
        let s = gate_claims(&log, &RESTORED_CLAIMS);
        assert_eq!(
            s,
            "net-fidelity: 12 bytes, sha256 ab; guest-http: not applicable: the image declares \
             no guest server (/etc/netprobe-guest-port); container-in-holder-netns: not checked"
        );
        assert!(!s.contains("answers") && !s.contains("running"), "{s}");
        log.record(GateId::ContainerInHolderNetns, Err("status stopped".into()));
        assert!(
            gate_claims(&log, &RESTORED_CLAIMS)
                .ends_with("container-in-holder-netns: NOT PROVEN: status stopped")
        );
    }
}
