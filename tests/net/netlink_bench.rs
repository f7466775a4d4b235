//! Timing of a 10,001-link dump (5,000 veth pairs + lo) in a fresh netns: bulk creation,
//! `dump_links_criu()` (dump + decode), decode alone, `capture()`, against `ip -j link show`
//! run in the same netns. Ignored by default (root, ~10,000 links, a few seconds); run with
//! `cargo test --test netlink_bench -- --ignored --nocapture`. Prints, asserts only counts.

use std::time::{Duration, Instant};

use netlink_packet_route::link::LinkMessage;
use netprobe::netlink::{capture, create_veth_pairs, decode_link_replies, dump_links_criu};

/// Runs `f` in a thread inside a fresh netns (only that thread's netns changes).
fn in_fresh_netns<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    netprobe::ns::run_in_fresh_netns(f).expect("unshare(CLONE_NEWNET)")
}

fn best_of<T>(n: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..n {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed());
        last = Some(v);
    }
    (best, last.expect("n > 0"))
}

/// Reference: decode every reply with the crate's full `LinkMessage::parse` (all attributes).
fn full_parse_count(bytes: &[u8]) -> usize {
    use netlink_packet_core::Parseable;
    let mut pos = 0;
    let mut n = 0;
    while pos + 16 <= bytes.len() {
        let len = u32::from_ne_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
        let ty = u16::from_ne_bytes(bytes[pos + 4..pos + 6].try_into().unwrap());
        if ty == 16 {
            LinkMessage::parse(&bytes[pos + 16..pos + len]).expect("parse");
            n += 1;
        }
        pos += (len + 3) & !3;
    }
    n
}

/// The kernel's own dump time: CRIU's request, replies read with 32 KiB and not decoded.
fn raw_dump_len() -> usize {
    use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
    let s = Socket::new(NETLINK_ROUTE).unwrap();
    s.connect(&SocketAddr::new(0, 0)).unwrap();
    s.send(&netprobe::netlink::criu_link_dump_request(), 0)
        .unwrap();
    let mut buf = Vec::with_capacity(32 * 1024);
    let mut total = 0;
    loop {
        buf.clear();
        let n = s.recv(&mut buf, 0).unwrap();
        total += n;
        // NLMSG_DONE (type 3) is the last message of the last datagram.
        let mut pos = 0;
        let mut done = false;
        while pos + 16 <= n {
            let len = u32::from_ne_bytes(buf[pos..pos + 4].try_into().unwrap()) as usize;
            done |= u16::from_ne_bytes([buf[pos + 4], buf[pos + 5]]) == 3;
            pos += (len + 3) & !3;
        }
        if done {
            return total;
        }
    }
}

/// `ip -batch` creating the same 5,000 veth pairs, for comparison with `create_veth_pairs`.
#[test]
#[ignore = "benchmark: root, creates 10,000 links"]
fn ip_batch_create_reference() {
    let _baton = crate::common::baton(module_path!());
    in_fresh_netns(|| {
        let mut script = String::new();
        for i in 0..5000 {
            script.push_str(&format!("link add b{i}a type veth peer name b{i}b\n"));
        }
        let path = std::env::temp_dir().join(format!("netprobe-ipbatch-{}", std::process::id()));
        std::fs::write(&path, script).unwrap();
        let t = Instant::now();
        let st = std::process::Command::new("ip")
            .arg("-batch")
            .arg(&path)
            .status()
            .expect("ip -batch");
        let el = t.elapsed();
        let _ = std::fs::remove_file(&path);
        assert!(st.success());
        println!("ip -batch (5000 veth pairs):       {el:?}");
    });
}

#[test]
#[ignore = "benchmark: root, creates 10,000 links"]
fn ten_thousand_links() {
    let _baton = crate::common::baton(module_path!());
    in_fresh_netns(|| {
        let t = Instant::now();
        create_veth_pairs("b", 5000).expect("create 5000 veth pairs");
        let create = t.elapsed();

        let (dump_t, dump) = best_of(5, || dump_links_criu().expect("dump"));
        assert_eq!(dump.links.len(), 10_001);
        let (decode_t, links) = best_of(5, || decode_link_replies(&dump.reply).unwrap());
        assert_eq!(links.len(), 10_001);
        let (full_t, n) = best_of(3, || full_parse_count(&dump.reply));
        assert_eq!(n, 10_001);
        let (capture_t, st) = best_of(3, || capture().expect("capture"));
        assert_eq!(st.links.len(), 10_001);
        let (raw_t, raw_len) = best_of(5, raw_dump_len);
        assert!(raw_len > 1_000_000);
        let (ip_t, out) = best_of(5, || {
            std::process::Command::new("ip")
                .args(["-j", "link", "show"])
                .output()
                .expect("ip")
        });
        assert!(out.status.success());
        let ip_links = String::from_utf8_lossy(&out.stdout)
            .matches("\"ifindex\"")
            .count();
        assert_eq!(ip_links, 10_001, "ip ran in the same netns");

        println!(
            "links: 10,001 (5,000 veth pairs + lo); reply bytes: {}",
            dump.reply.len()
        );
        println!("create_veth_pairs(5000):           {create:?}");
        println!("dump_links_criu (dump+decode):     {dump_t:?} (best of 5)");
        println!("raw kernel dump (recv only):       {raw_t:?}");
        println!("decode_link_replies alone:         {decode_t:?}");
        println!("full LinkMessage::parse (ref):     {full_t:?}");
        println!("capture() (links+addrs+routes):    {capture_t:?}");
        println!("ip -j link show:                   {ip_t:?} (best of 5)");
        println!(
            "ratio ip / dump_links_criu:        {:.2}x",
            ip_t.as_secs_f64() / dump_t.as_secs_f64()
        );
    });
}
