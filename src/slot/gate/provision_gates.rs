//! `provision`'s binary and probe gates (before anything is created): the runtime and CRIU
//! binaries found and pinned, then the probe evidence that proves that pair (or its recorded
//! override). Used by [`crate::slot::verb::provision`].

use super::pure_checks;
use crate::host::{self, BinaryKind};
use crate::slot::error::SlotError;
use crate::slot::gate::GateId;
use crate::slot::record::verb_run::VerbRun;
use crate::slot::state::{BinaryPin, ProbeGateMode, ProbeGateRecord, ScriptAllowed};
use serde_json::json;
use std::path::PathBuf;

/// Runtime and CRIU binaries: must exist and be recognised (host refusal otherwise); their
/// facts are recorded as the slot's pins. Not given, each is the one the `--probe-evidence` run
/// used (its `netprobe-result.json`, `host.runtime.path` / `host.criu.path`: the pair the probe
/// gate then proves by sha256), else runc in PATH and [`host::default_criu`]; where each came
/// from is the fact `binaries_from`.
pub(in crate::slot) fn binary_gates(
    run: &mut VerbRun,
) -> Result<(BinaryPin, BinaryPin), SlotError> {
    let probed = run
        .args
        .probe_evidence
        .as_deref()
        .and_then(|d| crate::evidence::read_result(d).ok())
        .map(|r| {
            let path = |b: Option<&crate::evidence::result::BinaryFacts>| {
                b.map(|b| PathBuf::from(&b.path))
            };
            (path(r.host.runtime.as_ref()), path(r.host.criu.as_ref()))
        })
        .unwrap_or((None, None));
    let from = |given: bool, probed: bool| match (given, probed) {
        (true, _) => "given",
        (false, true) => "probe evidence",
        (false, false) => "default",
    };
    run.fact(
        "binaries_from",
        json!({
            "runtime": from(run.args.runtime.is_some(), probed.0.is_some()),
            "criu": from(run.args.criu.is_some(), probed.1.is_some()),
        }),
    );
    let rt_path = run
        .args
        .runtime
        .clone()
        .or(probed.0)
        .unwrap_or_else(host::default_runtime);
    let cr_path = run
        .args
        .criu
        .clone()
        .or(probed.1)
        .unwrap_or_else(host::default_criu);
    let rt = binary_found(
        run,
        GateId::RuntimeBinaryFound,
        &rt_path,
        BinaryKind::Runtime,
    )?;
    let cr = binary_found(run, GateId::CriuBinaryFound, &cr_path, BinaryKind::Criu)?;
    Ok((rt, cr))
}

/// Gate `id`: the `kind` binary at `path` exists and is recognised; records its path, version
/// and sha256 as a fact and returns them as the slot's pin. Errors: [`host::binary_facts`]'s.
fn binary_found(
    run: &mut VerbRun,
    id: GateId,
    path: &std::path::Path,
    kind: BinaryKind,
) -> Result<BinaryPin, SlotError> {
    let f = host::binary_facts(path, kind).map_err(|e| run.fail(id, e.to_string()))?;
    let flag = id.name().trim_end_matches("-binary");
    let script = match &f.script_interpreter {
        None => None,
        Some(i) => Some(script_allowed(run, id, &f.path, i, kind, flag)?),
    };
    let d = format!(
        "{} version {} sha256 {} (recorded){}",
        f.path,
        f.version,
        f.sha256,
        script.as_ref().map_or(String::new(), |s| format!(
            "; a script run by {}, accepted by --allow-script-binaries: {}",
            s.interpreter, s.reason
        ))
    );
    run.gate(id, Ok(d))?;
    let mut fact = json!({"path": f.path, "version": f.version, "sha256": f.sha256});
    if let Some(s) = &script {
        fact["script_interpreter"] = json!(s.interpreter);
        fact["script_allowed"] = json!(s.reason);
    }
    run.fact(flag, fact);
    Ok(BinaryPin {
        path: PathBuf::from(&f.path),
        sha256: f.sha256,
        version: Some(f.version),
        kind: None,
        sealed: None,
        script,
    })
}

/// A `kind` binary at `path` that is a `#!` script run by `interpreter`: refused (gate `id`,
/// host class, exit 3) unless `--allow-script-binaries REASON` accepts it, which is declared
/// and returned for `state.json`.
///
/// Errors: the gate's refusal naming the script, its interpreter and both ways out.
fn script_allowed(
    run: &mut VerbRun,
    id: GateId,
    path: &str,
    interpreter: &str,
    kind: BinaryKind,
    flag: &str,
) -> Result<ScriptAllowed, SlotError> {
    let label = kind.label();
    let Some(reason) = run.args.allow_script_binaries.clone() else {
        return Err(run.fail(
            id,
            format!(
                "{path} is not an ELF executable but a script run by {interpreter}: a slot seals and proves the file it is given, so it would prove the script, not the {label} the script runs; name that {label} itself with --{flag}, or pass --allow-script-binaries REASON to run the script all the same (recorded in state.json)"
            ),
        ));
    };
    run.declare(format!(
        "{flag} {path} is not an ELF executable but a script run by {interpreter}, accepted by --allow-script-binaries ({reason}): the slot seals and proves the script, not the {label} it runs"
    ));
    Ok(ScriptAllowed {
        interpreter: interpreter.to_string(),
        reason,
    })
}

/// The probe gate (`probe-verdict`): the `--probe-evidence` run, verified again, has a passing
/// verdict and ran the runtime `rt` and CRIU `cr` (by sha256: [`pure_checks::probe_evidence`]); or
/// `--no-probe-gate --reason` overrides it (recorded as not proven, and declared). Errors:
/// neither given, or the evidence does not prove the pair.
pub(in crate::slot) fn probe_gate(
    run: &mut VerbRun,
    rt: &BinaryPin,
    cr: &BinaryPin,
) -> Result<ProbeGateRecord, SlotError> {
    if run.args.no_probe_gate {
        let reason = run.args.reason.clone().unwrap_or_default();
        run.record(
            GateId::ProbeVerdict,
            Err(format!("OVERRIDDEN by --no-probe-gate: {reason}")),
        );
        run.declare(format!(
            "The probe gate was overridden at provision (--no-probe-gate): {reason}"
        ));
        return Ok(ProbeGateRecord {
            mode: ProbeGateMode::Override,
            evidence_dir: None,
            verdict: None,
            reason: Some(reason),
        });
    }
    let Some(dir) = run.args.probe_evidence.clone() else {
        let e = "no --probe-evidence DIR (or --no-probe-gate --reason TEXT) given";
        return Err(run.fail(GateId::ProbeVerdict, e));
    };
    let (code, d) =
        pure_checks::probe_evidence(&dir, rt, cr).map_err(|e| run.fail(GateId::ProbeVerdict, e))?;
    run.gate(GateId::ProbeVerdict, Ok(d))?;
    Ok(ProbeGateRecord {
        mode: ProbeGateMode::Evidence,
        evidence_dir: Some(dir),
        verdict: Some(code.as_str().to_string()),
        reason: None,
    })
}
