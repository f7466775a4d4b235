//! The full state capture in a real netns with the `rich` content (root only): address flags,
//! rules, the sysctls CRIU saves (read per thread from /proc/sys/net) and the ones it does not,
//! the canonical netfilter ruleset; and the fidelity comparison naming a planted `CRIU` chain
//! and an address that became `deprecated` (what a slot's restore gate must catch).

use crate::common;
use common::netns::{sh, sleeper_in_own_netns};
use netprobe::netlink::fidelity::fidelity_failures;
use netprobe::netlink::{CaptureExtras, NetState, capture_full};
use netprobe::probe::netns_content::{self, NetnsContent, RICH_UNCOVERED_SYSCTLS};
use std::path::Path;

fn full(netns: &Path) -> (NetState, CaptureExtras) {
    netprobe::ns::run_in_netns(netns, || capture_full(5000))
        .expect("setns")
        .expect("capture_full")
}

#[test]
fn rich_state_is_captured_and_the_gate_names_a_planted_lock_and_a_deprecated_address() {
    let _baton = crate::common::baton(module_path!());
    crate::common::require_root();
    let (_child, netns) = sleeper_in_own_netns();
    netns_content::apply(&netns, NetnsContent::Rich).expect("rich content");
    let (s, extras) = full(&netns);
    assert_eq!(
        s.sysctls
            .get("net.ipv4.conf.np0.forwarding")
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(
        s.sysctls
            .get("net.ipv6.conf.default.hop_limit")
            .map(String::as_str),
        Some("55")
    );
    assert_eq!(
        s.sysctls
            .get("net.ipv4.conf.all.log_martians")
            .map(String::as_str),
        Some("1")
    );
    for k in RICH_UNCOVERED_SYSCTLS {
        assert!(!s.sysctls.contains_key(*k), "{k} compared");
        assert!(
            extras.uncovered_sysctls.contains_key(*k),
            "{k} not recorded"
        );
    }
    assert_eq!(
        extras
            .uncovered_sysctls
            .get("net.ipv4.ip_default_ttl")
            .map(String::as_str),
        Some("77")
    );
    assert!(s.rules.iter().any(|r| r.priority == 1000 && r.table == 100));
    assert!(
        s.routes
            .iter()
            .any(|r| r.table == 100 && r.dst == "10.216.0.0/24")
    );
    let g = s
        .addresses
        .iter()
        .find(|a| a.address == "fd14:214::1")
        .unwrap();
    assert_eq!(g.flags, vec!["permanent"]);
    assert!(
        !s.addresses
            .iter()
            .any(|a| a.flags.iter().any(|f| f == "tentative")),
        "DAD not settled: {:?}",
        s.addresses
    );
    assert!(
        s.netfilter
            .nftables
            .contains(&"table inet np14 {".to_string()),
        "{:?}",
        s.netfilter
    );
    assert!(
        s.netfilter
            .iptables
            .contains(&"-A INPUT -s 10.217.0.0/24 -j ACCEPT".to_string())
    );
    let again = full(&netns).0;
    assert_eq!(
        s.to_canonical_json(),
        again.to_canonical_json(),
        "capture not stable"
    );
    assert!(fidelity_failures(&s, &again).is_empty());

    // A planted CRIU chain (what CRIU's iptables lock leaves) is named.
    sh(
        &netns,
        "iptables -N CRIU\niptables -A CRIU -j DROP\niptables -I INPUT -j CRIU\n",
    );
    let locked = full(&netns).0;
    let f = fidelity_failures(&s, &locked);
    assert!(
        f[0].starts_with("CRIU's network lock left in the namespace:")
            && f[0].contains("chain CRIU"),
        "{f:?}"
    );
    sh(
        &netns,
        "iptables -D INPUT -j CRIU\niptables -F CRIU\niptables -X CRIU\n",
    );
    assert!(fidelity_failures(&s, &full(&netns).0).is_empty());

    // An address that became deprecated is named with its flag.
    sh(
        &netns,
        "ip -6 addr change fd14:214::1/64 dev np0 preferred_lft 0 nodad\n",
    );
    let dep = full(&netns).0;
    let f = fidelity_failures(&s, &dep);
    assert!(
        f.iter()
            .any(|l| l.contains("fd14:214::1/64") && l.ends_with("flag deprecated appeared")),
        "{f:?}"
    );
}
