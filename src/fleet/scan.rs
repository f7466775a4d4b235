//! The fleet folder's layout: one folder per host, found without reading any evidence.
//!
//! A host folder is either an evidence folder itself (`DIR/<host>/netprobe-result.json`: what a
//! DaemonSet or a CI matrix writes per node) or the folder the Ansible role fetches into
//! (`deploy/ansible/`): one sub-folder per play run, named by its UTC start (`20261207T221500Z`),
//! the newest of which is used. A play run's folder holds `host-run.json` (the exit codes of
//! `netprobe doctor` and `netprobe run`, and of `netprobe matrix` when it ran) and `evidence/`
//! (the fetched evidence folder) with, when the play ran a matrix, `matrix/` (the matrix
//! folder), or `unreachable.json` (Ansible's reason) when the host could not be reached.

use crate::evidence::fsio;
use crate::evidence::result::RESULT_FILE;
use std::path::{Path, PathBuf};

/// The Ansible role's record of one host's run (`host-run.json`).
pub const HOST_RUN_FILE: &str = "host-run.json";
/// The Ansible role's record of an unreachable host (`unreachable.json`).
pub const UNREACHABLE_FILE: &str = "unreachable.json";
/// The fetched evidence folder inside a play run's folder.
pub const EVIDENCE_DIR: &str = "evidence";
/// The fetched matrix folder inside a play run's folder (`netprobe matrix`, when the play was
/// given `netprobe_matrix_config`).
pub const MATRIX_DIR: &str = "matrix";

/// One host folder as found, before any evidence is read.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The host's name (the record's `host`, else the folder's name).
    pub name: String,
    /// The host folder, relative to the fleet folder.
    pub folder: String,
    /// The evidence folder to verify (absolute), when there is one.
    pub evidence: Option<PathBuf>,
    /// `netprobe run`'s exit code as recorded by the play.
    pub run_exit: Option<i64>,
    /// `netprobe doctor`'s exit code as recorded by the play.
    pub doctor_exit: Option<i64>,
    /// The play run's matrix folder (absolute), when the play ran `netprobe matrix`.
    pub matrix: Option<PathBuf>,
    /// `netprobe matrix`'s exit code as recorded by the play.
    pub matrix_exit: Option<i64>,
    /// Ansible's reason when the host was unreachable.
    pub unreachable: Option<String>,
    /// Why no evidence folder can be named (an empty host folder, a play run that left no
    /// record).
    pub problem: Option<String>,
}

/// Reads a small JSON record written by the play; `None` when absent or not JSON.
fn record(path: &Path) -> Option<serde_json::Value> {
    let bytes = fsio::read_recorded(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Whether `dir` is (or was meant to be) an evidence folder of `netprobe run`.
fn looks_like_evidence(dir: &Path) -> bool {
    [
        RESULT_FILE,
        "interrupted.txt",
        "incomplete.txt",
        "host.json",
    ]
    .iter()
    .any(|f| dir.join(f).exists())
}

/// The host folder `folder` (absolute) named `rel`: which evidence folder, which record.
pub fn candidate(folder: &Path, rel: &str) -> Candidate {
    let mut c = Candidate {
        name: rel.to_string(),
        folder: rel.to_string(),
        evidence: None,
        run_exit: None,
        doctor_exit: None,
        matrix: None,
        matrix_exit: None,
        unreachable: None,
        problem: None,
    };
    if !std::fs::symlink_metadata(folder).is_ok_and(|m| m.is_dir()) {
        c.problem = Some(format!(
            "{rel} is not a folder (a symlink or a file): each host is a folder holding its evidence"
        ));
        return c;
    }
    if looks_like_evidence(folder) {
        c.evidence = Some(folder.to_path_buf());
        return c;
    }
    let run = match newest_run(folder) {
        Ok(Some(run)) => run,
        Ok(None) => {
            c.problem = Some(format!(
                "{rel}/ holds no {RESULT_FILE} and no play run folder: pass a folder of evidence folders (one per host), as `netprobe fleet` expects"
            ));
            return c;
        }
        Err(e) => {
            c.problem = Some(format!("{rel}/ cannot be listed: {e}"));
            return c;
        }
    };
    let run_rel = format!(
        "{rel}/{}",
        run.file_name().unwrap_or_default().to_string_lossy()
    );
    if let Some(u) = record(&run.join(UNREACHABLE_FILE)) {
        if let Some(h) = u["host"].as_str() {
            c.name = h.to_string();
        }
        c.unreachable = Some(
            u["msg"]
                .as_str()
                .unwrap_or("(Ansible gave no reason)")
                .to_string(),
        );
        return c;
    }
    let rec = record(&run.join(HOST_RUN_FILE));
    if let Some(r) = &rec {
        if let Some(h) = r["host"].as_str() {
            c.name = h.to_string();
        }
        c.run_exit = r["run_rc"].as_i64();
        c.doctor_exit = r["doctor_rc"].as_i64();
        c.matrix_exit = r["matrix_rc"].as_i64();
    }
    if run.join(MATRIX_DIR).is_dir() {
        c.matrix = Some(run.join(MATRIX_DIR));
    }
    let ev = run.join(EVIDENCE_DIR);
    if ev.is_dir() {
        c.evidence = Some(ev);
    } else if looks_like_evidence(&run) {
        c.evidence = Some(run);
    } else if rec.is_some() {
        c.problem = Some(format!(
            "{run_rel}/ holds no {EVIDENCE_DIR}/: the host's netprobe run left no evidence folder (run exit {}, doctor exit {})",
            c.run_exit.map_or("unknown".into(), |x| x.to_string()),
            c.doctor_exit.map_or("unknown".into(), |x| x.to_string())
        ));
    } else {
        c.problem = Some(format!(
            "{run_rel}/ holds neither {HOST_RUN_FILE}, {UNREACHABLE_FILE} nor an evidence folder: the play did not finish on this host"
        ));
    }
    c
}

/// The newest play run folder of a host folder: the greatest name not starting with `.`.
fn newest_run(folder: &Path) -> std::io::Result<Option<PathBuf>> {
    let mut best: Option<(std::ffi::OsString, PathBuf)> = None;
    for e in std::fs::read_dir(folder)? {
        let e = e?;
        let n = e.file_name();
        if n.as_encoded_bytes().first() == Some(&b'.') || !e.file_type()?.is_dir() {
            continue;
        }
        if best.as_ref().is_none_or(|(b, _)| n > *b) {
            best = Some((n, e.path()));
        }
    }
    Ok(best.map(|(_, p)| p))
}

/// The files `fleet` and `report` write into the fleet folder: not hosts.
pub const OWN_FILES: [&str; 5] = [
    super::model::FLEET_FILE,
    super::model::FLEET_MD,
    super::model::FLEET_HTML,
    "report.md",
    "report.html",
];

/// Every entry of the fleet folder `dir` but its own files and names starting with `.`, sorted
/// by name: each is a host (an entry that is not a folder becomes a row saying so, never dropped
/// in silence). Errors: the listing's.
pub fn host_folders(dir: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with('.') || OWN_FILES.contains(&n.as_str()) {
            continue;
        }
        v.push((n, e.path()));
    }
    v.sort();
    Ok(v)
}
