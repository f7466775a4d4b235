//! `NetState`: links, addresses and routes of one netns, captured in-process over rtnetlink,
//! with a canonical JSON form (byte-equal for equal states) and a line diff.

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR, Parseable,
};
use netlink_packet_route::{
    RouteNetlinkMessage,
    address::{AddressAttribute, AddressMessage},
    link::LinkMessage,
    route::{RouteAddress, RouteAttribute, RouteMessage},
    rule::RuleMessage,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::netfilter::NetfilterState;
use super::rules::{RuleState, rule_state_from};

use super::NetlinkError;
use super::criu_dump::{IFF_UP, RTM_NEWLINK, check_done_status, parse_link_payload};
use super::wire::{NlMsg, NlMsgIter, RtSocket, append_request, nlmsgerr_code};

/// `RTM_NEWADDR` (20): reply type of an address dump.
const RTM_NEWADDR: u16 = 20;
/// `RTM_NEWROUTE` (24): reply type of a route dump.
const RTM_NEWROUTE: u16 = 24;
const AF_INET: u8 = libc::AF_INET as u8;
const AF_INET6: u8 = libc::AF_INET6 as u8;

/// One link (`RTM_NEWLINK`), without counters or statistics.
///
/// JSON field names are a contract with the assertion engine: keep them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LinkState {
    /// `ifi_index`.
    pub ifindex: u32,
    /// `IFLA_IFNAME`.
    pub name: String,
    /// `ifi_type` (`ARPHRD_*`; loopback 772).
    pub link_type: u16,
    /// `ifi_flags` (`IFF_*` bits).
    pub flags: u32,
    /// `IFF_UP` bit of `flags`.
    pub up: bool,
    /// `IFLA_MTU` in bytes.
    pub mtu: Option<u32>,
    /// `IFLA_ADDRESS`, lowercase `aa:bb:..`.
    pub address: Option<String>,
    /// `IFLA_INFO_KIND` (e.g. `"veth"`), `None` for `lo`.
    pub kind: Option<String>,
    /// `IFLA_OPERSTATE`, lowercase RFC 2863 name (`"unknown"`, `"up"`, `"down"`, ...).
    pub operstate: Option<String>,
}

/// One interface address (`RTM_NEWADDR`), `inet` or `inet6` only, without cache info.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AddrState {
    /// `ifa_index`.
    pub ifindex: u32,
    /// `"inet"` or `"inet6"`.
    pub family: String,
    /// `IFA_LOCAL` when present (IPv4), else `IFA_ADDRESS`, as text.
    pub address: String,
    /// `ifa_prefixlen`.
    pub prefix_len: u8,
    /// `ifa_scope` by iproute2 name (`"global"`, `"link"`, `"host"`, ...) or its number.
    pub scope: String,
    /// `IFA_LABEL` (IPv4 only).
    pub label: Option<String>,
    /// Address flags (`IFA_FLAGS`, else `ifa_flags`), by iproute2 name, of these four only:
    /// `"dadfailed"`, `"deprecated"`, `"permanent"`, `"tentative"` (sorted). Added field:
    /// missing in older files reads as empty.
    #[serde(default)]
    pub flags: Vec<String>,
}

/// One route (`RTM_NEWROUTE`) of any table, `inet` or `inet6` only, without cache info.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RouteState {
    /// `"inet"` or `"inet6"`.
    pub family: String,
    /// `RTA_TABLE` when present, else `rtm_table` (254 main, 255 local).
    pub table: u32,
    /// `RTA_DST` as `"addr/prefix_len"`, or `"default"` for a zero-length prefix.
    pub dst: String,
    /// `RTA_GATEWAY` as text.
    pub gateway: Option<String>,
    /// `RTA_OIF` ifindex.
    pub oif: Option<u32>,
    /// `rtm_protocol` by iproute2 name (`"kernel"`, `"boot"`, `"static"`, ...) or its number.
    pub protocol: String,
    /// `rtm_scope` by iproute2 name (`"global"`, `"link"`, `"host"`, ...) or its number.
    pub scope: String,
    /// `rtm_type` by iproute2 name (`"unicast"`, `"local"`, `"multicast"`, ...) or its number.
    #[serde(rename = "type")]
    pub route_type: String,
    /// `RTA_PREFSRC` as text.
    pub prefsrc: Option<String>,
    /// `RTA_PRIORITY` (metric). Added field, not in the original brief's JSON example.
    pub priority: Option<u32>,
}

/// Network state of one netns: links, addresses, routes (all tables, IPv4 and IPv6), no
/// counters. Vectors are kept sorted (derived `Ord`, field order) so equal states serialise
/// byte-equal.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NetState {
    /// Links, sorted by `ifindex` first.
    pub links: Vec<LinkState>,
    /// Addresses, sorted by `ifindex`, family, address.
    pub addresses: Vec<AddrState>,
    /// Routes, sorted by family, table, dst.
    pub routes: Vec<RouteState>,
    /// Policy rules (`ip rule`), sorted by family, priority. Added field (empty in older
    /// files).
    #[serde(default)]
    pub rules: Vec<RuleState>,
    /// Sysctls under `/proc/sys/net` that CRIU saves (see [`super::sysctl::criu_saves`]),
    /// dotted name → value. Filled by [`super::capture_full`] only; the others are returned beside
    /// the state, not compared. Added field (empty in older files).
    #[serde(default)]
    pub sysctls: BTreeMap<String, String>,
    /// Canonical netfilter ruleset (see [`super::netfilter`]). Filled by [`super::capture_full`]
    /// only. Added field (empty in older files).
    #[serde(default)]
    pub netfilter: NetfilterState,
}

/// Capture the [`NetState`] of the calling thread's netns: one `NETLINK_ROUTE` socket, three
/// dumps (`RTM_GETLINK`, `RTM_GETADDR` and `RTM_GETROUTE`, family `AF_UNSPEC`, every table).
///
/// A dump flagged `NLM_F_DUMP_INTR` (state changed mid-dump) is retried, up to 3 attempts.
///
/// Errors: `Io`/`Kernel`/`Decode` naming the dump that failed; `DumpInterrupted` when all 3
/// attempts were interrupted.
pub fn capture() -> Result<NetState, NetlinkError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match capture_once() {
            Err(NetlinkError::DumpInterrupted { .. }) if attempt < 3 => continue,
            other => return other,
        }
    }
}

fn capture_once() -> Result<NetState, NetlinkError> {
    let mut sock = RtSocket::open("capture")?;
    let mut state = NetState {
        links: dump_links_with(&mut sock)?,
        addresses: dump_addrs_with(&mut sock)?,
        routes: dump_routes_with(&mut sock)?,
        rules: dump_rules_with(&mut sock)?,
        ..NetState::default()
    };
    state.normalize();
    Ok(state)
}

/// Dump the `inet`/`inet6` addresses of the calling thread's netns (`RTM_GETADDR`), sorted.
///
/// Errors: as [`capture`].
pub fn dump_addrs() -> Result<Vec<AddrState>, NetlinkError> {
    let mut sock = RtSocket::open("dump_addrs")?;
    let mut v = dump_addrs_with(&mut sock)?;
    v.sort();
    Ok(v)
}

impl NetState {
    fn normalize(&mut self) {
        self.links.sort();
        self.addresses.sort();
        self.routes.sort();
        self.rules.sort();
    }

    /// Canonical JSON: serde_json pretty (2-space indent), fixed field order, vectors sorted,
    /// trailing `\n`. Two equal states give byte-equal strings.
    ///
    /// A state that is already sorted (every captured or parsed one) is written without a
    /// copy, into a buffer pre-sized at ~240 bytes per element (no regrowth at 1,000 links).
    pub fn to_canonical_json(&self) -> String {
        let sorted;
        let state = if self.links.is_sorted()
            && self.addresses.is_sorted()
            && self.routes.is_sorted()
            && self.rules.is_sorted()
        {
            self
        } else {
            let mut c = self.clone();
            c.normalize();
            sorted = c;
            &sorted
        };
        let elements = state.links.len() + state.addresses.len() + state.routes.len();
        let mut out = Vec::with_capacity(64 + 240 * elements);
        serde_json::to_writer_pretty(&mut out, state).expect("NetState always serialises");
        out.push(b'\n');
        String::from_utf8(out).expect("serde_json writes UTF-8")
    }

    /// Parse JSON written by [`NetState::to_canonical_json`]. Unknown extra fields are
    /// ignored, a missing `Option` field reads as `null`, any other missing field is an error.
    /// Vectors are re-sorted.
    ///
    /// Errors: `Json` on malformed input.
    pub fn from_json(json: &str) -> Result<NetState, NetlinkError> {
        let mut s: NetState = serde_json::from_str(json)?;
        s.normalize();
        Ok(s)
    }

    /// What differs from `self` (e.g. before) to `other` (e.g. after): one line per element,
    /// `"- links: {json}"` for elements only in `self`, `"+ routes: {json}"` for elements only
    /// in `other` (compact JSON). Empty when the states are equal.
    pub fn diff(&self, other: &NetState) -> Vec<String> {
        let mut out = Vec::new();
        diff_vec("links", &self.links, &other.links, &mut out);
        diff_vec("addresses", &self.addresses, &other.addresses, &mut out);
        diff_vec("routes", &self.routes, &other.routes, &mut out);
        diff_vec("rules", &self.rules, &other.rules, &mut out);
        let a: Vec<(&String, &String)> = self.sysctls.iter().collect();
        let b: Vec<(&String, &String)> = other.sysctls.iter().collect();
        diff_vec("sysctls", &a, &b, &mut out);
        for (name, x, y) in [
            (
                "iptables",
                &self.netfilter.iptables,
                &other.netfilter.iptables,
            ),
            (
                "ip6tables",
                &self.netfilter.ip6tables,
                &other.netfilter.ip6tables,
            ),
            (
                "nftables",
                &self.netfilter.nftables,
                &other.netfilter.nftables,
            ),
        ] {
            if x != y {
                diff_vec(name, x, y, &mut out);
            }
        }
        out
    }

    /// The link named `lo`, if any.
    pub fn lo(&self) -> Option<&LinkState> {
        self.links.iter().find(|l| l.name == "lo")
    }

    /// True when link `lo` has `IFF_UP` and an `inet` address 127.0.0.1/8 on its ifindex.
    pub fn lo_up_with_127(&self) -> bool {
        self.lo().is_some_and(|lo| {
            lo.up
                && self.addresses.iter().any(|a| {
                    a.ifindex == lo.ifindex
                        && a.family == "inet"
                        && a.address == "127.0.0.1"
                        && a.prefix_len == 8
                })
        })
    }
}

fn diff_vec<T: Ord + Serialize>(what: &str, a: &[T], b: &[T], out: &mut Vec<String>) {
    let mut a: Vec<&T> = a.iter().collect();
    let mut b: Vec<&T> = b.iter().collect();
    a.sort();
    b.sort();
    let line = |sign: char, t: &T| {
        format!(
            "{sign} {what}: {}",
            serde_json::to_string(t).expect("state elements serialise")
        )
    };
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x == y => {
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x < y => {
                out.push(line('-', x));
                i += 1;
            }
            (Some(_), Some(y)) => {
                out.push(line('+', y));
                j += 1;
            }
            (Some(x), None) => {
                out.push(line('-', x));
                i += 1;
            }
            (None, Some(y)) => {
                out.push(line('+', y));
                j += 1;
            }
            (None, None) => break,
        }
    }
}

/// Run one dump on `sock` and call `each` for every payload message of our seq until
/// `NLMSG_DONE`.
fn run_dump(
    sock: &mut RtSocket,
    msg: RouteNetlinkMessage,
    op: &'static str,
    mut each: impl FnMut(&NlMsg<'_>) -> Result<(), NetlinkError>,
) -> Result<(), NetlinkError> {
    let seq = sock.seq();
    let mut req = Vec::new();
    append_request(&mut req, msg, NLM_F_REQUEST | NLM_F_DUMP, seq);
    sock.send(&req, op)?;
    // Each datagram is decoded from the socket's reused 32 KiB buffer as it arrives: nothing
    // is accumulated (the raw bytes are not evidence here, unlike the CRIU dump).
    let mut received = 0usize;
    loop {
        let dgram = sock.recv(op)?;
        if dgram.is_empty() {
            return Err(NetlinkError::decode(
                op,
                received,
                "replies end before NLMSG_DONE",
            ));
        }
        received += dgram.len();
        for m in NlMsgIter::new(dgram, op) {
            let m = m?;
            if m.nlmsg_seq != seq {
                continue;
            }
            if m.nlmsg_flags & NLM_F_DUMP_INTR != 0 {
                return Err(NetlinkError::DumpInterrupted { op: op.to_string() });
            }
            match m.nlmsg_type {
                NLMSG_DONE => return check_done_status(&m, op),
                NLMSG_ERROR => {
                    let code = nlmsgerr_code(&m, op)?;
                    return Err(NetlinkError::Kernel {
                        op: op.to_string(),
                        errno: -code,
                        seq,
                    });
                }
                _ => each(&m)?,
            }
        }
    }
}

fn dump_links_with(sock: &mut RtSocket) -> Result<Vec<LinkState>, NetlinkError> {
    const OP: &str = "capture: RTM_GETLINK";
    let mut links = Vec::new();
    run_dump(
        sock,
        RouteNetlinkMessage::GetLink(LinkMessage::default()),
        OP,
        |m| {
            if m.nlmsg_type == RTM_NEWLINK {
                let f = parse_link_payload(m.payload, m.offset, OP)?;
                links.push(LinkState {
                    ifindex: f.ifindex,
                    name: f.name.unwrap_or_default(),
                    link_type: f.link_type,
                    flags: f.flags,
                    up: f.flags & IFF_UP != 0,
                    mtu: f.mtu,
                    address: f.address,
                    kind: f.kind,
                    operstate: f.operstate,
                });
            }
            Ok(())
        },
    )?;
    Ok(links)
}

pub(crate) fn family_name(f: u8) -> Option<&'static str> {
    match f {
        AF_INET => Some("inet"),
        AF_INET6 => Some("inet6"),
        _ => None,
    }
}

fn dump_addrs_with(sock: &mut RtSocket) -> Result<Vec<AddrState>, NetlinkError> {
    const OP: &str = "capture: RTM_GETADDR";
    let mut addrs = Vec::new();
    run_dump(
        sock,
        RouteNetlinkMessage::GetAddress(AddressMessage::default()),
        OP,
        |m| {
            if m.nlmsg_type != RTM_NEWADDR {
                return Ok(());
            }
            let msg = AddressMessage::parse(m.payload)
                .map_err(|e| NetlinkError::decode(OP, m.offset, format!("ifaddrmsg: {e}")))?;
            addrs.extend(addr_state_from(msg));
            Ok(())
        },
    )?;
    Ok(addrs)
}

fn dump_rules_with(sock: &mut RtSocket) -> Result<Vec<RuleState>, NetlinkError> {
    const OP: &str = "capture: RTM_GETRULE";
    const RTM_NEWRULE: u16 = 32;
    let mut rules = Vec::new();
    run_dump(
        sock,
        RouteNetlinkMessage::GetRule(RuleMessage::default()),
        OP,
        |m| {
            if m.nlmsg_type != RTM_NEWRULE {
                return Ok(());
            }
            let msg = RuleMessage::parse(m.payload)
                .map_err(|e| NetlinkError::decode(OP, m.offset, format!("fib_rule_hdr: {e}")))?;
            rules.extend(rule_state_from(&msg));
            Ok(())
        },
    )?;
    Ok(rules)
}

fn route_addr(a: &RouteAddress) -> String {
    match a {
        RouteAddress::Inet(ip) => ip.to_string(),
        RouteAddress::Inet6(ip) => ip.to_string(),
        other => format!("{other:?}"),
    }
}

fn dump_routes_with(sock: &mut RtSocket) -> Result<Vec<RouteState>, NetlinkError> {
    const OP: &str = "capture: RTM_GETROUTE";
    let mut routes = Vec::new();
    run_dump(
        sock,
        RouteNetlinkMessage::GetRoute(RouteMessage::default()),
        OP,
        |m| {
            if m.nlmsg_type != RTM_NEWROUTE {
                return Ok(());
            }
            let msg = RouteMessage::parse(m.payload)
                .map_err(|e| NetlinkError::decode(OP, m.offset, format!("rtmsg: {e}")))?;
            routes.extend(route_state_from(&msg));
            Ok(())
        },
    )?;
    Ok(routes)
}

/// The [`AddrState`] of one parsed `RTM_NEWADDR` payload; `None` for a family other than
/// `inet`/`inet6` or a message without `IFA_LOCAL`/`IFA_ADDRESS`. Shared by the live capture
/// (which skips a `None`: its `AF_UNSPEC` dumps may list other families, outside [`NetState`])
/// and the decoder of CRIU's `ifaddr-<id>.img` (`ip addr save` output; it refuses a `None`,
/// see `images::ipdump`).
pub fn addr_state_from(msg: AddressMessage) -> Option<AddrState> {
    let family = family_name(u8::from(msg.header.family))?;
    let (mut local, mut address, mut label, mut flags) = (None, None, None, None);
    for a in msg.attributes {
        match a {
            AddressAttribute::Flags(f) => flags = Some(f.bits()),
            AddressAttribute::Local(ip) => local = Some(ip),
            AddressAttribute::Address(ip) => address = Some(ip),
            AddressAttribute::Label(l) => label = Some(l),
            _ => {}
        }
    }
    let ip = local.or(address)?;
    let bits = flags.unwrap_or(u32::from(msg.header.flags.bits()));
    Some(AddrState {
        flags: addr_flag_names(bits),
        ifindex: msg.header.index,
        family: family.to_string(),
        address: ip.to_string(),
        prefix_len: msg.header.prefix_len,
        scope: scope_name(u8::from(msg.header.scope)),
        label,
    })
}

/// `IFA_F_*` bits compared, with iproute2's names (sorted by name).
const ADDR_FLAGS: [(u32, &str); 4] = [
    (0x08, "dadfailed"),
    (0x20, "deprecated"),
    (0x80, "permanent"),
    (0x40, "tentative"),
];

/// The names of the compared `IFA_F_*` bits set in `bits` (sorted).
pub fn addr_flag_names(bits: u32) -> Vec<String> {
    ADDR_FLAGS
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| n.to_string())
        .collect()
}

/// The [`RouteState`] of one parsed `RTM_NEWROUTE` payload; `None` for a family other than
/// `inet`/`inet6`. Shared by the live capture (which skips a `None`, e.g. an MPLS or ipmr
/// route of its `AF_UNSPEC` dump) and the decoder of CRIU's `route-<id>.img` /
/// `route6-<id>.img` (`ip route save` output; it refuses a `None`).
pub fn route_state_from(msg: &RouteMessage) -> Option<RouteState> {
    let h = &msg.header;
    let family = family_name(u8::from(h.address_family))?;
    let mut r = RouteState {
        family: family.to_string(),
        table: u32::from(h.table),
        dst: "default".to_string(),
        gateway: None,
        oif: None,
        protocol: protocol_name(u8::from(h.protocol)),
        scope: scope_name(u8::from(h.scope)),
        route_type: type_name(u8::from(h.kind)),
        prefsrc: None,
        priority: None,
    };
    let plen = h.destination_prefix_length;
    for a in &msg.attributes {
        match a {
            RouteAttribute::Table(t) => r.table = *t,
            RouteAttribute::Destination(d) => r.dst = format!("{}/{plen}", route_addr(d)),
            RouteAttribute::Gateway(g) => r.gateway = Some(route_addr(g)),
            RouteAttribute::Oif(o) => r.oif = Some(*o),
            RouteAttribute::PrefSource(p) => r.prefsrc = Some(route_addr(p)),
            RouteAttribute::Priority(p) => r.priority = Some(*p),
            _ => {}
        }
    }
    Some(r)
}

/// iproute2's `rtnl_rtscope_n2a()` names.
pub(crate) fn scope_name(s: u8) -> String {
    match s {
        0 => "global".into(),
        200 => "site".into(),
        253 => "link".into(),
        254 => "host".into(),
        255 => "nowhere".into(),
        n => n.to_string(),
    }
}

/// iproute2's `rtnl_rtprot_n2a()` names (from `/etc/iproute2/rt_protos`).
pub(crate) fn protocol_name(p: u8) -> String {
    match p {
        0 => "unspec".into(),
        1 => "redirect".into(),
        2 => "kernel".into(),
        3 => "boot".into(),
        4 => "static".into(),
        9 => "ra".into(),
        16 => "dhcp".into(),
        n => n.to_string(),
    }
}

/// iproute2's `rtnl_rtntype_n2a()` names.
pub(crate) fn type_name(t: u8) -> String {
    match t {
        0 => "none".into(),
        1 => "unicast".into(),
        2 => "local".into(),
        3 => "broadcast".into(),
        4 => "anycast".into(),
        5 => "multicast".into(),
        6 => "blackhole".into(),
        7 => "unreachable".into(),
        8 => "prohibit".into(),
        9 => "throw".into(),
        10 => "nat".into(),
        11 => "xresolve".into(),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON example from the brief (the assertion engine's contract), without `priority`.
    const SAMPLE: &str = r#"{"links":[{"ifindex":1,"name":"lo","link_type":772,"flags":73,"up":true,"mtu":65536,"address":"00:00:00:00:00:00","kind":null,"operstate":"unknown"}],
 "addresses":[{"ifindex":1,"family":"inet","address":"127.0.0.1","prefix_len":8,"scope":"host","label":"lo"}],
 "routes":[{"family":"inet","table":255,"dst":"127.0.0.0/8","gateway":null,"oif":1,"protocol":"kernel","scope":"host","type":"local","prefsrc":"127.0.0.1"}]}"#;

    #[test]
    fn sample_json_parses_and_round_trips() {
        let s = NetState::from_json(SAMPLE).unwrap();
        assert!(s.lo_up_with_127());
        assert_eq!(s.routes[0].route_type, "local");
        let json = s.to_canonical_json();
        assert!(json.ends_with("}\n"));
        assert_eq!(NetState::from_json(&json).unwrap(), s);
        // Field order of the contract.
        let order = [
            "\"ifindex\"",
            "\"name\"",
            "\"link_type\"",
            "\"flags\"",
            "\"up\"",
            "\"mtu\"",
            "\"address\"",
            "\"kind\"",
            "\"operstate\"",
        ];
        let pos: Vec<usize> = order.iter().map(|k| json.find(k).unwrap()).collect();
        assert!(pos.windows(2).all(|w| w[0] < w[1]), "{json}");
        assert!(json.contains("\n  \"addresses\": [\n    {\n      \"ifindex\": 1,"));
    }

    #[test]
    fn order_does_not_matter_and_diff_lists_changes() {
        let a = NetState::from_json(SAMPLE).unwrap();
        let mut b = a.clone();
        b.addresses.push(AddrState {
            ifindex: 1,
            family: "inet".into(),
            address: "10.0.0.1".into(),
            prefix_len: 24,
            scope: "global".into(),
            label: Some("lo".into()),
            flags: vec![],
        });
        b.addresses.reverse();
        assert_ne!(a.to_canonical_json(), b.to_canonical_json());
        let d = a.diff(&b);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].starts_with("+ addresses: {") && d[0].contains("10.0.0.1"));
        assert_eq!(b.diff(&a)[0].chars().next(), Some('-'));
        let mut c = b.clone();
        c.addresses.reverse();
        assert_eq!(b.to_canonical_json(), c.to_canonical_json());
        assert!(b.diff(&c).is_empty());

        let mut down = a.clone();
        down.links[0].up = false;
        assert!(!down.lo_up_with_127());
        assert_eq!(a.diff(&down).len(), 2);
    }
}
