//! The gates and proofs around a slot's published ports ([`crate::slot::resources::published_ports`]): gate
//! `published-ports` after provision, restore and reset (a request through each host port
//! reaches the guest); the quiesce around a snapshot's checkpoint (gate
//! `published-ports-quiesced`: the holder stopped accepting and no forwarded connection is left
//! in the slot's namespace); the cleanup proof that every host port is closed; and what `slot
//! status` shows of them, live.

use crate::ns::ProcessIdentity;
use crate::ns::forward;
use crate::proc::tcp::{TcpSocket, TcpState, read_tables};
use crate::slot::error::SlotError;
use crate::slot::gate::{GateId, Observed};
use crate::slot::record::verb_run::VerbRun;
use crate::slot::resources::published_ports;
use crate::slot::resources::published_ports::PublishedPort;
use crate::slot::state::SlotState;
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a connection through a published port with no HTTP check must stay open.
const HOLD_OPEN: Duration = Duration::from_millis(300);

/// How long the `published-ports` gate keeps trying one port.
const GATE_TIMEOUT: Duration = Duration::from_secs(3);

/// The bound of a quiesce (acknowledgement and no forwarded connection left).
pub const QUIESCE_TIMEOUT: Duration = Duration::from_secs(5);

/// The bound of a resume's acknowledgement.
const RESUME_TIMEOUT: Duration = Duration::from_secs(2);

/// The declared difference of a slot with published ports.
pub const CHECKPOINT_CLOSES_CONNECTIONS: &str = "Connections through a published port that are open when a snapshot is taken are reset before the checkpoint (the holder stops accepting and closes them; new ones wait in the listen backlog until the checkpoint ends): the runtime checkpoints without --tcp-established.";

/// The HTTP check of a guest port: the profile's `http` readiness check on that port, else the
/// guest server check (`GET /` → 200) when it is on that port; `None`: hold-open check.
fn http_check(st: &SlotState, port: u16) -> Option<(String, u16)> {
    if let Some(p) = &st.profile {
        for r in &p.profile.readiness {
            if let crate::profile::Readiness::Http {
                port: rp,
                path,
                status,
            } = r
                && *rp == port
            {
                return Some((path.clone(), *status));
            }
        }
    }
    crate::slot::profile_record::guest_check(st)
        .filter(|(p, ..)| *p == port)
        .map(|(_, path, status, _)| (path, status))
}

/// One try of one port: an HTTP request answered with `status`, or a connection that stays
/// open for [`HOLD_OPEN`]. Returns what was observed.
fn try_port(p: &PublishedPort, http: Option<&(String, u16)>) -> Observed {
    let mut s = TcpStream::connect_timeout(&p.host(), Duration::from_secs(1))
        .map_err(|e| format!("connect {}: {e}", p.host()))?;
    match http {
        Some((path, status)) => {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let req = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
            s.write_all(req.as_bytes())
                .map_err(|e| format!("send GET {path}: {e}"))?;
            let mut buf = Vec::new();
            let r = s.read_to_end(&mut buf);
            let text = String::from_utf8_lossy(&buf);
            let line = text.lines().next().unwrap_or("").to_string();
            if line.starts_with("HTTP/1.")
                && line.split_whitespace().nth(1) == Some(&status.to_string())
            {
                Ok(format!("GET {path} answered {line:?}"))
            } else {
                Err(format!(
                    "GET {path}: status line {line:?}{}",
                    r.err().map(|e| format!(" ({e})")).unwrap_or_default()
                ))
            }
        }
        None => {
            let _ = s.set_read_timeout(Some(HOLD_OPEN));
            let mut b = [0u8; 1];
            match s.read(&mut b) {
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    Ok(format!("connection held open {} ms", HOLD_OPEN.as_millis()))
                }
                Ok(0) => {
                    Err("connection closed by the forwarder (EOF): the guest refused it".into())
                }
                Ok(_) => Ok("connection open, the guest spoke first".into()),
                Err(e) => Err(format!("connection reset: {e}")),
            }
        }
    }
}

/// Gate `published-ports` (`when`: `provision`, `restore`, `reset`): for every published port,
/// from netprobe's (the host's) namespace, a request through `HOST_ADDR:HOST_PORT` reaches the
/// guest ([`try_port`], retried for up to [`GATE_TIMEOUT`]). Records fact
/// `published_ports_<when>` (per port what was observed). Nothing without published ports.
///
/// Errors: the failed gate (exit 1), naming each port and what was seen.
pub(crate) fn published_gate(
    run: &mut VerbRun,
    st: &SlotState,
    when: &str,
) -> Result<(), SlotError> {
    if st.published_ports.is_empty() {
        return Ok(());
    }
    let t = Instant::now();
    let mut seen = Vec::new();
    let mut ok = true;
    for p in &st.published_ports {
        let http = http_check(st, p.guest_port);
        let deadline = Instant::now() + GATE_TIMEOUT;
        let mut tries = 0;
        let r = loop {
            tries += 1;
            let r = try_port(p, http.as_ref());
            if r.is_ok() || Instant::now() >= deadline {
                break r;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        ok &= r.is_ok();
        let (proven, what) = match r {
            Ok(d) => (true, d),
            Err(d) => (false, d),
        };
        seen.push(json!({"port": p, "proven": proven, "observed": what, "tries": tries}));
    }
    run.took(&format!("{when}-published-ports"), t);
    let detail = seen
        .iter()
        .map(|s| {
            format!(
                "{}:{} -> guest {}: {} ({} tries)",
                s["port"]["host_addr"].as_str().unwrap_or(""),
                s["port"]["host_port"],
                s["port"]["guest_port"],
                s["observed"].as_str().unwrap_or(""),
                s["tries"]
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    run.fact(&format!("published_ports_{when}"), json!(seen));
    run.gate(
        GateId::PublishedPorts,
        if ok { Ok(detail) } else { Err(detail) },
    )
}

/// Rows of holder `pid`'s namespace (the slot's) on a guest port in a state CRIU cannot dump
/// without `--tcp-established` (neither LISTEN nor TIME-WAIT).
fn open_on_guest_ports(pid: i32, ports: &[u16]) -> std::io::Result<Vec<TcpSocket>> {
    let dir = PathBuf::from(format!("/proc/{pid}/net"));
    Ok(read_tables(&dir)?
        .into_iter()
        .filter(|r| !matches!(r.state, TcpState::Listen | TcpState::TimeWait))
        .filter(|r| ports.contains(&r.local.port()) || ports.contains(&r.remote.port()))
        .collect())
}

fn rows(v: &[TcpSocket]) -> String {
    match v.is_empty() {
        true => "none".into(),
        false => v
            .iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// A holder quiesced for a checkpoint; resumed (SIGUSR2) by [`Quiesced::resume`], on drop, or
/// on an interruption (its registration).
pub(crate) struct Quiesced {
    h: ProcessIdentity,
    on_signal: Option<crate::ns::cleanup::Registration>,
}

impl Quiesced {
    /// Resumes the holder and records fact `published_ports_resumed` (the ms its
    /// acknowledgement took, or why there was none: a holder that did not resume is reported
    /// by the next gate that goes through a port; `restore`/`reset` resume it again).
    pub(crate) fn resume(mut self, run: &mut VerbRun) {
        self.on_signal = None;
        let r = forward::resume(&self.h, RESUME_TIMEOUT);
        run.fact(
            "published_ports_resumed",
            match r {
                Ok(ms) => json!(format!("holder pid {} accepts again ({ms} ms)", self.h.pid)),
                Err(e) => json!(format!("NOT acknowledged: {e}")),
            },
        );
    }
}

impl Drop for Quiesced {
    fn drop(&mut self) {
        if self.on_signal.take().is_some() {
            let _ = forward::resume(&self.h, RESUME_TIMEOUT);
        }
    }
}

/// Before a snapshot's checkpoint, for a slot with published ports: holder `h` told to stop
/// accepting and reset every forwarded connection ([`forward::quiesce`]), then — within
/// [`QUIESCE_TIMEOUT`] in all — its namespace (the slot's, `/proc/<pid>/net/tcp{,6}`) proven
/// to hold no TCP socket on a guest port but listeners and TIME-WAIT rows. Gate
/// `published-ports-quiesced` records the connections seen before and after. `None` without
/// published ports.
///
/// Errors: the failed gate (exit 1); the holder is resumed on the way out.
pub(crate) fn quiesce_gate(
    run: &mut VerbRun,
    st: &SlotState,
    h: &ProcessIdentity,
) -> Result<Option<Quiesced>, SlotError> {
    if st.published_ports.is_empty() {
        return Ok(None);
    }
    let ports: Vec<u16> = st.published_ports.iter().map(|p| p.guest_port).collect();
    let before = open_on_guest_ports(h.pid, &ports).unwrap_or_default();
    let h2 = *h;
    let on_signal = crate::ns::cleanup::register_reporting(
        format!("published ports of holder pid {} (resume accepting)", h.pid),
        move || {
            Some(match forward::resume(&h2, RESUME_TIMEOUT) {
                Ok(_) => "holder accepts again".into(),
                Err(e) => format!("FAILED: {e}"),
            })
        },
    );
    let q = Quiesced {
        h: *h,
        on_signal: Some(on_signal),
    };
    let t = Instant::now();
    let r = match forward::quiesce(h, QUIESCE_TIMEOUT) {
        Err(e) => Err(e.to_string()),
        Ok(ack) => loop {
            match open_on_guest_ports(h.pid, &ports) {
                Ok(v) if v.is_empty() => {
                    break Ok(format!(
                        "holder pid {} stopped accepting and reset its forwarded connections (acknowledged in {ack} ms); on guest ports {ports:?} before: {}; after: none but listeners and TIME-WAIT ({} ms)",
                        h.pid,
                        rows(&before),
                        t.elapsed().as_millis()
                    ));
                }
                Ok(v) if t.elapsed() >= QUIESCE_TIMEOUT => {
                    break Err(format!(
                        "connections still open on guest ports {ports:?} after {} ms: {}",
                        QUIESCE_TIMEOUT.as_millis(),
                        rows(&v)
                    ));
                }
                Ok(_) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => break Err(format!("/proc/{}/net/tcp: {e}", h.pid)),
            }
        },
    };
    run.took("published-ports-quiesce", t);
    run.fact("published_ports_open_before_quiesce", before.len());
    run.gate(GateId::PublishedPortsQuiesced, r)?;
    Ok(Some(q))
}

/// Resumes holder `h` if the slot publishes ports (restore and reset: a snapshot whose resume
/// was lost, e.g. killed with SIGKILL, left it quiesced). Records fact `published_ports_resumed`.
pub(crate) fn resume_if_published(run: &mut VerbRun, st: &SlotState, h: &ProcessIdentity) {
    if st.published_ports.is_empty() {
        return;
    }
    Quiesced {
        h: *h,
        on_signal: None,
    }
    .resume(run);
}

/// Cleanup's proof, after the holder was stopped: no socket listens on any published host port
/// (`/proc/net/tcp{,6}` of netprobe's namespace: no LISTEN row on that port at that address or a
/// wildcard) and a bind test on it succeeds (closed at once). Records fact
/// `published_ports_closed`. Returns the detail for the `released` gate (None: no port was
/// published).
///
/// Errors: the problems, one sentence per port (still listening, naming who; `/proc/net/tcp`
/// unreadable; the bind test failed).
pub(crate) fn closed_proof(
    run: &mut VerbRun,
    st: &SlotState,
) -> Result<Option<String>, Vec<String>> {
    if st.published_ports.is_empty() {
        return Ok(None);
    }
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    let table = read_tables(Path::new("/proc/net"));
    for p in &st.published_ports {
        let listening: Vec<TcpSocket> = match &table {
            Ok(t) => t
                .iter()
                .filter(|r| r.state == TcpState::Listen && r.local.port() == p.host_port)
                .filter(|r| r.local.ip() == p.host_addr || r.local.ip().is_unspecified())
                .copied()
                .collect(),
            Err(e) => {
                bad.push(format!("{}: /proc/net/tcp unreadable ({e})", p.host()));
                continue;
            }
        };
        if !listening.is_empty() {
            bad.push(format!(
                "{} still listening: {}",
                p.host(),
                published_ports::port_holders(p.host())
            ));
            continue;
        }
        match std::net::TcpListener::bind(p.host()) {
            Ok(l) => {
                drop(l);
                ok.push(format!("{} closed", p.host()));
            }
            Err(e) => bad.push(format!(
                "{}: no listener, but a bind test failed: {e}",
                p.host()
            )),
        }
    }
    run.fact(
        "published_ports_closed",
        json!({"closed": ok, "problems": bad}),
    );
    match bad.is_empty() {
        true => Ok(Some(format!(
            "published ports {} (no LISTEN row in /proc/net/tcp or tcp6; bind test passed)",
            ok.join(", ")
        ))),
        false => Err(bad),
    }
}

/// `slot status`'s `live.published_ports`: per port whether a socket listens on it now and
/// whether the recorded holder's process holds it.
pub(crate) fn live(st: &SlotState) -> serde_json::Value {
    let table = read_tables(Path::new("/proc/net")).unwrap_or_default();
    let holder = st.holder.filter(|h| h.verify().is_ok()).map(|h| h.pid);
    let v: Vec<serde_json::Value> = st
        .published_ports
        .iter()
        .map(|p| {
            let rows: Vec<&TcpSocket> = table
                .iter()
                .filter(|r| r.state == TcpState::Listen && r.local.port() == p.host_port)
                .filter(|r| r.local.ip() == p.host_addr || r.local.ip().is_unspecified())
                .collect();
            let pids: Vec<i32> = rows
                .iter()
                .flat_map(|r| crate::proc::tcp::socket_holders(r.inode))
                .map(|(pid, _)| pid)
                .collect();
            let held = holder.is_some_and(|h| pids.contains(&h));
            json!({
                "host_addr": p.host_addr,
                "host_port": p.host_port,
                "guest_port": p.guest_port,
                "listening": !rows.is_empty(),
                "held_by_holder": held,
                "pids": pids,
            })
        })
        .collect();
    json!(v)
}
