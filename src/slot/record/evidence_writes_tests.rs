use super::*;
use crate::slot::error::SlotError;
use crate::slot::gate::GateId;
use crate::slot::record::incomplete_evidence::{Incomplete, NoteWriteError, Work, evidence_error};
use crate::slot::state::Phase;

fn full_disk() -> Unwritten {
    Unwritten::io(
        "gates.json",
        "write",
        &std::io::Error::from_raw_os_error(libc::ENOSPC),
    )
}

fn fs() -> StateFs {
    StateFs {
        state_dir: "/mnt/small/state".into(),
        mounted: Some(MountedFs {
            mount_point: "/mnt/small".into(),
            fstype: "tmpfs".into(),
            source: "netprobe-test".into(),
        }),
        free_bytes: Some(0),
        evidence: None,
    }
}

#[test]
fn each_file_is_recorded_once_with_its_first_failure() {
    let log = UnwrittenLog::default();
    log.push(full_disk());
    log.push(Unwritten::io(
        "gates.json",
        "link into place",
        &std::io::Error::from_raw_os_error(libc::EROFS),
    ));
    let e = EvidenceError::Io {
        action: "write",
        path: "/e/.netprobe-tmp-1-2-verb.json".into(),
        source: std::io::Error::from_raw_os_error(libc::ENOSPC),
    };
    log.push(Unwritten::of("verb.json", &e));
    let v = log.list();
    assert_eq!(v.len(), 2);
    assert_eq!(v[0], full_disk());
    assert_eq!(
        v[1].why, "write: No space left on device (os error 28)",
        "the temporary name is not repeated"
    );
    let exists = Unwritten::of("a.json", &EvidenceError::Exists("/e/a.json".into()));
    assert!(exists.why.contains("never overwritten"), "{exists:?}");
}

#[test]
fn a_failed_verb_with_unwritten_evidence_exits_2_naming_files_filesystem_and_fix() {
    let gate = SlotError::gate_failed("61", GateId::UpperCopy, "cp -a: No space left")
        .with_diff("/links/0/mtu: 1 → 2".into());
    let unwritten = [
        full_disk(),
        Unwritten::io(
            "verb.json",
            "write",
            &std::io::Error::from_raw_os_error(libc::ENOSPC),
        ),
    ];
    let fs = fs();
    let i = Incomplete {
        verb: Verb::Reset,
        slot: 61,
        ev: Path::new("/mnt/small/state/slot-61/evidence/0002-reset"),
        unwritten: &unwritten,
        fs: &fs,
        work: Work::Failed(&gate),
        marker: Ok(()),
    };
    let e = evidence_error("61", &i);
    assert_eq!(e.exit_code(), 2);
    assert_eq!(e.gate.as_deref(), Some("evidence"));
    assert_eq!(e.diff.as_deref(), Some("/links/0/mtu: 1 → 2"));
    let s = e.to_string();
    assert!(
        s.starts_with("slot 61: the reset failed: gate `upper-copy` failed: "),
        "the verb's own failure comes first: {s}"
    );
    for needle in [
        "; its evidence is incomplete too: 2 file(s) could not be written: gates.json (write: No space left on device (os error 28)); verb.json (write: No space left on device (os error 28))",
        "/mnt/small/state/slot-61/evidence/0002-reset/incomplete.txt says so",
        "the state directory /mnt/small/state is on the tmpfs filesystem netprobe-test mounted at /mnt/small (0 bytes free now)",
        "fix: free space in /mnt/small (the filesystem is full: ENOSPC), then run `netprobe slot reset --slot 61 --state-dir /mnt/small/state` again",
    ] {
        assert!(s.contains(needle), "{needle:?} not in {s}");
    }
    assert!(!s.contains("usage"), "{s}");
    let note = i.note();
    assert!(
        note.starts_with("netprobe slot reset of slot 61 (pid "),
        "{note}"
    );
    assert!(
        note.contains("\nnot written: gates.json (write: No space left on device (os error 28))\nnot written: verb.json"),
        "{note}"
    );
}

#[test]
fn a_verb_whose_work_succeeded_says_so_and_points_to_status() {
    let unwritten = [full_disk()];
    let fs = StateFs {
        mounted: None,
        free_bytes: None,
        ..fs()
    };
    let i = Incomplete {
        verb: Verb::Restore,
        slot: 62,
        ev: Path::new("/s/slot-62/evidence/0003-restore"),
        unwritten: &unwritten,
        fs: &fs,
        work: Work::Succeeded("restored; net-fidelity: byte-equal", Some(Phase::Running)),
        marker: Err(NoteWriteError::new(
            "create",
            std::io::Error::from_raw_os_error(libc::ENOSPC),
        )),
    };
    let s = evidence_error("62", &i).to_string();
    for needle in [
        "/s/slot-62/evidence/0003-restore/incomplete.txt could not be written in full, it may be empty: create: No space left on device",
        "the restore itself succeeded (restored; net-fidelity: byte-equal); the slot's phase is running as state.json records: that stands, only its evidence is incomplete",
        "a filesystem /proc/self/mountinfo does not name",
        "fix: free space in /mnt/small/state (the filesystem is full: ENOSPC)",
        "then see `netprobe slot status --slot 62 --state-dir /mnt/small/state`",
    ] {
        assert!(s.contains(needle), "{needle:?} not in {s}");
    }
    // An evidence folder on a filesystem of its own is named with it, and freed there.
    let own = StateFs {
        evidence: Some((
            "/mnt/small/state/slot-62/evidence/0003-restore".into(),
            MountedFs {
                mount_point: "/mnt/small/state/slot-62/evidence".into(),
                fstype: "tmpfs".into(),
                source: "ev".into(),
            },
            Some(0),
        )),
        ..fs.clone()
    };
    assert_eq!(
        own.sentence(),
        "the state directory /mnt/small/state is on a filesystem /proc/self/mountinfo does not name; the evidence folder /mnt/small/state/slot-62/evidence/0003-restore is on the tmpfs filesystem ev mounted at /mnt/small/state/slot-62/evidence (0 bytes free now)"
    );
    assert_eq!(
        own.where_to_free(),
        Path::new("/mnt/small/state/slot-62/evidence")
    );
    // A provision whose evidence folder cannot be made: its slot folder is moved away.
    let enospc = std::io::Error::from_raw_os_error(libc::ENOSPC);
    let m = folder_message(
        Verb::Provision,
        Path::new("/s/slot-62"),
        Path::new("/s/slot-62/evidence"),
        &enospc,
        &fs,
    );
    assert!(
        m.contains(
            "fix: free space in /mnt/small/state (the filesystem is full: ENOSPC), then move"
        ),
        "{m}"
    );
    assert!(
        m.starts_with("cannot create the evidence folder /s/slot-62/evidence: No space left on device (os error 28); the provision stopped before any of its steps")
            && m.ends_with("then move /s/slot-62 away (it holds no state yet: nothing runs) and provision again"),
        "{m}"
    );
    // A failed provision: cleanup, then another slot number.
    let gate = SlotError::gate_failed("62", GateId::ConfigHash, "x");
    let i = Incomplete {
        verb: Verb::Provision,
        work: Work::Failed(&gate),
        ..i
    };
    assert!(
        i.message()
            .contains("then `netprobe slot cleanup --slot 62 --state-dir /mnt/small/state`, then provision another slot number"),
        "{}",
        i.message()
    );
}

/// The fix is derived from each file's errno: a full disk is freed, a quota raised, a
/// read-only filesystem remounted, a permission given, and a name already there (EEXIST)
/// is never taken for a lack of space.
#[test]
fn the_fix_answers_the_errno_never_assumed_space() {
    let io = |file: &str, errno: i32| {
        Unwritten::io(file, "write", &std::io::Error::from_raw_os_error(errno))
    };
    let fs = fs();
    let gate = SlotError::gate_failed("63", GateId::UpperCopy, "x");
    let msg = |unwritten: &[Unwritten]| {
        Incomplete {
            verb: Verb::Restore,
            slot: 63,
            ev: Path::new("/mnt/small/state/slot-63/evidence/0003-restore"),
            unwritten,
            fs: &fs,
            work: Work::Failed(&gate),
            marker: Ok(()),
        }
        .message()
    };
    let exists = Unwritten::of(
        "criu-lock-released.txt",
        &EvidenceError::Exists("/e/criu-lock-released.txt".into()),
    );
    assert_eq!(exists.fault, WriteFault::Exists);
    let m = msg(std::slice::from_ref(&exists));
    assert!(!m.contains("free space"), "EEXIST is not space: {m}");
    assert!(
        m.contains("fix: nothing to free: a file or folder of that name was already in /mnt/small/state/slot-63/evidence/0003-restore (EEXIST)"),
        "{m}"
    );
    let m = msg(&[io("a.json", libc::EROFS)]);
    assert!(
        m.contains("fix: remount /mnt/small read-write (EROFS), then run")
            && !m.contains("free space"),
        "{m}"
    );
    let m = msg(&[io("a.json", libc::EDQUOT)]);
    assert!(
        m.contains("fix: raise the quota that refuses the write on /mnt/small"),
        "{m}"
    );
    let m = msg(&[io("a.json", libc::EACCES)]);
    assert!(
        m.contains(
            "write permission on /mnt/small/state/slot-63/evidence/0003-restore (EACCES/EPERM)"
        ) && !m.contains("free space"),
        "{m}"
    );
    let m = msg(&[io("a.json", libc::EIO)]);
    assert!(
        m.contains("fix: lift what refuses the write on /mnt/small (EIO: I/O error), then run"),
        "{m}"
    );
    // Two kinds at once: each fix once, in a fixed order.
    let m = msg(&[
        io("a.json", libc::ENOSPC),
        exists.clone(),
        io("b.json", libc::ENOSPC),
    ]);
    assert!(
        m.contains("fix: free space in /mnt/small (the filesystem is full: ENOSPC); nothing to free: a file or folder"),
        "{m}"
    );
    assert_eq!(m.matches("free space in").count(), 1, "{m}");
}
