//! EvidenceDir: fresh folders only, atomic no-overwrite writes, adopt, inventory, result.

use netprobe::evidence::result::*;
use netprobe::evidence::{EvidenceDir, EvidenceError, default_path, read_result, sha256_file};
use std::fs;

const EMPTY_SHA: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

fn minimal_result() -> RunResult {
    RunResult {
        schema_version: SCHEMA_VERSION,
        tool: "netprobe".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        command: vec!["netprobe".into()],
        started_at: "2025-01-01T00:00:00Z".into(),
        finished_at: "2025-01-01T00:00:01Z".into(),
        duration_ms: 1000,
        phases: vec![],
        host: HostFacts {
            kernel_release: "6.1".into(),
            kernel_version: "#1".into(),
            machine: "x86_64".into(),
            os: None,
            cgroup: "v2".into(),
            criu: None,
            runtime: None,
        },
        pins: vec![],
        declared_differences: vec![],
        rungs: vec![],
        verdict: Verdict {
            code: VerdictCode::Inconclusive,
            summary: "nothing ran".into(),
            rests_on: vec![],
            reason: Some("no phases".into()),
        },
        artifacts: vec![],
    }
}

#[test]
fn create_refuses_non_empty_folders_and_creates_parents() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let deep = tmp.path().join("a/b/c");
    let ev = EvidenceDir::create(&deep).unwrap();
    assert!(deep.is_dir());
    assert_eq!(ev.root(), deep);
    // an existing empty folder is fine
    let empty = tmp.path().join("empty");
    fs::create_dir(&empty).unwrap();
    EvidenceDir::create(&empty).unwrap();
    // a non-empty one is not, and the message says what to do
    fs::write(empty.join("x"), b"1").unwrap();
    let e = EvidenceDir::create(&empty).unwrap_err();
    assert!(matches!(e, EvidenceError::NotEmpty(_)));
    let msg = e.to_string();
    assert!(msg.contains(&empty.display().to_string()), "{msg}");
    assert!(msg.contains("choose a new --evidence folder"), "{msg}");
    // a file is not a folder
    let e = EvidenceDir::create(&empty.join("x")).unwrap_err();
    assert!(matches!(e, EvidenceError::NotADirectory(_)), "{e}");
}

#[test]
fn write_is_atomic_and_never_overwrites() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let ev = EvidenceDir::create(&tmp.path().join("ev")).unwrap();
    let a = ev.write("criu/request.bin", b"").unwrap();
    assert_eq!(a.path, "criu/request.bin");
    assert_eq!(a.bytes, 0);
    assert_eq!(a.sha256, EMPTY_SHA);
    let e = ev.write("criu/request.bin", b"other").unwrap_err();
    assert!(matches!(e, EvidenceError::Exists(_)), "{e}");
    assert!(e.to_string().contains("refusing to overwrite"), "{e}");
    assert_eq!(fs::read(ev.root().join("criu/request.bin")).unwrap(), b"");
    // no temporary files left behind
    let names: Vec<_> = fs::read_dir(ev.root().join("criu"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    for bad in ["", "/etc/passwd", "../x", "a//b", "a/./b", RESULT_FILE] {
        assert!(
            matches!(ev.write(bad, b"x"), Err(EvidenceError::BadPath { .. })),
            "{bad:?}"
        );
    }
}

#[test]
fn write_json_is_pretty_with_newline() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let ev = EvidenceDir::create(&tmp.path().join("ev")).unwrap();
    ev.write_json("host.json", &serde_json::json!({"a": [1]}))
        .unwrap();
    let text = fs::read_to_string(ev.root().join("host.json")).unwrap();
    assert_eq!(text, "{\n  \"a\": [\n    1\n  ]\n}\n");
}

#[test]
fn rung_dir_adopt_and_inventory() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("images");
    fs::create_dir_all(src.join("sub")).unwrap();
    fs::write(src.join("netns-11.img"), vec![7u8; 26]).unwrap();
    fs::write(src.join("sub/inner.img"), b"x").unwrap();
    fs::write(tmp.path().join("dump.log"), b"log\n").unwrap();

    let ev = EvidenceDir::create(&tmp.path().join("ev")).unwrap();
    let rd = ev.rung_dir(RungName::ExternalNetns).unwrap();
    assert_eq!(rd, ev.root().join("external-netns"));
    assert!(rd.is_dir());
    let log = ev
        .adopt("external-netns/dump.log", &tmp.path().join("dump.log"))
        .unwrap();
    assert_eq!(log.bytes, 4);
    let imgs = ev.adopt_dir("external-netns/images", &src).unwrap();
    let paths: Vec<&str> = imgs.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "external-netns/images/netns-11.img",
            "external-netns/images/sub/inner.img"
        ]
    );
    // adopting again refuses to overwrite
    assert!(matches!(
        ev.adopt("external-netns/dump.log", &tmp.path().join("dump.log")),
        Err(EvidenceError::Exists(_))
    ));
    // a missing source names it
    let e = ev
        .adopt("x.log", &tmp.path().join("nope.log"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope.log"), "{e}");

    ev.write("host.json", b"{}\n").unwrap();
    let inv = ev.inventory().unwrap();
    let paths: Vec<&str> = inv.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "external-netns/dump.log",
            "external-netns/images/netns-11.img",
            "external-netns/images/sub/inner.img",
            "host.json",
        ]
    );
    for a in &inv {
        let (sha, bytes) = sha256_file(&ev.root().join(&a.path)).unwrap();
        assert_eq!((sha.as_str(), bytes), (a.sha256.as_str(), a.bytes));
    }
    assert_eq!(inv[1].bytes, 26);

    // the result is written last, excluded from the inventory, and read back
    let mut r = minimal_result();
    r.artifacts = inv.clone();
    ev.write_result(&r).unwrap();
    assert_eq!(ev.inventory().unwrap(), inv);
    assert_eq!(read_result(ev.root()).unwrap(), r);
    assert!(matches!(ev.write_result(&r), Err(EvidenceError::Exists(_))));
    let opened = EvidenceDir::open(ev.root()).unwrap();
    assert_eq!(opened.inventory().unwrap(), inv);
}

#[test]
fn invalid_result_is_not_written() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let ev = EvidenceDir::create(&tmp.path().join("ev")).unwrap();
    let mut r = minimal_result();
    r.started_at = "not a time".into();
    let e = ev.write_result(&r).unwrap_err();
    assert!(matches!(e, EvidenceError::Invalid { .. }), "{e}");
    assert!(e.to_string().contains("/started_at"), "{e}");
    assert!(!ev.root().join(RESULT_FILE).exists());
}

#[test]
fn read_result_and_open_fail_clearly() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope");
    assert!(matches!(
        EvidenceDir::open(&missing),
        Err(EvidenceError::Missing(_))
    ));
    assert!(matches!(
        read_result(&missing),
        Err(EvidenceError::Missing(_))
    ));
    fs::write(tmp.path().join(RESULT_FILE), b"{\"tool\": 1}").unwrap();
    let e = read_result(tmp.path()).unwrap_err();
    assert!(matches!(e, EvidenceError::Invalid { .. }), "{e}");
    fs::write(tmp.path().join(RESULT_FILE), b"{").unwrap();
    assert!(matches!(
        read_result(tmp.path()),
        Err(EvidenceError::Json { .. })
    ));
}

#[test]
fn default_path_is_utc_stamp_and_pid() {
    let _baton = crate::common::baton(module_path!());
    let p = default_path(std::path::Path::new("/var/lib/netprobe"));
    let name = p.file_name().unwrap().to_str().unwrap();
    let (stamp, pid) = name.split_once('-').unwrap();
    assert_eq!(stamp.len(), 16, "{name}");
    assert!(
        stamp.ends_with('Z') && stamp.as_bytes()[8] == b'T',
        "{name}"
    );
    assert_eq!(pid, std::process::id().to_string());
    assert_eq!(
        p.parent().unwrap(),
        std::path::Path::new("/var/lib/netprobe")
    );
}
