//! CRIU's raw iproute2 images: `ifaddr-<id>.img` (`ip addr save`), `route-<id>.img` /
//! `route6-<id>.img` (`ip route save` / `ip -6 route save`), `rule-<id>.img` (`ip rule save`).
//!
//! CRIU runs those commands with the image as stdout (`criu/net.c` `run_ip_tool()`, no image
//! magic: `RAW_IMAGE_MAGIC`). iproute2 writes a native-endian `u32` dump magic, then each
//! rtnetlink message as the kernel sent it (`nlmsghdr` + payload, read back by
//! `rtnl_from_file()` in steps of `NLMSG_ALIGN(nlmsg_len)`). Magics (iproute2 source):
//! `ipadd_dump_magic` 0x47361222, `route_dump_magic` 0x45311224, `rule_dump_magic` 0x71706986.
//! An empty file (a tool that wrote nothing) decodes as no entries. Every message must become
//! an entry: one of a family other than `inet`/`inet6`, or an address without
//! `IFA_LOCAL`/`IFA_ADDRESS`, is refused with its number and offset, never left out.

use netlink_packet_core::Parseable;
use netlink_packet_route::{address::AddressMessage, route::RouteMessage, rule::RuleMessage};
use std::path::Path;

use super::format::{ImageError, u32_at};
use crate::netlink::rules::{RuleState, rule_state_from};
use crate::netlink::state::{addr_state_from, family_name, route_state_from};
use crate::netlink::{AddrState, RouteState};

/// `ipadd_dump_magic` of iproute2's `ip/ipaddress.c`.
pub const IFADDR_DUMP_MAGIC: u32 = 0x4736_1222;
/// `route_dump_magic` of iproute2's `ip/iproute.c`.
pub const ROUTE_DUMP_MAGIC: u32 = 0x4531_1224;
/// `rule_dump_magic` of iproute2's `ip/iprule.c`.
pub const RULE_DUMP_MAGIC: u32 = 0x7170_6986;

const NLMSG_HDRLEN: usize = 16;
const RTM_NEWADDR: u16 = 20;
const RTM_NEWROUTE: u16 = 24;
const RTM_NEWRULE: u16 = 32;

/// One rtnetlink message of a dump: its offset in the file, `nlmsg_type` and payload.
struct Msg<'a> {
    offset: usize,
    nlmsg_type: u16,
    payload: &'a [u8],
}

/// Splits an iproute2 dump into messages after checking `magic`. Empty input gives none.
fn messages<'a>(file: &Path, bytes: &'a [u8], magic: u32) -> Result<Vec<Msg<'a>>, ImageError> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let got = u32_at(file, bytes, 0, "iproute2 dump magic")?;
    if got != magic {
        return Err(ImageError::new(
            file,
            0,
            format!("wrong iproute2 dump magic: 0x{got:08x}, expected 0x{magic:08x}"),
        ));
    }
    let mut off = 4;
    let mut out = Vec::new();
    while off < bytes.len() {
        let left = bytes.len() - off;
        if left < NLMSG_HDRLEN {
            return Err(ImageError::new(
                file,
                off,
                format!("truncated nlmsghdr: {left} of 16 bytes"),
            ));
        }
        let len = u32_at(file, bytes, off, "nlmsg_len")? as usize;
        if len < NLMSG_HDRLEN || len > left {
            return Err(ImageError::new(
                file,
                off,
                format!("nlmsg_len {len} with {left} bytes left in the file"),
            ));
        }
        out.push(Msg {
            offset: off,
            nlmsg_type: u16::from_ne_bytes([bytes[off + 4], bytes[off + 5]]),
            payload: &bytes[off + NLMSG_HDRLEN..off + len],
        });
        off += ((len + 3) & !3).min(left);
    }
    Ok(out)
}

fn expect_type(file: &Path, m: &Msg<'_>, want: u16, name: &str) -> Result<(), ImageError> {
    if m.nlmsg_type == want {
        return Ok(());
    }
    Err(ImageError::new(
        file,
        m.offset,
        format!("nlmsg_type {}, expected {name} ({want})", m.nlmsg_type),
    ))
}

/// `state` (what [`addr_state_from`], [`route_state_from`] or [`rule_state_from`] made of the
/// message `m`, entry `index` (1-based) of `file`, of type `name`), or, when it is `None`, the
/// error saying why: its family (the payload's first byte, in `ifaddrmsg`, `rtmsg` and
/// `fib_rule_hdr` alike; the error's offset points at it) is not `AF_INET`/`AF_INET6`, or else
/// `otherwise` says what else is wrong (the error's offset is the message's).
///
/// Errors: [`ImageError`] "entry N (NAME at offset M): family F is neither AF_INET (2) nor
/// AF_INET6 (10): …" or "entry N (…): OTHERWISE: …", ending with the fix.
fn usable<T>(
    file: &Path,
    m: &Msg<'_>,
    index: usize,
    name: &str,
    state: Option<T>,
    otherwise: &str,
) -> Result<T, ImageError> {
    if let Some(s) = state {
        return Ok(s);
    }
    let entry = format!("entry {index} ({name} at offset {})", m.offset);
    const CANNOT: &str = "netprobe shows only inet/inet6 entries and refuses to leave one \
                          out; give the folder of an unmodified dump";
    match m.payload.first().copied() {
        Some(f) if family_name(f).is_none() => Err(ImageError::new(
            file,
            m.offset + NLMSG_HDRLEN,
            format!(
                "{entry}: family {f} is neither AF_INET ({}) nor AF_INET6 ({}): {CANNOT}",
                libc::AF_INET,
                libc::AF_INET6
            ),
        )),
        _ => Err(ImageError::new(
            file,
            m.offset,
            format!("{entry}: {otherwise}: {CANNOT}"),
        )),
    }
}

/// Why an inet/inet6 `RTM_NEWADDR` gives no address (`addr_state_from`'s other `None`).
const NO_ADDR: &str =
    "it has neither IFA_LOCAL nor IFA_ADDRESS (`ip addr save` writes one for every address)";

/// Decodes `ifaddr-<id>.img`: the `inet`/`inet6` addresses it holds, in file order.
///
/// Errors: [`ImageError`] for a wrong magic, a truncated message, a message that is not
/// `RTM_NEWADDR`, a payload netlink-packet-route cannot parse, or an entry that gives no
/// address: a family other than `inet`/`inet6` (offset of its family byte), or neither
/// `IFA_LOCAL` nor `IFA_ADDRESS` (offset of its message); the reason names the entry (1-based)
/// and its message's offset.
pub fn decode_addrs(file: &Path, bytes: &[u8]) -> Result<Vec<AddrState>, ImageError> {
    let mut out = Vec::new();
    for (i, m) in messages(file, bytes, IFADDR_DUMP_MAGIC)?.iter().enumerate() {
        expect_type(file, m, RTM_NEWADDR, "RTM_NEWADDR")?;
        let msg = AddressMessage::parse(m.payload)
            .map_err(|e| ImageError::new(file, m.offset, format!("ifaddrmsg: {e}")))?;
        let a = addr_state_from(msg);
        out.push(usable(file, m, i + 1, "RTM_NEWADDR", a, NO_ADDR)?);
    }
    Ok(out)
}

/// Decodes `route-<id>.img` or `route6-<id>.img`: the routes it holds, in file order.
///
/// Errors: as [`decode_addrs`], for `RTM_NEWROUTE` (a route needs only its family).
pub fn decode_routes(file: &Path, bytes: &[u8]) -> Result<Vec<RouteState>, ImageError> {
    let mut out = Vec::new();
    for (i, m) in messages(file, bytes, ROUTE_DUMP_MAGIC)?.iter().enumerate() {
        expect_type(file, m, RTM_NEWROUTE, "RTM_NEWROUTE")?;
        let msg = RouteMessage::parse(m.payload)
            .map_err(|e| ImageError::new(file, m.offset, format!("rtmsg: {e}")))?;
        let r = route_state_from(&msg);
        out.push(usable(file, m, i + 1, "RTM_NEWROUTE", r, "no route state")?);
    }
    Ok(out)
}

/// Decodes `rule-<id>.img`: the policy rules it holds, in file order.
///
/// Errors: as [`decode_addrs`], for `RTM_NEWRULE` (a rule needs only its family).
pub fn decode_rules(file: &Path, bytes: &[u8]) -> Result<Vec<RuleState>, ImageError> {
    let mut out = Vec::new();
    for (i, m) in messages(file, bytes, RULE_DUMP_MAGIC)?.iter().enumerate() {
        expect_type(file, m, RTM_NEWRULE, "RTM_NEWRULE")?;
        let msg = RuleMessage::parse(m.payload)
            .map_err(|e| ImageError::new(file, m.offset, format!("fib_rule_hdr: {e}")))?;
        let r = rule_state_from(&msg);
        out.push(usable(file, m, i + 1, "RTM_NEWRULE", r, "no rule state")?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An iproute2 dump: `magic`, then one message of type `ty` per payload.
    fn dump(magic: u32, ty: u16, payloads: &[Vec<u8>]) -> Vec<u8> {
        let mut v = magic.to_ne_bytes().to_vec();
        for p in payloads {
            v.extend_from_slice(&((16 + p.len()) as u32).to_ne_bytes());
            v.extend_from_slice(&ty.to_ne_bytes());
            v.extend_from_slice(&[0; 10]);
            v.extend_from_slice(p);
        }
        v
    }

    /// The `ifaddrmsg` of 127.0.0.1/8 on ifindex 1 (family 2) with IFA_LOCAL and IFA_ADDRESS.
    fn lo4() -> Vec<u8> {
        let mut payload = vec![2u8, 8, 0x80, 254, 1, 0, 0, 0];
        for ty in [2u16, 1u16] {
            payload.extend_from_slice(&8u16.to_ne_bytes());
            payload.extend_from_slice(&ty.to_ne_bytes());
            payload.extend_from_slice(&[127, 0, 0, 1]);
        }
        payload
    }

    /// `ip addr save` of 127.0.0.1/8 on ifindex 1, built by hand (ifaddrmsg + IFA_LOCAL +
    /// IFA_ADDRESS).
    fn addr_dump() -> Vec<u8> {
        dump(IFADDR_DUMP_MAGIC, RTM_NEWADDR, &[lo4()])
    }

    #[test]
    fn decodes_an_address_and_rejects_wrong_magic_and_type() {
        let f = Path::new("ifaddr-9.img");
        let a = decode_addrs(f, &addr_dump()).unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].address.as_str(), a[0].prefix_len), ("127.0.0.1", 8));
        assert_eq!(a[0].scope, "host");
        let e = decode_routes(f, &addr_dump()).unwrap_err();
        assert!(e.reason.contains("wrong iproute2 dump magic"), "{e}");
        let mut bad = addr_dump();
        bad[0..4].copy_from_slice(&ROUTE_DUMP_MAGIC.to_ne_bytes());
        let e = decode_routes(f, &bad).unwrap_err();
        assert_eq!(e.offset, 4);
        assert!(e.reason.contains("expected RTM_NEWROUTE"), "{e}");
        assert!(decode_rules(f, &[]).unwrap().is_empty());
    }

    #[test]
    fn truncations_and_oversized_lengths_are_errors_not_panics() {
        let f = Path::new("ifaddr-9.img");
        let full = addr_dump();
        for cut in 1..full.len() {
            let e = decode_addrs(f, &full[..cut]);
            if cut == 4 {
                assert!(e.unwrap().is_empty());
            } else {
                assert!(e.unwrap_err().offset as usize <= cut);
            }
        }
        let mut big = full.clone();
        big[4..8].copy_from_slice(&4096u32.to_ne_bytes());
        let e = decode_addrs(f, &big).unwrap_err();
        assert_eq!(e.offset, 4);
        assert!(e.reason.contains("nlmsg_len 4096"), "{e}");
        // Bit flips anywhere: an error or a value, never a panic.
        for i in 0..full.len() {
            for bit in 0..8 {
                let mut v = full.clone();
                v[i] ^= 1 << bit;
                let _ = decode_addrs(f, &v);
                let _ = decode_routes(f, &v);
                let _ = decode_rules(f, &v);
            }
        }
    }

    /// The user trial's reproduction: the family byte (offset 20) of the first entry of a real
    /// `ifaddr-9.img` flipped to 87. Before, that entry vanished and the rest decoded.
    #[test]
    fn an_entry_of_another_family_is_refused_not_dropped() {
        let f = Path::new("ifaddr-9.img");
        let two = dump(IFADDR_DUMP_MAGIC, RTM_NEWADDR, &[lo4(), lo4()]);
        assert_eq!(decode_addrs(f, &two).unwrap().len(), 2);
        let mut bad = two.clone();
        bad[20] ^= 0x55;
        let e = decode_addrs(f, &bad).unwrap_err();
        assert_eq!(e.offset, 20, "{e}");
        assert_eq!(
            e.to_string(),
            "ifaddr-9.img: offset 20: entry 1 (RTM_NEWADDR at offset 4): family 87 is neither \
             AF_INET (2) nor AF_INET6 (10): netprobe shows only inet/inet6 entries and refuses \
             to leave one out; give the folder of an unmodified dump"
        );
        // The second entry: its message starts at 4 + 40.
        let mut bad = two.clone();
        bad[44 + 16] = 0;
        let e = decode_addrs(f, &bad).unwrap_err();
        assert_eq!(e.offset, 60, "{e}");
        assert!(
            e.reason
                .starts_with("entry 2 (RTM_NEWADDR at offset 44): family 0 is neither"),
            "{e}"
        );
    }

    #[test]
    fn an_address_without_ifa_local_or_ifa_address_is_refused() {
        let f = Path::new("ifaddr-9.img");
        // ifaddrmsg + IFA_LABEL "lo" only.
        let mut label_only = vec![2u8, 8, 0x80, 254, 1, 0, 0, 0];
        label_only.extend_from_slice(&7u16.to_ne_bytes());
        label_only.extend_from_slice(&3u16.to_ne_bytes());
        label_only.extend_from_slice(b"lo\0\0");
        let e = decode_addrs(
            f,
            &dump(IFADDR_DUMP_MAGIC, RTM_NEWADDR, &[lo4(), label_only]),
        )
        .unwrap_err();
        assert_eq!(e.offset, 44, "{e}");
        assert!(
            e.reason.starts_with(
                "entry 2 (RTM_NEWADDR at offset 44): it has neither IFA_LOCAL nor IFA_ADDRESS"
            ) && e.reason.ends_with("give the folder of an unmodified dump"),
            "{e}"
        );
    }

    #[test]
    fn routes_and_rules_of_another_family_are_refused_not_dropped() {
        let f = Path::new("route-9.img");
        // rtmsg: family, dst_len, src_len, tos, table 254, protocol kernel, scope link,
        // type unicast, flags; no attribute (a default route).
        let route = |family: u8| vec![family, 0, 0, 0, 254, 2, 253, 1, 0, 0, 0, 0];
        let ok = dump(ROUTE_DUMP_MAGIC, RTM_NEWROUTE, &[route(2), route(10)]);
        assert_eq!(decode_routes(f, &ok).unwrap().len(), 2);
        let bad = dump(ROUTE_DUMP_MAGIC, RTM_NEWROUTE, &[route(2), route(87)]);
        let e = decode_routes(f, &bad).unwrap_err();
        assert_eq!(e.offset, 4 + 28 + 16, "{e}");
        assert!(
            e.reason.starts_with(
                "entry 2 (RTM_NEWROUTE at offset 32): family 87 is neither AF_INET (2) nor \
                 AF_INET6 (10)"
            ),
            "{e}"
        );
        let f = Path::new("rule-9.img");
        // fib_rule_hdr: family, dst_len, src_len, tos, table 254, res1, res2, action
        // FR_ACT_TO_TBL (1), flags.
        let rule = |family: u8| vec![family, 0, 0, 0, 254, 0, 0, 1, 0, 0, 0, 0];
        let ok = dump(RULE_DUMP_MAGIC, RTM_NEWRULE, &[rule(2), rule(10)]);
        assert_eq!(decode_rules(f, &ok).unwrap().len(), 2);
        let bad = dump(RULE_DUMP_MAGIC, RTM_NEWRULE, &[rule(128)]);
        let e = decode_rules(f, &bad).unwrap_err();
        assert_eq!(e.offset, 20, "{e}");
        assert!(
            e.reason.starts_with(
                "entry 1 (RTM_NEWRULE at offset 4): family 128 is neither AF_INET (2) nor \
                 AF_INET6 (10)"
            ),
            "{e}"
        );
    }
}
