//! The kernel's TCP socket tables (`/proc/net/tcp`, `/proc/net/tcp6`, or `/proc/PID/net/…` for
//! the network namespace of process PID), parsed: local and remote address, state, socket
//! inode. Used by the slot's published ports (who holds a taken host port, the quiesce proof
//! before a checkpoint, the cleanup proof that a port is closed) and by `slot status`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// A TCP state as the kernel numbers it (`include/net/tcp_states.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpState {
    /// 0x01.
    Established,
    /// 0x02.
    SynSent,
    /// 0x03.
    SynRecv,
    /// 0x04.
    FinWait1,
    /// 0x05.
    FinWait2,
    /// 0x06.
    TimeWait,
    /// 0x07.
    Close,
    /// 0x08.
    CloseWait,
    /// 0x09.
    LastAck,
    /// 0x0A.
    Listen,
    /// 0x0B.
    Closing,
    /// 0x0C.
    NewSynRecv,
    /// Any other number.
    Other(u8),
}

impl TcpState {
    fn from_hex(n: u8) -> TcpState {
        use TcpState::*;
        match n {
            1 => Established,
            2 => SynSent,
            3 => SynRecv,
            4 => FinWait1,
            5 => FinWait2,
            6 => TimeWait,
            7 => Close,
            8 => CloseWait,
            9 => LastAck,
            10 => Listen,
            11 => Closing,
            12 => NewSynRecv,
            n => Other(n),
        }
    }

    /// The state's name as `ss` prints it (`ESTAB`, `LISTEN`, `TIME-WAIT`, …).
    pub fn name(self) -> String {
        use TcpState::*;
        match self {
            Established => "ESTAB".into(),
            SynSent => "SYN-SENT".into(),
            SynRecv => "SYN-RECV".into(),
            FinWait1 => "FIN-WAIT-1".into(),
            FinWait2 => "FIN-WAIT-2".into(),
            TimeWait => "TIME-WAIT".into(),
            Close => "CLOSE".into(),
            CloseWait => "CLOSE-WAIT".into(),
            LastAck => "LAST-ACK".into(),
            Listen => "LISTEN".into(),
            Closing => "CLOSING".into(),
            NewSynRecv => "NEW-SYN-RECV".into(),
            Other(n) => format!("state 0x{n:02X}"),
        }
    }
}

/// One row of a TCP table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSocket {
    /// Local address and port.
    pub local: SocketAddr,
    /// Remote address and port (`0.0.0.0:0` / `[::]:0` for a listener).
    pub remote: SocketAddr,
    /// The state.
    pub state: TcpState,
    /// The socket's inode (0 for a TIME-WAIT row, which no fd holds): `/proc/PID/fd/N` links
    /// to `socket:[inode]`.
    pub inode: u64,
}

impl std::fmt::Display for TcpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} -> {}", self.state.name(), self.local, self.remote)
    }
}

/// Parses `ADDR:PORT` as the tables write it: IPv4 as 8 hex digits of the address in host
/// (little-endian) byte order, IPv6 as 32 hex digits, four such 32-bit words; the port as 4
/// hex digits. `None`: not that shape.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (a, p) = s.split_once(':')?;
    let port = u16::from_str_radix(p, 16).ok()?;
    let ip = match a.len() {
        8 => IpAddr::V4(Ipv4Addr::from(
            u32::from_str_radix(a, 16).ok()?.to_le_bytes(),
        )),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                let w = u32::from_str_radix(&a[i * 8..i * 8 + 8], 16).ok()?;
                b[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Parses one table's text (the header line and any malformed row are skipped).
pub fn parse_table(text: &str) -> Vec<TcpSocket> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some(TcpSocket {
                local: parse_addr(f.get(1)?)?,
                remote: parse_addr(f.get(2)?)?,
                state: TcpState::from_hex(u8::from_str_radix(f.get(3)?, 16).ok()?),
                inode: f.get(9)?.parse().ok()?,
            })
        })
        .collect()
}

/// Both tables under `dir` (`/proc/net` for netprobe's own namespace, `/proc/PID/net` for
/// process PID's): `tcp` and `tcp6`, concatenated. Errors: a table that cannot be read (a
/// kernel without IPv6 has no `tcp6`: that one is skipped).
pub fn read_tables(dir: &Path) -> std::io::Result<Vec<TcpSocket>> {
    let mut v = parse_table(&std::fs::read_to_string(dir.join("tcp"))?);
    match std::fs::read_to_string(dir.join("tcp6")) {
        Ok(t) => v.extend(parse_table(&t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    Ok(v)
}

/// The processes holding socket `inode` open: `(pid, comm)` of each `/proc/PID` with an fd
/// linking to `socket:[inode]`, ascending by pid (processes that vanish or hide their fds are
/// skipped).
pub fn socket_holders(inode: u64) -> Vec<(i32, String)> {
    let want = format!("socket:[{inode}]");
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        let holds = fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want.as_str()));
        if holds {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            out.push((pid, comm.trim().to_string()));
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:61A8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1388 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:1388 0100007F:D432 06 00000000:00000000 03:00001770 00000000     0        0 0 3
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:61A9 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 100 0 0 10 0
";

    #[test]
    fn rows_give_addresses_states_and_inodes() {
        let v = parse_table(TCP);
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].local, "127.0.0.1:25000".parse().unwrap());
        assert_eq!(v[0].state, TcpState::Listen);
        assert_eq!(v[0].inode, 4242);
        assert_eq!(v[1].remote, "127.0.0.1:54321".parse().unwrap());
        assert_eq!(v[1].state, TcpState::Established);
        assert_eq!(v[2].state, TcpState::TimeWait);
        assert_eq!(v[1].to_string(), "ESTAB 127.0.0.1:5000 -> 127.0.0.1:54321");
        let v6 = parse_table(TCP6);
        assert_eq!(v6[0].local, "[::1]:25001".parse().unwrap());
        assert_eq!(v6[0].inode, 777);
    }

    #[test]
    fn own_listener_is_found_with_its_holder() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let rows = read_tables(Path::new("/proc/net")).unwrap();
        let row = rows
            .iter()
            .find(|r| r.local == addr && r.state == TcpState::Listen)
            .expect("own listener listed");
        let holders = socket_holders(row.inode);
        assert!(
            holders.iter().any(|(p, _)| *p == std::process::id() as i32),
            "{holders:?}"
        );
    }
}
