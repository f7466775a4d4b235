//! The matrix's files: `matrix.json` (written atomically, validated), `matrix.md` (the table),
//! loading an earlier matrix (`--baseline`), and `verify` of a whole matrix folder.

use super::model::{MATRIX_FILE, MATRIX_MD, MatrixResult, validate_matrix};
use crate::evidence::result::VerdictCode;
use std::fmt::Write as _;
use std::path::Path;

fn verdict_str(v: VerdictCode) -> &'static str {
    v.as_str()
}

/// The Markdown table: verdict per cell (runtimes as rows, CRIUs as columns; `expected …` and
/// `was …` when an expectation or the baseline differs), the deciding assertions of each cell,
/// the binaries with their pin match, and every part with its exit code and milliseconds.
pub fn render_markdown(m: &MatrixResult) -> String {
    let mut crius: Vec<&str> = Vec::new();
    let mut runtimes: Vec<&str> = Vec::new();
    for c in &m.cells {
        let (r, k) = c.label.split_once(" × ").unwrap_or((&c.label, ""));
        if !runtimes.contains(&r) {
            runtimes.push(r);
        }
        if !crius.contains(&k) {
            crius.push(k);
        }
    }
    let mut s = String::from("# netprobe matrix\n\n");
    let _ = writeln!(s, "| runtime \\ CRIU | {} |", crius.join(" | "));
    let _ = writeln!(s, "|---|{}", "---|".repeat(crius.len()));
    for r in &runtimes {
        let mut row = format!("| {r} |");
        for k in &crius {
            let label = format!("{r} × {k}");
            let cell = m.cells.iter().find(|c| c.label == label);
            let text = match cell {
                Some(c) => {
                    let mut t = format!("`{}`", verdict_str(c.verdict));
                    if c.unexpected() {
                        let _ = write!(
                            t,
                            " ✗ expected `{}`",
                            verdict_str(c.expected.unwrap_or(c.verdict))
                        );
                    }
                    if c.changed() {
                        let _ = write!(
                            t,
                            " (was `{}`)",
                            verdict_str(c.baseline.unwrap_or(c.verdict))
                        );
                    }
                    t
                }
                None => "–".into(),
            };
            let _ = write!(row, " {text} |");
        }
        let _ = writeln!(s, "{row}");
    }
    s.push_str("\n## Deciding assertions\n\nThe cell's own runtime rungs (every cell also rests on the kernel part and its CRIU's criu part; all of them in matrix.json):\n\n");
    for c in &m.cells {
        let own: Vec<&str> = c
            .rests_on
            .iter()
            .filter_map(|a| a.strip_prefix(&format!("{}:", c.folder)))
            .collect();
        let _ = writeln!(
            s,
            "- **{}** (`{}`): {} — {}",
            c.label,
            c.folder,
            c.summary,
            own.join(", ")
        );
    }
    s.push_str("\n## Binaries\n\n| role | path | version | sha256 | pin | matches |\n|---|---|---|---|---|---|\n");
    for b in &m.binaries {
        let _ = writeln!(
            s,
            "| {} | `{}` | {} | {} | {} | {} |",
            b.role,
            b.path,
            b.version.as_deref().unwrap_or("?"),
            b.sha256
                .as_deref()
                .map(crate::host::pins::short_sha)
                .unwrap_or_else(|| b.error.clone().unwrap_or_default()),
            b.pin,
            if b.pin_matches { "yes" } else { "no" }
        );
    }
    s.push_str("\n## Parts\n\n| folder | phases | exit | ms | error |\n|---|---|---|---|---|\n");
    for p in &m.parts {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} |",
            p.folder,
            p.phases,
            p.exit_code
                .map(|c| c.to_string())
                .unwrap_or_else(|| "killed".into()),
            p.duration_ms,
            p.error.as_deref().unwrap_or("")
        );
    }
    s
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Writes `matrix.json` (after validating it) and `matrix.md` into `dir`, each atomically.
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
    write_atomic(&dir.join(MATRIX_MD), render_markdown(m).as_bytes())
}

/// Reads and validates `<dir>/matrix.json`.
///
/// Errors: a sentence naming the file (missing, not JSON, schema violations).
pub fn load_matrix(dir: &Path) -> Result<MatrixResult, String> {
    let p = dir.join(MATRIX_FILE);
    let text = std::fs::read_to_string(&p).map_err(|e| {
        format!(
            "{}: {e} (is {} a matrix folder?)",
            p.display(),
            dir.display()
        )
    })?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", p.display()))?;
    validate_matrix(&v).map_err(|e| format!("{}: {}", p.display(), e.join("; ")))?;
    serde_json::from_value(v).map_err(|e| format!("{}: {e}", p.display()))
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
