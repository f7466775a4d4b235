//! `netprobe report DIR`: render a Markdown or HTML report into the evidence folder (a `run`
//! evidence folder, a matrix folder, a slot folder or one slot verb's evidence folder).

use super::{Execute, fail};
use netprobe::exit::ExitClass;
use std::path::PathBuf;
use std::process::ExitCode;

/// `--format`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    Md,
    Html,
}

/// Render a report of an evidence folder (DIR/report.md or DIR/report.html).
///
/// DIR is a `netprobe run` evidence folder, a `netprobe matrix` folder, a slot folder
/// (STATE_DIR/slot-N: every verb, with the display gates' before/after/diff screenshots) or one
/// slot verb's evidence folder (STATE_DIR/slot-N/evidence/NNNN-verb), or a fleet folder (one
/// holding fleet.json: every host verified again, the table of `netprobe fleet`, its exit code).
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  netprobe report evidence/20261130T013419Z-4242 --format html\n  netprobe report /var/lib/netprobe/slot-0 --format html\n"
)]
pub struct ReportCmd {
    /// Evidence folder, matrix folder, slot folder or slot verb folder.
    dir: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Md)]
    format: Format,
}

impl Execute for ReportCmd {
    fn execute(self) -> ExitCode {
        let f = match self.format {
            Format::Md => netprobe::report::Format::Markdown,
            Format::Html => netprobe::report::Format::Html,
        };
        if netprobe::fleet::is_fleet_folder(&self.dir) {
            return match netprobe::fleet::report(&self.dir, f) {
                Ok((p, fl)) => {
                    super::out::line(p.display().to_string());
                    fl.exit_class.into()
                }
                Err(e) => fail(ExitClass::Usage, e),
            };
        }
        use netprobe::report::{Verified, VerifyFailure, VerifyKind};
        // Why verify could not run at all (then the exit is verify's own: usage, 2).
        let could_not = std::cell::RefCell::new(None::<String>);
        let verify = |d: &std::path::Path, kind| {
            let r = match kind {
                VerifyKind::Run => netprobe::probe::verify::verify(d)
                    .map(|o| Verified::Run(Box::new(o)))
                    .map_err(VerifyFailure::from),
                VerifyKind::Matrix => netprobe::matrix::table::verify_matrix(d)
                    .map(|(problems, parts)| Verified::Matrix { problems, parts })
                    .map_err(VerifyFailure::from),
            };
            if let Err(e) = &r {
                *could_not.borrow_mut() = Some(e.to_string());
            }
            Some(r)
        };
        match netprobe::report::write_report_verified(&self.dir, f, verify) {
            Ok((p, reproduced)) => {
                super::out::line(p.display().to_string());
                if let Some(e) = could_not.borrow().as_ref() {
                    return fail(
                        ExitClass::Usage,
                        format!(
                            "{} cannot be verified ({e}); the report says NOT VERIFIED",
                            self.dir.display()
                        ),
                    );
                }
                if reproduced == Some(false)
                    && netprobe::report::slot_folder_kind(&self.dir).is_some()
                {
                    eprintln!(
                        "netprobe: evidence in {} differs from what the slot recorded when its verbs ended (journal.jsonl holds each verb.json's sha256, verb.json each other file's), or a verb.json's ok contradicts its own gates; the report says NOT VERIFIED:",
                        self.dir.display()
                    );
                    for m in netprobe::report::slot_mismatches(&self.dir) {
                        eprintln!("  MISMATCH: {m}");
                    }
                    return ExitClass::Gate.into();
                }
                if reproduced == Some(false) {
                    eprintln!(
                        "netprobe: the evidence in {} does not reproduce what it records; the report says NOT VERIFIED (see `netprobe verify {}`)",
                        self.dir.display(),
                        netprobe::shell::arg(&self.dir)
                    );
                    return ExitClass::Gate.into();
                }
                ExitClass::Ok.into()
            }
            Err(e) => fail(ExitClass::Usage, e),
        }
    }
}
