//! One host's row: its evidence folder verified as `netprobe verify` does
//! ([`crate::probe::verify::verify`]), its recorded facts read, its state decided.

use super::model::{FleetBinary, FleetCell, FleetHost, FleetMatrix, FleetRung, HostState};
use super::scan::Candidate;
use crate::evidence::fsio;
use crate::evidence::result::{BinaryFacts, RESULT_FILE, RunResult, SCHEMA_VERSION};
use std::path::Path;

/// At most this many mismatches are kept per host (then a count).
const MAX_MISMATCHES: usize = 20;

/// `a.b.c` as numbers (a pre-release or build suffix ignored); `None` when not of that shape.
fn version_triple(v: &str) -> Option<(u64, u64, u64)> {
    let core = v.split(['-', '+']).next()?;
    let mut it = core.split('.').map(|p| p.parse::<u64>().ok());
    Some((it.next()??, it.next()??, it.next().flatten().unwrap_or(0)))
}

/// Why the result at `raw` was written by a newer netprobe than this one, if it was.
fn newer(raw: &serde_json::Value) -> Option<String> {
    let ours = env!("CARGO_PKG_VERSION");
    let schema = raw["schema_version"].as_u64();
    let tool = raw["tool_version"].as_str().unwrap_or("unknown");
    let newer_schema = schema.is_some_and(|s| s > u64::from(SCHEMA_VERSION));
    let newer_tool = matches!(
        (version_triple(tool), version_triple(ours)),
        (Some(t), Some(o)) if t > o
    );
    (newer_schema || newer_tool).then(|| {
        format!(
            "written by netprobe {tool} (result schema {}); this is netprobe {ours} (schema {SCHEMA_VERSION}): verify it with netprobe {tool} or newer",
            schema.map_or("unknown".into(), |s| s.to_string())
        )
    })
}

fn binary(b: &Option<BinaryFacts>) -> Option<FleetBinary> {
    b.as_ref().map(|b| FleetBinary {
        path: b.path.clone(),
        version: b.version.clone(),
        sha256: b.sha256.clone(),
    })
}

/// A row with only the candidate's own facts.
fn bare(c: &Candidate, root: &Path, state: HostState, reason: Option<String>) -> FleetHost {
    FleetHost {
        name: c.name.clone(),
        folder: c.folder.clone(),
        evidence: c.evidence.as_deref().map(|e| rel(root, e)),
        state,
        reason,
        mismatches: Vec::new(),
        kernel: None,
        cgroup: None,
        runtime: None,
        criu: None,
        verdict: None,
        rungs: Vec::new(),
        run_exit: c.run_exit,
        doctor_exit: c.doctor_exit,
        disagrees: None,
        matrix: None,
    }
}

/// `p` relative to `root`, as text (the path itself when it is not under `root`).
pub fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

/// Reads the recorded facts of `result` into `row`.
fn facts(row: &mut FleetHost, result: &RunResult) {
    row.kernel = Some(result.host.kernel_release.clone());
    row.cgroup = Some(result.host.cgroup.clone());
    row.runtime = binary(&result.host.runtime);
    row.criu = binary(&result.host.criu);
    row.verdict = Some(result.verdict.code);
    row.rungs = result
        .rungs
        .iter()
        .map(|r| FleetRung {
            name: r.name,
            status: r.status,
        })
        .collect();
}

/// Verifies one host (`root` is the fleet folder): its evidence folder and, when the play ran
/// one, its matrix folder (a matrix that does not reproduce makes a verified host NOT
/// VERIFIED, its first problem the reason). Never fails: every problem is the row's state and
/// reason.
pub fn examine(c: &Candidate, root: &Path) -> FleetHost {
    let mut row = examine_run(c, root);
    if let Some(dir) = &c.matrix {
        let m = matrix(dir, root, c.matrix_exit);
        if !m.verified && row.state == HostState::Verified {
            row.state = HostState::NotVerified;
            row.reason = m
                .problems
                .first()
                .map(|p| format!("matrix {}: {p}", m.folder));
        }
        row.matrix = Some(m);
    }
    row
}

/// The matrix folder `dir` verified as `netprobe verify` of a matrix folder does, with its
/// cells as `matrix.json` records them.
fn matrix(dir: &Path, root: &Path, exit: Option<i64>) -> FleetMatrix {
    let (mut problems, verified) = match crate::matrix::table::verify_matrix(dir) {
        Ok((p, _)) => {
            let ok = p.is_empty();
            (p, ok)
        }
        Err(e) => (vec![e.to_string()], false),
    };
    if problems.len() > MAX_MISMATCHES {
        let more = problems.len() - MAX_MISMATCHES;
        problems.truncate(MAX_MISMATCHES);
        problems.push(format!("… and {more} more (`netprobe verify`)"));
    }
    let cells = crate::matrix::model::load_matrix(dir)
        .map(|m| {
            m.cells
                .into_iter()
                .map(|c| FleetCell {
                    label: c.label,
                    verdict: c.verdict,
                    expected: c.expected,
                })
                .collect()
        })
        .unwrap_or_default();
    FleetMatrix {
        folder: rel(root, dir),
        verified,
        problems,
        cells,
        exit,
    }
}

/// The row of a host's evidence folder alone.
fn examine_run(c: &Candidate, root: &Path) -> FleetHost {
    if let Some(msg) = &c.unreachable {
        return bare(c, root, HostState::Unreachable, Some(msg.clone()));
    }
    if let Some(p) = &c.problem {
        return bare(c, root, HostState::NotEvidence, Some(p.clone()));
    }
    let Some(ev) = c.evidence.as_deref() else {
        return bare(c, root, HostState::NotEvidence, Some("no evidence".into()));
    };
    // A newer netprobe's result is named as such before anything else reads it (its schema
    // may not validate here, and this netprobe cannot re-derive what it does not know).
    let raw: Option<serde_json::Value> = fsio::read_recorded(&ev.join(RESULT_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if let Some(why) = raw.as_ref().and_then(newer) {
        let mut row = bare(c, root, HostState::NewerNetprobe, Some(why));
        if let Some(r) = raw.and_then(|v| serde_json::from_value::<RunResult>(v).ok()) {
            facts(&mut row, &r);
        }
        return row;
    }
    let outcome = match crate::probe::verify::verify(ev) {
        Ok(o) => o,
        Err(e) => return bare(c, root, HostState::NotEvidence, Some(e.to_string())),
    };
    let mut row = bare(c, root, HostState::Verified, None);
    if let Some(r) = raw.and_then(|v| serde_json::from_value::<RunResult>(v).ok()) {
        facts(&mut row, &r);
    }
    row.verdict = Some(outcome.verdict.code);
    if !outcome.reproduced() {
        row.state = HostState::NotVerified;
        let mut m = outcome.mismatches;
        if outcome.verdict.code != outcome.recorded.code && m.is_empty() {
            m.push(format!(
                "verdict: recorded {}, the evidence gives {}",
                outcome.recorded.code, outcome.verdict.code
            ));
        }
        row.reason = m.first().cloned();
        if m.len() > MAX_MISMATCHES {
            let more = m.len() - MAX_MISMATCHES;
            m.truncate(MAX_MISMATCHES);
            m.push(format!("… and {more} more (`netprobe verify`)"));
        }
        row.mismatches = m;
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_by_schema_or_tool_version() {
        let v = |s: u64, t: &str| serde_json::json!({"schema_version": s, "tool_version": t});
        assert!(newer(&v(1, env!("CARGO_PKG_VERSION"))).is_none());
        assert!(newer(&v(2, env!("CARGO_PKG_VERSION"))).is_some());
        assert!(newer(&v(1, "99.0.0")).is_some());
        assert!(newer(&v(1, "0.0.1")).is_none());
        assert!(newer(&v(1, "garbage")).is_none());
    }
}
