//! `matrix.json`: the model of one matrix run (serde), validated against
//! `evidence-schema/matrix.schema.json`, and read back from a matrix folder ([`load_matrix`]:
//! `--baseline`, `verify`, `report`).

use crate::evidence::Symlinks;
use crate::evidence::result::VerdictCode;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// File name of the matrix result inside the matrix folder (defined with the other files that
/// mark a folder netprobe wrote, [`crate::evidence::enclosing`]).
pub const MATRIX_FILE: &str = crate::evidence::enclosing::MATRIX_FILE;
/// File name of the Markdown matrix report inside the matrix folder (written by `netprobe
/// matrix` from `templates/matrix.md`).
pub const MATRIX_MD: &str = "matrix.md";
/// `schema_version` written by this netprobe.
pub const MATRIX_SCHEMA_VERSION: u32 = 1;
/// The JSON Schema (2020-12) of [`MatrixResult`].
pub const MATRIX_SCHEMA: &str = include_str!("../../evidence-schema/matrix.schema.json");

/// One binary of the matrix (a runtime or a CRIU) and how it compares with its pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixBinary {
    /// `runtime` or `criu`.
    pub role: String,
    /// The path as given (absolute when resolved).
    pub path: String,
    /// Parsed version; `None` when the binary could not be inspected.
    pub version: Option<String>,
    /// Lower-case hex sha256; `None` when it could not be inspected.
    pub sha256: Option<String>,
    /// `<name> <version>` of the pin it is compared with (host/pins.toml); empty when
    /// host/pins.toml pins no binary of its kind (e.g. crun, when the runtime pin is runc).
    pub pin: String,
    /// Whether it matches its pin (version, and sha256/bytes where pinned); false without a pin.
    pub pin_matches: bool,
    /// Why it could not be inspected (the cell's own run then refuses it too).
    pub error: Option<String>,
}

/// One `netprobe run` the matrix started (the kernel rung, a criu rung, or a pair's runtime
/// rungs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixPart {
    /// Folder under the matrix folder (its own evidence folder, `netprobe verify`-able).
    pub folder: String,
    /// The rungs it ran (`kernel`, `criu`, `oci,external-netns`).
    pub phases: String,
    /// CRIU path.
    pub criu: String,
    /// Runtime path (runtime parts only).
    pub runtime: Option<String>,
    /// Exit code of that run; `None` when killed (timeout).
    pub exit_code: Option<i32>,
    /// Why it gave no result (refused, timed out), with the last lines of its output.
    pub error: Option<String>,
    /// Wall time, milliseconds, monotonic clock.
    pub duration_ms: u64,
    /// Lower-case hex sha256 of its output, `logs/<folder>.txt`, once the run ended (`verify`
    /// compares it); `None` in a matrix.json written before it was recorded, or when the log
    /// could not be hashed — either way `verify` cannot prove the log and says so.
    #[serde(default)]
    pub log_sha256: Option<String>,
}

/// One runtime × CRIU cell: its verdict, computed from the kernel part, the CRIU's criu part and
/// the pair's runtime part, as `netprobe run` computes it for a whole ladder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixCell {
    /// Runtime path.
    pub runtime: String,
    /// CRIU path.
    pub criu: String,
    /// e.g. `crun 1.28 × CRIU 4.3`.
    pub label: String,
    /// The pair's folder (see [`MatrixPart::folder`]).
    pub folder: String,
    /// The cell's verdict.
    pub verdict: VerdictCode,
    /// One sentence (the verdict's summary or reason).
    pub summary: String,
    /// The deciding assertions, `<folder>:<rung>/<id>`.
    pub rests_on: Vec<String>,
    /// The expected verdict (`--expect`), if any.
    pub expected: Option<VerdictCode>,
    /// The verdict of the cell of `--baseline` this cell was compared with, if any
    /// ([`super::table::match_baseline`]).
    pub baseline: Option<VerdictCode>,
    /// That baseline cell's label when it differs from this cell's (a new runtime or CRIU
    /// version compared with its predecessor); null when the labels are equal or nothing was
    /// compared. Absent in matrix.json files written before it existed.
    #[serde(default)]
    pub baseline_label: Option<String>,
}

/// The whole matrix run (`matrix.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixResult {
    /// [`MATRIX_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// netprobe's version.
    pub tool_version: String,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC.
    pub finished_at: String,
    /// Wall time, milliseconds, monotonic clock.
    pub duration_ms: u64,
    /// How many runs went side by side at most.
    pub jobs: usize,
    /// Every runtime and CRIU, with its pin match.
    pub binaries: Vec<MatrixBinary>,
    /// Every run started: kernel once, criu once per CRIU, runtime rungs per pair.
    pub parts: Vec<MatrixPart>,
    /// Runtimes × CRIUs, runtime-major.
    pub cells: Vec<MatrixCell>,
    /// The baseline matrix folder compared with, if any.
    pub baseline: Option<String>,
}

impl MatrixCell {
    /// True when an expectation is set and the verdict differs.
    pub fn unexpected(&self) -> bool {
        self.expected.is_some_and(|e| e != self.verdict)
    }

    /// True when the baseline has this cell with another verdict.
    pub fn changed(&self) -> bool {
        self.baseline.is_some_and(|b| b != self.verdict)
    }
}

/// Validates a `matrix.json` value against [`MATRIX_SCHEMA`] (draft 2020-12, formats asserted).
///
/// Errors: every violation as `<JSON pointer>: <message>` (root written `(root)`).
pub fn validate_matrix(v: &serde_json::Value) -> Result<(), Vec<String>> {
    static V: std::sync::LazyLock<jsonschema::Validator> = std::sync::LazyLock::new(|| {
        crate::evidence::schema::compile("matrix.schema.json", MATRIX_SCHEMA)
    });
    crate::evidence::schema::validate_with(&V, v)
}

/// The largest `matrix.json` [`load_matrix`] reads: 16 MiB (a matrix of dozens of cells is a
/// few dozen KiB).
pub const MATRIX_JSON_CAP: u64 = 16 << 20;

/// Reads and validates `<dir>/matrix.json` (a regular file of at most [`MATRIX_JSON_CAP`]
/// bytes).
///
/// Errors: [`super::MatrixLoadError`], naming the file (missing, not JSON, schema violations).
pub fn load_matrix(dir: &Path) -> Result<MatrixResult, super::MatrixLoadError> {
    use super::MatrixLoadError as E;
    let p = dir.join(MATRIX_FILE);
    let text = crate::evidence::read_bounded_text(&p, MATRIX_JSON_CAP, Symlinks::Follow).map_err(
        |source| {
            let (file, dir) = (p.clone(), dir.to_path_buf());
            let note = dir.join(crate::evidence::dir::INTERRUPTED_FILE);
            let incomplete = dir.join(crate::evidence::dir::INCOMPLETE_FILE);
            match note.is_file() {
                // A matrix stopped by a signal writes no matrix.json: say so, with its note.
                true => E::Interrupted {
                    first_line: crate::evidence::dir::note_first_line(&note),
                    file,
                    dir,
                    note,
                    source,
                },
                false if super::verify::is_unfinished_matrix(&dir) => E::Unfinished {
                    first_line: crate::evidence::dir::note_first_line(&incomplete),
                    file,
                    dir,
                    note: incomplete,
                    source,
                },
                false => E::Unreadable { file, dir, source },
            }
        },
    )?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|source| E::NotJson {
        file: p.clone(),
        source,
    })?;
    validate_matrix(&v).map_err(|problems| E::Schema {
        file: p.clone(),
        problems,
    })?;
    serde_json::from_value(v).map_err(|source| E::Shape { file: p, source })
}
