//! Slot verbs against what other hands or the host did to their folders, over temporary
//! folders with the recording fake runtime ([`super::tests::drive`]): a state directory inside
//! an evidence folder, on a full or read-only filesystem, a copied slot folder, a cleanup after
//! a cleanup.

use super::record::journal;
use super::resources::slot_dir::{self, SlotPaths};
use super::resources::state_dir::{self, StateDirUse};
use super::state::*;
use super::tests::{assert_refused, destructive, drive, existing};
use super::{SlotError, SlotOutcome, Verb};
use crate::slot::JournalEvent;
use std::fs;
use std::path::Path;

/// A state directory inside a folder netprobe wrote (a run's evidence, a matrix folder, a slot
/// verb's evidence folder) is refused as a usage error before anything is created: the slot's
/// files there would make `netprobe verify` of that folder fail.
#[test]
fn provision_refuses_a_state_dir_inside_an_evidence_folder() {
    for marker in ["netprobe-result.json", "matrix.json", "verb.json"] {
        let tmp = tempfile::tempdir().unwrap();
        let ev = tmp.path().join("ev");
        fs::create_dir(&ev).unwrap();
        fs::write(ev.join(marker), b"{}").unwrap();
        let sd = ev.join("slots");
        let (r, trace) = drive(Verb::Provision, &sd, None, |a| {
            a.no_probe_gate = true;
            a.reason = Some("unit test".into());
        });
        let e = r.unwrap_err();
        assert_eq!(e.exit_code(), 2, "{marker}: {e}");
        let m = e.to_string();
        assert!(
            m.contains(&format!("--state-dir {}", sd.display()))
                && m.contains(&format!("(it holds {marker})"))
                && m.contains("choose a folder outside it"),
            "{m}"
        );
        assert!(!sd.exists(), "{marker}: the state dir was created");
        assert!(trace.is_empty(), "{trace:#?}");
    }
}

/// A tmpfs of `opts` mounted on a fresh temporary folder (root), unmounted on drop.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn new(opts: &str) -> Tmpfs {
        assert!(nix::unistd::geteuid().is_root(), "needs root (mount)");
        let dir = tempfile::tempdir().unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "netprobe-unit"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs {opts}");
        Tmpfs(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(self.0.path(), nix::mount::MntFlags::MNT_DETACH);
    }
}

/// Provision of slot 1 in `sd` with two tiny stand-ins for runc and CRIU (beside `sd`'s
/// filesystem, in `bin`) and no probe gate.
fn provision_with_stand_ins(
    sd: &Path,
    bin: &Path,
) -> (Result<SlotOutcome, SlotError>, Vec<String>) {
    let script = |name: &str, line: &str| {
        let p = bin.join(name);
        crate::evidence::fsio::write_executable(&p, format!("#!/bin/sh\necho '{line}'\n"), 0o755)
            .unwrap();
        p
    };
    let (rt, cr) = (
        script("runc", "runc version 1.1.5"),
        script("criu", "Version: 4.2.1"),
    );
    drive(Verb::Provision, sd, None, |a| {
        a.no_probe_gate = true;
        a.reason = Some("unit test".into());
        a.allow_script_binaries = Some("unit test stand-ins".into());
        a.runtime = Some(rt);
        a.criu = Some(cr);
    })
}

/// A state directory on a full or read-only filesystem refuses the slot folder: the
/// `state-dir` gate fails (exit 1, as at entry) naming the filesystem and the fix, nothing of
/// the attempt is left (the folder made before the marker could not be written is removed), so
/// once space is freed the same slot number can be provisioned.
#[test]
fn a_full_or_read_only_state_dir_refuses_slot_create_as_a_gate_and_leaves_nothing() {
    let bin = tempfile::tempdir().unwrap();
    let fs_ = Tmpfs::new("size=64k,mode=0755");
    let sd = fs_.0.path().join("state");
    state_dir::check_state_dir(&sd, StateDirUse::Create).unwrap();
    // Fill the filesystem: the slot folder can be made, its owner.json cannot.
    let filler = fs_.0.path().join("filler");
    {
        use std::io::Write;
        let mut f = fs::File::create(&filler).unwrap();
        while f.write_all(&[0u8; 4096]).is_ok() {}
    }
    let (r, trace) = provision_with_stand_ins(&sd, bin.path());
    let e = r.unwrap_err();
    assert_refused(&e, 1, "state-dir");
    let m = e.to_string();
    assert!(
        m.contains("No space left on device")
            && m.contains("the tmpfs filesystem netprobe-unit")
            && m.contains(&format!("fix: free space in {}", fs_.0.path().display()))
            && m.contains("nothing of this attempt is left (slot 1 is not used up)"),
        "{m}"
    );
    assert!(
        !sd.join("slot-1").exists(),
        "the slot folder was left behind"
    );
    assert!(
        !trace.iter().any(|e| e.starts_with("runtime ")),
        "{trace:#?}"
    );
    // Space freed: the same slot number can be made.
    fs::remove_file(&filler).unwrap();
    slot_dir::create_slot(&SlotPaths::new(&sd, 1)).unwrap();
    fs::remove_dir_all(sd.join("slot-1")).unwrap();
    // Read-only: refused at the mkdir, with the remount as the fix.
    let st = std::process::Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(fs_.0.path())
        .status()
        .unwrap();
    assert!(st.success());
    let (r, _) = provision_with_stand_ins(&sd, bin.path());
    let e = r.unwrap_err();
    assert_refused(&e, 1, "state-dir");
    let m = e.to_string();
    assert!(
        m.contains("Read-only file system")
            && m.contains(&format!(
                "fix: remount {} read-write",
                fs_.0.path().display()
            )),
        "{m}"
    );
}

/// A slot folder copied into another state directory is refused by every verb and by status
/// (gate `ownership-marker`, exit 1), naming the path it was provisioned at and the
/// `--state-dir` to use (or, the original gone, to move it back).
#[test]
fn a_copied_slot_folder_names_the_state_dir_to_use() {
    let f = existing(false, Phase::Running);
    let sd2 = f.sd.parent().unwrap().join("copy");
    state_dir::check_state_dir(&sd2, StateDirUse::Create).unwrap();
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(&f.paths.root)
        .arg(&sd2)
        .status()
        .unwrap();
    assert!(st.success());
    for verb in [Verb::Status, Verb::Snapshot] {
        let (r, trace) = drive(verb, &sd2, Some("running"), |_| {});
        let e = r.unwrap_err();
        assert_refused(&e, 1, "ownership-marker");
        let m = e.to_string();
        assert!(
            m.contains("was copied or moved from there")
                && m.contains(&format!("use `--state-dir {}`", f.sd.display()))
                && !m.contains("move this folder back"),
            "{m}"
        );
        assert!(!trace.iter().any(|e| destructive(e)), "{trace:#?}");
    }
    fs::rename(&f.paths.root, f.sd.join("moved-away")).unwrap();
    let (r, _) = drive(Verb::Status, &sd2, Some("running"), |_| {});
    let m = r.unwrap_err().to_string();
    assert!(
        m.contains("does not exist now: move this folder back there first"),
        "{m}"
    );
}

/// A second cleanup (the first stopped the holder and recorded none since) says which cleanup
/// released the holder, quoting it, not "no holder recorded" as if the slot never had one.
#[test]
fn a_second_cleanup_names_the_cleanup_that_released_the_holder() {
    let f = existing(false, Phase::Clean);
    f.edit(|st| {
        st.holder = None;
        st.cgroup = None;
    });
    let (r, _) = drive(Verb::Cleanup, &f.sd, None, |_| {});
    let o = r.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        o.summary.starts_with("slot clean (no holder recorded)"),
        "{}",
        o.summary
    );
    journal::journal_append(
        &f.paths.journal(),
        "cleanup",
        JournalEvent::End,
        true,
        "slot clean (holder pid 4242 stopped through its pidfd); evidence kept in /x",
    )
    .unwrap();
    for _ in 0..2 {
        let (r, _) = drive(Verb::Cleanup, &f.sd, None, |_| {});
        let o = r.unwrap_or_else(|e| panic!("{e}"));
        assert!(
            o.summary.contains(
                "no holder to stop: the earlier cleanup that ended at "
            ) && o
                .summary
                .contains("released it (holder pid 4242 stopped through its pidfd), and state.json records none since"),
            "{}",
            o.summary
        );
        let rel = o.gates.iter().find(|g| g.name == "released").unwrap();
        assert!(
            rel.detail.contains("released it (holder pid 4242"),
            "{rel:?}"
        );
    }
}
