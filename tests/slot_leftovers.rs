//! What a slot verb killed with SIGKILL leaves, and whose it is (root, real runc and CRIU,
//! through the binary): a first `slot snapshot` killed while CRIU dumps leaves its CRIU PATH
//! folder (`/tmp/netprobe-criu-path-<pid>-…`), which carries the slot's owner tag, so another
//! slot's `cleanup` leaves it (and does not list it), and the slot's own `cleanup` takes it.
mod slot_support;
use netprobe::slot::SlotLock;
use slot_support::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// `slot status --json` of `slot`, validated against the slot-state schema.
fn status(v: &jsonschema::Validator, slot: &str, sd: &Path) -> serde_json::Value {
    let (code, out, err) = cli_slot("status", slot, sd, &["--json"]);
    assert_eq!(code, Some(0), "status: {err}{out}");
    let doc = json(&out);
    assert_valid(v, &doc);
    doc
}

/// The entries of the temporary folder named `netprobe-criu-path-<pid>-…`.
fn criu_path_dirs_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("netprobe-criu-path-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// The `verb.json` of the newest `verb` folder of slot folder `slot_dir`.
fn verb_json(slot_dir: &Path, verb: &str) -> serde_json::Value {
    let p = newest(slot_dir, verb).join("verb.json");
    json(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

/// Starts `slot snapshot` of `slot` (output discarded) and kills it with SIGKILL once CRIU has
/// locked the network (`Lock network` in the dump log) while its CRIU PATH folder exists; then
/// waits until the runtime and CRIU it left have let go of the slot lock. Returns the killed
/// verb's pid.
fn kill_snapshot_while_dumping(slot: &str, sd: &Path) -> u32 {
    let slot_dir = sd.join(format!("slot-{slot}"));
    let mut child = std::process::Command::new(EXE)
        .args(["slot", "snapshot", "--slot", slot, "--state-dir"])
        .arg(sd)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let locked = || {
        std::fs::read_dir(slot_dir.join("evidence"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with("-snapshot"))
            .any(|e| {
                std::fs::read_to_string(e.path().join("criu-work/dump.log"))
                    .is_ok_and(|l| l.contains("Lock network"))
            })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !locked() || criu_path_dirs_of(pid).is_empty() {
        assert!(Instant::now() < deadline, "CRIU never locked the network");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the snapshot finished before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while SlotLock::acquire(&slot_dir.join("lock")).is_err() {
        assert!(Instant::now() < deadline, "lock never released");
        std::thread::sleep(Duration::from_millis(50));
    }
    pid
}

#[test]
fn killed_first_snapshot_leftovers_stay_with_their_slot() {
    require_root();
    let _s = serial();
    let v = slot_state_validator();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![91, 92]);
    let (a, b) = (sd.join("slot-91"), sd.join("slot-92"));
    for slot in ["91", "92"] {
        let (code, out, err) = cli_slot(
            "provision",
            slot,
            &sd,
            &["--no-probe-gate", "--reason", "leftovers test"],
        );
        assert_eq!(code, Some(0), "provision {slot}: {err}{out}");
    }
    let owner_a = state(&sd, 91).owner_id;

    let killed = kill_snapshot_while_dumping("91", &sd);
    let left = criu_path_dirs_of(killed);
    assert!(!left.is_empty(), "the SIGKILL left no CRIU PATH folder");
    for d in &left {
        assert!(
            d.to_string_lossy()
                .contains(&format!("-{killed}-slot-{owner_a}-")),
            "not tagged with slot 91's owner id {owner_a}: {}",
            d.display()
        );
    }

    let doc = status(&v, "91", &sd);
    assert_eq!(doc["state"]["phase"], "snapshotting", "{doc:#}");
    assert_eq!(doc["live"]["container"]["status"], "absent", "{doc:#}");

    // Another slot's cleanup leaves slot 91's leftovers alone and does not list them.
    let holders = holder_pids(&sd);
    let (code, out, err) = cli_slot("cleanup", "92", &sd, &[]);
    assert_eq!(code, Some(0), "cleanup 92: {err}{out}");
    let doc92 = verb_json(&b, "cleanup").to_string();
    for d in &left {
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        assert!(d.exists(), "slot 92's cleanup removed {}", d.display());
        assert!(
            !out.contains(&name),
            "slot 92's cleanup names {name}: {out}"
        );
        assert!(!doc92.contains(&name), "slot 92's verb.json names {name}");
    }

    // Its own cleanup takes them and names them.
    let (code, out, err) = cli_slot("cleanup", "91", &sd, &[]);
    assert_eq!(code, Some(0), "cleanup 91: {err}{out}");
    assert_eq!(criu_path_dirs_of(killed), Vec::<PathBuf>::new(), "{out}");
    for d in &left {
        assert!(
            out.contains(d.to_string_lossy().as_ref()),
            "not named: {}: {out}",
            d.display()
        );
    }
    let doc = verb_json(&a, "cleanup");
    assert!(
        doc["facts"]["stale_criu_path_dirs_removed"]
            .to_string()
            .contains(left[0].to_string_lossy().as_ref()),
        "{doc:#}"
    );
    assert_released(&sd, &holders);
}
