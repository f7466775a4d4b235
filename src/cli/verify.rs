//! `netprobe verify DIR`: re-run the assertions over preserved evidence.

use super::{Execute, fail, parse_verdict};
use netprobe::evidence::result::VerdictCode;
use netprobe::exit::ExitClass;
use std::path::PathBuf;
use std::process::ExitCode;

/// Re-run the assertions over a preserved evidence folder (no root needed).
#[derive(clap::Args)]
#[command(after_help = "Example:\n  netprobe verify evidence/20261130T013419Z-4242\n")]
pub struct VerifyCmd {
    /// Evidence folder written by `netprobe run`.
    dir: PathBuf,
    /// Also require this verdict (exit 1 otherwise).
    #[arg(long, value_parser = parse_verdict)]
    expect: Option<VerdictCode>,
}

impl Execute for VerifyCmd {
    fn execute(mut self) -> ExitCode {
        // The result file given instead of its folder: the folder is the evidence (as `report`).
        if self.dir.is_file()
            && self.dir.file_name() == Some(netprobe::evidence::result::RESULT_FILE.as_ref())
        {
            self.dir = match self.dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
        }
        if self
            .dir
            .join(netprobe::matrix::model::MATRIX_FILE)
            .is_file()
            || netprobe::matrix::verify::is_unfinished_matrix(&self.dir)
        {
            return netprobe::matrix::cli::handle_verify(&self.dir);
        }
        if let Some(why) = netprobe::report::slot_verify_refusal(&self.dir) {
            return fail(ExitClass::Usage, why);
        }
        let o = match netprobe::probe::verify::verify(&self.dir) {
            Ok(o) => o,
            Err(e) => return fail(ExitClass::Usage, e),
        };
        super::out::raw(netprobe::report::console::verify_text(&self.dir, &o));
        if !o.reproduced() {
            return fail(
                ExitClass::Gate,
                "the evidence does not reproduce the recorded result",
            );
        }
        match self.expect {
            Some(e) if e != o.verdict.code => fail(
                ExitClass::Gate,
                format!("verdict {} differs from --expect {e}", o.verdict.code),
            ),
            _ => ExitClass::Ok.into(),
        }
    }
}
