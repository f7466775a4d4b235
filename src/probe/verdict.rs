//! The layered verdict: ARCHITECTURE.md section 1, as a pure function of the rung results.
//!
//! | kernel | criu | oci | external-netns | verdict |
//! |---|---|---|---|---|
//! | fail | – | – | – | `kernel-netlink` |
//! | pass | fail | – | – | `criu-netns` |
//! | pass | pass | fail with the `empty-ns` signature | pass | `runtime-empty-ns` |
//! | pass | pass | pass | pass | `runtime-preserves-netns` |
//! | pass | pass | any | fail | `external-netns-broken` |
//! | anything that could not run or does not decide a row | | | | `inconclusive` |

use crate::evidence::result::{RungName, RungResult, Status, Verdict, VerdictCode};

/// Role of the assertions that decide a rung's status (`probes/<rung>.toml`).
pub const ROLE_PASS: &str = "pass";
/// Role of the assertions that make up the runtime `empty_ns` signature in the oci rung.
pub const ROLE_EMPTY_NS: &str = "empty-ns";

/// The summary `netprobe-result.json` records for `criu-netns` (kept as it is: evidence already
/// written holds it, and `verify` compares it).
const CRIU_NETNS_RECORDED: &str = "CRIU (or a kernel feature it needs) loses the network namespace";

/// What the printed `verdict:` line says for `criu-netns` instead of [`CRIU_NETNS_RECORDED`]:
/// the criu rung fails on any difference between the state before the dump and after the
/// restore, be it every link or one route, so the line says "not as it was" and the
/// attribution clause after it says how much.
const CRIU_NETNS_FOR_PEOPLE: &str =
    "CRIU (or a kernel feature it needs) does not bring the network namespace back as it was";

/// Status of a rung from its assertions: `pass` when every `role = "pass"` assertion holds
/// (and there is at least one), else `fail`. Fail closed: a rung with no pass-role assertion
/// fails, since nothing proves it passed. Rungs that errored keep `error` (decided by the runner).
pub fn status_from_assertions(assertions: &[crate::evidence::result::AssertionResult]) -> Status {
    let mut any = false;
    for a in assertions.iter().filter(|a| a.role == ROLE_PASS) {
        any = true;
        if !a.passed {
            return Status::Fail;
        }
    }
    if any { Status::Pass } else { Status::Fail }
}

fn ids(
    rung: &RungResult,
    pred: impl Fn(&crate::evidence::result::AssertionResult) -> bool,
) -> Vec<String> {
    rung.assertions
        .iter()
        .filter(|a| pred(a))
        .map(|a| format!("{}/{}", rung.name, a.id))
        .collect()
}

/// The pass-role assertions of a passing rung (what its `pass` rests on).
fn passing(rung: &RungResult) -> Vec<String> {
    ids(rung, |a| a.role == ROLE_PASS && a.passed)
}

/// The pass-role assertions that failed (what a `fail` rests on).
fn failing(rung: &RungResult) -> Vec<String> {
    ids(rung, |a| a.role == ROLE_PASS && !a.passed)
}

/// True when the rung carries the runtime `empty_ns` signature: at least one `empty-ns`
/// assertion, and all of them hold (no netns image, `No netns-` at restore, no `LD: Got link`
/// after `Dump NET namespace info`, `lo` DOWN without 127.0.0.1/8 after restore).
pub fn has_empty_ns_signature(rung: &RungResult) -> bool {
    let sig: Vec<_> = rung
        .assertions
        .iter()
        .filter(|a| a.role == ROLE_EMPTY_NS)
        .collect();
    !sig.is_empty() && sig.iter().all(|a| a.passed)
}

fn inconclusive(reason: String, rests_on: Vec<String>) -> Verdict {
    Verdict {
        code: VerdictCode::Inconclusive,
        summary: reason.clone(),
        rests_on,
        reason: Some(reason),
    }
}

fn decided(code: VerdictCode, summary: &str, rests_on: Vec<String>) -> Verdict {
    Verdict {
        code,
        summary: summary.to_string(),
        rests_on,
        reason: None,
    }
}

/// Why a rung cannot take part in a decision (the verdict's `inconclusive` reason).
#[derive(Debug, thiserror::Error)]
enum NotDecisive {
    /// The rung is missing or was skipped.
    #[error("rung {0} was not run (add it to --phases)")]
    NotRun(RungName),
    /// The rung errored; `reason` is its recorded error.
    #[error("rung {name} could not run: {reason}")]
    CouldNotRun {
        /// The rung.
        name: RungName,
        /// Its recorded error, or `no reason recorded`.
        reason: String,
    },
}

/// Why a rung cannot take part in a decision, if it cannot (missing, skipped or errored).
fn not_decisive(rungs: &[RungResult], name: RungName) -> Result<&RungResult, NotDecisive> {
    match rungs.iter().find(|r| r.name == name) {
        None => Err(NotDecisive::NotRun(name)),
        Some(r) => match r.status {
            Status::Skipped => Err(NotDecisive::NotRun(name)),
            Status::Error => Err(NotDecisive::CouldNotRun {
                name,
                reason: r
                    .error
                    .as_deref()
                    .unwrap_or("no reason recorded")
                    .to_string(),
            }),
            Status::Pass | Status::Fail => Ok(r),
        },
    }
}

/// Computes the verdict from the rung results (any order; missing rungs count as not run).
///
/// Pure: no I/O. The result names every assertion it rests on as `<rung>/<id>`. When the
/// deciding rung (criu for `criu-netns`, oci for `runtime-empty-ns`, external-netns for
/// `external-netns-broken`) carries an `attribution` fact with losses, the summary ends with
/// which step lost how many facts (issue 14; `verify` recomputes that fact from the folder).
pub fn compute(rungs: &[RungResult]) -> Verdict {
    let mut v = compute_code(rungs);
    if let Some((rung, c)) = deciding_counts(v.code, rungs) {
        v.summary = format!("{}{}", v.summary, recorded_clause(rung, c));
    }
    v
}

/// The deciding rung of verdict `code` (criu for `criu-netns`, oci for `runtime-empty-ns`,
/// external-netns for `external-netns-broken`) and its attribution's counts (step → number
/// of facts lost or changed), when it records any.
fn deciding_counts(
    code: VerdictCode,
    rungs: &[RungResult],
) -> Option<(RungName, &serde_json::Map<String, serde_json::Value>)> {
    let deciding = match code {
        VerdictCode::CriuNetns => RungName::Criu,
        VerdictCode::RuntimeEmptyNs => RungName::Oci,
        VerdictCode::ExternalNetnsBroken => RungName::ExternalNetns,
        _ => return None,
    };
    let counts = rungs
        .iter()
        .find(|r| r.name == deciding)?
        .facts
        .get("attribution")?
        .get("counts")?
        .as_object()
        .filter(|c| !c.is_empty())?;
    Some((deciding, counts))
}

/// The clause [`compute`] appends to the summary that `netprobe-result.json` records (kept as
/// it is: evidence already written holds it, and `verify` compares it):
/// `; lost facts by step (<rung>/attribution): <step> <n>, …`.
fn recorded_clause(rung: RungName, c: &serde_json::Map<String, serde_json::Value>) -> String {
    let parts: Vec<String> = c.iter().map(|(k, n)| format!("{k} {n}")).collect();
    format!(
        "; lost facts by step ({rung}/attribution): {}",
        parts.join(", ")
    )
}

/// The verdict's summary for people (the `verdict:` line `netprobe run` prints): the recorded
/// summary, with the attribution clause [`compute`] appends said in words when it is the one
/// the deciding rung's counts give — `<rung>/attribution: 7 facts lost or changed, attributed
/// to runtime-choice (each link, address, route, rule, sysctl or netfilter table counts once,
/// however many of its fields changed)`. For `criu-netns` the head says the namespace does not
/// come back "as it was" (the recorded "loses the network namespace" reads as all of it, when
/// one lost route fails the rung), and when the oci rung failed with the empty-ns signature
/// ([`has_empty_ns_signature`]) the line says so: every rung runs, but the verdict names only the
/// first broken rung, so the verdict alone would hide it. Any other summary is returned as it is.
pub fn summary_for_people(v: &Verdict, rungs: &[RungResult]) -> String {
    let mut s = counts_in_words(v, rungs);
    if v.code == VerdictCode::CriuNetns {
        if let Some(rest) = s.strip_prefix(CRIU_NETNS_RECORDED) {
            s = format!("{CRIU_NETNS_FOR_PEOPLE}{rest}");
        }
        let oci = rungs.iter().find(|r| r.name == RungName::Oci);
        if oci.is_some_and(|r| r.status == Status::Fail && has_empty_ns_signature(r)) {
            s.push_str("; the oci rung, after it on the ladder, also shows the runtime's empty-ns signature (see its assertions)");
        }
    }
    s
}

/// The recorded summary with the attribution clause [`compute`] appends said in words when it
/// is the one the deciding rung's counts give (see [`summary_for_people`]); any other summary as
/// it is.
fn counts_in_words(v: &Verdict, rungs: &[RungResult]) -> String {
    let Some((rung, c)) = deciding_counts(v.code, rungs) else {
        return v.summary.clone();
    };
    let Some(head) = v.summary.strip_suffix(&recorded_clause(rung, c)) else {
        return v.summary.clone();
    };
    let n = |x: &serde_json::Value| x.as_u64().unwrap_or(0);
    let total: u64 = c.values().map(n).fold(0, u64::saturating_add);
    let to = match c.len() {
        1 => c.keys().map(String::as_str).collect::<String>(),
        _ => c
            .iter()
            .map(|(k, x)| format!("{k} {}", n(x)))
            .collect::<Vec<_>>()
            .join(", "),
    };
    let facts = if total == 1 { "fact" } else { "facts" };
    format!(
        "{head}; {rung}/attribution: {total} {facts} lost or changed, attributed to {to} (each link, address, route, rule, sysctl or netfilter table counts once, however many of its fields changed)"
    )
}

fn compute_code(rungs: &[RungResult]) -> Verdict {
    let kernel = match not_decisive(rungs, RungName::Kernel) {
        Ok(r) => r,
        Err(why) => return inconclusive(why.to_string(), vec![]),
    };
    if kernel.status == Status::Fail {
        return decided(
            VerdictCode::KernelNetlink,
            "the kernel does not answer CRIU's link dump in a fresh netns",
            failing(kernel),
        );
    }
    let mut rests = passing(kernel);
    let criu = match not_decisive(rungs, RungName::Criu) {
        Ok(r) => r,
        Err(why) => return inconclusive(why.to_string(), rests),
    };
    if criu.status == Status::Fail {
        rests.extend(failing(criu));
        return decided(VerdictCode::CriuNetns, CRIU_NETNS_RECORDED, rests);
    }
    rests.extend(passing(criu));
    let ext = match not_decisive(rungs, RungName::ExternalNetns) {
        Ok(r) => r,
        Err(why) => {
            // The oci rung runs first: if it could not run either, it is named first.
            let why = match not_decisive(rungs, RungName::Oci) {
                Err(first) => format!("{first}; {why}"),
                Ok(_) => why.to_string(),
            };
            return inconclusive(why, rests);
        }
    };
    if ext.status == Status::Fail {
        rests.extend(failing(ext));
        return decided(
            VerdictCode::ExternalNetnsBroken,
            "the external-netns workaround itself fails here",
            rests,
        );
    }
    let oci = match not_decisive(rungs, RungName::Oci) {
        Ok(r) => r,
        Err(why) => return inconclusive(why.to_string(), rests),
    };
    if oci.status == Status::Pass {
        rests.extend(passing(oci));
        rests.extend(passing(ext));
        return decided(
            VerdictCode::RuntimePreservesNetns,
            "the runtime keeps the network namespace through checkpoint/restore: the empty-ns finding does not hold for this runtime/CRIU pair",
            rests,
        );
    }
    if has_empty_ns_signature(oci) {
        rests.extend(failing(oci));
        rests.extend(ids(oci, |a| a.role == ROLE_EMPTY_NS));
        rests.extend(passing(ext));
        return decided(
            VerdictCode::RuntimeEmptyNs,
            "the runtime's checkpoint carries no network namespace (the empty-ns signature runc's empty_ns = CLONE_NEWNET leaves: no netns image, no link dumped, lo not UP with 127.0.0.1/8 after restore); the kernel, CRIU and the external-netns workaround passed their rungs",
            rests,
        );
    }
    rests.extend(failing(oci));
    inconclusive(
        "the oci rung failed, but not with the empty-ns signature (see its assertions)".into(),
        rests,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::result::AssertionResult;
    use std::collections::BTreeMap;

    fn a(id: &str, role: &str, passed: bool) -> AssertionResult {
        AssertionResult {
            id: id.into(),
            role: role.into(),
            description: id.into(),
            subject: "x".into(),
            expected: "x".into(),
            observed: "x".into(),
            passed,
        }
    }

    /// A rung whose status follows from its assertions (or `Error`/`Skipped` as given).
    fn rung(name: RungName, status: Status, assertions: Vec<AssertionResult>) -> RungResult {
        RungResult {
            name,
            status,
            summary: String::new(),
            started_at: "2026-11-30T00:00:00Z".into(),
            duration_ms: 1,
            timings_ms: BTreeMap::new(),
            facts: BTreeMap::new(),
            assertions,
            artifacts: vec![],
            error: (status == Status::Error).then(|| "criu dump exited 1".to_string()),
        }
    }

    fn pass(name: RungName) -> RungResult {
        rung(name, Status::Pass, vec![a("ok", ROLE_PASS, true)])
    }
    fn fail(name: RungName) -> RungResult {
        rung(name, Status::Fail, vec![a("ok", ROLE_PASS, false)])
    }
    fn oci_empty_ns() -> RungResult {
        rung(
            RungName::Oci,
            Status::Fail,
            vec![
                a("state-preserved", ROLE_PASS, false),
                a("no-netns-image", ROLE_EMPTY_NS, true),
                a("lo-down-after-restore", ROLE_EMPTY_NS, true),
            ],
        )
    }
    use RungName::*;

    #[test]
    fn status_follows_pass_role_only() {
        assert_eq!(
            status_from_assertions(&[a("x", ROLE_PASS, true), a("y", ROLE_EMPTY_NS, false)]),
            Status::Pass
        );
        assert_eq!(
            status_from_assertions(&[a("x", ROLE_PASS, false)]),
            Status::Fail
        );
        // Fail closed: nothing proves a pass.
        assert_eq!(status_from_assertions(&[]), Status::Fail);
        assert_eq!(
            status_from_assertions(&[a("y", ROLE_EMPTY_NS, true)]),
            Status::Fail
        );
    }

    #[test]
    fn row_kernel_netlink() {
        let v = compute(&[fail(Kernel), pass(Criu), pass(Oci), pass(ExternalNetns)]);
        assert_eq!(v.code, VerdictCode::KernelNetlink);
        assert_eq!(v.rests_on, vec!["kernel/ok"]);
        // Decided even when the other rungs were not run.
        let v = compute(&[fail(Kernel), rung(Criu, Status::Skipped, vec![])]);
        assert_eq!(v.code, VerdictCode::KernelNetlink);
    }

    #[test]
    fn row_criu_netns() {
        let v = compute(&[pass(Kernel), fail(Criu)]);
        assert_eq!(v.code, VerdictCode::CriuNetns);
        assert_eq!(v.rests_on, vec!["kernel/ok", "criu/ok"]);
    }

    #[test]
    fn row_runtime_empty_ns() {
        let v = compute(&[
            pass(Kernel),
            pass(Criu),
            oci_empty_ns(),
            pass(ExternalNetns),
        ]);
        assert_eq!(v.code, VerdictCode::RuntimeEmptyNs);
        assert!(v.rests_on.contains(&"oci/no-netns-image".to_string()));
        assert!(v.rests_on.contains(&"oci/state-preserved".to_string()));
        assert!(v.rests_on.contains(&"external-netns/ok".to_string()));
        assert!(v.reason.is_none());
    }

    #[test]
    fn the_printed_summary_says_what_the_attribution_counts() {
        let mut oci = oci_empty_ns();
        oci.facts.insert(
            "attribution".into(),
            serde_json::json!({"counts": {"runtime-choice": 7}}),
        );
        let rungs = [pass(Kernel), pass(Criu), oci, pass(ExternalNetns)];
        let v = compute(&rungs);
        // The recorded summary is unchanged (evidence already written holds it).
        assert!(
            v.summary
                .ends_with("; lost facts by step (oci/attribution): runtime-choice 7"),
            "{}",
            v.summary
        );
        let p = summary_for_people(&v, &rungs);
        assert!(
            p.ends_with("; oci/attribution: 7 facts lost or changed, attributed to runtime-choice (each link, address, route, rule, sysctl or netfilter table counts once, however many of its fields changed)"),
            "{p}"
        );
        assert!(!p.contains("lost facts by step"), "{p}");
        // Several steps: each with its count.
        let mut rungs = rungs;
        rungs[2].facts.insert(
            "attribution".into(),
            serde_json::json!({"counts": {"dump": 2, "runtime-choice": 5}}),
        );
        let v = compute(&rungs);
        let p = summary_for_people(&v, &rungs);
        assert!(
            p.contains(
                "oci/attribution: 7 facts lost or changed, attributed to dump 2, runtime-choice 5 ("
            ),
            "{p}"
        );
        // A summary that is not the one the counts give is printed as recorded.
        let mut edited = v.clone();
        edited.summary.push_str(" (edited)");
        assert_eq!(summary_for_people(&edited, &rungs), edited.summary);
    }

    /// `criu-netns` printed: "not as it was" (one lost route fails the criu rung as every lost
    /// link does), the counts, and the oci rung's empty-ns signature when it shows one; the
    /// recorded summary keeps its words.
    #[test]
    fn the_printed_criu_netns_line_says_how_much_and_names_the_oci_signature() {
        let mut criu = fail(Criu);
        criu.facts.insert(
            "attribution".into(),
            serde_json::json!({"counts": {"dump": 1}}),
        );
        let rungs = [pass(Kernel), criu, oci_empty_ns(), pass(ExternalNetns)];
        let v = compute(&rungs);
        assert_eq!(v.code, VerdictCode::CriuNetns);
        assert!(v.summary.starts_with(CRIU_NETNS_RECORDED), "{}", v.summary);
        let p = summary_for_people(&v, &rungs);
        assert!(
            p.starts_with("CRIU (or a kernel feature it needs) does not bring the network namespace back as it was; criu/attribution: 1 fact lost or changed, attributed to dump ("),
            "{p}"
        );
        assert!(!p.contains("loses the network namespace"), "{p}");
        assert!(
            p.ends_with("; the oci rung, after it on the ladder, also shows the runtime's empty-ns signature (see its assertions)"),
            "{p}"
        );
        // No signature (oci passed, failed otherwise, or did not run): nothing said of it.
        for oci in [pass(Oci), fail(Oci), rung(Oci, Status::Skipped, vec![])] {
            let rungs = [pass(Kernel), fail(Criu), oci, pass(ExternalNetns)];
            let p = summary_for_people(&compute(&rungs), &rungs);
            assert_eq!(p, CRIU_NETNS_FOR_PEOPLE, "{p}");
        }
    }

    #[test]
    fn row_runtime_preserves_netns() {
        let v = compute(&[pass(Kernel), pass(Criu), pass(Oci), pass(ExternalNetns)]);
        assert_eq!(v.code, VerdictCode::RuntimePreservesNetns);
    }

    #[test]
    fn row_external_netns_broken_whatever_oci_did() {
        for oci in [
            pass(Oci),
            oci_empty_ns(),
            fail(Oci),
            rung(Oci, Status::Error, vec![]),
        ] {
            let v = compute(&[pass(Kernel), pass(Criu), oci, fail(ExternalNetns)]);
            assert_eq!(v.code, VerdictCode::ExternalNetnsBroken);
        }
    }

    #[test]
    fn when_both_runtime_rungs_could_not_run_the_first_broken_is_named_first() {
        let v = compute(&[
            pass(Kernel),
            pass(Criu),
            rung(Oci, Status::Error, vec![]),
            rung(ExternalNetns, Status::Error, vec![]),
        ]);
        assert_eq!(v.code, VerdictCode::Inconclusive);
        let why = v.reason.unwrap();
        let (oci, ext) = (
            why.find("rung oci could not run"),
            why.find("rung external-netns could not run"),
        );
        assert!(oci.is_some() && ext.is_some() && oci < ext, "{why}");
    }

    #[test]
    fn inconclusive_rows() {
        // A rung that could not run.
        let v = compute(&[rung(Kernel, Status::Error, vec![])]);
        assert_eq!(v.code, VerdictCode::Inconclusive);
        assert!(
            v.reason
                .unwrap()
                .contains("kernel could not run: criu dump exited 1")
        );
        // Only the cheap rungs were requested.
        let v = compute(&[pass(Kernel), pass(Criu), rung(Oci, Status::Skipped, vec![])]);
        assert_eq!(v.code, VerdictCode::Inconclusive);
        assert!(v.reason.unwrap().contains("external-netns was not run"));
        // The oci rung failed without the empty-ns signature.
        let odd = rung(
            Oci,
            Status::Fail,
            vec![
                a("state-preserved", ROLE_PASS, false),
                a("no-netns-image", ROLE_EMPTY_NS, false),
            ],
        );
        let v = compute(&[pass(Kernel), pass(Criu), odd, pass(ExternalNetns)]);
        assert_eq!(v.code, VerdictCode::Inconclusive);
        // The oci rung errored while external-netns passed.
        let v = compute(&[
            pass(Kernel),
            pass(Criu),
            rung(Oci, Status::Error, vec![]),
            pass(ExternalNetns),
        ]);
        assert_eq!(v.code, VerdictCode::Inconclusive);
        // Nothing at all.
        assert_eq!(compute(&[]).code, VerdictCode::Inconclusive);
    }
}
