//! Minimal rtnetlink for the holder: bring `lo` (ifindex 1) up and read a link's flags, in the
//! calling thread's network namespace.
//!
//! Source: `rtnetlink(7)` (`RTM_NEWLINK` with `ifi_change = IFF_UP`, ACK via `NLM_F_ACK`).
//! The `netlink` module has a fuller `set_link_up`; the lead dedupes later.

use std::io;

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::{LinkFlags, LinkMessage};
use netlink_sys::{Socket, protocols::NETLINK_ROUTE};

use super::error::NsError;

/// The loopback device's ifindex in every network namespace.
pub const LO_IFINDEX: u32 = 1;

const SEQ: u32 = 0x6e70_0001;

fn nl_err(op: &'static str, source: io::Error) -> NsError {
    NsError::Netlink { op, source }
}

fn request(
    op: &'static str,
    msg: RouteNetlinkMessage,
    flags: u16,
) -> Result<Vec<RouteNetlinkMessage>, NsError> {
    let mut socket = Socket::new(NETLINK_ROUTE).map_err(|e| nl_err(op, e))?;
    socket.bind_auto().map_err(|e| nl_err(op, e))?;
    let mut header = NetlinkHeader::default();
    header.flags = flags;
    header.sequence_number = SEQ;
    let mut packet = NetlinkMessage::new(header, NetlinkPayload::from(msg));
    packet.finalize();
    let mut buf = vec![0u8; packet.buffer_len()];
    packet.serialize(&mut buf);
    socket.send(&buf, 0).map_err(|e| nl_err(op, e))?;

    let mut replies = Vec::new();
    let mut rx = vec![0u8; 32 * 1024];
    loop {
        let n = socket
            .recv(&mut &mut rx[..], 0)
            .map_err(|e| nl_err(op, e))?;
        let mut off = 0;
        while off < n {
            let msg =
                NetlinkMessage::<RouteNetlinkMessage>::deserialize(&rx[off..n]).map_err(|e| {
                    nl_err(
                        op,
                        io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
                    )
                })?;
            let len = msg.header.length as usize;
            if len == 0 {
                return Err(nl_err(
                    op,
                    io::Error::new(io::ErrorKind::InvalidData, "zero-length netlink message"),
                ));
            }
            off += (len + 3) & !3;
            if msg.header.sequence_number != SEQ {
                continue;
            }
            match msg.payload {
                NetlinkPayload::Error(e) => {
                    return match e.code {
                        None => Ok(replies),
                        Some(_) => Err(nl_err(op, e.to_io())),
                    };
                }
                NetlinkPayload::Done(_) => return Ok(replies),
                NetlinkPayload::InnerMessage(m) => {
                    replies.push(m);
                    if flags & NLM_F_ACK == 0 {
                        return Ok(replies);
                    }
                }
                _ => {}
            }
        }
    }
}

/// Sets `IFF_UP` on `lo` (ifindex 1) in the calling thread's network namespace with one
/// `RTM_NEWLINK` (`ifi_change = IFF_UP`, `NLM_F_REQUEST | NLM_F_ACK`) and checks the kernel's
/// ACK. The kernel then assigns `127.0.0.1/8` and `::1/128` to `lo`.
///
/// Errors: `Netlink { op: "RTM_NEWLINK lo up", .. }` on socket/send/receive failure, decode
/// failure, or a NACK (e.g. `EPERM` without CAP_NET_ADMIN).
pub fn set_lo_up() -> Result<(), NsError> {
    let mut link = LinkMessage::default();
    link.header.index = LO_IFINDEX;
    link.header.flags = LinkFlags::Up;
    link.header.change_mask = LinkFlags::Up;
    request(
        "RTM_NEWLINK lo up",
        RouteNetlinkMessage::NewLink(link),
        NLM_F_REQUEST | NLM_F_ACK,
    )
    .map(|_| ())
}

/// Reads the `IFF_*` flags (`ifi_flags`, e.g. `libc::IFF_UP as u32`) of link `ifindex` in the
/// calling thread's network namespace with one `RTM_GETLINK` (no dump).
///
/// Errors: `Netlink { op: "RTM_GETLINK", .. }` on failure, a NACK (e.g. `ENODEV`), or when
/// the kernel returns no link message.
pub fn link_flags(ifindex: u32) -> Result<u32, NsError> {
    let op = "RTM_GETLINK";
    let mut link = LinkMessage::default();
    link.header.index = ifindex;
    let replies = request(op, RouteNetlinkMessage::GetLink(link), NLM_F_REQUEST)?;
    for r in replies {
        if let RouteNetlinkMessage::NewLink(m) = r
            && m.header.index == ifindex
        {
            return Ok(m.header.flags.bits());
        }
    }
    Err(nl_err(
        op,
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no RTM_NEWLINK reply for ifindex {ifindex}"),
        ),
    ))
}
