//! Section `osworld`: what a benchmark pays per task reset, GNOME guest (`profiles/gnome.toml`)
//! with its guest server published on a host port (issue: the arm a benchmark can drive).
//!
//! Set-up (untimed): a slot provisioned with `--publish 127.0.0.1:PORT:5000` (runtime and CRIU
//! `$NETPROBE_BENCH_OSWORLD_RUNC` / `$NETPROBE_BENCH_OSWORLD_CRIU`, default runc 1.4.3 and CRIU
//! 4.3 from `/opt`; provision waits until the screen is ready for a snapshot), snapshotted,
//! restored. Then, alternating, each side starting from a running restored container:
//! - **reset to ready**: netprobe: `netprobe slot reset` (every gate) then `GET /screenshot`
//!   through the published host port, repeated until a PNG comes back (what OSWorld's
//!   `revert_to_snapshot` + the client's first `get_screenshot` cost); floor: bare `runc kill
//!   KILL` + `runc delete --force` of the running container, `runc restore -d` of the same
//!   images with the same bundle, root and id (CRIU through a `criu` first in `PATH`), then
//!   `GET /screenshot` from a thread inside the slot's network namespace until a PNG comes
//!   back. Target ≤ 1.25×.
//! - **screenshot through the port**: one 1920x1080 `GET /screenshot` through the published
//!   port (the holder's forwarder) against the same request on a direct connection inside the
//!   namespace. Target ≤ 1.05×.
//!
//! Absolute medians are printed beside each ratio, and the reset's per-step medians (its
//! `timings.json`). `slot cleanup` releases everything afterwards (container, holder, port).

use crate::Config;
use crate::slot::{new_slot_with, provision, snapshot};
use crate::stats::{Comparison, alternate, median, note, timed, verdict};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The host port the bench publishes the guest server on (`$NETPROBE_BENCH_OSWORLD_PORT`).
fn port() -> u16 {
    std::env::var("NETPROBE_BENCH_OSWORLD_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(25480)
}

fn env_path(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var).map_or_else(|| PathBuf::from(default), PathBuf::from)
}

/// One `GET /screenshot` (HTTP/1.0) to `addr` on a new connection: the body's length when the
/// answer is 200 with a PNG or JPEG body.
///
/// Errors: connect, I/O, another status, or a body that is neither image.
fn screenshot(addr: SocketAddr) -> Result<usize, String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /screenshot HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .map_err(|e| format!("send: {e}"))?;
    let mut buf = Vec::with_capacity(4 << 20);
    s.read_to_end(&mut buf).map_err(|e| format!("read: {e}"))?;
    let head_end = memchr::memmem::find(&buf, b"\r\n\r\n").ok_or("no HTTP header end")?;
    let status = String::from_utf8_lossy(&buf[..head_end.min(64)]);
    if !status.starts_with("HTTP/1.") || status.split_whitespace().nth(1) != Some("200") {
        return Err(format!("status {:?}", status.lines().next()));
    }
    let body = &buf[head_end + 4..];
    if body.starts_with(b"\x89PNG\r\n\x1a\n") || body.starts_with(b"\xff\xd8\xff") {
        Ok(body.len())
    } else {
        Err(format!("a {}-byte body that is no PNG or JPEG", body.len()))
    }
}

/// [`screenshot`] repeated every 20 ms until it succeeds or `timeout` passes.
fn first_screenshot(addr: SocketAddr, timeout: Duration) -> Result<usize, String> {
    let deadline = Instant::now() + timeout;
    loop {
        match screenshot(addr) {
            Ok(n) => return Ok(n),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// A private folder holding only a `criu` symlink to `criu`, to put first in the runtime's
/// `PATH` (runc 1.4 has no `--criu`).
fn criu_path_dir(criu: &Path) -> Result<tempfile::TempDir, String> {
    let d = tempfile::Builder::new()
        .prefix("netprobe-bench-osworld-criu-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    std::os::unix::fs::symlink(criu, d.path().join("criu")).map_err(|e| e.to_string())?;
    Ok(d)
}

/// Runs the section.
pub fn run(cfg: &Config) -> Result<(), String> {
    let runtime = env_path("NETPROBE_BENCH_OSWORLD_RUNC", "/opt/runc-1.4.3/sbin/runc");
    let criu = env_path("NETPROBE_BENCH_OSWORLD_CRIU", "/opt/criu-4.3/sbin/criu");
    let prof = env_path(
        "NETPROBE_BENCH_GNOME_PROFILE",
        concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/gnome.toml"),
    );
    let port = port();
    let publish = format!("127.0.0.1:{port}:5000");
    let mut slot = new_slot_with(Some(runtime.clone()), Some(criu.clone()))?;
    let prof_s = prof.to_string_lossy().to_string();
    let (_, d) = provision(&slot, &["--profile", &prof_s, "--publish", &publish])?;
    let (ck, d2) = snapshot(&mut slot)?;
    let (r, d3) = timed(|| slot.verb("restore").stdin(Stdio::null()).output());
    let r = r.map_err(|e| format!("slot restore: {e}"))?;
    if !r.status.success() {
        return Err(format!(
            "slot restore: {}",
            String::from_utf8_lossy(&r.stderr)
        ));
    }
    let holder: serde_json::Value = serde_json::from_slice(
        &std::fs::read(slot.slot_dir.join("holder.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let netns = PathBuf::from(format!("/proc/{}/ns/net", holder["pid"]));
    note(
        "osworld",
        format!(
            "GNOME slot ({} + {}, {prof_s}, published {publish}): provisioned (ready for a \
             snapshot) in {:.0} ms, snapshot in {:.0} ms, restore in {:.0} ms (untimed set-up)",
            runtime.display(),
            criu.display(),
            d.as_secs_f64() * 1e3,
            d2.as_secs_f64() * 1e3,
            d3.as_secs_f64() * 1e3,
        ),
    );
    let host = SocketAddr::from(([127, 0, 0, 1], port));
    let inside = SocketAddr::from(([127, 0, 0, 1], 5000));
    let r = reset_to_ready(cfg, &slot, (&ck, &criu), (host, inside), &netns)
        .and_then(|()| port_vs_direct(cfg, (host, inside), &netns));
    drop(slot);
    r
}

fn reset_to_ready(
    cfg: &Config,
    slot: &crate::slot::Slot,
    images: (&Path, &Path),
    addrs: (SocketAddr, SocketAddr),
    netns: &Path,
) -> Result<(), String> {
    let (ck, criu) = images;
    let (host, inside) = addrs;
    let path_dir = criu_path_dir(criu)?;
    let path = format!(
        "{}:{}",
        path_dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let bundle = slot.slot_dir.join("bundle");
    let err: std::cell::RefCell<Option<String>> = std::cell::RefCell::new(None);
    let mut steps = Vec::new();
    let mut n = 0u32;
    let (np, floor) = alternate(
        1,
        cfg.runs,
        || {
            let t = Instant::now();
            let out = slot.verb("reset").stdin(Stdio::null()).output();
            let shot = first_screenshot(host, Duration::from_secs(30));
            let d = t.elapsed();
            match (out, shot) {
                (Ok(o), Ok(_)) if o.status.success() => {}
                (Ok(o), s) => {
                    err.borrow_mut().get_or_insert(format!(
                        "slot reset exit {}: {} / screenshot: {s:?}",
                        o.status,
                        String::from_utf8_lossy(&o.stderr)
                    ));
                }
                (Err(e), _) => {
                    err.borrow_mut().get_or_insert(format!("slot reset: {e}"));
                }
            }
            steps.push(slot.last_timings("reset"));
            d
        },
        || {
            n += 1;
            let work = tempfile::Builder::new()
                .prefix("netprobe-bench-osworld-work-")
                .tempdir()
                .expect("temp dir");
            let t = Instant::now();
            slot.stop_container();
            let o = slot
                .runc()
                .env("PATH", &path)
                .args(["restore", "--detach", "--image-path"])
                .arg(ck)
                .arg("--work-path")
                .arg(work.path())
                .arg("--bundle")
                .arg(&bundle)
                .arg(&slot.container_id)
                .stdin(Stdio::null())
                .output();
            let shot = netprobe::ns::run_in_netns(netns, || {
                first_screenshot(inside, Duration::from_secs(30))
            });
            let d = t.elapsed();
            match (o, shot) {
                (Ok(o), Ok(Ok(_))) if o.status.success() => {}
                (o, s) => {
                    err.borrow_mut().get_or_insert(format!(
                        "floor run {n}: runc restore {o:?} / screenshot {s:?}"
                    ));
                }
            }
            d
        },
    );
    if let Some(e) = err.into_inner() {
        return Err(e);
    }
    let c = Comparison {
        section: "osworld",
        what: "task reset to ready: `netprobe slot reset` (every gate) + first screenshot \
               through the published port, vs bare runc kill + delete + restore of the same \
               images + first screenshot inside the netns"
            .into(),
        netprobe: &np,
        peer_name: "bare runc + direct screenshot",
        peer: &floor,
        notes: String::new(),
    };
    let ok = c.ratio() <= 1.25;
    Comparison {
        notes: format!(
            "target ratio <= 1.25: {} | absolute medians: netprobe {:.0} ms, floor {:.0} ms",
            verdict(ok),
            median(&np).as_secs_f64() * 1e3,
            median(&floor).as_secs_f64() * 1e3
        ),
        ..c
    }
    .print();
    crate::slot::print_step_medians("osworld", "reset", &steps, cfg.runs);
    Ok(())
}

fn port_vs_direct(
    cfg: &Config,
    addrs: (SocketAddr, SocketAddr),
    netns: &Path,
) -> Result<(), String> {
    let (host, inside) = addrs;
    let err: std::cell::RefCell<Option<String>> = std::cell::RefCell::new(None);
    let mut bytes = 0usize;
    let (np, direct) = alternate(
        2,
        cfg.runs.max(15),
        || {
            let (r, d) = timed(|| screenshot(host));
            match r {
                Ok(n) => bytes = n,
                Err(e) => {
                    err.borrow_mut()
                        .get_or_insert(format!("through the port: {e}"));
                }
            }
            d
        },
        || match netprobe::ns::run_in_netns(netns, || timed(|| screenshot(inside))) {
            Ok((Ok(_), d)) => d,
            Ok((Err(e), d)) => {
                err.borrow_mut().get_or_insert(format!("direct: {e}"));
                d
            }
            Err(e) => {
                err.borrow_mut()
                    .get_or_insert(format!("enter {}: {e}", netns.display()));
                Duration::ZERO
            }
        },
    );
    if let Some(e) = err.into_inner() {
        return Err(e);
    }
    let c = Comparison {
        section: "osworld",
        what: format!(
            "one 1920x1080 GET /screenshot ({bytes} bytes of PNG) through the published port \
             vs a direct connection inside the netns"
        ),
        netprobe: &np,
        peer_name: "direct connection in the netns",
        peer: &direct,
        notes: String::new(),
    };
    let ok = c.ratio() <= 1.05;
    Comparison {
        notes: format!(
            "target ratio <= 1.05: {} | absolute medians: port {:.1} ms, direct {:.1} ms",
            verdict(ok),
            median(&np).as_secs_f64() * 1e3,
            median(&direct).as_secs_f64() * 1e3
        ),
        ..c
    }
    .print();
    Ok(())
}
