//! `netprobe verify` of a matrix folder: every part folder with a result is verified as a run
//! folder and ran the binaries `matrix.json` records for it; every cell's verdict is recomputed
//! from its parts; no part lasted longer than the matrix, nor a part's run longer than the
//! part (one monotonic clock, nested spans); and the matrix's own files are what it wrote — `matrix.md` re-rendered from
//! `matrix.json`, each `logs/<part>.txt` against its recorded sha256, and nothing else in the
//! folder but the parts and the reports `netprobe report` derives.

use super::model::{MATRIX_FILE, MATRIX_MD, MatrixBinary, MatrixPart, MatrixResult, load_matrix};
use crate::evidence::result::BinaryFacts;
use std::path::Path;

/// `netprobe verify` of the matrix folder `dir`. Returns the problems found (empty:
/// reproduced), each naming the part, cell or file and both values, and the number of part
/// folders verified as run folders.
///
/// Errors: [`super::MatrixLoadError`], `matrix.json` missing or invalid (naming the file).
pub fn verify_matrix(dir: &Path) -> Result<(Vec<String>, usize), super::MatrixLoadError> {
    let m = load_matrix(dir)?;
    let mut problems = Vec::new();
    let mut checked = 0;
    for p in &m.parts {
        let folder = dir.join(&p.folder);
        if !folder.join(crate::evidence::result::RESULT_FILE).is_file() {
            if p.error.is_none() {
                problems.push(format!(
                    "part {} has no result but recorded no error",
                    p.folder
                ));
            }
            continue;
        }
        checked += 1;
        if let Ok(r) = crate::evidence::read_result(&folder) {
            problems.extend(part_duration_mismatch(p, r.duration_ms));
        }
        match crate::probe::verify::verify(&folder) {
            Ok(o) if o.reproduced() => {}
            Ok(o) => problems.push(format!("part {}: {}", p.folder, o.mismatches.join("; "))),
            Err(e) => problems.push(format!("part {}: {e}", p.folder)),
        }
        problems.extend(part_binary_mismatches(dir, &m, p));
    }
    for c in &m.cells {
        let crit = c.folder.trim_start_matches("cell-");
        let criu_folder = crit
            .split_once("__")
            .map(|(_, k)| format!("criu-{k}"))
            .unwrap_or_default();
        let folders = ["kernel".to_string(), criu_folder, c.folder.clone()];
        let again = super::cell_verdict(dir, &m.parts, &folders);
        if again.verdict != c.verdict {
            problems.push(format!(
                "cell {}: matrix.json says {}, its parts give {}",
                c.label,
                c.verdict.as_str(),
                again.verdict.as_str()
            ));
        }
    }
    problems.extend(matrix_duration_mismatches(&m));
    problems.extend(own_file_mismatches(dir, &m));
    if let BaselineCheck::Rechecked(p) = verify_baseline(&m) {
        problems.extend(p);
    }
    Ok((problems, checked))
}

/// The matrix's `duration_ms` against its parts': the matrix reads its monotonic clock before it
/// starts the first part and after the last one ended, and each part's `duration_ms` is read
/// inside that span on the same clock, both rounded down — so no part lasts longer than the
/// matrix, whatever ran side by side. One problem per part that does, naming both numbers.
fn matrix_duration_mismatches(m: &MatrixResult) -> Vec<String> {
    m.parts
        .iter()
        .filter(|p| p.duration_ms > m.duration_ms)
        .map(|p| {
            format!(
                "duration_ms: recorded {} ms for the matrix, yet its part {} recorded {} ms (a part runs inside the matrix's span, on the same monotonic clock)",
                m.duration_ms, p.folder, p.duration_ms
            )
        })
        .collect()
}

/// Part `p`'s `duration_ms` (the matrix's clock around starting and waiting for the run) against
/// `run_ms`, the `duration_ms` its own result records (the run's clock, read after it started
/// and before it exited; the same monotonic clock, both rounded down): the run cannot have
/// lasted longer than the part. `None` when it holds.
fn part_duration_mismatch(p: &MatrixPart, run_ms: u64) -> Option<String> {
    (run_ms > p.duration_ms).then(|| {
        format!(
            "part {}: matrix.json records {} ms for it, yet its run recorded {run_ms} ms (the run is timed inside the part, on the same monotonic clock)",
            p.folder, p.duration_ms
        )
    })
}

/// True when `dir` is a matrix folder that holds no `matrix.json` because the matrix did not
/// finish: its `interrupted.txt` begins with [`super::INTERRUPTED_NOTE_HEAD`] (a signal), or
/// its `incomplete.txt` with the matrix's note head (`netprobe matrix (pid P) `: killed, or
/// still running). `verify` and `report` then say it is a matrix without `matrix.json`, not a
/// run without `netprobe-result.json`.
pub fn is_unfinished_matrix(dir: &Path) -> bool {
    use crate::evidence::dir::{INCOMPLETE_FILE, INTERRUPTED_FILE, note_first_line};
    let starts = |f: &str, head: &str| {
        let p = dir.join(f);
        p.is_file() && note_first_line(&p).starts_with(head)
    };
    !dir.join(MATRIX_FILE).exists()
        && (starts(INTERRUPTED_FILE, super::INTERRUPTED_NOTE_HEAD)
            || starts(INCOMPLETE_FILE, "netprobe matrix (pid "))
}

/// The parts of matrix `m` (folder `dir`) that `verify` cannot verify as run folders, one
/// sentence each naming the part and why: no `netprobe-result.json` (with the first line of
/// the error `matrix.json` records for it: refused, timed out, interrupted).
pub fn unverified_parts(dir: &Path, m: &MatrixResult) -> Vec<String> {
    m.parts
        .iter()
        .filter(|p| {
            !dir.join(&p.folder)
                .join(crate::evidence::result::RESULT_FILE)
                .is_file()
        })
        .map(|p| {
            let why = p
                .error
                .as_deref()
                .and_then(|e| e.lines().next())
                .map_or("matrix.json records no error for it".to_string(), |e| {
                    format!("matrix.json records: {e}")
                });
            format!(
                "part {} (no {}: {why})",
                p.folder,
                crate::evidence::result::RESULT_FILE
            )
        })
        .collect()
}

/// What [`verify_baseline`] could check of the comparison with `--baseline` a matrix records.
#[derive(Debug, PartialEq, Eq)]
pub enum BaselineCheck {
    /// The matrix was run without `--baseline`.
    NoBaseline,
    /// The baseline folder's `matrix.json` was read and each cell's recorded `baseline` and
    /// `baseline_label` compared with what matching it again gives: the differences (empty:
    /// they agree).
    Rechecked(Vec<String>),
    /// The baseline's `matrix.json` (at its path as `matrix.json` records it: absolute, or
    /// relative to the folder netprobe ran in) could not be read: why.
    NotRechecked(String),
}

/// Re-derives the comparison of matrix `m` with its recorded baseline folder: each cell
/// matched again against the baseline's `matrix.json` ([`super::table::match_baseline`]), its
/// `baseline` verdict and `baseline_label` held to what `m` records.
pub fn verify_baseline(m: &MatrixResult) -> BaselineCheck {
    let Some(b) = &m.baseline else {
        return BaselineCheck::NoBaseline;
    };
    let base = match load_matrix(Path::new(b)) {
        Ok(base) => base,
        Err(e) => return BaselineCheck::NotRechecked(e.to_string()),
    };
    let mut again = m.cells.clone();
    for c in &mut again {
        c.baseline = None;
        c.baseline_label = None;
    }
    super::table::match_baseline(&mut again, &base);
    let shown = |v: Option<crate::evidence::result::VerdictCode>, l: &Option<String>| match (v, l) {
        (None, _) => "no baseline cell".to_string(),
        (Some(v), None) => format!("{} (the cell of the same label)", v.as_str()),
        (Some(v), Some(l)) => format!("{} (cell {l})", v.as_str()),
    };
    let problems = m
        .cells
        .iter()
        .zip(&again)
        .filter(|(c, a)| c.baseline != a.baseline || c.baseline_label != a.baseline_label)
        .map(|(c, a)| {
            format!(
                "cell {}: {MATRIX_FILE} records baseline {}, the baseline {b}'s {MATRIX_FILE} gives {}",
                c.label,
                shown(c.baseline, &c.baseline_label),
                shown(a.baseline, &a.baseline_label)
            )
        })
        .collect();
    BaselineCheck::Rechecked(problems)
}

/// The runtimes, then the CRIUs, of `m.binaries`, in the order the matrix numbered them.
fn by_role<'a>(m: &'a MatrixResult, role: &str) -> Vec<&'a MatrixBinary> {
    m.binaries.iter().filter(|b| b.role == role).collect()
}

/// The binary numbered `seg`'s leading `<n>-` among `list`, if `seg` is exactly its folder
/// name part ([`super::slug`]): a folder renamed or swapped with another names another binary.
fn numbered<'a>(list: &[&'a MatrixBinary], seg: &str) -> Option<&'a MatrixBinary> {
    let n: usize = seg.split('-').next()?.parse().ok()?;
    let b = *list.get(n.checked_sub(1)?)?;
    (super::slug(b, n - 1) == seg).then_some(b)
}

/// What part `p` should have run, from its folder name and `matrix.json`: (CRIU, runtime).
/// `Err` names the folder that fits no binary the matrix records.
fn expected_binaries<'a>(
    m: &'a MatrixResult,
    p: &MatrixPart,
) -> Result<(&'a MatrixBinary, Option<&'a MatrixBinary>), super::UnknownPartFolder> {
    let (runtimes, crius) = (by_role(m, "runtime"), by_role(m, "criu"));
    let bad = || super::UnknownPartFolder {
        folder: p.folder.clone(),
    };
    if p.folder == "kernel" {
        return crius.first().map(|c| (*c, None)).ok_or_else(bad);
    }
    if let Some(seg) = p.folder.strip_prefix("criu-") {
        return numbered(&crius, seg).map(|c| (c, None)).ok_or_else(bad);
    }
    let (r, c) = p
        .folder
        .strip_prefix("cell-")
        .and_then(|s| s.split_once("__"))
        .ok_or_else(bad)?;
    match (numbered(&runtimes, r), numbered(&crius, c)) {
        (Some(r), Some(c)) => Ok((c, Some(r))),
        _ => Err(bad()),
    }
}

/// `path version (sha256 …)` of a binary as matrix.json records it.
fn shown_matrix(b: &MatrixBinary) -> String {
    format!(
        "{} {} (sha256 {})",
        b.path,
        b.version.as_deref().unwrap_or("(not inspected)"),
        b.sha256.as_deref().unwrap_or("none")
    )
}

fn shown_run(f: Option<&BinaryFacts>) -> String {
    f.map_or_else(
        || "none".to_string(),
        |f| format!("{} {} (sha256 {})", f.path, f.version, f.sha256),
    )
}

/// The part's recorded CRIU and runtime (its result's `host`, which its own verify holds to
/// `host.json`) against what matrix.json records for that part: path, version and sha256.
fn part_binary_mismatches(dir: &Path, m: &MatrixResult, p: &MatrixPart) -> Vec<String> {
    let (criu, runtime) = match expected_binaries(m, p) {
        Ok(x) => x,
        Err(e) => return vec![e.to_string()],
    };
    let host = match crate::evidence::read_result(&dir.join(&p.folder)) {
        Ok(r) => r.host,
        Err(e) => return vec![format!("part {}: {e}", p.folder)],
    };
    let whose = m.cells.iter().find(|c| c.folder == p.folder).map_or_else(
        || format!("part {}", p.folder),
        |c| format!("cell {} ({})", c.label, p.folder),
    );
    let same = |want: &MatrixBinary, got: Option<&BinaryFacts>| {
        got.is_some_and(|f| {
            f.path == want.path
                && want.version.as_deref() == Some(f.version.as_str())
                && want.sha256.as_deref() == Some(f.sha256.as_str())
        })
    };
    let mut out = Vec::new();
    for (role, want, got) in [
        ("CRIU", Some(criu), host.criu.as_ref()),
        ("runtime", runtime, host.runtime.as_ref()),
    ] {
        let Some(want) = want else { continue };
        if !same(want, got) {
            out.push(format!(
                "{whose}: its {role} is {}, matrix.json records {} for it",
                shown_run(got),
                shown_matrix(want)
            ));
        }
    }
    out
}

/// The matrix's own files: `matrix.md` is the report re-rendered from `matrix.json`, every
/// part's `logs/<folder>.txt` has its recorded sha256, and the folder holds nothing else but
/// the part folders and `report.md`/`report.html` (derived by `netprobe report`).
fn own_file_mismatches(dir: &Path, m: &MatrixResult) -> Vec<String> {
    let mut out = Vec::new();
    let md = crate::report::matrix_report(m, crate::report::Format::Markdown);
    match crate::evidence::read_recorded_text(&dir.join(MATRIX_MD)) {
        Ok(t) if t == md => {}
        Ok(_) => out.push(format!(
            "{MATRIX_MD} differs from the report netprobe {} renders from {MATRIX_FILE} (written by netprobe {}): it was edited, or comes from another version",
            env!("CARGO_PKG_VERSION"),
            m.tool_version
        )),
        Err(e) => out.push(format!("{MATRIX_MD} cannot be read: {e}")),
    }
    for p in &m.parts {
        let rel = format!("logs/{}.txt", p.folder);
        match (
            crate::evidence::sha256_recorded(&dir.join(&rel)),
            &p.log_sha256,
        ) {
            (Err(e), _) => out.push(format!("{rel} cannot be read: {e}")),
            (Ok(_), None) => out.push(format!(
                "{rel}: {MATRIX_FILE} records no sha256 of it, so its content cannot be checked"
            )),
            (Ok((sha, _)), Some(want)) if sha != *want => {
                out.push(format!("{rel} changed: recorded sha256 {want}, now {sha}"))
            }
            (Ok(_), Some(_)) => {}
        }
    }
    out.extend(unrecorded_entries(dir, m));
    out
}

/// Entries of the matrix folder (and of its `logs/`) that `matrix.json` does not account for,
/// and recorded folders that are not folders.
fn unrecorded_entries(dir: &Path, m: &MatrixResult) -> Vec<String> {
    let mut out = Vec::new();
    let list = |d: &Path, out: &mut Vec<String>| -> Vec<(String, std::fs::FileType)> {
        match std::fs::read_dir(d) {
            Ok(it) => it
                .filter_map(Result::ok)
                .filter_map(|e| {
                    Some((
                        e.file_name().to_string_lossy().into_owned(),
                        e.file_type().ok()?,
                    ))
                })
                .collect(),
            Err(e) => {
                out.push(format!("cannot list {}: {e}", d.display()));
                Vec::new()
            }
        }
    };
    for (name, ft) in list(dir, &mut out) {
        let part = m.parts.iter().any(|p| p.folder == name);
        let ok = match name.as_str() {
            MATRIX_FILE | MATRIX_MD | "report.md" | "report.html" => ft.is_file(),
            "logs" => ft.is_dir(),
            _ => part && ft.is_dir(),
        };
        if !ok {
            out.push(format!(
                "{name} is in the matrix folder but {MATRIX_FILE} does not record it (or not as that kind of file)"
            ));
        }
    }
    for (name, ft) in list(&dir.join("logs"), &mut out) {
        let part = m.parts.iter().any(|p| format!("{}.txt", p.folder) == name);
        if !(part && ft.is_file()) {
            out.push(format!(
                "logs/{name} is in the matrix folder but {MATRIX_FILE} does not record it"
            ));
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matrix_without_matrix_json_is_told_by_its_note() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let note = |f: &str, t: &str| std::fs::write(d.join(f), t).unwrap();
        assert!(!is_unfinished_matrix(d), "an empty folder");
        // A run's note is not a matrix's.
        note(
            "interrupted.txt",
            "netprobe run was interrupted by SIGINT at …\n",
        );
        assert!(!is_unfinished_matrix(d));
        note(
            "interrupted.txt",
            &format!(
                "{} by SIGINT at …; no matrix.json\n",
                crate::matrix::INTERRUPTED_NOTE_HEAD
            ),
        );
        assert!(is_unfinished_matrix(d));
        let e = load_matrix(d).unwrap_err().to_string();
        assert!(e.contains("is a matrix that was interrupted"), "{e}");
        std::fs::remove_file(d.join("interrupted.txt")).unwrap();
        note(
            "incomplete.txt",
            &format!(
                "{}started at …\n",
                crate::evidence::enclosing::matrix_note_head(7)
            ),
        );
        assert!(is_unfinished_matrix(d));
        let e = load_matrix(d).unwrap_err().to_string();
        assert!(e.contains("is a matrix that did not finish"), "{e}");
        assert!(!e.contains("netprobe-result.json"), "{e}");
    }

    /// A part longer than the matrix, or a run longer than its part, cannot be what the clocks
    /// read (one monotonic clock, the part inside the matrix's span, the run inside the part's):
    /// each is named with both numbers; equal durations hold (rounding down keeps the order).
    #[test]
    fn a_part_longer_than_its_matrix_or_a_run_longer_than_its_part_is_named() {
        let part = |folder: &str, ms: u64| MatrixPart {
            folder: folder.into(),
            phases: "kernel".into(),
            criu: "/opt/criu".into(),
            runtime: None,
            exit_code: Some(0),
            error: None,
            duration_ms: ms,
            log_sha256: None,
        };
        let m = MatrixResult {
            schema_version: super::super::model::MATRIX_SCHEMA_VERSION,
            tool_version: "0.1.0".into(),
            started_at: "2026-12-01T00:00:00Z".into(),
            finished_at: "2026-12-01T00:00:01Z".into(),
            duration_ms: 1000,
            jobs: 2,
            binaries: vec![],
            parts: vec![part("kernel", 1000), part("criu-1", 1001)],
            cells: vec![],
            baseline: None,
        };
        assert_eq!(
            matrix_duration_mismatches(&m),
            [
                "duration_ms: recorded 1000 ms for the matrix, yet its part criu-1 recorded 1001 ms (a part runs inside the matrix's span, on the same monotonic clock)"
            ]
        );
        // The run's own duration (its result's) against its part's.
        assert_eq!(part_duration_mismatch(&part("kernel", 1000), 1000), None);
        let e = part_duration_mismatch(&part("kernel", 999), 1000).unwrap();
        assert!(
            e.starts_with(
                "part kernel: matrix.json records 999 ms for it, yet its run recorded 1000 ms"
            ),
            "{e}"
        );
    }
}
