//! `netprobe fleet DIR`: many hosts' evidence, each proven, side by side.
//!
//! The fan-out belongs to the engine operators already run (Ansible: `deploy/ansible/`; a
//! DaemonSet or a CI matrix writing one evidence folder per node): netprobe adds what no engine
//! does. Every host folder of DIR ([`scan`]) is verified as `netprobe verify` does, on all cores
//! (rayon, one host per task: [`host::examine`]); the rows are decided ([`table`]: duplicate
//! names, hosts that differ from `--expect` or from their peers, order, exit code), each
//! disagreeing host gets the `netprobe diff` against a host that agrees, and the result is
//! written as `fleet.json` (`evidence-schema/fleet.schema.json`), `fleet.md` and `fleet.html`
//! (`templates/fleet.{md,html}` via [`crate::report::fleet_report_to`]), each streamed into its
//! file host by host ([`write`](mod@write)). Those three are derived views, regenerated whole
//! (temporary name, then rename) by every `fleet`; nothing else in DIR is written. Memory: one
//! row per host (a few hundred bytes), whatever the evidence holds; no document is held whole.

pub mod host;
pub mod model;
pub mod scan;
pub mod table;
pub mod view;
pub mod write;

use crate::evidence::fsio;
use crate::evidence::result::VerdictCode;
use crate::exit::ExitClass;
use model::{FleetHost, FleetResult};
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why `netprobe fleet` could not make a table (exit 2, nothing written).
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// DIR does not exist or is not a folder.
    #[error(
        "{0}: not a folder; pass the folder holding one evidence folder per host (the playbook's fleet_dir, deploy/ansible/README.md)"
    )]
    NotAFolder(PathBuf),
    /// DIR cannot be listed.
    #[error("{path}: cannot list it: {source}")]
    List {
        /// The fleet folder.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// DIR holds no host folder.
    #[error(
        "{0}: holds no host folder; each host's evidence goes to DIR/<host>/ (the playbook's fleet_dir)"
    )]
    Empty(PathBuf),
    /// DIR is itself one host's evidence folder, a matrix or another netprobe folder.
    #[error(
        "{0}: is one evidence folder (it holds {file}), not a fleet: run `netprobe verify` on it, or pass the folder above it",
        file = crate::evidence::result::RESULT_FILE
    )]
    OneRun(PathBuf),
    /// `fleet.json` did not validate against its own schema (a defect of this build).
    #[error("fleet.json does not validate against evidence-schema/fleet.schema.json: {0}")]
    Schema(String),
    /// An output file could not be written.
    #[error("{path}: cannot write it: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Verifies every host folder of `dir` (on all cores) and decides the table. Writes nothing.
///
/// Errors: [`FleetError::NotAFolder`], [`FleetError::List`], [`FleetError::Empty`],
/// [`FleetError::OneRun`].
pub fn examine(dir: &Path, expect: Option<VerdictCode>) -> Result<FleetResult, FleetError> {
    if !dir.is_dir() {
        return Err(FleetError::NotAFolder(dir.to_path_buf()));
    }
    if dir.join(crate::evidence::result::RESULT_FILE).exists() {
        return Err(FleetError::OneRun(dir.to_path_buf()));
    }
    let folders = scan::host_folders(dir).map_err(|source| FleetError::List {
        path: dir.to_path_buf(),
        source,
    })?;
    if folders.is_empty() {
        return Err(FleetError::Empty(dir.to_path_buf()));
    }
    let mut rows: Vec<FleetHost> = folders
        .par_iter()
        .map(|(rel, path)| host::examine(&scan::candidate(path, rel), dir))
        .collect();
    table::mark_duplicates(&mut rows);
    table::mark_disagreements(&mut rows, expect);
    add_diffs(dir, &mut rows);
    table::order(&mut rows);
    let class = table::exit_class(&rows);
    Ok(FleetResult {
        schema_version: model::FLEET_SCHEMA_VERSION,
        tool: "netprobe".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        written_at: fsio::now_rfc3339(),
        expect,
        hosts: rows,
        exit_class: class,
        exit_code: class.code(),
    })
}

/// For each disagreeing host: `netprobe diff AGREEING THIS` (paths relative to `dir`) and what
/// it prints.
fn add_diffs(dir: &Path, rows: &mut [FleetHost]) {
    let evidence: Vec<(String, Option<String>)> = rows
        .iter()
        .map(|r| (r.name.clone(), r.evidence.clone()))
        .collect();
    for r in rows.iter_mut() {
        let Some(d) = r.disagrees.as_mut() else {
            continue;
        };
        let other = d.compared_with.as_ref().and_then(|w| {
            evidence
                .iter()
                .find(|(n, _)| n == w)
                .and_then(|(_, e)| e.clone())
        });
        let (Some(old), Some(new)) = (other, r.evidence.clone()) else {
            continue;
        };
        d.diff_command = Some(format!(
            "netprobe diff {} {}",
            crate::shell::arg(&old),
            crate::shell::arg(&new)
        ));
        d.diff = Some(
            match crate::report::diff::diff_paths(&dir.join(&old), &dir.join(&new)) {
                Ok(x) => crate::report::diff::render_diff(&x),
                Err(e) => format!("netprobe diff could not run: {e}"),
            },
        );
    }
}

/// Writes `fleet.json` (each host validated against the schema before it is written),
/// `fleet.md` and `fleet.html` into `dir`, each replacing the previous one whole, each written
/// one host at a time ([`write`](mod@write): never a whole document in memory). Returns the
/// Markdown table's path. Errors: [`FleetError::Schema`], [`FleetError::Write`].
pub fn write(dir: &Path, f: &Arc<FleetResult>) -> Result<PathBuf, FleetError> {
    write::json(&dir.join(model::FLEET_FILE), f)?;
    write::table(&dir.join(model::FLEET_HTML), f, crate::report::Format::Html)?;
    let md = dir.join(model::FLEET_MD);
    write::table(&md, f, crate::report::Format::Markdown)?;
    Ok(md)
}

/// Whether `dir` is a fleet folder: it holds `fleet.json` (`netprobe report` then shows the
/// fleet table).
pub fn is_fleet_folder(dir: &Path) -> bool {
    dir.join(model::FLEET_FILE).is_file()
}

/// `netprobe report DIR` of a fleet folder: the hosts verified again (never the recorded
/// `fleet.json` taken on trust; its `expect` reused), the same table written as `report.md` or
/// `report.html` (replacing the previous one whole, row by row). Returns the file written and
/// the result. Errors: those of [`examine`], [`FleetError::Write`].
pub fn report(
    dir: &Path,
    format: crate::report::Format,
) -> Result<(PathBuf, Arc<FleetResult>), FleetError> {
    let expect = fsio::read_recorded(&dir.join(model::FLEET_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["expect"].as_str().and_then(VerdictCode::parse));
    let f = Arc::new(examine(dir, expect)?);
    let path = dir.join(format.file_name());
    write::table(&path, &f, format)?;
    Ok((path, f))
}

/// The exit class of a fleet result (as [`table::exit_class`] decided it).
pub fn class(f: &FleetResult) -> ExitClass {
    f.exit_class
}
