//! `netprobe diff`: a runc run against another runtime's run.

use crate::fixtures;

use netprobe::evidence::result::{RESULT_FILE, RungName, Status, VerdictCode};
use netprobe::report::diff::{diff_paths, diff_results, render_diff};

#[test]
fn diff_runc_to_other_runtime() {
    let _baton = crate::common::baton(module_path!());
    let (old, new) = (fixtures::runc_result(), fixtures::other_runtime_result());
    let d = diff_results(&old, &new);
    assert!(d.verdict_changed());
    assert_eq!(d.old_verdict, VerdictCode::RuntimeEmptyNs);
    assert_eq!(d.new_verdict, VerdictCode::RuntimePreservesNetns);
    assert_eq!(d.rungs.len(), 1);
    assert_eq!(d.rungs[0].rung, RungName::Oci);
    assert_eq!(
        (d.rungs[0].old, d.rungs[0].new),
        (Some(Status::Fail), Some(Status::Pass))
    );
    let ids: Vec<&str> = d.assertions.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "empty-ns-signature",
            "lo-up-after-restore",
            "netns-image-present"
        ]
    );

    let text = render_diff(&d);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[2],
        "verdict CHANGED: runtime-empty-ns -> runtime-preserves-netns — the finding no longer holds for crun 1.14.4 with CRIU 4.1.1: lo is UP after restore"
    );
    // Verdict first, then rungs, then assertions, binaries, timings.
    let pos = |s: &str| {
        text.find(s)
            .unwrap_or_else(|| panic!("missing {s:?} in\n{text}"))
    };
    assert!(pos("verdict CHANGED") < pos("rungs:"));
    assert!(pos("rungs:") < pos("assertions:"));
    assert!(pos("assertions:") < pos("host, binaries and pins:"));
    assert!(pos("host, binaries and pins:") < pos("timings ("));
    assert!(text.contains("  oci             FAIL -> pass  (lo UP with 127.0.0.1/8 after restore; netns-1.img present)"));
    assert!(text.contains("  oci/lo-up-after-restore: lo DOWN, no address (FAIL) -> lo UP, 127.0.0.1/8 (pass)  (expected lo UP, 127.0.0.1/8)"));
    assert!(text.contains("  runtime version: 1.1.5+ds1 -> 1.14.4\n"));
    assert!(text.contains(&format!(
        "  runtime sha256: {} -> {}\n",
        fixtures::RUNC_SHA,
        fixtures::CRUN_SHA
    )));
    assert!(text.contains("  runtime path: /usr/sbin/runc -> /usr/bin/crun\n"));
    assert!(text.contains("  pin runtime matches: true -> false\n"));
    assert!(
        !text.contains("criu version"),
        "unchanged CRIU is not listed"
    );
    assert!(text.contains("  + runc/CRIU differ from the pins\n"));
    assert!(
        text.contains("  run                              7102 ->     6512  x0.92\n"),
        "{text}"
    );
    assert!(text.contains("  oci/checkpoint                    803 ->      702  x0.87\n"));
    assert!(text.contains("  external-netns                   2633 ->     2401  x0.91\n"));
    // Each declared difference once: the added one above (`+`), the others in the new run's list.
    assert!(
        text.contains("declared differences (new run), besides the 1 added above:\n"),
        "{text}"
    );
    assert_eq!(
        text.matches("runc/CRIU differ from the pins").count(),
        1,
        "{text}"
    );
    assert_eq!(
        text.matches("the holder's memory and CPU are outside the container cgroup")
            .count(),
        1,
        "{text}"
    );
}

#[test]
fn same_result_has_nothing_to_report() {
    let _baton = crate::common::baton(module_path!());
    let r = fixtures::runc_result();
    let d = diff_results(&r, &r);
    assert!(!d.verdict_changed());
    assert!(d.rungs.is_empty() && d.assertions.is_empty() && d.facts.is_empty());
    let text = render_diff(&d);
    assert!(text.contains("verdict unchanged: runtime-empty-ns\n"));
    assert!(text.contains("  no status changed\n"));
    assert!(text.contains("  none moved\n"));
    assert!(
        text.contains("  kernel/getlink                      3 ->        3  x1.00\n"),
        "{text}"
    );
}

#[test]
fn zero_old_duration_has_no_ratio() {
    let _baton = crate::common::baton(module_path!());
    let mut old = fixtures::runc_result();
    old.rungs[0].duration_ms = 0;
    let d = diff_results(&old, &fixtures::runc_result());
    let t = d
        .timings
        .iter()
        .find(|t| t.rung == Some(RungName::Kernel) && t.step.is_none())
        .unwrap();
    assert_eq!(t.ratio(), None);
    assert!(render_diff(&d).contains("0 ->       14  n/a (old 0 ms)"));
}

#[test]
fn diff_paths_accepts_folders_and_files() {
    let _baton = crate::common::baton(module_path!());
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    fixtures::write_evidence(a.path(), &fixtures::runc_result());
    fixtures::write_evidence(b.path(), &fixtures::other_runtime_result());
    let d = diff_paths(a.path(), &b.path().join(RESULT_FILE)).unwrap();
    assert!(d.verdict_changed());
    let text = render_diff(&d);
    assert!(text.starts_with(&format!(
        "old: {}\nnew: {}\n",
        a.path().join(RESULT_FILE).display(),
        b.path().join(RESULT_FILE).display()
    )));
    assert!(diff_paths(&a.path().join("missing"), b.path()).is_err());
    // A matrix folder is named as one, with the ways to compare matrices.
    let m = tempfile::tempdir().unwrap();
    std::fs::write(m.path().join("matrix.json"), b"{}").unwrap();
    let e = diff_paths(m.path(), b.path()).unwrap_err().to_string();
    assert!(
        e.contains("a matrix folder (matrix.json)") && e.contains("--baseline"),
        "{e}"
    );
}

/// Two runs of part of the ladder (a matrix's cell folders: oci and external-netns only) are
/// both inconclusive whatever their rungs say: a rung whose status moved is the change (the
/// CLI exits 1 on `changed()`), said on the verdict line.
#[test]
fn a_rung_that_moved_under_an_unchanged_verdict_is_a_change() {
    let _baton = crate::common::baton(module_path!());
    let (mut old, mut new) = (fixtures::runc_result(), fixtures::other_runtime_result());
    old.verdict.code = VerdictCode::Inconclusive;
    new.verdict.code = VerdictCode::Inconclusive;
    let d = diff_results(&old, &new);
    assert!(!d.verdict_changed() && d.changed());
    let text = render_diff(&d);
    assert!(
        text.contains("verdict unchanged: inconclusive — but 1 rung status(es) CHANGED (below); a run of part of the ladder"),
        "{text}"
    );
    let same = diff_results(&old, &old);
    assert!(!same.changed());
}
