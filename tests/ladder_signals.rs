//! A signal that reaches the whole process group (Ctrl-C in a terminal) also kills the child
//! netprobe is waiting for (the runtime, `criu check`). The run must end as interrupted (exit
//! 130; `interrupted.txt` once the evidence folder exists; no `netprobe-result.json`), not as a
//! rung error with a verdict or as a host refusal. Deterministic: the runtime / CRIU is a wrapper
//! around the real one that sends SIGINT to its process group at the chosen step. Each test binary
//! run is the child subreaper, so a holder left behind would be re-parented here and found.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_netprobe");

#[test]
fn group_sigint_during_the_last_rung_is_an_interruption() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root (runc, CRIU, namespaces); CI runs it as root"
    );
    let runc = netprobe::host::find_in_path(std::path::Path::new("runc"))
        .expect("runc in PATH (host/setup.sh installs it)");
    let tmp = tempfile::tempdir().unwrap();
    let wrapper = tmp.path().join("runc");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n\
             for a in \"$@\"; do\n\
               if [ \"$a\" = checkpoint ]; then kill -INT 0; sleep 5; fi\n\
             done\n\
             exec {} \"$@\"\n",
            runc.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    // SAFETY: prctl with an integer argument, no memory passed.
    assert_eq!(
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) },
        0
    );
    let ev = tmp.path().join("ev");
    let out = Command::new(EXE)
        .args(["run", "--quiet", "--phases", "external-netns", "--runtime"])
        .arg(&wrapper)
        .arg("--evidence")
        .arg(&ev)
        .env_remove("CRIU_CONFIG_FILE")
        // Its own process group, as a shell job: `kill -INT 0` reaches netprobe and the
        // wrapper, not this test.
        .process_group(0)
        .output()
        .expect("spawn netprobe");
    let text = format!(
        "{out:?}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(130), "{text}");
    assert!(ev.join("interrupted.txt").is_file(), "{text}");
    assert!(!ev.join("netprobe-result.json").exists(), "{text}");
    // The rung's holder was released with everything else: this test is the child subreaper,
    // so a holder left behind would have been re-parented here.
    let me = std::process::id().to_string();
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let ppid = stat
                .rsplit_once(") ")?
                .1
                .split_whitespace()
                .nth(1)?
                .to_string();
            let cmd = String::from_utf8_lossy(&std::fs::read(e.path().join("cmdline")).ok()?)
                .replace('\0', " ");
            (ppid == me && cmd.contains("__holder")).then_some(cmd)
        })
        .collect();
    assert!(left.is_empty(), "holders left: {left:?}\n{text}");
}

/// The same during the host checks: a SIGINT that also killed `criu check` is an interruption
/// (exit 130), not "CRIU cannot checkpoint on this kernel" (exit 3).
#[test]
fn group_sigint_during_criu_check_is_not_a_refusal() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root (criu check); CI runs it as root"
    );
    let criu = netprobe::host::default_criu();
    let tmp = tempfile::tempdir().unwrap();
    let wrapper = tmp.path().join("criu");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n\
             if [ \"$1\" = check ]; then kill -INT 0; sleep 5; fi\n\
             exec {} \"$@\"\n",
            criu.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ev = tmp.path().join("ev");
    let out = Command::new(EXE)
        .args(["run", "--quiet", "--criu"])
        .arg(&wrapper)
        .arg("--evidence")
        .arg(&ev)
        .env_remove("CRIU_CONFIG_FILE")
        .process_group(0)
        .output()
        .expect("spawn netprobe");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{out:?}\n{stderr}");
    assert!(!stderr.contains("criu check failed"), "{stderr}");
    assert!(!ev.join("netprobe-result.json").exists());
}
