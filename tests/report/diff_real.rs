//! `netprobe diff` on real runs (root): the regression check for a new pin. Two runs with
//! different CRIU binaries (4.1.1 and 4.2.1, both installed by host/setup.sh) name the change
//! and keep the verdict (exit 0); a run whose verdict differs exits 1; each side is verified
//! first, and a side whose evidence does not reproduce its result fails the diff (exit 1).

use std::path::Path;
use std::process::{Command, Output};

use crate::common::EXE;

fn run(args: &[&str]) -> Output {
    Command::new(EXE)
        .args(args)
        .env_remove("CRIU_CONFIG_FILE")
        .output()
        .unwrap()
}

fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn diff_names_a_criu_change_and_a_verdict_change() {
    let _baton = crate::common::baton(module_path!());
    crate::common::require_root();
    for c in [
        netprobe::host::PRIVATE_CRIU,
        netprobe::host::PRIVATE_CRIU_4_1,
    ] {
        assert!(
            Path::new(c).exists(),
            "{c} missing: run `bash host/setup.sh`"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let ev = |n: &str| tmp.path().join(n).to_str().unwrap().to_string();
    let phases = "kernel,criu";
    let o = run(&[
        "run",
        "--quiet",
        "--phases",
        phases,
        "--criu",
        netprobe::host::PRIVATE_CRIU_4_1,
        "--evidence",
        &ev("old"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = run(&[
        "run",
        "--quiet",
        "--phases",
        phases,
        "--criu",
        netprobe::host::PRIVATE_CRIU,
        "--evidence",
        &ev("new"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));

    // The same run on both sides: said, exit 0.
    let o = run(&[
        "diff",
        &ev("old"),
        &format!("{}/netprobe-result.json", ev("old")),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("note: old and new are the same result file"),
        "{}",
        show(&o)
    );
    let o = run(&["diff", &ev("old"), &ev("new")]);
    assert_eq!(o.status.code(), Some(0), "same verdict: {}", show(&o));
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("the same result file"),
        "{}",
        show(&o)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("verdict unchanged: inconclusive"), "{out}");
    assert!(out.contains("criu version: 4.1.1 -> 4.2.1"), "{out}");
    assert!(
        out.contains("criu path: /opt/criu-4.1.1/sbin/criu -> /opt/criu-4.2.1/sbin/criu"),
        "{out}"
    );
    assert!(out.contains("timings"), "{out}");
    assert!(
        out.contains(&format!("verified: {} reproduces its result", ev("old")))
            && out.contains(&format!("verified: {} reproduces its result", ev("new"))),
        "both sides verified: {out}"
    );

    // A side whose evidence does not reproduce its result: the diff is printed, but the
    // command fails naming that side.
    let cp = Command::new("cp")
        .args(["-a", &ev("new"), &ev("edited")])
        .status()
        .unwrap();
    assert!(cp.success());
    let after = tmp.path().join("edited/criu/netstate-after.json");
    let mut t = std::fs::read_to_string(&after).unwrap();
    t.push('\n');
    std::fs::write(&after, t).unwrap();
    let o = run(&["diff", &ev("old"), &ev("edited")]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "NOT VERIFIED: {} does not reproduce",
            ev("edited")
        )) && err.contains("netstate-after.json"),
        "{err}"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("verdict unchanged"), "{out}");
    // Said on stdout too, above the diff: saved output never keeps a diff without it.
    let warn = out
        .find(&format!(
            "NOT VERIFIED: {} does not reproduce",
            ev("edited")
        ))
        .unwrap_or_else(|| panic!("no NOT VERIFIED on stdout: {out}"));
    assert!(warn < out.find("verdict unchanged").unwrap(), "{out}");

    // A run whose verdict differs (the kernel rung alone cannot decide; kernel+criu either):
    // make one that decides: the whole ladder.
    let o = run(&["run", "--quiet", "--evidence", &ev("full")]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = run(&[
        "diff",
        &format!("{}/netprobe-result.json", ev("new")),
        &ev("full"),
    ]);
    assert_eq!(o.status.code(), Some(1), "verdict changed: {}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let first = out
        .lines()
        .find(|l| l.contains("verdict"))
        .unwrap_or_default();
    assert!(
        first.contains("inconclusive") && first.contains("runtime-empty-ns"),
        "verdict change first: {out}"
    );
}
