//! `netprobe fleet DIR` over real evidence (one `netprobe run` with runc, one with crun, on this
//! machine), copied into host folders as a DaemonSet or the Ansible role (deploy/ansible/)
//! would leave them: verified hosts side by side; a host that differs from `--expect` named
//! first with its `netprobe diff`; a tampered host NOT VERIFIED; each bad input — a folder that
//! is not an evidence folder, two folders claiming one host, a newer netprobe's folder — named
//! in the table and the exit code; a DIR that is no fleet refused with nothing written;
//! `netprobe report` of the fleet folder shows the same table; fleet.json validates against
//! evidence-schema/fleet.schema.json. And the Ansible play (deploy/ansible/) for real against
//! this machine alone (`connection: local`): `--check` changes nothing; a play given
//! `netprobe_matrix_config` runs `netprobe run` and `netprobe matrix` and fetches both folders,
//! which `netprobe fleet` verifies (the matrix in its own section; a tampered matrix makes the
//! host NOT VERIFIED); the same run name again is refused with nothing changed. Needs root, CRIU
//! and the runtimes in /opt, ansible-core (host/setup.sh --test-deps).

use crate::common::fleet_play;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn np() -> Command {
    Command::new(crate::common::EXE)
}

/// One real run per runtime, made once for the whole test binary.
fn evidence(runtime: &str) -> PathBuf {
    static RUNC: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    static CRUN: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (cell, rt, expect) = match runtime {
        "runc" => (&RUNC, "/opt/runc-1.4.3/sbin/runc", "runtime-empty-ns"),
        _ => (&CRUN, "/opt/crun-1.28/bin/crun", "runtime-preserves-netns"),
    };
    cell.get_or_init(|| {
        let t = tempfile::tempdir().unwrap();
        let ev = t.path().join("ev");
        let o = np()
            .args(["run", "--runtime", rt, "--expect", expect, "--evidence"])
            .arg(&ev)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "netprobe run --runtime {rt}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (t, ev)
    })
    .1
    .clone()
}

fn copy(from: &Path, to: &Path) {
    fs::create_dir_all(to.parent().unwrap()).unwrap();
    let o = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .output()
        .unwrap();
    assert!(o.status.success());
}

/// `netprobe fleet DIR [args]`: exit code, fleet.json (validated), stdout + stderr.
fn fleet(dir: &Path, args: &[&str]) -> (i32, serde_json::Value, String) {
    let o = np().arg("fleet").arg(dir).args(args).output().unwrap();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let j: serde_json::Value = serde_json::from_slice(
        &fs::read(dir.join("fleet.json")).unwrap_or_else(|e| panic!("{e}: {text}")),
    )
    .unwrap();
    let v = netprobe::evidence::schema::compile("fleet", netprobe::fleet::model::FLEET_SCHEMA);
    netprobe::evidence::schema::validate_with(&v, &j).unwrap();
    (o.status.code().unwrap(), j, text)
}

fn host<'a>(j: &'a serde_json::Value, folder: &str) -> &'a serde_json::Value {
    j["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["folder"] == folder)
        .unwrap_or_else(|| panic!("no host folder {folder} in {j}"))
}

/// An Ansible-layout host folder: DIR/<folder>/<run>/{host-run.json, evidence/}.
fn ansible_host(dir: &Path, folder: &str, name: &str, run_rc: i32) {
    let run = dir.join(folder).join("20261207T220000Z");
    copy(&evidence("runc"), &run.join("evidence"));
    fs::write(
        run.join("host-run.json"),
        format!(
            r#"{{"host": "{name}", "run": "20261207T220000Z", "doctor_rc": 0, "run_rc": {run_rc}}}"#
        ),
    )
    .unwrap();
}

#[test]
fn verified_hosts_and_one_that_differs_from_expect() {
    let _baton = crate::common::baton(module_path!());
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    copy(&evidence("runc"), &d.join("node-a"));
    ansible_host(d, "node-b", "node-b", 0);
    let (rc, j, text) = fleet(d, &["--expect", "runtime-empty-ns"]);
    assert_eq!(rc, 0, "{text}");
    assert_eq!(j["hosts"].as_array().unwrap().len(), 2);
    for f in ["node-a", "node-b"] {
        assert_eq!(host(&j, f)["state"], "verified", "{text}");
        assert_eq!(host(&j, f)["verdict"], "runtime-empty-ns");
    }
    assert_eq!(host(&j, "node-b")["run_exit"], 0);
    assert!(text.contains("### runtime-empty-ns (2)"), "{text}");
    assert!(d.join("fleet.md").is_file() && d.join("fleet.html").is_file());

    // crun keeps the netns: that host differs from --expect, named first, diffed against one
    // that agrees.
    copy(&evidence("crun"), &d.join("node-c"));
    let (rc, j, text) = fleet(d, &["--expect", "runtime-empty-ns"]);
    assert_eq!(rc, 1, "{text}");
    assert_eq!(j["hosts"][0]["folder"], "node-c", "{text}");
    let dis = &j["hosts"][0]["disagrees"];
    assert_eq!(dis["against"], "expect");
    assert_eq!(dis["compared_with"], "node-a");
    assert_eq!(dis["diff_command"], "netprobe diff node-a node-c");
    assert!(
        dis["diff"]
            .as_str()
            .unwrap()
            .contains("verdict CHANGED: runtime-empty-ns -> runtime-preserves-netns"),
        "{dis}"
    );
    let first = text.find("### Hosts that differ").unwrap();
    assert!(first < text.find("### runtime-empty-ns").unwrap(), "{text}");

    // `netprobe report` of the fleet folder: the hosts verified again, the same table.
    let o = np().arg("report").arg(d).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let md = fs::read_to_string(d.join("report.md")).unwrap();
    assert!(
        md.contains("### Hosts that differ") && md.contains("| node-c |"),
        "{md}"
    );
    let o = np()
        .args(["report", "--format", "html"])
        .arg(d)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        fs::read_to_string(d.join("report.html"))
            .unwrap()
            .contains("<td>node-c</td>")
    );
}

#[test]
fn a_tampered_host_alone_is_not_verified() {
    let _baton = crate::common::baton(module_path!());
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    copy(&evidence("runc"), &d.join("node-a"));
    copy(&evidence("runc"), &d.join("node-b"));
    let dump = d.join("node-b/oci/dump.log");
    let log = fs::read_to_string(&dump).unwrap();
    let mut lines: Vec<&str> = log.lines().collect();
    lines.remove(lines.len() / 2);
    fs::write(&dump, lines.join("\n") + "\n").unwrap();
    let (rc, j, text) = fleet(d, &[]);
    assert_eq!(rc, 1, "{text}");
    assert_eq!(host(&j, "node-a")["state"], "verified");
    assert_eq!(host(&j, "node-b")["state"], "not-verified");
    assert!(
        host(&j, "node-b")["reason"]
            .as_str()
            .unwrap()
            .contains("artifact oci/dump.log changed")
    );
    assert!(text.contains("**NOT VERIFIED**"), "{text}");
}

#[test]
fn bad_input_is_named_in_the_table_and_the_exit_code() {
    let _baton = crate::common::baton(module_path!());
    // Not an evidence folder.
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    copy(&evidence("runc"), &d.join("node-a"));
    fs::create_dir(d.join("scratch")).unwrap();
    fs::write(d.join("scratch/notes.txt"), "x").unwrap();
    let (rc, j, text) = fleet(d, &[]);
    assert_eq!(rc, 2, "{text}");
    assert_eq!(host(&j, "scratch")["state"], "not-evidence");
    assert!(text.contains("**not an evidence folder**"), "{text}");
    assert_eq!(host(&j, "node-a")["state"], "verified");

    // Two folders claiming the same host.
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    copy(&evidence("runc"), &d.join("node-a"));
    ansible_host(d, "node-a-old", "NODE-A", 0);
    let (rc, j, text) = fleet(d, &[]);
    assert_eq!(rc, 2, "{text}");
    for f in ["node-a", "node-a-old"] {
        assert_eq!(host(&j, f)["state"], "duplicate-host", "{text}");
    }
    assert!(
        host(&j, "node-a")["reason"]
            .as_str()
            .unwrap()
            .contains("node-a-old/")
    );

    // A newer netprobe's folder.
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    copy(&evidence("runc"), &d.join("node-a"));
    copy(&evidence("runc"), &d.join("node-new"));
    let rf = d.join("node-new/netprobe-result.json");
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&rf).unwrap()).unwrap();
    v["tool_version"] = "99.1.0".into();
    fs::write(&rf, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let (rc, j, text) = fleet(d, &[]);
    assert_eq!(rc, 2, "{text}");
    let n = host(&j, "node-new");
    assert_eq!(n["state"], "newer-netprobe");
    assert!(
        n["reason"].as_str().unwrap().contains("netprobe 99.1.0"),
        "{n}"
    );
    assert_eq!(n["kernel"], host(&j, "node-a")["kernel"]);

    // A host whose run was refused (exit 3) and left no evidence.
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    copy(&evidence("runc"), &d.join("node-a"));
    let run = d.join("node-r/20261207T220000Z");
    fs::create_dir_all(&run).unwrap();
    fs::write(
        run.join("host-run.json"),
        r#"{"host": "node-r", "run_rc": 3, "doctor_rc": 3}"#,
    )
    .unwrap();
    let (rc, j, text) = fleet(d, &[]);
    assert_eq!(rc, 3, "{text}");
    assert!(
        host(&j, "node-r")["reason"]
            .as_str()
            .unwrap()
            .contains("run exit 3")
    );
}

#[test]
fn a_dir_that_is_no_fleet_is_refused_with_nothing_written() {
    let _baton = crate::common::baton(module_path!());
    let t = tempfile::tempdir().unwrap();
    for (dir, needle) in [
        (t.path().join("missing"), "not a folder"),
        (t.path().to_path_buf(), "holds no host folder"),
        (evidence("runc"), "is one evidence folder"),
    ] {
        let o = np().arg("fleet").arg(&dir).output().unwrap();
        assert_eq!(o.status.code(), Some(2));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(needle), "{e}");
        assert!(!dir.join("fleet.json").exists());
    }
}

/// The play against this machine alone: `--check`, a matrix, the refused re-run.
#[test]
fn the_play_on_this_machine_with_a_matrix() {
    let _baton = crate::common::baton(module_path!());
    let work = tempfile::tempdir().unwrap();
    let f = fleet_play::local(work.path());
    let config = work.path().join("matrix.toml");
    fs::write(
        &config,
        "runtimes = [\"/opt/runc-1.4.3/sbin/runc\"]\ncrius = [\"/opt/criu-4.3/sbin/criu\"]\n\n[expect]\n\"*\" = \"runtime-empty-ns\"\n",
    )
    .unwrap();
    let matrix = format!("netprobe_matrix_config={}", config.display());

    // --check changes nothing: no fleet folder, nothing left on the host.
    let o = f.play(&["--check", "-e", &matrix]);
    fleet_play::ok(&o, "ansible-playbook --check");
    assert!(!f.fleet.exists(), "--check created {}", f.fleet.display());
    assert!(
        !f.remote().exists(),
        "--check created {}",
        f.remote().display()
    );

    // The play with a matrix: the run and the matrix fetched side by side, both verified.
    let o = f.play(&["-e", &matrix]);
    fleet_play::ok(&o, "ansible-playbook");
    let (rc, j, text) = f.fleet();
    assert_eq!(rc, 0, "{text}");
    let me = fleet_play::host(&j, "this-host");
    assert_eq!(me["state"], "verified", "{text}");
    assert_eq!(me["verdict"], "runtime-empty-ns", "{text}");
    assert_eq!(me["run_exit"], 0, "{text}");
    let m = &me["matrix"];
    assert_eq!(m["verified"], true, "{text}");
    assert_eq!(m["exit"], 0, "{text}");
    let cells = m["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "{m}");
    assert_eq!(cells[0]["verdict"], "runtime-empty-ns", "{m}");
    assert!(
        cells[0]["label"].as_str().unwrap().contains("CRIU 4.3"),
        "{m}"
    );
    let run = Path::new(me["evidence"].as_str().unwrap())
        .parent()
        .unwrap()
        .to_path_buf();
    assert_eq!(m["folder"], run.join("matrix").display().to_string());
    let rec: serde_json::Value =
        serde_json::from_slice(&fs::read(f.fleet.join(&run).join("host-run.json")).unwrap())
            .unwrap();
    assert_eq!(rec["matrix_rc"], 0, "{rec}");
    assert!(text.contains("### Matrices (1)"), "{text}");
    assert!(
        text.contains(": runtime-empty-ns | verified | 0 |"),
        "{text}"
    );
    // The work folder of the run is gone.
    assert_eq!(fs::read_dir(f.remote()).unwrap().count(), 0, "left here");

    // Never over a fetched folder: the same run name again is refused, nothing changes.
    let run_name = run.file_name().unwrap().to_string_lossy().into_owned();
    let before = fleet_play::tree(&f.fleet.join("this-host"));
    let o = f.play(&["-e", &matrix, "-e", &format!("fleet_run={run_name}")]);
    assert!(!o.status.success());
    let so = String::from_utf8_lossy(&o.stdout);
    assert!(so.contains("a fetched folder is never overwritten"), "{so}");
    assert_eq!(before, fleet_play::tree(&f.fleet.join("this-host")));

    // The matrix tampered (a line removed from a cell's oci/dump.log): the host is NOT VERIFIED,
    // the matrix named, exit 1.
    let mdir = f.fleet.join(&run).join("matrix");
    let cell = fs::read_dir(&mdir)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("cell-"))
        .unwrap()
        .path();
    let dump = cell.join("oci/dump.log");
    let log = fs::read_to_string(&dump).unwrap();
    let mut lines: Vec<&str> = log.lines().collect();
    lines.remove(lines.len() / 2);
    fs::write(&dump, lines.join("\n") + "\n").unwrap();
    let (rc, j, text) = f.fleet();
    assert_eq!(rc, 1, "{text}");
    let me = fleet_play::host(&j, "this-host");
    assert_eq!(me["state"], "not-verified", "{text}");
    assert_eq!(me["matrix"]["verified"], false, "{text}");
    let reason = me["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("matrix ") && reason.contains("oci/dump.log"),
        "{reason}"
    );
    assert!(text.contains("**NOT VERIFIED**"), "{text}");

    // Nothing of the play left running.
    assert!(
        fleet_play::procs_mentioning(work.path().to_str().unwrap()).is_empty(),
        "processes left"
    );
}
