//! The HTML report (`netprobe report DIR --format html`): one self-contained page (inline CSS,
//! inline SVG, no script, no external asset). All text from the result or the evidence goes
//! through [`escape`]; links are relative, percent-encoded and only to paths inside the evidence
//! directory, so log content or file names cannot inject markup or script.

use super::markdown::{all_artifacts, short};
use super::{LineKind, first_broken_rung, is_inside, netstate_diff, status_word, url_path};
use crate::evidence::result::{RESULT_FILE, RunResult, RungResult, Status, VerdictCode};
use std::fmt::Write as _;
use std::path::Path;

/// Escapes `& < > " '` for HTML text and attribute values; control characters other than
/// newline and tab are dropped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Fill colour of a rung box: pass green, fail red, error orange, skipped grey.
fn status_colour(s: Status) -> &'static str {
    match s {
        Status::Pass => "#2e7d32",
        Status::Fail => "#c62828",
        Status::Error => "#ef6c00",
        Status::Skipped => "#757575",
    }
}

fn verdict_colour(v: VerdictCode) -> &'static str {
    match v {
        VerdictCode::RuntimePreservesNetns => "#2e7d32",
        VerdictCode::Inconclusive => "#ef6c00",
        _ => "#b71c1c",
    }
}

/// Splits `s` into at most `max_lines` lines of at most `width` characters (word-wise; the last
/// line ends with `…` when text was cut).
fn wrap(s: &str, width: usize, max_lines: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in s.split_whitespace() {
        let word: String = if word.chars().count() > width {
            word.chars().take(width - 1).chain(['…']).collect()
        } else {
            word.to_string()
        };
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(&word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    if lines.len() > max_lines {
        lines.truncate(max_lines);
        let last = lines.last_mut().expect("max_lines > 0");
        let keep: String = last.chars().take(width.saturating_sub(1)).collect();
        *last = format!("{keep}…");
    }
    lines
}

/// The ladder as inline SVG: the verdict on top, then one box per rung in ladder order, coloured
/// by outcome, with status, milliseconds and the deciding fact; the first broken rung is outlined.
fn ladder_svg(result: &RunResult) -> String {
    let mut rungs: Vec<&RungResult> = result.rungs.iter().collect();
    rungs.sort_by_key(|r| r.name);
    let n = rungs.len().max(1);
    let (bw, gap, top) = (224usize, 32usize, 118usize);
    let width = n * bw + (n - 1) * gap + 20;
    let height = 330;
    let culprit = first_broken_rung(result);
    let v = &result.verdict;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg id="ladder" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="netprobe ladder, verdict {code}" font-family="system-ui, sans-serif">"#,
        code = escape(v.code.as_str())
    );
    s.push_str(r##"<defs><marker id="arrow" markerWidth="10" markerHeight="10" refX="8" refY="5" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>"##);
    let _ = write!(
        s,
        r#"<rect x="10" y="10" width="{w}" height="84" rx="10" fill="{c}"/><text x="28" y="44" font-size="24" font-weight="bold" fill="white">Verdict: {code}</text>"#,
        w = width - 20,
        c = verdict_colour(v.code),
        code = escape(v.code.as_str())
    );
    let sub = match culprit {
        Some(c) => format!("First broken rung: {c}. {}", v.summary),
        None => format!("No rung failed. {}", v.summary),
    };
    for (i, line) in wrap(&sub, (width - 60) / 8, 2).iter().enumerate() {
        let _ = write!(
            s,
            r#"<text x="28" y="{y}" font-size="14" fill="white">{t}</text>"#,
            y = 66 + i * 18,
            t = escape(line)
        );
    }
    for (i, r) in rungs.iter().enumerate() {
        let x = 10 + i * (bw + gap);
        let is_culprit = Some(r.name) == culprit;
        let _ = write!(
            s,
            r##"<g class="rung" data-rung="{name}" data-status="{st}"><rect x="{x}" y="{top}" width="{bw}" height="170" rx="10" fill="{c}" stroke="{stroke}" stroke-width="{sw}"/>"##,
            name = escape(r.name.as_str()),
            st = status_word(r.status).to_lowercase(),
            c = status_colour(r.status),
            stroke = if is_culprit { "#000" } else { "none" },
            sw = if is_culprit { 5 } else { 0 },
        );
        let _ = write!(
            s,
            r#"<text x="{tx}" y="{y1}" font-size="18" font-weight="bold" fill="white">{name}</text><text x="{tx}" y="{y2}" font-size="22" font-weight="bold" fill="white">{st}</text><text x="{tx}" y="{y3}" font-size="13" fill="white">{ms} ms</text>"#,
            tx = x + 14,
            y1 = top + 28,
            y2 = top + 58,
            y3 = top + 80,
            name = escape(r.name.as_str()),
            st = status_word(r.status),
            ms = r.duration_ms
        );
        let fact = match &r.error {
            Some(e) if r.status == Status::Error => e.clone(),
            _ => r.summary.clone(),
        };
        for (j, line) in wrap(&fact, 27, 4).iter().enumerate() {
            let _ = write!(
                s,
                r#"<text x="{tx}" y="{y}" font-size="13" fill="white">{t}</text>"#,
                tx = x + 14,
                y = top + 104 + j * 17,
                t = escape(line)
            );
        }
        s.push_str("</g>");
        if is_culprit {
            let _ = write!(
                s,
                r#"<text x="{cx}" y="{y}" font-size="15" font-weight="bold" text-anchor="middle" fill="black">▲ first broken rung</text>"#,
                cx = x + bw / 2,
                y = top + 170 + 26
            );
        }
        if i + 1 < rungs.len() {
            let _ = write!(
                s,
                r##"<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="#555" stroke-width="3" marker-end="url(#arrow)"/>"##,
                x1 = x + bw + 3,
                x2 = x + bw + gap - 5,
                y = top + 85
            );
        }
    }
    s.push_str("</svg>");
    s
}

fn link(path: &str) -> String {
    if is_inside(path) {
        format!(
            r#"<a href="./{}"><code>{}</code></a>"#,
            escape(&url_path(path)),
            escape(path)
        )
    } else {
        format!(
            r#"<code>{}</code> <em>(not inside the evidence directory; not linked)</em>"#,
            escape(path)
        )
    }
}

fn badge(s: Status) -> String {
    format!(
        r#"<span class="badge" style="background:{}">{}</span>"#,
        status_colour(s),
        status_word(s)
    )
}

const CSS: &str = r#"
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1100px;color:#212121;padding:0 16px}
h1{font-size:22px;margin:0 0 12px} h2{font-size:19px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px} h3{font-size:16px}
table{border-collapse:collapse;margin:8px 0 16px;width:100%} th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top;font-size:14px}
th{background:#f5f5f5} td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.failed td{background:#ffebee} .badge{color:#fff;border-radius:4px;padding:1px 6px;font-weight:bold;font-size:13px}
pre.diff{background:#fafafa;border:1px solid #ddd;padding:8px;overflow-x:auto;font-size:13px;line-height:1.35}
pre.diff .del{background:#ffcdd2;display:block} pre.diff .add{background:#c8e6c9;display:block} pre.diff .same{display:block;color:#555}
.why{border-left:6px solid #c62828;background:#ffebee;padding:6px 12px;margin:12px 0} .why ul{margin:4px 0}
.meta{color:#555;font-size:14px} .svgwrap{overflow-x:auto} code{font-size:13px} ul.diffs li{margin:2px 0}
"#;

/// Renders the run as one self-contained HTML page: an inline SVG of the ladder (one box per
/// rung coloured by outcome — pass green, fail red, error orange, skipped grey — under the
/// verdict), then host and binaries with pin match, each rung's assertions (expected vs observed),
/// the network state before/after of each rung that recorded it (from
/// `evidence_dir/<rung>/netstate-{before,after}.json`, differing lines highlighted), timings,
/// declared differences and relative links to every artifact. Never fails.
pub fn render_html(result: &RunResult, evidence_dir: &Path) -> String {
    let v = &result.verdict;
    let mut rungs: Vec<&RungResult> = result.rungs.iter().collect();
    rungs.sort_by_key(|r| r.name);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:"><title>netprobe: {code}</title><style>{CSS}</style></head><body>"#,
        code = escape(v.code.as_str())
    );
    let _ = write!(
        s,
        r#"<h1>netprobe verdict: <span id="verdict">{code}</span></h1><div class="svgwrap">{svg}</div><p><strong>{summary}</strong></p>"#,
        code = escape(v.code.as_str()),
        svg = ladder_svg(result),
        summary = escape(&v.summary)
    );
    if let Some(reason) = &v.reason {
        let _ = write!(s, "<p>Reason: {}</p>", escape(reason));
    }
    if let Some(c) = first_broken_rung(result).and_then(|c| result.rung(c)) {
        let _ = write!(
            s,
            r#"<div class="why"><strong>Why {} broke:</strong><ul>"#,
            escape(c.name.as_str())
        );
        if let Some(e) = &c.error {
            let _ = write!(s, "<li>error: {}</li>", escape(e));
        }
        for a in c
            .assertions
            .iter()
            .filter(|a| !a.passed && a.role == "pass")
        {
            let _ = write!(
                s,
                "<li><code>{}</code>: expected <strong>{}</strong>, observed <strong>{}</strong> — {}</li>",
                escape(&a.id),
                escape(&a.expected),
                escape(&a.observed),
                link(&format!("{}/{}", c.name, a.subject))
            );
        }
        s.push_str("</ul></div>");
    }
    if !v.rests_on.is_empty() {
        let r: Vec<String> = v
            .rests_on
            .iter()
            .map(|x| format!("<code>{}</code>", escape(x)))
            .collect();
        let _ = write!(s, "<p>Rests on: {}</p>", r.join(", "));
    }
    let _ = write!(
        s,
        r#"<p class="meta">netprobe {tv} · started {st} · finished {fi} · {ms} ms · <code>{cmd}</code> · numbers from {res}</p>"#,
        tv = escape(&result.tool_version),
        st = escape(&result.started_at),
        fi = escape(&result.finished_at),
        ms = result.duration_ms,
        cmd = escape(&result.command.join(" ")),
        res = link(RESULT_FILE)
    );

    s.push_str(r#"<h2 id="declared-differences">Declared differences</h2>"#);
    if result.declared_differences.is_empty() {
        s.push_str("<p>None.</p>");
    } else {
        s.push_str(r#"<ul class="diffs">"#);
        for d in &result.declared_differences {
            let _ = write!(s, "<li>{}</li>", escape(d));
        }
        s.push_str("</ul>");
    }

    // Host.
    let h = &result.host;
    let _ = write!(
        s,
        r#"<h2 id="host">Host and binaries</h2><p>Kernel <code>{}</code> ({}), <code>{}</code>, cgroup {}, OS {}.</p>"#,
        escape(&h.kernel_release),
        escape(&h.machine),
        escape(&h.kernel_version),
        escape(&h.cgroup),
        escape(h.os.as_deref().unwrap_or("unknown"))
    );
    s.push_str("<table><tr><th>binary</th><th>path</th><th>version</th><th>bytes</th><th>sha256</th><th>pinned</th><th>pin match</th></tr>");
    for (name, b) in [("criu", &h.criu), ("runtime", &h.runtime)] {
        let Some(b) = b else {
            let _ = write!(
                s,
                r#"<tr><td>{name}</td><td colspan="6">not used</td></tr>"#
            );
            continue;
        };
        let pin = result.pins.iter().find(|p| p.name == name);
        let (pinned, matched, cls) = match pin {
            Some(p) => (
                format!(
                    "{}{}{}",
                    escape(&p.pinned_version),
                    p.pinned_sha256
                        .as_deref()
                        .map(|x| format!(" <code>{}</code>", escape(short(x))))
                        .unwrap_or_default(),
                    p.pinned_bytes
                        .map(|x| format!(" {x} bytes"))
                        .unwrap_or_default()
                ),
                if p.matches {
                    badge(Status::Pass).replace(">pass<", ">yes<")
                } else {
                    badge(Status::Fail).replace(">FAIL<", ">NO<")
                },
                if p.matches { "" } else { r#" class="failed""# },
            ),
            None => ("no pin".into(), "–".into(), ""),
        };
        let _ = write!(
            s,
            r#"<tr{cls}><td>{name}</td><td><code>{}</code></td><td>{}</td><td class="num">{}</td><td><code title="{}">{}</code></td><td>{pinned}</td><td>{matched}</td></tr>"#,
            escape(&b.path),
            escape(&b.version),
            b.bytes,
            escape(&b.sha256),
            escape(short(&b.sha256)),
        );
    }
    s.push_str("</table>");

    // Rungs.
    s.push_str(r#"<h2 id="rungs">Rungs</h2>"#);
    for r in &rungs {
        let _ = write!(
            s,
            r#"<h3 id="rung-{id}">{name} {badge} <span class="meta">{ms} ms — {summary}</span></h3>"#,
            id = escape(r.name.as_str()),
            name = escape(r.name.as_str()),
            badge = badge(r.status),
            ms = r.duration_ms,
            summary = escape(&r.summary)
        );
        if let Some(e) = &r.error {
            let _ = write!(s, "<p><strong>Error:</strong> {}</p>", escape(e));
        }
        if r.assertions.is_empty() {
            s.push_str("<p>No assertions evaluated.</p>");
        } else {
            s.push_str("<table><tr><th>assertion</th><th>role</th><th>expected</th><th>observed</th><th>result</th><th>subject</th></tr>");
            for a in &r.assertions {
                let _ = write!(
                    s,
                    r#"<tr{cls}><td><code>{id}</code><br>{desc}</td><td>{role}</td><td>{exp}</td><td>{obs}</td><td>{res}</td><td>{subj}</td></tr>"#,
                    cls = if a.passed { "" } else { r#" class="failed""# },
                    id = escape(&a.id),
                    desc = escape(&a.description),
                    role = escape(&a.role),
                    exp = escape(&a.expected),
                    obs = escape(&a.observed),
                    res = if a.passed {
                        badge(Status::Pass)
                    } else {
                        badge(Status::Fail)
                    },
                    subj = link(&format!("{}/{}", r.name, a.subject)),
                );
            }
            s.push_str("</table>");
        }
        if let Some(d) = netstate_diff(evidence_dir, r.name) {
            let _ = write!(
                s,
                "<p>Network state {} → {}: ",
                link(&d.before_path),
                link(&d.after_path)
            );
            if let Some(why) = &d.unreadable {
                let _ = write!(s, "unreadable ({}).</p>", escape(why));
            } else if !d.differs() {
                s.push_str("identical.</p>");
            } else {
                s.push_str(r#"<strong>differs</strong> (red: before only, green: after only).</p><pre class="diff">"#);
                for (k, l) in &d.lines {
                    let (cls, p) = match k {
                        LineKind::Same => ("same", ' '),
                        LineKind::Removed => ("del", '-'),
                        LineKind::Added => ("add", '+'),
                    };
                    let _ = write!(s, r#"<span class="{cls}">{p}{}</span>"#, escape(l));
                }
                s.push_str("</pre>");
            }
        }
        if !r.facts.is_empty() {
            s.push_str("<details><summary>Facts</summary><table>");
            for (k, v) in &r.facts {
                let _ = write!(
                    s,
                    "<tr><th>{}</th><td><code>{}</code></td></tr>",
                    escape(k),
                    escape(&v.to_string())
                );
            }
            s.push_str("</table></details>");
        }
    }

    // Timings.
    let _ = write!(
        s,
        r#"<h2 id="timings">Timings</h2><p class="meta">Milliseconds, monotonic clock, from {}.</p><table><tr><th>rung</th><th>step</th><th>ms</th></tr>"#,
        link(RESULT_FILE)
    );
    for r in &rungs {
        let _ = write!(
            s,
            r#"<tr><td>{}</td><td>whole rung</td><td class="num">{}</td></tr>"#,
            escape(r.name.as_str()),
            r.duration_ms
        );
        for (k, ms) in &r.timings_ms {
            let _ = write!(
                s,
                r#"<tr><td>{}</td><td>{}</td><td class="num">{}</td></tr>"#,
                escape(r.name.as_str()),
                escape(k),
                ms
            );
        }
    }
    let _ = write!(
        s,
        r#"<tr><th>run</th><th>whole run</th><td class="num">{}</td></tr></table>"#,
        result.duration_ms
    );

    // Artifacts.
    s.push_str(r#"<h2 id="artifacts">Artifacts</h2>"#);
    let all = all_artifacts(result);
    if all.is_empty() {
        s.push_str("<p>None recorded.</p>");
    } else {
        s.push_str("<table><tr><th>path</th><th>bytes</th><th>sha256</th></tr>");
        for a in all {
            let _ = write!(
                s,
                r#"<tr><td>{}</td><td class="num">{}</td><td><code title="{}">{}</code></td></tr>"#,
                link(&a.path),
                a.bytes,
                escape(&a.sha256),
                escape(short(&a.sha256))
            );
        }
        s.push_str("</table>");
    }
    s.push_str("</body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup() {
        assert_eq!(
            escape(r#"<script>"x"&'y'</script>"#),
            "&lt;script&gt;&quot;x&quot;&amp;&#39;y&#39;&lt;/script&gt;"
        );
    }

    #[test]
    fn wrap_cuts_with_ellipsis() {
        let w = wrap("aaa bbb ccc ddd eee", 7, 2);
        assert_eq!(w, vec!["aaa bbb".to_string(), "ccc dd…".to_string()]);
    }
}
