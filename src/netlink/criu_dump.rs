//! CRIU-exact link dump: the 20-byte `RTM_GETLINK` request CRIU sends, the raw replies, and a
//! decode that reads each reply the way `dump_one_link()` in `criu/net.c` (CRIU 4.x) does.

use netlink_packet_core::{NLA_TYPE_MASK, NLMSG_DONE, NLMSG_ERROR, NLMSG_NOOP};

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

/// Initial capacity of [`LinkDump::reply`]: 2 MiB.
const REPLY_RESERVE: usize = 2 << 20;

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
    // Each datagram is received straight into `reply` (no bounce buffer) and decoded while it
    // is still in cache. The reservation is address space only (pages are touched as datagrams
    // arrive) and covers ~1,300 links at ~1.5 KiB each before the first regrowth, so a
    // 1,000-link dump is never copied by a realloc.
    let mut reply = Vec::with_capacity(REPLY_RESERVE);
    let mut links = Vec::with_capacity(64);
    let mut done = false;
    sock.dump_raw_with(
        &request,
        CRIU_LINK_DUMP_SEQ,
        &mut reply,
        OP,
        |bytes, start| {
            done = decode_link_msgs(bytes, start, &mut links)?;
            Ok(())
        },
    )?;
    if !done {
        return Err(truncated(reply.len()));
    }
    Ok(LinkDump {
        request: request.to_vec(),
        reply,
        links,
    })
}

fn truncated(at: usize) -> NetlinkError {
    NetlinkError::decode(
        "decode_link_replies",
        at,
        "replies end before NLMSG_DONE (truncated dump)",
    )
}

/// Decode concatenated link-dump reply bytes (as in [`LinkDump::reply`]) the way
/// `dump_one_link()` does: walk `nlmsghdr`s, skip messages whose seq is not
/// [`CRIU_LINK_DUMP_SEQ`] and `NLMSG_NOOP`, stop at `NLMSG_DONE`, decode every `RTM_NEWLINK` as
/// `ifinfomsg` + IFLA attributes.
///
/// Every attribute header is bounds-checked (the TLV walk of CRIU's `nlmsg_parse()`); only
/// the attributes CRIU reads (`IFLA_IFNAME`, `IFLA_MTU`, `IFLA_ADDRESS`, `IFLA_LINKINFO`, plus
/// `IFLA_OPERSTATE`) are decoded, by hand (see `parse_link_payload`); the others (stats,
/// `IFLA_AF_SPEC`, …) are skipped unread.
///
/// Errors: `Kernel` for an `NLMSG_ERROR` (or negative `NLMSG_DONE` status) with our seq;
/// `Decode` for a truncated/inconsistent message, an `ifinfomsg` shorter than 16 bytes
/// ("No iflas for link"), a malformed attribute, or bytes that end before `NLMSG_DONE`.
pub fn decode_link_replies(bytes: &[u8]) -> Result<Vec<CriuLink>, NetlinkError> {
    // ~1.5 KiB per link on this kernel: pre-size to avoid regrowth.
    let mut links = Vec::with_capacity(bytes.len() / 1024 + 1);
    if decode_link_msgs(bytes, 0, &mut links)? {
        Ok(links)
    } else {
        Err(truncated(bytes.len()))
    }
}

/// Decodes the messages of `bytes[start..]` (error offsets are into `bytes`) into `links`;
/// `Ok(true)` once `NLMSG_DONE` with our seq is reached.
fn decode_link_msgs(
    bytes: &[u8],
    start: usize,
    links: &mut Vec<CriuLink>,
) -> Result<bool, NetlinkError> {
    const OP: &str = "decode_link_replies";
    for msg in NlMsgIter::starting_at(bytes, start, OP) {
        let msg = msg?;
        if msg.nlmsg_seq != CRIU_LINK_DUMP_SEQ {
            continue;
        }
        match msg.nlmsg_type {
            NLMSG_NOOP => continue,
            NLMSG_DONE => {
                check_done_status(&msg, OP)?;
                return Ok(true);
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
    Ok(false)
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

/// `IFLA_INFO_KIND` (1) inside `IFLA_LINKINFO`.
const IFLA_INFO_KIND: u16 = 1;

/// What is wrong with an attribute found by [`walk_attrs`] (becomes the reason of a
/// [`NetlinkError::Decode`]).
#[derive(Debug, thiserror::Error)]
enum AttrError {
    /// Fewer bytes left than an `nlattr` header.
    #[error("{0} trailing bytes, shorter than nlattr")]
    Trailing(usize),
    /// `nla_len` shorter than the header or past the end.
    #[error("nla_len {nla_len} with {left} bytes left")]
    BadLen { nla_len: usize, left: usize },
    /// A string attribute that is not UTF-8.
    #[error("type {kind}: invalid UTF-8 string: {source}")]
    Utf8 {
        kind: u16,
        source: std::str::Utf8Error,
    },
    /// A u32 attribute whose payload is not 4 bytes.
    #[error("type {kind}: u32 attribute of {len} bytes")]
    U32Len { kind: u16, len: usize },
    /// A u8 attribute with an empty payload.
    #[error("type {kind}: empty u8 attribute")]
    EmptyU8 { kind: u16 },
    /// A bad attribute nested in `IFLA_LINKINFO`.
    #[error("type {kind} (IFLA_LINKINFO): {inner}")]
    LinkInfo { kind: u16, inner: Box<AttrError> },
}

/// Walks the `nlattr`s of `bytes` (the TLV walk of CRIU's `nlmsg_parse()`), bounds-checking
/// every header, and calls `each(type, payload)` with `NLA_TYPE_MASK` applied.
fn walk_attrs<'a>(
    mut attrs: &'a [u8],
    mut each: impl FnMut(u16, &'a [u8]) -> Result<(), AttrError>,
) -> Result<(), AttrError> {
    while !attrs.is_empty() {
        if attrs.len() < NLA_HDRLEN {
            return Err(AttrError::Trailing(attrs.len()));
        }
        let nla_len = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
        let kind = u16::from_ne_bytes([attrs[2], attrs[3]]) & NLA_TYPE_MASK;
        if nla_len < NLA_HDRLEN || nla_len > attrs.len() {
            return Err(AttrError::BadLen {
                nla_len,
                left: attrs.len(),
            });
        }
        each(kind, &attrs[NLA_HDRLEN..nla_len])?;
        attrs = &attrs[nlmsg_align(nla_len).min(attrs.len())..];
    }
    Ok(())
}

/// A netlink string attribute: the bytes before one trailing NUL, as UTF-8 (what
/// netlink-packet-route's `parse_string` accepts).
fn nla_string(kind: u16, payload: &[u8]) -> Result<String, AttrError> {
    let b = payload.strip_suffix(&[0]).unwrap_or(payload);
    std::str::from_utf8(b)
        .map(str::to_owned)
        .map_err(|source| AttrError::Utf8 { kind, source })
}

/// `IF_OPER_*` names as netlink-packet-route's `State` prints them, lowercased.
fn operstate_name(v: u8) -> String {
    match v {
        0 => "unknown".into(),
        1 => "notpresent".into(),
        2 => "down".into(),
        3 => "lowerlayerdown".into(),
        4 => "testing".into(),
        5 => "dormant".into(),
        6 => "up".into(),
        _ => netlink_packet_route::link::State::from(v)
            .to_string()
            .to_ascii_lowercase(),
    }
}

/// Decode `ifinfomsg` + the IFLA attributes we keep from one `RTM_NEWLINK` payload.
///
/// Decoded by hand over a bounds-checked attribute walk (this is the hot path of a 10,000-link
/// dump: netlink-packet-core's attribute iterator plus `LinkAttribute::parse_with_param` cost
/// ~0.4 ms per 1,000 links here): `ifinfomsg` is read field by field (family u8, pad, type
/// u16, index i32, flags u32, change u32; host byte order), then `IFLA_IFNAME` (string),
/// `IFLA_MTU` (u32, exactly 4 bytes), `IFLA_ADDRESS` (bytes), `IFLA_OPERSTATE` (u8) and
/// `IFLA_LINKINFO`/`IFLA_INFO_KIND` (nested string). Other attributes are skipped unread.
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
    let u32_at = |i: usize| u32::from_ne_bytes(payload[i..i + 4].try_into().expect("4 bytes"));
    let mut f = LinkFields {
        ifindex: u32_at(4),
        link_type: u16::from_ne_bytes([payload[2], payload[3]]),
        flags: u32_at(8),
        ..LinkFields::default()
    };
    walk_attrs(&payload[IFINFOMSG_LEN..], |kind, p| {
        match kind {
            IFLA_IFNAME => f.name = Some(nla_string(kind, p)?),
            IFLA_MTU => {
                let b: [u8; 4] = p
                    .try_into()
                    .map_err(|_| AttrError::U32Len { kind, len: p.len() })?;
                f.mtu = Some(u32::from_ne_bytes(b));
            }
            IFLA_ADDRESS => f.address = Some(format_mac(p)),
            IFLA_OPERSTATE => {
                let b = p.first().ok_or(AttrError::EmptyU8 { kind })?;
                f.operstate = Some(operstate_name(*b));
            }
            IFLA_LINKINFO => {
                walk_attrs(p, |k, q| {
                    if k == IFLA_INFO_KIND && f.kind.is_none() {
                        f.kind = Some(nla_string(k, q)?);
                    }
                    Ok(())
                })
                .map_err(|e| AttrError::LinkInfo {
                    kind,
                    inner: Box::new(e),
                })?;
            }
            _ => {}
        }
        Ok(())
    })
    .map_err(|reason| NetlinkError::decode(op, offset, format!("IFLA attribute: {reason}")))?;
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
