//! Section `ladder`: the whole `netprobe run` (kernel → criu → oci → external-netns), wall
//! time, and the share of it spent in netprobe itself: wall time minus the union of the
//! exec → exit intervals of the processes netprobe started (the runtime and CRIU; then every
//! child: `ip`, `nft`, `iptables`, busybox too), taken from the kernel's process-events
//! connector (see `procmon.rs`).
//!
//! Where netprobe's own time goes: every stretch of the run with no child running is
//! netprobe's; each is put in the phase it falls in — before the first rung, inside a rung
//! (from `netprobe-result.json`'s `started_at` + `duration_ms`), between rungs, after the last
//! one — and named by the children around it (`oci: runc start → ip`).
//!
//! The pair: netprobe's own default (newest `/opt/runc-*`, CRIU 4.3), or
//! `$NETPROBE_BENCH_RUNTIME` / `$NETPROBE_BENCH_CRIU`. `$NETPROBE_BENCH_OLD_EXE`: a second
//! netprobe binary (e.g. the code before a change) run alternating with the first, in the same
//! run, its shares printed beside.

use crate::Config;
use crate::procmon::{Monitor, child_time, monotonic_ns};
use crate::stats::{fmt_dur, median, median_f64, note, verdict};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Every external program the ladder may start directly.
const ALL_TOOLS: [&str; 1] = ["*"];

/// The share target with every child subtracted (issue 36).
const SHARE_TARGET: f64 = 0.05;

/// One `netprobe run` observed.
struct Obs {
    wall: Duration,
    /// Union of the runtime's and CRIU's intervals.
    child: Duration,
    /// 1 - runc+criu union / wall.
    share: f64,
    /// 1 - every child's union / wall.
    all_share: f64,
    by_program: Vec<(String, u64, u32)>,
    /// Own time (ns) per phase (`0 before the rungs`, `1 kernel`, …, `between rungs`, `after
    /// the rungs`).
    phases: BTreeMap<String, u64>,
    /// Own time (ns) per stretch, named by phase and the children around it.
    holes: BTreeMap<String, u64>,
    verdict: String,
    pair: String,
}

/// Runs the section.
pub fn run(cfg: &Config) -> Result<(), String> {
    let new = crate::netprobe_exe();
    let old = std::env::var_os("NETPROBE_BENCH_OLD_EXE").map(PathBuf::from);
    let mut obs_new = Vec::new();
    let mut obs_old = Vec::new();
    for i in 0..=cfg.runs {
        // Alternate, swapping the order every other round.
        let order: Vec<(&Path, bool)> = match &old {
            Some(o) if i % 2 == 1 => vec![(o.as_path(), true), (new.as_path(), false)],
            Some(o) => vec![(new.as_path(), false), (o.as_path(), true)],
            None => vec![(new.as_path(), false)],
        };
        for (exe, is_old) in order {
            let o = one_run(exe)?;
            note(
                "ladder",
                format!(
                    "{}{} {i}: wall {}, runc+criu {}, netprobe share {:.1} % ({:.1} % with every child subtracted)",
                    if i == 0 { "warm-up" } else { "run" },
                    if is_old { " (old exe)" } else { "" },
                    fmt_dur(o.wall),
                    fmt_dur(o.child),
                    o.share * 100.0,
                    o.all_share * 100.0
                ),
            );
            if i > 0 {
                if is_old { &mut obs_old } else { &mut obs_new }.push(o);
            }
        }
    }
    summary("", &obs_new);
    if !obs_old.is_empty() {
        summary("old exe: ", &obs_old);
        let own = |v: &[Obs]| median(&v.iter().map(own_time).collect::<Vec<_>>());
        let share = |v: &[Obs]| median_f64(&v.iter().map(|o| o.all_share).collect::<Vec<_>>());
        note(
            "ladder",
            format!(
                "new vs old exe, alternating (n={}+{}): own time {} vs {} (ratio {:.3}), share with every child subtracted {:.1} % vs {:.1} %",
                obs_new.len(),
                obs_old.len(),
                fmt_dur(own(&obs_new)),
                fmt_dur(own(&obs_old)),
                own(&obs_new).as_secs_f64() / own(&obs_old).as_secs_f64(),
                share(&obs_new) * 100.0,
                share(&obs_old) * 100.0
            ),
        );
    }
    Ok(())
}

/// Wall time minus every child's union.
fn own_time(o: &Obs) -> Duration {
    o.wall.mul_f64(o.all_share.max(0.0))
}

fn summary(prefix: &str, obs: &[Obs]) {
    let Some(first) = obs.first() else { return };
    let n = obs.len() as u64;
    let walls: Vec<Duration> = obs.iter().map(|o| o.wall).collect();
    let childs: Vec<Duration> = obs.iter().map(|o| o.child).collect();
    let share = median_f64(&obs.iter().map(|o| o.share).collect::<Vec<_>>());
    let all_share = median_f64(&obs.iter().map(|o| o.all_share).collect::<Vec<_>>());
    let wall = median(&walls);
    note(
        "ladder",
        format!(
            "{prefix}netprobe run ({}, 4 rungs, verdict {}) | wall {} | runc+criu children {} | \
             netprobe share {:.1} % | with every child subtracted {:.1} % (own time {}) | n={} | \
             target wall < 3 s: {}, share with every child subtracted <= 5 %: {}",
            first.pair,
            first.verdict,
            fmt_dur(wall),
            fmt_dur(median(&childs)),
            share * 100.0,
            all_share * 100.0,
            fmt_dur(median(&obs.iter().map(own_time).collect::<Vec<_>>())),
            obs.len(),
            verdict(wall < Duration::from_secs(3)),
            verdict(all_share <= SHARE_TARGET)
        ),
    );
    let mut totals: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for o in obs {
        for (k, ns, c) in &o.by_program {
            let e = totals.entry(k.clone()).or_default();
            e.0 += ns;
            e.1 += u64::from(*c);
        }
    }
    let breakdown = totals
        .iter()
        .map(|(k, (ns, c))| format!("{k} {}x {}", c / n, ms(ns / n)))
        .collect::<Vec<_>>()
        .join(", ");
    note(
        "ladder",
        format!("{prefix}children per run (exec → exit, summed, mean): {breakdown}"),
    );
    let mean = |pick: &dyn Fn(&Obs) -> &BTreeMap<String, u64>| {
        let mut m: BTreeMap<String, u64> = BTreeMap::new();
        for o in obs {
            for (k, v) in pick(o) {
                *m.entry(k.clone()).or_default() += v;
            }
        }
        m.into_iter().map(|(k, v)| (k, v / n)).collect::<Vec<_>>()
    };
    let phases = mean(&|o| &o.phases);
    note(
        "ladder",
        format!(
            "{prefix}netprobe's own time per run by phase (no child running; mean): {}",
            phases
                .iter()
                .map(|(k, v)| format!(
                    "{} {}",
                    k.trim_start_matches(char::is_numeric).trim(),
                    ms(*v)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    let mut holes = mean(&|o| &o.holes);
    holes.sort_by_key(|h| std::cmp::Reverse(h.1));
    let total: u64 = holes.iter().map(|h| h.1).sum();
    let shown: Vec<String> = holes
        .iter()
        .take(16)
        .map(|(k, v)| format!("{k} {}", ms(*v)))
        .collect();
    note(
        "ladder",
        format!(
            "{prefix}netprobe's own stretches (mean per run, largest first; {} in all): {}",
            ms(total),
            shown.join(", ")
        ),
    );
}

fn ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn one_run(exe: &Path) -> Result<Obs, String> {
    let exe_s = exe.display().to_string();
    let tmp = tempfile::Builder::new()
        .prefix("netprobe-bench-ladder-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let ev = tmp.path().join("evidence");
    let mon = Monitor::start().map_err(|e| format!("process events: {e}"))?;
    // realtime - monotonic, to place the result's rung times on the events' clock.
    let offset = realtime_ns() as i128 - monotonic_ns() as i128;
    let t0 = Instant::now();
    let t0_ns = monotonic_ns();
    let mut cmd = Command::new(exe);
    cmd.args(["run", "--json", "--evidence"]).arg(&ev);
    if let Some(criu) = std::env::var_os("NETPROBE_BENCH_CRIU") {
        cmd.arg("--criu").arg(criu);
    }
    if let Some(rt) = std::env::var_os("NETPROBE_BENCH_RUNTIME") {
        cmd.arg("--runtime").arg(rt);
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
    let end_ns = monotonic_ns();
    let events = mon.stop().map_err(|e| format!("process events: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "netprobe run exited {} (evidence {}):\n{}",
            out.status,
            ev.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let result: serde_json::Value = serde_json::from_slice(&out.stdout)
        .ok()
        .or_else(|| {
            std::fs::read(ev.join("netprobe-result.json"))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
        })
        .ok_or("no netprobe-result.json")?;
    let ct = child_time(&events, pid, &exe_s, &["runc", "crun", "criu"]);
    let all = child_time(&events, pid, &exe_s, &ALL_TOOLS);
    if std::env::var_os("NETPROBE_BENCH_TIMELINE").is_some() {
        let mut tl = all.timeline.clone();
        tl.sort();
        for (a, b, exe) in tl {
            let rel = |t: u64| t.saturating_sub(t0_ns) as f64 / 1e6;
            eprintln!("  {:8.1} .. {:8.1} ms  {exe}", rel(a), rel(b));
        }
    }
    let child = Duration::from_nanos(ct.union_ns);
    let rungs = rung_windows(&result, offset);
    let (phases, holes) = own_stretches(&all.timeline, &rungs, t0_ns, end_ns);
    let s = |p: &str| {
        result
            .pointer(p)
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_string()
    };
    Ok(Obs {
        wall,
        child,
        share: 1.0 - child.as_secs_f64() / wall.as_secs_f64(),
        all_share: 1.0 - all.union_ns as f64 / 1e9 / wall.as_secs_f64(),
        by_program: all
            .by_program
            .iter()
            .map(|(k, (ns, c))| (k.clone(), *ns, *c))
            .collect(),
        phases,
        holes,
        verdict: s("/verdict/code"),
        pair: format!(
            "runtime {} {} + CRIU {} {}",
            s("/host/runtime/path"),
            s("/host/runtime/version"),
            s("/host/criu/path"),
            s("/host/criu/version")
        ),
    })
}

/// Each run rung's `(name, start, end)` on the monotonic clock (ns), from the result's
/// `started_at` (RFC 3339, ms) and `duration_ms`.
fn rung_windows(result: &serde_json::Value, offset: i128) -> Vec<(String, u64, u64)> {
    let mut out = Vec::new();
    for r in result
        .get("rungs")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
    {
        if r.get("status").and_then(|v| v.as_str()) == Some("skipped") {
            continue;
        }
        let (Some(name), Some(at), Some(ms)) = (
            r.get("name").and_then(|v| v.as_str()),
            r.get("started_at").and_then(|v| v.as_str()),
            r.get("duration_ms").and_then(|v| v.as_u64()),
        ) else {
            continue;
        };
        let Ok(t) = chrono::DateTime::parse_from_rfc3339(at) else {
            continue;
        };
        let Some(real) = t.timestamp_nanos_opt() else {
            continue;
        };
        let start = (real as i128 - offset).max(0) as u64;
        out.push((name.to_string(), start, start + ms * 1_000_000));
    }
    out
}

/// Splits the stretches of `[t0, end]` with no child running by phase, and names each by the
/// children around it. Returns (own ns per phase, own ns per named stretch).
fn own_stretches(
    timeline: &[(u64, u64, String)],
    rungs: &[(String, u64, u64)],
    t0: u64,
    end: u64,
) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let label = |exe: &str| exe.rsplit('/').next().unwrap_or(exe).to_string();
    // Busy intervals, merged, each with the child that starts it and the one that ends last.
    let mut tl: Vec<&(u64, u64, String)> = timeline.iter().collect();
    tl.sort();
    let mut busy: Vec<(u64, u64, String, String)> = Vec::new();
    for (a, b, exe) in tl {
        match busy.last_mut() {
            Some(last) if *a <= last.1 => {
                if *b > last.1 {
                    last.1 = *b;
                    last.3 = label(exe);
                }
            }
            _ => busy.push((*a, *b, label(exe), label(exe))),
        }
    }
    let mut holes: Vec<(u64, u64, String, String)> = Vec::new();
    let mut at = t0;
    let mut prev = "start".to_string();
    for (a, b, first, last) in &busy {
        if *a > at {
            holes.push((at, *a, prev.clone(), first.clone()));
        }
        at = at.max(*b);
        prev = last.clone();
    }
    if end > at {
        holes.push((at, end, prev, "exit".into()));
    }
    let mut phases: BTreeMap<String, u64> = BTreeMap::new();
    let mut named: BTreeMap<String, u64> = BTreeMap::new();
    let first_start = rungs.first().map_or(end, |r| r.1);
    let last_end = rungs.last().map_or(end, |r| r.2);
    for (a, b, p, n) in holes {
        let overlap = |s: u64, e: u64| b.min(e).saturating_sub(a.max(s));
        let mut inside = 0;
        let mut phase_of_mid = None;
        let mid = a + (b - a) / 2;
        for (i, (name, s, e)) in rungs.iter().enumerate() {
            let o = overlap(*s, *e);
            inside += o;
            if o > 0 {
                *phases.entry(format!("{} {name}", i + 1)).or_default() += o;
            }
            if mid >= *s && mid < *e {
                phase_of_mid = Some(name.clone());
            }
        }
        let before = overlap(t0, first_start);
        let after = overlap(last_end, end);
        *phases.entry("0 before the rungs".into()).or_default() += before;
        *phases.entry("9 after the rungs".into()).or_default() += after;
        let between = (b - a).saturating_sub(inside + before + after);
        if between > 0 {
            *phases.entry("8 between rungs".into()).or_default() += between;
        }
        let phase = phase_of_mid.unwrap_or_else(|| {
            if mid < first_start {
                "before".into()
            } else if mid >= last_end {
                "after".into()
            } else {
                "between".into()
            }
        });
        *named.entry(format!("{phase}: {p} → {n}")).or_default() += b - a;
    }
    (phases, named)
}
