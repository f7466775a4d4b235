//! `netprobe matrix` killed with SIGKILL while its parts run: no part outlives it. Each running
//! part gets SIGTERM from the kernel as the matrix dies (its parent-death signal), stops through
//! its own interruption path — its folder keeps its `interrupted.txt` — and releases what it
//! started: its holders, the runtime and CRIU it was waiting for, its containers, its work area.
//! Real runc (behind a wrapper that hangs at `checkpoint`) × CRIU 4.2.1 and 4.3: two cells, side
//! by side.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNC: &str = "/opt/runc-1.4.3/sbin/runc";
const CRIU_4_2: &str = "/opt/criu-4.2.1/sbin/criu";
const CRIU_4_3: &str = "/opt/criu-4.3/sbin/criu";

/// How long the parts may take to stop and release what they started once the matrix is dead
/// (a part's own release: its hung runtime tree killed, its container and holders released).
const RELEASE_BOUND: Duration = Duration::from_secs(60);

/// Live (not zombie) processes: `(pid, /proc/<pid> folder)`.
fn live_processes() -> Vec<(i32, PathBuf)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let (_, rest) = stat.rsplit_once(") ")?;
            (!rest.starts_with('Z')).then(|| (pid, e.path()))
        })
        .collect()
}

/// Live children of `ppid` (field 4 of `/proc/<pid>/stat`).
fn children_of(ppid: i32) -> Vec<i32> {
    live_processes()
        .into_iter()
        .filter(|(_, dir)| {
            std::fs::read_to_string(dir.join("stat")).is_ok_and(|s| {
                s.rsplit_once(") ")
                    .and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<i32>().ok())
                    == Some(ppid)
            })
        })
        .map(|(p, _)| p)
        .collect()
}

fn is_alive(pid: i32) -> bool {
    live_processes().iter().any(|(p, _)| *p == pid)
}

/// What the part `part` started that is still there, one line each: its holders (`--run-pid`),
/// the runtime and CRIU trees it ran (marked in their environment), its container cgroups
/// (named after its pid) and its work areas (`/var/tmp/netprobe-<pid>-*`).
fn left_by(part: i32) -> Vec<String> {
    use netprobe::probe::stale::{
        container_run_pid, environ_run_pid, holder_run_pid, probe_container_cgroups,
    };
    let mut left = Vec::new();
    for (pid, dir) in live_processes() {
        let cmd = std::fs::read(dir.join("cmdline")).unwrap_or_default();
        let shown = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if holder_run_pid(&cmd) == Some(part) {
            left.push(format!("holder pid {pid}: {shown}"));
        } else if environ_run_pid(&std::fs::read(dir.join("environ")).unwrap_or_default())
            == Some(part)
        {
            left.push(format!("marked process pid {pid}: {shown}"));
        }
    }
    for (name, dir) in probe_container_cgroups() {
        if container_run_pid(&name) == Some(part) {
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            left.push(format!(
                "container cgroup {} (processes: {})",
                dir.display(),
                procs.split_whitespace().collect::<Vec<_>>().join(" ")
            ));
        }
    }
    let prefix = format!("netprobe-{part}-");
    for e in std::fs::read_dir("/var/tmp").unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            left.push(format!("work area {}", e.path().display()));
        }
    }
    left
}

/// On the way out of a failed test: the parts still running get SIGTERM (their own release),
/// SIGKILL after 40 s, and then what a killed one left is swept as the next run would; the
/// hung checkpoints' sleeps are killed.
struct Stop {
    parts: Vec<i32>,
    sleeps: Vec<i32>,
}

impl Drop for Stop {
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let running: Vec<i32> = self
            .parts
            .iter()
            .copied()
            .filter(|p| is_alive(*p))
            .collect();
        for p in &running {
            let _ = kill(Pid::from_raw(*p), Signal::SIGTERM);
        }
        let t0 = Instant::now();
        while running.iter().any(|p| is_alive(*p)) && t0.elapsed() < Duration::from_secs(40) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let killed: Vec<i32> = running.into_iter().filter(|p| is_alive(*p)).collect();
        for p in killed.iter().chain(&self.sleeps) {
            let _ = kill(Pid::from_raw(*p), Signal::SIGKILL);
        }
        if !killed.is_empty() {
            std::thread::sleep(Duration::from_secs(1));
            let _ = netprobe::probe::stale::sweep(
                Path::new("/proc"),
                Path::new("/var/tmp"),
                &std::env::temp_dir(),
            );
        }
    }
}

/// The pids the hung checkpoints wrote into `dir` (one file per wrapper, named by its pid).
fn hung_sleeps(dir: &Path) -> Vec<i32> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| !e.file_name().to_string_lossy().ends_with(".tmp"))
                .filter_map(|e| std::fs::read_to_string(e.path()).ok()?.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// `netprobe matrix --runtime <wrapper> --criu 4.2.1 --criu 4.3 --jobs 2 --evidence <tmp>/mx`,
/// started (stderr in `<tmp>/stderr.txt`), its runtime a runc wrapper that hangs at
/// `checkpoint`: a `sleep 600` whose pid it writes into `<tmp>/hang/<wrapper pid>`.
fn spawn_hanging_matrix(tmp: &Path) -> std::process::Child {
    let hang = tmp.join("hang");
    std::fs::create_dir(&hang).unwrap();
    let wrapper = tmp.join("runc");
    netprobe::evidence::fsio::write_executable(
        &wrapper,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = checkpoint ] && {{ sleep 600 & echo $! > {h}/$$.tmp; mv {h}/$$.tmp {h}/$$; wait; }}; done\nexec {RUNC} \"$@\"\n",
            h = hang.display()
        ),
        0o755,
    )
    .unwrap();
    Command::new(common::cli::EXE)
        .args(["matrix", "--runtime", wrapper.to_str().unwrap()])
        .args([
            "--criu",
            CRIU_4_2,
            "--criu",
            CRIU_4_3,
            "--jobs",
            "2",
            "--evidence",
        ])
        .arg(tmp.join("mx"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(tmp.join("stderr.txt")).unwrap())
        .spawn()
        .unwrap()
}

/// The matrix folder `mx` after its matrix was killed: each cell part (running then) keeps its
/// `interrupted.txt` saying SIGTERM and no result; the kernel and criu parts (ended before)
/// their result; the matrix itself only its `incomplete.txt`.
fn assert_interrupted_parts(mx: &Path) {
    let mut cells = 0;
    for e in std::fs::read_dir(mx).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "logs" || !e.path().is_dir() {
            continue;
        }
        if name.starts_with("cell-") {
            cells += 1;
            let note = std::fs::read_to_string(e.path().join("interrupted.txt"))
                .unwrap_or_else(|err| panic!("{name}: no interrupted.txt ({err})"));
            assert!(
                note.contains("netprobe run was interrupted by SIGTERM"),
                "{name}: {note}"
            );
            assert!(!e.path().join("netprobe-result.json").exists(), "{name}");
        } else {
            assert!(e.path().join("netprobe-result.json").is_file(), "{name}");
        }
    }
    assert_eq!(cells, 2);
    assert!(mx.join("incomplete.txt").is_file());
    assert!(!mx.join("matrix.json").exists() && !mx.join("interrupted.txt").exists());
}

/// What is still there of the parts `parts` and the sleeps `sleeps` (empty: nothing).
fn still_there(parts: &[i32], sleeps: &[i32]) -> Vec<String> {
    let mut left: Vec<String> = parts
        .iter()
        .filter(|p| is_alive(**p))
        .map(|p| format!("part pid {p}"))
        .collect();
    left.extend(
        sleeps
            .iter()
            .filter(|s| is_alive(**s))
            .map(|s| format!("hung checkpoint's sleep pid {s}")),
    );
    left.extend(parts.iter().flat_map(|p| left_by(*p)));
    left
}

#[test]
fn a_matrix_killed_with_sigkill_takes_its_running_parts_with_it() {
    let _baton = crate::common::baton(module_path!());
    common::require_root();
    for b in [RUNC, CRIU_4_2, CRIU_4_3] {
        assert!(
            Path::new(b).is_file(),
            "{b} missing: run sudo bash host/setup.sh"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let hang = tmp.path().join("hang");
    let mut matrix = spawn_hanging_matrix(tmp.path());
    let mpid = matrix.id() as i32;
    let mut stop = Stop {
        parts: Vec::new(),
        sleeps: Vec::new(),
    };
    // Both cells hang in their checkpoint: each part then has a holder, a container and the
    // runtime's tree running.
    let t0 = Instant::now();
    while hung_sleeps(&hang).len() < 2 {
        stop.parts = children_of(mpid);
        stop.sleeps = hung_sleeps(&hang);
        assert!(
            matrix.try_wait().unwrap().is_none(),
            "the matrix ended before both cells hung: {}",
            std::fs::read_to_string(tmp.path().join("stderr.txt")).unwrap_or_default()
        );
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "the cells never both hung"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.sleeps = hung_sleeps(&hang);
    let parts = children_of(mpid);
    stop.parts = parts.clone();
    assert_eq!(parts.len(), 2, "two running parts expected: {parts:?}");
    for p in &parts {
        let left = left_by(*p);
        for what in ["holder pid ", "marked process pid ", "container cgroup "] {
            assert!(
                left.iter().any(|l| l.starts_with(what)),
                "part {p} runs no {what}…: {left:#?}"
            );
        }
    }

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(mpid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    matrix.wait().unwrap();
    let t1 = Instant::now();
    let left = loop {
        let left = still_there(&parts, &stop.sleeps);
        if left.is_empty() || t1.elapsed() > RELEASE_BOUND {
            break left;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        left.is_empty(),
        "{} s after the matrix was killed, still there: {left:#?}",
        RELEASE_BOUND.as_secs()
    );
    assert_interrupted_parts(&tmp.path().join("mx"));
}
