//! `netprobe slot restore` and crun 1.28 (CRIU 4.3) killed together with SIGKILL in the middle
//! of the restore, through the real binary (issue 35, item 4). The killed crun leaves the
//! container's cgroup with an empty `.proxy-crun` child in every v1 hierarchy; crun's next
//! restore writes `a` to the container cgroup's `devices.deny` first, which the kernel refuses
//! with EINVAL while that cgroup has a child ("write to `devices.deny`: Invalid argument"). The
//! next restore releases them before the runtime restore and passes the first time; the CRIU
//! lock it removes first is evidence of its own (no name written twice, so no false "free
//! space" exit 2); cleanup leaves nothing.
use crate::common::slot_support;
use netprobe::slot::SlotLock;
use slot_support::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const CRUN: &str = "/opt/crun-1.28/bin/crun";
const CRIU_4_3: &str = "/opt/criu-4.3/sbin/criu";
const SLOT: &str = "94";

/// Live (not zombie) processes whose command line names `needle`, with that command line.
fn procs_naming(needle: &str) -> Vec<(i32, String)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        if stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
        {
            continue;
        }
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            v.push((pid, cmd));
        }
    }
    v
}

/// Starts `slot restore` and kills it and every crun process restoring the slot's bundle with
/// SIGKILL once CRIU has started its restore (its `restore.log` is there). Returns the crun
/// processes killed; none when the restore finished first (then it is snapshotted again and
/// tried once more by the caller).
fn kill_mid_restore(sd: &Path) -> Vec<(i32, String)> {
    let slot = sd.join(format!("slot-{SLOT}"));
    let before: Vec<PathBuf> = std::fs::read_dir(slot.join("evidence"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    let mut child = std::process::Command::new(EXE)
        .args(["slot", "restore", "--slot", SLOT, "--state-dir"])
        .arg(sd)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let restoring = || {
        std::fs::read_dir(slot.join("evidence"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| !before.contains(p) && p.to_string_lossy().ends_with("-restore"))
            .any(|p| p.join("criu-work/restore.log").exists())
    };
    while !restoring() {
        assert!(Instant::now() < deadline, "the restore never reached CRIU");
        if child.try_wait().unwrap().is_some() {
            return Vec::new();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let bundle = slot.join("bundle").to_string_lossy().into_owned();
    let crun: Vec<(i32, String)> = procs_naming(&format!("--bundle {bundle}"))
        .into_iter()
        .filter(|(_, c)| c.contains(" restore "))
        .collect();
    let kill = |pid: i32| {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    };
    kill(child.id() as i32);
    for (p, _) in &crun {
        kill(*p);
    }
    let st = child.wait().unwrap();
    if std::os::unix::process::ExitStatusExt::signal(&st) != Some(libc::SIGKILL) {
        return Vec::new();
    }
    crun
}

#[test]
fn crun_killed_with_netprobe_mid_restore_then_the_next_restore_passes() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    for b in [CRUN, CRIU_4_3] {
        assert!(
            Path::new(b).is_file(),
            "{b} missing: run sudo bash host/setup.sh"
        );
    }
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![94]);
    let slot = sd.join(format!("slot-{SLOT}"));

    let (code, out, err) = cli_slot(
        "provision",
        SLOT,
        &sd,
        &[
            "--runtime",
            CRUN,
            "--criu",
            CRIU_4_3,
            "--no-probe-gate",
            "--reason",
            "crun kill test",
        ],
    );
    assert_eq!(code, Some(0), "provision: {err}{out}");
    let cgroups_path = state(&sd, 94).cgroups_path;
    let devices = netprobe::slot::resources::crun_leftovers::cgroup_dirs(&cgroups_path)
        .into_iter()
        .find(|d| d.starts_with("/sys/fs/cgroup/devices"))
        .expect("the devices hierarchy (hybrid cgroup v1)");

    // Killed together mid-restore (the restore may win the race: then again).
    let mut killed = Vec::new();
    for _ in 0..3 {
        let (code, out, err) = cli_slot("snapshot", SLOT, &sd, &[]);
        assert_eq!(code, Some(0), "snapshot: {err}{out}");
        killed = kill_mid_restore(&sd);
        if !killed.is_empty() {
            break;
        }
        // The restore finished first: the slot runs, snapshot it again.
    }
    assert!(
        !killed.is_empty(),
        "crun was never caught mid-restore in 3 tries"
    );
    // What the kill left (the runtime's CRIU may still be finishing: wait for the slot lock).
    let deadline = Instant::now() + Duration::from_secs(60);
    while SlotLock::acquire(&slot.join("lock")).is_err() {
        assert!(Instant::now() < deadline, "lock never released");
        std::thread::sleep(Duration::from_millis(50));
    }
    let proxy = devices.join(".proxy-crun");
    assert!(
        proxy.is_dir(),
        "the killed crun left {} (crun killed: {killed:?})",
        proxy.display()
    );
    // The kernel's refusal behind crun's error, on the leftover itself: `a` cannot be written
    // to devices.deny of a devices cgroup that has a child.
    let e = std::fs::write(devices.join("devices.deny"), "a").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");

    // The next restore passes the first time, having released what crun left.
    let (code, out, err) = cli_slot("restore", SLOT, &sd, &["--json"]);
    assert_eq!(code, Some(0), "restore after the kill: {err}{out}");
    let doc = json(&out);
    assert!(gate_proven(&doc, "net-fidelity"), "{doc}");
    assert!(gate_proven(&doc, "guest-http"), "{doc}");
    let ev = newest(&slot, "restore");
    let verb: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ev.join("verb.json")).unwrap()).unwrap();
    let released: Vec<&str> = verb["facts"]["cgroups_released_before_restore"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    for d in [proxy.clone(), devices.clone()] {
        assert!(
            released.contains(&d.to_str().unwrap()),
            "{} released before the restore: {verb:#}",
            d.display()
        );
    }
    let journal = std::fs::read_to_string(slot.join("journal.jsonl")).unwrap();
    let removed = format!("removed empty cgroups {}", released.join(", "));
    assert!(
        journal.lines().any(|l| l.contains(&removed)),
        "journal does not say {removed:?}"
    );
    // Every evidence file under a name of its own: none written twice, none renamed.
    assert!(verb["facts"].get("evidence_renamed").is_none(), "{verb:#}");
    assert!(!ev.join("incomplete.txt").exists());
    assert!(!ev.join("criu-lock-released.txt").exists());
    if verb["facts"]
        .get("criu_lock_released_before_restore")
        .is_some()
    {
        let t = std::fs::read_to_string(ev.join("criu-lock-released-before-restore.txt")).unwrap();
        assert!(t.contains("result: removed"), "{t}");
    }

    let holders = holder_pids(&sd);
    let (code, out, err) = cli_slot("cleanup", SLOT, &sd, &[]);
    assert_eq!(code, Some(0), "cleanup: {err}{out}");
    assert_released(&sd, &holders);
    let left: Vec<PathBuf> = netprobe::slot::resources::crun_leftovers::cgroup_dirs(&cgroups_path)
        .into_iter()
        .filter(|d| d.exists())
        .collect();
    assert_eq!(left, Vec::<PathBuf>::new(), "cgroups left");
    let bundle = slot.join("bundle").to_string_lossy().into_owned();
    assert_eq!(procs_naming(&bundle), Vec::new(), "crun or CRIU left");
}
