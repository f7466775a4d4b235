//! `netprobe diff A B` where both sides are checkpoint archives: the two findings, then every
//! field of the two [`Checkpoint`]s that differs, by JSON path (the archive names and the
//! images folder labels left out).

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

use super::checkpoint::Checkpoint;

/// What differs between two checkpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointDiff {
    /// `finding.kind` of each side.
    pub kinds: (String, String),
    /// `(path, old, new)` per leaf that differs (`-` for absent), sorted by path.
    pub fields: Vec<(String, String, String)>,
}

impl CheckpointDiff {
    /// Whether the network differs: the finding or the decoded images.
    pub fn network_changed(&self) -> bool {
        self.fields
            .iter()
            .any(|(p, _, _)| p.starts_with("finding") || p.starts_with("images"))
    }

    /// The diff as text: the findings, then one line per field.
    pub fn render(&self, old: &Checkpoint, new: &Checkpoint) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "old: {} — finding {}",
            old.archive.display(),
            self.kinds.0
        );
        let _ = writeln!(
            o,
            "new: {} — finding {}",
            new.archive.display(),
            self.kinds.1
        );
        if self.fields.is_empty() {
            let _ = writeln!(
                o,
                "no difference in engine metadata, finding or network images"
            );
        }
        for (p, a, b) in &self.fields {
            let _ = writeln!(o, "  {p}: {a} -> {b}");
        }
        o
    }
}

fn flatten(prefix: String, v: &Value, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(p, x, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                flatten(format!("{prefix}[{i}]"), x, out);
            }
            if a.is_empty() {
                out.insert(prefix, "[]".into());
            }
        }
        leaf => {
            out.insert(prefix, leaf.to_string());
        }
    }
}

/// Compares two checkpoints field by field.
pub fn diff(old: &Checkpoint, new: &Checkpoint) -> CheckpointDiff {
    let leaves = |c: &Checkpoint| {
        let mut v = serde_json::to_value(c).unwrap_or(Value::Null);
        if let Some(m) = v.as_object_mut() {
            m.remove("archive");
            if let Some(i) = m.get_mut("images").and_then(Value::as_object_mut) {
                i.remove("dir");
            }
        }
        let mut out = BTreeMap::new();
        flatten(String::new(), &v, &mut out);
        out
    };
    let (a, b) = (leaves(old), leaves(new));
    let mut fields = Vec::new();
    let dash = || "-".to_string();
    for k in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
        let (x, y) = (a.get(k), b.get(k));
        if x != y {
            fields.push((
                k.clone(),
                x.cloned().unwrap_or_else(dash),
                y.cloned().unwrap_or_else(dash),
            ));
        }
    }
    fields.sort();
    CheckpointDiff {
        kinds: (
            old.finding.kind.as_str().to_string(),
            new.finding.kind.as_str().to_string(),
        ),
        fields,
    }
}
