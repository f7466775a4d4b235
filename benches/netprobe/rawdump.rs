//! The physical floor of a link dump: CRIU's exact 20-byte `RTM_GETLINK` request on a raw
//! `NETLINK_ROUTE` socket, replies read with a 32 KiB buffer until `NLMSG_DONE`, headers
//! walked only to find the end — no attribute decoded, nothing allocated per link.

use std::io;

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_GETLINK: u16 = 18;
const CRIU_SEQ: u32 = 24680;

/// What the floor dump saw.
pub struct RawDump {
    /// Payload messages (links, or links + addresses + routes).
    pub links: usize,
    /// Reply bytes received.
    pub bytes: usize,
}

/// Sends CRIU's link-dump request in the calling thread's netns and reads the raw replies.
pub fn raw_link_dump() -> io::Result<RawDump> {
    let mut req = [0u8; 20];
    req[16] = libc::AF_PACKET as u8;
    raw_dump(RTM_GETLINK, &req)
}

/// The floor of a NetState capture: `RTM_GETLINK`, `RTM_GETADDR`, `RTM_GETROUTE` dumps (family
/// `AF_UNSPEC`, header-sized request bodies as `ip` sends them), raw replies, not decoded.
/// Returns the total messages and bytes.
pub fn raw_state_dumps() -> io::Result<RawDump> {
    let mut total = RawDump { links: 0, bytes: 0 };
    // ifinfomsg (16), ifaddrmsg (8), rtmsg (12) after the 16-byte header; all zero = AF_UNSPEC.
    for (ty, len) in [(RTM_GETLINK, 32usize), (22u16, 24), (26u16, 28)] {
        let req = vec![0u8; len];
        let d = raw_dump(ty, &req)?;
        total.links += d.links;
        total.bytes += d.bytes;
    }
    Ok(total)
}

/// One dump: `req` is the whole message (header bytes are filled in here).
fn raw_dump(ty: u16, req: &[u8]) -> io::Result<RawDump> {
    // SAFETY: plain socket syscalls on an fd we own and close on every path.
    unsafe {
        let fd = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let r = dump_on(fd, ty, req);
        libc::close(fd);
        r
    }
}

unsafe fn dump_on(fd: i32, ty: u16, req: &[u8]) -> io::Result<RawDump> {
    // SAFETY: sockaddr_nl is plain data; all zeroes is a valid value (pid 0: the kernel picks).
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as u16;
    let salen = std::mem::size_of::<libc::sockaddr_nl>() as u32;
    // SAFETY: `sa` is a valid sockaddr_nl of `salen` bytes; bind only reads it.
    if unsafe { libc::bind(fd, &sa as *const _ as *const libc::sockaddr, salen) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut req = req.to_vec();
    let len = req.len() as u32;
    req[0..4].copy_from_slice(&len.to_ne_bytes());
    req[4..6].copy_from_slice(&ty.to_ne_bytes());
    req[6..8].copy_from_slice(&0x301u16.to_ne_bytes());
    req[8..12].copy_from_slice(&CRIU_SEQ.to_ne_bytes());
    // SAFETY: `req` and `sa` are valid for the lengths given; sendto only reads them.
    let n = unsafe {
        libc::sendto(
            fd,
            req.as_ptr().cast(),
            req.len(),
            0,
            &sa as *const _ as *const libc::sockaddr,
            salen,
        )
    };
    if n != req.len() as isize {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 32 * 1024];
    let mut out = RawDump { links: 0, bytes: 0 };
    loop {
        // SAFETY: recv writes at most `buf.len()` bytes into `buf`, which we own.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let n = n as usize;
        out.bytes += n;
        let mut off = 0;
        while off + 16 <= n {
            let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap()) as usize;
            let ty = u16::from_ne_bytes(buf[off + 4..off + 6].try_into().unwrap());
            if len < 16 || off + len > n {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "bad nlmsg_len"));
            }
            match ty {
                NLMSG_DONE => return Ok(out),
                NLMSG_ERROR => {
                    return Err(io::Error::other("NLMSG_ERROR"));
                }
                _ => out.links += 1,
            }
            off += (len + 3) & !3;
        }
    }
}
