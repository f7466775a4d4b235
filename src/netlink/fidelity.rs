//! The state comparison a restore's fidelity gate needs: besides "byte-equal or not", name
//! what makes a restored namespace wrong — CRIU's network lock left behind, and address flags
//! that changed (an IPv6 address that became `deprecated`, or stays `tentative`).

use super::netfilter::criu_lock;
use super::state::NetState;

/// Why `after` (e.g. the namespace after a slot restore) is not a faithful copy of `before`
/// (the state recorded at snapshot), one sentence each, most specific first:
/// - `"CRIU's network lock left in the namespace: nftables: chain CRIU in table ip filter"`
///   for every part of CRIU's lock in `after` ([`criu_lock`]);
/// - `"address fd00::1/64 on ifindex 3: flag deprecated appeared"` (or `disappeared`) for an
///   address present in both whose compared flags differ;
/// - then every other line of [`NetState::diff`] (`"- routes: {…}"`, `"+ links: {…}"`).
///
/// Empty exactly when the two states are equal and `after` holds no CRIU lock.
pub fn fidelity_failures(before: &NetState, after: &NetState) -> Vec<String> {
    let mut out: Vec<String> = criu_lock(&after.netfilter)
        .into_iter()
        .map(|l| format!("CRIU's network lock left in the namespace: {l}"))
        .collect();
    for b in &before.addresses {
        let Some(a) = after.addresses.iter().find(|a| {
            a.ifindex == b.ifindex
                && a.family == b.family
                && a.address == b.address
                && a.prefix_len == b.prefix_len
        }) else {
            continue;
        };
        let name = format!(
            "address {}/{} on ifindex {}",
            b.address, b.prefix_len, b.ifindex
        );
        for f in a.flags.iter().filter(|f| !b.flags.contains(f)) {
            out.push(format!("{name}: flag {f} appeared"));
        }
        for f in b.flags.iter().filter(|f| !a.flags.contains(f)) {
            out.push(format!("{name}: flag {f} disappeared"));
        }
    }
    let named_lock = !out.is_empty();
    for line in before.diff(after) {
        // The lock's lines are already named above.
        if named_lock && line.contains("CRIU") {
            continue;
        }
        out.push(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::AddrState;

    fn addr(flags: &[&str]) -> AddrState {
        AddrState {
            ifindex: 3,
            family: "inet6".into(),
            address: "fd14:214::1".into(),
            prefix_len: 64,
            scope: "global".into(),
            label: None,
            flags: flags.iter().map(|f| f.to_string()).collect(),
        }
    }

    #[test]
    fn names_the_lock_and_the_flag() {
        let mut before = NetState::default();
        before.addresses.push(addr(&["permanent"]));
        assert!(fidelity_failures(&before, &before.clone()).is_empty());
        let mut after = before.clone();
        after.addresses[0] = addr(&["deprecated", "permanent"]);
        after.netfilter.iptables = vec![
            "*filter".into(),
            ":INPUT ACCEPT".into(),
            ":CRIU -".into(),
            "-A CRIU -j DROP".into(),
            "COMMIT".into(),
        ];
        let f = fidelity_failures(&before, &after);
        assert_eq!(
            f[0],
            "CRIU's network lock left in the namespace: iptables: chain CRIU in table filter"
        );
        assert_eq!(
            f[1],
            "address fd14:214::1/64 on ifindex 3: flag deprecated appeared"
        );
        assert!(f.iter().any(|l| l.starts_with("- addresses:")), "{f:?}");
        assert!(!f[2..].iter().any(|l| l.contains("CRIU")), "{f:?}");
    }
}
