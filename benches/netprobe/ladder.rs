//! Section `ladder`: the whole `netprobe run` (kernel → criu → oci → external-netns), wall
//! time, and the share of it spent in netprobe itself: wall time minus the union of the
//! exec → exit intervals of the runtime (`runc`) and CRIU processes netprobe started, taken
//! from the kernel's process-events connector (see `procmon.rs`).

use crate::Config;
use crate::procmon::{Monitor, child_time, monotonic_ns};
use crate::stats::{fmt_dur, median, median_f64, note, verdict};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every external program the ladder may start directly.
const ALL_TOOLS: [&str; 8] = [
    "runc", "criu", "ip", "nsenter", "busybox", "strace", "tar", "?",
];

/// Runs the section.
pub fn run(cfg: &Config) -> Result<(), String> {
    let exe = crate::netprobe_exe();
    let exe_s = exe.display().to_string();
    let counted = ["runc", "criu"];
    let (mut walls, mut childs, mut shares) = (Vec::new(), Vec::new(), Vec::new());
    let mut all_shares = Vec::new();
    let mut totals: std::collections::BTreeMap<String, (u64, u32)> = Default::default();
    let mut verdict_code = String::new();
    for i in 0..=cfg.runs {
        let tmp = tempfile::Builder::new()
            .prefix("netprobe-bench-ladder-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let ev = tmp.path().join("evidence");
        let mon = Monitor::start().map_err(|e| format!("process events: {e}"))?;
        let t0 = Instant::now();
        let t0_ns = monotonic_ns();
        let mut cmd = Command::new(&exe);
        cmd.args(["run", "--json", "--evidence"]).arg(&ev);
        // The pinned CRIU build (host/ installs it there), named explicitly.
        if let Some(criu) = crate::criu_path() {
            cmd.arg("--criu").arg(criu);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawn {exe_s}: {e}"))?;
        let pid = child.id() as i32;
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let wall = t0.elapsed();
        let events = mon.stop().map_err(|e| format!("process events: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "netprobe run exited {} (evidence {}):\n{}",
                out.status,
                ev.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        verdict_code = read_verdict(&ev, &out.stdout);
        let ct = child_time(&events, pid, &exe_s, &counted);
        let all = child_time(&events, pid, &exe_s, &ALL_TOOLS);
        all_shares.push(1.0 - all.union_ns as f64 / 1e9 / wall.as_secs_f64());
        let child = Duration::from_nanos(ct.union_ns);
        let share = 1.0 - child.as_secs_f64() / wall.as_secs_f64();
        if std::env::var_os("NETPROBE_BENCH_TIMELINE").is_some() {
            let mut tl = all.timeline.clone();
            tl.sort();
            for (a, b, exe) in tl {
                let rel = |t: u64| t.saturating_sub(t0_ns) as f64 / 1e6;
                eprintln!("  {:8.1} .. {:8.1} ms  {exe}", rel(a), rel(b));
            }
        }
        note(
            "ladder",
            format!(
                "{} {}: wall {}, runc+criu {}, netprobe share {:.1} %",
                if i == 0 { "warm-up" } else { "run" },
                i,
                fmt_dur(wall),
                fmt_dur(child),
                share * 100.0
            ),
        );
        if i > 0 {
            walls.push(wall);
            childs.push(child);
            shares.push(share);
            for (k, (ns, n)) in ct.by_program {
                let e = totals.entry(k).or_default();
                e.0 += ns;
                e.1 += n;
            }
        }
        drop(tmp);
    }
    let runs = walls.len() as u64;
    let breakdown = totals
        .iter()
        .map(|(k, (ns, n))| {
            format!(
                "{k} {}x {}",
                *n as u64 / runs,
                fmt_dur(Duration::from_nanos(ns / runs))
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let wall = median(&walls);
    let share = median_f64(&shares);
    note(
        "ladder",
        format!(
            "netprobe run (4 rungs, verdict {verdict_code}) | wall {} | runc+criu children {} | \
             netprobe share {:.1} % | n={} | target wall < 3 s: {}, share < 10 %: {}",
            fmt_dur(wall),
            fmt_dur(median(&childs)),
            share * 100.0,
            walls.len(),
            verdict(wall < Duration::from_secs(3)),
            verdict(share < 0.10)
        ),
    );
    all_shares.remove(0);
    note(
        "ladder",
        format!(
            "children per run (exec → exit, summed, mean): {breakdown} | netprobe share with \
             every child process subtracted (ip/nsenter views too): {:.1} %",
            median_f64(&all_shares) * 100.0
        ),
    );
    Ok(())
}

fn read_verdict(ev: &Path, stdout: &[u8]) -> String {
    let v: Option<serde_json::Value> = serde_json::from_slice(stdout).ok().or_else(|| {
        std::fs::read(ev.join("netprobe-result.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    });
    v.and_then(|v| {
        v.pointer("/verdict/code")
            .and_then(|c| c.as_str())
            .map(str::to_string)
    })
    .unwrap_or_else(|| "?".into())
}
