//! CRIU-exact link dump: the 20-byte `RTM_GETLINK` request CRIU sends, the raw replies, and a
//! decode that reads each reply the way `dump_one_link()` in `criu/net.c` (CRIU 4.x) does.

use netlink_packet_core::{
    NLA_TYPE_MASK, NLMSG_DONE, NLMSG_ERROR, NLMSG_NOOP, NlaBuffer, ParseableParametrized,
};
use netlink_packet_route::link::{LinkAttribute, LinkHeader, LinkInfo};

use super::NetlinkError;
use super::wire::{NlMsgIter, RtSocket, nlmsg_align, nlmsgerr_code};

/// `nlmsg_seq` CRIU puts on its link dump (`dump_links()` in `criu/net.c`, CRIU 4.x).
pub const CRIU_LINK_DUMP_SEQ: u32 = 24680;

/// `RTM_NEWLINK` (16): the reply type of a link dump.
pub const RTM_NEWLINK: u16 = 16;
/// `RTM_GETLINK` (18): the request type of a link dump.
pub const RTM_GETLINK: u16 = 18;
/// `ARPHRD_LOOPBACK` (772): `ifi_type` of `lo`.
pub const ARPHRD_LOOPBACK: u16 = 772;
/// `ARPHRD_ETHER` (1): `ifi_type` of veth and other Ethernet-like links.
pub const ARPHRD_ETHER: u16 = 1;
/// `IFF_UP` (0x1) in `ifi_flags`.
pub const IFF_UP: u32 = 0x1;

/// `sizeof(struct ifinfomsg)`.
pub(crate) const IFINFOMSG_LEN: usize = 16;
/// `sizeof(struct nlattr)`.
const NLA_HDRLEN: usize = 4;
pub(crate) const IFLA_ADDRESS: u16 = 1;
pub(crate) const IFLA_IFNAME: u16 = 3;
pub(crate) const IFLA_MTU: u16 = 4;
pub(crate) const IFLA_OPERSTATE: u16 = 16;
pub(crate) const IFLA_LINKINFO: u16 = 18;

/// The exact 20 bytes CRIU sends to dump links: `nlmsghdr` { len 20, type `RTM_GETLINK` (18),
/// flags `NLM_F_REQUEST|NLM_F_ROOT|NLM_F_MATCH` (0x301), seq 24680, pid 0 } followed by
/// `rtgenmsg` { `rtgen_family` = `AF_PACKET` (17) } and 3 zero pad bytes. Host byte order.
///
/// Built by hand, not with netlink-packet-route: the crate's `LinkMessage` is an `ifinfomsg`
/// (16 bytes), while CRIU sends the short `rtgenmsg`. Mirrors `dump_links()` in `criu/net.c`
/// (CRIU 4.x).
pub fn criu_link_dump_request() -> [u8; 20] {
    let mut b = [0u8; 20];
    b[0..4].copy_from_slice(&20u32.to_ne_bytes());
    b[4..6].copy_from_slice(&RTM_GETLINK.to_ne_bytes());
    b[6..8].copy_from_slice(&0x301u16.to_ne_bytes());
    b[8..12].copy_from_slice(&CRIU_LINK_DUMP_SEQ.to_ne_bytes());
    // nlmsg_pid stays 0.
    b[16] = libc::AF_PACKET as u8;
    b
}

/// One link as CRIU sees it in its dump: `ifinfomsg` header fields plus the attributes
/// `dump_one_link()` and its helpers read (`IFLA_IFNAME`, `IFLA_MTU`, `IFLA_ADDRESS`,
/// `IFLA_LINKINFO`/`IFLA_INFO_KIND`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CriuLink {
    /// `ifi_index`.
    pub ifindex: u32,
    /// `ifi_type`, an `ARPHRD_*` value (loopback 772, Ethernet/veth 1).
    pub link_type: u16,
    /// `ifi_flags` (`IFF_*` bits, e.g. `IFF_UP` = 0x1).
    pub flags: u32,
    /// `IFLA_IFNAME`; empty when the kernel sent none (CRIU would then fail `dump_one_netdev()`).
    pub name: String,
    /// `IFLA_MTU` in bytes.
    pub mtu: Option<u32>,
    /// `IFLA_ADDRESS` as lowercase `aa:bb:..` hex.
    pub address: Option<String>,
    /// `IFLA_LINKINFO` / `IFLA_INFO_KIND`, e.g. `"veth"`; `None` for `lo`.
    pub kind: Option<String>,
}

impl CriuLink {
    /// The line CRIU logs for this link, exactly: `"\tLD: Got link {ifindex}, type {type}"`
    /// (no trailing newline). Mirrors the `pr_info()` in `dump_one_link()`, `criu/net.c`.
    pub fn criu_log_line(&self) -> String {
        format!("\tLD: Got link {}, type {}", self.ifindex, self.link_type)
    }
}

/// Result of [`dump_links_criu`]: the request sent, the replies received, the decoded links.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkDump {
    /// The 20 request bytes, equal to [`criu_link_dump_request`].
    pub request: Vec<u8>,
    /// Every reply datagram concatenated exactly as received (including any message with a
    /// foreign seq), up to and including the datagram holding `NLMSG_DONE`.
    pub reply: Vec<u8>,
    /// The links decoded from `reply` by [`decode_link_replies`], in kernel order.
    pub links: Vec<CriuLink>,
}

/// Dump the links of the calling thread's netns exactly as CRIU does: a fresh
/// `NETLINK_ROUTE` socket (netlink-sys, no `NETLINK_GET_STRICT_CHK`), the 20 bytes of
/// [`criu_link_dump_request`], replies read with a 32 KiB buffer until `NLMSG_DONE`, messages
/// whose seq is not 24680 ignored.
///
/// Errors: `Io` when a syscall fails (errno in the source), `Kernel` when the kernel answers
/// `NLMSG_ERROR` (or a negative `NLMSG_DONE` status), `Decode` on malformed replies.
/// Mirrors `dump_links()` / `dump_one_link()` in `criu/net.c` (CRIU 4.x).
pub fn dump_links_criu() -> Result<LinkDump, NetlinkError> {
    const OP: &str = "dump_links_criu";
    let request = criu_link_dump_request();
    let mut sock = RtSocket::open(OP)?;
    let mut reply = Vec::with_capacity(64 * 1024);
    sock.dump_raw(&request, CRIU_LINK_DUMP_SEQ, &mut reply, OP)?;
    let links = decode_link_replies(&reply)?;
    Ok(LinkDump {
        request: request.to_vec(),
        reply,
        links,
    })
}

/// Decode concatenated link-dump reply bytes (as in [`LinkDump::reply`]) the way
/// `dump_one_link()` does: walk `nlmsghdr`s, skip messages whose seq is not
/// [`CRIU_LINK_DUMP_SEQ`] and `NLMSG_NOOP`, stop at `NLMSG_DONE`, decode every `RTM_NEWLINK` as
/// `ifinfomsg` (netlink-packet-route's `LinkHeader`) + IFLA attributes.
///
/// Every attribute header is bounds-checked (the TLV walk of CRIU's `nlmsg_parse()`); the
/// attributes CRIU reads (`IFLA_IFNAME`, `IFLA_MTU`, `IFLA_ADDRESS`, `IFLA_LINKINFO`, plus
/// `IFLA_OPERSTATE`) are decoded with netlink-packet-route's `LinkAttribute`. The others
/// (stats, `IFLA_AF_SPEC`, …) are not materialised: a full `LinkMessage::parse` of 10,001 links
/// costs ~4.5x more here (measured in tests/netlink_bench.rs).
///
/// Errors: `Kernel` for an `NLMSG_ERROR` (or negative `NLMSG_DONE` status) with our seq;
/// `Decode` for a truncated/inconsistent message, an `ifinfomsg` shorter than 16 bytes
/// ("No iflas for link"), a malformed attribute, or bytes that end before `NLMSG_DONE`.
pub fn decode_link_replies(bytes: &[u8]) -> Result<Vec<CriuLink>, NetlinkError> {
    const OP: &str = "decode_link_replies";
    // ~1.3 KiB per link on this kernel: pre-size to avoid regrowth.
    let mut links = Vec::with_capacity(bytes.len() / 1024 + 1);
    for msg in NlMsgIter::new(bytes, OP) {
        let msg = msg?;
        if msg.nlmsg_seq != CRIU_LINK_DUMP_SEQ {
            continue;
        }
        match msg.nlmsg_type {
            NLMSG_NOOP => continue,
            NLMSG_DONE => {
                check_done_status(&msg, OP)?;
                return Ok(links);
            }
            NLMSG_ERROR => {
                let code = nlmsgerr_code(&msg, OP)?;
                return Err(NetlinkError::Kernel {
                    op: OP.to_string(),
                    errno: -code,
                    seq: msg.nlmsg_seq,
                });
            }
            RTM_NEWLINK => {
                let f = parse_link_payload(msg.payload, msg.offset, OP)?;
                links.push(CriuLink {
                    ifindex: f.ifindex,
                    link_type: f.link_type,
                    flags: f.flags,
                    name: f.name.unwrap_or_default(),
                    mtu: f.mtu,
                    address: f.address,
                    kind: f.kind,
                });
            }
            _ => continue,
        }
    }
    Err(NetlinkError::decode(
        OP,
        bytes.len(),
        "replies end before NLMSG_DONE (truncated dump)",
    ))
}

/// `NLMSG_DONE` carries an `int` status; a negative one is a failed dump (`-errno`).
pub(crate) fn check_done_status(
    msg: &super::wire::NlMsg<'_>,
    op: &'static str,
) -> Result<(), NetlinkError> {
    if let Some(b) = msg.payload.get(0..4) {
        let status = i32::from_ne_bytes(b.try_into().expect("4 bytes"));
        if status < 0 {
            return Err(NetlinkError::Kernel {
                op: op.to_string(),
                errno: -status,
                seq: msg.nlmsg_seq,
            });
        }
    }
    Ok(())
}

/// Fields of one `RTM_NEWLINK` payload, shared by the CRIU decode and `NetState`.
#[derive(Debug, Default)]
pub(crate) struct LinkFields {
    pub ifindex: u32,
    pub link_type: u16,
    pub flags: u32,
    pub name: Option<String>,
    pub mtu: Option<u32>,
    pub address: Option<String>,
    pub kind: Option<String>,
    pub operstate: Option<String>,
}

/// Decode `ifinfomsg` + the IFLA attributes we keep from one `RTM_NEWLINK` payload.
pub(crate) fn parse_link_payload(
    payload: &[u8],
    offset: usize,
    op: &'static str,
) -> Result<LinkFields, NetlinkError> {
    if payload.len() < IFINFOMSG_LEN {
        return Err(NetlinkError::decode(
            op,
            offset,
            format!(
                "No iflas for link: payload {} bytes < ifinfomsg (16)",
                payload.len()
            ),
        ));
    }
    let header = LinkHeader::parse(payload)
        .map_err(|e| NetlinkError::decode(op, offset, format!("ifinfomsg: {e}")))?;
    let family = header.interface_family;
    let mut f = LinkFields {
        ifindex: header.index,
        link_type: u16::from(header.link_layer_type),
        flags: header.flags.bits(),
        ..LinkFields::default()
    };
    // The TLV walk of CRIU's nlmsg_parse(): every attribute header is bounds-checked; only
    // the attributes CRIU reads are handed to netlink-packet-route's `LinkAttribute`.
    let mut attrs = &payload[IFINFOMSG_LEN..];
    while !attrs.is_empty() {
        let bad =
            |reason: String| NetlinkError::decode(op, offset, format!("IFLA attribute: {reason}"));
        if attrs.len() < NLA_HDRLEN {
            return Err(bad(format!(
                "{} trailing bytes, shorter than nlattr",
                attrs.len()
            )));
        }
        let nla_len = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
        let kind = u16::from_ne_bytes([attrs[2], attrs[3]]) & NLA_TYPE_MASK;
        if nla_len < NLA_HDRLEN || nla_len > attrs.len() {
            return Err(bad(format!(
                "nla_len {nla_len} with {} bytes left",
                attrs.len()
            )));
        }
        if matches!(
            kind,
            IFLA_ADDRESS | IFLA_IFNAME | IFLA_MTU | IFLA_OPERSTATE | IFLA_LINKINFO
        ) {
            let nla = NlaBuffer::new(&attrs[..nla_len]);
            let attr = LinkAttribute::parse_with_param(&nla, family)
                .map_err(|e| bad(format!("type {kind}: {e}")))?;
            match attr {
                LinkAttribute::IfName(n) => f.name = Some(n),
                LinkAttribute::Mtu(m) => f.mtu = Some(m),
                LinkAttribute::Address(a) => f.address = Some(format_mac(&a)),
                LinkAttribute::OperState(s) => {
                    f.operstate = Some(s.to_string().to_ascii_lowercase())
                }
                LinkAttribute::LinkInfo(infos) => {
                    f.kind = infos.into_iter().find_map(|i| match i {
                        LinkInfo::Kind(k) => Some(k.to_string()),
                        _ => None,
                    })
                }
                _ => {}
            }
        }
        attrs = &attrs[nlmsg_align(nla_len).min(attrs.len())..];
    }
    Ok(f)
}

/// Format a hardware address as lowercase `aa:bb:cc:..`.
pub(crate) fn format_mac(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            s.push(':');
        }
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 0xf) as usize] as char);
    }
    s
}
