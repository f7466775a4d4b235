//! `netprobe report MATRIX_DIR --format html|md` on a real matrix (root): runc 1.4.3 and the
//! control runtime crun 1.28 × CRIU 4.3 — the table (runtimes × CRIUs) shows the control beside
//! the runc run, each cell's verdict, deciding assertions and a link to its result, the binaries
//! with pin match; and hostile labels are escaped in both formats, also in the `matrix.md`
//! that `netprobe matrix` writes (the same template).

use crate::common;
use common::cli::netprobe;
use netprobe::evidence::result::VerdictCode;
use netprobe::matrix::model::{MatrixBinary, MatrixCell, MatrixPart, MatrixResult, load_matrix};
use netprobe::matrix::table::write_matrix;
use netprobe::report::{Format, matrix_report};

const RUNC: &str = "/opt/runc-1.4.3/sbin/runc";
const CRUN: &str = "/opt/crun-1.28/bin/crun";
const CRIU_4_3: &str = "/opt/criu-4.3/sbin/criu";

#[test]
fn matrix_folder_report_shows_control_beside_runc() {
    let _baton = crate::common::baton(module_path!());
    for b in [RUNC, CRUN, CRIU_4_3] {
        assert!(
            std::path::Path::new(b).is_file(),
            "{b} missing: run sudo bash host/setup.sh"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let mx = tmp.path().join("mx");
    let mxs = mx.to_str().unwrap();
    let o = netprobe(&[
        "matrix",
        "--runtime",
        RUNC,
        "--runtime",
        CRUN,
        "--criu",
        CRIU_4_3,
        "--evidence",
        mxs,
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let o = netprobe(&["report", mxs, "--format", "html"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        mx.join("report.html").to_str().unwrap()
    );
    let html = std::fs::read_to_string(mx.join("report.html")).unwrap();
    assert!(
        html.contains("<tr><th>runtime \\ CRIU</th><th>CRIU 4.3</th></tr>"),
        "{html}"
    );
    let runc_row = html
        .lines()
        .find(|l| l.starts_with("<tr><th>runc 1.4.3"))
        .expect("a runc row");
    assert!(
        runc_row.contains("data-verdict=\"runtime-empty-ns\""),
        "{runc_row}"
    );
    assert!(
        runc_row.contains("<a href=\"./cell-1-runc-1.4.3-ds1__1-criu-4.3/netprobe-result.json\">"),
        "{runc_row}"
    );
    let crun_row = html
        .lines()
        .find(|l| l.starts_with("<tr><th>crun 1.28</th>"))
        .expect("a crun row beside it");
    assert!(
        crun_row.contains("data-verdict=\"runtime-preserves-netns\""),
        "{crun_row}"
    );
    assert!(
        html.contains("<code>oci/lo-down-after-restore</code>"),
        "deciding assertions: {html}"
    );
    assert!(html.contains("<code>oci/link-dumped-after-netns</code>"));
    assert!(html.contains(
        "<tr><td>runtime</td><td><code>/opt/crun-1.28/bin/crun</code></td><td>1.28</td>"
    ));
    assert!(
        html.contains("<td>runc 1.5.2</td><td><strong class=\"bad\">no</strong></td>"),
        "pin match: {html}"
    );
    assert!(html.contains("<td>CRIU 4.3</td><td>yes</td>"), "{html}");
    // crun is not compared with the runc pin: host/pins.toml pins no crun.
    let crun_bin = html
        .lines()
        .find(|l| l.starts_with("<tr><td>runtime</td><td><code>/opt/crun-1.28/bin/crun</code>"))
        .expect("crun's binaries row");
    assert!(
        crun_bin.contains("<td>no pin</td><td>–</td>") && !crun_bin.contains("runc 1.5.2"),
        "{crun_bin}"
    );
    // The report written into the folder is derived: the folder still verifies.
    let v = netprobe(&["verify", mxs]);
    assert_eq!(v.status.code(), Some(0), "{}", common::cli::text(&v));

    let o = netprobe(&["report", mxs, "--format", "md"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(mx.join("report.md")).unwrap();
    assert!(
        md.contains("| runtime \\ CRIU | CRIU 4.3 |\n|---|---|\n"),
        "{md}"
    );
    assert!(
        md.contains("| runc 1.4.3+ds1 | `runtime-empty-ns` |\n"),
        "{md}"
    );
    assert!(
        md.contains("| crun 1.28 | `runtime-preserves-netns` |\n"),
        "{md}"
    );
    assert!(
        md.contains("| runtime | `/opt/crun-1.28/bin/crun` | 1.28 |"),
        "{md}"
    );
    assert!(md.contains("| runc 1.5.2 | **no** |"), "{md}");
    assert!(
        md.lines()
            .any(|l| l.starts_with("| runtime | `/opt/crun-1.28/bin/crun` |")
                && l.ends_with("| no pin | – |")),
        "{md}"
    );
    assert!(
        !mx.join("netprobe-result.json").exists(),
        "no other file written"
    );
    assert!(
        md.contains("Verified when this report was written: every part and every cell verdict reproduce (`netprobe verify`: "),
        "report verifies the folder first: {md}"
    );

    // One part's artifact edited: the report says NOT VERIFIED, names the part, exits 1.
    let edited = find_file(&mx, "netstate-after.json").expect("a part with a netstate capture");
    let mut s = std::fs::read_to_string(&edited).unwrap();
    s.push('\n');
    std::fs::write(&edited, s).unwrap();
    for (format, file) in [("md", "report.md"), ("html", "report.html")] {
        let o = netprobe(&["report", mxs, "--format", format]);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("NOT VERIFIED"), "{err}");
        let text = std::fs::read_to_string(mx.join(file)).unwrap();
        assert!(text.contains("NOT VERIFIED"), "{text}");
        assert!(
            !text.contains("Verified when this report was written"),
            "{text}"
        );
        assert!(text.contains("MISMATCH part "), "{text}");
    }
}

/// The first file named `name` under `dir` (depth first, sorted).
fn find_file(dir: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if let Some(f) = find_file(&p, name) {
                return Some(f);
            }
        } else if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
    }
    None
}

/// A matrix record with the fixed header these tests share (schema 1, one second, two jobs)
/// and nothing else; each test sets its binaries, parts, cells and baseline.
fn header() -> MatrixResult {
    MatrixResult {
        schema_version: 1,
        tool_version: "0.1.0".into(),
        started_at: "2026-12-01T00:00:00Z".into(),
        finished_at: "2026-12-01T00:00:01Z".into(),
        duration_ms: 1000,
        jobs: 2,
        binaries: vec![],
        parts: vec![],
        cells: vec![],
        baseline: None,
    }
}

#[test]
fn matrix_report_escapes_hostile_labels() {
    let _baton = crate::common::baton(module_path!());
    let evil = "<script>alert(1)</script>|x";
    let m = MatrixResult {
        binaries: vec![MatrixBinary {
            role: "runtime".into(),
            path: evil.into(),
            version: Some(evil.into()),
            sha256: None,
            pin: "runc 1.5.2".into(),
            pin_matches: false,
            error: Some(evil.into()),
        }],
        parts: vec![],
        cells: vec![MatrixCell {
            runtime: evil.into(),
            criu: "/opt/criu".into(),
            label: format!("{evil} × CRIU 4.3"),
            folder: "../outside".into(),
            verdict: VerdictCode::RuntimeEmptyNs,
            summary: evil.into(),
            rests_on: vec![],
            expected: Some(VerdictCode::RuntimePreservesNetns),
            baseline: None,
            baseline_label: None,
        }],
        ..header()
    };
    let html = matrix_report(&m, Format::Html);
    assert!(!html.contains("<script>"), "{html}");
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;/script&gt;|x"),
        "{html}"
    );
    assert!(
        html.contains("✗ expected <code>runtime-preserves-netns</code>"),
        "{html}"
    );
    assert!(
        !html.contains("href=\"./../outside"),
        "no link outside: {html}"
    );
    let md = matrix_report(&m, Format::Markdown);
    assert!(!md.contains("<script>"), "{md}");
    assert!(
        md.contains("&lt;script&gt;alert(1)&lt;/script&gt;\\|x"),
        "{md}"
    );
}

/// The `|` that separate cells in a Markdown table line (a `\|` is text, not a separator).
fn separators(line: &str) -> usize {
    let (mut n, mut escaped) = (0, false);
    for c in line.chars() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '|' {
            n += 1;
        }
    }
    n
}

#[test]
fn matrix_md_written_by_netprobe_matrix_escapes_names_and_errors() {
    let _baton = crate::common::baton(module_path!());
    // A runtime name, a CRIU name and errors with table, emphasis, HTML and line breaks in them.
    let runtime = "runc|1 *bold*\n<b>x</b>";
    let criu = "CRIU 4.3 <img src=x>|_y_";
    let error = "refused: <script>alert(1)</script>\n| not | a | row |";
    let m = MatrixResult {
        binaries: vec![MatrixBinary {
            role: "runtime".into(),
            path: "/opt/r|<u>".into(),
            version: None,
            sha256: None,
            pin: "runc 1.5.2".into(),
            pin_matches: false,
            error: Some(error.into()),
        }],
        parts: vec![MatrixPart {
            folder: "cell-1-r__1-c".into(),
            phases: "oci,external-netns".into(),
            criu: "/opt/c".into(),
            runtime: Some("/opt/r|<u>".into()),
            exit_code: Some(3),
            error: Some(error.into()),
            duration_ms: 7,
            log_sha256: None,
        }],
        cells: vec![MatrixCell {
            runtime: "/opt/r|<u>".into(),
            criu: "/opt/c".into(),
            label: format!("{runtime} × {criu}"),
            folder: "cell-1-r__1-c".into(),
            verdict: VerdictCode::Inconclusive,
            summary: error.into(),
            rests_on: vec![],
            expected: None,
            baseline: None,
            baseline_label: None,
        }],
        ..header()
    };
    let tmp = tempfile::tempdir().unwrap();
    write_matrix(tmp.path(), &m).unwrap();
    let md = std::fs::read_to_string(tmp.path().join("matrix.md")).unwrap();
    // One renderer: exactly the Markdown matrix report.
    assert_eq!(md, matrix_report(&m, Format::Markdown));
    // No raw HTML, no unescaped emphasis, no line break out of a cell.
    for raw in ["<b>", "<img", "<script>", "<u>", "*bold*", "_y_"] {
        assert!(!md.contains(raw), "{raw} unescaped in:\n{md}");
    }
    assert!(
        md.contains("| runc\\|1 \\*bold\\* &lt;b&gt;x&lt;/b&gt; | `inconclusive` |\n"),
        "{md}"
    );
    assert!(
        md.contains("| runtime \\ CRIU | CRIU 4.3 &lt;img src=x&gt;\\|\\_y\\_ |\n"),
        "{md}"
    );
    assert!(
        md.contains("refused: &lt;script&gt;alert(1)&lt;/script&gt; \\| not \\| a \\| row \\|"),
        "{md}"
    );
    // The refused part wrote no result: nothing links to one.
    assert!(!md.contains("cell-1-r__1-c/netprobe-result.json"), "{md}");
    assert!(md.contains("no result file: see its part below"), "{md}");
    // Every table line keeps its column count: the verdict table 2 columns, binaries 6, parts 5.
    let table_lines: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    let counts: Vec<usize> = table_lines.iter().map(|l| separators(l)).collect();
    assert_eq!(counts, vec![3, 3, 3, 7, 7, 7, 6, 6, 6], "{md}");
    // matrix.json unchanged by the hostile text: it reads back equal.
    assert_eq!(load_matrix(tmp.path()).unwrap(), m);
}

/// A matrix whose one part has no result (refused, timed out): the report written after a
/// verify that found no problem names that part and why, and does not claim every part.
#[test]
fn a_part_without_a_result_is_named_as_not_verified() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let m = MatrixResult {
        binaries: vec![],
        parts: vec![MatrixPart {
            folder: "cell-1-runc__1-criu".into(),
            phases: "oci,external-netns".into(),
            criu: "/opt/criu".into(),
            runtime: Some("/opt/runc".into()),
            exit_code: None,
            error: Some("timed out after 600 s\nlast lines …".into()),
            duration_ms: 600_000,
            log_sha256: None,
        }],
        ..header()
    };
    std::fs::write(
        tmp.path().join("matrix.json"),
        serde_json::to_vec_pretty(&m).unwrap(),
    )
    .unwrap();
    let (p, reproduced) =
        netprobe::report::write_report_verified(tmp.path(), Format::Markdown, |_, _| {
            Some(Ok(netprobe::report::Verified::Matrix {
                problems: vec![],
                parts: 0,
            }))
        })
        .unwrap();
    assert_eq!(reproduced, Some(true));
    let md = std::fs::read_to_string(p).unwrap();
    assert!(
        md.contains("the 0 part folders with a result and every cell verdict reproduce")
            && md.contains(
                "- part cell-1-runc\\_\\_1-criu (no netprobe-result.json: matrix.json records: timed out after 600 s)"
            ),
        "{md}"
    );
    assert!(!md.contains("every part and every cell"), "{md}");
}
