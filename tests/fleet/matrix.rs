//! `netprobe matrix` for real (root): runc 1.4.3 and crun 1.28 × CRIU 4.2.1 and 4.3 — the kernel
//! rung once, the criu rung once per CRIU, the runtime rungs per pair, side by side; matrix.json
//! valid against its schema, the table, `verify` on the matrix folder (and on a tampered one),
//! `--expect` per runtime, `--baseline` (exit 1 on a verdict change).

use crate::common::matrix_support;
use matrix_support::*;
use netprobe::evidence::result::VerdictCode;
use std::path::Path;
use std::process::Command;

#[test]
fn two_by_two_matrix_runs_verifies_and_compares() {
    let _baton = crate::common::baton(module_path!());
    require(&[RUNC, RUNC_1_3, CRUN, CRIU_4_2, CRIU_4_3]);
    let tmp = tempfile::tempdir().unwrap();
    let mx = tmp.path().join("mx");
    let o = netprobe(&[
        "matrix",
        "--runtime",
        RUNC,
        "--runtime",
        CRUN,
        "--criu",
        CRIU_4_2,
        "--criu",
        CRIU_4_3,
        "--expect",
        "runc=runtime-empty-ns",
        "--expect",
        &format!("{CRUN}=runtime-preserves-netns"),
        "--evidence",
        mx.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let m = load(&mx);
    // Kernel once, criu per CRIU, runtime rungs per pair.
    let phases: Vec<&str> = m.parts.iter().map(|p| p.phases.as_str()).collect();
    assert_eq!(phases.iter().filter(|p| **p == "kernel").count(), 1);
    assert_eq!(phases.iter().filter(|p| **p == "criu").count(), 2);
    assert_eq!(
        phases
            .iter()
            .filter(|p| **p == "oci,external-netns")
            .count(),
        4
    );
    for p in &m.parts {
        assert_eq!(p.exit_code, Some(0), "{p:?}");
        assert!(mx.join(&p.folder).join("netprobe-result.json").is_file());
    }
    assert_eq!(m.cells.len(), 4);
    for c in &m.cells {
        let want = if c.runtime == CRUN {
            VerdictCode::RuntimePreservesNetns
        } else {
            VerdictCode::RuntimeEmptyNs
        };
        assert_eq!(c.verdict, want, "{c:?}");
        assert_eq!(c.expected, Some(want));
        assert!(
            c.rests_on
                .iter()
                .any(|a| a.starts_with(&format!("{}:oci/", c.folder))),
            "{c:?}"
        );
        assert!(c.rests_on.iter().any(|a| a.starts_with("kernel:kernel/")));
    }
    // Pin match per binary: only CRIU 4.3 matches its pin.
    let matching: Vec<&str> = m
        .binaries
        .iter()
        .filter(|b| b.pin_matches)
        .map(|b| b.path.as_str())
        .collect();
    assert_eq!(matching, vec![CRIU_4_3]);
    let md = std::fs::read_to_string(mx.join("matrix.md")).unwrap();
    assert!(
        md.contains("| runtime \\ CRIU | CRIU 4.2.1 | CRIU 4.3 |"),
        "{md}"
    );
    assert!(
        md.contains("| crun 1.28 | `runtime-preserves-netns` | `runtime-preserves-netns` |"),
        "{md}"
    );
    assert!(md.contains("| runc 1.4.3+ds1 | `runtime-empty-ns` | `runtime-empty-ns` |"));
    assert!(String::from_utf8_lossy(&o.stdout).contains("| crun 1.28 |"));

    // verify on the matrix folder reproduces every part and cell …
    let v = netprobe(&["verify", mx.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(0), "{}", text(&v));
    // … and notices an edited part file.
    let copy = tmp.path().join("mx-copy");
    let cp = Command::new("cp")
        .args(["-a", mx.to_str().unwrap(), copy.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(cp.success());
    let cell = &m.cells.iter().find(|c| c.runtime == CRUN).unwrap().folder;
    let log = copy.join(cell).join("oci/dump.log");
    let t = std::fs::read_to_string(&log).unwrap();
    std::fs::write(&log, t.replace("LD: Got link", "LD: lost link")).unwrap();
    let v = netprobe(&["verify", copy.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(1), "{}", text(&v));
    assert!(String::from_utf8_lossy(&v.stdout).contains("MISMATCH"));

    // --baseline: a baseline whose crun × CRIU 4.3 cell said runtime-empty-ns → exit 1.
    let base = tmp.path().join("baseline");
    std::fs::create_dir_all(&base).unwrap();
    let mut b = m.clone();
    for c in b.cells.iter_mut().filter(|c| c.runtime == CRUN) {
        c.verdict = VerdictCode::RuntimeEmptyNs;
    }
    std::fs::write(
        base.join("matrix.json"),
        serde_json::to_vec_pretty(&b).unwrap(),
    )
    .unwrap();
    let mx2 = tmp.path().join("mx2");
    let o = matrix_against(CRUN, &base, &mx2);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(
            "changed against the baseline: crun 1.28 × CRIU 4.3: runtime-empty-ns -> runtime-preserves-netns"
        ),
        "{}",
        text(&o)
    );
    let m2 = load(&mx2);
    assert_eq!(m2.cells[0].baseline, Some(VerdictCode::RuntimeEmptyNs));
    // Against itself the same matrix is unchanged; an expectation for all that misses → exit 1.
    let mx3 = tmp.path().join("mx3");
    let o = netprobe(&[
        "matrix",
        "--runtime",
        CRUN,
        "--criu",
        CRIU_4_3,
        "--baseline",
        mx.to_str().unwrap(),
        "--expect",
        "runtime-empty-ns",
        "--evidence",
        mx3.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("unexpected: crun 1.28 × CRIU 4.3"), "{out}");
    assert!(!out.contains("changed against the baseline"), "{out}");

    // A new runtime version beside its predecessor: a baseline that ran runc 1.3.6 (its cell's
    // label differs) is compared with by runtime kind and CRIU, and said so; unchanged → exit 0.
    let base_v = tmp.path().join("baseline-v");
    let o = netprobe(&[
        "matrix",
        "--runtime",
        RUNC_1_3,
        "--criu",
        CRIU_4_3,
        "--evidence",
        base_v.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let old_label = load(&base_v).cells[0].label.clone();
    let mx4 = tmp.path().join("mx4");
    let o = matrix_against(RUNC, &base_v, &mx4);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(": 1 of 1 cell(s) compared")
            && out.contains(&format!(
                "compared with the baseline's {old_label}: runc 1.4.3+ds1 × CRIU 4.3"
            )),
        "{out}"
    );
    let md = std::fs::read_to_string(mx4.join("matrix.md")).unwrap();
    assert!(
        md.contains(": 1 of 1 cell(s) compared")
            && md.contains(&format!("(baseline cell {old_label})")),
        "{md}"
    );
    let m4 = load(&mx4);
    assert_eq!(m4.cells[0].baseline, Some(VerdictCode::RuntimeEmptyNs));
    assert_eq!(
        m4.cells[0].baseline_label.as_deref(),
        Some(old_label.as_str())
    );
    // verify matches the cells against the baseline again: as recorded; a baseline verdict
    // edited afterwards is a mismatch (exit 1); a baseline gone is said not re-checked.
    let v = netprobe(&["verify", mx4.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&v.stdout);
    assert_eq!(v.status.code(), Some(0), "{}", text(&v));
    assert!(
        out.contains("baseline: every cell's comparison matched again"),
        "{out}"
    );
    let mut edited = load(&base_v);
    edited.cells[0].verdict = VerdictCode::RuntimePreservesNetns;
    std::fs::write(
        base_v.join("matrix.json"),
        serde_json::to_vec_pretty(&edited).unwrap(),
    )
    .unwrap();
    let v = netprobe(&["verify", mx4.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&v.stdout);
    assert_eq!(v.status.code(), Some(1), "{}", text(&v));
    assert!(
        out.contains(&format!(
            "MISMATCH cell runc 1.4.3+ds1 × CRIU 4.3: matrix.json records baseline runtime-empty-ns (cell {old_label}), the baseline {}'s matrix.json gives runtime-preserves-netns (cell {old_label})",
            base_v.display()
        )),
        "{out}"
    );
    std::fs::rename(&base_v, tmp.path().join("baseline-v-moved")).unwrap();
    let v = netprobe(&["verify", mx4.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&v.stdout);
    assert_eq!(v.status.code(), Some(0), "{}", text(&v));
    assert!(
        out.contains("note: the comparison with the baseline was not re-checked ("),
        "{out}"
    );
    let r = netprobe(&["report", mx4.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    let md = std::fs::read_to_string(mx4.join("report.md")).unwrap();
    assert!(
        md.contains("Verified when this report was written")
            && md.contains("The comparison with the baseline was not re-checked ("),
        "{md}"
    );
    std::fs::remove_file(mx4.join("report.md")).unwrap();
    // A baseline with no cell of this runtime kind (mx3: crun only): the cell is not compared,
    // which is said, and the matrix does not pass (exit 1).
    let mx5 = tmp.path().join("mx5");
    let o = matrix_against(RUNC, &mx3, &mx5);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !out.contains("NOT VERIFIED")
            && out.contains(": 0 of 1 cell(s) compared")
            && out.contains("not compared with the baseline: runc 1.4.3+ds1 × CRIU 4.3: the baseline has no cell of this label, runtime or runtime kind (its cells: crun 1.28 × CRIU 4.3)"),
        "{out}"
    );
    let md = std::fs::read_to_string(mx5.join("matrix.md")).unwrap();
    assert!(
        md.contains(": 0 of 1 cell(s) compared") && md.contains("(not compared with the baseline)"),
        "{md}"
    );
}

#[test]
fn matrix_bad_input() {
    let _baton = crate::common::baton(module_path!());
    // No runtime: usage (2), before anything runs.
    let tmp = tempfile::tempdir().unwrap();
    let o = netprobe(&[
        "matrix",
        "--criu",
        CRIU_4_3,
        "--evidence",
        tmp.path().join("x").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("at least one --runtime"));
    // Unknown verdict in --expect.
    let o = netprobe(&[
        "matrix",
        "--runtime",
        CRUN,
        "--criu",
        CRIU_4_3,
        "--expect",
        "crun=maybe",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // An expectation for a runtime that is not in the matrix (a typo would never be checked),
    // from --expect or from --config's [expect]: usage (2), naming it and the runtimes.
    let cfg = tmp.path().join("m.toml");
    let z = tmp.path().join("z");
    std::fs::write(&cfg, "[expect]\nrunc = \"runtime-empty-ns\"\n").unwrap();
    for extra in [
        vec!["--expect", "runc=runtime-empty-ns"],
        vec!["--config", cfg.to_str().unwrap()],
    ] {
        let mut a = vec!["matrix", "--runtime", CRUN, "--criu", CRIU_4_3];
        a.extend(extra);
        a.extend(["--evidence", z.to_str().unwrap()]);
        let o = netprobe(&a);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("\"runc\" names no runtime of this matrix") && err.contains(CRUN),
            "{err}"
        );
        assert!(!z.exists(), "nothing run");
    }
    // The same binary twice: usage (2), naming it, before anything runs.
    let o = netprobe(&[
        "matrix",
        "--runtime",
        CRUN,
        "--runtime",
        CRUN,
        "--criu",
        CRIU_4_3,
        "--evidence",
        z.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!("--runtime {CRUN} is given twice")),
        "{}",
        text(&o)
    );
    assert!(!z.exists(), "nothing run");
    // A runtime that is no runtime: its part is refused (exit 3); the cell says which part gave
    // no result and why, not the ladder's "add it to --phases".
    let bad = tmp.path().join("bad");
    let o = netprobe(&[
        "matrix",
        "--runtime",
        "/bin/true",
        "--criu",
        CRIU_4_3,
        "--evidence",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let cell = &load(&bad).cells[0];
    assert!(
        cell.summary.contains("gave no result")
            && cell
                .summary
                .contains("until every part it rests on gives a result")
            && !cell.summary.contains("--phases"),
        "{cell:?}"
    );
    // A baseline folder without matrix.json.
    let o = netprobe(&[
        "matrix",
        "--runtime",
        CRUN,
        "--criu",
        CRIU_4_3,
        "--baseline",
        tmp.path().to_str().unwrap(),
        "--evidence",
        tmp.path().join("y").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("matrix.json"));
    // Expectation parsing and precedence.
    use netprobe::matrix::cli::parse_expect;
    let e = parse_expect("runc=runtime-empty-ns").unwrap();
    assert_eq!(e.runtime.as_deref(), Some("runc"));
    assert_eq!(parse_expect("*=inconclusive").unwrap().runtime, None);
    assert_eq!(parse_expect("kernel-netlink").unwrap().runtime, None);
    assert!(parse_expect("x=nope").is_err());
}

const RUNC_1_3: &str = "/opt/runc-1.3.6/sbin/runc";

/// Copies the matrix folder `from` to `to` (`cp -a`).
fn copy_folder(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .args(["-a", from.to_str().unwrap(), to.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success());
}

/// `netprobe verify` of a matrix folder: exit 1 with a MISMATCH line containing every needle.
fn assert_mismatch(dir: &Path, needles: &[&str]) {
    let v = netprobe(&["verify", dir.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(1), "{}", text(&v));
    let out = String::from_utf8_lossy(&v.stdout);
    assert!(
        out.lines()
            .any(|l| l.contains("MISMATCH") && needles.iter().all(|n| l.contains(n))),
        "no MISMATCH with {needles:?}: {}",
        text(&v)
    );
}

/// Two runc versions × one CRIU: the cell folders swapped, matrix.md edited, a log deleted or
/// edited, an extra file: each fails `verify` naming it; a baseline that fails `verify` makes
/// `netprobe matrix --baseline` say NOT VERIFIED with its mismatches, still run, and exit 1.
#[test]
fn matrix_verify_checks_cell_binaries_and_its_own_files() {
    let _baton = crate::common::baton(module_path!());
    require(&[RUNC, RUNC_1_3, CRIU_4_3]);
    let tmp = tempfile::tempdir().unwrap();
    let mx = tmp.path().join("mx");
    let o = netprobe(&[
        "matrix",
        "--runtime",
        RUNC,
        "--runtime",
        RUNC_1_3,
        "--criu",
        CRIU_4_3,
        "--evidence",
        mx.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = netprobe(&["verify", mx.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(0), "{}", text(&v));
    let m = load(&mx);
    assert!(m.parts.iter().all(|p| p.log_sha256.is_some()), "{m:?}");
    let (a, b) = (&m.cells[0], &m.cells[1]);

    // The two cell folders swapped: each cell ran the other runc.
    let sw = tmp.path().join("swapped");
    copy_folder(&mx, &sw);
    std::fs::rename(sw.join(&a.folder), sw.join("x")).unwrap();
    std::fs::rename(sw.join(&b.folder), sw.join(&a.folder)).unwrap();
    std::fs::rename(sw.join("x"), sw.join(&b.folder)).unwrap();
    assert_mismatch(
        &sw,
        &[
            &format!("cell {}", a.label),
            RUNC_1_3,
            "matrix.json records",
            RUNC,
        ],
    );

    // The matrix's own files.
    let ed = tmp.path().join("md");
    copy_folder(&mx, &ed);
    let md = std::fs::read_to_string(ed.join("matrix.md")).unwrap();
    std::fs::write(
        ed.join("matrix.md"),
        md.replace("runtime-empty-ns", "runtime-preserves-netns"),
    )
    .unwrap();
    assert_mismatch(&ed, &["matrix.md differs"]);
    let lg = tmp.path().join("logs");
    copy_folder(&mx, &lg);
    std::fs::remove_file(lg.join("logs/kernel.txt")).unwrap();
    assert_mismatch(&lg, &["logs/kernel.txt cannot be read"]);
    let rel = format!("logs/{}.txt", a.folder);
    std::fs::write(lg.join(&rel), "edited\n").unwrap();
    assert_mismatch(&lg, &[&format!("{rel} changed")]);
    let ex = tmp.path().join("extra");
    copy_folder(&mx, &ex);
    std::fs::write(ex.join("extra.txt"), "x").unwrap();
    assert_mismatch(&ex, &["extra.txt is in the matrix folder"]);

    // A baseline whose first cell verdict was edited: NOT VERIFIED above the table, exit 1.
    let base = tmp.path().join("base");
    copy_folder(&mx, &base);
    let mut bm = m.clone();
    bm.cells[0].verdict = VerdictCode::RuntimePreservesNetns;
    std::fs::write(
        base.join("matrix.json"),
        serde_json::to_vec_pretty(&bm).unwrap(),
    )
    .unwrap();
    let mx2 = tmp.path().join("mx2");
    let o = matrix_against(RUNC, &base, &mx2);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let nv = out
        .find("NOT VERIFIED: the baseline")
        .expect("NOT VERIFIED");
    assert!(nv < out.find("| runtime \\ CRIU").unwrap(), "{out}");
    assert!(
        out.contains(&format!(
            "MISMATCH cell {}: matrix.json says runtime-preserves-netns, its parts give runtime-empty-ns",
            a.label
        )),
        "{out}"
    );
    assert!(
        load(&mx2)
            .cells
            .iter()
            .all(|c| c.verdict == VerdictCode::RuntimeEmptyNs)
    );
}
