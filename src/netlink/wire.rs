//! Low-level rtnetlink plumbing shared by the dump, capture and mutation code: one
//! `NETLINK_ROUTE` socket (netlink-sys), a `nlmsghdr` walker, dump and ACK loops.
//!
//! Nothing here is public outside `netlink`; the public API lives in the sibling modules.

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR, NLMSG_NOOP, NetlinkHeader, NetlinkMessage,
    NetlinkPayload,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

use super::NetlinkError;

/// Size of every `recv` buffer: 32 KiB, the size CRIU and iproute2 use, and the largest dump
/// datagram the kernel builds (`netlink_dump()` caps at 32 KiB).
pub(crate) const RECV_BUF_LEN: usize = 32 * 1024;

/// `sizeof(struct nlmsghdr)`.
pub(crate) const NLMSG_HDRLEN: usize = 16;

/// `NLMSG_ALIGN()`: round up to 4 bytes.
pub(crate) const fn nlmsg_align(len: usize) -> usize {
    (len + 3) & !3
}

/// One netlink message inside a byte buffer: header fields plus its payload slice.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NlMsg<'a> {
    /// Byte offset of the `nlmsghdr` in the walked buffer.
    pub offset: usize,
    pub nlmsg_type: u16,
    pub nlmsg_flags: u16,
    pub nlmsg_seq: u32,
    /// Bytes after the 16-byte header, `nlmsg_len - 16` long.
    pub payload: &'a [u8],
}

/// Walks concatenated netlink messages (`NLMSG_NEXT`), checking each `nlmsg_len` against the
/// bytes left; yields a `Decode` error (then stops) on a truncated or inconsistent header.
pub(crate) struct NlMsgIter<'a> {
    buf: &'a [u8],
    pos: usize,
    op: &'static str,
    failed: bool,
}

impl<'a> NlMsgIter<'a> {
    pub(crate) fn new(buf: &'a [u8], op: &'static str) -> Self {
        Self::starting_at(buf, 0, op)
    }

    /// Walks `buf[pos..]`; offsets (in messages and errors) stay relative to `buf`.
    pub(crate) fn starting_at(buf: &'a [u8], pos: usize, op: &'static str) -> Self {
        NlMsgIter {
            buf,
            pos,
            op,
            failed: false,
        }
    }
}

impl<'a> Iterator for NlMsgIter<'a> {
    type Item = Result<NlMsg<'a>, NetlinkError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        let fail = |this: &mut Self, reason: String| {
            this.failed = true;
            Some(Err(NetlinkError::decode(this.op, this.pos, reason)))
        };
        if rest.len() < NLMSG_HDRLEN {
            return fail(
                self,
                format!("{} bytes left, shorter than a nlmsghdr (16)", rest.len()),
            );
        }
        let len = u32::from_ne_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
        if len < NLMSG_HDRLEN || len > rest.len() {
            return fail(
                self,
                format!("nlmsg_len {len} with {} bytes left", rest.len()),
            );
        }
        let msg = NlMsg {
            offset: self.pos,
            nlmsg_type: u16::from_ne_bytes([rest[4], rest[5]]),
            nlmsg_flags: u16::from_ne_bytes([rest[6], rest[7]]),
            nlmsg_seq: u32::from_ne_bytes(rest[8..12].try_into().expect("4 bytes")),
            payload: &rest[NLMSG_HDRLEN..len],
        };
        self.pos += nlmsg_align(len).min(rest.len());
        Some(Ok(msg))
    }
}

/// The `error` field of a `struct nlmsgerr` payload (0 = ACK, negative = -errno).
pub(crate) fn nlmsgerr_code(msg: &NlMsg<'_>, op: &'static str) -> Result<i32, NetlinkError> {
    msg.payload
        .get(0..4)
        .map(|b| i32::from_ne_bytes(b.try_into().expect("4 bytes")))
        .ok_or_else(|| NetlinkError::decode(op, msg.offset, "NLMSG_ERROR shorter than 4 bytes"))
}

/// Outcome of scanning one datagram for the end of a dump.
pub(crate) enum DumpEnd {
    /// No `NLMSG_DONE`/`NLMSG_ERROR` with our seq yet.
    More,
    /// The dump ended (`NLMSG_DONE` or `NLMSG_ERROR` with our seq).
    Done,
}

/// Scan one received datagram for the `NLMSG_DONE` / `NLMSG_ERROR` that ends dump `seq`.
pub(crate) fn scan_dump_end(
    datagram: &[u8],
    seq: u32,
    op: &'static str,
) -> Result<DumpEnd, NetlinkError> {
    for msg in NlMsgIter::new(datagram, op) {
        let msg = msg?;
        if msg.nlmsg_seq == seq && (msg.nlmsg_type == NLMSG_DONE || msg.nlmsg_type == NLMSG_ERROR) {
            return Ok(DumpEnd::Done);
        }
    }
    Ok(DumpEnd::More)
}

/// A connected `NETLINK_ROUTE` socket in the calling thread's netns, with a sequence counter
/// and a reusable 32 KiB receive buffer. `NETLINK_GET_STRICT_CHK` is never set.
pub(crate) struct RtSocket {
    sock: Socket,
    next_seq: u32,
    buf: Vec<u8>,
}

impl RtSocket {
    /// `socket(AF_NETLINK, SOCK_DGRAM|SOCK_CLOEXEC, NETLINK_ROUTE)` + `connect` to the kernel
    /// (pid 0). The socket belongs to the netns of the calling thread at this moment.
    pub(crate) fn open(op: &str) -> Result<Self, NetlinkError> {
        let sock = Socket::new(NETLINK_ROUTE)
            .map_err(|e| NetlinkError::io(format!("{op}: socket(NETLINK_ROUTE)"), e))?;
        sock.connect(&SocketAddr::new(0, 0))
            .map_err(|e| NetlinkError::io(format!("{op}: connect"), e))?;
        Ok(RtSocket {
            sock,
            next_seq: 1,
            buf: Vec::with_capacity(RECV_BUF_LEN),
        })
    }

    /// Next sequence number (starts at 1, never 0, never the CRIU dump seq by accident).
    pub(crate) fn seq(&mut self) -> u32 {
        let s = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1).max(1);
        s
    }

    /// Send one buffer (one or many concatenated requests) in a single `send`.
    pub(crate) fn send(&self, bytes: &[u8], op: &str) -> Result<(), NetlinkError> {
        let n = self
            .sock
            .send(bytes, 0)
            .map_err(|e| NetlinkError::io(format!("{op}: send"), e))?;
        if n != bytes.len() {
            return Err(NetlinkError::io(
                format!("{op}: send"),
                std::io::Error::other(format!("short send {n} of {}", bytes.len())),
            ));
        }
        Ok(())
    }

    /// Receive one datagram into the internal 32 KiB buffer and return it.
    pub(crate) fn recv(&mut self, op: &str) -> Result<&[u8], NetlinkError> {
        self.buf.clear();
        loop {
            match self.sock.recv(&mut self.buf, 0) {
                Ok(n) if n > RECV_BUF_LEN => {
                    return Err(NetlinkError::io(
                        format!("{op}: recv"),
                        std::io::Error::other(format!("datagram of {n} bytes truncated to 32 KiB")),
                    ));
                }
                Ok(_) => return Ok(&self.buf),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(NetlinkError::io(format!("{op}: recv"), e)),
            }
        }
    }

    /// Receive one datagram of at most [`RECV_BUF_LEN`] bytes (the buffer size CRIU passes,
    /// which also bounds the datagrams the kernel builds) straight into the spare capacity of
    /// `out`, appending it; returns the offset in `out` where it starts.
    pub(crate) fn recv_append(
        &mut self,
        out: &mut Vec<u8>,
        op: &str,
    ) -> Result<usize, NetlinkError> {
        use std::os::fd::AsRawFd;
        let start = out.len();
        out.reserve(RECV_BUF_LEN);
        loop {
            let spare = out.spare_capacity_mut();
            // SAFETY: `spare` has at least RECV_BUF_LEN writable bytes; recv writes at most
            // that many and returns how many it wrote.
            let n = unsafe {
                libc::recv(
                    self.sock.as_raw_fd(),
                    spare.as_mut_ptr().cast(),
                    RECV_BUF_LEN,
                    0,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(NetlinkError::io(format!("{op}: recv"), e));
            }
            // SAFETY: the kernel initialised the first `n` (≤ RECV_BUF_LEN) spare bytes.
            unsafe { out.set_len(start + n as usize) };
            return Ok(start);
        }
    }

    /// Send a dump request carrying `seq` and append every datagram received, exactly as
    /// received, to `out` until a datagram holds `NLMSG_DONE` or `NLMSG_ERROR` with `seq`.
    /// After each datagram, `on_datagram(out, start)` sees the bytes so far and where the new
    /// datagram starts (to decode it while it is in cache).
    pub(crate) fn dump_raw_with(
        &mut self,
        request: &[u8],
        seq: u32,
        out: &mut Vec<u8>,
        op: &'static str,
        mut on_datagram: impl FnMut(&[u8], usize) -> Result<(), NetlinkError>,
    ) -> Result<(), NetlinkError> {
        self.send(request, op)?;
        loop {
            let start = self.recv_append(out, op)?;
            let end = scan_dump_end(&out[start..], seq, op)?;
            on_datagram(out, start)?;
            if let DumpEnd::Done = end {
                return Ok(());
            }
        }
    }

    /// Send `msgs` with `NLM_F_REQUEST|NLM_F_ACK|extra_flags`, batching up to `window` requests
    /// per `send`, and wait for every ACK. The kernel processes each request of a batch on its
    /// own; the first refusal is returned (after the window's remaining ACKs are drained) with
    /// the name produced by `op_of(index)`.
    pub(crate) fn run_acked(
        &mut self,
        msgs: Vec<RouteNetlinkMessage>,
        extra_flags: u16,
        window: usize,
        op_of: &dyn Fn(usize) -> String,
    ) -> Result<(), NetlinkError> {
        let window = window.max(1);
        let mut out = Vec::new();
        let mut iter = msgs.into_iter().enumerate().peekable();
        while iter.peek().is_some() {
            out.clear();
            let mut pending: Vec<(u32, usize)> = Vec::with_capacity(window);
            for (idx, msg) in iter.by_ref().take(window) {
                let seq = self.seq();
                append_request(&mut out, msg, NLM_F_REQUEST | NLM_F_ACK | extra_flags, seq);
                pending.push((seq, idx));
            }
            self.send(&out, &op_of(pending[0].1))?;
            let mut first_err: Option<NetlinkError> = None;
            let mut acked = 0usize;
            while acked < pending.len() {
                let op = op_of(pending[acked.min(pending.len() - 1)].1);
                let dgram = self.recv(&op)?;
                for msg in NlMsgIter::new(dgram, "ack") {
                    let msg = msg?;
                    if msg.nlmsg_type != NLMSG_ERROR {
                        continue;
                    }
                    let Some(&(seq, idx)) = pending.iter().find(|(s, _)| *s == msg.nlmsg_seq)
                    else {
                        continue;
                    };
                    acked += 1;
                    let code = nlmsgerr_code(&msg, "ack")?;
                    if code != 0 && first_err.is_none() {
                        first_err = Some(NetlinkError::Kernel {
                            op: op_of(idx),
                            errno: -code,
                            seq,
                        });
                    }
                }
            }
            if let Some(e) = first_err {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Send one non-dump request and return the payload-carrying reply message bytes
    /// (`nlmsghdr` included) with our seq, or the kernel's refusal.
    pub(crate) fn request_one(
        &mut self,
        msg: RouteNetlinkMessage,
        op: &str,
    ) -> Result<Vec<u8>, NetlinkError> {
        let seq = self.seq();
        let mut out = Vec::new();
        append_request(&mut out, msg, NLM_F_REQUEST, seq);
        self.send(&out, op)?;
        loop {
            let dgram = self.recv(op)?;
            for m in NlMsgIter::new(dgram, "request_one") {
                let m = m?;
                if m.nlmsg_seq != seq || m.nlmsg_type == NLMSG_NOOP {
                    continue;
                }
                if m.nlmsg_type == NLMSG_ERROR {
                    let code = nlmsgerr_code(&m, "request_one")?;
                    if code != 0 {
                        return Err(NetlinkError::Kernel {
                            op: op.to_string(),
                            errno: -code,
                            seq,
                        });
                    }
                    continue;
                }
                let len = NLMSG_HDRLEN + m.payload.len();
                return Ok(dgram[m.offset..m.offset + len].to_vec());
            }
        }
    }
}

/// Serialise `msg` (netlink-packet-route) with the given flags and seq, pid 0, appending the
/// aligned bytes to `out`.
pub(crate) fn append_request(out: &mut Vec<u8>, msg: RouteNetlinkMessage, flags: u16, seq: u32) {
    let mut header = NetlinkHeader::default();
    header.flags = flags;
    header.sequence_number = seq;
    let mut nl = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(msg));
    nl.finalize();
    let start = out.len();
    let len = nl.buffer_len();
    out.resize(start + nlmsg_align(len), 0);
    nl.serialize(&mut out[start..start + len]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(len: u32, ty: u16, seq: u32, extra: usize) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&len.to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.resize(m.len() + extra, 0);
        m
    }

    #[test]
    fn walks_aligned_messages_and_rejects_bad_lengths() {
        // 18-byte message is padded to 20 before the next header.
        let mut b = msg(18, 16, 7, 4);
        b.extend(msg(20, NLMSG_DONE, 7, 4));
        let v: Vec<_> = NlMsgIter::new(&b, "t").map(|m| m.unwrap()).collect();
        assert_eq!(v.len(), 2);
        assert_eq!(
            (v[0].payload.len(), v[1].offset, v[1].nlmsg_type),
            (2, 20, NLMSG_DONE)
        );
        assert!(matches!(scan_dump_end(&b, 7, "t"), Ok(DumpEnd::Done)));
        assert!(matches!(scan_dump_end(&b, 8, "t"), Ok(DumpEnd::More)));

        for bad in [msg(15, 16, 1, 0), msg(40, 16, 1, 0), b[..10].to_vec()] {
            let r: Vec<_> = NlMsgIter::new(&bad, "t").collect();
            assert_eq!(r.len(), 1);
            assert!(matches!(r[0], Err(NetlinkError::Decode { .. })));
        }
    }
}
