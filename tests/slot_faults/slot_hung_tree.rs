//! The slot driver under hung child trees (issue 11, point 1), driven through the netprobe
//! binary: the runtime (`--runtime`) and CRIU (`--criu`, run by the runtime as `criu swrk`) are
//! wrapper scripts that, while a flag file names their step, fork a grandchild (`sleep`) holding
//! the inherited stdio and wait for it for ever. With `NETPROBE_STEP_TIMEOUT_S=6` every hung
//! snapshot / restore ends within seconds with an error naming the bound, the grandchild is
//! dead; SIGTERM during a hung checkpoint (default bound) ends the verb within seconds (143)
//! with the hung tree killed; and `cleanup` then releases everything.
use crate::common::slot_support;
use slot_support::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// `slot VERB` with `NAME.hang` = `step`: fails within 60 s naming the 6 s bound; the grandchild
/// is dead (given up to 5 s: an orphan is reaped by pid 1).
fn hung_verb(dir: &Path, sd: &Path, verb: &str, name: &str, step: &str) {
    let _ = std::fs::remove_file(dir.join("gc.pid"));
    std::fs::write(dir.join(format!("{name}.hang")), step).unwrap();
    let t0 = Instant::now();
    let (code, out, err) = cli_slot_env(verb, "47", sd, &[], &[("NETPROBE_STEP_TIMEOUT_S", "6")]);
    std::fs::remove_file(dir.join(format!("{name}.hang"))).unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(60),
        "{verb}: {:?}",
        t0.elapsed()
    );
    assert_ne!(
        code,
        Some(0),
        "{verb} with {name} hung at {step}: {out}{err}"
    );
    assert!(
        err.contains("6000 ms") && err.contains("whole process tree was killed"),
        "{verb} with {name} hung at {step}: {err}{out}"
    );
    let gc: i32 = std::fs::read_to_string(dir.join("gc.pid"))
        .unwrap_or_else(|e| panic!("{name} never hung at {step} ({e}): {err}"))
        .trim()
        .parse()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while !gone(gc) {
        assert!(
            Instant::now() < until,
            "grandchild {gc} outlived `slot {verb}`"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn hung_runtime_and_criu_in_snapshot_and_restore_are_bounded() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![47]);
    let wdir = tmp.path().join("wrappers");
    std::fs::create_dir(&wdir).unwrap();
    let runc = netprobe::host::find_in_path(Path::new("runc")).expect("runc in PATH");
    let rw = flagged_wrapper(&wdir, "runc", &runc);
    let cw = flagged_wrapper(&wdir, "criu", &netprobe::host::default_criu());
    let (rw, cw) = (rw.to_string_lossy(), cw.to_string_lossy());
    let (code, out, err) = cli_slot(
        "provision",
        "47",
        &sd,
        &[
            "--no-probe-gate",
            "--reason",
            "hung-tree test",
            "--allow-script-binaries",
            "wrappers that hang on request",
            "--runtime",
            &rw,
            "--criu",
            &cw,
        ],
    );
    assert_eq!(code, Some(0), "provision: {err}{out}");

    // SIGTERM to `netprobe slot snapshot` while the runtime's checkpoint hangs (default bound):
    // the verb ends within seconds (143) and the hung tree dies with it.
    let (code, took, _) = interrupt_hung(
        &wdir,
        &sd,
        ("47", &[]),
        ("snapshot", "runc", "checkpoint"),
        libc::SIGTERM,
        20,
        || {},
    );
    assert_eq!(code, Some(143));
    assert!(took < Duration::from_secs(8), "{took:?}");
    let gc: i32 = std::fs::read_to_string(wdir.join("gc.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while !gone(gc) {
        assert!(
            Instant::now() < until,
            "grandchild {gc} outlived the SIGTERMed verb"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    hung_verb(&wdir, &sd, "snapshot", "runc", "checkpoint");
    hung_verb(&wdir, &sd, "snapshot", "criu", "swrk");
    let (code, out, err) = cli_slot("snapshot", "47", &sd, &[]);
    assert_eq!(code, Some(0), "snapshot after the hung ones: {err}{out}");
    hung_verb(&wdir, &sd, "restore", "runc", "restore");
    hung_verb(&wdir, &sd, "restore", "criu", "swrk");
    sigint_mid_restore(&wdir, &sd);
    let (code, out, err) = cli_slot("restore", "47", &sd, &[]);
    assert_eq!(code, Some(0), "restore after the hung ones: {err}{out}");

    let holders = holder_pids(&sd);
    let (code, out, err) = cli_slot("cleanup", "47", &sd, &[]);
    assert_eq!(code, Some(0), "cleanup: {err}{out}");
    assert_released(&sd, &holders);
}

/// SIGINT to `netprobe slot restore` while CRIU hangs inside runc's restore (default bound):
/// runc has made its state directory (no `state.json` yet, `criu-root` mounted in it). The verb
/// ends with 130, and the release leaves nothing of the step: the half-made state directory and
/// its mounts are gone (else every later restore of the id fails "already exists"), no mount is
/// left in the slot but its overlay, `interrupted.txt` is in the verb's evidence and the journal
/// ends the verb (not ok). The restore run next by the caller proves the slot can be retried.
fn sigint_mid_restore(wdir: &Path, sd: &Path) {
    let id = state(sd, 47).container_id;
    let half_made = sd.join("slot-47/runc-root").join(&id);
    let (code, _, err) = interrupt_hung(
        wdir,
        sd,
        ("47", &[]),
        ("restore", "criu", "swrk"),
        libc::SIGINT,
        30,
        || assert!(half_made.is_dir(), "runc made its state directory first"),
    );
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("interrupted by SIGINT"), "{err}");
    assert!(err.contains(&format!("released container {id}")), "{err}");
    assert!(!half_made.exists(), "half-made runtime state left: {err}");
    let slot = std::fs::canonicalize(sd.join("slot-47")).unwrap();
    let merged = slot.join("bundle/rootfs");
    let mi = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let left: Vec<&str> = mi
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| Path::new(m).starts_with(&slot) && Path::new(m) != merged)
        .collect();
    assert!(left.is_empty(), "mounts left in the slot: {left:?}");
    let newest = std::fs::read_dir(slot.join("evidence"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with("-restore"))
        .max()
        .unwrap();
    let note = std::fs::read_to_string(newest.join("interrupted.txt")).unwrap();
    assert!(note.contains("interrupted by SIGINT"), "{note}");
    let journal = std::fs::read_to_string(slot.join("journal.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(journal.lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "end", "{last}");
    assert_eq!(last["ok"], false, "{last}");
}
