//! Section `state`: links + addresses + routes captured in-process (and written as canonical
//! JSON, as the rungs do) against the three `nsenter -t PID -n ip -j … show` processes a shell
//! harness would run, at 1 link (`lo` UP) and at 1,001 links (`lo` + 500 veth pairs).

use crate::Config;
use crate::netns::NetnsThread;
use crate::rawdump::raw_state_dumps;
use crate::stats::{Comparison, alternate, fmt_dur, median, note, repeat, timed, verdict};
use netprobe::netlink::{capture, create_veth_pairs, set_link_up};
use netprobe::ns::run_in_netns;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs the section.
pub fn run(cfg: &Config) -> Result<(), String> {
    let ns = NetnsThread::fresh()?;
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
            ns.settle();
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
        // netprobe as the rungs and the slot call it: from the calling thread,
        // `run_in_netns(/proc/…/ns/net, capture)` (entry, capture, switch back) + canonical
        // JSON, timed from outside, like the peer's nsenter.
        let path = ns.path();
        let (np, peer) = alternate(
            1,
            cfg.runs,
            || {
                let (s, t) =
                    timed(|| run_in_netns(&path, || capture().map(|s| s.to_canonical_json())));
                std::hint::black_box(s.expect("enter netns").expect("capture"));
                t
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
        // Back to back, and alternating with the peer as netprobe was.
        let raw = || {
            let (d, t) = timed(|| run_in_netns(&path, raw_state_dumps));
            std::hint::black_box(d.expect("enter netns").expect("raw dumps").bytes);
            t
        };
        let floor = repeat(1, cfg.runs, raw);
        let (floor_alt, _) = alternate(1, cfg.runs, raw, || ip_three(&ns).expect("nsenter … ip"));
        let cap = repeat(1, cfg.runs, || {
            let (d, t) = timed(|| run_in_netns(&path, capture));
            std::hint::black_box(d.expect("enter netns").expect("capture"));
            t
        });
        let st = ns.run(capture).map_err(|e| e.to_string())?;
        let json = repeat(1, cfg.runs, || {
            let (d, t) = timed(|| st.to_canonical_json());
            std::hint::black_box(d);
            t
        });
        let speedup = 1.0 / c.ratio();
        let notes = format!(
            "netprobe = run_in_netns(capture) + canonical JSON, in-process: capture {} + JSON {} \
             | kernel floor (3 raw dumps, no decode, same netns entry) {}, peer/floor {:.1}x; \
             alternating with the peer {} (peer/floor {:.1}x) | target >= 10x: {}",
            fmt_dur(median(&cap)),
            fmt_dur(median(&json)),
            fmt_dur(median(&floor)),
            median(&peer).as_secs_f64() / median(&floor).as_secs_f64(),
            fmt_dur(median(&floor_alt)),
            median(&peer).as_secs_f64() / median(&floor_alt).as_secs_f64(),
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
