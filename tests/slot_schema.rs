//! `status` output validates against evidence-schema/slot-state.schema.json; the probe-verdict
//! gate reads netprobe-result.json.
mod slot_support;
use netprobe::evidence::result::*;
use netprobe::slot::{Verb, run_verb};
use slot_support::*;
use std::collections::BTreeMap;

fn result(code: VerdictCode, ext: Status, rt: &str, cr: &str) -> RunResult {
    let bin = |p: &str, s: &str| BinaryFacts {
        path: p.into(),
        version: "x".into(),
        version_output: "x".into(),
        sha256: s.into(),
        bytes: 1,
    };
    RunResult {
        schema_version: SCHEMA_VERSION,
        tool: "netprobe".into(),
        tool_version: "0".into(),
        command: vec![],
        started_at: "2025-01-01T00:00:00.000Z".into(),
        finished_at: "2025-01-01T00:00:01.000Z".into(),
        duration_ms: 0,
        phases: RungName::ALL.to_vec(),
        host: HostFacts {
            kernel_release: String::new(),
            kernel_version: String::new(),
            machine: String::new(),
            os: None,
            cgroup: "v1".into(),
            criu: Some(bin("/c", cr)),
            runtime: Some(bin("/r", rt)),
        },
        pins: vec![],
        declared_differences: vec![],
        rungs: vec![RungResult {
            name: RungName::ExternalNetns,
            status: ext,
            summary: String::new(),
            started_at: "2025-01-01T00:00:00.000Z".into(),
            duration_ms: 0,
            timings_ms: BTreeMap::new(),
            facts: BTreeMap::new(),
            assertions: vec![],
            artifacts: vec![],
            error: None,
        }],
        verdict: Verdict {
            code,
            summary: String::new(),
            rests_on: vec![],
            reason: None,
        },
        artifacts: vec![],
    }
}

#[test]
fn status_validates_and_probe_gate() {
    require_root();
    let _s = serial();
    let v = slot_state_validator();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![41]);
    let img = sleep_image(tmp.path());
    let (rt, _) = netprobe::evidence::sha256_file(&netprobe::host::default_runtime()).unwrap();
    let (cr, _) = netprobe::evidence::sha256_file(&netprobe::host::default_criu()).unwrap();
    let write = |name: &str, r: &RunResult| {
        let d = tmp.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(RESULT_FILE), serde_json::to_vec(r).unwrap()).unwrap();
        d
    };
    let prov = |slot: &str, ev: Option<std::path::PathBuf>| {
        let mut a = netprobe::slot::SlotArgs::new(Verb::Provision, slot, &sd);
        a.holder_exe = Some(EXE.into());
        a.image = Some(img.clone());
        a.probe_evidence = ev;
        run_verb(&a)
    };
    // Failing probe results: refused before anything is started.
    for (i, r) in [
        result(VerdictCode::CriuNetns, Status::Pass, &rt, &cr),
        result(VerdictCode::RuntimeEmptyNs, Status::Fail, &rt, &cr),
        result(
            VerdictCode::RuntimeEmptyNs,
            Status::Pass,
            &"0".repeat(64),
            &cr,
        ),
        result(
            VerdictCode::RuntimeEmptyNs,
            Status::Pass,
            &rt,
            &"0".repeat(64),
        ),
    ]
    .iter()
    .enumerate()
    {
        let e = prov(&format!("{}", 50 + i), Some(write(&format!("bad{i}"), r))).unwrap_err();
        assert_eq!(
            (e.exit_code(), e.gate.as_deref()),
            (1, Some("probe-verdict")),
            "{e}"
        );
        assert!(
            !sd.join(format!("slot-{}", 50 + i)).exists(),
            "a refused provision creates no slot"
        );
    }
    // A result that does not validate against netprobe-result.schema.json is never trusted.
    let mut bad =
        serde_json::to_value(result(VerdictCode::RuntimeEmptyNs, Status::Pass, &rt, &cr)).unwrap();
    bad["started_at"] = "yesterday".into();
    let d = tmp.path().join("invalid");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join(RESULT_FILE), serde_json::to_vec(&bad).unwrap()).unwrap();
    let e = prov("54", Some(d)).unwrap_err();
    assert_eq!(e.gate.as_deref(), Some("probe-verdict"), "{e}");
    assert!(e.message.contains("schema"), "{e}");
    assert!(!sd.join("slot-54").exists());
    let e = prov("55", None).unwrap_err();
    assert_eq!(e.gate.as_deref(), Some("probe-verdict"));
    assert_released(&sd, &[]);

    // Not provisioned: valid document with exists=false.
    assert_valid(&v, &ok(Verb::Status, "41", &sd).to_json());
    let p = prov(
        "41",
        Some(write(
            "good",
            &result(VerdictCode::RuntimeEmptyNs, Status::Pass, &rt, &cr),
        )),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(gate(&p, "probe-verdict").proven);
    assert_eq!(
        state(&sd, 41).probe_gate.verdict.as_deref(),
        Some("runtime-empty-ns")
    );
    assert_valid(&v, &ok(Verb::Status, "41", &sd).to_json());
    ok(Verb::Snapshot, "41", &sd);
    assert_valid(&v, &ok(Verb::Status, "41", &sd).to_json());
    let holders = holder_pids(&sd);
    ok(Verb::Cleanup, "41", &sd);
    let doc = ok(Verb::Status, "41", &sd).to_json();
    assert_valid(&v, &doc);
    assert_eq!(doc["state"]["phase"], "clean");
    assert_released(&sd, &holders);
}
