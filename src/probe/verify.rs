//! `netprobe verify DIR`: re-runs every assertion of every rung that ran over the preserved
//! evidence (no root needed), checks every artifact's sha256, recomputes the rung statuses,
//! facts and summaries ([`crate::probe::rederive`]), the host facts, pins, declared differences
//! and the whole verdict ([`crate::probe::rederive_result`]), and compares them with what
//! `netprobe-result.json` recorded; what it cannot re-derive it names. The falsifiable check a
//! reviewer runs on someone else's evidence.

use crate::assert;
use crate::evidence::result::{
    AssertionResult, FailingAssertion, FailingSide, RunResult, RungName, RungResult, Status,
};
use crate::evidence::{self, sha256_recorded};
use crate::probe::{rederive, rederive_result, verdict};
use std::path::Path;

pub use crate::evidence::result::VerifyOutcome;

/// Verifies the evidence folder `dir`.
///
/// Errors: [`evidence::EvidenceError`] (from [`evidence::read_result`]) naming the file when
/// `netprobe-result.json` is missing, unreadable, or does not validate against the schema.
pub fn verify(dir: &Path) -> Result<VerifyOutcome, evidence::EvidenceError> {
    let result: RunResult = evidence::read_result(dir)?;
    let mut mismatches = artifact_mismatches(dir, &result);
    let mut failing = Vec::new();
    let mut n_assert = 0;
    let re = assert::reevaluate(dir, &result);
    let same_specs = result.tool_version == env!("CARGO_PKG_VERSION");
    let mut spec_fields_unchecked = Vec::new();
    let mut not_evaluated: Vec<String> = Vec::new();
    let mut rungs = result.rungs.clone();
    for rung in rungs.iter_mut() {
        if matches!(rung.status, Status::Pass | Status::Fail) && rung.error.is_some() {
            mismatches.push(format!(
                "rungs[{}].error: recorded {:?} on a rung that ran to its end ({:?}): only a rung that could not run has an error",
                rung.name,
                rung.error.as_deref().unwrap_or_default(),
                rung.status
            ));
        }
        let Some((_, fresh)) = re.iter().find(|(n, _)| *n == rung.name) else {
            continue;
        };
        n_assert += fresh.len();
        if same_specs {
            mismatches.extend(spec_field_mismatches(rung, fresh));
        } else {
            spec_fields_unchecked.push(rung.name.as_str().to_string());
            // Another netprobe's probes: a recorded assertion this one has no probe for is not
            // re-evaluated; named, never dropped in silence.
            not_evaluated.extend(
                rung.assertions
                    .iter()
                    .filter(|r| !fresh.iter().any(|a| a.id == r.id))
                    .map(|r| format!("{}/{}", rung.name, r.id)),
            );
        }
        reverify_rung(rung, fresh, &mut mismatches, &mut failing);
    }
    // issue 14: the three-way attribution, recomputed from each rung folder; the verdict below
    // (its summary counts the deciding rung's lost facts) is derived from the recomputed one.
    let attribution_checked = reattribute(dir, &mut rungs, &mut mismatches);
    let v = verdict::compute(&rungs);
    if v.code != result.verdict.code {
        mismatches.push(format!(
            "verdict: recorded {}, the evidence gives {}",
            result.verdict.code, v.code
        ));
    }
    // Every other field: re-derived from the files where it can be, named where it cannot.
    let mut parts = vec![rederive_result::run_fields(dir, &result, &v)];
    for rung in &rungs {
        parts.push(rederive::rung(
            &dir.join(rung.name.as_str()),
            rung,
            &result.host,
        ));
    }
    let (mut rederived, mut not_rederived) = (Vec::new(), Vec::new());
    if !spec_fields_unchecked.is_empty() {
        not_rederived.push(format!(
            "the role, description, subject and expected text of the assertions of {} (recorded by netprobe {}, this is {}: its embedded probes/*.toml may differ)",
            spec_fields_unchecked.join(", "),
            result.tool_version,
            env!("CARGO_PKG_VERSION")
        ));
        if !not_evaluated.is_empty() {
            not_rederived.push(format!(
                "the recorded assertions {} (netprobe {}'s probes; this netprobe has no probe of that id, so they are not re-evaluated and take no part in the statuses and the verdict above)",
                not_evaluated.join(", "),
                result.tool_version
            ));
        }
    } else if n_assert > 0 {
        rederived.push(
            "each assertion's role, description, subject and expected text (from the embedded probes/*.toml)"
                .into(),
        );
    }
    for p in parts {
        mismatches.extend(p.mismatches);
        rederived.extend(p.checked);
        not_rederived.extend(p.not_rederived);
    }
    rederived.extend(attribution_checked);
    Ok(VerifyOutcome {
        verdict: v,
        recorded: result.verdict.clone(),
        mismatches,
        failing,
        assertions: n_assert,
        artifacts: result.artifacts.len(),
        rederived,
        not_rederived,
    })
}

/// Recomputes each rung's `attribution` fact from its folder in `rungs` (the recorded one
/// replaced by what the files give, or removed when they give none), pushing a missing or
/// differing one to `mismatches`. Returns the `rungs[X].facts.attribution` fields re-derived.
fn reattribute(dir: &Path, rungs: &mut [RungResult], mismatches: &mut Vec<String>) -> Vec<String> {
    let mut attribution_checked = Vec::new();
    for rung in rungs.iter_mut() {
        let rung_dir = dir.join(rung.name.as_str());
        if let Some(m) = crate::probe::attribution::missing(rung, &rung_dir) {
            mismatches.push(m);
            if let Ok(a) = crate::probe::attribution::from_rung_dir(&rung_dir) {
                rung.facts.insert(
                    "attribution".into(),
                    serde_json::to_value(&a).unwrap_or_default(),
                );
                attribution_checked.push(format!("rungs[{}].facts.attribution", rung.name));
            }
            continue;
        }
        if let Some(rec) = rung.facts.get("attribution") {
            let (fresh, mismatch) = crate::probe::attribution::verify_recorded(
                rung.name.as_str(),
                &dir.join(rung.name.as_str()),
                rec,
            );
            mismatches.extend(mismatch);
            match fresh {
                Some(fresh) => {
                    rung.facts.insert("attribution".into(), fresh);
                    attribution_checked.push(format!("rungs[{}].facts.attribution", rung.name));
                }
                None => {
                    rung.facts.remove("attribution");
                }
            }
        }
    }
    attribution_checked
}

/// Every artifact of `result` has its recorded sha256 and size, every file in `dir` is one
/// of them (an emptied or shortened artifact list would otherwise hide edited files; the reports
/// `netprobe report` derives are exempt), and every directory holding no file is one a run
/// makes ([`made_by_run`]). Returns the mismatches.
fn artifact_mismatches(dir: &Path, result: &RunResult) -> Vec<String> {
    let mut mismatches = Vec::new();
    for a in &result.artifacts {
        let p = dir.join(&a.path);
        match sha256_recorded(&p) {
            Ok((sha, bytes)) if sha == a.sha256 && bytes == a.bytes => {}
            Ok((sha, bytes)) => mismatches.push(format!(
                "artifact {} changed: recorded sha256 {} ({} bytes), now {} ({} bytes)",
                a.path, a.sha256, a.bytes, sha, bytes
            )),
            Err(e) => mismatches.push(format!("artifact {} cannot be read: {e}", a.path)),
        }
    }

    // Every file in the folder must be one the result lists (an emptied or shortened artifact
    // list would otherwise hide edited files). Reports `netprobe report` derives are exempt.
    match evidence::EvidenceDir::open(dir).and_then(|d| d.inventory()) {
        Ok(files) => {
            for f in files {
                let derived = matches!(f.path.as_str(), "report.md" | "report.html");
                if !derived && !result.artifacts.iter().any(|a| a.path == f.path) {
                    mismatches.push(format!(
                        "file {} is in the folder but not among the recorded artifacts",
                        f.path
                    ));
                }
            }
        }
        Err(e) => mismatches.push(format!("cannot list {}: {e}", dir.display())),
    }
    // An artifact list names files only: a directory holding none is checked apart.
    match evidence::empty_dirs::fileless_dirs(dir, &|rel| made_by_run(result, rel)) {
        Ok(dirs) => mismatches.extend(dirs.into_iter().map(|d| {
            format!(
                "directory {d}/ is in the folder but holds no file and no run makes it (a run leaves a directory without files only as the folder of a rung that ran, a CRIU rung's images/, or CRIU's cgroup yard .criu.cgyard.XXXXXX in a CRIU rung's folder)"
            )
        })),
        Err(e) => mismatches.push(format!("cannot list {}: {e}", dir.display())),
    }
    mismatches
}

/// True when a run may leave the directory `rel` of its folder without any file in it
/// ([`evidence::empty_dirs`]): the folder of a rung that ran, and in a CRIU rung's folder (every
/// rung but the kernel's) its `images/` and CRIU's cgroup yard.
fn made_by_run(result: &RunResult, rel: &str) -> bool {
    let (first, rest) = match rel.split_once('/') {
        Some((f, r)) => (f, Some(r)),
        None => (rel, None),
    };
    let Some(rung) = result
        .rungs
        .iter()
        .find(|r| r.name.as_str() == first && r.status != Status::Skipped)
    else {
        return false;
    };
    match rest {
        None => true,
        Some(sub) => {
            rung.name != RungName::Kernel
                && (sub == "images" || evidence::empty_dirs::is_criu_cgroup_yard(sub))
        }
    }
}

/// The recorded assertions of `rung` against the ones the embedded probe spec gives (`fresh`):
/// every recorded assertion is one of the spec's, and its role, description, subject and
/// expected text are the spec's (the outcome — passed, observed — is compared by
/// [`reverify_rung`]).
fn spec_field_mismatches(rung: &RungResult, fresh: &[AssertionResult]) -> Vec<String> {
    let mut out = Vec::new();
    for r in &rung.assertions {
        let Some(a) = fresh.iter().find(|a| a.id == r.id) else {
            out.push(format!(
                "{}/{}: recorded, but not an assertion of the embedded probes/{}.toml",
                rung.name, r.id, rung.name
            ));
            continue;
        };
        for (field, rec, spec) in [
            ("role", &r.role, &a.role),
            ("description", &r.description, &a.description),
            ("subject", &r.subject, &a.subject),
            ("expected", &r.expected, &a.expected),
        ] {
            if rec != spec {
                out.push(format!(
                    "{}/{}.{field}: recorded {rec:?}, the probe spec and evidence give {spec:?}",
                    rung.name, r.id
                ));
            }
        }
    }
    out
}

/// Compares the re-evaluated assertions `fresh` of `rung` with the recorded ones and, for a
/// rung that passed or failed, its recomputed status; pushes the differences to `mismatches`,
/// the assertions failing as recorded or now to `failing` ([`failing_entry`]), and leaves
/// `rung` as the evidence gives it.
fn reverify_rung(
    rung: &mut RungResult,
    fresh: &[AssertionResult],
    mismatches: &mut Vec<String>,
    failing: &mut Vec<FailingAssertion>,
) {
    for a in fresh {
        let rec = rung.assertions.iter().find(|r| r.id == a.id);
        match rec {
            None => mismatches.push(format!(
                "{}/{}: not in the recorded result (observed {})",
                rung.name, a.id, a.observed
            )),
            Some(r) if r.passed != a.passed || r.observed != a.observed => {
                mismatches.push(format!(
                    "{}/{}: recorded {} (observed {}), now {} (observed {})",
                    rung.name,
                    a.id,
                    if r.passed { "pass" } else { "fail" },
                    r.observed,
                    if a.passed { "pass" } else { "fail" },
                    a.observed
                ))
            }
            Some(_) => {}
        }
        failing.extend(failing_entry(rung.name.as_str(), rec, a));
    }
    if matches!(rung.status, Status::Pass | Status::Fail) {
        let st = verdict::status_from_assertions(fresh);
        if st != rung.status {
            mismatches.push(format!(
                "rung {}: recorded {:?}, the evidence gives {:?}",
                rung.name, rung.status, st
            ));
        }
        rung.status = st;
    }
    rung.assertions = fresh.to_vec();
}

/// The listing of assertion `fresh` of rung `rung` (recomputed now) beside its recorded
/// outcome `rec`: `None` when it passes on both sides, else the side it fails on
/// ([`FailingSide`]) with the failing side's observation — so an assertion recorded as passing
/// is listed under a heading saying so, never as failing "as recorded".
fn failing_entry(
    rung: &str,
    rec: Option<&AssertionResult>,
    fresh: &AssertionResult,
) -> Option<FailingAssertion> {
    let (side, shown) = match (rec.map(|r| r.passed), fresh.passed) {
        (Some(false), false) => (FailingSide::RecordedAndNow, fresh),
        (Some(true), false) => (FailingSide::NowRecordedPassing, fresh),
        (None, false) => (FailingSide::NowNotRecorded, fresh),
        (Some(false), true) => (FailingSide::RecordedNowPassing, rec?),
        (Some(true) | None, true) => return None,
    };
    Some(FailingAssertion {
        side,
        text: format!(
            "{rung}/{}: {} — expected {}, observed {}",
            shown.id, shown.description, shown.expected, shown.observed
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assertion(passed: bool, observed: &str) -> AssertionResult {
        AssertionResult {
            id: "link-dumped-after-netns".into(),
            role: "pass".into(),
            description: "CRIU dumped a link".into(),
            subject: "dump.log".into(),
            expected: ">= 1 lines".into(),
            observed: observed.into(),
            passed,
        }
    }

    /// Finding 4 of trial 20: an assertion recorded as passing that fails now was listed as
    /// "failing (as recorded)".
    #[test]
    fn each_failing_assertion_is_listed_under_its_recorded_status() {
        let side = |rec: Option<bool>, now: bool| {
            let r = rec.map(|p| assertion(p, if p { "3 lines" } else { "0 lines" }));
            let f = assertion(now, if now { "3 lines" } else { "0 lines" });
            failing_entry("criu", r.as_ref(), &f)
        };
        assert_eq!(side(Some(true), true), None);
        assert_eq!(side(None, true), None);
        let e = side(Some(true), false).unwrap();
        assert_eq!(e.side, FailingSide::NowRecordedPassing);
        assert_eq!(
            e.text,
            "criu/link-dumped-after-netns: CRIU dumped a link — expected >= 1 lines, observed 0 lines"
        );
        assert_eq!(
            side(Some(false), false).unwrap().side,
            FailingSide::RecordedAndNow
        );
        assert_eq!(side(None, false).unwrap().side, FailingSide::NowNotRecorded);
        // Recorded failing, passing now: listed with the recorded (failing) observation.
        let e = side(Some(false), true).unwrap();
        assert_eq!(e.side, FailingSide::RecordedNowPassing);
        assert!(e.text.ends_with("observed 0 lines"), "{e:?}");
    }

    #[test]
    fn reverify_lists_a_recorded_pass_that_fails_now_as_such() {
        let mut rung = RungResult {
            name: crate::evidence::result::RungName::Criu,
            status: Status::Pass,
            summary: String::new(),
            started_at: String::new(),
            duration_ms: 0,
            timings_ms: Default::default(),
            facts: Default::default(),
            assertions: vec![assertion(true, "3 lines")],
            artifacts: vec![],
            error: None,
        };
        let (mut mismatches, mut failing) = (Vec::new(), Vec::new());
        reverify_rung(
            &mut rung,
            &[assertion(false, "0 lines")],
            &mut mismatches,
            &mut failing,
        );
        assert_eq!(failing.len(), 1);
        assert_eq!(failing[0].side, FailingSide::NowRecordedPassing);
        assert!(
            mismatches[0].contains("recorded pass (observed 3 lines), now fail"),
            "{mismatches:?}"
        );
    }
}
