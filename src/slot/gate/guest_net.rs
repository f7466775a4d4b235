//! The slot's network facts: the `lo-up-127` detail of a [`NetState`] captured with the shared
//! [`crate::ns::capture_netstate`] (the same canonical JSON the probe ladder records, so probe
//! and slot evidence compare directly), and the guest-server check (one new TCP connection
//! opened while the thread is in the namespace).

use crate::netlink::NetState;
use crate::ns;
use crate::slot::gate::Observed;
use std::path::Path;
use std::time::{Duration, Instant};

/// Path, relative to an image root, of the file declaring the guest server's TCP port on
/// 127.0.0.1 (one decimal number). The embedded image serves on [`crate::oci::INIT_HTTP_PORT`]
/// without it; a `--image` directory or qcow2 declares its server with this file, and an image
/// without it has no guest server to check (the `guest-http` gate is then recorded as not
/// applicable).
pub const GUEST_PORT_FILE: &str = "etc/netprobe-guest-port";

/// The observed facts behind [`NetState::lo_up_with_127`], for the `lo-up-127` gate detail:
/// `lo` ifindex, UP or DOWN, and its `inet` addresses (`a.b.c.d/len`).
pub fn lo_detail(st: &NetState) -> String {
    match st.lo() {
        None => "no link named lo".into(),
        Some(lo) => {
            let addrs: Vec<String> = st
                .addresses
                .iter()
                .filter(|a| a.ifindex == lo.ifindex && a.family == "inet")
                .map(|a| format!("{}/{}", a.address, a.prefix_len))
                .collect();
            format!(
                "lo ifindex {} {}; inet [{}]",
                lo.ifindex,
                if lo.up { "UP" } else { "DOWN" },
                addrs.join(", ")
            )
        }
    }
}

/// HTTP `GET /` (HTTP/1.0) to `127.0.0.1:port` over a new connection opened from a thread inside
/// the network namespace at `netns`, retried every 100 ms until `timeout`. Returns the status
/// line of the first `200` answer.
///
/// Errors: the namespace cannot be entered, or no `200` within `timeout` (the last connect
/// error or status line is named).
pub fn http_get_in_netns(netns: &Path, port: u16, timeout: Duration) -> Observed {
    http_check_in_netns(netns, port, "/", 200, timeout)
}

/// HTTP `GET path` (HTTP/1.0) to `127.0.0.1:port` from a thread inside the network namespace
/// at `netns`, retried every 100 ms until `timeout`, until the answer's status is `status` (a
/// profile's `http` readiness check). Returns the matching status line.
///
/// Errors: the namespace cannot be entered, or no `status` answer within `timeout` (the last
/// connect error or status line is named).
pub fn http_check_in_netns(
    netns: &Path,
    port: u16,
    path: &str,
    status: u16,
    timeout: Duration,
) -> Observed {
    let want = status.to_string();
    let req = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    ns::run_in_netns(netns, || {
        use std::io::{Read, Write};
        let deadline = Instant::now() + timeout;
        let mut last = String::from("no attempt");
        while Instant::now() < deadline {
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Ok(mut s) => {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                    let _ = s.write_all(req.as_bytes());
                    let mut buf = Vec::new();
                    let _ = s.read_to_end(&mut buf);
                    let text = String::from_utf8_lossy(&buf);
                    let line = text.lines().next().unwrap_or("").to_string();
                    if line.starts_with("HTTP/1.")
                        && line.split_whitespace().nth(1) == Some(want.as_str())
                    {
                        return Ok(line);
                    }
                    last = format!("status line {line:?}");
                }
                Err(e) => last = format!("connect 127.0.0.1:{port}: {e}"),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!(
            "no {want} for GET {path} within {} ms: {last}",
            timeout.as_millis()
        ))
    })
    .map_err(|e| format!("enter {}: {e}", netns.display()))?
}

/// A TCP connect to `127.0.0.1:port` from a thread inside the network namespace at `netns`
/// (a profile's `tcp` readiness check), retried every 100 ms until `timeout`; the connection is
/// closed at once. Returns `"connected to 127.0.0.1:<port> after <n> attempt(s)"`.
///
/// Errors: the namespace cannot be entered, or no connection within `timeout` (the last connect
/// error is named).
pub fn tcp_connect_in_netns(netns: &Path, port: u16, timeout: Duration) -> Observed {
    ns::run_in_netns(netns, || {
        let deadline = Instant::now() + timeout;
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let left = deadline.saturating_duration_since(Instant::now());
            let r = std::net::TcpStream::connect_timeout(
                &addr,
                left.clamp(Duration::from_millis(1), Duration::from_secs(1)),
            );
            match r {
                Ok(_) => {
                    return Ok(format!(
                        "connected to 127.0.0.1:{port} after {attempts} attempt(s)"
                    ));
                }
                Err(e) if Instant::now() + Duration::from_millis(100) >= deadline => {
                    return Err(format!(
                        "no TCP connection to 127.0.0.1:{port} within {} ms ({attempts} attempts): {e}",
                        timeout.as_millis()
                    ));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    })
    .map_err(|e| format!("enter {}: {e}", netns.display()))?
}
