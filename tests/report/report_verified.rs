//! `netprobe report` runs `netprobe verify` on a run's evidence folder first and says what it
//! found under the verdict: on a real `netprobe run --phases kernel` folder (root, real
//! `unshare`) the page says the evidence reproduces the result, with its counts, and exits 0;
//! after one artifact is edited the page says NOT VERIFIED with the mismatch on that file, in
//! Markdown and HTML, and the command exits 1 (the evidence does not hold).

use crate::common;
use common::cli::netprobe;

#[test]
fn report_shows_whether_the_evidence_reproduces_the_result() {
    let _baton = crate::common::baton(module_path!());
    let t = tempfile::tempdir().unwrap();
    let ev = t.path().join("ev");
    let evs = ev.to_str().unwrap();
    let o = netprobe(&["run", "--phases", "kernel", "--evidence", evs, "--quiet"]);
    assert!(
        ev.join("kernel/netstate-after.json").is_file(),
        "the kernel rung ran: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    let o = netprobe(&["report", evs, "--format", "md"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(ev.join("report.md")).unwrap();
    assert!(
        md.contains("Verified when this report was written: the evidence reproduces this result (`netprobe verify`: "),
        "{md}"
    );
    assert!(!md.contains("NOT VERIFIED"), "{md}");
    assert!(
        md.contains(
            "Recorded but not re-derivable from the files, so not verified:\n- command, started"
        ),
        "every field verify did not check is named: {md}"
    );
    // `verify` takes the result file for its folder, as `report` does.
    let rf = ev.join("netprobe-result.json");
    let o = netprobe(&["verify", rf.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // The reports are derived views, regenerated on each `report` (replaced whole, never
    // evidence): with both written twice the folder still verifies.
    for f in ["md", "html", "md", "html"] {
        let o = netprobe(&["report", evs, "--format", f]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let o = netprobe(&["verify", evs]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );

    // Edit one artifact: its sha256 no longer matches the recorded one.
    let f = ev.join("kernel/netstate-after.json");
    let mut s = std::fs::read_to_string(&f).unwrap();
    s.push('\n');
    std::fs::write(&f, s).unwrap();

    let o = netprobe(&["report", evs, "--format", "md"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("does not reproduce"), "{err}");
    assert!(err.contains("netprobe verify"), "{err}");
    let md = std::fs::read_to_string(ev.join("report.md")).unwrap();
    assert!(
        md.contains("**NOT VERIFIED**: the evidence does not reproduce this result"),
        "{md}"
    );
    assert!(
        !md.contains("Verified when this report was written"),
        "{md}"
    );
    let line = md
        .lines()
        .find(|l| l.starts_with("- MISMATCH ") && l.contains("kernel/netstate-after.json"))
        .unwrap_or_else(|| panic!("a MISMATCH line on the edited file: {md}"));
    assert!(line.contains("sha256"), "{line}");

    let o = netprobe(&["report", evs, "--format", "html"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let html = std::fs::read_to_string(ev.join("report.html")).unwrap();
    assert!(
        html.contains("<div class=\"notverified\"><p><strong>NOT VERIFIED</strong>"),
        "{html}"
    );
    assert!(html.contains("<li>MISMATCH "), "{html}");

    // A result verify refuses to read (another tool's): verify's own exit (2), and the page
    // says it could not be verified.
    let rf = ev.join("netprobe-result.json");
    let text = std::fs::read_to_string(&rf).unwrap();
    std::fs::write(
        &rf,
        text.replacen("\"tool\": \"netprobe\"", "\"tool\": \"other\"", 1),
    )
    .unwrap();
    let v = netprobe(&["verify", evs]);
    assert_eq!(
        v.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&v.stderr)
    );
    let o = netprobe(&["report", evs, "--format", "md"]);
    if o.status.code() != Some(2) {
        panic!(
            "report exit {:?}: {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let md = std::fs::read_to_string(ev.join("report.md")).unwrap();
    assert!(
        md.contains("**NOT VERIFIED**: `netprobe verify` could not run on this folder"),
        "{md}"
    );
}
