//! `images`: decoding a 10,001-link `netdev-<id>.img` plus its `ifaddr-`/`route-` dumps with
//! `netprobe images --json` vs `crit show` of the same netdev image (CRIU's Python decoder, which
//! reads no raw dump). Both run as processes writing JSON to /dev/null; peak RSS from `wait4`.
//!
//! The images are generated here, in CRIU's format: `IMG_COMMON_MAGIC` + `NETDEV_MAGIC`, then
//! per link a native-endian u32 size and a `net_device_entry` (veth, MAC, MTU 1789, 30 IPv4 and
//! 42 IPv6 conf sysctls, as CRIU 4.2 writes them); `ip addr save` / `ip route save` dumps with one
//! IPv4 address and one route per link. crit: `$NETPROBE_BENCH_CRIT` (a command line, e.g.
//! `env PYTHONPATH=/x/usr/lib/python3/dist-packages /usr/bin/python3 /x/usr/bin/crit`), else
//! `crit` in PATH (Debian's `criu` package ships it; see benches/RESULTS.md).

use crate::Config;
use crate::stats::{Comparison, alternate, note, verdict};
use netprobe::images::format::{IMG_COMMON_MAGIC, NETDEV_MAGIC, decode_all_required};
use netprobe::images::ipdump::{IFADDR_DUMP_MAGIC, ROUTE_DUMP_MAGIC, decode_addrs, decode_routes};
use netprobe::images::pb::{NdType, NetDeviceEntry, SysctlEntry};
use netprobe::netlink::sysctl::{DEVCONFS4, DEVCONFS6};
use prost::Message;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SECTION: &str = "images";

/// A device's name and its sysctls, name → value.
type NamedMap = (String, BTreeMap<String, String>);

/// The decoder before the shared table of names, for the same-run comparison and the content
/// check: `netdev-9.img` decoded, then per device a map of dotted name → value built as
/// `netprobe::images` built it (one formatted name and one insert per sysctl).
fn map_per_device(dir: &Path) -> Result<Vec<NamedMap>, String> {
    let path = dir.join("netdev-9.img");
    let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
    let required = [
        (1, "type"),
        (2, "ifindex"),
        (3, "mtu"),
        (4, "flags"),
        (5, "name"),
    ];
    let devs: Vec<NetDeviceEntry> =
        decode_all_required(&path, &bytes, NETDEV_MAGIC, &required).map_err(|e| e.to_string())?;
    let value = |e: &SysctlEntry| e.sarg.clone().or_else(|| e.iarg.map(|i| i.to_string()));
    Ok(devs
        .into_iter()
        .map(|d| {
            let mut m = BTreeMap::new();
            for (p, list, names) in [("ipv4", &d.conf4, DEVCONFS4), ("ipv6", &d.conf6, DEVCONFS6)] {
                for (i, e) in list.iter().enumerate() {
                    let Some(v) = value(e) else { continue };
                    let n = names
                        .get(i)
                        .map_or_else(|| format!("#{i}"), |n| n.to_string());
                    m.insert(format!("net.{p}.conf.{}.{n}", d.name), v);
                }
            }
            for (i, v) in d.conf.iter().enumerate() {
                m.insert(format!("legacy.ipv4.conf.{}.#{i}", d.name), v.to_string());
            }
            (d.name, m)
        })
        .collect())
}

fn netdev_image(links: u32) -> Vec<u8> {
    let mut v = IMG_COMMON_MAGIC.to_ne_bytes().to_vec();
    v.extend_from_slice(&NETDEV_MAGIC.to_ne_bytes());
    let conf = |n: usize| -> Vec<SysctlEntry> {
        (0..n)
            .map(|i| SysctlEntry {
                r#type: 6,
                iarg: Some(i as i32 % 3),
                sarg: None,
            })
            .collect()
    };
    for i in 1..=links {
        let e = NetDeviceEntry {
            r#type: if i == 1 {
                NdType::Loopback
            } else {
                NdType::Veth
            } as i32,
            ifindex: i,
            mtu: 1789,
            flags: 0x11043,
            name: if i == 1 {
                "lo".into()
            } else {
                format!("np{i}")
            },
            address: (i > 1).then(|| vec![2, 0, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8]),
            conf4: conf(30),
            conf6: conf(42),
            peer_ifindex: Some(i ^ 1),
            peer_nsid: Some(9),
            ..Default::default()
        };
        let b = e.encode_to_vec();
        v.extend_from_slice(&(b.len() as u32).to_ne_bytes());
        v.extend_from_slice(&b);
    }
    v
}

fn nlmsg(out: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    out.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(&[0; 10]);
    out.extend_from_slice(payload);
}

fn rta(out: &mut Vec<u8>, ty: u16, data: &[u8]) {
    out.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(data);
}

/// `ip addr save` (one 10.x.y.z/16 per link) and `ip route save` (one /24 per link).
fn dumps(links: u32) -> (Vec<u8>, Vec<u8>) {
    let (mut a, mut r) = (
        IFADDR_DUMP_MAGIC.to_ne_bytes().to_vec(),
        ROUTE_DUMP_MAGIC.to_ne_bytes().to_vec(),
    );
    for i in 1..=links {
        let ip = [10, (i >> 16) as u8, (i >> 8) as u8, i as u8];
        let mut p = vec![2u8, 16, 0x80, 0];
        p.extend_from_slice(&i.to_ne_bytes());
        rta(&mut p, 2, &ip);
        rta(&mut p, 1, &ip);
        nlmsg(&mut a, 20, &p);
        let mut q = vec![2u8, 24, 0, 0, 254, 4, 253, 1, 0, 0, 0, 0];
        rta(&mut q, 15, &254u32.to_ne_bytes());
        rta(&mut q, 1, &[172, (i >> 8) as u8, i as u8, 0]);
        rta(&mut q, 4, &i.to_ne_bytes());
        nlmsg(&mut r, 24, &q);
    }
    (a, r)
}

/// Runs `cmd` with stdout to /dev/null; returns the wall time and the child's peak RSS (KiB,
/// `ru_maxrss` from `wait4`). Errors when it cannot start or exits non-zero.
fn run_measured(cmd: &mut Command) -> Result<(Duration, i64), String> {
    let t = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    let pid = child.id() as i32;
    let mut status = 0;
    // SAFETY: plain wait4 on our own child; rusage is a plain C struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, writing only into `status` and `ru`, which we own.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let d = t.elapsed();
    if r != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("{cmd:?}: exit status {status}"));
    }
    Ok((d, ru.ru_maxrss))
}

fn crit_command(netdev: &Path) -> Command {
    let line = std::env::var("NETPROBE_BENCH_CRIT").unwrap_or_else(|_| "crit".into());
    let mut words = line.split_whitespace();
    let mut c = Command::new(words.next().unwrap_or("crit"));
    c.args(words).arg("show").arg(netdev);
    c
}

/// Runs the section.
pub fn run(cfg: &Config) -> Result<(), String> {
    let links = if cfg.quick { 1001 } else { 10_001 };
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let netdev = dir.path().join("netdev-9.img");
    std::fs::write(&netdev, netdev_image(links)).map_err(|e| e.to_string())?;
    let (a, r) = dumps(links);
    std::fs::write(dir.path().join("ifaddr-9.img"), &a).map_err(|e| e.to_string())?;
    std::fs::write(dir.path().join("route-9.img"), &r).map_err(|e| e.to_string())?;
    let bytes = std::fs::metadata(&netdev).map(|m| m.len()).unwrap_or(0);
    note(
        SECTION,
        format!(
            "generated netdev-9.img with {links} links ({bytes} bytes), ifaddr-9.img ({} bytes), route-9.img ({} bytes)",
            a.len(),
            r.len()
        ),
    );
    let (parsed, _) = crate::stats::timed(|| netprobe::images::read_dir(dir.path()));
    let parsed = parsed.map_err(|e| e.to_string())?;
    let ns = &parsed.namespaces[0];
    if ns.devices.len() != links as usize || ns.addresses.len() != links as usize {
        return Err(format!(
            "decoded {} devices, {} addresses",
            ns.devices.len(),
            ns.addresses.len()
        ));
    }
    // The same decoded content as a map per device (the decoder before the shared table).
    let maps = map_per_device(dir.path())?;
    let same = ns.devices.len() == maps.len()
        && ns
            .devices
            .iter()
            .zip(&maps)
            .all(|(d, (name, m))| d.name == *name && d.sysctls.to_map() == *m);
    if !same {
        return Err("the decoded sysctls differ from a map per device".into());
    }
    let sysctls: usize = maps.iter().map(|(_, m)| m.len()).sum();
    drop(maps);
    let (rn, ro) = alternate(
        1,
        cfg.runs,
        || {
            crate::stats::timed(|| {
                std::hint::black_box(netprobe::images::read_dir(dir.path()).expect("decode"))
            })
            .1
        },
        || {
            crate::stats::timed(|| {
                std::hint::black_box(map_per_device(dir.path()).expect("decode"));
                let a = std::fs::read(dir.path().join("ifaddr-9.img")).expect("ifaddr");
                let r = std::fs::read(dir.path().join("route-9.img")).expect("route");
                std::hint::black_box(decode_addrs(dir.path(), &a).expect("ifaddr"));
                std::hint::black_box(decode_routes(dir.path(), &r).expect("route"));
            })
            .1
        },
    );
    let t = crate::stats::median(&rn);
    Comparison {
        section: SECTION,
        what: format!(
            "in-process decode of the three images ({links} links, {sysctls} named sysctls, \
             content checked equal) vs the same with a map of named sysctls per device"
        ),
        netprobe: &rn,
        peer_name: "map per device",
        peer: &ro,
        notes: format!(
            "target <= 150 ms for 10,001 links: {}",
            verdict(links != 10_001 || t <= Duration::from_millis(150))
        ),
    }
    .print();
    let exe = crate::netprobe_exe();
    let (mut rss_n, mut rss_c) = (0, 0);
    let err_n = std::cell::RefCell::new(None);
    let err_c = std::cell::RefCell::new(None);
    let (rn, rc) = alternate(
        1,
        cfg.runs,
        || match run_measured(
            Command::new(&exe)
                .arg("images")
                .arg(dir.path())
                .arg("--json"),
        ) {
            Ok((d, rss)) => {
                rss_n = rss_n.max(rss);
                d
            }
            Err(e) => {
                *err_n.borrow_mut() = Some(e);
                Duration::ZERO
            }
        },
        || match run_measured(&mut crit_command(&netdev)) {
            Ok((d, rss)) => {
                rss_c = rss_c.max(rss);
                d
            }
            Err(e) => {
                *err_c.borrow_mut() = Some(format!(
                    "{e} (set NETPROBE_BENCH_CRIT, see benches/RESULTS.md)"
                ));
                Duration::ZERO
            }
        },
    );
    if let Some(e) = err_n.into_inner().or(err_c.into_inner()) {
        return Err(e);
    }
    let c = Comparison {
        section: SECTION,
        what: format!(
            "{links}-link netdev + ifaddr + route images → JSON (netprobe) vs netdev image only (crit)"
        ),
        netprobe: &rn,
        peer_name: "crit show netdev-9.img",
        peer: &rc,
        notes: String::new(),
    };
    c.print();
    note(
        SECTION,
        format!(
            "peak RSS (ru_maxrss): netprobe images {rss_n} KiB, crit show {rss_c} KiB | target >= 20x: {}",
            verdict(1.0 / c.ratio() >= 20.0)
        ),
    );
    Ok(())
}
