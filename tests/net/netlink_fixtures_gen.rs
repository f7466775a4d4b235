//! Regenerates the reply fixtures under tests/fixtures/netlink/ from a fresh netns on this
//! machine. Ignored by default (root, writes files); run once with
//! `cargo test --test netlink_fixtures_gen -- --ignored`.

use std::path::PathBuf;

/// Runs `f` in a thread inside a fresh netns (only that thread's netns changes).
fn in_fresh_netns<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    netprobe::ns::run_in_fresh_netns(f).expect("unshare(CLONE_NEWNET)")
}

fn write_hex(name: &str, bytes: &[u8]) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/netlink");
    let mut text = String::new();
    // 32 bytes per line so diffs stay readable.
    for chunk in bytes.chunks(32) {
        text.push_str(&hex::encode(chunk));
        text.push('\n');
    }
    std::fs::write(dir.join(name), text).expect("write fixture");
}

#[test]
#[ignore = "regenerates fixtures; needs root"]
fn regenerate_link_dump_fixtures() {
    let _baton = crate::common::baton(module_path!());
    let lo = in_fresh_netns(|| netprobe::netlink::dump_links_criu().expect("dump lo"));
    write_hex("lo_only.reply.hex", &lo.reply);
    let veth = in_fresh_netns(|| {
        netprobe::netlink::create_veth_pair("npveth0a", "npveth0b").expect("veth");
        netprobe::netlink::dump_links_criu().expect("dump veth")
    });
    write_hex("veth_pair.reply.hex", &veth.reply);
}
