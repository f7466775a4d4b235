//! Section `links`: the CRIU-exact link dump + decode against `ip -j link show` in the same
//! netns, at about 10, 1,000 and 10,000 links, with the kernel's own dump (raw replies, not
//! decoded) measured beside it as the floor.

use crate::Config;
use crate::netns::NetnsThread;
use crate::rawdump::raw_link_dump;
use crate::stats::{Comparison, alternate, fmt_dur, median, note, repeat, timed, verdict};
use netprobe::netlink::{create_veth_pairs, decode_link_replies, dump_links_criu};
use netprobe::ns::run_in_netns;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs the section.
pub fn run(cfg: &Config) -> Result<(), String> {
    let ns = NetnsThread::fresh()?;
    // veth pairs added per step (names `{prefix}{i}a`/`b`): lo + 2 * pairs links in total.
    let steps: &[(&str, usize)] = if cfg.quick {
        &[("a", 5), ("b", 495)]
    } else {
        &[("a", 5), ("b", 495), ("c", 4500)]
    };
    let mut growth: Vec<(usize, f64)> = Vec::new();
    for &(prefix, pairs) in steps {
        let (r, t) = timed(|| {
            ns.run(move || {
                create_veth_pairs(prefix, pairs)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
        });
        r.map_err(|e| format!("create {pairs} veth pairs: {e}"))?;
        ns.settle();
        let links = ns.run(|| dump_links_criu().map(|d| d.links.len()));
        let links = links.map_err(|e| format!("dump_links_criu: {e}"))?;
        note(
            "links",
            format!(
                "netns now has {links} links (+{pairs} veth pairs in {})",
                fmt_dur(t)
            ),
        );
        let ip_links = ip_link_count(&ns)?;
        if ip_links != links {
            return Err(format!("ip sees {ip_links} links, netprobe {links}"));
        }
        // netprobe as the kernel rung calls it: from the calling thread,
        // `run_in_netns(/proc/…/ns/net, dump_links_criu)` (entry, dump + decode, switch back),
        // timed from outside, like the peer's nsenter.
        let path = ns.path();
        let (np, peer) = alternate(
            1,
            cfg.runs,
            || {
                let (d, t) = timed(|| run_in_netns(&path, dump_links_criu));
                std::hint::black_box(d.expect("enter netns").expect("dump_links_criu"));
                t
            },
            || ip_link_show(&ns).expect("ip -j link show"),
        );
        // The floor: the kernel's own dump, raw replies read and not decoded (same entry);
        // back to back, and alternating with the peer as netprobe was (a dump right after an
        // `ip` process is slower: caches and the idle vCPU, not netprobe's code).
        let raw = || {
            let (d, t) = timed(|| run_in_netns(&path, raw_link_dump));
            std::hint::black_box(d.expect("enter netns").expect("raw dump").links);
            t
        };
        let floor = repeat(1, cfg.runs, raw);
        let (floor_alt, _) = alternate(1, cfg.runs, raw, || {
            ip_link_show(&ns).expect("ip -j link show")
        });
        // Decode alone, over one captured reply.
        let reply = ns.run(|| dump_links_criu().map(|d| d.reply));
        let reply = reply.map_err(|e| e.to_string())?;
        let decode = repeat(1, cfg.runs, || {
            let (d, t) = timed(|| decode_link_replies(&reply));
            std::hint::black_box(d.expect("decode"));
            t
        });
        let per = |d: Duration| d.as_secs_f64() * 1e6 / links as f64;
        let c = Comparison {
            section: "links",
            what: format!("CRIU-exact dump + decode, {links} links"),
            netprobe: &np,
            peer_name: "nsenter --net=… ip -j link show",
            peer: &peer,
            notes: String::new(),
        };
        let speedup = 1.0 / c.ratio();
        let floor_ratio = median(&peer).as_secs_f64() / median(&floor).as_secs_f64();
        let c = Comparison {
            notes: format!(
                "{:.3} µs/link (ip {:.3} µs/link) | kernel floor (raw dump, no decode) {} = \
                 {:.3} µs/link, ip/floor {:.2}x; alternating with ip {} (ip/floor {:.2}x) | \
                 decode alone {} ({} reply bytes) | target >= 5x: {}",
                per(median(&np)),
                per(median(&peer)),
                fmt_dur(median(&floor)),
                per(median(&floor)),
                floor_ratio,
                fmt_dur(median(&floor_alt)),
                median(&peer).as_secs_f64() / median(&floor_alt).as_secs_f64(),
                fmt_dur(median(&decode)),
                reply.len(),
                verdict(speedup >= 5.0)
            ),
            ..c
        };
        c.print();
        growth.push((links, per(median(&np))));
    }
    let g = growth
        .iter()
        .map(|(n, us)| format!("{n} links: {us:.3} µs/link"))
        .collect::<Vec<_>>()
        .join(", ");
    note("links", format!("growth (netprobe, per link): {g}"));
    // The netns and its 10,000 links die with the thread.
    drop(ns);
    Ok(())
}

/// `nsenter --net=/proc/<pid>/task/<tid>/ns/net ip -j link show`, output read to the end;
/// returns the wall time of the whole process.
fn ip_link_show(ns: &NetnsThread) -> Result<Duration, String> {
    let (o, t) = timed(|| {
        Command::new("nsenter")
            .arg(format!("--net={}", ns.path().display()))
            .args(["ip", "-j", "link", "show"])
            .stderr(Stdio::inherit())
            .output()
    });
    let o = o.map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(format!("exit {}", o.status));
    }
    Ok(t)
}

fn ip_link_count(ns: &NetnsThread) -> Result<usize, String> {
    let o = Command::new("nsenter")
        .arg(format!("--net={}", ns.path().display()))
        .args(["ip", "-j", "link", "show"])
        .output()
        .map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).map_err(|e| e.to_string())?;
    Ok(v.as_array().map_or(0, Vec::len))
}
