//! Section `logs`: every log assertion of every rung, evaluated by netprobe in one streamed
//! pass over a generated CRIU-style log, against `grep -c -F` for one of those patterns.

use crate::Config;
use crate::stats::{Comparison, alternate, median, note, timed, verdict};
use netprobe::assert::{Check, LogQuery, ProbeSpec, scan_log};
use netprobe::evidence::result::RungName;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Env var that turns the bench binary into the scan-only child used for peak-RSS readings.
pub const CHILD_ENV: &str = "NETPROBE_BENCH_SCAN_CHILD";

/// The pattern the peer greps for (the most frequent assertion pattern).
const GREP_PATTERN: &str = "LD: Got link";

/// Every distinct log query of every rung's built-in probe spec.
pub fn all_queries() -> Vec<LogQuery> {
    let mut out: Vec<LogQuery> = Vec::new();
    for rung in RungName::ALL {
        let spec = ProbeSpec::builtin(rung).expect("built-in probe spec parses");
        for a in spec.assertions {
            if let Check::Log { query, .. } = a.check
                && !out.contains(&query)
            {
                out.push(query);
            }
        }
    }
    out
}

/// Child mode: scan the log named by [`CHILD_ENV`] once and print this process's peak
/// resident set (`VmHWM`, KiB). The mm is fresh after exec, so nothing of the parent's counts.
pub fn child_main(path: &str) -> ! {
    let counts = scan_log(Path::new(path), &all_queries()).expect("scan");
    std::hint::black_box(counts);
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM");
    println!("{hwm}");
    std::process::exit(0)
}

/// Runs the section.
pub fn run(cfg: &Config) -> Result<(), String> {
    let queries = all_queries();
    note(
        "logs",
        format!(
            "{} distinct log queries over all rungs: {}",
            queries.len(),
            queries
                .iter()
                .map(|q| {
                    let mut d = format!("{:?}", q.pattern);
                    if let Some(a) = &q.after {
                        d.push_str(&format!(" after {a:?}"));
                    }
                    if !q.exclude.is_empty() {
                        d.push_str(&format!(" excluding {:?}", q.exclude));
                    }
                    d
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    let dir = tempfile::Builder::new()
        .prefix("netprobe-bench-logs-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    let sizes: &[u64] = if cfg.quick {
        &[64 << 20]
    } else {
        &[64 << 20, 1 << 30]
    };
    for &size in sizes {
        let path = dir.path().join(format!("dump-{}M.log", size >> 20));
        let (expected, gen_time) = timed(|| generate(&path, size, &queries));
        let expected = expected.map_err(|e| format!("generate {}: {e}", path.display()))?;
        let bytes = std::fs::metadata(&path).map_err(|e| e.to_string())?.len();
        note(
            "logs",
            format!(
                "generated {} ({} bytes) in {:.1} s",
                label(size),
                bytes,
                gen_time.as_secs_f64()
            ),
        );
        compare(cfg, &path, bytes, size, &queries, &expected)?;
        // Free the page cache and the disk before the next size.
        std::fs::remove_file(&path).map_err(|e| e.to_string())?;
    }
    drop(dir);
    Ok(())
}

fn label(size: u64) -> String {
    if size >= 1 << 30 {
        format!("{} GiB", size >> 30)
    } else {
        format!("{} MiB", size >> 20)
    }
}

fn compare(
    cfg: &Config,
    path: &Path,
    bytes: u64,
    size: u64,
    queries: &[LogQuery],
    (expected, grep_expected): &(Vec<u64>, u64),
) -> Result<(), String> {
    let mut np_err = None;
    let mut peer_err = None;
    // Warm-up (1 run each: brings both through the same page cache state), then alternate.
    let (np, peer) = alternate(
        1,
        cfg.runs,
        || {
            let (r, d) = timed(|| scan_log(path, queries));
            match r {
                Ok(c) if c == *expected => {}
                Ok(c) => np_err = Some(format!("counts {c:?}, expected {expected:?}")),
                Err(e) => np_err = Some(e.to_string()),
            }
            d
        },
        || {
            let (r, d) = timed(|| {
                Command::new("grep")
                    .args(["-c", "-F", GREP_PATTERN])
                    .arg(path)
                    .stderr(Stdio::inherit())
                    .output()
            });
            match r {
                Ok(o)
                    if o.status.success()
                        && String::from_utf8_lossy(&o.stdout).trim()
                            == grep_expected.to_string() => {}
                Ok(o) if o.status.success() => {
                    peer_err = Some(format!(
                        "grep counted {}, expected {grep_expected}",
                        String::from_utf8_lossy(&o.stdout).trim()
                    ))
                }
                Ok(o) => peer_err = Some(format!("grep exit {}", o.status)),
                Err(e) => peer_err = Some(e.to_string()),
            }
            d
        },
    );
    if let Some(e) = np_err {
        return Err(format!("netprobe scan: {e}"));
    }
    if let Some(e) = peer_err {
        return Err(format!("grep: {e}"));
    }
    let gbps = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e9;
    let c = Comparison {
        section: "logs",
        what: format!(
            "{} log, all {} assertions of every rung in one pass vs one pattern",
            label(size),
            queries.len()
        ),
        netprobe: &np,
        peer_name: "grep -c -F 'LD: Got link'",
        peer: &peer,
        notes: format!(
            "netprobe {:.2} GB/s, grep {:.2} GB/s | target ratio <= 0.9: {}",
            gbps(median(&np)),
            gbps(median(&peer)),
            verdict(c_ratio(&np, &peer) <= 0.9)
        ),
    };
    c.print();
    // The same scan with only grep's pattern: the cost of each further pattern.
    let one = [LogQuery::new(GREP_PATTERN)];
    let (np1, peer1) = alternate(
        1,
        cfg.runs,
        || timed(|| scan_log(path, &one).expect("scan")).1,
        || {
            timed(|| {
                Command::new("grep")
                    .args(["-c", "-F", GREP_PATTERN])
                    .arg(path)
                    .output()
                    .expect("grep")
            })
            .1
        },
    );
    Comparison {
        section: "logs",
        what: format!("{} log, one pattern each", label(size)),
        netprobe: &np1,
        peer_name: "grep -c -F 'LD: Got link'",
        peer: &peer1,
        notes: format!(
            "netprobe {:.2} GB/s, grep {:.2} GB/s | each further pattern costs netprobe \
             about {} (all patterns share one SIMD pass; one pattern alone uses memmem)",
            gbps(median(&np1)),
            gbps(median(&peer1)),
            crate::stats::fmt_dur(
                median(&np).saturating_sub(median(&np1)) / (queries.len() as u32 - 1).max(1)
            )
        ),
    }
    .print();
    // The mapped windows against the read(2) path (what compressed logs still take, and what
    // every log took before), alternating: the copy out of the page cache the mapping saves.
    let (mapped, read) = alternate(
        1,
        cfg.runs,
        || timed(|| scan_log(path, queries).expect("scan")).1,
        || {
            timed(|| {
                netprobe::assert::scan_log_with_chunk(
                    path,
                    queries,
                    netprobe::assert::scan::DEFAULT_CHUNK,
                )
                .expect("scan")
            })
            .1
        },
    );
    Comparison {
        section: "logs",
        what: format!(
            "{} log, all {} assertions: mapped windows vs read(2) into a buffer",
            label(size),
            queries.len()
        ),
        netprobe: &mapped,
        peer_name: "netprobe read(2) path",
        peer: &read,
        notes: format!(
            "{:.2} GB/s vs {:.2} GB/s",
            gbps(median(&mapped)),
            gbps(median(&read))
        ),
    }
    .print();
    // Peak memory: the scan alone, in a child process that reports its own VmHWM.
    let o = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
        .env(CHILD_ENV, path)
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(format!("scan child: exit {}", o.status));
    }
    let np_rss = String::from_utf8_lossy(&o.stdout).trim().to_string();
    // grep's, from `/usr/bin/time -f %M` (which forks, so its child's maxrss is grep's own).
    let grep_rss = Command::new("/usr/bin/time")
        .args(["-f", "%M", "grep", "-c", "-F", GREP_PATTERN])
        .arg(path)
        .stdout(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .map(|l| l.trim().to_string())
        })
        .unwrap_or_else(|| "? (no /usr/bin/time)".into());
    note(
        "logs",
        format!(
            "{} log: peak RSS (VmHWM) of a process doing only the scan: netprobe {} KiB \
             (bench binary re-executed with {CHILD_ENV}), grep {} KiB",
            label(size),
            np_rss,
            grep_rss
        ),
    );
    Ok(())
}

fn c_ratio(a: &[Duration], b: &[Duration]) -> f64 {
    median(a).as_secs_f64() / median(b).as_secs_f64()
}

/// xorshift64*: deterministic, fast, good enough for a line mix.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Writes a CRIU-style `-v4` log of about `size` bytes to `path` and returns, per query, the
/// number of lines that must match it, and the number of lines holding [`GREP_PATTERN`]. Ordinary lines (mm, pie, files, page-xfer, mnt, task)
/// never contain an assertion pattern; every "special" line (net blocks with the anchors and
/// patterns of probes/*.toml) is checked against every query as it is written.
fn generate(path: &Path, size: u64, queries: &[LogQuery]) -> std::io::Result<(Vec<u64>, u64)> {
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut expected = vec![0u64; queries.len()];
    let mut grep_expected = 0u64;
    // Anchor state per query: `after` seen (strictly before the current line), `before` seen.
    let mut after_seen = vec![false; queries.len()];
    let mut before_seen = vec![false; queries.len()];
    let mut written: u64 = 0;
    let mut usec: u64 = 0;
    let mut line: Vec<u8> = Vec::with_capacity(256);
    let mut special: Vec<String> = Vec::new();
    let pid = 48213u64;
    let netns_ino = 4026532281u64;
    while written < size {
        usec += 1 + rng.below(40);
        line.clear();
        let ts = format!("({:02}.{:06}) ", usec / 1_000_000 % 100, usec % 1_000_000);
        special.clear();
        let roll = rng.below(10_000);
        if roll < 2 {
            // A net block: the dump's netns line, the links, sometimes restore/external lines.
            special.push(format!(
                "Dump NET namespace info {} via {}",
                netns_ino + rng.below(8),
                pid
            ));
            special.push("Dumping netns links".into());
            let n = 1 + rng.below(4);
            special.push("\tLD: Got link 1, type 772".into());
            for i in 1..n {
                special.push(format!("\tLD: Got link {}, type 1", i + 1));
                special.push(format!("\tLD: Collected link: veth{i} (kind veth)"));
            }
            special.push("net: Running iptables-restore -w for locking network".into());
            if rng.below(3) == 0 {
                let id = 10 + rng.below(5);
                // CRIU logs the conntrack images' absence in every mode (excluded by oci.toml).
                special.push(format!("No netns-ct-{id}.img image"));
                special.push(format!("No netns-exp-{id}.img image"));
                special.push(format!("No netns-{id}.img image"));
            }
            if rng.below(3) == 0 {
                special.push(format!("net[{netns_ino}]: netns is external, not dumped"));
                special.push(format!(
                    "Found id extRootNetNS (fd {}) in inherit fd list",
                    3 + rng.below(20)
                ));
            }
        }
        if !special.is_empty() {
            for s in &special {
                let mut l = ts.clone().into_bytes();
                l.extend_from_slice(s.as_bytes());
                l.push(b'\n');
                if s.contains(GREP_PATTERN) {
                    grep_expected += 1;
                }
                for (i, q) in queries.iter().enumerate() {
                    let in_scope = q.after.as_ref().is_none_or(|_| after_seen[i])
                        && q.before.as_ref().is_none_or(|_| !before_seen[i]);
                    if in_scope
                        && s.contains(q.pattern.as_str())
                        && !q.exclude.iter().any(|x| s.contains(x.as_str()))
                    {
                        expected[i] += 1;
                    }
                }
                for (i, q) in queries.iter().enumerate() {
                    if q.after.as_ref().is_some_and(|a| s.contains(a.as_str())) {
                        after_seen[i] = true;
                    }
                    if q.before.as_ref().is_some_and(|b| s.contains(b.as_str())) {
                        before_seen[i] = true;
                    }
                }
                w.write_all(&l)?;
                written += l.len() as u64;
            }
            continue;
        }
        line.extend_from_slice(ts.as_bytes());
        let r = rng.below(100);
        let a = rng.next();
        match r {
            0..=29 => {
                let start = 0x7f00_0000_0000u64 + (a & 0xff_ffff_f000);
                let len = (1 + rng.below(512)) << 12;
                write!(
                    line,
                    "\t{:#x}-{:#x} ({}K) prot {:#x} flags {:#x} fdflags 0 st {:#x} off 0 reg {}  shmid: 0",
                    start,
                    start + len,
                    len >> 10,
                    a % 8,
                    0x2 | ((a >> 8) % 0x40),
                    0x41 + (a >> 16) % 0x200,
                    if a & 1 == 0 { "fp" } else { "ap" }
                )?;
            }
            30..=44 => match a % 4 {
                0 => write!(
                    line,
                    "pie: {pid}: __fetched msg: {} {} 0",
                    a % 16,
                    (a >> 4) % 16
                )?,
                1 => write!(line, "pie: {pid}: Daemon waits for command")?,
                2 => write!(
                    line,
                    "pie: {pid}: Prepare vma {:#x}-{:#x} for restore",
                    0x5600_0000_0000u64 + (a & 0xfff_f000),
                    0x5600_0000_0000u64 + (a & 0xfff_f000) + 0x2000
                )?,
                _ => write!(
                    line,
                    "pie: {pid}: vdso: Parsing at {:#x} {:#x}",
                    0x7ffd_0000_0000u64 + (a & 0xff_f000),
                    0x7ffd_0000_0000u64 + (a & 0xff_f000) + 0x2000
                )?,
            },
            45..=59 => match a % 3 {
                0 => write!(
                    line,
                    "{pid} fdinfo {}: pos: {:#x} flags: {}/0",
                    a % 64,
                    (a >> 8) % 65536,
                    2 + (a >> 20) % 0o100000
                )?,
                1 => write!(
                    line,
                    "Dumping path for {} fd via self {} [/usr/lib/x86_64-linux-gnu/libc.so.{}]",
                    a % 64,
                    10 + (a >> 8) % 20,
                    6 + (a >> 12) % 3
                )?,
                _ => write!(line, "\tDumping files (pid: {pid})")?,
            },
            60..=74 => match a % 3 {
                0 => write!(
                    line,
                    "page-pipe: Add iov to page pipe ({} iovs, {}/{} total)",
                    1 + a % 64,
                    1 + (a >> 8) % 64,
                    64 + (a >> 16) % 64
                )?,
                1 => write!(
                    line,
                    "pagemap: Dumping {} pages at {:#x}",
                    1 + a % 512,
                    0x7f00_0000_0000u64 + (a & 0xff_ffff_f000)
                )?,
                _ => write!(
                    line,
                    "page-xfer: Transferring pages: {} (reqs {})",
                    a % 100_000,
                    (a >> 20) % 2000
                )?,
            },
            75..=82 => write!(
                line,
                "mnt: \tMounted at /tmp/.criu.mntns.{:06x}/{}/ (master_id {} shared_id {})",
                a % 0xff_ffff,
                10 + (a >> 24) % 90,
                (a >> 32) % 10,
                (a >> 40) % 10
            )?,
            _ => match a % 5 {
                0 => write!(
                    line,
                    "Seized task {}, state {}",
                    pid + a % 4,
                    1 + (a >> 4) % 3
                )?,
                1 => write!(line, "Obtaining task stat ... ")?,
                2 => write!(
                    line,
                    "Dumping task (pid: {} comm: sleep)",
                    pid + (a >> 4) % 4
                )?,
                3 => write!(
                    line,
                    "Warn  (criu/kerndat.c:{}): Can't keep kdat cache on non-tempfs",
                    1000 + a % 700
                )?,
                _ => write!(line, "========================================")?,
            },
        }
        line.push(b'\n');
        w.write_all(&line)?;
        written += line.len() as u64;
    }
    w.flush()?;
    Ok((expected, grep_expected))
}
