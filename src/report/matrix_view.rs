//! The report of a matrix folder (`netprobe report MATRIX_DIR --format md|html`, issue 12
//! part 4): the data `templates/matrix.{md,html}` see, built from `matrix.json`
//! ([`crate::matrix::model::MatrixResult`]). Runtimes are rows, CRIUs columns, every cell its
//! verdict (with `expected …` / `was …` when an expectation or the baseline differs), then per
//! cell the deciding assertions of its own runtime rungs, the binaries with their pin match and
//! every part. Plain text only: the templates escape it on output.

use crate::matrix::model::{MatrixBinary, MatrixCell, MatrixPart, MatrixResult};
use serde::Serialize;

/// The matrix page. Source: `matrix.json`.
#[derive(Debug, Serialize)]
pub(crate) struct MatrixPage<'a> {
    /// netprobe version that wrote `matrix.json`.
    pub tool_version: &'a str,
    /// RFC 3339 start and end of the matrix run.
    pub started_at: &'a str,
    pub finished_at: &'a str,
    /// Whole matrix run, milliseconds.
    pub duration_ms: u64,
    /// Parts run side by side at most.
    pub jobs: usize,
    /// The earlier matrix folder compared against, if any.
    pub baseline: Option<&'a str>,
    /// How many cells were compared with it (`cells[].baseline` set).
    pub compared: usize,
    /// Column heads (CRIU labels, first-seen order).
    pub crius: Vec<&'a str>,
    /// One row per runtime label (first-seen order).
    pub rows: Vec<Row<'a>>,
    /// Every cell, in `matrix.json` order.
    pub cells: Vec<Cell<'a>>,
    /// Runtimes and CRIUs with their pin match.
    pub binaries: Vec<Binary<'a>>,
    /// Every part (kernel, criu per CRIU, runtime rungs per pair).
    pub parts: Vec<Part<'a>>,
    /// `matrix.json`.
    pub matrix_file: &'static str,
    /// What `netprobe verify` found on the folder when the report was rendered (`None`: not
    /// asked, e.g. the `matrix.md` that `netprobe matrix` writes as it ends).
    pub verification: Option<MatrixVerification>,
}

/// The outcome of `netprobe verify` on a matrix folder at render time. Source: the caller's
/// verify (every part folder verified as a run folder, every cell verdict recomputed).
#[derive(Debug, Serialize)]
pub(crate) struct MatrixVerification {
    /// No problem found.
    pub reproduced: bool,
    /// Part folders verified.
    pub parts: usize,
    /// Every problem, as `netprobe verify` prints it after `MISMATCH`.
    pub problems: Vec<String>,
    /// Why verification could not run (then nothing was checked).
    pub error: Option<String>,
    /// Why the comparison with the baseline was not re-checked (its baseline folder's
    /// `matrix.json` could not be read: [`crate::matrix::verify::BaselineCheck::NotRechecked`]).
    pub baseline_note: Option<String>,
    /// The parts verify could not verify as run folders, one sentence each
    /// ([`crate::matrix::verify::unverified_parts`]: no result, with the recorded error).
    pub unverified: Vec<String>,
}

impl MatrixVerification {
    /// The view of a matrix verify run (`Ok`) or of its failure (`Err`: the error's text); a
    /// run outcome (which a matrix page never gets) shows as not verified, naming why.
    pub(crate) fn of(v: Result<super::Verified, super::VerifyFailure>) -> Self {
        match v {
            Ok(super::Verified::Matrix { problems, parts }) => MatrixVerification {
                reproduced: problems.is_empty(),
                parts,
                problems,
                error: None,
                baseline_note: None,
                unverified: Vec::new(),
            },
            Ok(super::Verified::Run(_)) => {
                Self::failed("a run outcome was given for a matrix folder".into())
            }
            Err(e) => Self::failed(e.to_string()),
        }
    }

    /// With [`MatrixVerification::baseline_note`] set when the comparison of `m` with its
    /// baseline cannot be re-checked.
    pub(crate) fn with_baseline_of(mut self, m: &MatrixResult) -> Self {
        use crate::matrix::verify::{BaselineCheck, verify_baseline};
        if let BaselineCheck::NotRechecked(why) = verify_baseline(m) {
            self.baseline_note = Some(why);
        }
        self
    }

    /// With [`MatrixVerification::unverified`] set to the parts of `m` (folder `dir`) that hold
    /// no result.
    pub(crate) fn with_unverified_of(mut self, dir: &std::path::Path, m: &MatrixResult) -> Self {
        self.unverified = crate::matrix::verify::unverified_parts(dir, m);
        self
    }

    fn failed(error: String) -> Self {
        MatrixVerification {
            reproduced: false,
            parts: 0,
            problems: Vec::new(),
            error: Some(error),
            baseline_note: None,
            unverified: Vec::new(),
        }
    }
}

/// One table row: a runtime and its cells per CRIU column (`None`: no such cell).
#[derive(Debug, Serialize)]
pub(crate) struct Row<'a> {
    pub runtime: &'a str,
    pub cells: Vec<Option<Cell<'a>>>,
}

/// One cell.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Cell<'a> {
    pub label: &'a str,
    /// The cell's evidence folder (relative to the matrix folder).
    pub folder: &'a str,
    /// `<folder>/netprobe-result.json`, or `None` when the cell's part wrote none (its error in
    /// `matrix.json`: refused, could not start, hung): then nothing is linked.
    pub result_file: Option<String>,
    pub verdict: &'static str,
    /// Background colour (green preserves, orange inconclusive, red otherwise).
    pub colour: &'static str,
    pub summary: &'a str,
    /// Assertion ids of the cell's own runtime rungs (`oci/…`, `external-netns/…`).
    pub own: Vec<&'a str>,
    /// All assertion ids the verdict rests on (kernel and criu parts included).
    pub rests_on: &'a [String],
    /// Expected verdict when it differs from the observed one.
    pub unexpected: Option<&'static str>,
    /// Baseline verdict when it differs from the observed one.
    pub was: Option<&'static str>,
    /// The baseline cell it was compared with, when its label differs (`baseline_label`).
    pub baseline_cell: Option<&'a str>,
    /// A baseline was given and this cell was not compared with it.
    pub not_compared: bool,
}

/// One binary.
#[derive(Debug, Serialize)]
pub(crate) struct Binary<'a> {
    pub role: &'a str,
    pub path: &'a str,
    pub version: &'a str,
    /// First 16 hex digits of the sha256, or the error that prevented hashing.
    pub sha: String,
    /// `<name> <version>` of its pin, or `no pin` when host/pins.toml pins none of its kind.
    pub pin: &'a str,
    pub pin_matches: bool,
    /// False when there is no pin to match (the match column then says so, not `no`).
    pub pinned: bool,
}

/// One part.
#[derive(Debug, Serialize)]
pub(crate) struct Part<'a> {
    pub folder: &'a str,
    pub phases: &'a str,
    /// Exit code, or `killed`.
    pub exit: String,
    pub duration_ms: u64,
    pub error: Option<&'a str>,
}

fn colour(v: crate::evidence::result::VerdictCode) -> &'static str {
    use crate::evidence::result::VerdictCode as V;
    match v {
        V::RuntimePreservesNetns => "#c8e6c9",
        V::Inconclusive => "#ffe0b2",
        _ => "#ffcdd2",
    }
}

fn cell<'a>(m: &'a MatrixResult, c: &'a MatrixCell) -> Cell<'a> {
    let prefix = format!("{}:", c.folder);
    let wrote_none = m
        .parts
        .iter()
        .any(|p| p.folder == c.folder && p.error.is_some());
    Cell {
        label: &c.label,
        folder: &c.folder,
        result_file: (!wrote_none)
            .then(|| format!("{}/{}", c.folder, crate::evidence::result::RESULT_FILE)),
        verdict: c.verdict.as_str(),
        colour: colour(c.verdict),
        summary: &c.summary,
        own: c
            .rests_on
            .iter()
            .filter_map(|a| a.strip_prefix(prefix.as_str()))
            .collect(),
        rests_on: &c.rests_on,
        unexpected: c
            .unexpected()
            .then(|| c.expected.map(|e| e.as_str()))
            .flatten(),
        was: c
            .changed()
            .then(|| c.baseline.map(|b| b.as_str()))
            .flatten(),
        baseline_cell: c.baseline_label.as_deref(),
        not_compared: m.baseline.is_some() && c.baseline.is_none(),
    }
}

fn binary(b: &MatrixBinary) -> Binary<'_> {
    Binary {
        role: &b.role,
        path: &b.path,
        version: b.version.as_deref().unwrap_or("?"),
        sha: b.sha256.as_deref().map_or_else(
            || b.error.clone().unwrap_or_default(),
            |s| super::view::short(s).to_string(),
        ),
        pin: if b.pin.is_empty() { "no pin" } else { &b.pin },
        pin_matches: b.pin_matches,
        pinned: !b.pin.is_empty(),
    }
}

fn part(p: &MatrixPart) -> Part<'_> {
    Part {
        folder: &p.folder,
        phases: &p.phases,
        exit: p
            .exit_code
            .map_or_else(|| "killed".into(), |c| c.to_string()),
        duration_ms: p.duration_ms,
        error: p.error.as_deref(),
    }
}

impl<'a> MatrixPage<'a> {
    /// The page of `m` (labels are `<runtime> × <criu>`, as `netprobe matrix` writes them).
    pub(crate) fn new(m: &'a MatrixResult) -> MatrixPage<'a> {
        let mut crius: Vec<&str> = Vec::new();
        let mut runtimes: Vec<&str> = Vec::new();
        for c in &m.cells {
            let (r, k) = c.label.split_once(" × ").unwrap_or((&c.label, ""));
            if !runtimes.contains(&r) {
                runtimes.push(r);
            }
            if !crius.contains(&k) {
                crius.push(k);
            }
        }
        let rows = runtimes
            .iter()
            .map(|r| Row {
                runtime: r,
                cells: crius
                    .iter()
                    .map(|k| {
                        let label = format!("{r} × {k}");
                        m.cells
                            .iter()
                            .find(|c| c.label == label)
                            .map(|c| cell(m, c))
                    })
                    .collect(),
            })
            .collect();
        MatrixPage {
            tool_version: &m.tool_version,
            started_at: &m.started_at,
            finished_at: &m.finished_at,
            duration_ms: m.duration_ms,
            jobs: m.jobs,
            baseline: m.baseline.as_deref(),
            compared: m.cells.iter().filter(|c| c.baseline.is_some()).count(),
            crius,
            rows,
            cells: m.cells.iter().map(|c| cell(m, c)).collect(),
            binaries: m.binaries.iter().map(binary).collect(),
            parts: m.parts.iter().map(part).collect(),
            matrix_file: crate::matrix::model::MATRIX_FILE,
            verification: None,
        }
    }
}
