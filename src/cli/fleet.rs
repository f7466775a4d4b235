//! `netprobe fleet DIR`: every host's evidence verified, one table (the handler lives in
//! `src/fleet/`).

use super::{Execute, fail, parse_verdict};
use netprobe::evidence::result::VerdictCode;
use netprobe::exit::ExitClass;
use std::path::PathBuf;
use std::process::ExitCode;

/// Verify every host's evidence folder of a fleet folder (on all cores) and put them side by side.
///
/// DIR holds one folder per host: an evidence folder (a DaemonSet's or CI matrix's), or the
/// folders deploy/ansible/ fetches (DIR/<host>/<run>/evidence, the newest run used; with
/// DIR/<host>/<run>/matrix when the play ran a matrix, verified too and listed under "Matrices").
/// Writes DIR/fleet.json, DIR/fleet.md and DIR/fleet.html (regenerated whole each time) and
/// prints the Markdown table.
#[derive(clap::Args)]
#[command(
    after_help = "Example:\n  netprobe fleet fleet/ --expect runtime-empty-ns\n\nExit codes (as matrix's): 0 every host verified and agreeing; 1 a host NOT VERIFIED (its evidence or its matrix), a verdict that differs from --expect or from its peers (same kernel, runtime and CRIU), or a host's run or matrix exited 1 (run_rc, matrix_rc); 2 DIR unusable, or a host folder that is not an evidence folder, a duplicate host name, a newer netprobe's; 3 a host's run or matrix was refused (exit 3); 4 a host unreachable or whose run or matrix could not run (exit 4 or another non-zero code).\n"
)]
pub struct FleetCmd {
    /// The fleet folder (the playbook's fleet_dir).
    dir: PathBuf,
    /// The verdict every host should have: a host with another one is named first (exit 1).
    #[arg(long, value_parser = parse_verdict)]
    expect: Option<VerdictCode>,
}

impl Execute for FleetCmd {
    fn execute(self) -> ExitCode {
        let f = match netprobe::fleet::examine(&self.dir, self.expect) {
            Ok(f) => std::sync::Arc::new(f),
            Err(e) => return fail(ExitClass::Usage, e),
        };
        let md = match netprobe::fleet::write(&self.dir, &f) {
            Ok(md) => md,
            Err(e) => return fail(ExitClass::Usage, e),
        };
        // The table just written, printed from its file (never held whole).
        if let Err(e) = std::fs::File::open(&md).and_then(super::out::copy) {
            eprintln!("netprobe: {}: cannot print it: {e}", md.display());
        }
        super::out::line(format!(
            "fleet: {}",
            self.dir.join(netprobe::fleet::model::FLEET_FILE).display()
        ));
        if f.exit_class != ExitClass::Ok {
            eprintln!(
                "netprobe: fleet exit {} ({}): see the rows above that are not verified or that differ",
                f.exit_code,
                f.exit_class.as_str()
            );
        }
        f.exit_class.into()
    }
}
