//! `verify`'s re-derivation of the run-level fields of `netprobe-result.json`: the host facts
//! (against the hashed `host.json`), the pin checks and the pin sentences of the declared
//! differences (from `host.json` and the pins this binary embeds), the standing declared
//! differences (from the recorded phases and command), the phases (from the rungs), each rung's
//! artifact list (from the run's), and the whole verdict (code, summary, what it rests on,
//! reason) recomputed from the rungs.

use crate::evidence::result::{
    HostFacts, PinCheck, RunResult, RungName, RungResult, Status, Verdict,
};
use crate::host;
use crate::probe::netns_content::NetnsContent;
use crate::probe::rederive::Rederived;
use crate::probe::runner;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Re-derives the run-level fields of `result` from the evidence folder `dir`; `verdict` is
/// the verdict recomputed from the re-verified rungs.
pub fn run_fields(dir: &Path, result: &RunResult, verdict: &Verdict) -> Rederived {
    let mut out = Rederived::default();
    host_and_pins(dir, result, &mut out);
    standing_differences(result, &mut out);
    ladder(&result.rungs, &mut out);
    phases(result, &mut out);
    rung_artifacts(result, &mut out);
    verdict_text(&result.verdict, verdict, &mut out);
    crate::probe::clock_bounds::check(result.duration_ms, &result.rungs, &mut out);
    out.not_rederived.push(
        "command, started_at, finished_at, duration_ms and each rung's started_at, duration_ms, timings_ms (clock readings of the run; the durations only bounded, see duration_ms bounds)".into(),
    );
    out
}

/// `result.host` against `host.json`, then the pins and their declared differences from it.
fn host_and_pins(dir: &Path, result: &RunResult, out: &mut Rederived) {
    let file: HostFacts = match crate::evidence::read_recorded(&dir.join("host.json"))
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(h) => h,
        Err(e) => {
            out.mismatches.push(format!(
                "host, pins, declared_differences: cannot be re-derived: host.json: {e}"
            ));
            return;
        }
    };
    let (rec, got) = (
        serde_json::to_value(&result.host).unwrap_or_default(),
        serde_json::to_value(&file).unwrap_or_default(),
    );
    diff_values("host", &rec, &got, "host.json", out);
    if rec == got {
        out.checked.push("host".into());
    }
    let this = env!("CARGO_PKG_VERSION");
    if result.tool_version != this {
        foreign_pins(result, &file, out);
        return;
    }
    let Some(criu) = &file.criu else {
        out.mismatches
            .push("pins: cannot be re-derived: host.json names no CRIU".into());
        return;
    };
    let pins = host::check_pins(criu, file.runtime.as_ref());
    compare_pins(&result.pins, &pins, out);
    pin_differences(result, &pins, &file, out);
}

/// A result of another netprobe version: its pinned values came from that version's
/// `host/pins.toml`, so they are named as not re-derived (beside this binary's pins); everything
/// else of each pin check is re-derived from them and `host.json` — the observed version,
/// sha256 and size, and whether they match — and a pin that does not match must be declared.
fn foreign_pins(result: &RunResult, file: &HostFacts, out: &mut Rederived) {
    let ours = host::pins();
    let before = out.mismatches.len();
    let mut fresh = Vec::new();
    for r in &result.pins {
        let (seen, our) = match r.name.as_str() {
            "criu" => (file.criu.as_ref(), &ours.criu),
            "runtime" => (file.runtime.as_ref(), &ours.runtime),
            other => {
                out.mismatches
                    .push(format!("pins[{other}]: not a pin netprobe checks"));
                continue;
            }
        };
        let Some(seen) = seen else {
            out.mismatches.push(format!(
                "pins[{}]: host.json names no {} binary",
                r.name, r.name
            ));
            continue;
        };
        let pin = host::Pin {
            name: our.name.clone(),
            version: r.pinned_version.clone(),
            sha256: r.pinned_sha256.clone(),
            bytes: r.pinned_bytes,
        };
        let f = host::check_one(&r.name, &pin, seen);
        let (rv, fv) = (
            serde_json::to_value(r).unwrap_or_default(),
            serde_json::to_value(&f).unwrap_or_default(),
        );
        diff_values(&format!("pins[{}]", r.name), &rv, &fv, "host.json", out);
        out.not_rederived.push(format!(
            "pins[{}].pinned_version, pinned_sha256, pinned_bytes (recorded by netprobe {}: {} sha256 {}; this netprobe {} pins {} sha256 {})",
            r.name,
            result.tool_version,
            r.pinned_version,
            r.pinned_sha256.as_deref().unwrap_or("none"),
            env!("CARGO_PKG_VERSION"),
            our.version,
            our.sha256.as_deref().unwrap_or("none")
        ));
        fresh.push(f);
    }
    for f in fresh.iter().filter(|f| !f.matches) {
        let declared = result
            .declared_differences
            .iter()
            .any(|d| is_pin_sentence(d) && d.starts_with(&format!("{} ", f.name)));
        if !declared {
            out.mismatches.push(format!(
                "declared_differences: pins[{}] does not match, but no declared difference says so",
                f.name
            ));
        }
    }
    if out.mismatches.len() == before {
        out.checked.push(
            "pins (observed values and matches, from host.json and the recorded pinned values)"
                .into(),
        );
    }
    out.not_rederived.push(format!(
        "the wording of the pin sentences in declared_differences (recorded by netprobe {})",
        result.tool_version
    ));
}

/// Each pin check field by field (named `pins[<name>].<field>`).
fn compare_pins(recorded: &[PinCheck], fresh: &[PinCheck], out: &mut Rederived) {
    let names = |p: &[PinCheck]| p.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    if names(recorded) != names(fresh) {
        out.mismatches.push(format!(
            "pins: recorded checks {:?}, host.json gives {:?}",
            names(recorded),
            names(fresh)
        ));
        return;
    }
    for (r, f) in recorded.iter().zip(fresh) {
        let (rv, fv) = (
            serde_json::to_value(r).unwrap_or_default(),
            serde_json::to_value(f).unwrap_or_default(),
        );
        diff_values(
            &format!("pins[{}]", r.name),
            &rv,
            &fv,
            "host.json and host/pins.toml",
            out,
        );
    }
    if recorded == fresh {
        out.checked.push("pins".into());
    }
}

/// Pushes one mismatch per leaf where `rec` and `got` differ, descending into objects both
/// sides have, naming `<what>.<key>…` and the `source` of `got`.
fn diff_values(what: &str, rec: &Value, got: &Value, source: &str, out: &mut Rederived) {
    let (Some(r), Some(g)) = (rec.as_object(), got.as_object()) else {
        if rec != got {
            out.mismatches
                .push(format!("{what}: recorded {rec}, {source} gives {got}"));
        }
        return;
    };
    let keys: std::collections::BTreeSet<&String> = r.keys().chain(g.keys()).collect();
    for k in keys {
        let (a, b) = (r.get(k), g.get(k));
        if let (Some(x), Some(y)) = (a, b)
            && x.is_object()
            && y.is_object()
        {
            diff_values(&format!("{what}.{k}"), x, y, source, out);
        } else if a != b {
            let show = |v: Option<&Value>| v.map_or("nothing".to_string(), |v| v.to_string());
            out.mismatches.push(format!(
                "{what}.{k}: recorded {}, {source} gives {}",
                show(a),
                show(b)
            ));
        }
    }
}

/// True for a sentence of [`host::pin_differences_with_paths`] (not an install-record one).
fn is_pin_sentence(s: &str) -> bool {
    (s.starts_with("criu ") || s.starts_with("runtime "))
        && s.contains(", not the pinned ")
        && !s.contains(": set-up installed ")
}

/// The pin sentences of the declared differences are exactly those the fresh pin checks give.
fn pin_differences(result: &RunResult, pins: &[PinCheck], file: &HostFacts, out: &mut Rederived) {
    let want = host::pin_differences_with_paths(pins, file);
    let before = out.mismatches.len();
    for w in &want {
        if !result.declared_differences.contains(w) {
            out.mismatches.push(format!(
                "declared_differences: missing {w:?} (host.json and host/pins.toml give it)"
            ));
        }
    }
    for d in &result.declared_differences {
        if is_pin_sentence(d) && !want.contains(d) {
            out.mismatches.push(format!(
                "declared_differences: {d:?} is not what host.json and host/pins.toml give"
            ));
        }
    }
    if out.mismatches.len() == before {
        out.checked
            .push("declared_differences (pin sentences)".into());
    }
}

/// The value of option `--name` in `argv` (`--name V` or `--name=V`), the last one given.
pub fn option<'a>(argv: &'a [String], name: &str) -> Option<&'a str> {
    let eq = format!("{name}=");
    let mut found = None;
    for (i, a) in argv.iter().enumerate() {
        if a == name {
            found = argv.get(i + 1).map(String::as_str);
        } else if let Some(v) = a.strip_prefix(&eq) {
            found = Some(v);
        }
    }
    found
}

/// The standing declared differences of the recorded phases and command (`--rootfs`,
/// `--netns`) must all be there; the others (a crun's quirks, install records, a signal
/// handler or subreaper that could not be set up) depend on the host at run time.
fn standing_differences(result: &RunResult, out: &mut Rederived) {
    let rootfs = option(&result.command, "--rootfs").map(PathBuf::from);
    let netns = match option(&result.command, "--netns") {
        Some("rich") => NetnsContent::Rich,
        _ => NetnsContent::Lo,
    };
    let want = runner::standing_differences(&result.phases, rootfs.as_deref(), netns);
    let before = out.mismatches.len();
    for w in &want {
        if !result.declared_differences.contains(w) {
            out.mismatches.push(format!(
                "declared_differences: missing {w:?} (the recorded phases and command give it)"
            ));
        }
    }
    if out.mismatches.len() == before {
        out.checked
            .push("declared_differences (standing sentences)".into());
    }
    let rest = result
        .declared_differences
        .iter()
        .filter(|d| !is_pin_sentence(d) && !want.contains(d))
        .count();
    if rest > 0 {
        out.not_rederived.push(format!(
            "declared_differences: {rest} sentence(s) depending on the host at run time (runtime quirks, install records, signal handling)"
        ));
    }
}

/// `rungs` holds one rung per ladder step, in ladder order ([`RungName::ALL`]: a run records
/// every step, a step not asked for as skipped), and a skipped rung records nothing it could
/// only have got by running (facts, assertions, artifacts, an error, timings, a duration).
fn ladder(rungs: &[RungResult], out: &mut Rederived) {
    let names: Vec<RungName> = rungs.iter().map(|r| r.name).collect();
    if names == RungName::ALL {
        out.checked
            .push("rungs (one per ladder step, in order)".into());
    } else {
        out.mismatches.push(format!(
            "rungs: recorded {names:?}, a run records one rung per ladder step in order {:?}",
            RungName::ALL
        ));
    }
    for r in rungs.iter().filter(|r| r.status == Status::Skipped) {
        let mut held = Vec::new();
        if !r.facts.is_empty() {
            held.push(format!("facts {:?}", r.facts.keys().collect::<Vec<_>>()));
        }
        if !r.assertions.is_empty() {
            held.push(format!("{} assertion(s)", r.assertions.len()));
        }
        if !r.artifacts.is_empty() {
            held.push(format!("{} artifact(s)", r.artifacts.len()));
        }
        if r.error.is_some() {
            held.push("an error".into());
        }
        if !r.timings_ms.is_empty() || r.duration_ms != 0 {
            held.push("timings".into());
        }
        if !held.is_empty() {
            out.mismatches.push(format!(
                "rungs[{}]: skipped, yet it records {}: only a rung that ran has them",
                r.name,
                held.join(", ")
            ));
        }
    }
}

/// `phases` names exactly the rungs that are not skipped.
fn phases(result: &RunResult, out: &mut Rederived) {
    let ran: Vec<RungName> = result
        .rungs
        .iter()
        .filter(|r| r.status != Status::Skipped)
        .map(|r| r.name)
        .collect();
    if ran == result.phases {
        out.checked.push("phases".into());
    } else {
        out.mismatches.push(format!(
            "phases: recorded {:?}, the rungs that ran are {:?}",
            result.phases, ran
        ));
    }
}

/// Each rung's artifact list is the run's artifacts under the rung's folder.
fn rung_artifacts(result: &RunResult, out: &mut Rederived) {
    for r in &result.rungs {
        let prefix = format!("{}/", r.name);
        let want: Vec<_> = result
            .artifacts
            .iter()
            .filter(|a| a.path.starts_with(&prefix))
            .cloned()
            .collect();
        if r.artifacts != want {
            // Name the first entry that differs (path, sha256 or size), or the count.
            let first = r
                .artifacts
                .iter()
                .zip(&want)
                .find(|(a, b)| a != b)
                .map(|(a, b)| {
                    format!(
                        "{} (sha256 {}…, {} bytes) where the run's list has {} (sha256 {}…, {} bytes)",
                        a.path,
                        a.sha256.get(..12).unwrap_or(&a.sha256),
                        a.bytes,
                        b.path,
                        b.sha256.get(..12).unwrap_or(&b.sha256),
                        b.bytes
                    )
                })
                .unwrap_or_else(|| {
                    format!("{} entries where the run's list has {}", r.artifacts.len(), want.len())
                });
            out.mismatches.push(format!(
                "rungs[{}].artifacts: not the run's artifacts under {prefix}: {first}",
                r.name
            ));
        }
    }
}

/// The recorded verdict's summary, rests_on and reason against the recomputed one (the code is
/// compared by `verify` itself).
fn verdict_text(recorded: &Verdict, fresh: &Verdict, out: &mut Rederived) {
    if recorded.summary != fresh.summary {
        out.mismatches.push(format!(
            "verdict.summary: recorded {:?}, the evidence gives {:?}",
            recorded.summary, fresh.summary
        ));
    }
    if recorded.rests_on != fresh.rests_on {
        out.mismatches.push(format!(
            "verdict.rests_on: recorded {:?}, the evidence gives {:?}",
            recorded.rests_on, fresh.rests_on
        ));
    }
    if recorded.reason != fresh.reason {
        out.mismatches.push(format!(
            "verdict.reason: recorded {:?}, the evidence gives {:?}",
            recorded.reason, fresh.reason
        ));
    }
    out.checked
        .push("verdict (code, summary, rests_on, reason)".into());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_read_in_both_spellings() {
        let argv: Vec<String> = ["netprobe", "run", "--rootfs", "/r", "--netns=rich"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(option(&argv, "--rootfs"), Some("/r"));
        assert_eq!(option(&argv, "--netns"), Some("rich"));
        assert_eq!(option(&argv, "--runtime"), None);
    }

    #[test]
    fn the_ladder_is_whole_in_order_and_skipped_rungs_hold_nothing() {
        let rung = |name, status| RungResult {
            name,
            status,
            summary: String::new(),
            started_at: String::new(),
            duration_ms: 0,
            timings_ms: Default::default(),
            facts: Default::default(),
            assertions: vec![],
            artifacts: vec![],
            error: None,
        };
        let check = |rungs: Vec<RungResult>| {
            let mut out = Rederived::default();
            ladder(&rungs, &mut out);
            out
        };
        let whole: Vec<RungResult> = RungName::ALL
            .iter()
            .map(|n| rung(*n, Status::Pass))
            .collect();
        let out = check(whole.clone());
        assert!(out.mismatches.is_empty(), "{:?}", out.mismatches);
        let mut swapped = whole.clone();
        swapped.swap(0, 1);
        assert!(check(swapped).mismatches[0].contains("one rung per ladder step in order"));
        let mut short = whole.clone();
        short.pop();
        assert!(!check(short).mismatches.is_empty());
        let mut forged = whole;
        forged[2] = rung(RungName::Oci, Status::Skipped);
        forged[2]
            .facts
            .insert("restored".into(), serde_json::json!(true));
        forged[2].duration_ms = 5;
        let m = check(forged).mismatches;
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(
            m[0].contains("rungs[oci]: skipped, yet it records facts [\"restored\"], timings"),
            "{m:?}"
        );
    }

    #[test]
    fn pin_sentences_exclude_install_records() {
        assert!(is_pin_sentence(
            "runtime /opt/runc is runc 1.4.3 (sha256 2945…, 1 bytes), not the pinned runc 1.5.2"
        ));
        assert!(!is_pin_sentence(
            "runtime /opt/runc: set-up installed Debian runc 1.4.4 from experimental, not the pinned 1.4.3"
        ));
    }
}

#[cfg(test)]
mod diff_tests {
    use super::*;

    #[test]
    fn nested_differences_name_the_leaf() {
        let mut out = Rederived::default();
        let a = serde_json::json!({"runtime": {"sha256": "00", "bytes": 1}, "os": "x"});
        let b = serde_json::json!({"runtime": {"sha256": "ab", "bytes": 1}, "os": "x"});
        diff_values("host", &a, &b, "host.json", &mut out);
        assert_eq!(
            out.mismatches,
            vec!["host.runtime.sha256: recorded \"00\", host.json gives \"ab\""]
        );
    }
}
