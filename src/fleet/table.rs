//! The fleet table's decisions, pure over the rows: duplicate host names, hosts that disagree
//! (with `--expect`, or with their peers: same kernel, runtime and CRIU), the order of the rows
//! and the exit code.

use super::model::{DisagreeKind, Disagreement, FleetHost, HostState};
use crate::evidence::result::VerdictCode;
use crate::exit::ExitClass;
use std::collections::HashMap;

/// Marks every host whose name (without case) another folder also claims as
/// [`HostState::DuplicateHost`], naming the other folders. Its evidence is not trusted to be
/// that host's, so it never counts as verified.
pub fn mark_duplicates(rows: &mut [FleetHost]) {
    let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        by_name.entry(r.name.to_lowercase()).or_default().push(i);
    }
    for idx in by_name.values().filter(|v| v.len() > 1) {
        let folders: Vec<String> = idx.iter().map(|&i| rows[i].folder.clone()).collect();
        for &i in idx {
            let others: Vec<&str> = folders
                .iter()
                .filter(|f| **f != rows[i].folder)
                .map(String::as_str)
                .collect();
            let was = rows[i].state;
            rows[i].state = HostState::DuplicateHost;
            rows[i].reason = Some(format!(
                "host {:?} is also claimed by {}/ (its own evidence: {}): give each host one folder, e.g. rename or remove the stale one",
                rows[i].name,
                others.join("/, "),
                was.as_str()
            ));
        }
    }
}

/// The peer key: kernel release, runtime sha256, CRIU sha256.
fn peer_key(r: &FleetHost) -> (String, String, String) {
    (
        r.kernel.clone().unwrap_or_default(),
        r.runtime
            .as_ref()
            .map(|b| b.sha256.clone())
            .unwrap_or_default(),
        r.criu
            .as_ref()
            .map(|b| b.sha256.clone())
            .unwrap_or_default(),
    )
}

/// The verdict more hosts of `idx` have than any other, if one does.
fn majority(rows: &[FleetHost], idx: &[usize]) -> Option<VerdictCode> {
    let mut n: Vec<(VerdictCode, usize)> = Vec::new();
    for &i in idx {
        let v = rows[i].verdict?;
        match n.iter_mut().find(|(c, _)| *c == v) {
            Some((_, k)) => *k += 1,
            None => n.push((v, 1)),
        }
    }
    n.sort_by_key(|x| std::cmp::Reverse(x.1));
    match n.as_slice() {
        [(v, _)] => Some(*v),
        [(v, a), (_, b), ..] if a > b => Some(*v),
        _ => None,
    }
}

/// Sets [`FleetHost::disagrees`] on every verified host whose verdict differs from `expect`, or
/// (without `--expect` mismatch) from its peers' most common verdict; `compared_with` is a
/// verified host that has the expected verdict (a peer first). The diff itself is the caller's.
pub fn mark_disagreements(rows: &mut [FleetHost], expect: Option<VerdictCode>) {
    let verified: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].state == HostState::Verified && rows[i].verdict.is_some())
        .collect();
    let mut groups: HashMap<(String, String, String), Vec<usize>> = HashMap::new();
    for &i in &verified {
        groups.entry(peer_key(&rows[i])).or_default().push(i);
    }
    let mut marks: Vec<(usize, DisagreeKind, VerdictCode)> = Vec::new();
    for &i in &verified {
        let v = rows[i].verdict.expect("filtered");
        if let Some(e) = expect.filter(|e| *e != v) {
            marks.push((i, DisagreeKind::Expect, e));
            continue;
        }
        let peers = &groups[&peer_key(&rows[i])];
        if let Some(m) = majority(rows, peers).filter(|m| *m != v) {
            marks.push((i, DisagreeKind::Peers, m));
        }
    }
    for (i, against, expected) in marks {
        let key = peer_key(&rows[i]);
        let agrees = |j: &&usize| rows[**j].verdict == Some(expected);
        let with = groups[&key]
            .iter()
            .find(agrees)
            .or_else(|| verified.iter().find(agrees))
            .map(|&j| rows[j].name.clone());
        rows[i].disagrees = Some(Disagreement {
            against,
            expected,
            compared_with: with,
            diff_command: None,
            diff: None,
        });
    }
}

/// The label a row is grouped under: its verdict for a verified host, else its state.
pub fn group_label(r: &FleetHost) -> String {
    match (r.state, r.verdict) {
        (HostState::Verified, Some(v)) => v.as_str().to_string(),
        (s, _) => s.as_str().to_string(),
    }
}

/// Orders the rows: disagreeing hosts first, then the hosts grouped by [`group_label`] (the
/// groups of hosts not verified first, then the verdicts, each in order of its label), each
/// group by name.
pub fn order(rows: &mut [FleetHost]) {
    let key = |r: &FleetHost| {
        (
            r.disagrees.is_none(),
            r.state == HostState::Verified,
            group_label(r),
            r.name.clone(),
        )
    };
    rows.sort_by_key(key);
}

/// The exit class, as `matrix`'s (docs/REFERENCE.md's table): 1 a host NOT VERIFIED (its evidence or its
/// matrix), a verdict that differs from `--expect` or from its peers, or a host whose
/// `netprobe run` or `netprobe matrix` exited 1; else 2 a host folder that is bad input (not an
/// evidence folder, a duplicate host, a newer netprobe's); else 3 a host whose `netprobe run` or
/// `netprobe matrix` was refused (exit 3); else 4 a host unreachable or whose run or matrix
/// could not run (exit 4, or any other non-zero exit); else 0.
pub fn exit_class(rows: &[FleetHost]) -> ExitClass {
    let any = |f: &dyn Fn(&FleetHost) -> bool| rows.iter().any(f);
    let matrix_exit = |r: &FleetHost| r.matrix.as_ref().and_then(|m| m.exit);
    if any(&|r| {
        r.state == HostState::NotVerified
            || r.disagrees.is_some()
            || r.run_exit == Some(1)
            || matrix_exit(r) == Some(1)
    }) {
        ExitClass::Gate
    } else if any(&|r| {
        matches!(
            r.state,
            HostState::NotEvidence | HostState::DuplicateHost | HostState::NewerNetprobe
        ) && !(r.run_exit.is_some_and(|x| x != 0) && r.evidence.is_none())
    }) {
        ExitClass::Usage
    } else if any(&|r| r.run_exit == Some(3) || matrix_exit(r) == Some(3)) {
        ExitClass::HostRefused
    } else if any(&|r| {
        r.state == HostState::Unreachable
            || r.run_exit.is_some_and(|x| x != 0)
            || matrix_exit(r).is_some_and(|x| x != 0)
    }) {
        ExitClass::CouldNotRun
    } else {
        ExitClass::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::model::FleetBinary;

    fn row(name: &str, kernel: &str, v: VerdictCode) -> FleetHost {
        let b = |s: &str| FleetBinary {
            path: "/x".into(),
            version: "1".into(),
            sha256: s.into(),
        };
        FleetHost {
            name: name.into(),
            folder: name.into(),
            evidence: Some(name.into()),
            state: HostState::Verified,
            reason: None,
            mismatches: vec![],
            kernel: Some(kernel.into()),
            cgroup: Some("v2".into()),
            runtime: Some(b("r")),
            criu: Some(b("c")),
            verdict: Some(v),
            rungs: vec![],
            run_exit: Some(0),
            doctor_exit: Some(0),
            disagrees: None,
            matrix: None,
        }
    }

    #[test]
    fn the_odd_peer_is_named_first_with_an_agreeing_host() {
        use VerdictCode::*;
        let mut rows = vec![
            row("a", "6.1", RuntimeEmptyNs),
            row("b", "6.1", RuntimePreservesNetns),
            row("c", "6.1", RuntimeEmptyNs),
            row("d", "6.18", RuntimePreservesNetns),
        ];
        mark_disagreements(&mut rows, None);
        order(&mut rows);
        assert_eq!(rows[0].name, "b");
        let d = rows[0].disagrees.as_ref().unwrap();
        assert_eq!(d.against, DisagreeKind::Peers);
        assert_eq!(d.compared_with.as_deref(), Some("a"));
        // d has no peers with another verdict: not named.
        assert!(rows.iter().filter(|r| r.disagrees.is_some()).count() == 1);
        assert_eq!(exit_class(&rows), ExitClass::Gate);
    }

    #[test]
    fn expect_and_exit_order() {
        use VerdictCode::*;
        let mut rows = vec![row("a", "6.1", RuntimeEmptyNs), row("b", "6.18", CriuNetns)];
        mark_disagreements(&mut rows, Some(RuntimeEmptyNs));
        assert_eq!(
            rows[1].disagrees.as_ref().unwrap().against,
            DisagreeKind::Expect
        );
        assert_eq!(exit_class(&rows), ExitClass::Gate);
        let mut ok = vec![
            row("a", "6.1", RuntimeEmptyNs),
            row("B", "6.1", RuntimeEmptyNs),
        ];
        assert_eq!(exit_class(&ok), ExitClass::Ok);
        ok[1].state = HostState::Unreachable;
        assert_eq!(exit_class(&ok), ExitClass::CouldNotRun);
        ok.push(row("b", "6.1", RuntimeEmptyNs));
        mark_duplicates(&mut ok);
        assert_eq!(ok[1].state, HostState::DuplicateHost);
        assert_eq!(ok[2].state, HostState::DuplicateHost);
        assert_eq!(exit_class(&ok), ExitClass::Usage);
    }
}
