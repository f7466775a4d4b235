//! What `netprobe verify` and `netprobe doctor` print on stdout: plain text for a terminal, one
//! fact a line, every line produced by a check (nothing printed that no check found).

use crate::evidence::result::VerifyOutcome;
use crate::host::Prereq;
use std::fmt::Write as _;
use std::path::Path;

/// The report of `netprobe verify DIR`: counts of assertions re-evaluated and artifacts checked,
/// the fields re-derived from the files and those recorded but not re-derived, each assertion
/// failing as recorded, each mismatch (`MISMATCH: …`), and the verdict recomputed
/// from the evidence next to the recorded one. Source: [`crate::probe::verify::verify`].
pub fn verify_text(dir: &Path, o: &VerifyOutcome) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "verify {}: {} assertions re-evaluated, {} artifacts checked",
        dir.display(),
        o.assertions,
        o.artifacts
    );
    let _ = writeln!(
        s,
        "re-derived from the files and compared: {} field(s): {}",
        o.rederived.len(),
        o.rederived.join(", ")
    );
    if !o.not_rederived.is_empty() {
        let _ = writeln!(
            s,
            "recorded, not re-derived: {}",
            o.not_rederived.join(", ")
        );
    }
    for f in &o.failing {
        let _ = writeln!(s, "  failing (as recorded): {f}");
    }
    for m in &o.mismatches {
        let _ = writeln!(s, "  MISMATCH: {m}");
    }
    let _ = writeln!(
        s,
        "verdict from the evidence: {} (recorded: {})",
        o.verdict.code, o.recorded.code
    );
    s
}

/// The report of `netprobe doctor`: one line per prerequisite (`found  ` or `MISSING`, name,
/// `(slot driver / optional)` when not required, the first line of the detail with `…` when it
/// had more), followed by `        fix: …` for each missing one. Source: [`crate::host::doctor()`].
pub fn doctor_text(prereqs: &[Prereq]) -> String {
    let mut s = String::new();
    for p in prereqs {
        let mark = if p.found { "found  " } else { "MISSING" };
        let req = if p.required {
            ""
        } else {
            " (slot driver / optional)"
        };
        // One line per prerequisite: a binary's whole --version output can be long.
        let mut detail = p.detail.lines().next().unwrap_or("").to_string();
        if p.detail.lines().count() > 1 {
            detail.push_str(" …");
        }
        let _ = writeln!(s, "{mark} {}{req}: {detail}", p.name);
        if !p.found {
            let _ = writeln!(s, "        fix: {}", p.fix);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prereq(name: &str, required: bool, found: bool, detail: &str, fix: &str) -> Prereq {
        Prereq {
            name: name.into(),
            required,
            found,
            detail: detail.into(),
            fix: fix.into(),
        }
    }

    #[test]
    fn doctor_text_marks_missing_with_fix_and_cuts_long_details() {
        let t = doctor_text(&[
            prereq("criu", true, true, "Version: 4.2.1\nGitID: x", ""),
            prereq(
                "qemu-img",
                false,
                false,
                "not in PATH",
                "apt-get install qemu-utils",
            ),
        ]);
        assert_eq!(
            t,
            "found   criu: Version: 4.2.1 …\n\
             MISSING qemu-img (slot driver / optional): not in PATH\n        \
             fix: apt-get install qemu-utils\n"
        );
    }
}
