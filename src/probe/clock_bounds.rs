//! `verify`'s bounds on the recorded durations of a run. The durations are clock readings no
//! file holds, so they are not re-derived; but how the runner measures them makes two relations
//! hold by construction, and a result breaking one was edited:
//!
//! - the run's `duration_ms` is at least the sum of its rungs' `duration_ms`: `runner::run`
//!   starts its monotonic clock (`Instant`) before the first rung, the rungs run one after
//!   another (`runner::run_rungs`, one `run_one` at a time, each timing itself with its own
//!   `Instant`), and the run's duration is read after the last rung, when the result is written;
//! - a rung's `duration_ms` is at least the sum of its `timings_ms`: every timing is one
//!   `RungOutput::timed` call inside the rung's own measurement, and the calls cannot nest or
//!   overlap (each borrows the rung's `RungOutput` mutably for the step it times: `dump` then
//!   `restore`, `checkpoint` then `restore`, the kernel rung's `dumps`).
//!
//! Every reading is rounded down to whole milliseconds (`Duration::as_millis`), and a sum of
//! values rounded down is at most the rounded-down total (⌊a⌋ + ⌊b⌋ ≤ ⌊a + b⌋), so the bounds
//! hold exactly, with no slack. The RFC 3339 times (`started_at`, `finished_at`) are wall-clock
//! readings (`CLOCK_REALTIME`, which an NTP step or `date -s` moves backwards), so neither their
//! order nor their difference against `duration_ms` is guaranteed: they are not checked.

use crate::evidence::result::RungResult;
use crate::probe::rederive::Rederived;

/// Checks the two duration bounds of a run's recorded `duration_ms` (`run_ms`) and `rungs` (see
/// the module docs); each broken one is a mismatch naming the numbers, and the bounds checked
/// are named in `out.checked`.
pub fn check(run_ms: u64, rungs: &[RungResult], out: &mut Rederived) {
    // Summed in u128: recorded values are any u64 a file holds, and a wrapped u64 sum would
    // let a forged huge duration pass.
    let sum: u128 = rungs.iter().map(|r| u128::from(r.duration_ms)).sum();
    if sum > u128::from(run_ms) {
        let parts: Vec<String> = rungs
            .iter()
            .filter(|r| r.duration_ms > 0)
            .map(|r| format!("{} {}", r.name, r.duration_ms))
            .collect();
        out.mismatches.push(format!(
            "duration_ms: recorded {} ms for the run, yet its rungs' duration_ms add up to {sum} ms ({}): the rungs run one after another within the run's own measurement (monotonic clock, each rounded down to whole ms), so their sum cannot exceed it",
            run_ms,
            parts.join(" + ")
        ));
    }
    for r in rungs {
        let sum: u128 = r.timings_ms.values().map(|&v| u128::from(v)).sum();
        if sum > u128::from(r.duration_ms) {
            let parts: Vec<String> = r
                .timings_ms
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            out.mismatches.push(format!(
                "rungs[{}].timings_ms: {} add up to {sum} ms, more than the rung's duration_ms {} ms: each timing is a step run one after another within the rung's own measurement (monotonic clock, each rounded down to whole ms), so their sum cannot exceed it",
                r.name,
                parts.join(" + "),
                r.duration_ms
            ));
        }
    }
    out.checked.push(
        "duration_ms bounds (the run's duration_ms at least the sum of its rungs' duration_ms, each rung's duration_ms at least the sum of its timings_ms)"
            .into(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::result::{RungName, RungResult, Status};

    fn result(run_ms: u64, rungs: &[(u64, &[(&str, u64)])]) -> (u64, Vec<RungResult>) {
        let rungs = rungs
            .iter()
            .zip(RungName::ALL)
            .map(|((ms, timings), name)| RungResult {
                name,
                status: Status::Pass,
                summary: String::new(),
                started_at: String::new(),
                duration_ms: *ms,
                timings_ms: timings.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                facts: Default::default(),
                assertions: vec![],
                artifacts: vec![],
                error: None,
            })
            .collect();
        (run_ms, rungs)
    }

    fn mismatches((run_ms, rungs): &(u64, Vec<RungResult>)) -> Vec<String> {
        let mut out = Rederived::default();
        check(*run_ms, rungs, &mut out);
        assert_eq!(out.checked.len(), 1);
        out.mismatches
    }

    #[test]
    fn durations_as_a_run_measures_them_pass() {
        // trial 20's run; sums equal to the bound are possible (rounding down) and pass.
        let r = result(
            1496,
            &[
                (6, &[("dumps", 0)]),
                (341, &[("dump", 190), ("restore", 122)]),
                (485, &[("checkpoint", 126), ("restore", 155)]),
                (578, &[("checkpoint", 135), ("restore", 243)]),
            ],
        );
        assert_eq!(mismatches(&r), Vec::<String>::new());
        let tight = result(10, &[(4, &[("dump", 2), ("restore", 2)]), (6, &[])]);
        assert_eq!(mismatches(&tight), Vec::<String>::new());
    }

    /// Finding 6 of trial 20: `duration_ms=5`, `rungs[oci].duration_ms=99999`,
    /// `timings_ms={checkpoint:1, restore:99998}` verified.
    #[test]
    fn forged_durations_are_mismatches_naming_the_numbers() {
        let r = result(
            5,
            &[
                (6, &[]),
                (341, &[]),
                (99999, &[("checkpoint", 1), ("restore", 99998)]),
            ],
        );
        assert_eq!(mismatches(&r).len(), 1, "{:?}", mismatches(&r));
        assert!(
            mismatches(&r)[0].starts_with(
                "duration_ms: recorded 5 ms for the run, yet its rungs' duration_ms add up to 100346 ms (kernel 6 + criu 341 + oci 99999)"
            ),
            "{:?}",
            mismatches(&r)
        );
        // Values whose u64 sum wraps (trial 21): summed wide, never wrapped into a pass.
        let r = result(
            1000,
            &[
                (u64::MAX - 999, &[]),
                (1001, &[("dump", u64::MAX), ("restore", 2)]),
            ],
        );
        let m = mismatches(&r);
        assert_eq!(m.len(), 2, "{m:?}");
        assert!(m[0].contains("add up to 18446744073709551617 ms"), "{m:?}");
        assert!(m[1].contains("add up to 18446744073709551617 ms"), "{m:?}");
        let r = result(100, &[(50, &[("checkpoint", 30), ("restore", 21)])]);
        let m = mismatches(&r);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(
            m[0].starts_with(
                "rungs[kernel].timings_ms: checkpoint 30 + restore 21 add up to 51 ms, more than the rung's duration_ms 50 ms"
            ),
            "{m:?}"
        );
    }
}
