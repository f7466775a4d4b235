//! `netprobe diff OLD NEW`: what moved between two runs.

use super::{Execute, fail};
use netprobe::evidence::result::RESULT_FILE;
use netprobe::exit::ExitClass;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Compare two runs (evidence folders or result files): verdict first. Exit 1 when the verdict
/// changed. Two checkpoint archives: their findings and every field that differs; exit 1 when
/// the finding or the network images differ.
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  netprobe diff evidence/runc-1.1.5 evidence/runc-1.5.2\n  netprobe diff before.tar.zst after.tar.zst   # two checkpoint archives\n"
)]
pub struct DiffCmd {
    /// The older run.
    old: PathBuf,
    /// The newer run.
    new: PathBuf,
}

impl Execute for DiffCmd {
    fn execute(self) -> ExitCode {
        use netprobe::images::checkpoint::looks_like_archive;
        use netprobe::report::diff::{diff_paths, render_diff};
        if looks_like_archive(&self.old) && looks_like_archive(&self.new) {
            return diff_checkpoints(&self.old, &self.new);
        }
        match diff_paths(&self.old, &self.new) {
            Ok(d) => {
                // The diff compares what the two result files record: each side is verified
                // against its own evidence first (said above the diff, on stdout too), and one
                // that does not reproduce fails the command.
                let verified = [&self.old, &self.new].map(|p| verify_side(p));
                let key = |p: &Path| {
                    let f = if p.is_dir() {
                        p.join(RESULT_FILE)
                    } else {
                        p.to_path_buf()
                    };
                    std::fs::canonicalize(f).ok()
                };
                if let (Some(a), Some(b)) = (key(&self.old), key(&self.new))
                    && a == b
                {
                    super::out::line(format!(
                        "note: old and new are the same result file ({}): nothing below can differ",
                        a.display()
                    ));
                }
                super::out::raw(render_diff(&d));
                if verified.contains(&false) {
                    return ExitClass::Gate.into();
                }
                if d.changed() {
                    ExitClass::Gate.into()
                } else {
                    ExitClass::Ok.into()
                }
            }
            Err(e) => fail(ExitClass::Usage, e),
        }
    }
}

/// Runs `netprobe verify` on one side (an evidence folder, or a result file's folder); prints
/// on stdout that it reproduced, or on stdout and stderr that it did not (with the first
/// mismatch) or could not be verified. Returns whether it reproduced.
fn verify_side(path: &Path) -> bool {
    let dir = if path.is_file() {
        match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    } else {
        path.to_path_buf()
    };
    match netprobe::probe::verify::verify(&dir) {
        Ok(o) if o.reproduced() => {
            super::out::line(format!(
                "verified: {} reproduces its result ({} assertions, {} artifact hashes)",
                dir.display(),
                o.assertions,
                o.artifacts
            ));
            true
        }
        Ok(o) => {
            let line = format!(
                "NOT VERIFIED: {} does not reproduce its netprobe-result.json ({} mismatch(es), first: {}); the diff below compares what the result files record, not what the evidence proves — run `netprobe verify {}`",
                dir.display(),
                o.mismatches.len(),
                o.mismatches
                    .first()
                    .map(String::as_str)
                    .unwrap_or("the verdict differs"),
                netprobe::shell::arg(&dir)
            );
            super::out::line(line.clone());
            eprintln!("netprobe: {line}");
            false
        }
        Err(e) => {
            let line = format!(
                "NOT VERIFIED: {} cannot be verified: {e}; the diff below compares what the result files record",
                dir.display()
            );
            super::out::line(line.clone());
            eprintln!("netprobe: {line}");
            false
        }
    }
}

/// `netprobe diff A B` of two checkpoint archives: exit 0 when the network is the same, 1 when
/// the finding or the images differ, 2 when one cannot be read.
fn diff_checkpoints(old: &Path, new: &Path) -> ExitCode {
    use netprobe::images::checkpoint::read_checkpoint;
    use netprobe::images::checkpoint_diff::diff;
    let (a, b) = match (read_checkpoint(old), read_checkpoint(new)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return fail(ExitClass::Usage, e),
    };
    let d = diff(&a, &b);
    super::out::raw(d.render(&a, &b));
    if d.network_changed() {
        ExitClass::Gate.into()
    } else {
        ExitClass::Ok.into()
    }
}
