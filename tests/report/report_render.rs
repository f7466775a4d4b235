//! Markdown and HTML reports over realistic evidence directories (no root, no network).

use crate::fixtures;

use netprobe::evidence::result::{Artifact, RESULT_FILE, RungName, Status};
use netprobe::report::html::render_html;
use netprobe::report::markdown::render_markdown;
use netprobe::report::{Format, ReportError, load_result, netstate_diff, write_report};

fn runc_dir() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    fixtures::write_evidence(t.path(), &fixtures::runc_result());
    t
}

#[test]
fn markdown_names_verdict_rungs_assertions_and_links() {
    let _baton = crate::common::baton(module_path!());
    let t = runc_dir();
    let r = fixtures::runc_result();
    let md = render_markdown(&r, t.path());
    assert!(
        md.starts_with("## netprobe verdict: `runtime-empty-ns`"),
        "{md}"
    );
    assert!(md.contains("First broken rung: **oci**"));
    assert!(md.contains("Why `oci` broke:\n\n- `lo-up-after-restore`: expected **lo UP, 127.0.0.1/8**, observed **lo DOWN, no address** — [oci/netstate-after.json](./oci/netstate-after.json)\n"), "{md}");
    for rung in RungName::ALL {
        assert!(
            md.contains(&format!("| `{rung}` |")),
            "ladder row for {rung}"
        );
        assert!(
            md.contains(&format!("### Rung `{rung}`")),
            "section for {rung}"
        );
    }
    assert!(md.contains(
        "| `oci` | ❌ **FAIL** | lo DOWN, no address after restore; no netns image | 2311 |"
    ));
    // Expected vs observed, pass/fail, subject linked under the rung folder.
    assert!(md.contains("| lo UP, 127.0.0.1/8 | lo DOWN, no address | ❌ **fail** | [oci/netstate-after.json](./oci/netstate-after.json) |"), "{md}");
    // Netstate diff of oci: removed UP flag and 127.0.0.1, in a diff block.
    assert!(md.contains("```diff\n"));
    assert!(
        md.contains("| ❌ **fail** | [oci/images/](./oci/images/) |"),
        "a folder subject is linked"
    );
    assert!(md.contains("-        \"UP\","), "{md}");
    assert!(md.contains("-      \"local\": \"127.0.0.1\","));
    assert!(md.contains("+      \"operstate\": \"DOWN\","));
    assert!(md.contains("Network state [criu/netstate-before.json](./criu/netstate-before.json) → [criu/netstate-after.json](./criu/netstate-after.json): identical."));
    // Pins, declared differences, timings, artifacts.
    assert!(md.contains("| runtime | `/usr/sbin/runc` | 1.1.5+ds1 | 9875216 |"));
    assert!(md.contains("✅ yes"));
    assert!(md.contains("- the holder's memory and CPU are outside the container cgroup"));
    assert!(md.contains("| `oci` | checkpoint | 803 |"));
    assert!(md.contains("- [host.json](./host.json) (1422 bytes"));
    assert!(md.contains("- [oci/dump.log](./oci/dump.log) (91002 bytes"));
    assert_eq!(
        md.matches("[oci/config.json](./oci/config.json) (").count(),
        1,
        "artifacts are deduplicated"
    );
}

#[test]
fn html_has_svg_ladder_coloured_by_outcome_and_sections() {
    let _baton = crate::common::baton(module_path!());
    let t = runc_dir();
    let r = fixtures::runc_result();
    let html = render_html(&r, t.path());
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains(r#"<span id="verdict">runtime-empty-ns</span>"#));
    assert!(html.contains("<svg id=\"ladder\""));
    assert!(html.contains("Verdict: runtime-empty-ns"));
    for (rung, st, colour) in [
        ("kernel", "pass", "#2e7d32"),
        ("criu", "pass", "#2e7d32"),
        ("oci", "fail", "#c62828"),
        ("external-netns", "pass", "#2e7d32"),
    ] {
        let g = format!(r#"<g class="rung" data-rung="{rung}" data-status="{st}"><rect "#);
        let at = html.find(&g).unwrap_or_else(|| panic!("box for {rung}"));
        assert!(
            html[at..at + 200].contains(&format!(r#"fill="{colour}""#)),
            "{rung} colour"
        );
    }
    assert!(html.contains("▲ first broken rung"));
    assert!(html.contains("<strong>Why oci broke:</strong><ul><li><code>lo-up-after-restore</code>: expected <strong>lo UP, 127.0.0.1/8</strong>, observed <strong>lo DOWN, no address</strong>"));
    // Self-contained: no external asset, no script.
    assert!(!html.contains("<script"));
    assert!(!html.contains("src=\"http"));
    assert!(!html.contains("href=\"http"));
    assert!(!html.contains("<link"));
    // Diff highlighting: removed lines of oci's netstate in class del, added in class add.
    assert!(
        html.contains(
            r#"<span class="del">-      &quot;local&quot;: &quot;127.0.0.1&quot;,</span>"#
        ),
        "{html}"
    );
    assert!(
        html.contains(
            r#"<span class="add">+      &quot;operstate&quot;: &quot;DOWN&quot;,</span>"#
        )
    );
    assert!(html.contains(r#"<tr class="failed"><td><code>lo-up-after-restore</code>"#));
    assert!(html.contains(r#"<a href="./oci/dump.log"><code>oci/dump.log</code></a>"#));
    assert!(html.contains(r#"<a href="./host.json"><code>host.json</code></a>"#));
    assert!(html.contains("Declared differences"));
    assert!(html.contains("the network namespace is harness-owned"));
    assert!(html.contains(r#"<td>oci</td><td>restore</td><td class="num">1207</td>"#));
}

#[test]
fn error_and_skipped_rungs_are_orange_and_grey() {
    let _baton = crate::common::baton(module_path!());
    let t = tempfile::tempdir().unwrap();
    let mut r = fixtures::runc_result();
    r.rungs[2].status = Status::Error;
    r.rungs[2].error = Some("checkpoint: runc exited 1: criu failed: type NOTIFY errno 0".into());
    r.rungs[3].status = Status::Skipped;
    fixtures::write_evidence(t.path(), &r);
    let html = render_html(&r, t.path());
    assert!(html.contains(r##"data-rung="oci" data-status="error"><rect x="522" y="118" width="224" height="170" rx="10" fill="#ef6c00""##), "{html}");
    assert!(html.contains(r##"data-rung="external-netns" data-status="skipped"><rect x="778" y="118" width="224" height="170" rx="10" fill="#757575""##));
    assert!(html.contains("checkpoint: runc exited 1"));
}

#[test]
fn html_and_markdown_escape_hostile_text() {
    let _baton = crate::common::baton(module_path!());
    let t = tempfile::tempdir().unwrap();
    let mut r = fixtures::runc_result();
    r.verdict.summary = "<script>alert(1)</script>".into();
    r.rungs[2].summary = "lo DOWN <img src=x onerror=alert(2)>".into();
    r.rungs[2].assertions[0].observed = "\"><svg onload=alert(3)>|`x`".into();
    r.declared_differences.push("<iframe src=//evil>".into());
    r.artifacts.push(Artifact {
        path: "oci/\"><script>alert(4)</script>.log".into(),
        bytes: 1,
        sha256: "<b>".into(),
        content: None,
    });
    r.artifacts.push(Artifact {
        path: "javascript:alert(5)".into(),
        bytes: 1,
        sha256: "0".into(),
        content: None,
    });
    r.artifacts.push(Artifact {
        path: "../../etc/passwd".into(),
        bytes: 1,
        sha256: "0".into(),
        content: None,
    });
    r.artifacts.push(Artifact {
        path: "/etc/shadow".into(),
        bytes: 1,
        sha256: "0".into(),
        content: None,
    });
    fixtures::write_evidence(t.path(), &r);
    std::fs::write(
        t.path().join("oci/netstate-after.json"),
        "not json </pre><script>alert(6)</script>\n",
    )
    .unwrap();
    let html = render_html(&r, t.path());
    for bad in [
        "<script",
        "<img",
        "<iframe",
        "<svg onload",
        "<b>",
        "href=\"javascript",
        "href=\"/",
        "href=\"../",
    ] {
        assert!(!html.contains(bad), "HTML contains {bad:?}");
    }
    assert_eq!(html.matches("<svg").count(), 1, "only the ladder SVG");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains(r#"href="./javascript%3Aalert%285%29""#));
    assert!(html.contains(
        "<code>../../etc/passwd</code> <em>(not inside the evidence directory; not linked)</em>"
    ));
    assert!(html.contains(
        r#"<span class="add">+not json &lt;/pre&gt;&lt;script&gt;alert(6)&lt;/script&gt;</span>"#
    ));

    let md = render_markdown(&r, t.path());
    // Inside a fenced code block text is literal; outside it no markup may pass.
    assert!(md.contains("```diff\n"));
    assert!(
        md.contains("\n+not json </pre><script>alert(6)</script>\n```\n"),
        "{md}"
    );
    let outside: String = md
        .split("```")
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, p)| p)
        .collect();
    for bad in [
        "<script",
        "<img",
        "<iframe",
        "<svg",
        "](javascript",
        "](/",
        "](../",
    ] {
        assert!(!outside.contains(bad), "Markdown contains {bad:?}");
    }
    // A pipe in log content cannot break the assertion table.
    assert!(md.contains(r#"&gt;&lt;svg onload=alert(3)&gt;\|\`x\`"#));
}

#[test]
fn write_report_writes_atomically_and_overwrites() {
    let _baton = crate::common::baton(module_path!());
    let t = runc_dir();
    let p = write_report(t.path(), Format::Markdown).unwrap();
    assert_eq!(p, t.path().join("report.md"));
    let first = std::fs::read_to_string(&p).unwrap();
    assert!(first.contains("runtime-empty-ns"));
    let p2 = write_report(t.path(), Format::Html).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        // World-readable like the rest of the evidence.
        let mode = std::fs::metadata(&p2).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644, "report mode {mode:o}");
    }
    assert_eq!(p2, t.path().join("report.html"));
    // Overwrite is allowed (derived data); no temporary file is left behind.
    write_report(t.path(), Format::Markdown).unwrap();
    let left: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(".report-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // A result file path works as well; the report goes next to it.
    let p3 = write_report(&t.path().join(RESULT_FILE), Format::Html).unwrap();
    assert_eq!(p3, t.path().join("report.html"));
    assert_eq!(Format::parse("md"), Some(Format::Markdown));
    assert_eq!(Format::parse("html"), Some(Format::Html));
    assert_eq!(Format::parse("pdf"), None);
}

#[test]
fn load_result_errors_name_the_input() {
    let _baton = crate::common::baton(module_path!());
    let t = tempfile::tempdir().unwrap();
    let missing = t.path().join("nope");
    let e = load_result(&missing).unwrap_err();
    assert!(matches!(e, ReportError::NotFound { .. }));
    assert!(e.to_string().contains("nope") && e.to_string().contains("evidence directory"));

    let e = load_result(t.path()).unwrap_err();
    assert!(matches!(e, ReportError::Read { .. }), "{e}");
    assert!(e.to_string().contains(RESULT_FILE));

    std::fs::write(
        t.path().join(RESULT_FILE),
        "{\"schema_version\": 1, \"tool\": 3}",
    )
    .unwrap();
    let e = load_result(t.path()).unwrap_err();
    assert!(matches!(e, ReportError::Parse { .. }), "{e}");
    assert!(e.to_string().contains("netprobe verify"));

    std::fs::write(t.path().join(RESULT_FILE), "{\"schema_version\": 99}").unwrap();
    let e = load_result(t.path()).unwrap_err();
    assert!(
        matches!(e, ReportError::SchemaVersion { found: 99, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("tool_version"));

    // A copy of the result under another name is not reported apart from its folder.
    let copy = t.path().join("old-result.json");
    std::fs::copy(t.path().join(RESULT_FILE), &copy).unwrap();
    let e = load_result(&copy).unwrap_err();
    assert!(matches!(e, ReportError::NotAResultFile { .. }), "{e}");
    assert!(
        e.to_string().contains("old-result.json") && e.to_string().contains("cp -a"),
        "{e}"
    );
}

#[test]
fn netstate_diff_is_absent_without_files_and_reports_unreadable() {
    let _baton = crate::common::baton(module_path!());
    let t = runc_dir();
    assert!(netstate_diff(t.path(), RungName::Kernel).is_none());
    let d = netstate_diff(t.path(), RungName::Oci).unwrap();
    assert!(d.differs());
    assert_eq!(d.after_path, "oci/netstate-after.json");
    std::fs::remove_file(t.path().join("criu/netstate-after.json")).unwrap();
    let d = netstate_diff(t.path(), RungName::Criu).unwrap();
    assert!(d.unreadable.unwrap().contains("criu/netstate-after.json"));
    let md = render_markdown(&fixtures::runc_result(), t.path());
    assert!(md.contains("unreadable (criu/netstate-after.json:"), "{md}");
}

#[test]
fn other_runtime_report_says_preserves() {
    let _baton = crate::common::baton(module_path!());
    let t = tempfile::tempdir().unwrap();
    let r = fixtures::other_runtime_result();
    fixtures::write_evidence(t.path(), &r);
    let md = render_markdown(&r, t.path());
    assert!(md.contains("`runtime-preserves-netns`"));
    assert!(md.contains("No rung failed."));
    assert!(md.contains("| runtime | `/usr/bin/crun` | 1.14.4 |"));
    assert!(md.contains("❌ **no**"), "pin mismatch shown");
    let html = render_html(&r, t.path());
    assert!(!html.contains("first broken rung</text>"));
    assert!(
        html.contains(r##"fill="#2e7d32"/><text x="28" y="44""##),
        "green verdict box"
    );
}

/// Every field goes through the template engine's HTML auto-escaping, in text and in attribute
/// values: `<script>`, `&` and both quote kinds from the result come out as entities.
#[test]
fn html_template_escapes_script_ampersand_and_quotes_in_every_context() {
    let _baton = crate::common::baton(module_path!());
    let t = tempfile::tempdir().unwrap();
    let mut r = fixtures::runc_result();
    r.tool_version = r#"0.1 & <script>alert('v')</script> "q""#.into();
    r.rungs[2].assertions[0].id = r#"id"><script>x</script>"#.into();
    r.rungs[2].timings_ms.insert(r#"step & "1" 'x'"#.into(), 7);
    if let Some(b) = r.host.runtime.as_mut() {
        b.sha256 = r#"abc" onmouseover="alert(1)' x='&"#.into();
    }
    fixtures::write_evidence(t.path(), &r);
    let html = render_html(&r, t.path());
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains(r#"onmouseover="alert"#), "{html}");
    assert!(
        html.contains("0.1 &amp; &lt;script&gt;alert(&#39;v&#39;)&lt;/script&gt; &quot;q&quot;")
    );
    assert!(html.contains(r#"<code>id&quot;&gt;&lt;script&gt;x&lt;/script&gt;</code>"#));
    assert!(html.contains(r#"<td>step &amp; &quot;1&quot; &#39;x&#39;</td>"#));
    assert!(
        html.contains(r#"<code title="abc&quot; onmouseover=&quot;alert(1)&#39; x=&#39;&amp;">"#)
    );
}

/// `--expect` in the recorded command is shown beside the verdict, met or NOT MET; no line
/// without it.
#[test]
fn the_recorded_expectation_is_shown_beside_the_verdict() {
    let _baton = crate::common::baton(module_path!());
    let t = runc_dir();
    let mut r = fixtures::runc_result();
    let md = render_markdown(&r, t.path());
    assert!(!md.contains("Expected by the recorded command"), "{md}");
    r.command
        .extend(["--expect".into(), "runtime-preserves-netns".into()]);
    let md = render_markdown(&r, t.path());
    assert!(
        md.contains("Expected by the recorded command (`--expect`): `runtime-preserves-netns` — **NOT MET** (`netprobe run` exited 1)."),
        "{md}"
    );
    let html = render_html(&r, t.path());
    assert!(html.contains("<strong>NOT MET</strong>"), "{html}");
    r.command.push("--expect=runtime-empty-ns".into());
    let md = render_markdown(&r, t.path());
    assert!(md.contains("`runtime-empty-ns` — met."), "{md}");
    // The line says what it rests on: the recorded command, which verify does not re-derive.
    assert!(
        md.contains("read from the result's `command`, which `netprobe verify` does not re-derive"),
        "{md}"
    );
}
