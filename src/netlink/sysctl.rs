//! Sysctls of a network namespace: which ones CRIU saves (by name, in image order), and the
//! capture of `/proc/sys/net` of the calling thread's netns.
//!
//! A `sysctl_entry` list in `netdev-`/`netns-<id>.img` has no names: entry *i* is the *i*-th
//! name of the matching table in CRIU's `criu/net.c` (CRIU v4.2): `devconfs4` for `conf4`,
//! `def_conf4`, `all_conf4` (under `net/ipv4/conf/<dev|default|all>/`), `devconfs6` for the
//! `conf6` lists (`net/ipv6/conf/...`), `unix_conf_entries` for `unix_conf` (`net/unix/`) and
//! `ipv4_sysctl_entries` for `ipv4_sysctl` (`net/ipv4/`). Everything else under
//! `/proc/sys/net` is not saved by CRIU.

use std::collections::BTreeMap;
use std::path::Path;

/// `devconfs4` of `criu/net.c`: per-device IPv4 `conf` sysctls CRIU saves.
pub const DEVCONFS4: &[&str] = &[
    "accept_local",
    "accept_redirects",
    "accept_source_route",
    "arp_accept",
    "arp_announce",
    "arp_filter",
    "arp_ignore",
    "arp_notify",
    "bootp_relay",
    "disable_policy",
    "disable_xfrm",
    "force_igmp_version",
    "forwarding",
    "igmpv2_unsolicited_report_interval",
    "igmpv3_unsolicited_report_interval",
    "log_martians",
    "medium_id",
    "promote_secondaries",
    "proxy_arp",
    "proxy_arp_pvlan",
    "route_localnet",
    "rp_filter",
    "secure_redirects",
    "send_redirects",
    "shared_media",
    "src_valid_mark",
    "tag",
    "ignore_routes_with_linkdown",
    "drop_gratuitous_arp",
    "drop_unicast_in_l2_multicast",
];

/// `devconfs6` of `criu/net.c`: per-device IPv6 `conf` sysctls CRIU saves.
pub const DEVCONFS6: &[&str] = &[
    "accept_dad",
    "accept_ra",
    "accept_ra_defrtr",
    "accept_ra_from_local",
    "accept_ra_min_hop_limit",
    "accept_ra_mtu",
    "accept_ra_pinfo",
    "accept_ra_rt_info_max_plen",
    "accept_ra_rtr_pref",
    "accept_redirects",
    "accept_source_route",
    "autoconf",
    "dad_transmits",
    "disable_ipv6",
    "drop_unicast_in_l2_multicast",
    "drop_unsolicited_na",
    "force_mld_version",
    "force_tllao",
    "forwarding",
    "hop_limit",
    "ignore_routes_with_linkdown",
    "keep_addr_on_down",
    "max_addresses",
    "max_desync_factor",
    "mldv1_unsolicited_report_interval",
    "mldv2_unsolicited_report_interval",
    "mtu",
    "ndisc_notify",
    "optimistic_dad",
    "proxy_ndp",
    "regen_max_retry",
    "router_probe_interval",
    "router_solicitation_delay",
    "router_solicitation_interval",
    "router_solicitations",
    "stable_secret",
    "suppress_frag_ndisc",
    "temp_prefered_lft",
    "temp_valid_lft",
    "use_oif_addrs_only",
    "use_optimistic",
    "use_tempaddr",
];

/// `unix_conf_entries` of `criu/net.c` (under `net/unix/`).
pub const UNIX_CONF: &[&str] = &["max_dgram_qlen"];

/// `ipv4_sysctl_entries` of `criu/net.c` (under `net/ipv4/`).
pub const IPV4_SYSCTL: &[&str] = &["ping_group_range"];

/// The dotted sysctl name of a `conf` value: `net.ipv4.conf.<target>.<name>` (`proto` is
/// `"ipv4"` or `"ipv6"`, `target` a device name, `"all"` or `"default"`).
pub fn conf_key(proto: &str, target: &str, name: &str) -> String {
    format!("net.{proto}.conf.{target}.{name}")
}

/// True when CRIU (v4.2) saves the sysctl with dotted name `key` (e.g.
/// `net.ipv4.conf.veth0.forwarding`, `net.unix.max_dgram_qlen`). Device names are taken as
/// one component (they contain no `.` in the probe's namespaces).
pub fn criu_saves(key: &str) -> bool {
    let parts: Vec<&str> = key.split('.').collect();
    match parts.as_slice() {
        ["net", "ipv4", "conf", _, name] => DEVCONFS4.contains(name),
        ["net", "ipv6", "conf", _, name] => DEVCONFS6.contains(name),
        ["net", "unix", name] => UNIX_CONF.contains(name),
        ["net", "ipv4", name] => IPV4_SYSCTL.contains(name),
        _ => false,
    }
}

/// The sysctls under `/proc/sys/net` of the calling thread's netns (`/proc/sys/net` is
/// resolved per opening task, so a thread that `setns`ed sees its netns), as dotted name →
/// value (trailing newline removed), split into `(saved by CRIU, not saved by CRIU)` by
/// [`criu_saves`]. Unreadable files (write-only ones like `route.flush`, `stable_secret`
/// when unset) are left out.
///
/// Errors: the I/O error when `/proc/sys/net` itself cannot be listed.
pub fn capture_sysctls() -> std::io::Result<(BTreeMap<String, String>, BTreeMap<String, String>)> {
    let mut covered = BTreeMap::new();
    let mut other = BTreeMap::new();
    let root = Path::new("/proc/sys");
    let mut stack = vec![root.join("net")];
    let mut first = true;
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if first => return Err(e),
            Err(_) => continue,
        };
        first = false;
        for e in entries.flatten() {
            let path = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(path);
                continue;
            }
            let Ok(v) = std::fs::read_to_string(&path) else {
                continue;
            };
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            let key = rel.to_string_lossy().replace('/', ".");
            let v = v.trim_end_matches('\n').to_string();
            if criu_saves(&key) {
                covered.insert(key, v);
            } else {
                other.insert(key, v);
            }
        }
    }
    Ok((covered, other))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_and_not_saved() {
        assert!(criu_saves("net.ipv4.conf.all.forwarding"));
        assert!(criu_saves("net.ipv6.conf.veth0.hop_limit"));
        assert!(criu_saves("net.unix.max_dgram_qlen"));
        assert!(criu_saves("net.ipv4.ping_group_range"));
        assert!(!criu_saves("net.ipv4.ip_default_ttl"));
        assert!(!criu_saves("net.ipv4.tcp_syncookies"));
        assert!(!criu_saves("net.core.somaxconn"));
        assert_eq!(DEVCONFS4.len(), 30);
        assert_eq!(DEVCONFS6.len(), 42);
    }
}
