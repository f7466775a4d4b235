//! What differs between a rung's recorded attribution (`facts.attribution` of its result) and
//! the one its evidence gives when `verify` recomputes it ([`super::attribution::from_rung_dir`]):
//! named per entry, so a MISMATCH line says which fact was changed, not only that one was.

use super::attribution::{Attribution, Row};
use std::collections::BTreeMap;

/// How many differences a MISMATCH line names before `and N more`.
const NAMED: usize = 5;

/// The differences between `recorded` (as the result holds it) and `fresh` (recomputed), one
/// phrase each: a flag (`network_images`, `external_netns`), a row of `changed` by kind and key
/// (only recorded, only in the evidence, or which column differs, with both values), a count
/// per [`super::attribution::LostAt`]. At most [`NAMED`] phrases, then `and N more`. A recorded
/// value that is not an attribution at all is one phrase with the parse error.
///
/// Pure. Empty when they agree.
pub fn differences(recorded: &serde_json::Value, fresh: &Attribution) -> Vec<String> {
    let rec: Attribution = match serde_json::from_value(recorded.clone()) {
        Ok(a) => a,
        Err(e) => return vec![format!("the recorded value is not an attribution ({e})")],
    };
    let mut out = Vec::new();
    let flag = |out: &mut Vec<String>, name: &str, r: bool, f: bool| {
        if r != f {
            out.push(format!("{name} recorded {r}, evidence gives {f}"));
        }
    };
    flag(
        &mut out,
        "network_images",
        rec.network_images,
        fresh.network_images,
    );
    flag(
        &mut out,
        "external_netns",
        rec.external_netns,
        fresh.external_netns,
    );
    rows(&mut out, &rec.changed, &fresh.changed);
    counts(&mut out, &rec.counts, &fresh.counts);
    if out.len() > NAMED {
        let more = out.len() - NAMED;
        out.truncate(NAMED);
        out.push(format!("and {more} more"));
    }
    out
}

fn key(r: &Row) -> (String, String) {
    (r.kind.clone(), r.key.clone())
}

fn shown(v: &Option<String>) -> String {
    v.as_deref().map_or("absent".into(), |s| format!("`{s}`"))
}

/// A [`super::attribution::LostAt`] as written in results (`restore`, …), `none` when absent.
fn lost(v: &Option<super::attribution::LostAt>) -> String {
    v.and_then(|l| serde_json::to_value(l).ok())
        .and_then(|j| j.as_str().map(String::from))
        .unwrap_or_else(|| "none".into())
}

/// Rows by (kind, key): only on one side, or a column that differs.
fn rows(out: &mut Vec<String>, rec: &[Row], fresh: &[Row]) {
    let r: BTreeMap<_, _> = rec.iter().map(|x| (key(x), x)).collect();
    let f: BTreeMap<_, _> = fresh.iter().map(|x| (key(x), x)).collect();
    for ((kind, k), a) in &r {
        let Some(b) = f.get(&(kind.clone(), k.clone())) else {
            out.push(format!(
                "{kind} {k}: recorded as changed, not in the evidence's"
            ));
            continue;
        };
        for (col, x, y) in [
            ("before", &a.before, &b.before),
            ("image", &a.image, &b.image),
            ("after", &a.after, &b.after),
        ] {
            if x != y {
                out.push(format!(
                    "{kind} {k}: {col} recorded {}, evidence gives {}",
                    shown(x),
                    shown(y)
                ));
            }
        }
        if a.lost_at != b.lost_at {
            out.push(format!(
                "{kind} {k}: lost_at recorded {}, evidence gives {}",
                lost(&a.lost_at),
                lost(&b.lost_at)
            ));
        }
    }
    for (kind, k) in f.keys().filter(|x| !r.contains_key(*x)) {
        out.push(format!("{kind} {k}: changed in the evidence, not recorded"));
    }
}

fn counts(out: &mut Vec<String>, rec: &BTreeMap<String, usize>, fresh: &BTreeMap<String, usize>) {
    let names: std::collections::BTreeSet<&String> = rec.keys().chain(fresh.keys()).collect();
    for n in names {
        let (a, b) = (rec.get(n).copied(), fresh.get(n).copied());
        if a != b {
            out.push(format!(
                "count {n} recorded {}, evidence gives {}",
                a.unwrap_or(0),
                b.unwrap_or(0)
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::attribution::LostAt;

    fn row(kind: &str, key: &str, after: Option<&str>, lost: Option<LostAt>) -> Row {
        Row {
            kind: kind.into(),
            key: key.into(),
            before: Some("up".into()),
            image: Some("up".into()),
            after: after.map(Into::into),
            lost_at: lost,
        }
    }

    fn attr(changed: Vec<Row>, restore: usize) -> Attribution {
        Attribution {
            network_images: true,
            external_netns: false,
            changed,
            counts: BTreeMap::from([("restore".to_string(), restore)]),
        }
    }

    #[test]
    fn names_each_entry_that_differs() {
        let fresh = attr(vec![row("link", "lo", None, Some(LostAt::Restore))], 1);
        assert!(differences(&serde_json::to_value(&fresh).unwrap(), &fresh).is_empty());
        let mut rec = attr(
            vec![
                row("link", "lo", Some("up"), Some(LostAt::Dump)),
                row("route", "10.0.0.0/8", None, None),
            ],
            2,
        );
        rec.external_netns = true;
        let d = differences(&serde_json::to_value(&rec).unwrap(), &fresh);
        assert_eq!(
            d,
            [
                "external_netns recorded true, evidence gives false",
                "link lo: after recorded `up`, evidence gives absent",
                "link lo: lost_at recorded dump, evidence gives restore",
                "route 10.0.0.0/8: recorded as changed, not in the evidence's",
                "count restore recorded 2, evidence gives 1",
            ]
        );
        let rec = attr(vec![], 1);
        assert_eq!(
            differences(&serde_json::to_value(&rec).unwrap(), &fresh),
            ["link lo: changed in the evidence, not recorded"]
        );
    }

    #[test]
    fn caps_the_list_and_names_a_value_that_is_not_an_attribution() {
        let fresh = attr(vec![], 0);
        let rows = (0..8).map(|i| row("sysctl", &format!("k{i}"), None, None));
        let rec = attr(rows.collect(), 0);
        let d = differences(&serde_json::to_value(&rec).unwrap(), &fresh);
        assert_eq!(d.len(), NAMED + 1);
        assert_eq!(d[NAMED], "and 3 more");
        let d = differences(&serde_json::json!({"changed": 3}), &fresh);
        assert!(
            d[0].starts_with("the recorded value is not an attribution ("),
            "{d:?}"
        );
    }
}
