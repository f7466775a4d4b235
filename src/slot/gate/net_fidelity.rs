//! The `net-fidelity` comparison, pure: the network state recorded at snapshot against the one
//! observed after a restore. It fails on different canonical bytes and on what
//! [`crate::netlink::fidelity::fidelity_failures`] names even when the bytes agree (CRIU's
//! network lock left in the namespace, address flags that changed); the diff is printed as
//! field paths the way `run` prints its netstate assertions
//! ([`crate::assert::json_field_diff`]: `/links/2/mtu: 1789 → 1500`).

use crate::netlink::NetState;
use crate::netlink::fidelity::fidelity_failures;

/// Why the observed state is not the recorded one: the gate detail (the named failures first,
/// then how many fields differ) and the field-path diff (one line each, `\n`-terminated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mismatch {
    /// The `net-fidelity` gate's detail.
    pub detail: String,
    /// The field-path diff, saved as `netstate-diff.txt` and attached to the error.
    pub diff: String,
}

/// Compares `recorded` (the canonical JSON of `netstate.json`) with `observed`, whose
/// canonical JSON is `observed_json`. `Ok(())` exactly when the bytes are equal and
/// [`fidelity_failures`] names nothing.
///
/// Errors: a [`Mismatch`]; a `recorded` that is not a NetState is one (named in the detail).
pub(crate) fn compare(
    recorded: &str,
    observed: &NetState,
    observed_json: &str,
) -> Result<(), Mismatch> {
    let rec = match NetState::from_json(recorded) {
        Ok(r) => r,
        Err(e) => {
            return Err(Mismatch {
                detail: format!("recorded netstate.json is not a NetState: {e}"),
                diff: String::new(),
            });
        }
    };
    // The named failures (lock, flags); the plain `- kind`/`+ kind` lines are replaced by the
    // field-path diff below.
    let named: Vec<String> = fidelity_failures(&rec, observed)
        .into_iter()
        .filter(|l| !l.starts_with("- ") && !l.starts_with("+ "))
        .collect();
    if recorded == observed_json && named.is_empty() {
        return Ok(());
    }
    let old: serde_json::Value = serde_json::from_str(recorded).unwrap_or_default();
    let new: serde_json::Value = serde_json::from_str(observed_json).unwrap_or_default();
    let fields = crate::assert::json_field_diff(&old, &new);
    let mut detail = named.join("; ");
    if !detail.is_empty() {
        detail.push_str("; ");
    }
    detail.push_str(&format!(
        "{} bytes recorded vs {} observed, {} field(s) differ; diff saved as netstate-diff.txt",
        recorded.len(),
        observed_json.len(),
        fields.len()
    ));
    let diff = if fields.is_empty() {
        "(same fields, different bytes)\n".to_string()
    } else {
        fields.join("\n") + "\n"
    };
    Err(Mismatch { detail, diff })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::{AddrState, LinkState};

    fn state() -> NetState {
        let mut s = NetState::default();
        s.links.push(LinkState {
            ifindex: 1,
            name: "lo".into(),
            link_type: 772,
            flags: 0x49,
            up: true,
            mtu: Some(65536),
            address: None,
            kind: None,
            operstate: Some("unknown".into()),
        });
        s.addresses.push(AddrState {
            ifindex: 1,
            family: "inet6".into(),
            address: "fd14:214::1".into(),
            prefix_len: 64,
            scope: "global".into(),
            label: None,
            flags: vec!["permanent".into()],
        });
        s
    }

    #[test]
    fn equal_states_pass() {
        let s = state();
        let j = s.to_canonical_json();
        assert_eq!(compare(&j, &s, &j), Ok(()));
    }

    #[test]
    fn diff_is_field_paths_not_json_lines() {
        let rec = state();
        let mut obs = rec.clone();
        obs.links[0].mtu = Some(1500);
        let m = compare(&rec.to_canonical_json(), &obs, &obs.to_canonical_json()).unwrap_err();
        assert_eq!(m.diff, "/links/0/mtu: 65536 → 1500\n");
        assert!(
            !m.diff.contains("+ ") && !m.diff.contains("- "),
            "{}",
            m.diff
        );
        assert!(m.detail.contains("1 field(s) differ"), "{}", m.detail);
    }

    #[test]
    fn names_a_deprecated_flag_and_a_criu_lock() {
        let rec = state();
        let mut obs = rec.clone();
        obs.addresses[0].flags = vec!["deprecated".into(), "permanent".into()];
        obs.netfilter.iptables = vec![
            "*filter".into(),
            ":INPUT ACCEPT".into(),
            ":CRIU -".into(),
            "-A CRIU -j DROP".into(),
            "COMMIT".into(),
        ];
        let m = compare(&rec.to_canonical_json(), &obs, &obs.to_canonical_json()).unwrap_err();
        assert!(
            m.detail
                .contains("address fd14:214::1/64 on ifindex 1: flag deprecated appeared"),
            "{}",
            m.detail
        );
        assert!(
            m.detail
                .contains("CRIU's network lock left in the namespace"),
            "{}",
            m.detail
        );
        assert!(m.detail.contains("CRIU"), "{}", m.detail);
        assert!(m.diff.contains("/addresses/0/flags"), "{}", m.diff);
    }

    #[test]
    fn a_lock_fails_even_when_recorded_with_it() {
        let mut rec = state();
        rec.netfilter.iptables = vec![
            "*filter".into(),
            ":CRIU -".into(),
            "-A CRIU -j DROP".into(),
            "COMMIT".into(),
        ];
        let j = rec.to_canonical_json();
        let m = compare(&j, &rec, &j).unwrap_err();
        assert!(m.detail.contains("CRIU's network lock"), "{}", m.detail);
        assert_eq!(m.diff, "(same fields, different bytes)\n");
    }

    #[test]
    fn garbage_recorded_is_a_mismatch() {
        let s = state();
        let m = compare("{not json", &s, &s.to_canonical_json()).unwrap_err();
        assert!(m.detail.contains("not a NetState"), "{}", m.detail);
    }
}
