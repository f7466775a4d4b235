//! The matrix's files: `matrix.json` (written atomically, validated) and `matrix.md` (the
//! matrix report, rendered by [`crate::report::matrix_report`] from `templates/matrix.md`, so
//! every name and error in it is escaped) and the baseline comparison; `verify` of a whole
//! matrix folder is [`super::verify`] (re-exported here).

use super::model::{MATRIX_FILE, MATRIX_MD, MatrixResult, validate_matrix};
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

pub use super::verify::verify_matrix;
