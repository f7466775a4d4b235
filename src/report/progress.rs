//! Progress of a `netprobe run`: one line per rung while it runs (stderr), then the final
//! output (stdout): the ladder summary, the result JSON (`--json`) or the verdict code
//! (`--quiet`).
//!
//! Progress output never fails the run: write errors on stderr are ignored. Only
//! [`Progress::finished`] reports an I/O error, because its output is the result.

use super::one_line;
use crate::evidence::result::{RESULT_FILE, RunResult, RungName, RungResult, Status};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// How progress and the final result are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// stderr is a terminal: an indicatif spinner per rung; otherwise exactly [`ProgressMode::Plain`].
    Auto,
    /// Plain lines on stderr (fit for CI logs); the ladder summary on stdout at the end.
    Plain,
    /// `--json`: plain progress lines on stderr; stdout carries only the final result JSON.
    Json,
    /// `--quiet`: nothing on stderr; stdout carries only the verdict code and a newline.
    Quiet,
}

/// Reports a run's progress. Create one per run, call [`Progress::rung_started`],
/// [`Progress::step`] (optional) and [`Progress::rung_finished`] for each rung, then
/// [`Progress::finished`] once.
pub struct Progress {
    /// The resolved mode (never `Auto`).
    mode: ProgressMode,
    /// A spinner is drawn (Auto on a terminal).
    spinner: bool,
    bar: Option<ProgressBar>,
    current: Option<(RungName, Instant)>,
    err: Box<dyn Write + Send>,
    out: Box<dyn Write + Send>,
}

impl Progress {
    /// Progress on the process's stderr/stdout. `Auto` draws a spinner when stderr is a
    /// terminal, else behaves as `Plain`.
    pub fn new(mode: ProgressMode) -> Progress {
        let tty = std::io::stderr().is_terminal();
        let mut p = Progress::with_writers(
            mode,
            Box::new(std::io::stderr()),
            Box::new(std::io::stdout()),
        );
        if mode == ProgressMode::Auto && tty {
            p.spinner = true;
        }
        p
    }

    /// Progress writing its lines to `err` and its final output to `out` (for tests and for
    /// embedding). `Auto` resolves to `Plain` here: no spinner is drawn on a writer.
    pub fn with_writers(
        mode: ProgressMode,
        err: Box<dyn Write + Send>,
        out: Box<dyn Write + Send>,
    ) -> Progress {
        let mode = if mode == ProgressMode::Auto {
            ProgressMode::Plain
        } else {
            mode
        };
        Progress {
            mode,
            spinner: false,
            bar: None,
            current: None,
            err,
            out,
        }
    }

    fn line(&mut self, text: &str) {
        if self.mode == ProgressMode::Quiet {
            return;
        }
        match &self.bar {
            Some(bar) => bar.println(text),
            None => {
                let _ = writeln!(self.err, "{text}");
            }
        }
    }

    /// A line of its own, `netprobe: <text>` (not in quiet mode).
    pub fn note(&mut self, text: &str) {
        self.line(&format!("netprobe: {}", one_line(text)));
    }

    /// A rung begins: a spinner `rung …` (terminal) or the line `netprobe: <rung> started`.
    pub fn rung_started(&mut self, rung: RungName) {
        self.finish_bar();
        self.current = Some((rung, Instant::now()));
        if self.spinner {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {prefix:<15} {wide_msg} {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_prefix(rung.as_str());
            bar.enable_steady_tick(Duration::from_millis(100));
            self.bar = Some(bar);
        } else {
            self.line(&format!("netprobe: {rung} started"));
        }
    }

    /// A sub-step of the current rung (e.g. `checkpoint`): the spinner's message on a terminal,
    /// else the line `netprobe: <rung>: <step>`.
    pub fn step(&mut self, text: &str) {
        let text = one_line(text);
        if let Some(bar) = &self.bar {
            bar.set_message(text);
            return;
        }
        let rung = self.current.map(|(r, _)| r.as_str()).unwrap_or("-");
        self.line(&format!("netprobe: {rung}: {text}"));
    }

    /// A rung ended: one line `<rung> <status> <ms> ms  <summary>` (the summary is the deciding
    /// fact; for an error, the error text). The milliseconds are `RungResult::duration_ms`.
    pub fn rung_finished(&mut self, rung: &RungResult) {
        self.finish_bar();
        self.current = None;
        let line = rung_line(rung);
        self.line(&line);
    }

    fn finish_bar(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    /// The run ended. Plain/Auto: [`ladder_text`] and `evidence: <dir>/netprobe-result.json` on
    /// stdout. Json: only the result as pretty JSON on stdout. Quiet: only the verdict code.
    /// Errors: the write to stdout failed (e.g. a closed pipe).
    pub fn finished(&mut self, result: &RunResult, evidence_dir: &Path) -> std::io::Result<()> {
        self.finish_bar();
        match self.mode {
            ProgressMode::Json => {
                let json = serde_json::to_string_pretty(result).map_err(std::io::Error::other)?;
                writeln!(self.out, "{json}")?;
            }
            ProgressMode::Quiet => writeln!(self.out, "{}", result.verdict.code)?,
            ProgressMode::Plain | ProgressMode::Auto => {
                write!(self.out, "{}", ladder_text(result))?;
                writeln!(
                    self.out,
                    "evidence: {}",
                    evidence_dir.join(RESULT_FILE).display()
                )?;
                writeln!(
                    self.out,
                    "report:   {} report {} --format html",
                    invoked_as(std::env::args_os().next()),
                    crate::shell::arg(evidence_dir)
                )?;
            }
        }
        self.out.flush()
    }
}

/// How to run this netprobe again, for a printed command: the path it was started by when
/// that names a file (`target/release/netprobe` under `cargo run`, which puts nothing on PATH),
/// else `netprobe` (found through PATH); shell-quoted ([`crate::shell::arg`]). Pure.
pub fn invoked_as(argv0: Option<std::ffi::OsString>) -> String {
    match argv0 {
        Some(a) if a.to_string_lossy().contains('/') => crate::shell::arg(a),
        _ => "netprobe".into(),
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish_bar();
    }
}

fn rung_line(r: &RungResult) -> String {
    let fact = match (&r.status, &r.error) {
        // The error once: a rung that could not run often says it in its summary already.
        (Status::Error, Some(e)) if r.summary.contains(e.as_str()) => r.summary.clone(),
        (Status::Error, Some(e)) if e.contains(r.summary.as_str()) => e.clone(),
        (Status::Error, Some(e)) => format!("{} — {}", r.summary, e),
        _ => r.summary.clone(),
    };
    format!(
        "{:<15} {:<7} {:>7} ms  {}",
        r.name.as_str(),
        super::status_word(r.status),
        r.duration_ms,
        one_line(&fact)
    )
}

/// The ladder as plain text: one line per rung in ladder order
/// (`<rung> <status> <ms> ms <summary>`), under each failed/errored rung its failed `pass` assertions (expected vs observed,
/// with the subject path `<rung>/<subject>`), then `verdict: <code> — <summary>` (the
/// attribution counts said in words: [`crate::probe::verdict::summary_for_people`]), what it rests
/// on, and the declared differences (or `none`). Every number comes from
/// `netprobe-result.json`. Ends with a newline. Pure: no I/O.
pub fn ladder_text(result: &RunResult) -> String {
    let mut rungs: Vec<&RungResult> = result.rungs.iter().collect();
    rungs.sort_by_key(|r| r.name);
    let culprit = super::first_broken_rung(result);
    let mut s = String::new();
    for r in rungs {
        s.push_str(&rung_line(r));
        if Some(r.name) == culprit {
            s.push_str("   <- first broken rung");
        }
        s.push('\n');
        if matches!(r.status, Status::Fail | Status::Error) {
            for a in r
                .assertions
                .iter()
                .filter(|a| !a.passed && a.role == "pass")
            {
                s.push_str(&format!(
                    "    x {}: expected {}, observed {} ({}/{})\n",
                    one_line(&a.id),
                    one_line(&a.expected),
                    one_line(&a.observed),
                    r.name,
                    one_line(&a.subject)
                ));
            }
        }
    }
    let v = &result.verdict;
    let summary = crate::probe::verdict::summary_for_people(v, &result.rungs);
    s.push_str(&format!("verdict: {} — {}\n", v.code, one_line(&summary)));
    if let Some(reason) = &v.reason {
        s.push_str(&format!("  reason: {}\n", one_line(reason)));
    }
    if !v.rests_on.is_empty() {
        s.push_str(&format!(
            "  rests on: {}\n",
            one_line(&v.rests_on.join(", "))
        ));
    }
    if result.declared_differences.is_empty() {
        s.push_str("declared differences: none\n");
    } else {
        s.push_str("declared differences:\n");
        for d in &result.declared_differences {
            s.push_str(&format!("  - {}\n", one_line(d)));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::result::RungName;

    #[test]
    fn the_report_command_names_the_binary_as_it_was_started() {
        let a = |s: &str| Some(std::ffi::OsString::from(s));
        assert_eq!(
            invoked_as(a("target/release/netprobe")),
            "target/release/netprobe"
        );
        assert_eq!(
            invoked_as(a("/usr/local/bin/netprobe")),
            "/usr/local/bin/netprobe"
        );
        assert_eq!(invoked_as(a("netprobe")), "netprobe");
        assert_eq!(
            invoked_as(a("/tmp/with space/netprobe")),
            "'/tmp/with space/netprobe'"
        );
        assert_eq!(invoked_as(None), "netprobe");
    }

    fn errored(summary: &str, error: &str) -> RungResult {
        RungResult {
            name: RungName::Criu,
            status: Status::Error,
            summary: summary.into(),
            started_at: String::new(),
            duration_ms: 3,
            timings_ms: Default::default(),
            facts: Default::default(),
            assertions: vec![],
            artifacts: vec![],
            error: Some(error.into()),
        }
    }

    #[test]
    fn a_failed_rung_says_its_error_once() {
        let e = "evidence: write criu/dump.log: No space left on device (os error 28)";
        // The summary already holds the error, or is a part of it: printed once.
        let line = rung_line(&errored(e, e));
        assert_eq!(line.matches("No space left").count(), 1, "{line}");
        let line = rung_line(&errored("could not run", &format!("could not run: {e}")));
        assert_eq!(line.matches("could not run").count(), 1, "{line}");
        // Different texts: both, summary first.
        let line = rung_line(&errored("criu dump failed", e));
        assert!(line.contains(&format!("criu dump failed — {e}")), "{line}");
    }
}
