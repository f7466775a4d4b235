//! `netprobe diff OLD NEW`: what moved between two results — verdict, rung statuses, assertions,
//! binaries and pins, host, declared differences, and timing ratios (new/old).

use super::{Result, load_result, one_line, status_word};
use crate::evidence::result::{
    AssertionResult, BinaryFacts, PinCheck, RESULT_FILE, RunResult, RungName, RungResult, Status,
    VerdictCode,
};
use std::path::Path;

/// A rung whose status differs (`None`: the rung is absent from that result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RungChange {
    /// The rung.
    pub rung: RungName,
    /// Status in the old result.
    pub old: Option<Status>,
    /// Status in the new result.
    pub new: Option<Status>,
    /// The new rung's summary (the deciding fact), or the old one's when the rung disappeared.
    pub summary: String,
}

/// One side of an assertion: what was observed and whether it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssertionSide {
    /// `AssertionResult::observed`.
    pub observed: String,
    /// `AssertionResult::passed`.
    pub passed: bool,
}

/// An assertion whose observed value or pass/fail moved (or that exists on one side only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssertionChange {
    /// The rung.
    pub rung: RungName,
    /// The assertion id.
    pub id: String,
    /// `AssertionResult::expected` (of the new side when present).
    pub expected: String,
    /// Old side, `None` when the assertion is new.
    pub old: Option<AssertionSide>,
    /// New side, `None` when the assertion is gone.
    pub new: Option<AssertionSide>,
}

/// A fact about the host, a binary or a pin that changed: `subject` (`host`, `criu`, `runtime`,
/// `pin criu`, `pin runtime`), `field` (`version`, `sha256`, `bytes`, `path`, `matches`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactChange {
    /// What the field belongs to.
    pub subject: String,
    /// The field.
    pub field: String,
    /// Old value as text (`absent` when missing).
    pub old: String,
    /// New value as text (`absent` when missing).
    pub new: String,
}

/// A duration in both results and its ratio.
#[derive(Debug, Clone, PartialEq)]
pub struct TimingRatio {
    /// The rung; `None` for the whole run.
    pub rung: Option<RungName>,
    /// `None` for the whole rung (or run), else the named timing (`RungResult::timings_ms` key).
    pub step: Option<String>,
    /// Old milliseconds.
    pub old_ms: u64,
    /// New milliseconds.
    pub new_ms: u64,
}

impl TimingRatio {
    /// `new_ms / old_ms`; `None` when `old_ms` is 0.
    pub fn ratio(&self) -> Option<f64> {
        (self.old_ms > 0).then(|| self.new_ms as f64 / self.old_ms as f64)
    }
}

/// Everything that moved between two results. Build with [`diff_results`] or [`diff_paths`],
/// show with [`render_diff`].
#[derive(Debug, Clone, PartialEq)]
pub struct ResultDiff {
    /// Where the old result came from (a result file path, or `run started <time>`).
    pub old_source: String,
    /// Where the new result came from.
    pub new_source: String,
    /// Old verdict code.
    pub old_verdict: VerdictCode,
    /// New verdict code.
    pub new_verdict: VerdictCode,
    /// New verdict summary.
    pub new_verdict_summary: String,
    /// Rungs whose status changed, in ladder order.
    pub rungs: Vec<RungChange>,
    /// Assertions whose observed value or pass/fail moved, in ladder then id order.
    pub assertions: Vec<AssertionChange>,
    /// Host, binary and pin facts that changed.
    pub facts: Vec<FactChange>,
    /// Declared differences only in the new result.
    pub declared_added: Vec<String>,
    /// Declared differences only in the old result.
    pub declared_removed: Vec<String>,
    /// Declared differences of the new result (they accompany the timing numbers).
    pub declared_new: Vec<String>,
    /// Every duration present in both results: the run, each rung, each named timing.
    pub timings: Vec<TimingRatio>,
}

impl ResultDiff {
    /// True when the verdict code differs.
    pub fn verdict_changed(&self) -> bool {
        self.old_verdict != self.new_verdict
    }

    /// True when the verdict or a rung's status differs (the CLI exits 1 then): two runs of
    /// part of the ladder — a matrix's cell folders, `--phases` runs — are both inconclusive
    /// whatever their rungs say, so the rungs are what changed.
    pub fn changed(&self) -> bool {
        self.verdict_changed() || !self.rungs.is_empty()
    }
}

/// Compares two results. Pure; `old_source`/`new_source` say `run started <started_at>`.
pub fn diff_results(old: &RunResult, new: &RunResult) -> ResultDiff {
    let mut d = ResultDiff {
        old_source: format!("run started {}", old.started_at),
        new_source: format!("run started {}", new.started_at),
        old_verdict: old.verdict.code,
        new_verdict: new.verdict.code,
        new_verdict_summary: new.verdict.summary.clone(),
        rungs: Vec::new(),
        assertions: Vec::new(),
        facts: Vec::new(),
        declared_added: new
            .declared_differences
            .iter()
            .filter(|x| !old.declared_differences.contains(x))
            .cloned()
            .collect(),
        declared_removed: old
            .declared_differences
            .iter()
            .filter(|x| !new.declared_differences.contains(x))
            .cloned()
            .collect(),
        declared_new: new.declared_differences.clone(),
        timings: vec![TimingRatio {
            rung: None,
            step: None,
            old_ms: old.duration_ms,
            new_ms: new.duration_ms,
        }],
    };
    for name in RungName::ALL {
        diff_rung(name, old.rung(name), new.rung(name), &mut d);
    }
    d.facts = fact_changes(old, new);
    d
}

/// The status, assertion and timing changes of rung `name` (`o`/`n`: the rung in the old and
/// new result, if it ran), appended to `d`.
fn diff_rung(name: RungName, o: Option<&RungResult>, n: Option<&RungResult>, d: &mut ResultDiff) {
    if o.is_none() && n.is_none() {
        return;
    }
    let (os, ns) = (o.map(|r| r.status), n.map(|r| r.status));
    if os != ns {
        d.rungs.push(RungChange {
            rung: name,
            old: os,
            new: ns,
            summary: n.or(o).map(|r| r.summary.clone()).unwrap_or_default(),
        });
    }
    let empty = Vec::new();
    let oa = o.map(|r| &r.assertions).unwrap_or(&empty);
    let na = n.map(|r| &r.assertions).unwrap_or(&empty);
    let mut ids: Vec<&String> = oa.iter().chain(na.iter()).map(|a| &a.id).collect();
    ids.sort();
    ids.dedup();
    for id in ids {
        let oa = oa.iter().find(|a| &a.id == id);
        let na = na.iter().find(|a| &a.id == id);
        let side = |a: &AssertionResult| AssertionSide {
            observed: a.observed.clone(),
            passed: a.passed,
        };
        let (os, ns) = (oa.map(side), na.map(side));
        if os != ns {
            d.assertions.push(AssertionChange {
                rung: name,
                id: id.clone(),
                expected: na.or(oa).map(|a| a.expected.clone()).unwrap_or_default(),
                old: os,
                new: ns,
            });
        }
    }
    if let (Some(o), Some(n)) = (o, n) {
        d.timings.push(TimingRatio {
            rung: Some(name),
            step: None,
            old_ms: o.duration_ms,
            new_ms: n.duration_ms,
        });
        for (k, &nms) in &n.timings_ms {
            if let Some(&oms) = o.timings_ms.get(k) {
                d.timings.push(TimingRatio {
                    rung: Some(name),
                    step: Some(k.clone()),
                    old_ms: oms,
                    new_ms: nms,
                });
            }
        }
    }
}

/// A compared field: its name and how to show it.
type Field<T> = (&'static str, fn(&T) -> String);

/// The host, binary and pin facts that differ between `old` and `new`, in that order.
fn fact_changes(old: &RunResult, new: &RunResult) -> Vec<FactChange> {
    let mut facts = Vec::new();
    let (oh, nh) = (&old.host, &new.host);
    let mut fact = |subject: &str, field: &str, o: String, n: String| {
        if o != n {
            facts.push(FactChange {
                subject: subject.into(),
                field: field.into(),
                old: o,
                new: n,
            });
        }
    };
    fact(
        "host",
        "kernel_release",
        oh.kernel_release.clone(),
        nh.kernel_release.clone(),
    );
    fact("host", "machine", oh.machine.clone(), nh.machine.clone());
    fact("host", "os", opt(&oh.os), opt(&nh.os));
    fact("host", "cgroup", oh.cgroup.clone(), nh.cgroup.clone());
    for (name, ob, nb) in [
        ("criu", &oh.criu, &nh.criu),
        ("runtime", &oh.runtime, &nh.runtime),
    ] {
        let get = |b: &Option<BinaryFacts>, f: fn(&BinaryFacts) -> String| {
            b.as_ref().map(f).unwrap_or_else(|| "absent".into())
        };
        let fields: [Field<BinaryFacts>; 4] = [
            ("path", |b| b.path.clone()),
            ("version", |b| b.version.clone()),
            ("sha256", |b| b.sha256.clone()),
            ("bytes", |b| b.bytes.to_string()),
        ];
        for (field, f) in fields {
            fact(name, field, get(ob, f), get(nb, f));
        }
    }
    let mut pin_names: Vec<&String> = old.pins.iter().chain(&new.pins).map(|p| &p.name).collect();
    pin_names.sort();
    pin_names.dedup();
    for name in pin_names {
        let op = old.pins.iter().find(|p| &p.name == name);
        let np = new.pins.iter().find(|p| &p.name == name);
        let subject = format!("pin {name}");
        let g = |p: Option<&PinCheck>, f: fn(&PinCheck) -> String| {
            p.map(f).unwrap_or_else(|| "absent".into())
        };
        let fields: [Field<PinCheck>; 3] = [
            ("pinned_version", |p| p.pinned_version.clone()),
            ("pinned_sha256", |p| opt(&p.pinned_sha256)),
            ("matches", |p| p.matches.to_string()),
        ];
        for (field, f) in fields {
            fact(&subject, field, g(op, f), g(np, f));
        }
    }
    facts
}

fn opt(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "absent".into())
}

/// Loads both results (each an evidence directory or a result file, see [`load_result`]) and
/// compares them; the sources are the result file paths. Errors: those of [`load_result`].
pub fn diff_paths(old: &Path, new: &Path) -> Result<ResultDiff> {
    let (o, n) = (load_result(old)?, load_result(new)?);
    let mut d = diff_results(&o, &n);
    let src = |p: &Path| {
        if p.is_dir() {
            p.join(RESULT_FILE).display().to_string()
        } else {
            p.display().to_string()
        }
    };
    d.old_source = src(old);
    d.new_source = src(new);
    Ok(d)
}

fn st(s: Option<Status>) -> &'static str {
    s.map(status_word).unwrap_or("absent")
}

fn side(s: &Option<AssertionSide>) -> String {
    match s {
        Some(a) => format!(
            "{} ({})",
            a.observed,
            if a.passed { "pass" } else { "FAIL" }
        ),
        None => "absent".into(),
    }
}

/// Plain text of a diff, most important first: sources, verdict (changed or not), rung status
/// changes, assertion changes, host/binary/pin changes, declared-difference changes, then timing
/// ratios `old ms -> new ms  xR.RR` with the new run's declared differences. Ends with a newline.
pub fn render_diff(d: &ResultDiff) -> String {
    render_diff_raw(d)
        .lines()
        .map(one_line)
        .map(|l| l + "\n")
        .collect()
}

fn render_diff_raw(d: &ResultDiff) -> String {
    let mut s = String::new();
    s.push_str(&format!("old: {}\nnew: {}\n", d.old_source, d.new_source));
    if d.verdict_changed() {
        s.push_str(&format!(
            "verdict CHANGED: {} -> {} — {}\n",
            d.old_verdict, d.new_verdict, d.new_verdict_summary
        ));
    } else if d.rungs.is_empty() {
        s.push_str(&format!("verdict unchanged: {}\n", d.new_verdict));
    } else {
        s.push_str(&format!(
            "verdict unchanged: {} — but {} rung status(es) CHANGED (below){}\n",
            d.new_verdict,
            d.rungs.len(),
            if d.new_verdict == VerdictCode::Inconclusive {
                "; a run of part of the ladder (a matrix cell's folder) is inconclusive whatever its rungs say: a matrix's cell verdicts are in its matrix.json"
            } else {
                ""
            }
        ));
    }
    s.push_str("\nrungs:\n");
    if d.rungs.is_empty() {
        s.push_str("  no status changed\n");
    }
    for r in &d.rungs {
        s.push_str(&format!(
            "  {:<15} {} -> {}  ({})\n",
            r.rung.as_str(),
            st(r.old),
            st(r.new),
            r.summary
        ));
    }
    s.push_str("\nassertions:\n");
    if d.assertions.is_empty() {
        s.push_str("  none moved\n");
    }
    for a in &d.assertions {
        s.push_str(&format!(
            "  {}/{}: {} -> {}  (expected {})\n",
            a.rung,
            a.id,
            side(&a.old),
            side(&a.new),
            a.expected
        ));
    }
    s.push_str("\nhost, binaries and pins:\n");
    if d.facts.is_empty() {
        s.push_str("  unchanged\n");
    }
    for f in &d.facts {
        s.push_str(&format!(
            "  {} {}: {} -> {}\n",
            f.subject, f.field, f.old, f.new
        ));
    }
    if !d.declared_added.is_empty() || !d.declared_removed.is_empty() {
        s.push_str("\ndeclared differences changed:\n");
        for x in &d.declared_removed {
            s.push_str(&format!("  - {x}\n"));
        }
        for x in &d.declared_added {
            s.push_str(&format!("  + {x}\n"));
        }
    }
    s.push_str(&format!(
        "\ntimings (ms, monotonic, from each {RESULT_FILE}; ratio = new/old):\n"
    ));
    for t in &d.timings {
        let what = match (&t.rung, &t.step) {
            (None, _) => "run".to_string(),
            (Some(r), None) => r.to_string(),
            (Some(r), Some(k)) => format!("{r}/{k}"),
        };
        let ratio = t
            .ratio()
            .map(|r| format!("x{r:.2}"))
            .unwrap_or_else(|| "n/a (old 0 ms)".into());
        s.push_str(&format!(
            "  {what:<28} {:>8} -> {:>8}  {ratio}\n",
            t.old_ms, t.new_ms
        ));
    }
    // Each declared difference once: those added are listed above (`+`), the rest here.
    let kept: Vec<&String> = d
        .declared_new
        .iter()
        .filter(|x| !d.declared_added.contains(x))
        .collect();
    let added = d.declared_new.len() - kept.len();
    match (kept.is_empty(), added) {
        (true, 0) => s.push_str("declared differences (new run): none\n"),
        (true, n) => s.push_str(&format!(
            "declared differences (new run): the {n} added above\n"
        )),
        (false, n) => {
            let besides = match n {
                0 => String::new(),
                n => format!(", besides the {n} added above"),
            };
            s.push_str(&format!("declared differences (new run){besides}:\n"));
            for x in kept {
                s.push_str(&format!("  - {x}\n"));
            }
        }
    }
    s
}
