//! netprobe's benchmarks: its hot paths against the peer a user would otherwise reach for,
//! measured in the same run, printed as ratios.
//!
//! ```text
//! cargo bench --bench netprobe                      # every section
//! cargo bench --bench netprobe -- logs links        # some sections
//! cargo bench --bench netprobe -- desktop           # the desktop guest only
//! cargo bench --bench netprobe -- --quick --runs 5  # small sizes (development)
//! ```
//!
//! Sections: `logs` (assertions vs `grep -c -F`), `links` (CRIU-exact link dump vs
//! `ip -j link show`), `state` (NetState capture vs three `ip` processes), `ladder` (the whole
//! `netprobe run` and netprobe's share of it), `slot` (slot driver restore/reset vs bare
//! `runc restore`), `desktop` (the same for the desktop guest of `profiles/desktop.toml`,
//! display gates included, with the image and snapshot sizes), `osworld` (the GNOME guest's
//! task reset to its first screenshot through a published port vs bare runc + a direct
//! screenshot, and the published port vs a direct connection), `retention` (a GNOME reset's
//! evidence bytes and wall time with large evidence compressed vs stored as written,
//! alternating, then `slot prune` and the slot's report), `images` (`netprobe images` vs
//! `crit show` of a 10,001-link netdev image), `archive` (`netprobe images` of a ~55 MiB
//! checkpoint tar.zst, streamed, vs `tar --zstd -xf` of it into a tmpfs, and its peak memory
//! for that archive and one twice its size), `matrix` (a 3×3 `netprobe matrix` side by side
//! vs one cell after another, and netprobe's own share of it as `ladder` defines it), `fleet`
//! (`netprobe fleet` over 1,000 generated hosts vs `netprobe verify` per host in a shell loop,
//! and its peak memory for 100 and 1,000 hosts).
//! Needs root. Every line: what was measured, netprobe's median, the peer's
//! median, the ratio netprobe/peer (lower is better), the runs per side. Times are wall times
//! on the monotonic clock. Nothing here asserts a time: these are benchmarks, not tests.

mod archive;
mod desktop;
mod fleet;
mod images;
mod ladder;
mod links;
mod logs;
mod matrix;
mod netns;
mod osworld;
mod procmon;
mod rawdump;
mod retention;
mod slot;
mod state;
mod stats;

use std::path::PathBuf;

/// Run settings, from the command line after `--`.
pub struct Config {
    /// Timed runs per side (after one warm-up each); at least 5.
    pub runs: usize,
    /// Small sizes only (64 MiB log, ≤ 1,001 links): for development on shared cores.
    pub quick: bool,
}

/// All sections, in run order.
const SECTIONS: [&str; 12] = [
    "logs",
    "links",
    "state",
    "ladder",
    "slot",
    "desktop",
    "osworld",
    "retention",
    "images",
    "archive",
    "matrix",
    "fleet",
];

/// The netprobe binary the ladder and slot sections run: `$NETPROBE_EXE`, else the one cargo
/// built beside this bench (`target/release/netprobe` under `cargo bench`).
pub fn netprobe_exe() -> PathBuf {
    std::env::var_os("NETPROBE_EXE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_netprobe")))
}

/// CRIU for the ladder and slot sections: `$NETPROBE_BENCH_CRIU`, else the pinned
/// `/opt/criu-4.2.1/sbin/criu` when present (4.1.1 cannot dump inet sockets on kernels
/// >= 6.16), else none (netprobe's own default).
pub fn criu_path() -> Option<PathBuf> {
    std::env::var_os("NETPROBE_BENCH_CRIU")
        .map(PathBuf::from)
        .or_else(|| {
            let p = PathBuf::from("/opt/criu-4.2.1/sbin/criu");
            p.exists().then_some(p)
        })
}

fn main() {
    if let Some(path) = std::env::var_os(logs::CHILD_ENV) {
        logs::child_main(&path.to_string_lossy());
    }
    let mut cfg = Config {
        runs: 7,
        quick: false,
    };
    let mut chosen: Vec<&str> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            // `cargo bench` passes --bench to harness = false targets.
            "--bench" => {}
            "--quick" => cfg.quick = true,
            "--runs" => {
                cfg.runs = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|n| *n >= 1)
                    .unwrap_or_else(|| usage("--runs needs a number >= 1"))
            }
            s if s.starts_with('-') => usage(&format!("unknown option {s}")),
            s => match SECTIONS.iter().find(|x| **x == s) {
                Some(x) => chosen.push(x),
                None => usage(&format!("unknown section {s}")),
            },
        }
    }
    if chosen.is_empty() {
        chosen = SECTIONS.to_vec();
    }
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("netprobe bench: needs root (network namespaces, veth pairs, runc)");
        std::process::exit(3);
    }
    println!(
        "netprobe bench: sections {} | {} timed runs per side after 1 warm-up, alternating | \
         medians | ratio = netprobe / peer (lower is better){}",
        chosen.join(","),
        cfg.runs,
        if cfg.quick { " | QUICK sizes" } else { "" }
    );
    let mut failed = Vec::new();
    for s in chosen {
        let r = match s {
            "logs" => logs::run(&cfg),
            "links" => links::run(&cfg),
            "state" => state::run(&cfg),
            "ladder" => ladder::run(&cfg),
            "slot" => slot::run(&cfg),
            "desktop" => desktop::run(&cfg),
            "osworld" => osworld::run(&cfg),
            "retention" => retention::run(&cfg),
            "images" => images::run(&cfg),
            "archive" => archive::run(&cfg),
            "matrix" => matrix::run(&cfg),
            "fleet" => fleet::run(&cfg),
            _ => unreachable!(),
        };
        if let Err(e) = r {
            eprintln!("[{s}] FAILED: {e}");
            failed.push(s);
        }
    }
    if !failed.is_empty() {
        eprintln!("netprobe bench: sections failed: {}", failed.join(", "));
        std::process::exit(1);
    }
}

fn usage(msg: &str) -> ! {
    eprintln!(
        "netprobe bench: {msg}\nusage: cargo bench --bench netprobe -- [--quick] [--runs N] \
         [{}]...",
        SECTIONS.join("|")
    );
    std::process::exit(2)
}
