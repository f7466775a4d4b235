//! Section `state`: links + addresses + routes captured in-process (and written as canonical
//! JSON, as the rungs do) against the three `nsenter -t PID -n ip -j … show` processes a shell
//! harness would run, at 1 link (`lo` UP) and at 1,001 links (`lo` + 500 veth pairs).

use crate::Config;
use crate::netns::NetnsThread;
use crate::rawdump::raw_state_dumps;
use crate::stats::{Comparison, alternate, fmt_dur, median, note, repeat, timed, verdict};
use netprobe::netlink::{capture, create_veth_pairs, set_link_up};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// Runs the section.
pub fn run(cfg: &Config) -> Result<(), String> {
    let ns = Arc::new(NetnsThread::fresh()?);
    ns.run(|| set_link_up(1).map_err(|e| e.to_string()))
        .map_err(|e| format!("lo up: {e}"))?;
    for (prefix, pairs) in [("s", 0usize), ("t", 500)] {
        if pairs > 0 {
            ns.run(move || {
                create_veth_pairs(prefix, pairs)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| format!("create {pairs} veth pairs: {e}"))?;
        }
        let (links, addrs, routes, json_len) = ns
            .run(|| {
                capture().map(|s| {
                    (
                        s.links.len(),
                        s.addresses.len(),
                        s.routes.len(),
                        s.to_canonical_json().len(),
                    )
                })
            })
            .map_err(|e| format!("capture: {e}"))?;
        note(
            "state",
            format!(
                "netns: {links} links, {addrs} addresses, {routes} routes (all tables, IPv4 + \
                 IPv6); canonical JSON {json_len} bytes"
            ),
        );
        let nsp = ns.clone();
        let (np, peer) = alternate(
            1,
            cfg.runs,
            || {
                nsp.run(|| {
                    let (s, t) = timed(|| capture().map(|s| s.to_canonical_json()));
                    std::hint::black_box(s.expect("capture"));
                    t
                })
            },
            || ip_three(&ns).expect("nsenter … ip"),
        );
        let c = Comparison {
            section: "state",
            what: format!("links+addresses+routes, {links} links"),
            netprobe: &np,
            peer_name: "3x nsenter -t TID -n ip -j {link,addr,route} show",
            peer: &peer,
            notes: String::new(),
        };
        // Where netprobe's time goes: the kernel's three dumps (raw, not decoded), capture
        // (dumps + decode), canonical JSON alone.
        let floor = repeat(1, cfg.runs, || {
            ns.run(|| {
                let (d, t) = timed(raw_state_dumps);
                std::hint::black_box(d.expect("raw dumps").bytes);
                t
            })
        });
        let cap = repeat(1, cfg.runs, || {
            ns.run(|| {
                let (d, t) = timed(capture);
                std::hint::black_box(d.expect("capture"));
                t
            })
        });
        let st = ns.run(capture).map_err(|e| e.to_string())?;
        let json = repeat(1, cfg.runs, || {
            let (d, t) = timed(|| st.to_canonical_json());
            std::hint::black_box(d);
            t
        });
        let speedup = 1.0 / c.ratio();
        let notes = format!(
            "netprobe = capture + canonical JSON, in-process: capture {} + JSON {} | kernel \
             floor (3 raw dumps, no decode) {}, peer/floor {:.1}x | target >= 10x: {}",
            fmt_dur(median(&cap)),
            fmt_dur(median(&json)),
            fmt_dur(median(&floor)),
            median(&peer).as_secs_f64() / median(&floor).as_secs_f64(),
            verdict(speedup >= 10.0)
        );
        Comparison { notes, ..c }.print();
    }
    drop(ns);
    Ok(())
}

/// The shell harness: three processes in sequence, each output read to the end.
fn ip_three(ns: &NetnsThread) -> Result<Duration, String> {
    let tid = ns.tid().to_string();
    let (r, t) = timed(|| -> Result<(), String> {
        for what in ["link", "addr", "route"] {
            let o = Command::new("nsenter")
                .args(["-t", &tid, "-n", "ip", "-j", what, "show"])
                .stderr(Stdio::inherit())
                .output()
                .map_err(|e| e.to_string())?;
            if !o.status.success() {
                return Err(format!("ip {what}: exit {}", o.status));
            }
        }
        Ok(())
    });
    r?;
    Ok(t)
}
