//! CRIU's raw iproute2 images: `ifaddr-<id>.img` (`ip addr save`), `route-<id>.img` /
//! `route6-<id>.img` (`ip route save` / `ip -6 route save`), `rule-<id>.img` (`ip rule save`).
//!
//! CRIU runs those commands with the image as stdout (`criu/net.c` `run_ip_tool()`, no image
//! magic: `RAW_IMAGE_MAGIC`). iproute2 writes a native-endian `u32` dump magic, then each
//! rtnetlink message as the kernel sent it (`nlmsghdr` + payload, read back by
//! `rtnl_from_file()` in steps of `NLMSG_ALIGN(nlmsg_len)`). Magics (iproute2 source):
//! `ipadd_dump_magic` 0x47361222, `route_dump_magic` 0x45311224, `rule_dump_magic` 0x71706986.
//! An empty file (a tool that wrote nothing) decodes as no entries.

use netlink_packet_core::Parseable;
use netlink_packet_route::{address::AddressMessage, route::RouteMessage, rule::RuleMessage};
use std::path::Path;

use super::format::{ImageError, u32_at};
use crate::netlink::rules::{RuleState, rule_state_from};
use crate::netlink::state::{addr_state_from, route_state_from};
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

/// Decodes `ifaddr-<id>.img`: the `inet`/`inet6` addresses it holds, in file order.
///
/// Errors: [`ImageError`] for a wrong magic, a truncated message, a message that is not
/// `RTM_NEWADDR`, or a payload netlink-packet-route cannot parse.
pub fn decode_addrs(file: &Path, bytes: &[u8]) -> Result<Vec<AddrState>, ImageError> {
    let mut out = Vec::new();
    for m in messages(file, bytes, IFADDR_DUMP_MAGIC)? {
        expect_type(file, &m, RTM_NEWADDR, "RTM_NEWADDR")?;
        let msg = AddressMessage::parse(m.payload)
            .map_err(|e| ImageError::new(file, m.offset, format!("ifaddrmsg: {e}")))?;
        out.extend(addr_state_from(msg));
    }
    Ok(out)
}

/// Decodes `route-<id>.img` or `route6-<id>.img`: the routes it holds, in file order.
///
/// Errors: as [`decode_addrs`], for `RTM_NEWROUTE`.
pub fn decode_routes(file: &Path, bytes: &[u8]) -> Result<Vec<RouteState>, ImageError> {
    let mut out = Vec::new();
    for m in messages(file, bytes, ROUTE_DUMP_MAGIC)? {
        expect_type(file, &m, RTM_NEWROUTE, "RTM_NEWROUTE")?;
        let msg = RouteMessage::parse(m.payload)
            .map_err(|e| ImageError::new(file, m.offset, format!("rtmsg: {e}")))?;
        out.extend(route_state_from(&msg));
    }
    Ok(out)
}

/// Decodes `rule-<id>.img`: the policy rules it holds, in file order.
///
/// Errors: as [`decode_addrs`], for `RTM_NEWRULE`.
pub fn decode_rules(file: &Path, bytes: &[u8]) -> Result<Vec<RuleState>, ImageError> {
    let mut out = Vec::new();
    for m in messages(file, bytes, RULE_DUMP_MAGIC)? {
        expect_type(file, &m, RTM_NEWRULE, "RTM_NEWRULE")?;
        let msg = RuleMessage::parse(m.payload)
            .map_err(|e| ImageError::new(file, m.offset, format!("fib_rule_hdr: {e}")))?;
        out.extend(rule_state_from(&msg));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ip addr save` of 127.0.0.1/8 on ifindex 1, built by hand (ifaddrmsg + IFA_LOCAL +
    /// IFA_ADDRESS).
    fn addr_dump() -> Vec<u8> {
        let mut payload = vec![2u8, 8, 0x80, 254, 1, 0, 0, 0];
        for ty in [2u16, 1u16] {
            payload.extend_from_slice(&8u16.to_ne_bytes());
            payload.extend_from_slice(&ty.to_ne_bytes());
            payload.extend_from_slice(&[127, 0, 0, 1]);
        }
        let mut v = IFADDR_DUMP_MAGIC.to_ne_bytes().to_vec();
        v.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
        v.extend_from_slice(&RTM_NEWADDR.to_ne_bytes());
        v.extend_from_slice(&[0; 10]);
        v.extend_from_slice(&payload);
        v
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
}
