//! The command line: every subcommand's help shows an example, completions and the man page
//! are generated, usage errors exit 2. No root needed.

use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_netprobe");

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
    for sub in [
        "run",
        "verify",
        "report",
        "diff",
        "doctor",
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
    let (code, out, _) = run(&["completions", "bash"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("_netprobe") && out.contains("verify"), "{out}");
    let (code, out, _) = run(&["man"]);
    assert_eq!(code, Some(0));
    assert!(out.contains(".TH netprobe"), "{out}");
}

#[test]
fn usage_errors_exit_2() {
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
