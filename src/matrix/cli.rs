//! The `netprobe matrix` subcommand: its clap arguments and handler (kept here, apart from
//! `main.rs`, so the CLI can move without touching the matrix logic).

use super::{
    Expect, MatrixArgsError, MatrixLoadError, MatrixOptions, UnknownVerdict, run_matrix, table,
};
use crate::evidence::result::VerdictCode;
use crate::exit::ExitClass;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The most parts `--jobs` may run side by side.
const MAX_JOBS: u64 = 64;
/// The longest `--cell-timeout`, seconds (one day).
const MAX_CELL_TIMEOUT_S: u64 = 86_400;

/// `netprobe matrix` arguments.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  sudo netprobe matrix --runtime /opt/runc-1.4.3/sbin/runc --runtime /opt/crun-1.28/bin/crun \\
       --criu /opt/criu-4.2.1/sbin/criu --criu /opt/criu-4.3/sbin/criu \\
       --expect runc=runtime-empty-ns --expect crun=runtime-preserves-netns --evidence ev/matrix
  sudo netprobe matrix --config matrix.toml --baseline ev/matrix --evidence ev/matrix-2
  netprobe verify ev/matrix

A --config TOML file: runtimes = [\"PATH\", …], crius = [\"PATH\", …],
[expect] \"<runtime path or file name, or *>\" = \"VERDICT\".")]
pub struct MatrixArgs {
    /// An OCI runtime (runc or crun); repeat for several.
    #[arg(long = "runtime")]
    pub runtimes: Vec<PathBuf>,
    /// A CRIU binary; repeat for several.
    #[arg(long = "criu")]
    pub crius: Vec<PathBuf>,
    /// A TOML file naming runtimes, crius and expectations (added to the options given).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// New matrix folder (must not exist or be empty). Default: ./evidence/matrix-<UTC time>-<pid>.
    #[arg(long)]
    pub evidence: Option<PathBuf>,
    /// Expected verdict for every cell (VERDICT, or *=VERDICT) or for one runtime's cells
    /// (RUNTIME=VERDICT, RUNTIME its path or file name; it wins over the one for every cell);
    /// repeatable. Exit 1 when a cell differs.
    #[arg(long)]
    pub expect: Vec<String>,
    /// An earlier matrix folder: every cell's verdict is compared; exit 1 when any changed.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Runs side by side at most (1 to 64; 0 is refused, exit 2).
    #[arg(long, default_value_t = 2,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_JOBS))]
    pub jobs: usize,
    /// The longest one part (a `netprobe run`) may take, seconds (1 to 86400; 0 is refused,
    /// exit 2).
    #[arg(long, default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..=MAX_CELL_TIMEOUT_S))]
    pub cell_timeout: u64,
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    runtimes: Vec<PathBuf>,
    #[serde(default)]
    crius: Vec<PathBuf>,
    #[serde(default)]
    expect: std::collections::BTreeMap<String, String>,
}

fn verdict(s: &str) -> Result<VerdictCode, UnknownVerdict> {
    VerdictCode::parse(s).ok_or_else(|| UnknownVerdict::new(s))
}

/// `VERDICT` or `RUNTIME=VERDICT` (`*=VERDICT` = all).
///
/// Errors: [`UnknownVerdict`] (the message lists the known ones).
pub fn parse_expect(s: &str) -> Result<Expect, UnknownVerdict> {
    match s.rsplit_once('=') {
        Some((r, v)) => Ok(Expect {
            runtime: (r != "*").then(|| r.to_string()),
            verdict: verdict(v)?,
        }),
        None => Ok(Expect {
            runtime: None,
            verdict: verdict(s)?,
        }),
    }
}

/// Whether an expectation's runtime `r` names runtime `p`: its path as given or its file name
/// (as [`super::run_matrix`] matches them).
fn runtime_matches(r: &str, p: &std::path::Path) -> bool {
    *r == p.display().to_string() || p.file_name().is_some_and(|n| n.to_string_lossy() == *r)
}

/// The first path of `list` that names the same file as an earlier one (both resolved with
/// `canonicalize`, or compared as given when that fails).
fn duplicate(list: &[PathBuf]) -> Option<&PathBuf> {
    let key = |p: &PathBuf| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
    let keys: Vec<PathBuf> = list.iter().map(key).collect();
    list.iter()
        .enumerate()
        .find(|(i, _)| keys[..*i].contains(&keys[*i]))
        .map(|(_, p)| p)
}

/// Builds the options from the arguments and the optional TOML file.
///
/// Errors: the file cannot be read or parsed; an expectation names an unknown verdict or a
/// runtime that is not in the matrix (a typo would otherwise never be checked); a runtime or
/// CRIU given twice.
pub fn options(a: &MatrixArgs, exe: PathBuf) -> Result<MatrixOptions, MatrixArgsError> {
    let mut runtimes = a.runtimes.clone();
    let mut crius = a.crius.clone();
    let mut expect = Vec::new();
    if let Some(f) = &a.config {
        let text = crate::evidence::read_bounded_text(
            f,
            crate::evidence::CONFIG_READ_CAP,
            crate::evidence::Symlinks::Follow,
        )
        .map_err(|source| MatrixArgsError::ConfigRead {
            path: f.clone(),
            source,
        })?;
        let c: ConfigFile =
            toml::from_str(&text).map_err(|source| MatrixArgsError::ConfigParse {
                path: f.clone(),
                source,
            })?;
        runtimes.extend(c.runtimes);
        crius.extend(c.crius);
        for (r, v) in c.expect {
            expect.push(parse_expect(&format!("{r}={v}"))?);
        }
    }
    for e in &a.expect {
        expect.push(parse_expect(e)?);
    }
    for (what, list) in [("--runtime", &runtimes), ("--criu", &crius)] {
        if let Some(d) = duplicate(list) {
            return Err(MatrixArgsError::Duplicate {
                flag: what,
                path: d.clone(),
            });
        }
    }
    for e in &expect {
        if let Some(r) = &e.runtime
            && !runtimes.iter().any(|p| runtime_matches(r, p))
        {
            let given: Vec<String> = runtimes.iter().map(|p| p.display().to_string()).collect();
            return Err(MatrixArgsError::UnknownRuntime {
                runtime: r.clone(),
                verdict: e.verdict.as_str(),
                given: if given.is_empty() {
                    "none".into()
                } else {
                    given.join(", ")
                },
            });
        }
    }
    let evidence = a.evidence.clone().unwrap_or_else(|| {
        PathBuf::from("evidence").join(format!(
            "matrix-{}-{}",
            chrono::Utc::now().format("%Y%m%dT%H%M%SZ"),
            std::process::id()
        ))
    });
    Ok(MatrixOptions {
        runtimes,
        crius,
        evidence,
        expect,
        baseline: a.baseline.clone(),
        jobs: a.jobs.max(1),
        cell_timeout: Duration::from_secs(a.cell_timeout.max(1)),
        exe,
    })
}

/// `netprobe verify` of the baseline folder, as `NOT VERIFIED` lines (empty: it reproduces).
///
/// Errors: its `matrix.json` is missing or invalid ([`super::model::load_matrix`]'s error).
fn baseline_not_verified(b: &std::path::Path) -> Result<Vec<String>, MatrixLoadError> {
    let (problems, _) = table::verify_matrix(b)?;
    if problems.is_empty() {
        return Ok(Vec::new());
    }
    let mut lines = vec![format!(
        "NOT VERIFIED: the baseline {} does not reproduce its matrix.json ({} mismatch(es)); the comparison below is with what its matrix.json records, not what its evidence proves — run `netprobe verify {}`",
        b.display(),
        problems.len(),
        crate::shell::arg(b)
    )];
    lines.extend(problems.iter().map(|p| format!("  MISMATCH {p}")));
    Ok(lines)
}

/// Prints how the matrix `m` met the baseline folder `b`: how many cells were compared, each
/// compared with a baseline cell of another label, each changed, each not compared (and why).
/// Returns [`ExitClass::Gate`] when a cell changed or could not be compared (its verdict
/// against the baseline is not proven), else [`ExitClass::Ok`].
fn baseline_lines(m: &super::model::MatrixResult, b: &std::path::Path) -> ExitClass {
    let mut class = ExitClass::Ok;
    let n = m.cells.iter().filter(|c| c.baseline.is_some()).count();
    crate::out::line(format!(
        "baseline {}: {n} of {} cell(s) compared (matrix.json: cells[].baseline, cells[].baseline_label)",
        b.display(),
        m.cells.len()
    ));
    for c in &m.cells {
        if let Some(l) = &c.baseline_label {
            crate::out::line(format!(
                "compared with the baseline's {l}: {} (no baseline cell of its label)",
                c.label
            ));
        }
    }
    for line in table::baseline_changes(m) {
        crate::out::line(format!("changed against the baseline: {line}"));
        class = ExitClass::Gate;
    }
    match super::model::load_matrix(b) {
        Ok(bm) => {
            for line in table::not_compared(m, &bm) {
                crate::out::line(format!("not compared with the baseline: {line}"));
                class = ExitClass::Gate;
            }
        }
        Err(e) => {
            crate::out::line(format!("not compared with the baseline: {e}"));
            class = ExitClass::Gate;
        }
    }
    class
}

/// Runs `netprobe matrix`: verifies `--baseline` first, prints the table, expectation misses
/// and baseline changes.
/// Exit: 0 every cell as expected and unchanged; 1 a cell differs from `--expect` or changed
/// against `--baseline`, or the baseline does not verify (NOT VERIFIED, above the table; the
/// matrix still runs); 2 usage (an unreadable baseline too); 3 host refused (not root), or a
/// part was refused (and nothing differed); 4 a part could not run or hung (and nothing else).
pub fn handle(a: MatrixArgs, exe: PathBuf) -> ExitCode {
    let opts = match options(&a, exe) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("netprobe: {e}");
            return ExitClass::Usage.into();
        }
    };
    let not_verified = match opts.baseline.as_deref().map(baseline_not_verified) {
        None => Vec::new(),
        Some(Ok(lines)) => lines,
        Some(Err(e)) => {
            eprintln!("netprobe: --baseline: {e}");
            return ExitClass::Usage.into();
        }
    };
    if let Some(first) = not_verified.first() {
        eprintln!("netprobe: {first}");
    }
    // A signal stops the matrix: no new part, the running ones stopped (SIGTERM, their own
    // release), `interrupted.txt` in the matrix folder, exit 128 + signal (see parts.rs).
    if let Err(e) = crate::ns::cleanup::install_signal_handler() {
        eprintln!(
            "netprobe: could not install the signal handler ({e}); a signal may leave the matrix's parts running"
        );
    }
    let m = match run_matrix(&opts) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("netprobe: {e}");
            return e.exit_class().into();
        }
    };
    for line in &not_verified {
        crate::out::line(line);
    }
    crate::out::raw(crate::report::matrix_report(
        &m,
        crate::report::Format::Markdown,
    ));
    let mut class = ExitClass::Ok;
    for c in m.cells.iter().filter(|c| c.unexpected()) {
        crate::out::line(format!(
            "unexpected: {}: {} (expected {})",
            c.label,
            c.verdict.as_str(),
            c.expected.map(|v| v.as_str()).unwrap_or("")
        ));
        class = ExitClass::Gate;
    }
    if let Some(b) = opts.baseline.as_deref()
        && baseline_lines(&m, b) == ExitClass::Gate
    {
        class = ExitClass::Gate;
    }
    if !not_verified.is_empty() {
        class = ExitClass::Gate;
    }
    if class == ExitClass::Ok {
        if m.parts.iter().any(|p| p.exit_code == Some(3)) {
            class = ExitClass::HostRefused;
        } else if m
            .parts
            .iter()
            .any(|p| p.error.is_some() || p.exit_code == Some(4))
        {
            class = ExitClass::CouldNotRun;
        }
    }
    crate::out::line(format!(
        "matrix: {}",
        opts.evidence.join(super::model::MATRIX_FILE).display()
    ));
    class.into()
}

/// `netprobe verify DIR` when DIR holds `matrix.json`: exit 0 reproduced, 1 not, 2 unreadable.
pub fn handle_verify(dir: &std::path::Path) -> ExitCode {
    match table::verify_matrix(dir) {
        Err(e) => {
            eprintln!("netprobe: {e}");
            ExitClass::Usage.into()
        }
        Ok((problems, parts)) => {
            let unverified = super::model::load_matrix(dir)
                .map(|m| super::verify::unverified_parts(dir, &m))
                .unwrap_or_default();
            crate::out::line(format!(
                "verify {} (matrix): {parts} of {} part folder(s) verified as run folders",
                dir.display(),
                parts + unverified.len()
            ));
            for u in &unverified {
                crate::out::line(format!("  not verified: {u}"));
            }
            for p in &problems {
                crate::out::line(format!("  MISMATCH {p}"));
            }
            let baseline = super::model::load_matrix(dir)
                .map(|m| super::verify::verify_baseline(&m))
                .ok();
            match &baseline {
                Some(super::verify::BaselineCheck::Rechecked(p)) if p.is_empty() => {
                    crate::out::line(
                        "baseline: every cell's comparison matched again against the baseline's matrix.json, as recorded",
                    );
                }
                Some(super::verify::BaselineCheck::NotRechecked(why)) => {
                    crate::out::line(format!(
                        "note: the comparison with the baseline was not re-checked ({why}); its `was …` verdicts are as matrix.json records them"
                    ));
                }
                _ => {}
            }
            if problems.is_empty() {
                crate::out::line(reproduced_line(parts, unverified.len()));
                ExitClass::Ok.into()
            } else {
                ExitClass::Gate.into()
            }
        }
    }
}

/// The last line of a matrix `verify` that found no problem: `verified` part folders re-checked
/// as run folders, `unverified` without a result (named above it); "every part" only when
/// none is unverified.
fn reproduced_line(verified: usize, unverified: usize) -> String {
    match unverified {
        0 => "reproduced: every part and every cell verdict".into(),
        n => format!(
            "reproduced: the {verified} verified part(s) and every cell verdict; {n} part(s) without a result not verified (named above)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_is_claimed_only_when_every_part_was_verified() {
        assert_eq!(
            reproduced_line(3, 0),
            "reproduced: every part and every cell verdict"
        );
        let l = reproduced_line(2, 1);
        assert!(!l.contains("every part"), "{l}");
        assert!(
            l.contains("the 2 verified part(s)") && l.contains("1 part(s)"),
            "{l}"
        );
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        matrix: MatrixArgs,
    }

    #[test]
    fn zero_jobs_or_cell_timeout_is_refused_naming_the_flag_and_range() {
        use clap::Parser;
        for (flag, range) in [("--jobs", "1..=64"), ("--cell-timeout", "1..=86400")] {
            let e = Cli::try_parse_from(["netprobe", flag, "0"])
                .err()
                .unwrap_or_else(|| panic!("{flag} 0 accepted"));
            assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation);
            assert_eq!(e.exit_code(), 2);
            let t = e.to_string();
            assert!(t.contains(flag) && t.contains(range), "{t}");
            assert!(Cli::try_parse_from(["netprobe", flag, "1"]).is_ok());
        }
        let d = Cli::try_parse_from(["netprobe"]).unwrap().matrix;
        assert_eq!((d.jobs, d.cell_timeout), (2, 600));
    }

    #[test]
    fn a_binary_given_twice_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("runc");
        std::fs::write(&f, b"").unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        let other = tmp.path().join("crun");
        assert_eq!(duplicate(&[f.clone(), other.clone()]), None);
        assert_eq!(duplicate(&[f.clone(), other, link.clone()]), Some(&link));
        let given = PathBuf::from("runc");
        assert_eq!(duplicate(&[given.clone(), given.clone()]), Some(&given));
    }

    #[test]
    fn the_shipped_example_config_parses_with_its_expectations() {
        use clap::Parser;
        let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/matrix.toml");
        let mut a = Cli::try_parse_from(["netprobe"]).unwrap().matrix;
        a.config = Some(example);
        let o = options(&a, PathBuf::from("netprobe")).unwrap();
        assert_eq!(o.runtimes.len(), 2, "{:?}", o.runtimes);
        assert_eq!(o.crius.len(), 2, "{:?}", o.crius);
        let expect: Vec<(Option<&str>, &str)> = o
            .expect
            .iter()
            .map(|e| (e.runtime.as_deref(), e.verdict.as_str()))
            .collect();
        assert_eq!(
            expect,
            [
                (None, "runtime-empty-ns"),
                (Some("crun"), "runtime-preserves-netns")
            ]
        );
    }
}
