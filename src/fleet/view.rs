//! The data the fleet templates (`templates/fleet.{md,html}`) are given: the hosts that
//! disagree first, then one group per verdict (or state), each row's cells as text — each row
//! made when the template reaches it ([`page`]), so the table is streamed into its file.

use super::model::{FleetBinary, FleetHost, FleetResult, HostState};
use minijinja::context;
use minijinja::value::{Enumerator, Object, ObjectRepr, Serde, Value};
use serde::Serialize;
use std::sync::Arc;

/// One row of the table.
#[derive(Debug, Serialize)]
pub struct Row {
    /// Host name.
    pub name: String,
    /// Host folder (relative to the fleet folder).
    pub folder: String,
    /// Evidence folder verified (relative), or empty.
    pub evidence: String,
    /// `uname -r`, or `–`.
    pub kernel: String,
    /// cgroup mode, or `–`.
    pub cgroup: String,
    /// `VERSION (sha256 first 16 hex)`, or `–`.
    pub runtime: String,
    /// `VERSION (sha256 first 16 hex)`, or `–`.
    pub criu: String,
    /// Verdict code, or `–`.
    pub verdict: String,
    /// `rung: status` per rung, comma-separated.
    pub rungs: String,
    /// `verified`, `NOT VERIFIED`, `unreachable` …
    pub state: String,
    /// Whether the state is `verified`.
    pub verified: bool,
    /// `run N / doctor M` as the play recorded them, or `–`.
    pub exits: String,
    /// The reason the state is not `verified`, or empty.
    pub reason: String,
}

/// A host named first, with what it disagrees with.
#[derive(Debug, Serialize)]
pub struct Odd {
    /// Its row.
    pub row: Row,
    /// `--expect` or `its peers (same kernel, runtime and CRIU)`.
    pub against: String,
    /// The verdict expected.
    pub expected: String,
    /// The host compared with, or empty.
    pub compared_with: String,
    /// The diff command, or empty.
    pub diff_command: String,
    /// The diff's text, or empty.
    pub diff: String,
}

fn bin(b: &Option<FleetBinary>) -> String {
    match b {
        Some(b) => format!("{} ({})", b.version, &b.sha256[..b.sha256.len().min(16)]),
        None => "–".into(),
    }
}

fn row(h: &FleetHost) -> Row {
    let dash = |s: &Option<String>| s.clone().unwrap_or_else(|| "–".into());
    let exits = match (h.run_exit, h.doctor_exit) {
        (None, None) => "–".into(),
        (r, d) => format!(
            "run {} / doctor {}",
            r.map_or("–".into(), |x| x.to_string()),
            d.map_or("–".into(), |x| x.to_string())
        ),
    };
    Row {
        name: h.name.clone(),
        folder: h.folder.clone(),
        evidence: h.evidence.clone().unwrap_or_default(),
        kernel: dash(&h.kernel),
        cgroup: dash(&h.cgroup),
        runtime: bin(&h.runtime),
        criu: bin(&h.criu),
        verdict: h.verdict.map_or("–".into(), |v| v.as_str().to_string()),
        rungs: h
            .rungs
            .iter()
            .map(|r| {
                format!(
                    "{}: {}",
                    r.name,
                    serde_json::to_value(r.status)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
        state: h.state.as_str().to_string(),
        verified: h.state == HostState::Verified,
        exits,
        reason: h.reason.clone().unwrap_or_default(),
    }
}

/// The hosts of `f` in table order (by [`super::table::order`]: hosts not verified first, then
/// by verdict, each group by name), as indices into `f.hosts`, with each group's label and its
/// range of that order.
fn grouped(f: &FleetResult) -> (Vec<usize>, Vec<(String, std::ops::Range<usize>)>) {
    let mut order: Vec<usize> = (0..f.hosts.len()).collect();
    order.sort_by_cached_key(|&i| {
        let h = &f.hosts[i];
        (
            h.state == HostState::Verified,
            super::table::group_label(h),
            h.name.clone(),
        )
    });
    let mut groups: Vec<(String, std::ops::Range<usize>)> = Vec::new();
    for (at, &i) in order.iter().enumerate() {
        let label = super::table::group_label(&f.hosts[i]);
        match groups.last_mut() {
            Some((l, r)) if *l == label => r.end = at + 1,
            _ => groups.push((label, at..at + 1)),
        }
    }
    (order, groups)
}

/// The host named first at `h`, with what it disagrees with.
fn odd(h: &FleetHost, d: &super::model::Disagreement) -> Odd {
    Odd {
        row: row(h),
        against: match d.against {
            super::model::DisagreeKind::Expect => "--expect".into(),
            super::model::DisagreeKind::Peers => "its peers (same kernel, runtime and CRIU)".into(),
        },
        expected: d.expected.as_str().into(),
        compared_with: d.compared_with.clone().unwrap_or_default(),
        diff_command: d.diff_command.clone().unwrap_or_default(),
        // Inside a Markdown code fence: a fence in the text would end it.
        diff: d.diff.clone().unwrap_or_default().replace("```", "ʼʼʼ"),
    }
}

/// A host's matrix in the table's matrix section.
#[derive(Debug, Serialize)]
pub struct MatrixRow {
    /// Host name.
    pub name: String,
    /// The matrix folder (relative to the fleet folder).
    pub folder: String,
    /// `label: verdict` per cell (`(expected …)` when it differs), `; `-separated.
    pub cells: String,
    /// Whether the matrix reproduces.
    pub verified: bool,
    /// Its first problem, or empty.
    pub reason: String,
    /// `netprobe matrix`'s exit code as the play recorded it, or `–`.
    pub exit: String,
}

fn matrix_row(h: &FleetHost, m: &super::model::FleetMatrix) -> MatrixRow {
    MatrixRow {
        name: h.name.clone(),
        folder: m.folder.clone(),
        cells: m
            .cells
            .iter()
            .map(|c| match c.expected.filter(|e| *e != c.verdict) {
                Some(e) => format!("{}: {} (expected {})", c.label, c.verdict, e),
                None => format!("{}: {}", c.label, c.verdict),
            })
            .collect::<Vec<_>>()
            .join("; "),
        verified: m.verified,
        reason: m.problems.first().cloned().unwrap_or_default(),
        exit: m.exit.map_or("–".into(), |x| x.to_string()),
    }
}

/// What a [`Lazy`] sequence's items are.
#[derive(Debug, Clone, Copy)]
enum Item {
    /// A table row ([`Row`]).
    Row,
    /// A host named first ([`Odd`]).
    Odd,
    /// A host's matrix ([`MatrixRow`]).
    Matrix,
}

/// A sequence of the template made one item at a time from the rows (`f.hosts[at[i]]`), as the
/// template reaches it: a table of any number of hosts is rendered holding one row's text.
#[derive(Debug)]
struct Lazy {
    /// The fleet.
    f: Arc<FleetResult>,
    /// Indices into `f.hosts`, in the order shown.
    at: Arc<[usize]>,
    /// This sequence's part of `at`.
    range: std::ops::Range<usize>,
    /// What each item is.
    item: Item,
}

impl Object for Lazy {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let i = self.range.start + key.as_usize()?;
        if i >= self.range.end {
            return None;
        }
        let h = &self.f.hosts[self.at[i]];
        Some(match self.item {
            Item::Row => Value::from(Serde(row(h))),
            Item::Odd => Value::from(Serde(odd(h, h.disagrees.as_ref()?))),
            Item::Matrix => Value::from(Serde(matrix_row(h, h.matrix.as_ref()?))),
        })
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.range.len())
    }
}

/// The template's `page` for `f` (its hosts already ordered by [`super::table::order`]):
/// `tool_version`, `written_at`, `expect` (or empty), `hosts` and `verified` (counts), `exit`
/// (`CODE (class)`), `odd` (the hosts that disagree, each an [`Odd`]) and `groups` (each a
/// `label` and its `rows`, each a [`Row`]), `matrices` (the hosts whose play ran a matrix, in
/// table order, each a [`MatrixRow`]). The rows are made as the template reaches them,
/// never all at once.
pub fn page(f: &Arc<FleetResult>) -> Value {
    let (order, groups) = grouped(f);
    let order: Arc<[usize]> = order.into();
    let odd: Arc<[usize]> = (0..f.hosts.len())
        .filter(|&i| f.hosts[i].disagrees.is_some())
        .collect();
    let matrices: Arc<[usize]> = order
        .iter()
        .copied()
        .filter(|&i| f.hosts[i].matrix.is_some())
        .collect();
    let lazy = |at: &Arc<[usize]>, range: std::ops::Range<usize>, item: Item| {
        Value::from_object(Lazy {
            f: f.clone(),
            at: at.clone(),
            range,
            item,
        })
    };
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(label, range)| context! { label => label, rows => lazy(&order, range, Item::Row) })
        .collect();
    context! {
        tool_version => f.tool_version.clone(),
        written_at => f.written_at.clone(),
        expect => f.expect.map(|v| v.as_str().to_string()).unwrap_or_default(),
        hosts => f.hosts.len(),
        verified => f.hosts.iter().filter(|h| h.state == HostState::Verified).count(),
        exit => format!("{} ({})", f.exit_code, f.exit_class.as_str()),
        odd => lazy(&odd, 0..odd.len(), Item::Odd),
        groups => groups,
        matrices => lazy(&matrices, 0..matrices.len(), Item::Matrix),
    }
}
