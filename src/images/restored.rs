//! A restored namespace held against its checkpoint's finding: [`mismatches`] of
//! [`Expected`] (from [`super::finding::derive`]) and a captured [`NetState`].

use std::collections::BTreeSet;

use super::finding::Expected;
use crate::netlink::NetState;

/// What differs between `expected` and the restored namespace's `state`, one sentence each
/// (empty: the restore brought back what the finding said). With `expected.exact` the link
/// names and each link's addresses must be equal; otherwise each expected link must exist and
/// hold at least its addresses (the engine adds others: `lo`, IPv6 link-local). `up`, `mtu`
/// and `mac` are compared where the finding states them.
pub fn mismatches(expected: &Expected, state: &NetState) -> Vec<String> {
    let mut out = Vec::new();
    if expected.exact {
        let want: BTreeSet<&str> = expected.links.iter().map(|l| l.name.as_str()).collect();
        let got: BTreeSet<&str> = state.links.iter().map(|l| l.name.as_str()).collect();
        if want != got {
            out.push(format!(
                "links: expected exactly {want:?}, restored {got:?}"
            ));
        }
    }
    for l in &expected.links {
        let Some(s) = state.links.iter().find(|s| s.name == l.name) else {
            out.push(format!("{}: expected, not restored", l.name));
            continue;
        };
        if let Some(up) = l.up
            && up != s.up
        {
            out.push(format!(
                "{}: expected up={up}, restored up={}",
                l.name, s.up
            ));
        }
        if let Some(mtu) = l.mtu
            && Some(mtu) != s.mtu
        {
            out.push(format!(
                "{}: expected mtu {mtu}, restored {:?}",
                l.name, s.mtu
            ));
        }
        if let Some(mac) = &l.mac
            && s.address.as_deref().map(str::to_ascii_lowercase) != Some(mac.to_ascii_lowercase())
        {
            out.push(format!(
                "{}: expected mac {mac}, restored {:?}",
                l.name, s.address
            ));
        }
        let got: BTreeSet<String> = state
            .addresses
            .iter()
            .filter(|a| a.ifindex == s.ifindex)
            .map(|a| format!("{}/{}", a.address, a.prefix_len))
            .collect();
        let want: BTreeSet<String> = l.addresses.iter().cloned().collect();
        let ok = match expected.exact {
            true => want == got,
            false => want.is_subset(&got),
        };
        if !ok {
            out.push(format!(
                "{}: expected addresses {want:?}{}, restored {got:?}",
                l.name,
                if expected.exact { "" } else { " (at least)" }
            ));
        }
    }
    out
}
