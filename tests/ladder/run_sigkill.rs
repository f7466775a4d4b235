//! `netprobe run` killed with SIGKILL while a runtime rung's container runs: a SIGKILL runs no
//! clean-up, so its holders, the container (in the cgroup named after its id), its work area
//! under `/var/tmp` and its temporary files are left. The next `netprobe run` releases them
//! before it starts (`netprobe::probe::stale`; `doctor` names them first), lists them in `stale-swept.json` (an artifact
//! `verify` accepts) and says so on stderr; afterwards none of them is left. Real runc and
//! CRIU (the run's defaults).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::EXE;

/// The container cgroup folders (every hierarchy, at any depth the sweep looks) of probe runs
/// started by `pid`, with the processes each lists.
fn container_cgroups_of(pid: i32) -> Vec<(PathBuf, String)> {
    netprobe::probe::stale::probe_container_cgroups()
        .into_iter()
        .filter(|(name, _)| netprobe::probe::stale::container_run_pid(name) == Some(pid))
        .map(|(_, p)| {
            let procs = std::fs::read_to_string(p.join("cgroup.procs")).unwrap_or_default();
            (p, procs)
        })
        .collect()
}

/// Pids of the holders whose `--run-pid` is `pid`.
fn holders_of(pid: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let p: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            (netprobe::probe::stale::holder_run_pid(&cmd) == Some(pid)).then_some(p)
        })
        .collect()
}

/// Live (not zombie) pids among `pids`.
fn alive(pids: &[i32]) -> Vec<i32> {
    pids.iter()
        .copied()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
                s.rsplit_once(") ")
                    .is_some_and(|(_, r)| !r.starts_with('Z'))
            })
        })
        .collect()
}

/// `/var/tmp/netprobe-<pid>-*`.
fn work_areas_of(pid: i32) -> Vec<PathBuf> {
    let prefix = format!("netprobe-{pid}-");
    std::fs::read_dir("/var/tmp")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// The tests kill runs and sweep what dead runs left: one at a time, or one's sweep takes the
/// other's leftovers.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// SIGKILL to the run `child` (netprobe alone, as `kill -9 PID` does), then reaped.
fn kill9(child: &mut std::process::Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
}

/// `netprobe run ARGS --evidence DIR` with null stdio, started (not waited for).
fn spawn_run(args: &[&std::ffi::OsStr], dir: &std::path::Path) -> std::process::Child {
    Command::new(EXE)
        .arg("run")
        .args(args)
        .arg("--evidence")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Root, one test at a time, and the sweep on the way out (drop order: sweep, then lock).
fn setup() -> (Sweep, std::sync::MutexGuard<'static, ()>) {
    crate::common::require_root();
    let one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    (Sweep, one)
}

/// Whatever the test leaves (a failed assertion) is released as the next run would.
struct Sweep;
impl Drop for Sweep {
    fn drop(&mut self) {
        let _ = netprobe::probe::stale::sweep(
            std::path::Path::new("/proc"),
            std::path::Path::new("/var/tmp"),
            &std::env::temp_dir(),
        );
    }
}

#[test]
fn the_next_run_releases_what_a_killed_run_left() {
    let _baton = crate::common::baton(module_path!());
    let _setup = setup();
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let mut child = spawn_run(&[], &a);
    let pid = child.id() as i32;
    // Killed while a runtime rung's container runs (its cgroup lists a process).
    let t0 = Instant::now();
    while !container_cgroups_of(pid)
        .iter()
        .any(|(_, p)| !p.trim().is_empty())
    {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before its container was seen"
        );
        assert!(t0.elapsed() < Duration::from_secs(120), "no container seen");
        std::thread::sleep(Duration::from_millis(2));
    }
    kill9(&mut child);
    // A runtime or CRIU call the run had started ends by itself.
    std::thread::sleep(Duration::from_secs(2));
    let holders = alive(&holders_of(pid));
    let cgroups = container_cgroups_of(pid);
    let areas = work_areas_of(pid);
    assert!(!holders.is_empty(), "a SIGKILL left no holder");
    assert!(!areas.is_empty(), "a SIGKILL left no work area");
    // `doctor` names them (and releases nothing).
    let d = Command::new(EXE).arg("doctor").output().unwrap();
    let out = String::from_utf8_lossy(&d.stdout);
    assert!(
        out.contains("left by netprobe runs killed with SIGKILL: ")
            && out.contains("fix: the next `sudo netprobe run` releases them"),
        "{out}"
    );
    for h in &holders {
        assert!(out.contains(&format!("pid {h} (")), "{out}");
    }
    for w in &areas {
        assert!(out.contains(&w.display().to_string()), "{out}");
    }
    assert_eq!(alive(&holders), holders, "doctor released a holder");
    // A run refused at its host checks touches nothing.
    let o = Command::new(EXE)
        .args(["run", "--runtime", "/bin/true", "--evidence"])
        .arg(tmp.path().join("refused"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(alive(&holders), holders, "a refused run released a holder");
    assert_eq!(
        work_areas_of(pid),
        areas,
        "a refused run removed a work area"
    );

    let o = Command::new(EXE)
        .args(["run", "--evidence"])
        .arg(&b)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("released what runs killed with SIGKILL left")
            && err.contains("stale-swept.json"),
        "{err}"
    );
    let swept: serde_json::Value =
        serde_json::from_slice(&std::fs::read(b.join("stale-swept.json")).unwrap()).unwrap();
    let listed = |k: &str, what: &str| {
        swept[k].as_array().is_some_and(|v| {
            v.iter()
                .any(|s| s.as_str().is_some_and(|s| s.contains(what)))
        })
    };
    for h in &holders {
        assert!(listed("holders", &format!("pid {h} ")), "{swept:#}");
    }
    for (c, procs) in &cgroups {
        assert!(
            listed("container_cgroups", &c.display().to_string()),
            "{swept:#}"
        );
        // What still ran in it was killed, and is named.
        for p in procs.split_whitespace() {
            assert!(
                listed("container_processes", &format!("pid {p} (")),
                "{swept:#}"
            );
        }
    }
    for w in &areas {
        assert!(listed("work_areas", &w.display().to_string()), "{swept:#}");
    }
    assert_eq!(swept["problems"], serde_json::json!([]), "{swept:#}");
    // Nothing of the killed run is left.
    assert_eq!(alive(&holders), Vec::<i32>::new());
    assert_eq!(container_cgroups_of(pid), Vec::new());
    assert_eq!(work_areas_of(pid), Vec::<PathBuf>::new());
    // The list is one of the run's artifacts.
    let v = Command::new(EXE).arg("verify").arg(&b).output().unwrap();
    assert_eq!(
        v.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&v.stdout),
        String::from_utf8_lossy(&v.stderr)
    );
}

/// A run killed while it waits for its runtime (here a wrapper that hangs at `checkpoint`,
/// forking a `sleep`): the runtime's process group outlives it, marked with the run's pid in
/// its environment; the next run kills it and lists it under `processes`.
#[test]
fn the_next_run_kills_the_runtime_a_killed_run_waited_for() {
    let _baton = crate::common::baton(module_path!());
    let _setup = setup();
    let tmp = tempfile::tempdir().unwrap();
    let runc = netprobe::host::find_in_path(std::path::Path::new("runc")).expect("runc in PATH");
    let gc = tmp.path().join("gc.pid");
    let wrapper = tmp.path().join("runc");
    netprobe::evidence::fsio::write_executable(
        &wrapper,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do\n  if [ \"$a\" = checkpoint ]; then\n    sleep 1000 &\n    echo $! > {gc}\n    wait\n  fi\ndone\nexec {runc} \"$@\"\n",
            gc = gc.display(),
            runc = runc.display()
        ),
        0o755,
    )
    .unwrap();
    let mut child = spawn_run(
        &[
            "--phases".as_ref(),
            "oci".as_ref(),
            "--runtime".as_ref(),
            wrapper.as_os_str(),
        ],
        &tmp.path().join("a"),
    );
    let t0 = Instant::now();
    let sleep_pid: i32 = loop {
        if let Some(p) = std::fs::read_to_string(&gc)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break p;
        }
        assert!(child.try_wait().unwrap().is_none(), "the run ended first");
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the wrapper never hung"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    kill9(&mut child);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        alive(&[sleep_pid]),
        [sleep_pid],
        "the hung runtime's sleep died with the run"
    );

    let b = tmp.path().join("b");
    let o = Command::new(EXE)
        .args(["run", "--phases", "kernel", "--evidence"])
        .arg(&b)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let swept: serde_json::Value =
        serde_json::from_slice(&std::fs::read(b.join("stale-swept.json")).unwrap()).unwrap();
    let listed = swept["processes"].as_array().is_some_and(|v| {
        v.iter().any(|s| {
            s.as_str()
                .is_some_and(|s| s.starts_with(&format!("pid {sleep_pid} ")))
        })
    });
    assert!(listed, "{swept:#}");
    assert_eq!(alive(&[sleep_pid]), Vec::<i32>::new(), "the sleep is left");
}
