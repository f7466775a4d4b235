//! The command line: every subcommand's help shows an example, completions and the man page
//! are generated, usage errors exit 2. No root needed.

use std::process::Command;

use crate::common::EXE;

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(EXE).args(args).output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn every_subcommand_help_shows_an_example() {
    let _baton = crate::common::baton(module_path!());
    for sub in [
        "run",
        "verify",
        "report",
        "diff",
        "doctor",
        "fleet",
        "slot",
        "completions",
        "man",
    ] {
        let (code, out, _) = run(&[sub, "--help"]);
        assert_eq!(code, Some(0), "{sub} --help");
        assert!(
            out.contains("Example"),
            "{sub} --help has no example:\n{out}"
        );
        assert!(
            out.contains("netprobe "),
            "{sub} --help example names the command"
        );
    }
    let (_, out, _) = run(&["--help"]);
    assert!(out.contains("Exit codes"), "{out}");
    assert!(!out.contains("__holder"), "the holder mode stays hidden");
}

#[test]
fn completions_and_man_page_are_generated() {
    let _baton = crate::common::baton(module_path!());
    let (code, out, _) = run(&["completions", "bash"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("_netprobe") && out.contains("verify"), "{out}");
    let (code, out, _) = run(&["man"]);
    assert_eq!(code, Some(0));
    assert!(out.contains(".TH netprobe"), "{out}");
}

#[test]
fn usage_errors_exit_2() {
    let _baton = crate::common::baton(module_path!());
    let (code, _, err) = run(&["frobnicate"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = run(&["run", "--expect", "maybe"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("runtime-empty-ns"),
        "lists the verdicts: {err}"
    );
    let (code, _, err) = run(&["slot", "status"]);
    assert_eq!(code, Some(2), "missing --slot/--state-dir: {err}");
    // A negative slot number reaches netprobe's own check (not clap's "did you mean --").
    let (code, _, err) = run(&[
        "slot",
        "status",
        "--slot",
        "-1",
        "--state-dir",
        "/nonexistent-np",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("malformed slot number \"-1\""), "{err}");
}

#[test]
fn verify_of_an_interrupted_run_says_so() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("interrupted.txt"),
        "netprobe run was interrupted by SIGINT\n",
    )
    .unwrap();
    std::fs::create_dir(tmp.path().join("kernel")).unwrap();
    let dir = tmp.path().to_str().unwrap();
    let (code, _, err) = run(&["verify", dir]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("interrupted") && err.contains("interrupted.txt"),
        "{err}"
    );
    // Without the note it is a plain missing result.
    std::fs::remove_file(tmp.path().join("interrupted.txt")).unwrap();
    let (code, _, err) = run(&["verify", dir]);
    assert_eq!(code, Some(2), "{err}");
    assert!(!err.contains("interrupted"), "{err}");
}

/// `netprobe slot VERB` are clap subcommands with their own flags: a provision-only flag on
/// another verb, a contradictory or malformed provision flag, and `--runtime`/`--criu` on
/// `status` are usage errors (exit 2) before anything runs; with `--json` the error is also the
/// slot error document on stdout. Nothing is created.
#[test]
fn slot_verbs_take_only_their_own_flags() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let sd = tmp.path().join("state");
    let sd = sd.to_str().unwrap();
    let hex = "a".repeat(64);
    for verb in ["snapshot", "restore", "reset", "cleanup", "status"] {
        for flag in [
            &["--image", "/x"][..],
            &["--image-sha256", &hex],
            &["--probe-evidence", "/e"],
            &["--no-probe-gate"],
            &["--reason", "r"],
        ] {
            let mut a = vec!["slot", verb, "--slot", "1", "--state-dir", sd];
            a.extend_from_slice(flag);
            let (code, out, err) = run(&a);
            assert_eq!(code, Some(2), "{verb} {flag:?}: {err}");
            assert!(out.is_empty(), "{out}");
            assert!(
                err.contains(&format!("unexpected argument '{}'", flag[0]))
                    && err.contains("for `netprobe slot provision` only"),
                "{verb} {flag:?}: {err}"
            );
        }
    }
    for flag in ["--runtime", "--criu"] {
        let (code, _, err) = run(&[
            "slot",
            "status",
            "--slot",
            "1",
            "--state-dir",
            sd,
            flag,
            "/x",
        ]);
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains(&format!("unexpected argument '{flag}'")),
            "{err}"
        );
    }
    let prov = |extra: &[&str]| {
        let mut a = vec!["slot", "provision", "--slot", "1", "--state-dir", sd];
        a.extend_from_slice(extra);
        run(&a)
    };
    for (extra, says) in [
        (&["--no-probe-gate"][..], "--reason <REASON>"),
        (&["--reason", "r"], "--no-probe-gate"),
        (
            &["--reason", "r", "--probe-evidence", "/e"],
            "--reason is recorded only with --no-probe-gate",
        ),
        (&["--no-probe-gate", "--reason", "  "], "must not be blank"),
        (
            &["--no-probe-gate", "--reason", "r", "--probe-evidence", "/e"],
            "cannot be used with",
        ),
        (
            &[
                "--image",
                "/x.qcow2",
                "--image-sha256",
                "ABC",
                "--no-probe-gate",
                "--reason",
                "r",
            ],
            "expected 64 lower-case hex digits",
        ),
        (
            &["--image-sha256", &hex, "--no-probe-gate", "--reason", "r"],
            "--image <IMAGE>",
        ),
        (
            &["--image", "/x.qcow2", "--no-probe-gate", "--reason", "r"],
            "a .qcow2 --image must be pinned with --image-sha256",
        ),
        (
            &[
                "--image",
                "/rootfs",
                "--image-sha256",
                &hex,
                "--no-probe-gate",
                "--reason",
                "r",
            ],
            "--image-sha256 applies to a .qcow2 image only",
        ),
    ] {
        let (code, _, err) = prov(extra);
        assert_eq!(code, Some(2), "{extra:?}: {err}");
        assert!(err.contains(says), "{extra:?}: {err}");
    }
    // --json: the usage error is also the slot error document on stdout.
    let (code, out, err) = run(&[
        "slot",
        "reset",
        "--slot=7",
        "--state-dir",
        sd,
        "--image",
        "/x",
        "--json",
    ]);
    assert_eq!(code, Some(2), "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).expect(&out);
    assert_eq!(doc["kind"], "usage");
    assert_eq!(doc["exit_code"], 2);
    assert_eq!(doc["slot"], "7");
    assert!(
        doc["message"]
            .as_str()
            .unwrap()
            .contains("unexpected argument '--image'"),
        "{doc}"
    );
    // Help is not an error: no document, exit 0.
    let (code, out, _) = run(&["slot", "provision", "--help", "--json"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("Example") && !out.contains("\"kind\""),
        "{out}"
    );
    assert!(
        !std::path::Path::new(sd).exists(),
        "a usage error creates nothing"
    );
}

#[test]
fn a_step_timeout_that_is_not_a_number_is_refused_before_anything_runs() {
    let _baton = crate::common::baton(module_path!());
    for bad in ["abc", "0", "-5", "1e99999"] {
        let o = Command::new(EXE)
            .args(["completions", "bash"])
            .env("NETPROBE_STEP_TIMEOUT_S", bad)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad}: {err}");
        assert!(
            err.contains(&format!("NETPROBE_STEP_TIMEOUT_S={bad}"))
                && err.contains("not a positive number of seconds"),
            "{err}"
        );
        assert!(o.stdout.is_empty(), "nothing ran");
    }
    for good in ["", "30", "0.5"] {
        let o = Command::new(EXE)
            .args(["completions", "bash"])
            .env("NETPROBE_STEP_TIMEOUT_S", good)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{good:?}");
    }
}

#[test]
fn verify_of_a_slot_folder_points_to_report() {
    let _baton = crate::common::baton(module_path!());
    let d = tempfile::tempdir().unwrap();
    let sd = d.path().join("state");
    let slot = sd.join("slot-3");
    let verb = slot.join("evidence/0001-provision");
    std::fs::create_dir_all(&verb).unwrap();
    std::fs::write(
        sd.join(".netprobe-state-dir"),
        b"netprobe slot state directory\n",
    )
    .unwrap();
    std::fs::write(slot.join("owner.json"), b"{}").unwrap();
    std::fs::write(verb.join("verb.json"), b"{}").unwrap();
    // `report` takes a slot or verb folder as it is; a state directory it refuses, so verify
    // points to its slot folders.
    let sd_report = format!(
        "netprobe report {}/slot-N` (one of its slot folders: {})",
        sd.display(),
        slot.display()
    );
    for (dir, kind, report) in [
        (
            &slot,
            "is a slot folder",
            format!("netprobe report {}`", slot.display()),
        ),
        (
            &verb,
            "is one slot verb's evidence folder",
            format!("netprobe report {}`", verb.display()),
        ),
        (&sd, "is a slot state directory", sd_report),
    ] {
        let (code, _, err) = run(&["verify", dir.to_str().unwrap()]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(kind) && err.contains(&report), "{err}");
    }
}

/// The command `verify` prints for a slot folder under a path with a space is one a shell
/// runs as shown: the path is quoted (unquoted, `netprobe report` would get two arguments).
#[test]
fn a_printed_command_quotes_a_path_with_a_space() {
    let _baton = crate::common::baton(module_path!());
    let d = tempfile::tempdir().unwrap();
    let slot = d.path().join("with space/state/slot-3");
    std::fs::create_dir_all(slot.join("evidence")).unwrap();
    std::fs::write(slot.join("owner.json"), b"{}").unwrap();
    let (code, _, err) = run(&["verify", slot.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    let cmd = err
        .split('`')
        .find(|c| c.starts_with("netprobe report "))
        .unwrap_or_else(|| panic!("{err}"));
    assert_eq!(
        cmd,
        format!("netprobe report '{}'", slot.display()),
        "{err}"
    );
    // What a shell makes of it: the words netprobe meant.
    let o = Command::new("sh")
        .args(["-c", &format!("printf '%s\\n' {cmd}")])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("netprobe\nreport\n{}\n", slot.display())
    );
}

/// The `--probe-evidence` folder of every example (`slot --help`, `slot provision --help`, the
/// `sh` blocks of README.md and docs/GUIDE.md) is one the example makes: a `netprobe run --evidence` of the same
/// folder earlier in it (`netprobe run` writes no fixed folder such as `evidence/last`).
#[test]
fn every_probe_evidence_example_names_a_folder_a_run_in_it_wrote() {
    let _baton = crate::common::baton(module_path!());
    let docs: String = ["README.md", "docs/GUIDE.md"]
        .iter()
        .map(|f| std::fs::read_to_string(format!("{}/{f}", env!("CARGO_MANIFEST_DIR"))).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let mut examples: Vec<(String, String)> = ["slot", "provision"]
        .iter()
        .map(|w| {
            let args: &[&str] = match *w {
                "slot" => &["slot", "--help"],
                _ => &["slot", "provision", "--help"],
            };
            let (code, out, err) = run(args);
            assert_eq!(code, Some(0), "{err}");
            (format!("{args:?}"), out)
        })
        .collect();
    examples.extend(
        docs.split("```sh\n")
            .skip(1)
            .map(|b| b.split("```").next().unwrap_or_default())
            .enumerate()
            .map(|(i, b)| (format!("docs sh block {i}"), b.replace("\\\n", " "))),
    );
    let mut seen = 0;
    for (name, text) in &examples {
        let mut wrote: Vec<&str> = Vec::new();
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let after = |flag: &str| {
                words
                    .iter()
                    .position(|w| *w == flag)
                    .and_then(|i| words.get(i + 1).copied())
            };
            if words.windows(2).any(|w| w == ["netprobe", "run"])
                && let Some(d) = after("--evidence")
            {
                wrote.push(d);
            }
            if words
                .windows(3)
                .any(|w| w == ["netprobe", "slot", "provision"])
                && let Some(d) = after("--probe-evidence")
            {
                seen += 1;
                assert!(
                    d == "DIR" || wrote.contains(&d),
                    "{name}: --probe-evidence {d} is no folder a `netprobe run --evidence` above wrote:\n{text}"
                );
            }
        }
    }
    assert!(seen >= 5, "{seen} --probe-evidence examples found");
}

/// `doctor` says what a `$CRIU_CONFIG_FILE` naming no file is: set, no such file (CRIU would
/// skip it), refused as a request to configure CRIU — not "present".
#[test]
fn doctor_names_a_criu_config_variable_without_a_file() {
    let _baton = crate::common::baton(module_path!());
    let o = std::process::Command::new(crate::common::EXE)
        .arg("doctor")
        .env("CRIU_CONFIG_FILE", "/nonexistent/netprobe-test.conf")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.contains("no CRIU config file"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains("CRIU_CONFIG_FILE=/nonexistent/netprobe-test.conf is set (no such file: CRIU would skip it")
            && !line.contains("present:"),
        "{line}"
    );
}
