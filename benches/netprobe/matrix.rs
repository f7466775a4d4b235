//! Section `matrix`: a 3 runtimes × 3 CRIUs `netprobe matrix` (13 runs: kernel once, criu per
//! CRIU, runtime rungs per pair) with its parts side by side (`--jobs 2`) against the same
//! cells one after another (`--jobs 1`), alternating. Target: side by side ≤ 0.6× sequential on
//! 2 cores. netprobe's own share of a matrix is not measured here (see the `ladder` section for
//! one run's share).

use crate::Config;
use crate::stats::{Comparison, alternate, median, note, verdict};
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

fn one(jobs: usize, failed: &mut Option<String>) -> Duration {
    let tmp = match tempfile::Builder::new()
        .prefix("netprobe-bench-matrix-")
        .tempdir()
    {
        Ok(t) => t,
        Err(e) => {
            *failed = Some(e.to_string());
            return Duration::ZERO;
        }
    };
    let mut cmd = Command::new(crate::netprobe_exe());
    cmd.args(["matrix", "--jobs", &jobs.to_string(), "--evidence"])
        .arg(tmp.path().join("mx"));
    for r in RUNTIMES {
        cmd.args(["--runtime", r]);
    }
    for c in CRIUS {
        cmd.args(["--criu", c]);
    }
    let t0 = Instant::now();
    let out = cmd.stdin(Stdio::null()).output();
    let wall = t0.elapsed();
    match out {
        Ok(o) if o.status.success() => wall,
        Ok(o) => {
            *failed = Some(format!(
                "netprobe matrix --jobs {jobs} exited {}: {}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            ));
            wall
        }
        Err(e) => {
            *failed = Some(e.to_string());
            wall
        }
    }
}

/// Runs the section.
pub fn run(cfg: &Config) -> Result<(), String> {
    for b in RUNTIMES.iter().chain(CRIUS.iter()) {
        if !Path::new(b).is_file() {
            return Err(format!("{b} missing: run sudo bash host/setup.sh"));
        }
    }
    let runs = if cfg.quick { 1 } else { cfg.runs };
    let mut failed = None;
    let mut failed2 = None;
    let warmup = usize::from(!cfg.quick);
    let (side, seq) = alternate(
        warmup,
        runs,
        || one(2, &mut failed),
        || one(1, &mut failed2),
    );
    if let Some(e) = failed.or(failed2) {
        return Err(e);
    }
    let c = Comparison {
        section: "matrix",
        what: "3 runtimes x 3 CRIUs (13 netprobe runs), --jobs 2".into(),
        netprobe: &side,
        peer_name: "the same cells one after another (--jobs 1)",
        peer: &seq,
        notes: String::new(),
    };
    c.print();
    note(
        "matrix",
        format!(
            "target side by side <= 0.6x sequential: {} ({:.3}; medians {:?} vs {:?})",
            verdict(c.ratio() <= 0.6),
            c.ratio(),
            median(&side),
            median(&seq)
        ),
    );
    Ok(())
}
