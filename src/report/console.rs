//! What `netprobe verify` and `netprobe doctor` print on stdout: plain text for a terminal, one
//! fact a line, every line produced by a check (nothing printed that no check found).

use crate::evidence::result::{FailingSide, VerifyOutcome};
use crate::host::Prereq;
use std::fmt::Write as _;
use std::path::Path;

/// The report of `netprobe verify DIR`: counts of assertions re-evaluated and artifacts checked,
/// the fields re-derived from the files and those recorded but not re-derived, each assertion
/// failing as recorded or as recomputed now under a heading naming both statuses
/// ([`FailingSide::heading`], grouped in [`FailingSide::ALL`] order), each mismatch (`MISMATCH: …`), and the verdict recomputed
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
    for side in FailingSide::ALL {
        for f in o.failing.iter().filter(|f| f.side == side) {
            let _ = writeln!(s, "  {}: {}", side.heading(), f.text);
        }
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
/// `(optional: what uses it)` when not required, the first line of the detail with `…` when it
/// had more), followed by `        fix: …` for each missing one. Source: [`crate::host::doctor()`].
pub fn doctor_text(prereqs: &[Prereq]) -> String {
    let mut s = String::new();
    for p in prereqs {
        let mark = if p.found { "found  " } else { "MISSING" };
        let req = match (p.required, p.used_by.is_empty()) {
            (true, _) => String::new(),
            (false, true) => " (optional)".to_string(),
            (false, false) => format!(" (optional: {})", p.used_by),
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
            used_by: match (required, name) {
                (true, _) => String::new(),
                (false, "strace") => "run --strace".into(),
                (false, _) => "slot driver images".into(),
            },
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
            prereq("strace", false, true, "/usr/bin/strace", ""),
        ]);
        assert_eq!(
            t,
            "found   criu: Version: 4.2.1 …\n\
             MISSING qemu-img (optional: slot driver images): not in PATH\n        \
             fix: apt-get install qemu-utils\n\
             found   strace (optional: run --strace): /usr/bin/strace\n"
        );
    }

    /// Finding 4 of trial 20: every failing line names its status as recorded and as
    /// recomputed now; a recorded pass is never printed as failing "as recorded".
    #[test]
    fn verify_text_heads_each_failing_assertion_with_both_statuses() {
        use crate::evidence::result::{FailingAssertion, Verdict, VerdictCode};
        let verdict = Verdict {
            code: VerdictCode::RuntimeEmptyNs,
            summary: String::new(),
            rests_on: vec![],
            reason: None,
        };
        let entry = |side, text: &str| FailingAssertion {
            side,
            text: text.into(),
        };
        let o = VerifyOutcome {
            verdict: verdict.clone(),
            recorded: verdict,
            mismatches: vec!["criu/link-dumped-after-netns: recorded pass, now fail".into()],
            failing: vec![
                entry(
                    FailingSide::NowRecordedPassing,
                    "criu/link-dumped-after-netns: x",
                ),
                entry(FailingSide::RecordedAndNow, "oci/netns-image: y"),
            ],
            assertions: 2,
            artifacts: 0,
            rederived: vec![],
            not_rederived: vec![],
        };
        let t = verify_text(Path::new("ev"), &o);
        assert!(!t.contains("failing (as recorded)"), "{t}");
        let both = t
            .find("  failing as recorded and as recomputed now: oci/netns-image: y\n")
            .expect(&t);
        let now = t
            .find("  failing as recomputed now, recorded as passing: criu/link-dumped-after-netns: x\n")
            .expect(&t);
        assert!(both < now, "{t}");
    }
}
