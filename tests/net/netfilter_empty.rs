//! The netfilter capture without processes (root only): in a netns that filters nothing — no
//! table, or only what CRIU's network lock and iptables-nft leave behind (tables of base chains
//! with policy accept, empty tables) — the netfilter dumps and the x_tables name files prove it,
//! and the canonical ruleset the three tools give there is the empty one the capture returns
//! without them; a rule, a user chain, a drop policy, a set, a named object, a dormant table or a
//! legacy table sends the capture back to the tools.

use crate::common;
use common::netns::{sh, sleeper_in_own_netns};
use netprobe::netlink::netfilter::{self, NetfilterState};
use netprobe::netlink::nft_tables;
use std::path::Path;

fn in_ns<T: Send>(netns: &Path, f: impl FnOnce() -> T + Send) -> T {
    netprobe::ns::run_in_netns(netns, f).expect("setns")
}

#[test]
fn a_netns_without_tables_is_captured_without_the_tools_and_equal_to_them() {
    let _baton = crate::common::baton(module_path!());
    let (_c, ns) = sleeper_in_own_netns();
    let seen = in_ns(&ns, nft_tables::tables).expect("tables");
    assert!(seen.is_empty(), "{seen:?}");
    let (fast, raw) = in_ns(&ns, netfilter::capture).expect("capture");
    assert_eq!(fast, NetfilterState::default());
    let proof = raw.no_tables.expect("the tools were skipped");
    assert!(proof.contains("0 table(s)"), "{proof}");
    // The tools on the same netns: their canonical form is the same (empty) ruleset.
    let (tools, traw) = in_ns(&ns, netfilter::capture_with_tools).expect("tools");
    assert_eq!(tools, fast, "{traw:?}");
    assert!(traw.no_tables.is_none());
}

#[test]
fn what_the_lock_leaves_behind_is_captured_without_the_tools_and_equal_to_them() {
    let _baton = crate::common::baton(module_path!());
    let (_c, ns) = sleeper_in_own_netns();
    sh(
        &ns,
        "for t in iptables ip6tables; do for c in INPUT OUTPUT; do \
           $t -A $c -j ACCEPT; $t -D $c -j ACCEPT; done; done; \
         nft add table inet np_probe; nft add chain inet np_probe in '{ type filter hook input priority 0; policy accept; }'",
    );
    let seen = in_ns(&ns, nft_tables::tables).expect("tables");
    assert!(
        !seen.is_empty() && seen.filters_nothing(),
        "{}",
        seen.proof_lines()
    );
    let (fast, raw) = in_ns(&ns, netfilter::capture).expect("capture");
    let proof = raw.no_tables.expect("the tools were skipped");
    assert!(
        proof.contains("table inet np_probe: in (base, policy accept)"),
        "{proof}"
    );
    let (tools, traw) = in_ns(&ns, netfilter::capture_with_tools).expect("tools");
    assert!(
        traw.iptables.contains("*filter") && traw.ip6tables.contains("*filter"),
        "{traw:?}"
    );
    assert_eq!(tools, fast, "{traw:?}");
}

#[test]
fn anything_that_filters_sends_the_capture_back_to_the_tools() {
    let _baton = crate::common::baton(module_path!());
    // (set-up, a line the proof shows, whether the tools' canonical form is non-empty)
    let cases: [(&str, &str, bool); 8] = [
        (
            "iptables -A INPUT -s 10.9.0.0/24 -j DROP",
            "1 rule(s)",
            true,
        ),
        ("iptables -N NP", "NP (regular)", true),
        (
            "ip6tables -P FORWARD DROP",
            "FORWARD (base, policy 0)",
            true,
        ),
        (
            "nft add table inet t; nft add set inet t s '{ type ipv4_addr; }'",
            "1 set(s)",
            true,
        ),
        (
            "nft add table inet t; nft add counter inet t c",
            "1 object(s)",
            true,
        ),
        (
            "nft add table inet t '{ flags dormant; }'",
            "table inet t (flags or comment)",
            true,
        ),
        (
            "iptables-legacy -t filter -S >/dev/null",
            "ip_tables_names: filter",
            false,
        ),
        (
            "ip6tables-legacy -t mangle -S >/dev/null",
            "ip6_tables_names: mangle",
            false,
        ),
    ];
    for (script, named, filters) in cases {
        let (_c, ns) = sleeper_in_own_netns();
        sh(&ns, script);
        let seen = in_ns(&ns, nft_tables::tables).expect("tables");
        assert!(!seen.filters_nothing(), "{script}: {}", seen.proof_lines());
        assert!(
            seen.proof_lines().contains(named),
            "{script}: {}",
            seen.proof_lines()
        );
        let (s, raw) = in_ns(&ns, netfilter::capture).expect("capture");
        assert!(raw.no_tables.is_none(), "{script}: the tools must run");
        assert_eq!(s != NetfilterState::default(), filters, "{script}: {s:?}");
    }
}
