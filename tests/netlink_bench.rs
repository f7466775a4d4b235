//! Timing of a 10,001-link dump (5,000 veth pairs + lo) in a fresh netns: bulk creation,
//! `dump_links_criu()` (dump + decode), decode alone, `capture()`, against `ip -j link show`
//! run in the same netns. Ignored by default (root, ~10,000 links, a few seconds); run with
//! `cargo test --test netlink_bench -- --ignored --nocapture`. Prints, asserts only counts.

use std::time::{Duration, Instant};

use netlink_packet_route::link::LinkMessage;
use netprobe::netlink::{capture, create_veth_pairs, decode_link_replies, dump_links_criu};
use nix::sched::{CloneFlags, unshare};

fn in_fresh_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        unshare(CloneFlags::CLONE_NEWNET).expect("unshare(CLONE_NEWNET)");
        f()
    })
    .join()
    .unwrap_or_else(|p| std::panic::resume_unwind(p))
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

#[test]
#[ignore = "benchmark: root, creates 10,000 links"]
fn ten_thousand_links() {
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
