//! The data a report template sees: one [`Page`] built from a [`RunResult`] and the evidence
//! directory, shared by `templates/report.md` and `templates/report.html`. Everything here is
//! plain text (never markup): the templates escape it on output (see [`super::template`]).
//! Presentation that needs arithmetic (the ladder SVG's geometry, word wrapping) is done here,
//! so the templates only place values.

use super::{LineKind, NetStateDiff, first_broken_rung, netstate_diff, status_word};
use crate::evidence::result::{
    AssertionResult, RESULT_FILE, RunResult, RungResult, Status, VerdictCode,
};
use serde::Serialize;
use std::path::Path;

/// One report page. Source: `netprobe-result.json` (`result`) plus each rung's
/// `netstate-{before,after}.json` in the evidence directory.
#[derive(Debug, Serialize)]
pub(crate) struct Page<'a> {
    /// Verdict code, e.g. `runtime-empty-ns`.
    pub code: &'static str,
    /// Fill colour of the verdict box (green: the runtime preserves the netns; orange:
    /// inconclusive; red otherwise).
    pub verdict_colour: &'static str,
    /// The verdict's one-sentence summary.
    pub summary: &'a str,
    /// The verdict's reason, if any.
    pub reason: Option<&'a str>,
    /// Assertion ids the verdict rests on.
    pub rests_on: &'a [String],
    /// The first broken rung (ladder order), with its failing `pass` assertions.
    pub culprit: Option<Rung<'a>>,
    /// The verdict the recorded command expected (`--expect`), and whether this one is it.
    pub expected: Option<Expected<'a>>,
    /// netprobe version that wrote the result.
    pub tool_version: &'a str,
    /// RFC 3339 start and end of the run.
    pub started_at: &'a str,
    /// RFC 3339 end of the run.
    pub finished_at: &'a str,
    /// Whole run, milliseconds (monotonic clock).
    pub duration_ms: u64,
    /// The command line, joined by spaces.
    pub command: String,
    /// `netprobe-result.json`.
    pub result_file: &'static str,
    /// Declared differences from the reference arm.
    pub declared: &'a [String],
    /// Host facts.
    pub host: Host<'a>,
    /// `criu` then `runtime`.
    pub binaries: Vec<Binary<'a>>,
    /// Rungs in ladder order.
    pub rungs: Vec<Rung<'a>>,
    /// Every artifact (result-level then rungs'), deduplicated and sorted by path.
    pub artifacts: Vec<ArtifactRow<'a>>,
    /// Geometry of the HTML ladder SVG.
    pub ladder: Ladder,
    /// What `netprobe verify` found when the report was rendered; `None` when the page was
    /// rendered without it ([`Page::new`] alone).
    pub verification: Option<Verification>,
}

/// The outcome of `netprobe verify` on the evidence folder at render time, as the report
/// shows it. Source: [`crate::evidence::result::VerifyOutcome`] (computed by the caller: the
/// report imports no probe code).
#[derive(Debug, Serialize)]
pub(crate) struct Verification {
    /// The evidence reproduces the recorded result (no mismatch, same verdict).
    pub reproduced: bool,
    /// Assertions re-evaluated.
    pub assertions: usize,
    /// Artifacts whose sha256 was checked.
    pub artifacts: usize,
    /// Fields re-derived from the files and compared.
    pub rederived: usize,
    /// Recorded fields not re-derived (clock readings, live-only facts, what another netprobe
    /// version recorded from its own embedded pins and probe specs), by name.
    pub not_rederived: Vec<String>,
    /// Every mismatch, as `netprobe verify` prints it.
    pub mismatches: Vec<String>,
    /// The verdict the evidence gives, when it differs from the recorded one.
    pub verdict_from_evidence: Option<&'static str>,
    /// Why verification could not run (then nothing above was checked).
    pub error: Option<String>,
}

impl Verification {
    /// The view of a verify run (`Ok`) or of its failure (`Err`: the error's text).
    /// A matrix outcome (which a run page never gets) shows as not verified, naming why.
    pub(crate) fn of(v: Result<super::Verified, super::VerifyFailure>) -> Self {
        let v = match v.map_err(|e| e.to_string()) {
            Ok(super::Verified::Run(o)) => Ok(*o),
            Ok(super::Verified::Matrix { .. }) => {
                Err("a matrix outcome was given for a run folder".to_string())
            }
            Err(e) => Err(e),
        };
        match v.as_ref() {
            Ok(o) => Verification {
                reproduced: o.reproduced(),
                assertions: o.assertions,
                artifacts: o.artifacts,
                rederived: o.rederived.len(),
                not_rederived: o.not_rederived.clone(),
                mismatches: o.mismatches.clone(),
                verdict_from_evidence: (o.verdict.code != o.recorded.code)
                    .then(|| o.verdict.code.as_str()),
                error: None,
            },
            Err(e) => Verification {
                reproduced: false,
                assertions: 0,
                artifacts: 0,
                rederived: 0,
                not_rederived: Vec::new(),
                mismatches: Vec::new(),
                verdict_from_evidence: None,
                error: Some(e.clone()),
            },
        }
    }
}

/// Host facts as printed.
#[derive(Debug, Serialize)]
pub(crate) struct Host<'a> {
    pub kernel_release: &'a str,
    pub machine: &'a str,
    pub kernel_version: &'a str,
    pub cgroup: &'a str,
    /// `unknown` when not recorded.
    pub os: &'a str,
}

/// One binary row (`criu` or `runtime`); `path` is `None` when the binary was not used.
#[derive(Debug, Serialize)]
pub(crate) struct Binary<'a> {
    pub name: &'static str,
    pub path: Option<&'a str>,
    pub version: &'a str,
    pub bytes: u64,
    pub sha256: &'a str,
    /// First 16 hex digits of `sha256`.
    pub sha_short: &'a str,
    /// The pin for this binary, if one exists.
    pub pin: Option<Pin<'a>>,
}

/// A pin compared with the observed binary.
#[derive(Debug, Serialize)]
pub(crate) struct Pin<'a> {
    pub version: &'a str,
    /// First 16 hex digits of the pinned sha256, if pinned.
    pub sha_short: Option<&'a str>,
    pub bytes: Option<u64>,
    pub matches: bool,
}

/// One rung.
#[derive(Debug, Serialize)]
pub(crate) struct Rung<'a> {
    pub name: &'static str,
    /// `pass`, `fail`, `error` or `skipped` (CSS class and colour key).
    pub status: &'static str,
    /// `pass`, `FAIL`, `ERROR` or `skipped` (as printed).
    pub status_word: &'static str,
    pub duration_ms: u64,
    pub summary: &'a str,
    pub error: Option<&'a str>,
    pub assertions: Vec<Assertion<'a>>,
    /// Network state before/after, when the rung recorded it.
    pub netstate: Option<NetState>,
    /// Three-way attribution and images tree (criu and runtime rungs that recorded them).
    pub network: Option<super::network_view::Network>,
    /// Facts: key and compact JSON value.
    pub facts: Vec<KeyValue>,
    /// Step timings, milliseconds (monotonic clock).
    pub timings: Vec<Timing<'a>>,
}

/// One evaluated assertion; `subject` is relative to the evidence directory (`<rung>/<file>`).
#[derive(Debug, Serialize)]
pub(crate) struct Assertion<'a> {
    pub id: &'a str,
    pub role: &'a str,
    pub description: &'a str,
    pub expected: &'a str,
    pub observed: &'a str,
    pub passed: bool,
    pub subject: String,
}

/// A rung's network-state diff (see [`NetStateDiff`]).
#[derive(Debug, Serialize)]
pub(crate) struct NetState {
    pub before: String,
    pub after: String,
    pub unreadable: Option<String>,
    pub differs: bool,
    pub lines: Vec<DiffLine>,
    /// A Markdown code fence longer than any backtick run in the lines.
    pub fence: String,
}

/// One diff line: `cls` is `same`, `del` or `add`; `sign` is ` `, `-` or `+`.
#[derive(Debug, Serialize)]
pub(crate) struct DiffLine {
    pub cls: &'static str,
    pub sign: &'static str,
    pub text: String,
}

/// A fact: key and its value as compact JSON.
#[derive(Debug, Serialize)]
pub(crate) struct KeyValue {
    pub key: String,
    pub value: String,
}

/// A step timing in milliseconds.
#[derive(Debug, Serialize)]
pub(crate) struct Timing<'a> {
    pub step: &'a str,
    pub ms: u64,
}

/// One artifact row.
#[derive(Debug, Serialize)]
pub(crate) struct ArtifactRow<'a> {
    pub path: &'a str,
    pub bytes: u64,
    pub sha256: &'a str,
    pub sha_short: &'a str,
}

/// The ladder SVG: verdict box on top, one box per rung (pixels).
#[derive(Debug, Serialize)]
pub(crate) struct Ladder {
    pub width: usize,
    pub height: usize,
    /// Width of the verdict box.
    pub box_width: usize,
    /// Wrapped lines under the verdict.
    pub sub: Vec<TextLine>,
    /// Box width and top edge of the rung boxes.
    pub bw: usize,
    pub top: usize,
    pub rungs: Vec<LadderRung>,
}

/// A positioned SVG text line.
#[derive(Debug, Serialize)]
pub(crate) struct TextLine {
    pub y: usize,
    pub text: String,
}

/// A rung box of the ladder SVG.
#[derive(Debug, Serialize)]
pub(crate) struct LadderRung {
    pub name: &'static str,
    pub status: &'static str,
    pub status_word: &'static str,
    pub ms: u64,
    /// Left edge of the box and of its text.
    pub x: usize,
    pub tx: usize,
    /// Baselines of name, status and milliseconds.
    pub y1: usize,
    pub y2: usize,
    pub y3: usize,
    /// The deciding fact (or the error), wrapped.
    pub lines: Vec<TextLine>,
    /// Outlined and marked as the first broken rung.
    pub culprit: bool,
    /// Centre and baseline of the "first broken rung" mark.
    pub mark_x: usize,
    pub mark_y: usize,
    /// Arrow to the next box: `(x1, x2, y)`; `None` for the last box.
    pub arrow: Option<(usize, usize, usize)>,
}

/// The first 16 hex digits of a sha256 (the full value is in the result file).
pub(crate) fn short(sha: &str) -> &str {
    sha.get(..16).unwrap_or(sha)
}

fn verdict_colour(v: VerdictCode) -> &'static str {
    match v {
        VerdictCode::RuntimePreservesNetns => "#2e7d32",
        VerdictCode::Inconclusive => "#ef6c00",
        _ => "#b71c1c",
    }
}

fn status_class(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Fail => "fail",
        Status::Error => "error",
        Status::Skipped => "skipped",
    }
}

/// `--expect` of the recorded command (`netprobe-result.json` `command`) beside the verdict.
#[derive(Debug, Serialize)]
pub(crate) struct Expected<'a> {
    /// The expected verdict code, as given.
    pub verdict: &'a str,
    /// The recorded verdict is it (`netprobe run` exited 1 when not).
    pub met: bool,
}

impl<'a> Page<'a> {
    /// Builds the page of `result` whose evidence is in `evidence_dir` (read for the netstate
    /// diffs only). Never fails: an unreadable netstate file is reported in the page.
    pub(crate) fn new(result: &'a RunResult, evidence_dir: &Path) -> Page<'a> {
        let v = &result.verdict;
        let mut sorted: Vec<&RungResult> = result.rungs.iter().collect();
        sorted.sort_by_key(|r| r.name);
        let first = first_broken_rung(result);
        let culprit = first.and_then(|c| result.rung(c)).map(|r| rung(r, None));
        let h = &result.host;
        let binaries = [("criu", &h.criu), ("runtime", &h.runtime)]
            .into_iter()
            .map(|(name, b)| {
                let pin = result.pins.iter().find(|p| p.name == name).map(|p| Pin {
                    version: &p.pinned_version,
                    sha_short: p.pinned_sha256.as_deref().map(short),
                    bytes: p.pinned_bytes,
                    matches: p.matches,
                });
                match b {
                    Some(b) => Binary {
                        name,
                        path: Some(&b.path),
                        version: &b.version,
                        bytes: b.bytes,
                        sha256: &b.sha256,
                        sha_short: short(&b.sha256),
                        pin,
                    },
                    None => Binary {
                        name,
                        path: None,
                        version: "",
                        bytes: 0,
                        sha256: "",
                        sha_short: "",
                        pin,
                    },
                }
            })
            .collect();
        Page {
            code: v.code.as_str(),
            verdict_colour: verdict_colour(v.code),
            summary: &v.summary,
            reason: v.reason.as_deref(),
            rests_on: &v.rests_on,
            culprit,
            expected: crate::probe::rederive_result::option(&result.command, "--expect").map(|e| {
                Expected {
                    verdict: e,
                    met: e == v.code.as_str(),
                }
            }),
            tool_version: &result.tool_version,
            started_at: &result.started_at,
            finished_at: &result.finished_at,
            duration_ms: result.duration_ms,
            command: result.command.join(" "),
            result_file: RESULT_FILE,
            declared: &result.declared_differences,
            host: Host {
                kernel_release: &h.kernel_release,
                machine: &h.machine,
                kernel_version: &h.kernel_version,
                cgroup: &h.cgroup,
                os: h.os.as_deref().unwrap_or("unknown"),
            },
            binaries,
            rungs: with_networks(
                sorted.iter().map(|r| rung(r, Some(evidence_dir))).collect(),
                evidence_dir,
            ),
            artifacts: super::all_artifacts(result)
                .into_iter()
                .map(|a| ArtifactRow {
                    path: &a.path,
                    bytes: a.bytes,
                    sha256: &a.sha256,
                    sha_short: short(&a.sha256),
                })
                .collect(),
            ladder: ladder(result, &sorted),
            verification: None,
        }
    }
}

/// Puts each rung's network section ([`super::network_view::networks`]) into its rung.
fn with_networks<'a>(mut rungs: Vec<Rung<'a>>, evidence_dir: &Path) -> Vec<Rung<'a>> {
    for n in super::network_view::networks(evidence_dir) {
        if let Some(r) = rungs.iter_mut().find(|r| r.name == n.rung) {
            r.network = Some(n);
        }
    }
    rungs
}

/// The view of one rung; the netstate diff is read only when `evidence_dir` is given.
fn rung<'a>(r: &'a RungResult, evidence_dir: Option<&Path>) -> Rung<'a> {
    let assertion = |a: &'a AssertionResult| Assertion {
        id: &a.id,
        role: &a.role,
        description: &a.description,
        expected: &a.expected,
        observed: &a.observed,
        passed: a.passed,
        subject: format!("{}/{}", r.name, a.subject),
    };
    Rung {
        name: r.name.as_str(),
        status: status_class(r.status),
        status_word: status_word(r.status),
        duration_ms: r.duration_ms,
        summary: &r.summary,
        error: r.error.as_deref(),
        assertions: r.assertions.iter().map(assertion).collect(),
        netstate: evidence_dir
            .and_then(|d| netstate_diff(d, r.name))
            .map(netstate),
        network: None,
        facts: r
            .facts
            .iter()
            .map(|(k, v)| KeyValue {
                key: k.clone(),
                value: v.to_string(),
            })
            .collect(),
        timings: r
            .timings_ms
            .iter()
            .map(|(k, ms)| Timing { step: k, ms: *ms })
            .collect(),
    }
}

fn netstate(d: NetStateDiff) -> NetState {
    let differs = d.differs();
    let lines: Vec<DiffLine> = d
        .lines
        .into_iter()
        .map(|(k, text)| {
            let (cls, sign) = match k {
                LineKind::Same => ("same", " "),
                LineKind::Removed => ("del", "-"),
                LineKind::Added => ("add", "+"),
            };
            DiffLine { cls, sign, text }
        })
        .collect();
    let longest = lines
        .iter()
        .flat_map(|l| l.text.split(|c| c != '`'))
        .map(str::len)
        .max()
        .unwrap_or(0);
    NetState {
        before: d.before_path,
        after: d.after_path,
        unreadable: d.unreadable,
        differs,
        lines,
        fence: "`".repeat(longest.max(2) + 1),
    }
}

/// Splits `s` into at most `max_lines` lines of at most `width` characters (word-wise; the last
/// line ends with `…` when text was cut).
pub(crate) fn wrap(s: &str, width: usize, max_lines: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in s.split_whitespace() {
        let word: String = if word.chars().count() > width {
            word.chars().take(width - 1).chain(['…']).collect()
        } else {
            word.to_string()
        };
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(&word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    if lines.len() > max_lines {
        lines.truncate(max_lines);
        let last = lines.last_mut().expect("max_lines > 0");
        let keep: String = last.chars().take(width.saturating_sub(1)).collect();
        *last = format!("{keep}…");
    }
    lines
}

/// The ladder's geometry: verdict box 84 px high, rung boxes 224 × 170 px, 32 px apart, from
/// y = 118; the first broken rung is outlined and marked.
fn ladder(result: &RunResult, rungs: &[&RungResult]) -> Ladder {
    let n = rungs.len().max(1);
    let (bw, gap, top) = (224usize, 32usize, 118usize);
    let width = n * bw + (n - 1) * gap + 20;
    let culprit = first_broken_rung(result);
    let v = &result.verdict;
    let sub = match culprit {
        Some(c) => format!("First broken rung: {c}. {}", v.summary),
        None => format!("No rung failed. {}", v.summary),
    };
    let sub = wrap(&sub, (width - 60) / 8, 2)
        .into_iter()
        .enumerate()
        .map(|(i, text)| TextLine {
            y: 66 + i * 18,
            text,
        })
        .collect();
    let boxes = rungs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let x = 10 + i * (bw + gap);
            let fact = match &r.error {
                Some(e) if r.status == Status::Error => e.as_str(),
                _ => r.summary.as_str(),
            };
            LadderRung {
                name: r.name.as_str(),
                status: status_class(r.status),
                status_word: status_word(r.status),
                ms: r.duration_ms,
                x,
                tx: x + 14,
                y1: top + 28,
                y2: top + 58,
                y3: top + 80,
                lines: wrap(fact, 27, 4)
                    .into_iter()
                    .enumerate()
                    .map(|(j, text)| TextLine {
                        y: top + 104 + j * 17,
                        text,
                    })
                    .collect(),
                culprit: Some(r.name) == culprit,
                mark_x: x + bw / 2,
                mark_y: top + 170 + 26,
                arrow: (i + 1 < rungs.len()).then(|| (x + bw + 3, x + bw + gap - 5, top + 85)),
            }
        })
        .collect();
    Ladder {
        width,
        height: 330,
        box_width: width - 20,
        sub,
        bw,
        top,
        rungs: boxes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_cuts_with_ellipsis() {
        let w = wrap("aaa bbb ccc ddd eee", 7, 2);
        assert_eq!(w, vec!["aaa bbb".to_string(), "ccc dd…".to_string()]);
    }
}
