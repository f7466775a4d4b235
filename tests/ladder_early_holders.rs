//! The holders `netprobe run` starts when the run begins (one per rung that uses one, on
//! background threads) are stopped on every way out, also when the run is refused after they
//! were started, and only the requested rungs get one. This test binary makes itself the child
//! subreaper, so any holder netprobe left behind would be re-parented here and be found.

use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_netprobe");

/// Our children (re-parented orphans included) whose command line is netprobe's holder mode.
fn holders_reparented_here() -> Vec<String> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let p = e.path();
        let Ok(stat) = std::fs::read_to_string(p.join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let after = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or("");
        let ppid = after.split_whitespace().nth(1).unwrap_or("");
        let cmd = std::fs::read(p.join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if ppid == me && cmd.contains("__holder") {
            found.push(format!("{}: {cmd} ({stat})", p.display()));
        }
    }
    found
}

fn run(args: &[&str]) -> std::process::Output {
    Command::new(EXE)
        .args(args)
        .env_remove("CRIU_CONFIG_FILE")
        .output()
        .expect("spawn netprobe")
}

#[test]
fn early_holders_are_released_on_refusal_and_success() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root (holders are network namespaces); CI runs it as root"
    );
    // SAFETY: prctl with an integer argument, no memory passed.
    assert_eq!(
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) },
        0
    );
    let tmp = tempfile::tempdir().unwrap();

    // Refused after the holders were started: the evidence folder is not empty (exit 2).
    let busy = tmp.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("keep.txt"), b"operator's file\n").unwrap();
    let o = run(&["run", "--quiet", "--evidence", busy.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert_eq!(
        std::fs::read(busy.join("keep.txt")).unwrap(),
        b"operator's file\n"
    );
    let left = holders_reparented_here();
    assert!(left.is_empty(), "holders left after a refusal: {left:#?}");

    // A run of the kernel and criu rungs only: their holders are used and stopped, no other
    // holder is started (nothing re-parented here), and the kernel holder's lo was DOWN.
    let ev = tmp.path().join("ev");
    let o = run(&[
        "run",
        "--quiet",
        "--phases",
        "kernel,criu",
        "--evidence",
        ev.to_str().unwrap(),
    ]);
    assert!(o.status.code().is_some_and(|c| c == 0 || c == 1), "{o:?}");
    let left = holders_reparented_here();
    assert!(left.is_empty(), "holders left after a run: {left:#?}");
    let result: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ev.join("netprobe-result.json")).unwrap()).unwrap();
    let rungs = result["rungs"].as_array().unwrap();
    let status = |n: &str| {
        rungs
            .iter()
            .find(|r| r["name"] == n)
            .map(|r| r["status"].as_str().unwrap_or("").to_string())
            .unwrap()
    };
    assert_eq!(status("kernel"), "pass", "{result:#}");
    assert_eq!(status("criu"), "pass", "{result:#}");
    assert_eq!(status("oci"), "skipped");
    assert_eq!(status("external-netns"), "skipped");
}
