//! The matrix's files: `matrix.json` (written atomically, validated) and `matrix.md` (the
//! matrix report, rendered by [`crate::report::matrix_report`] from `templates/matrix.md`, so
//! every name and error in it is escaped) and the baseline comparison; `verify` of a whole
//! matrix folder is [`super::verify`] (re-exported here).

use super::model::{MATRIX_FILE, MATRIX_MD, MatrixCell, MatrixResult, validate_matrix};
use crate::evidence::result::VerdictCode;
use std::path::Path;

fn verdict_str(v: VerdictCode) -> &'static str {
    v.as_str()
}

/// Writes `matrix.json` (after validating it) and `matrix.md` into `dir`, each atomically
/// ([`crate::evidence::replace_atomic`]: a temporary sibling, `fsync`, `rename`, `fsync` of `dir`).
/// `matrix.md` is the Markdown matrix report ([`crate::report::matrix_report`]), the same text
/// `netprobe report DIR --format md` writes: one renderer, auto-escaping.
///
/// Errors: an I/O error, or `InvalidData` naming the schema violations.
pub fn write_matrix(dir: &Path, m: &MatrixResult) -> std::io::Result<()> {
    let v = serde_json::to_value(m).map_err(std::io::Error::other)?;
    if let Err(errs) = validate_matrix(&v) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            errs.join("; "),
        ));
    }
    let text = serde_json::to_string_pretty(&v).map_err(std::io::Error::other)?;
    crate::evidence::replace_atomic(&dir.join(MATRIX_FILE), text.as_bytes())?;
    let md = crate::report::matrix_report(m, crate::report::Format::Markdown);
    crate::evidence::replace_atomic(&dir.join(MATRIX_MD), md.as_bytes())
}

/// Lines saying which cells changed verdict against the baseline (`label: old -> new`, with
/// the baseline cell's label when it differs).
pub fn baseline_changes(m: &MatrixResult) -> Vec<String> {
    m.cells
        .iter()
        .filter(|c| c.changed())
        .map(|c| {
            format!(
                "{}: {} -> {}{}",
                c.label,
                verdict_str(c.baseline.unwrap_or(c.verdict)),
                verdict_str(c.verdict),
                c.baseline_label
                    .as_ref()
                    .map(|l| format!(" (baseline cell {l})"))
                    .unwrap_or_default()
            )
        })
        .collect()
}

/// The runtime half, CRIU half and runtime kind (first word: `runc`, `crun`) of a cell label
/// `<runtime> × <CRIU>`.
fn halves(label: &str) -> (&str, &str, &str) {
    let (rt, criu) = label.split_once(" × ").unwrap_or((label, ""));
    (rt, criu, rt.split(' ').next().unwrap_or(rt))
}

/// Compares each cell with a cell of `baseline` (its verdict into `baseline`): the cell of the
/// same label; else — a new runtime or CRIU version beside its predecessor — the one baseline
/// cell no cell of this matrix has by label that shares, in this order of preference, the
/// runtime kind and the CRIU, the runtime, or the runtime kind (its label into
/// `baseline_label`). Two or more such cells at the first tier that has any are ambiguous:
/// the cell is not compared ([`not_compared`] says why).
pub fn match_baseline(cells: &mut [MatrixCell], baseline: &MatrixResult) {
    let labels: Vec<String> = cells.iter().map(|c| c.label.clone()).collect();
    let free: Vec<&MatrixCell> = baseline
        .cells
        .iter()
        .filter(|b| !labels.contains(&b.label))
        .collect();
    for c in cells.iter_mut() {
        if let Some(b) = baseline.cells.iter().find(|b| b.label == c.label) {
            c.baseline = Some(b.verdict);
            continue;
        }
        if let Some(b) = fallback(&c.label, &free).ok().flatten() {
            c.baseline = Some(b.verdict);
            c.baseline_label = Some(b.label.clone());
        }
    }
}

/// The fallback tiers of [`match_baseline`] for `label` among the unclaimed baseline cells
/// `free`: `Ok(Some)` the one match, `Ok(None)` none, `Err(labels)` an ambiguous tier.
fn fallback<'a>(
    label: &str,
    free: &[&'a MatrixCell],
) -> Result<Option<&'a MatrixCell>, Vec<String>> {
    let (rt, criu, kind) = halves(label);
    let tiers: [&dyn Fn(&str) -> bool; 3] = [
        &|l| halves(l).2 == kind && halves(l).1 == criu,
        &|l| halves(l).0 == rt,
        &|l| halves(l).2 == kind,
    ];
    for tier in tiers {
        let hits: Vec<&&MatrixCell> = free.iter().filter(|b| tier(&b.label)).collect();
        match hits.as_slice() {
            [] => continue,
            [one] => return Ok(Some(one)),
            many => return Err(many.iter().map(|b| b.label.clone()).collect()),
        }
    }
    Ok(None)
}

/// Lines naming each cell of `m` that was not compared with `baseline` and why (none when no
/// baseline was given): a cell whose verdict against the baseline cannot be told.
pub fn not_compared(m: &MatrixResult, baseline: &MatrixResult) -> Vec<String> {
    let labels: Vec<String> = m.cells.iter().map(|c| c.label.clone()).collect();
    let free: Vec<&MatrixCell> = baseline
        .cells
        .iter()
        .filter(|b| !labels.contains(&b.label))
        .collect();
    let all: Vec<&str> = baseline.cells.iter().map(|b| b.label.as_str()).collect();
    m.cells
        .iter()
        .filter(|c| c.baseline.is_none())
        .map(|c| match fallback(&c.label, &free) {
            Err(many) => format!(
                "{}: the baseline has several cells it could be compared with ({}); give a baseline with one, or compare their folders with `netprobe diff`",
                c.label,
                many.join(", ")
            ),
            _ => format!(
                "{}: the baseline has no cell of this label, runtime or runtime kind (its cells: {})",
                c.label,
                all.join(", ")
            ),
        })
        .collect()
}

/// Makes the cells' labels unique: where cells share a `<runtime> × <CRIU>` label (two binaries
/// of one version, e.g. a rebuild beside the original), the half whose binaries differ among
/// them gets each one's path, `<runtime> (<path>) × <CRIU>`, so that no table row or baseline
/// match stands for two cells; the other half keeps its label (it still meets the baseline's).
pub fn unique_labels(cells: &mut [MatrixCell]) {
    let before: Vec<MatrixCell> = cells.to_vec();
    for c in cells.iter_mut() {
        let twins: Vec<&MatrixCell> = before.iter().filter(|b| b.label == c.label).collect();
        if twins.len() < 2 {
            continue;
        }
        let (rt, criu, _) = halves(&c.label);
        let rt = match twins.iter().all(|t| t.runtime == c.runtime) {
            true => rt.to_string(),
            false => format!("{rt} ({})", c.runtime),
        };
        let criu = match twins.iter().all(|t| t.criu == c.criu) {
            true => criu.to_string(),
            false => format!("{criu} ({})", c.criu),
        };
        c.label = format!("{rt} × {criu}");
    }
}

pub use super::verify::verify_matrix;

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(label: &str, v: VerdictCode) -> MatrixCell {
        MatrixCell {
            runtime: format!("/x/{}", label.split(' ').next().unwrap()),
            criu: "/x/criu".into(),
            label: label.into(),
            folder: String::new(),
            verdict: v,
            summary: String::new(),
            rests_on: Vec::new(),
            expected: None,
            baseline: None,
            baseline_label: None,
        }
    }

    fn matrix(cells: Vec<MatrixCell>) -> MatrixResult {
        MatrixResult {
            schema_version: 1,
            tool_version: String::new(),
            started_at: String::new(),
            finished_at: String::new(),
            duration_ms: 0,
            jobs: 1,
            binaries: Vec::new(),
            parts: Vec::new(),
            cells,
            baseline: None,
        }
    }

    const EMPTY: VerdictCode = VerdictCode::RuntimeEmptyNs;
    const KEPT: VerdictCode = VerdictCode::RuntimePreservesNetns;

    /// Same label first; a new version's cell meets its predecessor by kind and CRIU, a new
    /// CRIU's by runtime; a kind the baseline lacks, or two candidates, is not compared.
    #[test]
    fn each_cell_meets_the_baseline_cell_it_follows() {
        let base = matrix(vec![
            cell("runc 1.4.3 × CRIU 4.3", EMPTY),
            cell("crun 1.28 × CRIU 4.3", KEPT),
            cell("runc 1.4.3 × CRIU 4.2", EMPTY),
        ]);
        let mut cells = vec![
            cell("runc 1.5.0 × CRIU 4.3", KEPT),
            cell("crun 1.28 × CRIU 4.3", KEPT),
            cell("crun 1.28 × CRIU 4.4", KEPT),
            cell("youki 0.5 × CRIU 4.3", KEPT),
        ];
        match_baseline(&mut cells, &base);
        assert_eq!(cells[0].baseline, Some(EMPTY));
        assert_eq!(
            cells[0].baseline_label.as_deref(),
            Some("runc 1.4.3 × CRIU 4.3")
        );
        assert_eq!(
            (cells[1].baseline, &cells[1].baseline_label),
            (Some(KEPT), &None)
        );
        // The crun 1.28 × CRIU 4.3 baseline cell is claimed by label: nothing left for 4.4.
        assert_eq!(cells[2].baseline, None);
        assert_eq!(cells[3].baseline, None);
        let m = matrix(cells);
        assert_eq!(
            baseline_changes(&m),
            [
                "runc 1.5.0 × CRIU 4.3: runtime-empty-ns -> runtime-preserves-netns (baseline cell runc 1.4.3 × CRIU 4.3)"
            ]
        );
        let nc = not_compared(&m, &base);
        assert_eq!(nc.len(), 2, "{nc:?}");
        assert!(
            nc[0].starts_with("crun 1.28 × CRIU 4.4: the baseline has no cell"),
            "{nc:?}"
        );
        assert!(
            nc[1].starts_with("youki 0.5 × CRIU 4.3: the baseline has no cell"),
            "{nc:?}"
        );

        // Two runc cells of another version with the CRIU: ambiguous, named.
        let base = matrix(vec![
            cell("runc 1.3.6 × CRIU 4.3", EMPTY),
            cell("runc 1.4.3 × CRIU 4.3", EMPTY),
        ]);
        let mut cells = vec![cell("runc 1.5.0 × CRIU 4.3", EMPTY)];
        match_baseline(&mut cells, &base);
        assert_eq!(cells[0].baseline, None);
        let nc = not_compared(&matrix(cells), &base);
        assert!(
            nc[0].contains("several cells it could be compared with (runc 1.3.6 × CRIU 4.3, runc 1.4.3 × CRIU 4.3)"),
            "{nc:?}"
        );
        // A new CRIU: the same runtime's cell.
        let base = matrix(vec![cell("runc 1.4.3 × CRIU 4.2", EMPTY)]);
        let mut cells = vec![cell("runc 1.4.3 × CRIU 4.3", EMPTY)];
        match_baseline(&mut cells, &base);
        assert_eq!(
            cells[0].baseline_label.as_deref(),
            Some("runc 1.4.3 × CRIU 4.2")
        );
    }

    #[test]
    fn two_binaries_of_one_version_get_their_paths_in_the_label() {
        let mut a = cell("runc 1.4.3 × CRIU 4.3", EMPTY);
        let mut b = a.clone();
        a.runtime = "/opt/a/runc".into();
        b.runtime = "/opt/b/runc".into();
        let c = cell("crun 1.28 × CRIU 4.3", KEPT);
        let mut cells = vec![a, b, c];
        unique_labels(&mut cells);
        assert_eq!(cells[0].label, "runc 1.4.3 (/opt/a/runc) × CRIU 4.3");
        assert_eq!(cells[1].label, "runc 1.4.3 (/opt/b/runc) × CRIU 4.3");
        assert_eq!(cells[2].label, "crun 1.28 × CRIU 4.3");
        // Each still meets the baseline's cell of that runtime kind and CRIU.
        let base = matrix(vec![cell("runc 1.4.3 × CRIU 4.3", EMPTY)]);
        match_baseline(&mut cells, &base);
        assert_eq!(cells[0].baseline, Some(EMPTY));
        assert_eq!(cells[1].baseline, Some(EMPTY));
    }
}
