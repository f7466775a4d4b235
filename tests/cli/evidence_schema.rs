//! netprobe-result.schema.json and holder.schema.json against the Rust model.

use netprobe::evidence::result::*;
use netprobe::evidence::{validate_holder, validate_result};
use serde_json::{Value, json};
use std::collections::BTreeMap;

const SHA: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// A fully populated result (every Option both Some and None somewhere).
pub fn sample() -> RunResult {
    let artifact = Artifact {
        path: "criu/dump.log".into(),
        bytes: 0,
        sha256: SHA.into(),
        content: None,
    };
    let bin = BinaryFacts {
        path: "/opt/criu/sbin/criu".into(),
        version: "4.1.1".into(),
        version_output: "Version: 4.1.1\n".into(),
        sha256: SHA.into(),
        bytes: 123,
        script_interpreter: None,
        installed_sha256: None,
    };
    let mut facts = BTreeMap::new();
    facts.insert("pid".to_string(), json!(4242));
    facts.insert(
        "images".to_string(),
        json!({"netns": 1, "list": ["a", null]}),
    );
    let mut timings = BTreeMap::new();
    timings.insert("checkpoint".to_string(), 12u64);
    let rung = |name, status| RungResult {
        name,
        status,
        summary: "lo DOWN".into(),
        started_at: "2025-01-01T12:00:00.123Z".into(),
        duration_ms: 5,
        timings_ms: timings.clone(),
        facts: facts.clone(),
        assertions: vec![AssertionResult {
            id: "state-preserved".into(),
            role: "pass".into(),
            description: "d".into(),
            subject: "netstate-after.json vs netstate-before.json".into(),
            expected: "identical".into(),
            observed: "differs".into(),
            passed: false,
        }],
        artifacts: vec![artifact.clone()],
        error: None,
    };
    let mut errored = rung(RungName::ExternalNetns, Status::Error);
    errored.error = Some("restore: runc exited 1".into());
    RunResult {
        schema_version: SCHEMA_VERSION,
        tool: "netprobe".into(),
        tool_version: "0.1.0".into(),
        command: vec!["netprobe".into(), "run".into()],
        started_at: "2025-01-01T12:00:00Z".into(),
        finished_at: "2025-01-01T12:00:09+00:00".into(),
        duration_ms: 9000,
        phases: RungName::ALL.to_vec(),
        host: HostFacts {
            kernel_release: "6.1.0-28-amd64".into(),
            kernel_version: "#1 SMP".into(),
            machine: "x86_64".into(),
            os: Some("Debian GNU/Linux 12 (bookworm)".into()),
            cgroup: "v2".into(),
            criu: Some(bin.clone()),
            runtime: None,
        },
        pins: vec![PinCheck {
            name: "criu".into(),
            pinned_version: "4.1.1".into(),
            pinned_sha256: Some(SHA.into()),
            pinned_bytes: None,
            observed_version: "4.1.1".into(),
            observed_sha256: SHA.into(),
            observed_bytes: 123,
            installed_sha256: None,
            matches: true,
        }],
        declared_differences: vec!["the network namespace is harness-owned".into()],
        rungs: vec![
            rung(RungName::Kernel, Status::Pass),
            rung(RungName::Criu, Status::Pass),
            rung(RungName::Oci, Status::Fail),
            errored,
        ],
        verdict: Verdict {
            code: VerdictCode::Inconclusive,
            summary: "s".into(),
            rests_on: vec!["oci/state-preserved".into()],
            reason: Some("external-netns: restore failed".into()),
        },
        artifacts: vec![artifact],
    }
}

fn errors_of(v: &Value) -> Vec<String> {
    validate_result(v).expect_err("invalid document accepted")
}

fn assert_names(errors: &[String], pointer: &str) {
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with(&format!("{pointer}: "))),
        "no error at {pointer}: {errors:#?}"
    );
}

#[test]
fn a_constructed_result_validates_and_round_trips() {
    let _baton = crate::common::baton(module_path!());
    let r = sample();
    let v = serde_json::to_value(&r).unwrap();
    validate_result(&v).unwrap();
    let back: RunResult = serde_json::from_value(v).unwrap();
    assert_eq!(back, r);
}

#[test]
fn every_enum_value_validates() {
    let _baton = crate::common::baton(module_path!());
    let mut r = sample();
    for code in VerdictCode::ALL {
        r.verdict.code = code;
        for status in [Status::Pass, Status::Fail, Status::Error, Status::Skipped] {
            r.rungs[0].status = status;
            validate_result(&serde_json::to_value(&r).unwrap()).unwrap();
        }
    }
}

#[test]
fn wrong_enum_names_the_pointer() {
    let _baton = crate::common::baton(module_path!());
    let mut v = serde_json::to_value(sample()).unwrap();
    v["rungs"][2]["status"] = json!("maybe");
    assert_names(&errors_of(&v), "/rungs/2/status");
    let mut v = serde_json::to_value(sample()).unwrap();
    v["verdict"]["code"] = json!("runc-broke-it");
    assert_names(&errors_of(&v), "/verdict/code");
    let mut v = serde_json::to_value(sample()).unwrap();
    v["phases"][1] = json!("crun");
    assert_names(&errors_of(&v), "/phases/1");
}

#[test]
fn missing_field_names_the_object() {
    let _baton = crate::common::baton(module_path!());
    let mut v = serde_json::to_value(sample()).unwrap();
    v["rungs"][1].as_object_mut().unwrap().remove("error");
    let e = errors_of(&v);
    assert_names(&e, "/rungs/1");
    assert!(e.iter().any(|e| e.contains("error")), "{e:#?}");
    let mut v = serde_json::to_value(sample()).unwrap();
    v.as_object_mut().unwrap().remove("verdict");
    assert_names(&errors_of(&v), "(root)");
}

#[test]
fn bad_sha_names_the_pointer() {
    let _baton = crate::common::baton(module_path!());
    let mut v = serde_json::to_value(sample()).unwrap();
    v["artifacts"][0]["sha256"] = json!(SHA.to_uppercase());
    assert_names(&errors_of(&v), "/artifacts/0/sha256");
    let mut v = serde_json::to_value(sample()).unwrap();
    v["host"]["criu"]["sha256"] = json!("abc");
    assert_names(&errors_of(&v), "/host/criu/sha256");
    let mut v = serde_json::to_value(sample()).unwrap();
    v["rungs"][0]["artifacts"][0]["sha256"] = json!(format!("{SHA}0"));
    assert_names(&errors_of(&v), "/rungs/0/artifacts/0/sha256");
}

#[test]
fn bad_timestamps_unknown_fields_and_types_fail() {
    let _baton = crate::common::baton(module_path!());
    let mut v = serde_json::to_value(sample()).unwrap();
    v["started_at"] = json!("yesterday");
    assert_names(&errors_of(&v), "/started_at");
    let mut v = serde_json::to_value(sample()).unwrap();
    v["rungs"][0]["started_at"] = json!("2025-13-01T00:00:00Z");
    assert_names(&errors_of(&v), "/rungs/0/started_at");
    let mut v = serde_json::to_value(sample()).unwrap();
    v["verdict"]["extra"] = json!(1);
    assert_names(&errors_of(&v), "/verdict");
    let mut v = serde_json::to_value(sample()).unwrap();
    v["duration_ms"] = json!(-1);
    assert_names(&errors_of(&v), "/duration_ms");
    let mut v = serde_json::to_value(sample()).unwrap();
    v["schema_version"] = json!(2);
    assert_names(&errors_of(&v), "/schema_version");
}

#[test]
fn holder_schema() {
    let _baton = crate::common::baton(module_path!());
    let good = json!({
        "schema_version": 1,
        "pid": 4242,
        "start_time": 123456,
        "netns_inode": 4026532001u64,
        "netns_path": "/proc/4242/ns/net",
        "exe": "/usr/local/bin/netprobe",
        "created_at": "2025-01-01T12:00:00Z"
    });
    validate_holder(&good).unwrap();
    let mut bad = good.clone();
    bad["pid"] = json!(0);
    let e = validate_holder(&bad).unwrap_err();
    assert!(e.iter().any(|e| e.starts_with("/pid: ")), "{e:#?}");
    let mut bad = good.clone();
    bad.as_object_mut().unwrap().remove("netns_inode");
    assert!(validate_holder(&bad).is_err());
    let mut bad = good;
    bad["created_at"] = json!("now");
    let e = validate_holder(&bad).unwrap_err();
    assert!(e.iter().any(|e| e.starts_with("/created_at: ")), "{e:#?}");
}

#[test]
fn nullable_fields_accept_null_and_check_values() {
    let _baton = crate::common::baton(module_path!());
    let mut v = serde_json::to_value(sample()).unwrap();
    v["host"]["criu"] = Value::Null;
    v["pins"][0]["pinned_sha256"] = Value::Null;
    validate_result(&v).unwrap();
    v["pins"][0]["pinned_sha256"] = json!("xyz");
    assert_names(&errors_of(&v), "/pins/0/pinned_sha256");
    v["pins"][0]["pinned_sha256"] = json!(SHA);
    v["host"]["runtime"] = json!({"path": "/usr/bin/runc"});
    assert_names(&errors_of(&v), "/host/runtime");
}
