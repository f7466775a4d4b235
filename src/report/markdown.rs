//! The Markdown report (`netprobe report DIR --format md`): fit to paste into an issue or PR.
//! All text from the result or the evidence is escaped: it can neither break a table nor inject
//! HTML; artifact links are relative to the evidence directory and percent-encoded.

use super::{LineKind, first_broken_rung, is_inside, netstate_diff, url_path};
use crate::evidence::result::{Artifact, RESULT_FILE, RunResult, RungResult};
use std::path::Path;

/// Escapes text for a Markdown table cell or paragraph: one line; `\ ` * _ [ ] | # ~` are
/// backslash-escaped, `< > &` become entities (no raw HTML can pass through).
pub(crate) fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => out.push(' '),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '#' | '~' | '!' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// A fenced code block whose fence is longer than any backtick run in `body`.
fn fenced(lang: &str, body: &str) -> String {
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}{lang}\n{body}\n{fence}\n")
}

/// A Markdown link to an artifact, or escaped text when the path is not inside the evidence
/// directory.
fn link(path: &str) -> String {
    if is_inside(path) {
        format!("[{}](./{})", md(path), url_path(path))
    } else {
        format!(
            "{} (not inside the evidence directory; not linked)",
            md(path)
        )
    }
}

fn status_md(r: &RungResult) -> String {
    match r.status {
        crate::evidence::result::Status::Pass => "✅ pass".into(),
        crate::evidence::result::Status::Fail => "❌ **FAIL**".into(),
        crate::evidence::result::Status::Error => "⚠️ **ERROR**".into(),
        crate::evidence::result::Status::Skipped => "➖ skipped".into(),
    }
}

/// Renders the run as GitHub-flavoured Markdown: verdict, ladder table, host and binaries with
/// pin match, each rung's assertions (expected vs observed), the network-state diff of each rung
/// that recorded one (read from `evidence_dir/<rung>/netstate-{before,after}.json`), timings,
/// declared differences and relative links to every artifact. Every number names its source
/// (`netprobe-result.json` or an artifact path). Never fails: unreadable netstate files are
/// reported in the text.
pub fn render_markdown(result: &RunResult, evidence_dir: &Path) -> String {
    let mut s = String::new();
    let v = &result.verdict;
    s.push_str(&format!("## netprobe verdict: `{}`\n\n", v.code));
    s.push_str(&format!("> {}\n\n", md(&v.summary)));
    if let Some(c) = first_broken_rung(result) {
        s.push_str(&format!("First broken rung: **{}**.", c));
    } else {
        s.push_str("No rung failed.");
    }
    if let Some(reason) = &v.reason {
        s.push_str(&format!(" Reason: {}.", md(reason)));
    }
    s.push('\n');
    if !v.rests_on.is_empty() {
        let r: Vec<String> = v.rests_on.iter().map(|x| format!("`{}`", md(x))).collect();
        s.push_str(&format!("Rests on: {}.\n", r.join(", ")));
    }
    if let Some(c) = first_broken_rung(result).and_then(|c| result.rung(c)) {
        s.push_str(&format!("\nWhy `{}` broke:\n\n", c.name));
        if let Some(e) = &c.error {
            s.push_str(&format!("- error: {}\n", md(e)));
        }
        for a in c
            .assertions
            .iter()
            .filter(|a| !a.passed && a.role == "pass")
        {
            s.push_str(&format!(
                "- `{}`: expected **{}**, observed **{}** — {}\n",
                md(&a.id),
                md(&a.expected),
                md(&a.observed),
                link(&format!("{}/{}", c.name, a.subject))
            ));
        }
    }
    s.push_str(&format!(
        "\nnetprobe {} · started {} · {} ms · command `{}` · source: `{}`\n\n",
        md(&result.tool_version),
        md(&result.started_at),
        result.duration_ms,
        md(&result.command.join(" ")),
        RESULT_FILE
    ));

    s.push_str("### Declared differences\n\n");
    if result.declared_differences.is_empty() {
        s.push_str("None.\n\n");
    } else {
        for d in &result.declared_differences {
            s.push_str(&format!("- {}\n", md(d)));
        }
        s.push('\n');
    }

    // Ladder.
    let mut rungs: Vec<&RungResult> = result.rungs.iter().collect();
    rungs.sort_by_key(|r| r.name);
    s.push_str("### Ladder\n\n| rung | status | deciding fact | ms |\n|---|---|---|---:|\n");
    for r in &rungs {
        let mut fact = md(&r.summary);
        if let Some(e) = &r.error {
            fact.push_str(&format!(" — error: {}", md(e)));
        }
        s.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            r.name,
            status_md(r),
            fact,
            r.duration_ms
        ));
    }
    s.push('\n');

    // Host.
    let h = &result.host;
    s.push_str("### Host and binaries\n\n");
    s.push_str(&format!(
        "Kernel {} ({}), {}, cgroup {}, OS {}.\n\n",
        md(&h.kernel_release),
        md(&h.machine),
        md(&h.kernel_version),
        md(&h.cgroup),
        md(h.os.as_deref().unwrap_or("unknown"))
    ));
    s.push_str("| binary | path | version | bytes | sha256 | pin | pin match |\n|---|---|---|---:|---|---|---|\n");
    for (name, b) in [("criu", &h.criu), ("runtime", &h.runtime)] {
        let Some(b) = b else {
            s.push_str(&format!("| {name} | not used | | | | | |\n"));
            continue;
        };
        let pin = result.pins.iter().find(|p| p.name == name);
        let (pinned, matched) = match pin {
            Some(p) => (
                format!(
                    "{}{}",
                    md(&p.pinned_version),
                    p.pinned_sha256
                        .as_deref()
                        .map(|x| format!(" `{}`", md(short(x))))
                        .unwrap_or_default()
                ),
                if p.matches {
                    "✅ yes".to_string()
                } else {
                    "❌ **no**".to_string()
                },
            ),
            None => ("no pin".into(), "–".into()),
        };
        s.push_str(&format!(
            "| {name} | `{}` | {} | {} | `{}` | {} | {} |\n",
            md(&b.path),
            md(&b.version),
            b.bytes,
            md(short(&b.sha256)),
            pinned,
            matched
        ));
    }
    s.push('\n');

    // Assertions, netstate, facts.
    for r in &rungs {
        s.push_str(&format!("### Rung `{}`: {}\n\n", r.name, status_md(r)));
        if let Some(e) = &r.error {
            s.push_str(&format!("Error: {}\n\n", md(e)));
        }
        if r.assertions.is_empty() {
            s.push_str("No assertions evaluated.\n\n");
        } else {
            s.push_str("| assertion | role | expected | observed | result | subject |\n|---|---|---|---|---|---|\n");
            for a in &r.assertions {
                let subject = format!("{}/{}", r.name, a.subject);
                s.push_str(&format!(
                    "| `{}` {} | {} | {} | {} | {} | {} |\n",
                    md(&a.id),
                    md(&a.description),
                    md(&a.role),
                    md(&a.expected),
                    md(&a.observed),
                    if a.passed { "✅ pass" } else { "❌ **fail**" },
                    link(&subject)
                ));
            }
            s.push('\n');
        }
        if let Some(d) = netstate_diff(evidence_dir, r.name) {
            s.push_str(&format!(
                "Network state {} → {}:",
                link(&d.before_path),
                link(&d.after_path)
            ));
            if let Some(why) = &d.unreadable {
                s.push_str(&format!(" unreadable ({}).\n\n", md(why)));
            } else if !d.differs() {
                s.push_str(" identical.\n\n");
            } else {
                s.push_str(" differs (`-` before, `+` after).\n\n");
                let body: Vec<String> = d
                    .lines
                    .iter()
                    .map(|(k, l)| {
                        let p = match k {
                            LineKind::Same => ' ',
                            LineKind::Removed => '-',
                            LineKind::Added => '+',
                        };
                        format!("{p}{l}")
                    })
                    .collect();
                s.push_str(&fenced("diff", &body.join("\n")));
                s.push('\n');
            }
        }
        if !r.facts.is_empty() {
            let f: Vec<String> = r
                .facts
                .iter()
                .map(|(k, v)| format!("{} = {}", md(k), md(&v.to_string())))
                .collect();
            s.push_str(&format!("Facts: {}.\n\n", f.join("; ")));
        }
    }

    // Timings.
    s.push_str(&format!(
        "### Timings (ms, monotonic; from `{RESULT_FILE}`)\n\n| rung | step | ms |\n|---|---|---:|\n"
    ));
    for r in &rungs {
        s.push_str(&format!(
            "| `{}` | whole rung | {} |\n",
            r.name, r.duration_ms
        ));
        for (k, ms) in &r.timings_ms {
            s.push_str(&format!("| `{}` | {} | {} |\n", r.name, md(k), ms));
        }
    }
    s.push_str(&format!("| run | whole run | {} |\n\n", result.duration_ms));

    // Artifacts.
    s.push_str("### Artifacts\n\n");
    let all = all_artifacts(result);
    if all.is_empty() {
        s.push_str("None recorded.\n");
    }
    for a in all {
        s.push_str(&format!(
            "- {} ({} bytes, sha256 `{}`)\n",
            link(&a.path),
            a.bytes,
            md(short(&a.sha256))
        ));
    }
    s
}

/// The first 16 hex digits of a sha256 (the full value is in the result file).
pub(crate) fn short(sha: &str) -> &str {
    sha.get(..16).unwrap_or(sha)
}

/// `RunResult::artifacts` then each rung's artifacts, without duplicate paths, sorted by path.
pub(crate) fn all_artifacts(result: &RunResult) -> Vec<&Artifact> {
    let mut v: Vec<&Artifact> = result
        .artifacts
        .iter()
        .chain(result.rungs.iter().flat_map(|r| r.artifacts.iter()))
        .collect();
    v.sort_by(|a, b| a.path.cmp(&b.path));
    v.dedup_by(|a, b| a.path == b.path);
    v
}
