//! Timing helpers: alternating runs, medians, and the one-line report format.

use std::time::{Duration, Instant};

/// Runs `a` (netprobe) and `b` (the peer) `warmup` times each, then `runs` times each,
/// alternating a, b, a, b … so drift (page cache, frequency, neighbours on the 2 cores) hits
/// both. Each closure returns the duration it measured (monotonic clock); only the timed runs
/// are returned.
pub fn alternate(
    warmup: usize,
    runs: usize,
    mut a: impl FnMut() -> Duration,
    mut b: impl FnMut() -> Duration,
) -> (Vec<Duration>, Vec<Duration>) {
    for _ in 0..warmup {
        a();
        b();
    }
    let (mut ra, mut rb) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for i in 0..runs {
        // Swap the order every other round so neither side always runs second.
        if i % 2 == 0 {
            ra.push(a());
            rb.push(b());
        } else {
            rb.push(b());
            ra.push(a());
        }
    }
    (ra, rb)
}

/// Runs `f` `warmup` times untimed, then `runs` times; returns the durations `f` reported.
pub fn repeat(warmup: usize, runs: usize, mut f: impl FnMut() -> Duration) -> Vec<Duration> {
    for _ in 0..warmup {
        f();
    }
    (0..runs).map(|_| f()).collect()
}

/// Times `f` on the monotonic clock, returning its value and the wall time.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let r = f();
    (r, t.elapsed())
}

/// Median of `v` (mean of the two middle values for an even count). `v` must not be empty.
pub fn median(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2
    }
}

/// Median of plain numbers (e.g. shares); NaN (printed `NaN`) when `v` is empty.
pub fn median_f64(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// First quartile, median and third quartile of `v` (nearest rank; NaN each when empty).
pub fn quartiles_f64(v: &[f64]) -> (f64, f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
    (at(0.25), median_f64(&s), at(0.75))
}

/// The spread of an alternating comparison ([`alternate`]): round `i`'s netprobe run against
/// the same round's peer run, as ratios and as netprobe's milliseconds over the peer, each
/// with its quartiles — how far one run's ratio wanders from the medians' ratio.
pub fn pair_spread(netprobe: &[Duration], peer: &[Duration]) -> String {
    let pairs: Vec<(f64, f64)> = netprobe
        .iter()
        .zip(peer)
        .map(|(a, b)| (a.as_secs_f64(), b.as_secs_f64()))
        .collect();
    let ratios: Vec<f64> = pairs.iter().map(|(a, b)| a / b).collect();
    let over: Vec<f64> = pairs.iter().map(|(a, b)| (a - b) * 1e3).collect();
    let (r1, r2, r3) = quartiles_f64(&ratios);
    let (o1, o2, o3) = quartiles_f64(&over);
    format!(
        "per round (netprobe run vs the peer run beside it, n={}): ratio median {r2:.3}, quartiles {r1:.3}–{r3:.3}; netprobe over the peer median {o2:.1} ms, quartiles {o1:.1}–{o3:.1} ms",
        pairs.len()
    )
}

/// Human duration: µs below 1 ms, ms below 10 s.
pub fn fmt_dur(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.1} µs")
    } else if us < 10_000_000.0 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// One comparison line: what was measured, netprobe's median, the peer's median, the ratio
/// (netprobe / peer, lower is better) and the speed-up (peer / netprobe), the number of runs,
/// and free-form notes (throughput, per-link cost, target).
pub struct Comparison<'a> {
    /// Section name (`logs`, `links`, …).
    pub section: &'a str,
    /// What was measured.
    pub what: String,
    /// netprobe's durations.
    pub netprobe: &'a [Duration],
    /// The peer's name, as a user would type it.
    pub peer_name: &'a str,
    /// The peer's durations.
    pub peer: &'a [Duration],
    /// Notes appended to the line.
    pub notes: String,
}

impl Comparison<'_> {
    /// netprobe median / peer median.
    pub fn ratio(&self) -> f64 {
        median(self.netprobe).as_secs_f64() / median(self.peer).as_secs_f64()
    }

    /// Prints the line.
    pub fn print(&self) {
        let r = self.ratio();
        println!(
            "[{}] {} | netprobe {} | {} {} | ratio {:.3} ({:.2}x {}) | n={}+{}{}{}",
            self.section,
            self.what,
            fmt_dur(median(self.netprobe)),
            self.peer_name,
            fmt_dur(median(self.peer)),
            r,
            if r <= 1.0 { 1.0 / r } else { r },
            if r <= 1.0 { "faster" } else { "slower" },
            self.netprobe.len(),
            self.peer.len(),
            if self.notes.is_empty() { "" } else { " | " },
            self.notes,
        );
    }
}

/// Prints a line without a peer (floors, shares, peak memory).
pub fn note(section: &str, text: impl AsRef<str>) {
    println!("[{section}] {}", text.as_ref());
}

/// "met" / "MISSED" for a target check.
pub fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}
