//! Section `matrix`: a 3 runtimes × 3 CRIUs `netprobe matrix` (13 runs: kernel once, criu per
//! CRIU, runtime rungs per pair) with its parts side by side (`--jobs 2`) against the same
//! cells one after another (`--jobs 1`), alternating. Target: side by side ≤ 0.6× sequential on
//! 2 cores, with netprobe's own share < 10 %.
//!
//! netprobe's own share is the `ladder` section's definition applied to the whole matrix
//! process tree: wall time minus the union of the exec → exit intervals of the runtime (`runc`,
//! `crun`) and CRIU processes netprobe's processes started (the matrix, its `netprobe run`
//! parts, their holders), from the kernel's process-events connector (`procmon.rs`), over the
//! wall time. Beside it: the same with every child program subtracted (`ip`, `iptables-save`,
//! `nft`, … too), the share of each part (each `netprobe run` measured as the ladder measures
//! one run, summed: overlap between parts cannot hide netprobe time there), and the time the
//! matrix process ran with no part running.

use crate::Config;
use crate::procmon::{
    ChildTime, Monitor, NetprobeChild, child_time, monotonic_ns, netprobe_children, union_ns,
};
use crate::stats::{Comparison, alternate, fmt_dur, median, median_f64, note, verdict};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNTIMES: [&str; 3] = [
    "/opt/runc-1.4.3/sbin/runc",
    "/opt/runc-1.3.6/sbin/runc",
    "/opt/crun-1.28/bin/crun",
];
const CRIUS: [&str; 3] = [
    "/opt/criu-4.1.1/sbin/criu",
    "/opt/criu-4.2.1/sbin/criu",
    "/opt/criu-4.3/sbin/criu",
];
/// The runtime and CRIU programs whose time is not netprobe's (the ladder's `runc`, `criu`,
/// plus `crun`).
const COUNTED: [&str; 3] = ["runc", "crun", "criu"];

/// Where one matrix run's wall time went.
#[derive(Debug, Default)]
struct Sample {
    wall: Duration,
    /// 1 − (runtime + CRIU union) / wall.
    share: f64,
    /// 1 − (every child program's union) / wall.
    share_all: f64,
    /// Σ over parts of (part wall − its runtime + CRIU union), ns.
    parts_own_ns: u64,
    /// Σ over parts of the part's wall (exec → exit), ns.
    parts_wall_ns: u64,
    /// Wall time with no part running (the matrix process alone), ns.
    matrix_alone_ns: u64,
    /// Per part kind (`kernel`, `criu`, `cell`): (own ns, wall ns, parts).
    by_kind: BTreeMap<&'static str, (u64, u64, u32)>,
    /// Every child program of the tree: (ns exec → exit summed, calls).
    by_program: BTreeMap<String, (u64, u32)>,
}

/// The part's evidence folder name from its command line (`… --evidence <dir>/<folder>`).
fn part_folder(args: &str) -> &str {
    let mut it = args.split(' ');
    while let Some(a) = it.next() {
        if a == "--evidence" {
            let dir = it.next().unwrap_or("?");
            return dir.rsplit('/').next().unwrap_or(dir);
        }
    }
    "?"
}

fn kind_of(folder: &str) -> &'static str {
    if folder == "kernel" {
        "kernel"
    } else if folder.starts_with("criu-") {
        "criu"
    } else if folder.starts_with("cell-") {
        "cell"
    } else {
        "?"
    }
}

/// Splits the events of one matrix run (root `pid`, `t0..t1` ns) into the [`Sample`]; prints
/// the timeline when `NETPROBE_BENCH_TIMELINE` is set.
fn analyse(events: &[crate::procmon::Event], pid: i32, t0: u64, t1: u64, exe: &str) -> Sample {
    let wall_ns = t1.saturating_sub(t0).max(1);
    let counted: ChildTime = child_time(events, pid, exe, &COUNTED);
    let all = child_time(events, pid, exe, &["*"]);
    let parts: Vec<NetprobeChild> = netprobe_children(events, pid, exe);
    let mut s = Sample {
        wall: Duration::from_nanos(wall_ns),
        share: 1.0 - counted.union_ns as f64 / wall_ns as f64,
        share_all: 1.0 - all.union_ns as f64 / wall_ns as f64,
        matrix_alone_ns: wall_ns
            - union_ns(parts.iter().map(|p| (p.exec_ns, p.exit_ns)).collect()).min(wall_ns),
        ..Sample::default()
    };
    for (k, v) in &all.by_program {
        s.by_program.insert(k.clone(), *v);
    }
    let timeline = std::env::var_os("NETPROBE_BENCH_TIMELINE").is_some();
    let rel = |t: u64| t.saturating_sub(t0) as f64 / 1e6;
    if timeline {
        // The matrix process's own children: those that ran while no part ran.
        let (first, last) = (
            parts.iter().map(|p| p.exec_ns).min().unwrap_or(t1),
            parts.iter().map(|p| p.exit_ns).max().unwrap_or(t0),
        );
        let mut tl = all.timeline.clone();
        tl.sort();
        for (a, b, exe) in tl.into_iter().filter(|(a, _, _)| *a < first || *a > last) {
            eprintln!("  {:8.1} .. {:8.1} ms  matrix: {exe}", rel(a), rel(b));
        }
        eprintln!(
            "  first part at {:.1} ms, last part ended at {:.1} ms, matrix ended at {:.1} ms",
            rel(first),
            rel(last),
            rel(t1)
        );
    }
    for p in &parts {
        let ct = child_time(events, p.pid, exe, &COUNTED);
        let pw = p.exit_ns.saturating_sub(p.exec_ns);
        let own = pw.saturating_sub(ct.union_ns);
        s.parts_own_ns += own;
        s.parts_wall_ns += pw;
        let folder = part_folder(&p.args);
        let e = s.by_kind.entry(kind_of(folder)).or_default();
        e.0 += own;
        e.1 += pw;
        e.2 += 1;
        if timeline {
            eprintln!(
                "  {:8.1} .. {:8.1} ms  part {folder}: own {:.1} ms of {:.1} ms",
                rel(p.exec_ns),
                rel(p.exit_ns),
                own as f64 / 1e6,
                pw as f64 / 1e6
            );
            let mut tl = child_time(events, p.pid, exe, &["*"]).timeline;
            tl.sort();
            for (a, b, exe) in tl {
                eprintln!("      {:8.1} .. {:8.1} ms  {exe}", rel(a), rel(b));
            }
        }
    }
    s
}

fn one(jobs: usize, samples: &mut Vec<Sample>, failed: &mut Option<String>) -> Duration {
    let fail = |failed: &mut Option<String>, e: String| {
        *failed = Some(e);
        Duration::ZERO
    };
    let tmp = match tempfile::Builder::new()
        .prefix("netprobe-bench-matrix-")
        .tempdir()
    {
        Ok(t) => t,
        Err(e) => return fail(failed, e.to_string()),
    };
    let exe = crate::netprobe_exe();
    let mut cmd = Command::new(&exe);
    cmd.args(["matrix", "--jobs", &jobs.to_string(), "--evidence"])
        .arg(tmp.path().join("mx"));
    for r in RUNTIMES {
        cmd.args(["--runtime", r]);
    }
    for c in CRIUS {
        cmd.args(["--criu", c]);
    }
    let mon = match Monitor::start() {
        Ok(m) => m,
        Err(e) => return fail(failed, format!("process events: {e}")),
    };
    let t0 = Instant::now();
    let t0_ns = monotonic_ns();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let out = child.and_then(|c| {
        let pid = c.id() as i32;
        c.wait_with_output().map(|o| (pid, o))
    });
    let wall = t0.elapsed();
    let t1_ns = monotonic_ns();
    let events = match mon.stop() {
        Ok(e) => e,
        Err(e) => return fail(failed, format!("process events: {e}")),
    };
    match out {
        Ok((pid, o)) if o.status.success() => {
            let mut s = analyse(&events, pid, t0_ns, t1_ns, &exe.display().to_string());
            s.wall = wall;
            note(
                "matrix",
                format!(
                    "--jobs {jobs}: wall {}, netprobe share {:.1} % (every child subtracted: \
                     {:.1} %), parts' own share {:.1} % of {} in 13 parts, matrix alone {}",
                    fmt_dur(wall),
                    s.share * 100.0,
                    s.share_all * 100.0,
                    s.parts_own_ns as f64 * 100.0 / s.parts_wall_ns.max(1) as f64,
                    fmt_dur(Duration::from_nanos(s.parts_wall_ns)),
                    fmt_dur(Duration::from_nanos(s.matrix_alone_ns)),
                ),
            );
            samples.push(s);
            wall
        }
        Ok((_, o)) => fail(
            failed,
            format!(
                "netprobe matrix --jobs {jobs} exited {}: {}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            ),
        ),
        Err(e) => fail(failed, e.to_string()),
    }
}

/// Medians of one side's samples, printed as one line (timed runs only).
fn summary(label: &str, s: &[Sample]) -> f64 {
    let share = median_f64(&s.iter().map(|x| x.share).collect::<Vec<_>>());
    let all = median_f64(&s.iter().map(|x| x.share_all).collect::<Vec<_>>());
    let parts = median_f64(
        &s.iter()
            .map(|x| x.parts_own_ns as f64 / x.parts_wall_ns.max(1) as f64)
            .collect::<Vec<_>>(),
    );
    let alone = median(
        &s.iter()
            .map(|x| Duration::from_nanos(x.matrix_alone_ns))
            .collect::<Vec<_>>(),
    );
    let n = s.len() as u64;
    let mut kinds: BTreeMap<&str, (u64, u64, u32)> = BTreeMap::new();
    let mut progs: BTreeMap<&str, (u64, u32)> = BTreeMap::new();
    for x in s {
        for (k, (o, w, c)) in &x.by_kind {
            let e = kinds.entry(k).or_default();
            (e.0, e.1, e.2) = (e.0 + o, e.1 + w, e.2 + c);
        }
        for (k, (ns, c)) in &x.by_program {
            let e = progs.entry(k).or_default();
            (e.0, e.1) = (e.0 + ns, e.1 + c);
        }
    }
    let kinds = kinds
        .iter()
        .map(|(k, (o, w, c))| {
            let per = u64::from(*c).max(1);
            format!(
                "{k} {}x own {} of {} each",
                *c as u64 / n,
                fmt_dur(Duration::from_nanos(o / per)),
                fmt_dur(Duration::from_nanos(w / per))
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let progs = progs
        .iter()
        .map(|(k, (ns, c))| {
            format!(
                "{k} {}x {}",
                *c as u64 / n,
                fmt_dur(Duration::from_nanos(ns / n))
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    note(
        "matrix",
        format!(
            "{label}: netprobe share {:.1} % (runtime+CRIU subtracted; every child subtracted: \
             {:.1} %) | parts' own share {:.1} % | matrix alone {} | target share < 10 %: {} | \
             n={}",
            share * 100.0,
            all * 100.0,
            parts * 100.0,
            fmt_dur(alone),
            verdict(share < 0.10),
            s.len()
        ),
    );
    note("matrix", format!("{label}: per part (mean): {kinds}"));
    note(
        "matrix",
        format!("{label}: children per matrix (exec → exit, summed, mean): {progs}"),
    );
    share
}

/// Runs the section.
pub fn run(cfg: &Config) -> Result<(), String> {
    for b in RUNTIMES.iter().chain(CRIUS.iter()) {
        if !Path::new(b).is_file() {
            return Err(format!("{b} missing: run sudo bash host/setup.sh"));
        }
    }
    let runs = if cfg.quick { 1 } else { cfg.runs };
    let (mut failed, mut failed2) = (None, None);
    let (mut s_side, mut s_seq) = (Vec::new(), Vec::new());
    let warmup = usize::from(!cfg.quick);
    let (side, seq) = alternate(
        warmup,
        runs,
        || one(2, &mut s_side, &mut failed),
        || one(1, &mut s_seq, &mut failed2),
    );
    if let Some(e) = failed.or(failed2) {
        return Err(e);
    }
    // The warm-up samples are printed but not summarised.
    s_side.drain(..warmup.min(s_side.len()));
    s_seq.drain(..warmup.min(s_seq.len()));
    let c = Comparison {
        section: "matrix",
        what: "3 runtimes x 3 CRIUs (13 netprobe runs), --jobs 2".into(),
        netprobe: &side,
        peer_name: "the same cells one after another (--jobs 1)",
        peer: &seq,
        notes: String::new(),
    };
    c.print();
    let share = summary("side by side (--jobs 2)", &s_side);
    summary("one after another (--jobs 1)", &s_seq);
    note(
        "matrix",
        format!(
            "target side by side <= 0.6x sequential: {} ({:.3}; medians {:?} vs {:?}); \
             netprobe's own share of the side-by-side matrix < 10 %: {} ({:.1} %)",
            verdict(c.ratio() <= 0.6),
            c.ratio(),
            median(&side),
            median(&seq),
            verdict(share < 0.10),
            share * 100.0
        ),
    );
    Ok(())
}
