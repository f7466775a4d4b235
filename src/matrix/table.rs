//! The matrix's files: `matrix.json` (written atomically, validated) and `matrix.md` (the
//! matrix report, rendered by [`crate::report::matrix_report`] from `templates/matrix.md`, so
//! every name and error in it is escaped), the baseline comparison, and `verify` of a whole
//! matrix folder.

use super::model::{MATRIX_FILE, MATRIX_MD, MatrixResult, load_matrix, validate_matrix};
use crate::evidence::result::VerdictCode;
use std::path::Path;

fn verdict_str(v: VerdictCode) -> &'static str {
    v.as_str()
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Writes `matrix.json` (after validating it) and `matrix.md` into `dir`, each atomically.
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
    write_atomic(&dir.join(MATRIX_FILE), text.as_bytes())?;
    let md = crate::report::matrix_report(m, crate::report::Format::Markdown);
    write_atomic(&dir.join(MATRIX_MD), md.as_bytes())
}

/// Lines saying which cells changed verdict against the baseline (`label: old -> new`).
pub fn baseline_changes(m: &MatrixResult) -> Vec<String> {
    m.cells
        .iter()
        .filter(|c| c.changed())
        .map(|c| {
            format!(
                "{}: {} -> {}",
                c.label,
                verdict_str(c.baseline.unwrap_or(c.verdict)),
                verdict_str(c.verdict)
            )
        })
        .collect()
}

/// `netprobe verify` of a matrix folder: every part folder with a result is verified as a run
/// folder, and every cell's verdict is recomputed from the parts' results and compared with
/// `matrix.json`. Returns the problems found (empty: reproduced) and the number of parts checked.
///
/// Errors: `matrix.json` missing or invalid.
pub fn verify_matrix(dir: &Path) -> Result<(Vec<String>, usize), String> {
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
        match crate::probe::verify::verify(&folder) {
            Ok(o) if o.reproduced() => {}
            Ok(o) => problems.push(format!("part {}: {}", p.folder, o.mismatches.join("; "))),
            Err(e) => problems.push(format!("part {}: {e}", p.folder)),
        }
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
                verdict_str(c.verdict),
                verdict_str(again.verdict)
            ));
        }
    }
    Ok((problems, checked))
}
