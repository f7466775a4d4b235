//! Plain-text tree of [`NetImages`], for `netprobe images DIR`.

use std::fmt::Write;

use super::netimg::{DeviceInfo, NetImages, NsImages};

/// Renders `imgs` as an indented tree: per namespace id the netns entry (external key or
/// sysctl count, and with `sysctls` their values), devices, addresses, routes, rules and
/// firewall text. Every line comes from a decoded field; absent images are said to be absent.
pub fn render(imgs: &NetImages, sysctls: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{}", imgs.dir.display());
    let _ = writeln!(
        o,
        "  inventory.img: {}",
        if imgs.inventory { "present" } else { "absent" }
    );
    if imgs.namespaces.is_empty() {
        let _ = writeln!(
            o,
            "  no network image (no netns-/netdev-/ifaddr-/route-… file)"
        );
    }
    for ns in &imgs.namespaces {
        render_ns(&mut o, ns, sysctls);
    }
    o
}

fn render_ns(o: &mut String, ns: &NsImages, sysctls: bool) {
    let _ = writeln!(o, "  netns id {} ({})", ns.id, ns.files.join(", "));
    match &ns.netns {
        None => {
            let _ = writeln!(o, "    netns entry: absent");
        }
        Some(n) => {
            match &n.ext_key {
                Some(k) => {
                    let _ = writeln!(o, "    netns entry: external, key {k:?}");
                }
                None => {
                    let _ = writeln!(o, "    netns entry: full, {} sysctls", n.sysctls.len());
                }
            }
            for (k, v) in n.sysctls.iter().filter(|_| sysctls) {
                let _ = writeln!(o, "      {k} = {v}");
            }
        }
    }
    let _ = writeln!(o, "    devices: {}", ns.devices.len());
    for d in &ns.devices {
        render_dev(o, d, sysctls);
    }
    let _ = writeln!(o, "    addresses: {}", ns.addresses.len());
    for a in &ns.addresses {
        let _ = writeln!(
            o,
            "      if{} {} {}/{} scope {}",
            a.ifindex, a.family, a.address, a.prefix_len, a.scope
        );
    }
    let _ = writeln!(o, "    routes: {}", ns.routes.len());
    for r in &ns.routes {
        let _ = writeln!(
            o,
            "      {} table {} {} {}{}{} proto {} scope {}",
            r.family,
            r.table,
            r.route_type,
            r.dst,
            r.gateway
                .as_ref()
                .map(|g| format!(" via {g}"))
                .unwrap_or_default(),
            r.oif.map(|i| format!(" oif {i}")).unwrap_or_default(),
            r.protocol,
            r.scope
        );
    }
    let _ = writeln!(o, "    rules: {}", ns.rules.len());
    for r in &ns.rules {
        let _ = writeln!(
            o,
            "      {} pref {} from {} to {} {} {}",
            r.family, r.priority, r.src, r.dst, r.action, r.table
        );
    }
    for (name, text) in [
        ("iptables", &ns.iptables),
        ("ip6tables", &ns.ip6tables),
        ("nftables", &ns.nftables),
    ] {
        match text {
            None => {
                let _ = writeln!(o, "    {name}: absent");
            }
            Some(t) => {
                let _ = writeln!(o, "    {name}: {} lines", t.lines().count());
                for l in t.lines().filter(|l| !l.starts_with('#')) {
                    let _ = writeln!(o, "      {l}");
                }
            }
        }
    }
    let lock = criu_lock_in(ns);
    if !lock.is_empty() {
        let _ = writeln!(
            o,
            "    CRIU's network lock in these tables: {} (in place when CRIU dumped the tables; CRIU's unlock at the end of a successful restore removes it)",
            lock.join(", ")
        );
    }
}

/// What of CRIU's network lock the namespace's firewall images hold
/// ([`crate::netlink::netfilter::criu_lock`] over their canonical forms); empty when none.
fn criu_lock_in(ns: &NsImages) -> Vec<String> {
    use crate::netlink::netfilter::{NetfilterState, canonical_nft, canonical_save, criu_lock};
    let text = |t: &Option<String>| t.as_deref().unwrap_or_default().to_string();
    criu_lock(&NetfilterState {
        iptables: canonical_save(&text(&ns.iptables)),
        ip6tables: canonical_save(&text(&ns.ip6tables)),
        nftables: canonical_nft(&text(&ns.nftables)),
    })
}

fn render_dev(o: &mut String, d: &DeviceInfo, sysctls: bool) {
    let _ = writeln!(
        o,
        "      {} ifindex {} type {} mtu {} mac {} flags 0x{:x}{}{}{} ({} sysctls)",
        d.name,
        d.ifindex,
        d.dev_type,
        d.mtu,
        d.address.as_deref().unwrap_or("-"),
        d.flags,
        if d.up { " UP" } else { "" },
        d.peer_ifindex
            .map(|p| format!(" peer ifindex {p}"))
            .unwrap_or_default(),
        d.peer_nsid
            .map(|p| format!(" peer nsid {p}"))
            .unwrap_or_default(),
        d.sysctls.len(),
    );
    if sysctls {
        d.sysctls.for_each(|k, v| {
            let _ = writeln!(o, "        {k} = {v}");
        });
    }
}
