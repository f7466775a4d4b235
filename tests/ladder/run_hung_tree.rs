//! `netprobe run` under hung child trees (issue 11, point 1). The runtime or CRIU is a wrapper
//! script that, at the chosen step, forks a grandchild (`sleep`) holding the inherited
//! stdout/stderr and then waits for it for ever. With `NETPROBE_STEP_TIMEOUT_S=6` the step is
//! bounded: the whole tree dies (the grandchild too), the rung fails naming the bound, the run
//! ends. SIGTERM during such a step (no bound override) ends the run within seconds (exit 143,
//! `interrupted.txt`). Afterwards nothing netprobe started is left: no process re-parented to
//! this test (a child subreaper), no holder, no mount under the test's directory, no cgroup of
//! the run's containers. Also: 20 runs interrupted at random moments leave nothing either (no
//! CRIU root yard in `/tmp` either).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::common::EXE;

/// The tests count processes re-parented to this process: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn setup() -> std::sync::MutexGuard<'static, ()> {
    let g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    crate::common::require_root();
    assert_eq!(
        // SAFETY: prctl with an integer argument, no memory passed.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) },
        0
    );
    g
}

/// A wrapper `name` in `dir` around `real`: when an argument equals `step`, it starts
/// `sleep 1000` in the background (inheriting stdout/stderr), writes its pid to `gc.pid` in
/// `dir`, and waits for it; otherwise it execs `real`.
fn hanging_wrapper(dir: &Path, name: &str, real: &Path, step: &str) -> PathBuf {
    let path = dir.join(name);
    netprobe::evidence::fsio::write_executable(
        &path,
        format!(
            "#!/bin/sh\n\
             for a in \"$@\"; do\n\
               if [ \"$a\" = {step} ]; then\n\
                 echo \"wrapper: hanging at {step}\" >&2\n\
                 sleep 1000 &\n\
                 echo $! > {dir}/gc.pid\n\
                 wait\n\
               fi\n\
             done\n\
             exec {real} \"$@\"\n",
            dir = dir.display(),
            real = real.display()
        ),
        0o755,
    )
    .unwrap();
    path
}

fn runc() -> PathBuf {
    netprobe::host::find_in_path(Path::new("runc")).expect("runc in PATH (host/setup.sh)")
}

/// `netprobe run --evidence EV ARGS` in its own process group, stdout/stderr to files in `dir`.
fn spawn_run(dir: &Path, ev: &Path, args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut c = Command::new(EXE);
    c.arg("run")
        .args(args)
        .arg("--evidence")
        .arg(ev)
        .env_remove("CRIU_CONFIG_FILE")
        .env_remove("NETPROBE_STEP_TIMEOUT_S")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("stdout.txt")).unwrap())
        .stderr(std::fs::File::create(dir.join("stderr.txt")).unwrap())
        .process_group(0);
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().expect("spawn netprobe")
}

/// Waits at most `limit` for `child`; kills it (and fails) when it is still running.
fn wait_bounded(child: &mut Child, limit: Duration, dir: &Path) -> Option<i32> {
    let until = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code();
        }
        if Instant::now() > until {
            // SAFETY: kill(2) of the process group of our own child.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!("netprobe still running after {limit:?}\n{}", output(dir));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn output(dir: &Path) -> String {
    let r = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap_or_default();
    format!("stdout:\n{}\nstderr:\n{}", r("stdout.txt"), r("stderr.txt"))
}

/// Live (non-zombie) processes whose parent is this test; zombies are reaped first.
fn orphans_here() -> Vec<String> {
    while {
        let mut st = 0;
        // SAFETY: waitpid writes only into `st`.
        unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) > 0 }
    } {}
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let rest = stat.rsplit_once(") ")?.1.to_string();
            let mut f = rest.split_whitespace();
            let state = f.next()?;
            let ppid = f.next()?;
            let cmd = String::from_utf8_lossy(&std::fs::read(e.path().join("cmdline")).ok()?)
                .replace('\0', " ");
            (ppid == me && state != "Z").then(|| format!("{}: {cmd}", e.file_name().display()))
        })
        .collect()
}

/// Whether `pid` is gone or a zombie.
fn gone(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty()
        || stat
            .rsplit_once(") ")
            .is_some_and(|(_, r)| r.starts_with('Z'))
}

/// Asserts nothing of run `pid` (netprobe's pid) under `dir` is left.
fn assert_nothing_left(dir: &Path, pid: u32) {
    let orphans = orphans_here();
    assert!(
        orphans.is_empty(),
        "processes left: {orphans:#?}\n{}",
        output(dir)
    );
    let d = dir.to_string_lossy().to_string();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let left: Vec<&str> = mounts.lines().filter(|l| l.contains(&d)).collect();
    assert!(left.is_empty(), "mounts left: {left:#?}");
    // Container ids are `netprobe-<rung>-<pid>-<nanos>`; runc's cgroupfs path is `/<id>`.
    let tag = format!("-{pid}-");
    for ctrl in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        if let Ok(rd) = std::fs::read_dir(ctrl.path()) {
            for c in rd.flatten() {
                let n = c.file_name().to_string_lossy().to_string();
                assert!(
                    !(n.starts_with("netprobe-") && n.contains(&tag)),
                    "cgroup left: {}",
                    c.path().display()
                );
            }
        }
    }
}

fn rung_error(ev: &Path, rung: &str) -> String {
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ev.join("netprobe-result.json")).unwrap()).unwrap();
    let g = r["rungs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == rung)
        .unwrap();
    assert_eq!(g["status"], "error", "{g:#}");
    g["error"].as_str().unwrap_or("").to_string()
}

/// One hung step bounded by NETPROBE_STEP_TIMEOUT_S=6: the run ends (exit 4, the rung in error
/// naming the bound), the grandchild is dead, nothing is left.
fn bounded_case(which: &str, step: &str, phases: &str, rung: &str) {
    let _g = setup();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (flag, real) = match which {
        "runtime" => ("--runtime", runc()),
        _ => ("--criu", netprobe::host::default_criu()),
    };
    let name = if which == "runtime" { "runc" } else { "criu" };
    let w = hanging_wrapper(dir, name, &real, step);
    let ev = dir.join("ev");
    let ws = w.to_string_lossy().to_string();
    let t0 = Instant::now();
    let mut child = spawn_run(
        dir,
        &ev,
        &["--quiet", "--phases", phases, flag, &ws],
        &[("NETPROBE_STEP_TIMEOUT_S", "6")],
    );
    let pid = child.id();
    let code = wait_bounded(&mut child, Duration::from_secs(120), dir);
    assert_eq!(code, Some(4), "{}", output(dir));
    assert!(t0.elapsed() < Duration::from_secs(90), "{:?}", t0.elapsed());
    let gc: i32 = std::fs::read_to_string(dir.join("gc.pid"))
        .unwrap_or_else(|e| panic!("the wrapper never hung ({e})\n{}", output(dir)))
        .trim()
        .parse()
        .unwrap();
    assert!(
        gone(gc),
        "the hung grandchild {gc} outlived the step\n{}",
        output(dir)
    );
    let err = rung_error(&ev, rung);
    assert!(err.contains("6000 ms"), "{err}");
    assert!(err.contains("whole process tree was killed"), "{err}");
    if which == "runtime" {
        // What the runtime's temporary --log held is in the error (the log itself is removed):
        // the wrapper hangs before runc starts, so nothing (restore, detached) or no --log at
        // all (checkpoint, piped); and where CRIU's log is.
        let said = match step {
            "restore" => "its --log was empty when it was killed",
            _ => "the runtime ran without --log",
        };
        assert!(
            err.contains(said)
                && err.contains(&format!(
                    "CRIU wrote no {} in the --work-path",
                    if step == "restore" {
                        "restore.log"
                    } else {
                        "dump.log"
                    }
                )),
            "{err}"
        );
    }
    assert_nothing_left(dir, pid);
}

#[test]
fn hung_runtime_checkpoint_is_bounded() {
    let _baton = crate::common::baton(module_path!());
    bounded_case("runtime", "checkpoint", "oci", "oci");
}

#[test]
fn hung_runtime_restore_is_bounded() {
    let _baton = crate::common::baton(module_path!());
    bounded_case("runtime", "restore", "oci", "oci");
}

#[test]
fn hung_criu_dump_is_bounded() {
    let _baton = crate::common::baton(module_path!());
    bounded_case("criu", "dump", "criu", "criu");
}

#[test]
fn hung_criu_restore_is_bounded() {
    let _baton = crate::common::baton(module_path!());
    bounded_case("criu", "restore", "criu", "criu");
}

/// SIGTERM (to netprobe alone, as `kill PID` does) while the runtime's checkpoint hangs with
/// the default 120 s bound: the run ends within seconds, exit 143, `interrupted.txt`, the hung
/// tree killed, nothing left.
#[test]
fn sigterm_during_a_hung_runtime_checkpoint_ends_the_run() {
    let _baton = crate::common::baton(module_path!());
    sigterm_case("runtime", "checkpoint", "oci");
}

/// As above, with CRIU's restore hung in the criu rung.
#[test]
fn sigterm_during_a_hung_criu_restore_ends_the_run() {
    let _baton = crate::common::baton(module_path!());
    sigterm_case("criu", "restore", "criu");
}

fn sigterm_case(which: &str, step: &str, phases: &str) {
    let _g = setup();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (flag, real, name) = match which {
        "runtime" => ("--runtime", runc(), "runc"),
        _ => ("--criu", netprobe::host::default_criu(), "criu"),
    };
    let w = hanging_wrapper(dir, name, &real, step);
    let ev = dir.join("ev");
    let ws = w.to_string_lossy().to_string();
    let mut child = spawn_run(dir, &ev, &["--quiet", "--phases", phases, flag, &ws], &[]);
    let pid = child.id();
    let until = Instant::now() + Duration::from_secs(60);
    while !dir.join("gc.pid").is_file() {
        assert!(Instant::now() < until, "never hung\n{}", output(dir));
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let code = wait_bounded(&mut child, Duration::from_secs(30), dir);
    assert_eq!(code, Some(143), "{}", output(dir));
    assert!(
        t0.elapsed() < Duration::from_secs(8),
        "took {:?}",
        t0.elapsed()
    );
    assert!(ev.join("interrupted.txt").is_file(), "{}", output(dir));
    assert!(!ev.join("netprobe-result.json").exists());
    let gc: i32 = std::fs::read_to_string(dir.join("gc.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        gone(gc),
        "the hung grandchild {gc} outlived netprobe\n{}",
        output(dir)
    );
    assert_nothing_left(dir, pid);
}

/// 20 full-ladder runs, each sent SIGINT or SIGTERM at a pseudo-random moment in its first
/// ~2.5 s (the ladder takes about 1–3 s here): each ends as finished (0/1/4) or interrupted
/// (130/143) and leaves nothing behind.
#[test]
fn twenty_runs_interrupted_at_random_moments_leave_nothing() {
    let _baton = crate::common::baton(module_path!());
    let _g = setup();
    let tmp = tempfile::tempdir().unwrap();
    // xorshift seeded by the clock; the delays are printed on failure.
    let yards_before = netprobe::criu::yard::yards_in(Path::new("/tmp"));
    let mut x = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    for i in 0..20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let delay = Duration::from_millis(50 + x % 2500);
        let sig = if i % 2 == 0 {
            libc::SIGINT
        } else {
            libc::SIGTERM
        };
        let dir = tmp.path().join(format!("r{i}"));
        std::fs::create_dir(&dir).unwrap();
        let ev = dir.join("ev");
        let mut child = spawn_run(&dir, &ev, &["--quiet"], &[]);
        let pid = child.id();
        std::thread::sleep(delay);
        // SAFETY: kill(2) of our own child's process group (as Ctrl-C in a terminal).
        unsafe { libc::kill(-(pid as i32), sig) };
        let code = wait_bounded(&mut child, Duration::from_secs(60), &dir);
        assert!(
            matches!(code, Some(0 | 1 | 4)) || code == Some(128 + sig),
            "run {i} (signal {sig} after {delay:?}): exit {code:?}\n{}",
            output(&dir)
        );
        if code == Some(128 + sig) && ev.is_dir() {
            assert!(
                ev.join("interrupted.txt").is_file(),
                "run {i}\n{}",
                output(&dir)
            );
        }
        assert_nothing_left(&dir, pid);
        // A CRIU killed mid-restore leaves its root yard unless netprobe removes it.
        let yards = netprobe::criu::yard::yards_in(Path::new("/tmp"));
        let new: Vec<_> = yards.iter().filter(|y| !yards_before.contains(y)).collect();
        assert!(new.is_empty(), "run {i}: CRIU root yards left: {new:?}");
    }
}
