//! The data the fleet templates (`templates/fleet.{md,html}`) are given: the hosts that
//! disagree first, then one group per verdict (or state), each row's cells as text.

use super::model::{FleetBinary, FleetHost, FleetResult, HostState};
use serde::Serialize;

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

/// One group of rows with the same verdict or state.
#[derive(Debug, Serialize)]
pub struct Group {
    /// The verdict code or state word.
    pub label: String,
    /// Its rows, by name.
    pub rows: Vec<Row>,
}

/// The page.
#[derive(Debug, Serialize)]
pub struct FleetPage {
    /// netprobe's version.
    pub tool_version: String,
    /// When the table was made.
    pub written_at: String,
    /// `--expect`, or empty.
    pub expect: String,
    /// Number of hosts.
    pub hosts: usize,
    /// Number of verified hosts.
    pub verified: usize,
    /// The exit code and its class.
    pub exit: String,
    /// Hosts that disagree, first.
    pub odd: Vec<Odd>,
    /// Every host, grouped.
    pub groups: Vec<Group>,
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

impl FleetPage {
    /// The page of `f` (its hosts already ordered by [`super::table::order`]).
    pub fn new(f: &FleetResult) -> FleetPage {
        let mut groups: Vec<Group> = Vec::new();
        let mut odd = Vec::new();
        for h in &f.hosts {
            if let Some(d) = &h.disagrees {
                odd.push(Odd {
                    row: row(h),
                    against: match d.against {
                        super::model::DisagreeKind::Expect => "--expect".into(),
                        super::model::DisagreeKind::Peers => {
                            "its peers (same kernel, runtime and CRIU)".into()
                        }
                    },
                    expected: d.expected.as_str().into(),
                    compared_with: d.compared_with.clone().unwrap_or_default(),
                    diff_command: d.diff_command.clone().unwrap_or_default(),
                    // Inside a Markdown code fence: a fence in the text would end it.
                    diff: d.diff.clone().unwrap_or_default().replace("```", "ʼʼʼ"),
                });
            }
        }
        let mut hosts: Vec<&FleetHost> = f.hosts.iter().collect();
        hosts.sort_by_key(|h| {
            (
                h.state == HostState::Verified,
                super::table::group_label(h),
                h.name.clone(),
            )
        });
        for h in hosts {
            let label = super::table::group_label(h);
            match groups.last_mut() {
                Some(g) if g.label == label => g.rows.push(row(h)),
                _ => groups.push(Group {
                    label,
                    rows: vec![row(h)],
                }),
            }
        }
        FleetPage {
            tool_version: f.tool_version.clone(),
            written_at: f.written_at.clone(),
            expect: f.expect.map(|v| v.as_str().to_string()).unwrap_or_default(),
            hosts: f.hosts.len(),
            verified: f
                .hosts
                .iter()
                .filter(|h| h.state == HostState::Verified)
                .count(),
            exit: format!("{} ({})", f.exit_code, f.exit_class.as_str()),
            odd,
            groups,
        }
    }
}
