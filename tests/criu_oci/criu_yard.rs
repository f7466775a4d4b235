//! A CRIU killed mid-restore leaves its root yard `/tmp/.criu.mntns.XXXXXX` (an empty folder
//! CRIU removes itself only when it ends on its own); netprobe removes it. Driven through the
//! binary with the real runc and CRIU: `netprobe run --phases oci` is sent SIGTERM while the
//! runtime rung's restore has its yard (seen appearing in `/tmp`): the run ends interrupted
//! (143), `interrupted.txt` says the yard named in the step's `restore.log` was removed, and no
//! yard is left that was not there before. Also: `doctor` counts leftover yards only when no
//! CRIU runs (a unit test covers the rule; here its line is checked against `/tmp`).

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::EXE;

/// Both tests look at the yards in `/tmp`: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn yards() -> BTreeSet<PathBuf> {
    netprobe::criu::yard::yards_in(Path::new("/tmp"))
        .into_iter()
        .collect()
}

fn output(dir: &Path) -> String {
    let r = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap_or_default();
    format!("stdout:\n{}\nstderr:\n{}", r("stdout.txt"), r("stderr.txt"))
}

/// One `netprobe run --phases oci` in `dir`, sent SIGTERM about 15 ms after a yard that was not
/// in `before` appears: its exit code and the yard seen (None when none appeared before it
/// ended).
fn interrupted_at_a_yard(dir: &Path, before: &BTreeSet<PathBuf>) -> (Option<i32>, Option<PathBuf>) {
    let ev = dir.join("ev");
    let mut child = Command::new(EXE)
        .args(["run", "--quiet", "--phases", "oci", "--evidence"])
        .arg(&ev)
        .env_remove("CRIU_CONFIG_FILE")
        .env_remove("NETPROBE_STEP_TIMEOUT_S")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("stdout.txt")).unwrap())
        .stderr(std::fs::File::create(dir.join("stderr.txt")).unwrap())
        .process_group(0)
        .spawn()
        .expect("spawn netprobe");
    let until = Instant::now() + Duration::from_secs(120);
    let mut seen = None;
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if seen.is_none()
            && let Some(y) = yards().difference(before).next().cloned()
        {
            // CRIU names its yard in its log ~0.3 ms after creating it; its restore keeps it
            // ~90 ms.
            std::thread::sleep(Duration::from_millis(15));
            // SAFETY: kill(2) of our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            seen = Some(y);
        }
        if Instant::now() > until {
            // SAFETY: kill(2) of our own child's process group.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!("netprobe still running after 120 s\n{}", output(dir));
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    (code, seen)
}

#[test]
fn an_interrupted_restore_leaves_no_criu_root_yard() {
    let _baton = crate::common::baton(module_path!());
    crate::common::require_root();
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let before = yards();
    // The yard lives ~90 ms of a run of a few seconds; a try whose SIGTERM landed after CRIU had
    // finished (CRIU removed its own yard) proves nothing and is repeated.
    for i in 0..5 {
        let dir = tmp.path().join(format!("try{i}"));
        std::fs::create_dir(&dir).unwrap();
        let (code, seen) = interrupted_at_a_yard(&dir, &before);
        let left: Vec<_> = yards().difference(&before).cloned().collect();
        assert!(
            left.is_empty(),
            "try {i}: CRIU root yards left: {left:?}\n{}",
            output(&dir)
        );
        let Some(yard) = seen else {
            panic!(
                "try {i}: the run ended (exit {code:?}) and no CRIU root yard appeared in /tmp\n{}",
                output(&dir)
            );
        };
        if code != Some(143) {
            continue;
        }
        let note = std::fs::read_to_string(dir.join("ev/interrupted.txt")).unwrap_or_default();
        eprintln!("try {i}: {note}");
        if note.contains(&format!("{}: removed", yard.display())) {
            assert!(
                note.contains("CRIU root yard named in ") && note.contains("restore.log"),
                "{note}"
            );
            return;
        }
    }
    panic!("5 tries: no SIGTERM landed while CRIU restored (see the tries above)");
}

/// `doctor` counts the yards in `/tmp` (one made here, as `mkdtemp` would name it) when no CRIU
/// runs, and says how to remove them.
#[test]
fn doctor_counts_leftover_yards() {
    let _baton = crate::common::baton(module_path!());
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let mine = PathBuf::from(format!("/tmp/.criu.mntns.t{:05}", nanos % 100_000));
    std::fs::create_dir(&mine).unwrap();
    let out = Command::new(EXE).arg("doctor").output().unwrap();
    let n = yards().len();
    let running = netprobe::criu::yard::criu_running(Path::new("/proc"));
    std::fs::remove_dir(&mine).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("CRIU root yard(s) /tmp/.criu.mntns.*"));
    if running {
        assert!(line.is_none(), "a CRIU runs: no count\n{text}");
    } else {
        assert!(
            line.is_some_and(|l| l.starts_with(&format!("note    {n} CRIU root yard(s)"))),
            "{n} yards, no CRIU running\n{text}"
        );
        assert!(text.contains("fix: rmdir /tmp/.criu.mntns.*"), "{text}");
    }
}
