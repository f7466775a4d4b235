//! CmdOutcome, the CRIU wrapper's error paths, pidfile and image inventory. No root needed.

use netprobe::criu::{CmdOutcome, Criu, CriuError, DumpOpts, RunError, inventory, read_pidfile};
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn outcome_records_code_output_and_time() {
    let _baton = crate::common::baton(module_path!());
    let o = CmdOutcome::run(Command::new("/bin/echo").args(["a", "b"]), None).unwrap();
    assert_eq!(o.argv, vec!["/bin/echo", "a", "b"]);
    assert_eq!(o.code, Some(0));
    assert!(o.success());
    assert_eq!(o.stdout, "a b\n");
    let f = CmdOutcome::run(&mut Command::new("/bin/false"), None).unwrap();
    assert_eq!(f.code, Some(1));
    assert_eq!(f.status_text(), "exit code 1");
}

#[test]
fn timeout_kills_and_reaps() {
    let _baton = crate::common::baton(module_path!());
    let t = Instant::now();
    let e = CmdOutcome::run(
        Command::new("/bin/sleep").arg("30"),
        Some(Duration::from_millis(200)),
    )
    .unwrap_err();
    assert!(matches!(e, RunError::Timeout { .. }), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn missing_program_is_a_spawn_error() {
    let _baton = crate::common::baton(module_path!());
    let e = CmdOutcome::run(&mut Command::new("/nonexistent/criu"), None).unwrap_err();
    assert!(matches!(e, RunError::Spawn { .. }), "{e:?}");
    assert!(e.to_string().contains("/nonexistent/criu"));
}

#[test]
fn failing_dump_points_at_its_log() {
    let _baton = crate::common::baton(module_path!());
    // /bin/false stands in for a CRIU that fails: the error carries the outcome and the log path.
    let tmp = tempfile::tempdir().unwrap();
    let criu = Criu::new("/bin/false");
    let mut o = DumpOpts::new(1, tmp.path().join("images"));
    o.leave_running = true;
    let e = criu.dump(&o).unwrap_err();
    let CriuError::Failed { outcome, log, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(outcome.code, Some(1));
    assert_eq!(
        outcome.argv[1..5],
        ["dump", "-t", "1", "--leave-running"].map(String::from)
    );
    assert!(outcome.argv.contains(&"-v4".to_string()));
    assert_eq!(log.as_deref(), Some(o.log_path().as_path()));
    assert!(e.to_string().contains("dump.log"), "{e}");
    assert!(tmp.path().join("images").is_dir(), "images dir created");
}

#[test]
fn not_criu_version() {
    let _baton = crate::common::baton(module_path!());
    let e = Criu::new("/bin/true").version().unwrap_err();
    assert!(matches!(e, CriuError::NotCriu { .. }), "{e:?}");
}

#[test]
fn pidfile_parsing() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("pid");
    std::fs::write(&p, "1234\n").unwrap();
    assert_eq!(read_pidfile(&p).unwrap(), 1234);
    std::fs::write(&p, "x").unwrap();
    assert!(matches!(
        read_pidfile(&p),
        Err(CriuError::BadPidfile { .. })
    ));
    assert!(matches!(
        read_pidfile(&tmp.path().join("none")),
        Err(CriuError::Io { .. })
    ));
}

#[test]
fn inventory_is_sorted_with_sha256() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("netns-10.img"), b"abc").unwrap();
    std::fs::write(tmp.path().join("core-1.img"), b"").unwrap();
    std::fs::create_dir(tmp.path().join("subdir")).unwrap();
    let inv = inventory(tmp.path()).unwrap();
    let names: Vec<_> = inv.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["core-1.img", "netns-10.img"]);
    assert_eq!(inv[1].bytes, 3);
    assert_eq!(
        inv[1].sha256,
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        inv[0].sha256,
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    let json = serde_json::to_string(&inv[1]).unwrap();
    assert!(json.contains("\"bytes\":3"), "{json}");
}

#[test]
fn child_environment_drops_criu_config_file() {
    let _baton = crate::common::baton(module_path!());
    let criu = Criu::new("/opt/criu/sbin/criu");
    let trace = Some(std::path::Path::new("/tmp/trace.txt"));
    for cmd in [
        criu.command(None, false),
        criu.command(trace, true),
        criu.command(trace, false),
    ] {
        let removed = cmd
            .get_envs()
            .any(|(k, v)| k == "CRIU_CONFIG_FILE" && v.is_none());
        assert!(removed, "{cmd:?}");
    }
    let traced = criu.command(trace, true);
    assert_eq!(traced.get_program(), "strace");
    let args: Vec<_> = traced
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        args,
        ["-f", "-tt", "-o", "/tmp/trace.txt", "/opt/criu/sbin/criu"]
    );
    let no_follow: Vec<_> = criu
        .command(trace, false)
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        no_follow,
        ["-tt", "-o", "/tmp/trace.txt", "/opt/criu/sbin/criu"]
    );
}

/// A failed dump quotes CRIU's deciding lines (its `Error (…)` lines and the lines before
/// them, numbered) from dump.log, not just the last lines.
#[test]
fn failing_dump_quotes_the_error_lines() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let fake = tmp.path().join("criu");
    netprobe::evidence::fsio::write_executable(&fake,
        "#!/bin/sh\n\
         while [ $# -gt 0 ]; do [ \"$1\" = -D ] && d=$2; shift; done\n\
         printf 'l1\\nl2\\nl3\\nl4\\n(00.5) Error (criu/net.c:3000): Unable to find an external netns: extRootNetNS\\nl6\\nl7\\nl8\\nl9\\n' > \"$d/dump.log\"\n\
         exit 1\n", 0o755).unwrap();
    let o = DumpOpts::new(1, tmp.path().join("images"));
    let e = Criu::new(&fake).dump(&o).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("5: (00.5) Error (criu/net.c:3000): Unable to find an external netns"),
        "{msg}"
    );
    assert!(msg.contains("2: l2"), "{msg}");
    assert!(!msg.contains("l9"), "{msg}");
    assert!(msg.contains("dump.log"), "{msg}");
}
