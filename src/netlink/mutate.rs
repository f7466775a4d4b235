//! Mutations of the calling thread's netns over rtnetlink: every request is sent with
//! `NLM_F_ACK` and its `NLMSG_ERROR` checked, so a kernel refusal comes back as
//! [`NetlinkError::Kernel`] with the errno. Bulk veth creation batches many requests per `send`.

use std::net::IpAddr;

use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::{
    AddressFamily, RouteNetlinkMessage,
    address::{AddressAttribute, AddressMessage, AddressScope},
    link::{InfoData, InfoKind, InfoVeth, LinkAttribute, LinkFlags, LinkInfo, LinkMessage},
};

use super::NetlinkError;
use super::criu_dump::{IFF_UP, RTM_NEWLINK, parse_link_payload};
use super::wire::{NLMSG_HDRLEN, NlMsgIter, RtSocket};

/// `IFNAMSIZ - 1`: the longest link name the kernel accepts, in bytes.
pub const IFNAME_MAX_LEN: usize = 15;

/// Requests per `send` in batched operations. 256 veth requests are ~40 KiB to send and
/// 256 ACKs (36 bytes each) fit easily in the default receive buffer.
const BATCH_WINDOW: usize = 256;

fn check_name(op: &str, name: &str) -> Result<(), NetlinkError> {
    if name.is_empty() || name.len() > IFNAME_MAX_LEN || name.contains(['/', ' ', '\0']) {
        return Err(NetlinkError::InvalidArgument {
            op: op.to_string(),
            reason: format!("link name {name:?} must be 1..=15 bytes without '/', ' ' or NUL"),
        });
    }
    Ok(())
}

/// Look up the ifindex of link `name` in the calling thread's netns (`RTM_GETLINK` with
/// `IFLA_IFNAME`, not a dump).
///
/// Errors: `InvalidArgument` for a bad name, `Kernel` with errno 19 (`ENODEV`) when no such
/// link exists, `Io`/`Decode` otherwise.
pub fn link_index(name: &str) -> Result<u32, NetlinkError> {
    let op = format!("link_index({name:?})");
    check_name(&op, name)?;
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::IfName(name.to_string()));
    let mut sock = RtSocket::open(&op)?;
    let reply = sock.request_one(RouteNetlinkMessage::GetLink(msg), &op)?;
    for m in NlMsgIter::new(&reply, "link_index") {
        let m = m?;
        if m.nlmsg_type == RTM_NEWLINK {
            return Ok(parse_link_payload(m.payload, m.offset, "link_index")?.ifindex);
        }
    }
    Err(NetlinkError::decode(
        "link_index",
        NLMSG_HDRLEN,
        "reply is not RTM_NEWLINK",
    ))
}

/// Set `IFF_UP` on link `ifindex` (`RTM_SETLINK`, `ifi_flags = ifi_change = IFF_UP`), like
/// `ip link set dev X up`. For `lo` the kernel then adds 127.0.0.1/8 and ::1/128 itself.
///
/// Errors: `Kernel` (e.g. errno 19 `ENODEV` for an unknown ifindex), `Io`.
pub fn set_link_up(ifindex: u32) -> Result<(), NetlinkError> {
    let op = format!("set_link_up({ifindex})");
    let mut msg = LinkMessage::default();
    msg.header.index = ifindex;
    msg.header.flags = LinkFlags::from_bits_retain(IFF_UP);
    msg.header.change_mask = LinkFlags::from_bits_retain(IFF_UP);
    let mut sock = RtSocket::open(&op)?;
    sock.run_acked(vec![RouteNetlinkMessage::SetLink(msg)], 0, 1, &|_| {
        op.clone()
    })
}

/// Add address `addr/prefix_len` to link `ifindex` (`RTM_NEWADDR`, `NLM_F_CREATE|NLM_F_EXCL`;
/// IPv4 sets `IFA_LOCAL` and `IFA_ADDRESS`, IPv6 `IFA_ADDRESS`; scope host for loopback
/// addresses, global otherwise), like `ip addr add`.
///
/// Errors: `InvalidArgument` when `prefix_len` exceeds 32 (IPv4) or 128 (IPv6); `Kernel`
/// (errno 17 `EEXIST` if present, 19 `ENODEV` for an unknown ifindex), `Io`.
pub fn add_address(ifindex: u32, addr: IpAddr, prefix_len: u8) -> Result<(), NetlinkError> {
    let op = format!("add_address({ifindex}, {addr}/{prefix_len})");
    let (family, max) = match addr {
        IpAddr::V4(_) => (AddressFamily::Inet, 32),
        IpAddr::V6(_) => (AddressFamily::Inet6, 128),
    };
    if prefix_len > max {
        return Err(NetlinkError::InvalidArgument {
            op,
            reason: format!("prefix_len {prefix_len} > {max}"),
        });
    }
    let mut msg = AddressMessage::default();
    msg.header.family = family;
    msg.header.prefix_len = prefix_len;
    msg.header.index = ifindex;
    // Like iproute2: a 127/8 (or ::1) address gets RT_SCOPE_HOST; the kernel refuses a
    // loopback IPv4 address with global scope (EINVAL).
    if addr.is_loopback() {
        msg.header.scope = AddressScope::Host;
    }
    if addr.is_ipv4() {
        msg.attributes.push(AddressAttribute::Local(addr));
    }
    msg.attributes.push(AddressAttribute::Address(addr));
    let mut sock = RtSocket::open(&op)?;
    sock.run_acked(
        vec![RouteNetlinkMessage::NewAddress(msg)],
        NLM_F_CREATE | NLM_F_EXCL,
        1,
        &|_| op.clone(),
    )
}

fn veth_request(a: &str, b: &str) -> RouteNetlinkMessage {
    let mut peer = LinkMessage::default();
    peer.attributes.push(LinkAttribute::IfName(b.to_string()));
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::IfName(a.to_string()));
    msg.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::Kind(InfoKind::Veth),
        LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer))),
    ]));
    RouteNetlinkMessage::NewLink(msg)
}

/// Create one veth pair `a` <-> `b` (`RTM_NEWLINK`, kind `veth`, `VETH_INFO_PEER`,
/// `NLM_F_CREATE|NLM_F_EXCL`), both ends DOWN, like `ip link add a type veth peer name b`.
///
/// Errors: `InvalidArgument` for names longer than 15 bytes; `Kernel` (errno 17 `EEXIST`
/// when a name is taken), `Io`.
pub fn create_veth_pair(a: &str, b: &str) -> Result<(), NetlinkError> {
    let op = format!("create_veth_pair({a:?}, {b:?})");
    check_name(&op, a)?;
    check_name(&op, b)?;
    let mut sock = RtSocket::open(&op)?;
    sock.run_acked(
        vec![veth_request(a, b)],
        NLM_F_CREATE | NLM_F_EXCL,
        1,
        &|_| op.clone(),
    )
}

/// Create `n` veth pairs named `{prefix}{i}a` <-> `{prefix}{i}b` for `i` in `0..n`, on one
/// socket, up to 256 `RTM_NEWLINK` requests per `send`, every ACK checked. Returns the names
/// in creation order. `n` pairs add `2 * n` links.
///
/// Errors: `InvalidArgument` when `{prefix}{n-1}a` exceeds 15 bytes; `Kernel` for the first
/// refused request (the op names the pair; requests of the same batch after it were still
/// processed by the kernel), `Io`.
pub fn create_veth_pairs(prefix: &str, n: usize) -> Result<Vec<(String, String)>, NetlinkError> {
    let op = format!("create_veth_pairs({prefix:?}, {n})");
    let names: Vec<(String, String)> = (0..n)
        .map(|i| (format!("{prefix}{i}a"), format!("{prefix}{i}b")))
        .collect();
    if let Some((a, b)) = names.last() {
        check_name(&op, a)?;
        check_name(&op, b)?;
    }
    let msgs = names.iter().map(|(a, b)| veth_request(a, b)).collect();
    let mut sock = RtSocket::open(&op)?;
    sock.run_acked(msgs, NLM_F_CREATE | NLM_F_EXCL, BATCH_WINDOW, &|i| {
        format!("{op}: pair {:?}/{:?}", names[i].0, names[i].1)
    })?;
    Ok(names)
}

/// Delete link `ifindex` (`RTM_DELLINK`); deleting one end of a veth pair removes both.
///
/// Errors: `Kernel` (errno 19 `ENODEV` for an unknown ifindex), `Io`.
pub fn delete_link(ifindex: u32) -> Result<(), NetlinkError> {
    delete_links(&[ifindex])
}

/// Delete many links on one socket, batched like [`create_veth_pairs`].
///
/// Errors: `Kernel` for the first refused deletion (others in the batch still ran), `Io`.
pub fn delete_links(ifindexes: &[u32]) -> Result<(), NetlinkError> {
    let msgs = ifindexes
        .iter()
        .map(|&i| {
            let mut m = LinkMessage::default();
            m.header.index = i;
            RouteNetlinkMessage::DelLink(m)
        })
        .collect();
    let mut sock = RtSocket::open("delete_links")?;
    sock.run_acked(msgs, 0, BATCH_WINDOW, &|i| {
        format!("delete_link({})", ifindexes[i])
    })
}
