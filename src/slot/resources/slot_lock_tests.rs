use super::*;

#[test]
fn a_sealed_copy_is_named_by_its_memfd_not_its_fd_number() {
    let exe = Path::new("/memfd:netprobe-runc (deleted)");
    assert_eq!(
        sealed_name("8", Some(exe)).as_deref(),
        Some("memfd:netprobe-runc (sealed copy, run as fd 8)")
    );
    assert_eq!(sealed_name("runc", Some(exe)), None);
    assert_eq!(sealed_name("8", Some(Path::new("/usr/sbin/runc"))), None);
    assert_eq!(sealed_name("8", None), None);
}

#[test]
fn a_lock_on_a_read_only_state_dir_names_the_filesystem_and_the_fix() {
    let t = tempfile::tempdir().unwrap();
    let lock = t.path().join("slot-1/lock");
    for (errno, fix) in [
        (libc::EROFS, "fix: remount "),
        (libc::EACCES, "fix: give uid "),
        (libc::ENOSPC, "fix: free space in "),
    ] {
        let e = std::io::Error::from_raw_os_error(errno);
        let f = open_fix(&lock, &e);
        assert!(
            f.starts_with("; the state directory is not writable: ")
                && f.contains(" filesystem ")
                && f.contains(fix)
                && f.ends_with(", then run the verb again"),
            "{e}: {f}"
        );
    }
    assert_eq!(
        open_fix(&lock, &std::io::Error::from_raw_os_error(libc::ELOOP)),
        ""
    );
}

#[test]
fn probe_tells_held_from_unusable() {
    let d = tempfile::tempdir().unwrap();
    let lock = d.path().join("lock");
    assert_eq!(probe(&lock), LockProbe::Free, "no file yet");
    let held = SlotLock::acquire(&lock).unwrap();
    assert_eq!(probe(&lock), LockProbe::Held);
    drop(held);
    assert_eq!(probe(&lock), LockProbe::Free);
    // A lock a verb cannot open for writing (here a directory in its place; a read-only
    // state directory is the same case) is not "a verb runs".
    std::fs::remove_file(&lock).unwrap();
    std::fs::create_dir(&lock).unwrap();
    match probe(&lock) {
        // One whole sentence, which `slot status` quotes after "no verb can take the slot
        // lock: " (it once ended "fails until it can").
        LockProbe::Unusable(e) => assert!(
            e.contains("for writing")
                && e.ends_with("until the file can be opened for writing)")
                && !e.contains("until it can"),
            "{e}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_held_lock_names_the_processes_holding_it() {
    let d = tempfile::tempdir().unwrap();
    let lock = d.path().join("lock");
    let held = SlotLock::acquire(&lock).unwrap();
    // A child that inherited the descriptor (as the runtime does) holds it too.
    let mut child = held.inherited_by_children(|| {
        std::process::Command::new("sleep")
            .arg("5")
            // The same open file description as the lock: the child holds the flock too.
            .stdin(held.file.try_clone().unwrap())
            .spawn()
            .unwrap()
    });
    let e = SlotLock::acquire(&lock).unwrap_err().to_string();
    assert!(
        e.contains(&format!("pid {} (sleep)", child.id())) && e.contains("refused, not queued"),
        "{e}"
    );
    assert!(e.contains("netprobe slot status"), "{e}");
    // The verb gone, its child still holding the lock: an orphan, named with kill -9.
    drop(held);
    assert_eq!(orphan_holders(&lock), vec![child.id()]);
    let e = SlotLock::acquire(&lock).unwrap_err().to_string();
    assert!(
        e.contains("by no netprobe process") && e.contains(&format!("kill -9 {}", child.id())),
        "{e}"
    );
    // How long it has run is said (a killed verb's runtime may still be finishing its
    // step), never that it will not end; one scan gives the names and the pids.
    assert!(e.contains(&format!("pid {} for ", child.id())), "{e}");
    assert!(e.contains("if the same pids still hold the lock"), "{e}");
    assert!(!e.contains("never ends"), "{e}");
    let h = held_by(&lock);
    assert_eq!(h.orphans, vec![child.id()]);
    assert_eq!(h.text, format!("pid {} (sleep)", child.id()));
    assert!(
        h.orphan_sentence
            .contains(&format!("kill -9 {}`", child.id()))
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(orphan_holders(&lock).is_empty());
    SlotLock::acquire(&lock).unwrap();
}
