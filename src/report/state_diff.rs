//! A rung's network state before and after checkpoint/restore, diffed by line
//! ([`netstate_diff`]: `<rung>/netstate-before.json` against `netstate-after.json`, JSON
//! pretty-printed with sorted keys first), for the run report ([`super::view`]).

use super::ReportError;
use crate::evidence::result::RungName;
use std::path::Path;

/// Kind of one line in a [`NetStateDiff`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// In both files.
    Same,
    /// Only in `netstate-before.json`.
    Removed,
    /// Only in `netstate-after.json`.
    Added,
}

/// The line diff of a rung's network state before and after checkpoint/restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetStateDiff {
    /// The rung.
    pub rung: RungName,
    /// `<rung>/netstate-before.json`, relative to the evidence directory.
    pub before_path: String,
    /// `<rung>/netstate-after.json`, relative to the evidence directory.
    pub after_path: String,
    /// Every line of both files in diff order (JSON is pretty-printed first, so one field a line).
    pub lines: Vec<(LineKind, String)>,
    /// Why a file could not be read, if one of them could not (then `lines` is empty).
    pub unreadable: Option<String>,
}

impl NetStateDiff {
    /// True when some line differs.
    pub fn differs(&self) -> bool {
        self.lines.iter().any(|(k, _)| *k != LineKind::Same)
    }
}

/// Reads `evidence_dir/<rung>/netstate-before.json` and `netstate-after.json` and diffs them by
/// line. `None` when neither file exists (the rung records no network state). Files that are
/// JSON are pretty-printed with sorted keys first; other text is diffed as is. Never fails: an
/// unreadable file is reported in [`NetStateDiff::unreadable`].
pub fn netstate_diff(evidence_dir: &Path, rung: RungName) -> Option<NetStateDiff> {
    let before_path = format!("{}/netstate-before.json", rung.as_str());
    let after_path = format!("{}/netstate-after.json", rung.as_str());
    let b = evidence_dir.join(&before_path);
    let a = evidence_dir.join(&after_path);
    if !b.exists() && !a.exists() {
        return None;
    }
    let read = |p: &Path, rel: &str| -> std::result::Result<Vec<String>, ReportError> {
        let text =
            crate::evidence::read_recorded_text(p).map_err(|source| ReportError::NetState {
                path: rel.into(),
                source,
            })?;
        Ok(canonical_lines(&text))
    };
    let (before, after) = match (read(&b, &before_path), read(&a, &after_path)) {
        (Ok(b), Ok(a)) => (b, a),
        (b, a) => {
            let why: Vec<String> = [b.err(), a.err()]
                .into_iter()
                .flatten()
                .map(|e| e.to_string())
                .collect();
            return Some(NetStateDiff {
                rung,
                before_path,
                after_path,
                lines: Vec::new(),
                unreadable: Some(why.join("; ")),
            });
        }
    };
    Some(NetStateDiff {
        rung,
        before_path,
        after_path,
        lines: line_diff(&before, &after),
        unreadable: None,
    })
}

/// Pretty-printed JSON lines (keys sorted), or the raw lines when `text` is not JSON.
fn canonical_lines(text: &str) -> Vec<String> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v) => serde_json::to_string_pretty(&sort_keys(v))
            .unwrap_or_else(|_| text.to_string())
            .lines()
            .map(str::to_string)
            .collect(),
        Err(_) => text.lines().map(str::to_string).collect(),
    }
}

fn sort_keys(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            let sorted: std::collections::BTreeMap<String, Value> =
                m.into_iter().map(|(k, v)| (k, sort_keys(v))).collect();
            Value::Object(sorted.into_iter().collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sort_keys).collect()),
        other => other,
    }
}

/// Longest-common-subsequence line diff. Inputs above 4000 lines each fall back to "all removed,
/// all added" after the common prefix/suffix (bounded memory).
pub(crate) fn line_diff(a: &[String], b: &[String]) -> Vec<(LineKind, String)> {
    let pre = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suf = a[pre..]
        .iter()
        .rev()
        .zip(b[pre..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (am, bm) = (&a[pre..a.len() - suf], &b[pre..b.len() - suf]);
    let mut out: Vec<(LineKind, String)> = a[..pre]
        .iter()
        .map(|l| (LineKind::Same, l.clone()))
        .collect();
    if am.len() > 4000 || bm.len() > 4000 {
        out.extend(am.iter().map(|l| (LineKind::Removed, l.clone())));
        out.extend(bm.iter().map(|l| (LineKind::Added, l.clone())));
    } else {
        let (n, m) = (am.len(), bm.len());
        let mut t = vec![0u32; (n + 1) * (m + 1)];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                t[i * (m + 1) + j] = if am[i] == bm[j] {
                    t[(i + 1) * (m + 1) + j + 1] + 1
                } else {
                    t[(i + 1) * (m + 1) + j].max(t[i * (m + 1) + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            if i < n && j < m && am[i] == bm[j] {
                out.push((LineKind::Same, am[i].clone()));
                i += 1;
                j += 1;
            } else if i < n && (j == m || t[(i + 1) * (m + 1) + j] >= t[i * (m + 1) + j + 1]) {
                out.push((LineKind::Removed, am[i].clone()));
                i += 1;
            } else {
                out.push((LineKind::Added, bm[j].clone()));
                j += 1;
            }
        }
    }
    out.extend(
        a[a.len() - suf..]
            .iter()
            .map(|l| (LineKind::Same, l.clone())),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn line_diff_marks_changed_lines() {
        let d = line_diff(&v(&["a", "b", "c", "d"]), &v(&["a", "x", "c", "d", "e"]));
        let kinds: Vec<_> = d.iter().map(|(k, l)| (*k, l.as_str())).collect();
        assert_eq!(
            kinds,
            vec![
                (LineKind::Same, "a"),
                (LineKind::Removed, "b"),
                (LineKind::Added, "x"),
                (LineKind::Same, "c"),
                (LineKind::Same, "d"),
                (LineKind::Added, "e"),
            ]
        );
    }
}
