//! `netprobe matrix`: runtimes × CRIUs in one command. The kernel rung runs once, the criu rung
//! once per CRIU, the runtime rungs (oci, external-netns) once per pair — each as its own
//! `netprobe run` with its own evidence folder under one matrix folder — then every cell's
//! verdict is computed from its three parts as `netprobe run` computes a whole ladder's
//! ([`crate::probe::verdict::compute`]). Writes `matrix.json` (schema:
//! `evidence-schema/matrix.schema.json`) and `matrix.md` (the Markdown matrix report, rendered
//! by [`crate::report::matrix_report`] from `templates/matrix.md`, escaped on output).
//!
//! Parts run side by side (`--jobs`, default 2): each is a separate process with its own
//! container ids (pid + nanoseconds), work area, holders and network namespaces, private runtime
//! root and private CRIU `PATH` folder; CRIU's kernel-feature cache is not used here (`/run` is
//! not tmpfs), so nothing they write is shared. A part that does not end within
//! `--cell-timeout` gets SIGTERM (netprobe releases what it started), then SIGKILL after 30 s
//! (the part's error says which it took: `SIGTERM; it exited after N ms`, or the SIGKILL);
//! its error is recorded and every other part's evidence is kept.

pub mod cli;
mod error;
pub mod model;
pub mod table;
pub mod verify;

pub use error::{MatrixArgsError, MatrixLoadError, PartStop, UnknownPartFolder, UnknownVerdict};

use crate::evidence::result::{RunResult, RungName, VerdictCode};
use model::{MatrixBinary, MatrixCell, MatrixPart, MatrixResult};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// An expectation: one verdict for every cell, or for the cells of one runtime (matched by
/// its path as given, or by its file name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect {
    /// `None`: every cell.
    pub runtime: Option<String>,
    /// The expected verdict.
    pub verdict: VerdictCode,
}

/// What one matrix run needs.
#[derive(Debug, Clone)]
pub struct MatrixOptions {
    /// Runtime binaries (rows).
    pub runtimes: Vec<PathBuf>,
    /// CRIU binaries (columns).
    pub crius: Vec<PathBuf>,
    /// New matrix folder (must not exist or be empty).
    pub evidence: PathBuf,
    /// Expectations (a runtime-specific one wins over one for all).
    pub expect: Vec<Expect>,
    /// An earlier matrix folder to compare every cell with.
    pub baseline: Option<PathBuf>,
    /// Parts run side by side at most (≥ 1).
    pub jobs: usize,
    /// The longest one part may take.
    pub cell_timeout: Duration,
    /// The netprobe binary that runs each part.
    pub exe: PathBuf,
}

/// Why a matrix could not run at all (exit 2 usage, 3 host refused).
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// Bad input (no runtime/CRIU, existing folder, unreadable baseline or TOML file).
    #[error("{0}")]
    Usage(String),
    /// Not root.
    #[error("{0}")]
    HostRefused(String),
    /// The `--baseline` folder has no readable `matrix.json`.
    #[error(transparent)]
    Baseline(Box<MatrixLoadError>),
}

impl MatrixError {
    /// The README's exit class: usage, host refused.
    pub fn exit_class(&self) -> crate::exit::ExitClass {
        match self {
            MatrixError::Usage(_) | MatrixError::Baseline(_) => crate::exit::ExitClass::Usage,
            MatrixError::HostRefused(_) => crate::exit::ExitClass::HostRefused,
        }
    }

    /// The process exit code of [`MatrixError::exit_class`]: 2 or 3.
    pub fn exit_code(&self) -> u8 {
        self.exit_class().code()
    }
}

/// One `netprobe run` to start.
struct Job {
    folder: String,
    phases: &'static str,
    criu: PathBuf,
    runtime: Option<PathBuf>,
}

mod parts;
use parts::run_jobs;

/// Runs the matrix; returns the result (also in `<evidence>/matrix.json` and `matrix.md`).
///
/// Errors: [`MatrixError::Usage`] (no runtime or CRIU, the folder exists and is not empty or
/// lies inside a folder netprobe wrote ([`crate::evidence::enclosing`]), the
/// baseline has no readable matrix.json), [`MatrixError::HostRefused`] (not root). A part that
/// fails, is refused or hangs is recorded, not an error.
pub fn run_matrix(opts: &MatrixOptions) -> Result<MatrixResult, MatrixError> {
    let baseline = check_inputs(opts)?;
    let (started_at, incomplete) = start_folder(&opts.evidence)?;
    let _note = interruption_note(&opts.evidence);
    let t0 = Instant::now();
    let binaries = binaries(opts);
    let rslug: Vec<String> = (0..opts.runtimes.len())
        .map(|i| slug(&binaries[i], i))
        .collect();
    let cslug: Vec<String> = (0..opts.crius.len())
        .map(|i| slug(&binaries[opts.runtimes.len() + i], i))
        .collect();
    let parts = run_jobs(opts, &plan_jobs(opts, &rslug, &cslug));
    // A signal seen while the parts ran stops the matrix here: no matrix.json of stopped parts.
    crate::ns::cleanup::checkpoint();
    let mut cells = cells_of(opts, &binaries, &parts, &rslug, &cslug);
    table::unique_labels(&mut cells);
    if let Some(b) = &baseline {
        table::match_baseline(&mut cells, b);
    }
    let result = MatrixResult {
        schema_version: model::MATRIX_SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at,
        finished_at: now(),
        duration_ms: t0.elapsed().as_millis() as u64,
        jobs: opts.jobs.max(1),
        binaries,
        parts,
        cells,
        baseline: opts.baseline.as_ref().map(|b| b.display().to_string()),
    };
    table::write_matrix(&opts.evidence, &result)
        .map_err(|e| MatrixError::Usage(format!("writing the matrix files: {e}")))?;
    std::fs::remove_file(&incomplete)
        .map_err(|e| MatrixError::Usage(format!("removing {}: {e}", incomplete.display())))?;
    Ok(result)
}

/// The checks [`run_matrix`] makes before it writes anything, in order: a runtime and a CRIU
/// named, root, the baseline's matrix.json loaded, the folder not inside netprobe evidence and
/// new or empty. Returns the loaded baseline (`None` without `--baseline`).
fn check_inputs(opts: &MatrixOptions) -> Result<Option<MatrixResult>, MatrixError> {
    if opts.runtimes.is_empty() || opts.crius.is_empty() {
        return Err(MatrixError::Usage(
            "netprobe matrix needs at least one --runtime and one --criu (or a --config file naming them)".into(),
        ));
    }
    crate::host::check_root().map_err(|e| MatrixError::HostRefused(e.to_string()))?;
    let baseline = match &opts.baseline {
        Some(b) => Some(model::load_matrix(b).map_err(|e| MatrixError::Baseline(Box::new(e)))?),
        None => None,
    };
    crate::evidence::enclosing::refuse_inside_evidence(&opts.evidence, None)
        .map_err(|e| MatrixError::Usage(e.to_string()))?;
    if opts.evidence.exists()
        && std::fs::read_dir(&opts.evidence).is_ok_and(|mut d| d.next().is_some())
    {
        return Err(MatrixError::Usage(format!(
            "matrix folder {} exists and is not empty: pass a new --evidence folder",
            opts.evidence.display()
        )));
    }
    Ok(baseline)
}

/// Creates the matrix folder `evidence` (with `logs/`) and writes its incomplete note first.
/// Returns the start time (RFC 3339) and the note's path (removed once matrix.json is written).
fn start_folder(evidence: &Path) -> Result<(String, PathBuf), MatrixError> {
    std::fs::create_dir_all(evidence.join("logs"))
        .map_err(|e| MatrixError::Usage(format!("cannot create {}: {e}", evidence.display())))?;
    let started_at = now();
    // The first file: a matrix killed (SIGKILL, a crash) leaves this, not a folder that reads
    // as a run's; removed once matrix.json is written. Each part proves with it that the
    // folder named to it (`--part-of-matrix`) is the one of the matrix that started it.
    let incomplete = evidence.join(crate::evidence::dir::INCOMPLETE_FILE);
    std::fs::write(
        &incomplete,
        format!(
            "{}started at {started_at} and has not finished: this note is removed once matrix.json is written; if it is still here, the matrix ended without a result\n",
            crate::evidence::enclosing::matrix_note_head(std::process::id())
        ),
    )
    .map_err(|e| MatrixError::Usage(format!("cannot write {}: {e}", incomplete.display())))?;
    Ok((started_at, incomplete))
}

/// The parts to run: the kernel rung once (with the first CRIU), the criu rung once per CRIU,
/// the runtime rungs once per runtime × CRIU pair. `rslug`/`cslug`: the folder names of the
/// runtimes and CRIUs, in the order of `opts`.
fn plan_jobs(opts: &MatrixOptions, rslug: &[String], cslug: &[String]) -> Vec<Job> {
    let mut jobs = vec![Job {
        folder: "kernel".into(),
        phases: "kernel",
        criu: opts.crius[0].clone(),
        runtime: None,
    }];
    for (c, s) in opts.crius.iter().zip(cslug) {
        jobs.push(Job {
            folder: format!("criu-{s}"),
            phases: "criu",
            criu: c.clone(),
            runtime: None,
        });
    }
    for (r, rs) in opts.runtimes.iter().zip(rslug) {
        for (c, cs) in opts.crius.iter().zip(cslug) {
            jobs.push(Job {
                folder: format!("cell-{rs}__{cs}"),
                phases: "oci,external-netns",
                criu: c.clone(),
                runtime: Some(r.clone()),
            });
        }
    }
    jobs
}

/// One cell per runtime × CRIU pair (rows by runtime), each with the verdict of its three parts
/// (kernel, its CRIU's, its own) and its expectation; labels not yet made unique.
fn cells_of(
    opts: &MatrixOptions,
    binaries: &[MatrixBinary],
    parts: &[MatrixPart],
    rslug: &[String],
    cslug: &[String],
) -> Vec<MatrixCell> {
    let mut cells = Vec::new();
    for (ri, r) in opts.runtimes.iter().enumerate() {
        for (ci, c) in opts.crius.iter().enumerate() {
            let label = format!(
                "{} × {}",
                label_of(&binaries[ri], r),
                label_of(&binaries[opts.runtimes.len() + ci], c)
            );
            let folders = [
                "kernel".to_string(),
                format!("criu-{}", cslug[ci]),
                format!("cell-{}__{}", rslug[ri], cslug[ci]),
            ];
            let mut cell = cell_verdict(&opts.evidence, parts, &folders);
            cell.runtime = r.display().to_string();
            cell.criu = c.display().to_string();
            cell.label = label;
            cell.expected = expectation(&opts.expect, r);
            cells.push(cell);
        }
    }
    cells
}

/// How the `interrupted.txt` an interrupted matrix leaves in its folder begins (a run's or a
/// slot verb's begins otherwise): `verify` and `report` tell a matrix folder by it.
pub const INTERRUPTED_NOTE_HEAD: &str = "netprobe matrix was interrupted";

/// Registers the note an interrupted matrix leaves in its folder (`interrupted.txt`; no
/// `matrix.json`): registered before any part starts, so it is written after every part was
/// stopped (releases run newest first).
fn interruption_note(dir: &Path) -> crate::ns::cleanup::Registration {
    let dir = dir.to_path_buf();
    crate::ns::cleanup::register_note("matrix interruption note", move || {
        let by = crate::ns::cleanup::interrupted_by().unwrap_or("a signal");
        let text = format!(
            "{INTERRUPTED_NOTE_HEAD} by {by} at {}; its running parts were stopped (the release list below names each; each part's folder keeps its own interrupted.txt); no matrix.json or matrix.md was written, so this folder is no matrix result; run `netprobe matrix` again with a new --evidence folder\n{}",
            crate::evidence::now_rfc3339(),
            crate::probe::runner::released_list()
        );
        let path = dir.join(crate::evidence::dir::INTERRUPTED_FILE);
        let wrote = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()));
        crate::ns::cleanup::wrote_note(&path, wrote)
    })
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The expectation for runtime `r`: one naming it (path as given or file name) wins over one
/// for all.
fn expectation(expect: &[Expect], r: &Path) -> Option<VerdictCode> {
    let name = r.file_name().map(|n| n.to_string_lossy().into_owned());
    let path = r.display().to_string();
    expect
        .iter()
        .find(|e| {
            e.runtime
                .as_ref()
                .is_some_and(|x| *x == path || Some(x) == name.as_ref())
        })
        .or_else(|| expect.iter().find(|e| e.runtime.is_none()))
        .map(|e| e.verdict)
}

/// Facts and pin match of every runtime, then every CRIU (a binary that cannot be inspected is
/// recorded with its error; its parts are refused by their own run). One thread per binary:
/// each one's sha256 and `--version` overlap the others'.
fn binaries(opts: &MatrixOptions) -> Vec<MatrixBinary> {
    use crate::host::{BinaryKind, binary_facts};
    let one = |path: &Path, kind: BinaryKind| {
        let role = match kind {
            BinaryKind::Runtime => "runtime",
            BinaryKind::Criu => "criu",
        };
        match binary_facts(path, kind) {
            Ok(f) => {
                let (pin, pin_matches) = pin_of(kind, &f);
                MatrixBinary {
                    role: role.into(),
                    path: f.path.clone(),
                    version: Some(f.version.clone()),
                    sha256: Some(f.sha256.clone()),
                    pin,
                    pin_matches,
                    error: None,
                }
            }
            Err(e) => MatrixBinary {
                role: role.into(),
                path: path.display().to_string(),
                version: None,
                sha256: None,
                pin: pin_by_name(kind, path),
                pin_matches: false,
                error: Some(e.to_string()),
            },
        }
    };
    let all: Vec<(&PathBuf, BinaryKind)> = opts
        .runtimes
        .iter()
        .map(|r| (r, BinaryKind::Runtime))
        .chain(opts.crius.iter().map(|c| (c, BinaryKind::Criu)))
        .collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = all
            .iter()
            .map(|(path, kind)| s.spawn(|| one(path, *kind)))
            .collect();
        // A panic while inspecting is a bug: it ends the matrix as it would without threads.
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// The pin of host/pins.toml a binary of `kind` is compared with and whether `f` matches it:
/// `("runc 1.5.2", false)`. A runtime is compared only with a runtime pin of its own program
/// (crun is not runc): `("", false)` when host/pins.toml pins none of its kind.
pub fn pin_of(
    kind: crate::host::BinaryKind,
    f: &crate::evidence::result::BinaryFacts,
) -> (String, bool) {
    use crate::host::{BinaryKind, pins};
    let p = pins();
    let (name, pin) = match kind {
        BinaryKind::Runtime => ("runtime", &p.runtime),
        BinaryKind::Criu => ("criu", &p.criu),
    };
    if kind == BinaryKind::Runtime && !crate::host::program_name(f).eq_ignore_ascii_case(&pin.name)
    {
        return (String::new(), false);
    }
    let check = crate::host::check_one(name, pin, f);
    (format!("{} {}", pin.name, pin.version), check.matches)
}

/// The pin of a binary that could not be inspected: CRIU's; a runtime's when its file name
/// starts with the pinned program's name (`runc`), else empty (no pin of its kind is known).
fn pin_by_name(kind: crate::host::BinaryKind, path: &Path) -> String {
    let p = crate::host::pins();
    let pin = match kind {
        crate::host::BinaryKind::Criu => &p.criu,
        crate::host::BinaryKind::Runtime => &p.runtime,
    };
    let named = path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with(pin.name.as_str()));
    if kind == crate::host::BinaryKind::Criu || named {
        format!("{} {}", pin.name, pin.version)
    } else {
        String::new()
    }
}

/// `runc 1.4.3+ds1`, `CRIU 4.3`; the path when the binary could not be inspected.
fn label_of(b: &MatrixBinary, path: &Path) -> String {
    match &b.version {
        Some(v) if b.role == "criu" => format!("CRIU {v}"),
        Some(v) => {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let name = ["crun", "runc"]
                .into_iter()
                .find(|k| name.starts_with(k))
                .unwrap_or(&name);
            format!("{name} {v}")
        }
        None => path.display().to_string(),
    }
}

/// A folder-safe name: `<index>-<name>-<version>` (`1-runc-1.4.3-ds1`); `i` counts from 0.
pub(crate) fn slug(b: &MatrixBinary, i: usize) -> String {
    let base = Path::new(&b.path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let raw = format!(
        "{}-{}-{}",
        i + 1,
        base,
        b.version.as_deref().unwrap_or("unknown")
    );
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The verdict of one cell from its parts' results (kernel, criu of its CRIU, its runtime
/// rungs); `rests_on` entries are `<folder>:<rung>/<id>`. A part without a result makes the
/// cell inconclusive, naming the part and its error.
pub fn cell_verdict(root: &Path, parts: &[MatrixPart], folders: &[String; 3]) -> MatrixCell {
    let wanted: [&[RungName]; 3] = [
        &[RungName::Kernel],
        &[RungName::Criu],
        &[RungName::Oci, RungName::ExternalNetns],
    ];
    let mut rungs = Vec::new();
    let mut missing = Vec::new();
    let mut owner = std::collections::BTreeMap::new();
    for (folder, names) in folders.iter().zip(wanted) {
        match crate::evidence::read_result(&root.join(folder)) {
            Ok(RunResult { rungs: rs, .. }) => {
                for r in rs.into_iter().filter(|r| names.contains(&r.name)) {
                    owner.insert(r.name.as_str().to_string(), folder.clone());
                    rungs.push(r);
                }
            }
            Err(e) => {
                let why = parts
                    .iter()
                    .find(|p| &p.folder == folder)
                    .and_then(|p| p.error.clone())
                    .unwrap_or_else(|| e.to_string());
                missing.push(format!("part {folder} gave no result: {why}"));
            }
        }
    }
    let v = crate::probe::verdict::compute(&rungs);
    let rests_on = v
        .rests_on
        .iter()
        .map(|a| {
            let rung = a.split('/').next().unwrap_or("");
            format!("{}:{a}", owner.get(rung).map(String::as_str).unwrap_or("?"))
        })
        .collect();
    // A part without a result is the reason, not the rung it would have run: the verdict's
    // own "rung … was not run (add it to --phases)" is no fix for a matrix cell.
    let summary = if missing.is_empty() {
        v.summary.clone()
    } else {
        format!(
            "{}; the cell is {} until every part it rests on gives a result",
            missing.join("; "),
            v.code.as_str()
        )
    };
    MatrixCell {
        runtime: String::new(),
        criu: String::new(),
        label: String::new(),
        folder: folders[2].clone(),
        verdict: v.code,
        summary,
        rests_on,
        expected: None,
        baseline: None,
        baseline_label: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::result::BinaryFacts;
    use crate::host::BinaryKind;

    fn facts(path: &str, out: &str, version: &str) -> BinaryFacts {
        BinaryFacts {
            path: path.into(),
            version: version.into(),
            version_output: out.into(),
            sha256: "0".repeat(64),
            bytes: 1,
            script_interpreter: None,
            installed_sha256: None,
        }
    }

    #[test]
    fn a_runtime_is_compared_only_with_its_own_programs_pin() {
        let crun = facts("/opt/crun-1.28/bin/crun", "crun version 1.28\n", "1.28");
        assert_eq!(pin_of(BinaryKind::Runtime, &crun), (String::new(), false));
        let runc = facts("/x/runc", "runc version 1.4.3+ds1\n", "1.4.3+ds1");
        assert_eq!(
            pin_of(BinaryKind::Runtime, &runc),
            ("runc 1.5.2".to_string(), false)
        );
        // `--version` alone never matches a pin; the sha256 set-up recorded for the path does.
        let mut criu = facts("/x/criu", "Version: 4.3\n", "4.3");
        assert_eq!(
            pin_of(BinaryKind::Criu, &criu),
            ("CRIU 4.3".to_string(), false)
        );
        criu.installed_sha256 = Some(criu.sha256.clone());
        assert_eq!(
            pin_of(BinaryKind::Criu, &criu),
            ("CRIU 4.3".to_string(), true)
        );
        assert_eq!(pin_by_name(BinaryKind::Runtime, Path::new("/x/crun")), "");
        assert_eq!(
            pin_by_name(BinaryKind::Runtime, Path::new("/x/runc")),
            "runc 1.5.2"
        );
    }
}
