//! evaluate / reevaluate over hand-written rung folders (tests/fixtures/assert/).

use netprobe::assert::{ProbeSpec, evaluate, passes, reevaluate};
use netprobe::evidence::result::{AssertionResult, RungName};
use std::fs;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/assert")
        .join(name)
}

fn by_id<'a>(rs: &'a [AssertionResult], id: &str) -> &'a AssertionResult {
    rs.iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("no {id}"))
}

fn copy_dir(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    for e in fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            fs::copy(e.path(), to).unwrap();
        }
    }
}

#[test]
fn kernel_fixture_passes() {
    let _baton = crate::common::baton(module_path!());
    let rs = evaluate(
        &ProbeSpec::builtin(RungName::Kernel).unwrap(),
        &fixture("kernel-pass"),
    );
    assert!(passes(&rs), "{rs:#?}");
    assert_eq!(by_id(&rs, "lo-type-772").observed, "1 line");
    assert_eq!(
        by_id(&rs, "lo-down-in-fresh-netns").observed,
        "lo DOWN, no inet 127.0.0.1/8"
    );
}

#[test]
fn criu_fixture_passes_and_anchors_on_the_netns_line() {
    let _baton = crate::common::baton(module_path!());
    let rs = evaluate(
        &ProbeSpec::builtin(RungName::Criu).unwrap(),
        &fixture("criu-pass"),
    );
    assert!(passes(&rs), "{rs:#?}");
    let link = by_id(&rs, "link-dumped-after-netns");
    // 2 "LD: Got link" lines in total, only 1 after the anchor line.
    assert_eq!(link.observed, "1 line");
    assert_eq!(
        link.expected,
        ">= 1 lines containing \"LD: Got link\" after the first line containing \"Dump NET namespace info\""
    );
    assert_eq!(link.subject, "dump.log");
    assert_eq!(
        by_id(&rs, "netns-image").observed,
        "1 file: netns-11.img (40 B)"
    );
    assert!(
        by_id(&rs, "state-preserved")
            .observed
            .starts_with("identical")
    );
}

#[test]
fn oci_fixture_fails_with_the_empty_ns_signature() {
    let _baton = crate::common::baton(module_path!());
    let rs = evaluate(
        &ProbeSpec::builtin(RungName::Oci).unwrap(),
        &fixture("oci-empty-ns"),
    );
    assert!(!passes(&rs));
    let state = by_id(&rs, "state-preserved");
    assert!(!state.passed);
    assert!(
        state.observed.contains("/links/0/up: true → false"),
        "{}",
        state.observed
    );
    assert!(
        state
            .observed
            .contains("/addresses/0: removed address 127.0.0.1/8"),
        "{}",
        state.observed
    );
    assert!(
        state.observed.contains("/links/0/flags: 73 → 8"),
        "{}",
        state.observed
    );
    for r in rs.iter().filter(|r| r.role == "empty-ns") {
        assert!(r.passed, "{r:#?}");
    }
    assert_eq!(by_id(&rs, "no-netns-image").observed, "0 files");
    assert_eq!(by_id(&rs, "no-link-dumped-after-netns").observed, "0 lines");

    // The same evidence with dump.log emptied (or cut before its anchor): the scope "after
    // 'Dump NET namespace info'" is empty, so `== 0` there proves nothing and fails closed —
    // the empty-ns signature is no longer carried.
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture("oci-empty-ns"), tmp.path());
    std::fs::write(tmp.path().join("dump.log"), b"").unwrap();
    let rs = evaluate(&ProbeSpec::builtin(RungName::Oci).unwrap(), tmp.path());
    let r = by_id(&rs, "no-link-dumped-after-netns");
    assert!(!r.passed, "{r:#?}");
    assert!(
        r.observed
            .contains("no line contains the anchor \"Dump NET namespace info\""),
        "{}",
        r.observed
    );
}

#[test]
fn external_netns_fixture_passes_and_bytes_bound_applies() {
    let _baton = crate::common::baton(module_path!());
    let spec = ProbeSpec::builtin(RungName::ExternalNetns).unwrap();
    let rs = evaluate(&spec, &fixture("external-netns-pass"));
    assert!(passes(&rs), "{rs:#?}");
    assert_eq!(
        by_id(&rs, "netns-image-key-only").observed,
        "1 file: netns-13.img (26 B)"
    );

    // A netns image holding the whole netns (> 64 bytes) breaks the bytes bound.
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture("external-netns-pass"), tmp.path());
    fs::write(tmp.path().join("images/netns-13.img"), vec![0u8; 65]).unwrap();
    let rs = evaluate(&spec, tmp.path());
    let img = by_id(&rs, "netns-image-key-only");
    assert!(!img.passed);
    assert_eq!(img.expected, "== 1 files, each <= 64 bytes");
    assert!(!passes(&rs));
}

/// The restored container init's netns inode and the holder's are recorded side by side and
/// must be equal: a restore into another netns fails the rung, naming both files.
#[test]
fn external_netns_inodes_side_by_side_must_be_equal() {
    let _baton = crate::common::baton(module_path!());
    let spec = ProbeSpec::builtin(RungName::ExternalNetns).unwrap();
    let rs = evaluate(&spec, &fixture("external-netns-pass"));
    let r = by_id(&rs, "netns-inode-equal");
    assert!(r.passed, "{r:#?}");
    assert_eq!(
        r.expected,
        "netns-inode-restored.txt byte-identical to netns-inode-holder.txt"
    );
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture("external-netns-pass"), tmp.path());
    fs::write(tmp.path().join("netns-inode-restored.txt"), "4026532999\n").unwrap();
    let rs = evaluate(&spec, tmp.path());
    assert!(!by_id(&rs, "netns-inode-equal").passed);
    assert!(!passes(&rs));
}

#[test]
fn missing_subjects_fail_closed() {
    let _baton = crate::common::baton(module_path!());
    let empty = tempfile::tempdir().unwrap();
    for rung in RungName::ALL {
        let rs = evaluate(&ProbeSpec::builtin(rung).unwrap(), empty.path());
        for r in &rs {
            assert!(!r.passed, "{rung}/{} passed on an empty folder", r.id);
            assert!(r.observed.starts_with("missing: "), "{}", r.observed);
        }
    }
    // "== 0" on a log that does not exist still fails.
    let rs = evaluate(&ProbeSpec::builtin(RungName::Oci).unwrap(), empty.path());
    assert_eq!(
        by_id(&rs, "no-link-dumped-after-netns").observed,
        "missing: dump.log"
    );
    assert_eq!(by_id(&rs, "no-netns-image").observed, "missing: images/");
}

#[test]
fn unreadable_netstate_fails_closed() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture("kernel-pass"), tmp.path());
    fs::write(tmp.path().join("netstate-before.json"), b"{\"links\": 3}").unwrap();
    fs::write(tmp.path().join("netstate-after.json"), b"not json").unwrap();
    let rs = evaluate(&ProbeSpec::builtin(RungName::Kernel).unwrap(), tmp.path());
    let before = by_id(&rs, "lo-down-in-fresh-netns");
    assert!(!before.passed);
    assert!(
        before
            .observed
            .starts_with("unreadable: netstate-before.json"),
        "{}",
        before.observed
    );
    let after = by_id(&rs, "lo-up-after-bring-up");
    assert!(!after.passed);
    assert!(after.observed.contains("not JSON"), "{}", after.observed);
}

#[test]
fn lo_up_needs_the_address_on_lo() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture("kernel-pass"), tmp.path());
    // lo up, but 127.0.0.1/8 sits on another ifindex
    fs::write(
        tmp.path().join("netstate-after.json"),
        br#"{"links":[{"ifindex":1,"name":"lo","up":true}],"addresses":[{"ifindex":2,"family":"inet","address":"127.0.0.1","prefix_len":8}],"routes":[]}"#,
    )
    .unwrap();
    let rs = evaluate(&ProbeSpec::builtin(RungName::Kernel).unwrap(), tmp.path());
    let r = by_id(&rs, "lo-up-after-bring-up");
    assert!(!r.passed);
    assert_eq!(r.observed, "lo UP, no inet 127.0.0.1/8");
}

#[test]
fn non_json_files_diff_by_line() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("netstate-before.json"), b"a\nb\nc\n").unwrap();
    fs::write(tmp.path().join("netstate-after.json"), b"a\nc\nd\n").unwrap();
    let rs = evaluate(&ProbeSpec::builtin(RungName::Criu).unwrap(), tmp.path());
    let r = by_id(&rs, "state-preserved");
    assert!(!r.passed);
    assert!(r.observed.ends_with(": -b | +d"), "{}", r.observed);
}

#[test]
fn custom_spec_scopes_bounds_and_globs() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    fs::write(d.join("x.log"), b"pre hit\nSTART\nhit hit\nhit\nEND\nhit\n").unwrap();
    fs::create_dir(d.join("img")).unwrap();
    fs::write(d.join("img/a-1.img"), b"12345").unwrap();
    fs::write(d.join("img/a-2.img"), b"1").unwrap();
    fs::write(d.join("img/b-1.img"), b"1").unwrap();
    let spec = ProbeSpec::from_toml(
        "probes/custom.toml",
        r#"
rung = "criu"
question = "q"

[[assertion]]
id = "all"
role = "pass"
description = "every line with hit"
kind = "log"
log = "x.log"
pattern = "hit"
count = { eq = 4 }

[[assertion]]
id = "scoped"
role = "pass"
description = "hit lines between START and END"
kind = "log"
log = "x.log"
pattern = "hit"
after = "START"
before = "END"
count = { min = 2, max = 2 }

[[assertion]]
id = "too-many"
role = "sig"
description = "at most one"
kind = "log"
log = "x.log"
pattern = "hit"
count = { max = 1 }

[[assertion]]
id = "a-images"
role = "pass"
description = "two a images, small"
kind = "files"
glob = "img/a-?.img"
count = { eq = 2 }
bytes = { max = 5 }

[[assertion]]
id = "a-images-tiny"
role = "sig"
description = "two a images, tiny"
kind = "files"
glob = "img/a-*.img"
count = { eq = 2 }
bytes = { max = 4 }
"#,
    )
    .unwrap();
    let rs = evaluate(&spec, d);
    assert!(by_id(&rs, "all").passed, "{rs:#?}");
    assert!(by_id(&rs, "scoped").passed, "{rs:#?}");
    let too_many = by_id(&rs, "too-many");
    assert!(!too_many.passed);
    assert_eq!(too_many.observed, "4 lines");
    assert!(by_id(&rs, "a-images").passed);
    assert_eq!(
        by_id(&rs, "a-images").observed,
        "2 files: a-1.img (5 B), a-2.img (1 B)"
    );
    assert!(!by_id(&rs, "a-images-tiny").passed);
    // signature roles do not decide the rung
    assert!(passes(&rs));
}

#[test]
fn reevaluate_reruns_rungs_that_ran() {
    let _baton = crate::common::baton(module_path!());
    use netprobe::evidence::result::*;
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture("criu-pass"), &tmp.path().join("criu"));
    copy_dir(&fixture("oci-empty-ns"), &tmp.path().join("oci"));
    let rung = |name, status| RungResult {
        name,
        status,
        summary: String::new(),
        started_at: "2025-01-01T00:00:00Z".into(),
        duration_ms: 0,
        timings_ms: Default::default(),
        facts: Default::default(),
        assertions: vec![],
        artifacts: vec![],
        error: None,
    };
    let result = RunResult {
        schema_version: SCHEMA_VERSION,
        tool: "netprobe".into(),
        tool_version: "0".into(),
        command: vec![],
        started_at: "2025-01-01T00:00:00Z".into(),
        finished_at: "2025-01-01T00:00:00Z".into(),
        duration_ms: 0,
        phases: vec![],
        host: HostFacts {
            kernel_release: String::new(),
            kernel_version: String::new(),
            machine: String::new(),
            os: None,
            cgroup: "v2".into(),
            criu: None,
            runtime: None,
        },
        pins: vec![],
        declared_differences: vec![],
        rungs: vec![
            rung(RungName::Kernel, Status::Skipped),
            rung(RungName::Criu, Status::Pass),
            rung(RungName::Oci, Status::Fail),
            rung(RungName::ExternalNetns, Status::Error),
        ],
        verdict: Verdict {
            code: VerdictCode::Inconclusive,
            summary: String::new(),
            rests_on: vec![],
            reason: None,
        },
        artifacts: vec![],
    };
    let re = reevaluate(tmp.path(), &result);
    let names: Vec<RungName> = re.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, vec![RungName::Criu, RungName::Oci]);
    assert!(passes(&re[0].1));
    assert!(!passes(&re[1].1));
}

/// `check = "no-criu-lock"` (issue 14): the criu rung's assertion fails on a NetState whose
/// netfilter holds CRIU's lock chain, naming it, and passes without it.
#[test]
fn no_criu_lock_names_the_chain() {
    let _baton = crate::common::baton(module_path!());
    let spec = ProbeSpec::builtin(RungName::Criu).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut s = netprobe::netlink::NetState::default();
    s.netfilter.nftables = vec![
        "table ip filter {".into(),
        "chain CRIU {".into(),
        "counter drop".into(),
        "}".into(),
        "}".into(),
    ];
    fs::write(
        dir.path().join("netstate-after.json"),
        s.to_canonical_json(),
    )
    .unwrap();
    let rs = evaluate(&spec, dir.path());
    let a = by_id(&rs, "no-criu-lock-after-restore");
    assert!(!a.passed);
    assert_eq!(
        a.observed,
        "CRIU's network lock found: nftables: chain CRIU in table ip filter"
    );
    s.netfilter.nftables.clear();
    fs::write(
        dir.path().join("netstate-after.json"),
        s.to_canonical_json(),
    )
    .unwrap();
    let rs = evaluate(&spec, dir.path());
    assert!(by_id(&rs, "no-criu-lock-after-restore").passed);
}

/// The field-path diff shared by `run`'s netstate assertions and the slot's net-fidelity diff:
/// one line per JSON pointer, old → new, never whole JSON lines.
#[test]
fn field_path_diff_names_the_pointer_old_then_new() {
    let _baton = crate::common::baton(module_path!());
    let old = serde_json::json!({"links": [{"name": "lo", "mtu": 65536}, {"name": "a", "mtu": 1500}, {"name": "b", "mtu": 1789}]});
    let new = serde_json::json!({"links": [{"name": "lo", "mtu": 65536}, {"name": "a", "mtu": 1500}, {"name": "b", "mtu": 1500}]});
    assert_eq!(
        netprobe::assert::json_field_diff(&old, &new),
        ["/links/2/mtu: 1789 → 1500"]
    );
    assert!(netprobe::assert::json_field_diff(&old, &old).is_empty());
}

/// One entry inserted or removed is one line: the arrays are aligned on what they share, not
/// compared index by index (which would report every later entry as changed).
#[test]
fn an_inserted_entry_is_one_line_not_a_cascade() {
    let _baton = crate::common::baton(module_path!());
    let a = |addr: &str, family: &str| serde_json::json!({"ifindex": 1, "family": family, "address": addr, "prefixlen": 8});
    let old = serde_json::json!({"addresses": [a("127.0.0.1", "inet"), a("::1", "inet6")]});
    let new = serde_json::json!({"addresses": [a("10.9.9.9", "inet"), a("127.0.0.1", "inet"), a("::1", "inet6")]});
    let d = netprobe::assert::json_field_diff(&old, &new);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert!(d[0].starts_with("/addresses/0: added "), "{d:#?}");
    assert!(d[0].contains("10.9.9.9"), "{d:#?}");
    // And removed again: one line, at its old index.
    let d = netprobe::assert::json_field_diff(&new, &old);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert!(d[0].starts_with("/addresses/0: removed "), "{d:#?}");
    // A changed entry in the middle still shows its field.
    let mut changed = new.clone();
    changed["addresses"][1]["prefixlen"] = serde_json::json!(16);
    let d = netprobe::assert::json_field_diff(&new, &changed);
    assert_eq!(d, ["/addresses/1/prefixlen: 8 → 16"]);
    // Two removed, one added between the same neighbours: listed, not paired.
    let x = serde_json::json!({"v": [1, 2, 3, 4]});
    let y = serde_json::json!({"v": [1, 9, 4]});
    assert_eq!(
        netprobe::assert::json_field_diff(&x, &y),
        ["/v/1: removed 2", "/v/2: removed 3", "/v/1: added 9"]
    );
}
