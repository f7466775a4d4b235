//! Seeing the result: progress lines, Markdown/HTML reports, and comparing two runs.
//!
//! - [`progress`]: what a running `netprobe run` prints (stderr) and its final output (stdout).
//! - [`markdown`] / [`html`]: `netprobe report DIR [--format md|html]`, derived from
//!   `DIR/netprobe-result.json` plus the per-rung `netstate-before.json` / `netstate-after.json`.
//! - [`diff`]: `netprobe diff OLD NEW`, what moved between two results.
//! - [`console`]: what `netprobe verify` and `netprobe doctor` print.
//! - `template` / `view`: the report templates (`templates/`) and the data they are given.
//! - [`netstate_diff`] (`state_diff`): a rung's network state before and after, diffed by line.
//!
//! Everything here reads [`RunResult`] and evidence files; nothing here runs a probe.

pub mod console;
pub mod diff;
pub mod html;
pub mod markdown;
mod matrix_view;
mod network_view;
pub mod progress;
mod slot_artifacts;
mod slot_journal;
mod slot_view;
mod state_diff;
mod template;
mod view;

pub use state_diff::{LineKind, NetStateDiff, netstate_diff};

use crate::evidence::result::{
    Artifact, RESULT_FILE, RunResult, RungName, SCHEMA_VERSION, VerifyOutcome,
};
use std::path::{Path, PathBuf};

/// Errors of the report module. Each names the input and says how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The path given to `report`/`diff` does not exist.
    #[error(
        "{path}: no such file or directory; pass an evidence directory (containing {RESULT_FILE}) or the result file itself"
    )]
    NotFound {
        /// The path as given.
        path: PathBuf,
    },
    /// The evidence directory holds no result because its run was interrupted
    /// (`interrupted.txt`) or did not finish (`incomplete.txt`, e.g. a full disk).
    #[error(
        "{dir}: holds no {RESULT_FILE}: what wrote it {how}, so there is no result to read; {} says: {said}",
        dir.join(note).display()
    )]
    Unfinished {
        /// The evidence directory.
        dir: PathBuf,
        /// The note it holds: `interrupted.txt` or `incomplete.txt`.
        note: &'static str,
        /// "was interrupted" or "did not finish".
        how: &'static str,
        /// The note's first line (what was interrupted, when, and what to do), made printable.
        said: String,
    },
    /// A file was given that is not named `netprobe-result.json`: a result is verified against
    /// the evidence folder it is in, so a copy under another name would be reported (or
    /// diffed) beside the verification of another file.
    #[error(
        "{path}: not a {RESULT_FILE}; pass an evidence directory or the {RESULT_FILE} in it (a result is verified against the folder it is in: copy the whole folder with `cp -a` to keep an older run)"
    )]
    NotAResultFile {
        /// The path as given.
        path: PathBuf,
    },
    /// The result file could not be read.
    #[error("{path}: cannot read the result file ({source}); check the path and its permissions")]
    Read {
        /// The result file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The result file is not a valid `netprobe-result.json`.
    #[error(
        "{path}: not a valid netprobe result ({source}); is this a {RESULT_FILE} written by netprobe? `netprobe verify` checks an evidence directory"
    )]
    Parse {
        /// The result file.
        path: PathBuf,
        /// The JSON error (with line and column).
        source: serde_json::Error,
    },
    /// The result file was written with another layout version.
    #[error(
        "{path}: schema_version {found}, this netprobe reads {expected}; use the netprobe version that wrote it (tool_version in the file)"
    )]
    SchemaVersion {
        /// The result file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// [`SCHEMA_VERSION`].
        expected: u32,
    },
    /// The report could not be written.
    #[error(
        "{path}: cannot write the report ({source}); the report is written beside the evidence it links to: make the folder writable, or copy it (`cp -a DIR COPY`, which keeps every file and its hash) and report the copy; check also that the disk is not full"
    )]
    Write {
        /// The file being written (the temporary name or the final one).
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A rung's `netstate-before.json`/`netstate-after.json` could not be read (reported in the
    /// report as [`NetStateDiff::unreadable`], never fatal).
    #[error("{path}: {source}")]
    NetState {
        /// The file, relative to the evidence directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A matrix folder was given where a run folder is needed (`diff`): matrices are compared
    /// with `matrix --baseline`, their parts one by one.
    #[error(
        "{dir}: a matrix folder (matrix.json), not a run's evidence folder; compare a new matrix with this one by `netprobe matrix … --baseline {}`, or diff two of its parts (run folders: {dir}/kernel, {dir}/criu-…, {dir}/cell-…)",
        crate::shell::arg(.dir)
    )]
    MatrixFolder {
        /// The folder as given.
        dir: PathBuf,
    },
    /// A slot state directory was given: its reports are per slot.
    #[error(
        "{dir}: a slot state directory; pass one of its slot folders ({slots}) or one verb's evidence folder ({dir}/slot-N/evidence/NNNN-verb)"
    )]
    StateDir {
        /// The state directory as given.
        dir: PathBuf,
        /// Its slot folders, comma-separated (`<dir>/slot-N` when it has none yet).
        slots: String,
    },
    /// A matrix folder (it holds `matrix.json`) whose `matrix.json` cannot be read.
    #[error("{detail}; run `netprobe matrix` again with a new --evidence folder")]
    Matrix {
        /// What is wrong, naming the file ([`crate::matrix::model::load_matrix`]).
        detail: String,
    },
}

/// Result alias of this module.
pub type Result<T> = std::result::Result<T, ReportError>;

/// Output format of `netprobe report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// GitHub-flavoured Markdown, fit to paste into an issue or PR: `report.md`.
    Markdown,
    /// One self-contained HTML page (inline CSS and SVG, no external assets): `report.html`.
    Html,
}

impl Format {
    /// The file name written into the evidence directory: `report.md` or `report.html`.
    pub fn file_name(self) -> &'static str {
        match self {
            Format::Markdown => "report.md",
            Format::Html => "report.html",
        }
    }

    /// Parses `md`/`markdown` or `html` (as given to `--format`). Errors: `None` otherwise.
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "md" | "markdown" => Some(Format::Markdown),
            "html" => Some(Format::Html),
            _ => None,
        }
    }
}

/// Loads a result from `path`: either an evidence directory (then `path/netprobe-result.json`
/// is read) or a result file. Errors: [`ReportError::NotFound`], [`ReportError::Unfinished`]
/// (a directory without a result holding `interrupted.txt` or `incomplete.txt`),
/// [`ReportError::MatrixFolder`] (a matrix folder), [`ReportError::Read`],
/// [`ReportError::Parse`], [`ReportError::SchemaVersion`] (a result of another layout version).
pub fn load_result(path: &Path) -> Result<RunResult> {
    if !path.exists() {
        return Err(ReportError::NotFound {
            path: path.to_path_buf(),
        });
    }
    if !path.is_dir() && path.file_name() != Some(RESULT_FILE.as_ref()) {
        return Err(ReportError::NotAResultFile {
            path: path.to_path_buf(),
        });
    }
    let file = result_file_of(path);
    if path.is_dir() && !file.exists() && path.join("matrix.json").is_file() {
        return Err(ReportError::MatrixFolder {
            dir: path.to_path_buf(),
        });
    }
    if path.is_dir() && !file.exists() {
        use crate::evidence::dir::{INCOMPLETE_FILE, INTERRUPTED_FILE};
        for (note, how) in [
            (INTERRUPTED_FILE, "was interrupted"),
            (INCOMPLETE_FILE, "did not finish"),
        ] {
            if path.join(note).is_file() {
                return Err(ReportError::Unfinished {
                    dir: path.to_path_buf(),
                    note,
                    how,
                    said: crate::evidence::dir::note_first_line(&path.join(note)),
                });
            }
        }
    }
    let bytes = crate::evidence::read_recorded(&file).map_err(|source| ReportError::Read {
        path: file.clone(),
        source,
    })?;
    // Check the version before the full parse, so an old/new layout gets the precise error.
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes)
        && let Some(found) = v.get("schema_version").and_then(|s| s.as_u64())
        && found != u64::from(SCHEMA_VERSION)
    {
        return Err(ReportError::SchemaVersion {
            path: file,
            found: u32::try_from(found).unwrap_or(u32::MAX),
            expected: SCHEMA_VERSION,
        });
    }
    serde_json::from_slice(&bytes).map_err(|source| ReportError::Parse { path: file, source })
}

/// `path/netprobe-result.json` when `path` is a directory, else `path` itself.
fn result_file_of(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(RESULT_FILE)
    } else {
        path.to_path_buf()
    }
}

/// Renders the report of evidence directory `dir` in `format` and writes it to
/// `dir/report.md` or `dir/report.html`; returns that path.
///
/// The write is atomic ([`crate::evidence::replace_atomic`]: a temporary file in `dir`, then
/// rename). A report is derived data
/// (it can always be regenerated from the evidence), so an existing report of the same format is
/// **overwritten**; no other file in `dir` is touched. Errors: those of [`load_result`] and
/// [`ReportError::Write`].
///
/// What slot folder `dir` is, when it is one (`"a slot folder"`, `"one slot verb's evidence
/// folder"`, `"a slot state directory"`): for commands that take a run's evidence folder and
/// must point elsewhere (`verify`).
pub fn slot_folder_kind(dir: &Path) -> Option<&'static str> {
    match slot_view::SlotSource::detect(dir) {
        Some(slot_view::SlotSource::Slot) => Some("a slot folder"),
        Some(slot_view::SlotSource::Verb) => Some("one slot verb's evidence folder"),
        None if dir.join(slot_view::STATE_DIR_MARKER).is_file() => Some("a slot state directory"),
        None => None,
    }
}

/// A matrix folder (one holding `matrix.json`) gets the matrix report instead
/// ([`matrix_report`]); its errors: [`ReportError::Matrix`]. A slot folder
/// (`<state dir>/slot-N`) or one slot verb's evidence folder (it holds `verb.json`) gets the
/// slot report ([`slot_report`]); a state directory is refused with [`ReportError::StateDir`].
pub fn write_report(dir: &Path, format: Format) -> Result<PathBuf> {
    write_report_verified(dir, format, |_, _| None).map(|(p, _)| p)
}

/// The slot folders of the state directory `dir` (`<dir>/slot-N`, sorted), or the one entry
/// `<dir>/slot-N` when it has none yet.
fn state_dir_slots(dir: &Path) -> Vec<String> {
    let mut slots: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("slot-"))
        })
        .map(|p| p.display().to_string())
        .collect();
    slots.sort();
    if slots.is_empty() {
        slots.push(format!("{}/slot-N", dir.display()));
    }
    slots
}

/// Why `netprobe verify` refuses `dir` when it is a slot folder, a slot verb's evidence folder
/// or a slot state directory (`None`: it is none of them), pointing to the `netprobe report`
/// that does take it: the folder itself, or for a state directory its slot folders (`report`
/// refuses a state directory).
pub fn slot_verify_refusal(dir: &Path) -> Option<String> {
    let kind = slot_folder_kind(dir)?;
    let slots = match slot_view::SlotSource::detect(dir) {
        Some(_) => None,
        None => Some(state_dir_slots(dir)),
    };
    Some(verify_refusal_text(
        &dir.display().to_string(),
        kind,
        slots.as_deref(),
    ))
}

/// [`slot_verify_refusal`]'s sentence for `dir` of kind `kind`; `slots`: a state directory's
/// slot folders (then `report` is shown with the form `<dir>/slot-N` and the folders listed).
fn verify_refusal_text(dir: &str, kind: &str, slots: Option<&[String]>) -> String {
    let report = match slots {
        None => format!(
            "`netprobe report {}` shows each verb",
            crate::shell::arg(dir)
        ),
        Some(slots) => format!(
            "`netprobe report {}/slot-N` (one of its slot folders: {}) shows each of that slot's verbs",
            crate::shell::arg(dir),
            slots.join(", ")
        ),
    };
    format!(
        "{dir} is {kind}, not the evidence folder of a `netprobe run`: verify re-checks a run's evidence; for a slot, {report} with its gates and evidence, and `netprobe slot status` its state"
    )
}

/// The kind of folder [`write_report_verified`] asks its caller to verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyKind {
    /// A `netprobe run` evidence folder (`netprobe verify DIR`).
    Run,
    /// A `netprobe matrix` folder (`netprobe verify MATRIX_DIR`: every part and cell verdict).
    Matrix,
}

/// Why the caller's `netprobe verify` could not run on the folder being reported (its own
/// error, boxed: the report imports no probe code); the report shows its text.
pub type VerifyFailure = Box<dyn std::error::Error + Send + Sync>;

/// What the caller's `netprobe verify` found for the folder being reported.
#[derive(Debug)]
pub enum Verified {
    /// A run folder: `verify`'s outcome.
    Run(Box<VerifyOutcome>),
    /// A matrix folder: every problem found (empty: reproduced) and the parts verified.
    Matrix {
        /// One line per problem, as `netprobe verify` prints them after `MISMATCH`.
        problems: Vec<String>,
        /// Part folders verified as run folders.
        parts: usize,
    },
}

impl Verified {
    /// The evidence reproduces what was recorded.
    pub fn reproduced(&self) -> bool {
        match self {
            Verified::Run(o) => o.reproduced(),
            Verified::Matrix { problems, .. } => problems.is_empty(),
        }
    }
}

/// [`write_report`], verifying first: for a `netprobe run` evidence folder or a matrix folder
/// `verify(folder, kind)` (the caller's `netprobe verify`: `Some(Ok)` what it found,
/// `Some(Err)` why it could not run, `None` not asked) runs before rendering and the page says
/// what it found — reproduced, with what was checked, or NOT VERIFIED with every mismatch.
/// Slot folders are not verified (their report re-checks each picture's sha256 itself).
/// Returns the report's path and whether the evidence reproduced the recorded result
/// (`None`: a slot folder, or not verified).
///
/// Errors: those of [`write_report`].
pub fn write_report_verified(
    dir: &Path,
    format: Format,
    verify: impl FnOnce(&Path, VerifyKind) -> Option<std::result::Result<Verified, VerifyFailure>>,
) -> Result<(PathBuf, Option<bool>)> {
    if dir.is_dir()
        && (dir.join(crate::matrix::model::MATRIX_FILE).is_file()
            || crate::matrix::verify::is_unfinished_matrix(dir))
    {
        let m = crate::matrix::model::load_matrix(dir).map_err(|e| ReportError::Matrix {
            detail: e.to_string(),
        })?;
        let v = verify(dir, VerifyKind::Matrix);
        let reproduced = v
            .as_ref()
            .map(|v| v.as_ref().is_ok_and(Verified::reproduced));
        let verification =
            v.map(|v| matrix_view::MatrixVerification::of(v).with_unverified_of(dir, &m));
        let text = matrix_text(&m, format, verification);
        return write_atomic_report(dir, format, &text).map(|p| (p, reproduced));
    }
    if dir.is_dir() && slot_view::SlotSource::detect(dir).is_some() {
        // `Some(false)` when a verb.json differs from the journal's record or a file from
        // its verb.json's artifacts; else no claim.
        let (text, all_match) = slot_report_checked(dir, format);
        return write_atomic_report(dir, format, &text).map(|p| (p, (!all_match).then_some(false)));
    }
    if dir.join(slot_view::STATE_DIR_MARKER).is_file() {
        let slots = state_dir_slots(dir);
        return Err(ReportError::StateDir {
            dir: dir.to_path_buf(),
            slots: slots.join(", "),
        });
    }
    let result = load_result(dir)?;
    // A result file was given: the evidence directory is its parent.
    let dir = if dir.is_dir() {
        dir.to_path_buf()
    } else {
        dir.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf()
    };
    let v = verify(&dir, VerifyKind::Run);
    let reproduced = v
        .as_ref()
        .map(|v| v.as_ref().is_ok_and(Verified::reproduced));
    let mut page = view::Page::new(&result, &dir);
    page.verification = v.map(view::Verification::of);
    let text = match format {
        Format::Markdown => markdown::render_page(&page),
        Format::Html => html::render_page(&page),
    };
    write_atomic_report(&dir, format, &text).map(|p| (p, reproduced))
}

/// The report of a matrix folder from its `matrix.json`: the table (runtimes × CRIUs, verdict
/// per cell, `expected …`/`was …` where an expectation or the baseline differs), each cell's
/// deciding assertions, the binaries with their pin match and every part, with relative links
/// to each cell's result — from `templates/matrix.{md,html}`, escaped on output. Never fails
/// (should the template ever fail, the text says so).
pub fn matrix_report(m: &crate::matrix::model::MatrixResult, format: Format) -> String {
    matrix_text(m, format, None)
}

/// The fleet table of `f` (`netprobe fleet`, and `netprobe report` of a fleet folder): hosts
/// that differ first with their `netprobe diff`, then the hosts grouped by verdict (or state):
/// kernel, cgroup mode, runtime and CRIU (version, sha256), verdict, each rung's status,
/// verified or not and why — from `templates/fleet.{md,html}`, escaped on output, written into
/// `w` one row at a time (never held whole). Should the template ever fail, the text says so
/// where it stopped. Errors: only writing `w`.
pub fn fleet_report_to(
    f: &std::sync::Arc<crate::fleet::model::FleetResult>,
    format: Format,
    w: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let name = match format {
        Format::Markdown => template::FLEET_MD,
        Format::Html => template::FLEET_HTML,
    };
    match template::render_fleet_to(name, crate::fleet::view::page(f), w) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == minijinja::ErrorKind::WriteFailure => {
            Err(std::io::Error::other(e.to_string()))
        }
        Err(e) => writeln!(
            w,
            "netprobe: the fleet report template failed: {}",
            template::escape_html(&e.to_string())
        ),
    }
}

/// [`matrix_report`] with what `netprobe verify` found on the matrix folder, if asked.
fn matrix_text(
    m: &crate::matrix::model::MatrixResult,
    format: Format,
    verification: Option<matrix_view::MatrixVerification>,
) -> String {
    let mut page = matrix_view::MatrixPage::new(m);
    page.verification = verification.map(|v| v.with_baseline_of(m));
    let name = match format {
        Format::Markdown => template::MATRIX_MD,
        Format::Html => template::MATRIX_HTML,
    };
    template::render_matrix(name, &page).unwrap_or_else(|e| {
        format!(
            "netprobe: the matrix report template failed: {}\n",
            template::escape_html(&e.to_string())
        )
    })
}

/// The report of a slot's evidence: `dir` is a slot folder (`<state dir>/slot-N`: every verb
/// folder under `evidence/`, oldest first) or one verb's evidence folder (it holds
/// `verb.json`). Per verb: its outcome (summary or error, the failed gate), every gate with
/// the fact it must prove, proven or not and what it observed, the step timings; for a guest
/// with a display, each display gate with its pictures — at restore/reset the snapshot's screen
/// (before), the screen after the restore (after) and, when `pixels-equal` failed, the diff PNG,
/// with the differing-pixel count and bounding box — each picture linked by its path relative
/// to `dir` (never copied) with the sha256 its gate recorded, checked again against the file.
/// From `templates/slot.{md,html}`, escaped on output. Never fails: an unreadable `verb.json`
/// shows as an incomplete verb (should the template ever fail, the text says so).
pub fn slot_report(dir: &Path, format: Format) -> String {
    slot_report_checked(dir, format).0
}

/// What differs in the slot folder or verb folder `dir` from what the slot recorded when each
/// verb ended (the MISMATCH lines of its report: a `verb.json` against the journal's sha256, a
/// file against `verb.json`'s artifacts, a journal line that is not an entry); empty when
/// nothing does, or when `dir` is not a slot or verb folder.
pub fn slot_mismatches(dir: &Path) -> Vec<String> {
    match slot_view::SlotSource::detect(dir) {
        Some(source) => slot_view::SlotPage::new(dir, source).differs,
        None => Vec::new(),
    }
}

/// [`slot_report`], and whether every verb's `verb.json` that the journal recorded a sha256 for
/// still has it and every file it lists still has its sha256 (false: the page says NOT
/// VERIFIED and names each one that differs).
fn slot_report_checked(dir: &Path, format: Format) -> (String, bool) {
    let source = slot_view::SlotSource::detect(dir).unwrap_or(slot_view::SlotSource::Slot);
    let page = slot_view::SlotPage::new(dir, source);
    let all_match = page.differs.is_empty();
    let name = match format {
        Format::Markdown => template::SLOT_MD,
        Format::Html => template::SLOT_HTML,
    };
    let text = template::render_slot(name, &page).unwrap_or_else(|e| {
        format!(
            "netprobe: the slot report template failed: {}\n",
            template::escape_html(&e.to_string())
        )
    });
    (text, all_match)
}

/// Writes `text` to `dir/report.{md,html}` atomically (world-readable), replacing the previous
/// report whole: a derived view regenerated on each `report`, the one file of an evidence folder
/// that is replaced (no record lists it; `verify` skips it; docs/ARCHITECTURE.md section 4).
/// Returns the path.
fn write_atomic_report(dir: &Path, format: Format, text: &str) -> Result<PathBuf> {
    let target = dir.join(format.file_name());
    let wr = |source| ReportError::Write {
        path: target.clone(),
        source,
    };
    // Mode 0644 like every other evidence file.
    crate::evidence::replace_atomic(&target, text.as_bytes()).map_err(wr)?;
    Ok(target)
}

/// True when `path` is a safe relative link inside the evidence directory (no absolute path,
/// no `..`, no empty segment; one trailing `/` names a folder).
pub(crate) fn is_inside(path: &str) -> bool {
    let path = path.strip_suffix('/').unwrap_or(path);
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != ".." && s != ".")
}

/// Percent-encodes a relative path for use as a URL (keeps `A-Za-z0-9-._~/`), so `:` can never
/// start a scheme such as `javascript:`.
pub(crate) fn url_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `RunResult::artifacts` then each rung's artifacts, without duplicate paths, sorted by path.
pub(crate) fn all_artifacts(result: &RunResult) -> Vec<&Artifact> {
    let mut v: Vec<&Artifact> = result
        .artifacts
        .iter()
        .chain(result.rungs.iter().flat_map(|r| r.artifacts.iter()))
        .collect();
    v.sort_by(|a, b| a.path.cmp(&b.path));
    v.dedup_by(|a, b| a.path == b.path);
    v
}

/// The rung that the ladder names as culprit: the first rung, in ladder order, that did not pass
/// and was not skipped. `None` when every rung run passed.
pub fn first_broken_rung(result: &RunResult) -> Option<RungName> {
    use crate::evidence::result::Status;
    let mut rungs: Vec<_> = result.rungs.iter().collect();
    rungs.sort_by_key(|r| r.name);
    rungs
        .into_iter()
        .find(|r| matches!(r.status, Status::Fail | Status::Error))
        .map(|r| r.name)
}

/// Newlines and control characters replaced by spaces (one terminal line, no escape sequences).
pub(crate) fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `pass`, `FAIL`, `ERROR` or `skipped`: failures in capitals so they stand out in plain text.
pub(crate) fn status_word(s: crate::evidence::result::Status) -> &'static str {
    use crate::evidence::result::Status;
    match s {
        Status::Pass => "pass",
        Status::Fail => "FAIL",
        Status::Error => "ERROR",
        Status::Skipped => "skipped",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_points_a_state_dir_to_its_slot_folders() {
        let slots = ["/s/slot-1".to_string(), "/s/slot-2".to_string()];
        let t = verify_refusal_text("/s", "a slot state directory", Some(&slots));
        assert!(
            t.contains(
                "`netprobe report /s/slot-N` (one of its slot folders: /s/slot-1, /s/slot-2)"
            ),
            "{t}"
        );
        assert!(!t.contains("`netprobe report /s`"), "{t}");
        let t = verify_refusal_text("/s/slot-1", "a slot folder", None);
        assert!(
            t.contains("`netprobe report /s/slot-1` shows each verb"),
            "{t}"
        );
    }

    #[test]
    fn links_stay_inside() {
        assert!(is_inside("oci/dump.log"));
        assert!(!is_inside("../etc/passwd"));
        assert!(!is_inside("/etc/passwd"));
        assert!(!is_inside("oci//x"));
        assert_eq!(url_path("javascript:alert(1)"), "javascript%3Aalert%281%29");
    }
}
