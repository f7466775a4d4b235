//! Evaluating a [`ProbeSpec`] over a rung folder, and re-evaluating a whole evidence folder.
//!
//! Fail closed: a log, file, folder or NetState that cannot be read makes its assertions fail,
//! with `observed` = `missing: <path>` or `unreadable: <path>: <why>`.

use crate::assert::scan::{LogQuery, scan_log};
use crate::assert::spec::{AssertionSpec, Bound, Check, NetStateCheck, PASS_ROLE, ProbeSpec};
use crate::evidence::result::{AssertionResult, RunResult, RungName, Status};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::path::Path;

/// Longest list of files or differing lines written into `observed`.
const MAX_LISTED: usize = 12;

/// Evaluates every assertion of `spec` over `rung_dir` (e.g. `DIR/criu/`), in spec order.
/// Each log is scanned once for all the assertions that read it. Never fails: anything
/// unreadable yields a failed [`AssertionResult`] that says why.
pub fn evaluate(spec: &ProbeSpec, rung_dir: &Path) -> Vec<AssertionResult> {
    // Scan each log once, for all its queries.
    let mut by_log: BTreeMap<&str, Vec<&LogQuery>> = BTreeMap::new();
    // A scope's `after` anchor is counted too: a scope whose anchor never appears is empty, and
    // a count over it proves nothing (an emptied or cut log would pass `== 0`).
    let anchors: Vec<(&str, LogQuery)> = spec
        .assertions
        .iter()
        .filter_map(|a| match &a.check {
            Check::Log { log, query, .. } => query
                .after
                .as_ref()
                .map(|x| (log.as_str(), LogQuery::new(x.clone()))),
            _ => None,
        })
        .collect();
    for a in &spec.assertions {
        if let Check::Log { log, query, .. } = &a.check {
            let qs = by_log.entry(log.as_str()).or_default();
            if !qs.contains(&query) {
                qs.push(query);
            }
        }
    }
    for (log, q) in &anchors {
        let qs = by_log.entry(log).or_default();
        if !qs.contains(&q) {
            qs.push(q);
        }
    }
    let mut counts: HashMap<(&str, &LogQuery), Result<u64, FileError>> = HashMap::new();
    for (log, qs) in by_log {
        let owned: Vec<LogQuery> = qs.iter().map(|q| (*q).clone()).collect();
        let outcome = scan_log(&rung_dir.join(log), &owned);
        for (i, q) in qs.into_iter().enumerate() {
            let r = match &outcome {
                Ok(c) => Ok(c[i]),
                Err(e) => Err(unreadable(log, e)),
            };
            counts.insert((log, q), r);
        }
    }
    spec.assertions
        .iter()
        .map(|a| {
            let (subject, expected, observed, passed) = match &a.check {
                Check::Log { log, query, count } => {
                    let expected = describe_log(query, count);
                    let anchor_seen = query.after.as_ref().map(|x| {
                        counts
                            .get(&(log.as_str(), &LogQuery::new(x.clone())))
                            .is_some_and(|c| c.as_ref().is_ok_and(|n| *n > 0))
                    });
                    match (&counts[&(log.as_str(), query)], anchor_seen) {
                        (Err(e), _) => (log.clone(), expected, e.to_string(), false),
                        (Ok(_), Some(false)) => (
                            log.clone(),
                            expected,
                            format!(
                                "no line contains the anchor {:?}: the scope is empty, so no count over it proves anything",
                                query.after.as_deref().unwrap_or_default()
                            ),
                            false,
                        ),
                        (Ok(n), _) => (log.clone(), expected, lines(*n), count.holds(*n)),
                    }
                }
                Check::Files { glob, count, bytes } => {
                    let (observed, passed) = eval_files(rung_dir, glob, count, bytes.as_ref());
                    let mut expected = format!("{} files", count.describe());
                    if let Some(b) = bytes {
                        expected.push_str(&format!(", each {} bytes", b.describe()));
                    }
                    (glob.clone(), expected, observed, passed)
                }
                Check::NetState { file, check } => eval_netstate(rung_dir, file, check),
                Check::EqualFiles { file, other } => equal_files(rung_dir, file, other),
            };
            result(a, subject, expected, observed, passed)
        })
        .collect()
}

/// True iff at least one assertion has role `pass` and every `pass`-role assertion held (the
/// rung's status is then `pass`). Signature roles do not affect it.
pub fn passes(results: &[AssertionResult]) -> bool {
    let mut pass = results.iter().filter(|r| r.role == PASS_ROLE).peekable();
    pass.peek().is_some() && pass.all(|r| r.passed)
}

/// Re-runs the builtin spec of every rung of `result` that ran (status `pass` or `fail`) over
/// `dir/<rung>/`, needing no privileges. Rungs that errored or were skipped are left out.
/// A builtin spec that does not load yields one failed assertion `probe-spec` naming the error.
pub fn reevaluate(dir: &Path, result: &RunResult) -> Vec<(RungName, Vec<AssertionResult>)> {
    result
        .rungs
        .iter()
        .filter(|r| matches!(r.status, Status::Pass | Status::Fail))
        .map(|r| {
            let rung_dir = dir.join(r.name.as_str());
            let results = match ProbeSpec::builtin(r.name) {
                Ok(spec) => evaluate(&spec, &rung_dir),
                Err(e) => vec![AssertionResult {
                    id: "probe-spec".into(),
                    role: PASS_ROLE.into(),
                    description: "the builtin probe spec loads".into(),
                    subject: format!("probes/{}.toml", r.name),
                    expected: "a valid spec".into(),
                    observed: e.to_string(),
                    passed: false,
                }],
            };
            (r.name, results)
        })
        .collect()
}

fn result(
    a: &AssertionSpec,
    subject: String,
    expected: String,
    observed: String,
    passed: bool,
) -> AssertionResult {
    AssertionResult {
        id: a.id.clone(),
        role: a.role.clone(),
        description: a.description.clone(),
        subject,
        expected,
        observed,
        passed,
    }
}

/// Why an evidence file could not be judged; its text becomes the assertion's `observed`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileError {
    /// The file does not exist.
    #[error("missing: {rel}")]
    Missing {
        /// Path relative to the rung folder.
        rel: String,
    },
    /// The file could not be read.
    #[error("unreadable: {rel}: {source}")]
    Unreadable {
        /// Path relative to the rung folder.
        rel: String,
        /// The I/O error.
        source: io::Error,
    },
    /// The file is not JSON.
    #[error("unreadable: {rel}: not JSON: {source}")]
    NotJson {
        /// Path relative to the rung folder.
        rel: String,
        /// The JSON error.
        source: serde_json::Error,
    },
}

/// Why a JSON value is not a NetState (see [`lo_up_127`]).
#[derive(Debug, thiserror::Error)]
#[error("not a NetState: no `{0}` array")]
pub(crate) struct NotNetState(&'static str);

/// The error of a file that could not be read (`e` is shared by several queries); its text is
/// the assertion's `observed`.
fn unreadable(rel: &str, e: &io::Error) -> FileError {
    file_error(rel, io::Error::new(e.kind(), e.to_string()))
}

fn file_error(rel: &str, e: io::Error) -> FileError {
    if e.kind() == io::ErrorKind::NotFound {
        FileError::Missing { rel: rel.into() }
    } else {
        FileError::Unreadable {
            rel: rel.into(),
            source: e,
        }
    }
}

fn lines(n: u64) -> String {
    if n == 1 {
        "1 line".into()
    } else {
        format!("{n} lines")
    }
}

fn describe_log(q: &LogQuery, count: &Bound) -> String {
    let mut s = format!("{} lines containing {:?}", count.describe(), q.pattern);
    if let Some(a) = &q.after {
        s.push_str(&format!(" after the first line containing {a:?}"));
    }
    if let Some(b) = &q.before {
        s.push_str(&format!(" before the first line containing {b:?}"));
    }
    if !q.exclude.is_empty() {
        s.push_str(&format!(" and none of {:?}", q.exclude));
    }
    s
}

/// Shell-style match of `name` against `pat` with `*` (any run) and `?` (one byte).
pub(crate) fn wildcard(pat: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pat.len() && (pat[p] == b'?' || pat[p] == name[n]) {
            p += 1;
            n += 1;
        } else if p < pat.len() && pat[p] == b'*' {
            star = Some((p, n));
            p += 1;
        } else if let Some((sp, sn)) = star {
            p = sp + 1;
            n = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

fn eval_files(rung_dir: &Path, glob: &str, count: &Bound, bytes: Option<&Bound>) -> (String, bool) {
    let (dir_rel, pat) = glob.rsplit_once('/').unwrap_or(("", glob));
    let dir = if dir_rel.is_empty() {
        rung_dir.to_path_buf()
    } else {
        rung_dir.join(dir_rel)
    };
    let shown_dir = if dir_rel.is_empty() { "." } else { dir_rel };
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) => return (unreadable(&format!("{shown_dir}/"), &e).to_string(), false),
    };
    let mut found: Vec<(String, u64)> = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => return (unreadable(&format!("{shown_dir}/"), &e).to_string(), false),
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        if (name.starts_with('.') && !pat.starts_with('.'))
            || !wildcard(pat.as_bytes(), name.as_bytes())
        {
            continue;
        }
        match entry.metadata() {
            Ok(md) if md.is_file() => found.push((name, md.len())),
            Ok(_) => {}
            Err(e) => {
                return (
                    unreadable(&format!("{shown_dir}/{name}"), &e).to_string(),
                    false,
                );
            }
        }
    }
    found.sort();
    let n = found.len() as u64;
    let sizes_ok = bytes.is_none_or(|b| found.iter().all(|(_, s)| b.holds(*s)));
    let mut observed = format!("{n} {}", if n == 1 { "file" } else { "files" });
    if !found.is_empty() {
        let list: Vec<String> = found
            .iter()
            .take(MAX_LISTED)
            .map(|(name, s)| format!("{name} ({s} B)"))
            .collect();
        observed.push_str(": ");
        observed.push_str(&list.join(", "));
        if found.len() > MAX_LISTED {
            observed.push_str(&format!(", … and {} more", found.len() - MAX_LISTED));
        }
    }
    (observed, count.holds(n) && sizes_ok)
}

/// `(subject, expected, observed, passed)` of a NetState check.
fn eval_netstate(
    rung_dir: &Path,
    file: &str,
    check: &NetStateCheck,
) -> (String, String, String, bool) {
    match check {
        NetStateCheck::LoUp127 { expect } => {
            let expected = if *expect {
                "lo UP with inet 127.0.0.1/8".to_string()
            } else {
                "not (lo UP with inet 127.0.0.1/8)".to_string()
            };
            let (observed, passed) = match read_json(rung_dir, file) {
                Err(e) => (e.to_string(), false),
                Ok(v) => match lo_up_127(&v) {
                    Err(e) => (format!("unreadable: {file}: {e}"), false),
                    Ok((truth, observed)) => (observed, truth == *expect),
                },
            };
            (file.to_string(), expected, observed, passed)
        }
        NetStateCheck::NoCriuLock => {
            let expected = "no CRIU chain or CRIU-… table in its netfilter".to_string();
            let (observed, passed) = match crate::evidence::read_recorded_text(&rung_dir.join(file))
            {
                Err(e) => (unreadable(file, &e).to_string(), false),
                Ok(t) => match crate::netlink::NetState::from_json(&t) {
                    Err(e) => (format!("unreadable: {file}: {e}"), false),
                    Ok(s) => {
                        let lock = crate::netlink::netfilter::criu_lock(&s.netfilter);
                        if lock.is_empty() {
                            ("none".to_string(), true)
                        } else {
                            (
                                format!("CRIU's network lock found: {}", lock.join("; ")),
                                false,
                            )
                        }
                    }
                },
            };
            (file.to_string(), expected, observed, passed)
        }
        NetStateCheck::Equals { other } => equal_files(rung_dir, file, other),
    }
}

/// `file` and `other` byte-identical: (subject, expected, observed, passed).
fn equal_files(rung_dir: &Path, file: &str, other: &str) -> (String, String, String, bool) {
    let subject = file.to_string();
    let expected = format!("{file} byte-identical to {other}");
    let read = |rel: &str| {
        crate::evidence::read_recorded(&rung_dir.join(rel)).map_err(|e| unreadable(rel, &e))
    };
    let (observed, passed) = match (read(file), read(other)) {
        (Err(e), _) | (_, Err(e)) => (e.to_string(), false),
        (Ok(a), Ok(b)) if a == b => (format!("identical ({} bytes)", a.len()), true),
        (Ok(a), Ok(b)) => (diff_summary(file, &a, other, &b), false),
    };
    (subject, expected, observed, passed)
}

fn read_json(rung_dir: &Path, rel: &str) -> Result<Value, FileError> {
    let bytes =
        crate::evidence::read_recorded(&rung_dir.join(rel)).map_err(|e| file_error(rel, e))?;
    serde_json::from_slice(&bytes).map_err(|source| FileError::NotJson {
        rel: rel.into(),
        source,
    })
}

/// Whether a link named `lo` is up and has inet 127.0.0.1/8 on its ifindex, with a readable
/// description. Errors: [`NotNetState`] when the value does not have NetState's
/// `links`/`addresses` arrays.
pub(crate) fn lo_up_127(v: &Value) -> Result<(bool, String), NotNetState> {
    let links = v
        .get("links")
        .and_then(Value::as_array)
        .ok_or(NotNetState("links"))?;
    let addrs = v
        .get("addresses")
        .and_then(Value::as_array)
        .ok_or(NotNetState("addresses"))?;
    let Some(lo) = links
        .iter()
        .find(|l| l.get("name").and_then(Value::as_str) == Some("lo"))
    else {
        return Ok((false, format!("no link named lo ({} links)", links.len())));
    };
    let up = lo.get("up").and_then(Value::as_bool) == Some(true);
    let ifindex = lo.get("ifindex").and_then(Value::as_u64);
    let has_127 = ifindex.is_some()
        && addrs.iter().any(|a| {
            a.get("ifindex").and_then(Value::as_u64) == ifindex
                && a.get("family").and_then(Value::as_str) == Some("inet")
                && a.get("address").and_then(Value::as_str) == Some("127.0.0.1")
                && a.get("prefix_len").and_then(Value::as_u64) == Some(8)
        });
    let observed = format!(
        "lo {}, {}",
        if up { "UP" } else { "DOWN" },
        if has_127 {
            "inet 127.0.0.1/8 present"
        } else {
            "no inet 127.0.0.1/8"
        }
    );
    Ok((up && has_127, observed))
}

/// What differs between `other_name` (old, e.g. before) and `name` (new, e.g. after). When
/// both are JSON: one entry per differing JSON pointer (`/links/0/up: true → false`,
/// `/addresses/0: removed {…}`, `…: added {…}`); otherwise the lines only in one of them
/// (`-` old, `+` new).
fn diff_summary(name: &str, new: &[u8], other_name: &str, old: &[u8]) -> String {
    let mut diffs: Vec<String> = Vec::new();
    match (
        serde_json::from_slice::<Value>(new),
        serde_json::from_slice::<Value>(old),
    ) {
        (Ok(n), Ok(o)) => json_diff(&o, &n, &mut String::new(), &mut diffs),
        _ => line_diff(new, old, &mut diffs),
    }
    let mut out = format!(
        "differs ({other_name} {} bytes → {name} {} bytes): ",
        old.len(),
        new.len()
    );
    if diffs.is_empty() {
        out.push_str("same content, different bytes (order or spacing)");
    } else {
        let total = diffs.len();
        out.push_str(
            &diffs
                .into_iter()
                .take(MAX_LISTED)
                .collect::<Vec<_>>()
                .join(" | "),
        );
        if total > MAX_LISTED {
            out.push_str(&format!(" | … and {} more", total - MAX_LISTED));
        }
    }
    out
}

/// The field-path diff `run` prints for two JSON documents (e.g. two NetStates, old = the
/// recorded one, new = the observed one): one entry per differing JSON pointer, in key order —
/// `/links/2/mtu: 1789 → 1500`, `/addresses/0: removed address 10.0.0.1/24`,
/// `/routes/3: added route …`. Empty when equal. Values are clipped for display. Shared by the
/// netstate assertions and, for its net-fidelity diff, the slot driver.
pub fn json_field_diff(old: &Value, new: &Value) -> Vec<String> {
    let mut out = Vec::new();
    json_diff(old, new, &mut String::new(), &mut out);
    out
}

fn json_diff(old: &Value, new: &Value, path: &mut String, out: &mut Vec<String>) {
    let shown = |p: &str| {
        if p.is_empty() {
            "/".to_string()
        } else {
            p.to_string()
        }
    };
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let len = path.len();
                path.push('/');
                path.push_str(&k.replace('~', "~0").replace('/', "~1"));
                match (o.get(k), n.get(k)) {
                    (Some(a), Some(b)) => json_diff(a, b, path, out),
                    (Some(a), None) => out.push(format!("{path}: removed {}", label(a))),
                    (None, Some(b)) => out.push(format!("{path}: added {}", label(b))),
                    (None, None) => {}
                }
                path.truncate(len);
            }
        }
        (Value::Array(o), Value::Array(n)) => array_diff(o, n, path, out),
        (a, b) if a != b => out.push(format!(
            "{}: {} → {}",
            shown(path),
            clip(&a.to_string()),
            clip(&b.to_string())
        )),
        _ => {}
    }
}

/// Two arrays aligned on their longest common subsequence of equal elements, so one entry
/// inserted or removed is one line, not a change of every element after it. Between two
/// aligned elements, as many removed as added entries are compared pairwise (a changed entry:
/// its fields); otherwise they are listed as removed (old index) and added (new index).
/// O(len(old) × len(new)) time and memory: NetState arrays hold tens to hundreds of entries.
fn array_diff(o: &[Value], n: &[Value], path: &mut String, out: &mut Vec<String>) {
    // lcs[i][j]: length of the LCS of o[i..] and n[j..].
    let mut lcs = vec![vec![0u32; n.len() + 1]; o.len() + 1];
    for i in (0..o.len()).rev() {
        for j in (0..n.len()).rev() {
            lcs[i][j] = if o[i] == n[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let (mut gap_o, mut gap_n) = (Vec::new(), Vec::new());
    loop {
        let matched = i < o.len() && j < n.len() && o[i] == n[j];
        if matched || (i == o.len() && j == n.len()) {
            gap_diff(o, n, &gap_o, &gap_n, path, out);
            gap_o.clear();
            gap_n.clear();
            if !matched {
                return;
            }
            i += 1;
            j += 1;
        } else if j == n.len() || (i < o.len() && lcs[i + 1][j] >= lcs[i][j + 1]) {
            gap_o.push(i);
            i += 1;
        } else {
            gap_n.push(j);
            j += 1;
        }
    }
}

/// The entries between two aligned elements of [`array_diff`]: old indices `go`, new `gn`.
fn gap_diff(
    o: &[Value],
    n: &[Value],
    go: &[usize],
    gn: &[usize],
    path: &mut String,
    out: &mut Vec<String>,
) {
    let len = path.len();
    if go.len() == gn.len() {
        for (&a, &b) in go.iter().zip(gn) {
            path.push_str(&format!("/{b}"));
            json_diff(&o[a], &n[b], path, out);
            path.truncate(len);
        }
        return;
    }
    for &a in go {
        out.push(format!("{path}/{a}: removed {}", label(&o[a])));
    }
    for &b in gn {
        out.push(format!("{path}/{b}: added {}", label(&n[b])));
    }
}

/// A short name for a NetState entry: `address 127.0.0.1/8`, `route 127.0.0.0/8 table 255`,
/// `link lo`; anything else is its clipped JSON.
fn label(v: &Value) -> String {
    let s = |k: &str| {
        v.get(k)
            .map(|x| x.to_string().trim_matches('"').to_string())
    };
    if let (Some(a), Some(p)) = (s("address"), s("prefix_len")) {
        return format!("address {a}/{p}");
    }
    if let (Some(d), Some(t)) = (s("dst"), s("table")) {
        return format!("route {d} table {t}");
    }
    if let (Some(n), Some(_)) = (s("name"), v.get("ifindex")) {
        return format!("link {n}");
    }
    clip(&v.to_string())
}

/// Multiset line difference: `-line` only in `old`, `+line` only in `new`, in file order.
fn line_diff(new: &[u8], old: &[u8], out: &mut Vec<String>) {
    let (n, o) = (String::from_utf8_lossy(new), String::from_utf8_lossy(old));
    let mut count: HashMap<&str, i64> = HashMap::new();
    for l in n.lines() {
        *count.entry(l).or_default() += 1;
    }
    for l in o.lines() {
        *count.entry(l).or_default() -= 1;
    }
    let emit = |text: &str, sign: i64, mark: char, out: &mut Vec<String>| {
        let mut seen: HashMap<&str, i64> = HashMap::new();
        for l in text.lines() {
            let extra = count[l] * sign;
            let s = seen.entry(l).or_default();
            if extra > 0 && *s < extra {
                *s += 1;
                out.push(format!("{mark}{}", clip(l)));
            }
        }
    };
    emit(&o, -1, '-', out);
    emit(&n, 1, '+', out);
}

fn clip(l: &str) -> String {
    if l.chars().count() > 160 {
        let s: String = l.chars().take(160).collect();
        format!("{s}…")
    } else {
        l.to_string()
    }
}
