use super::*;

#[test]
fn only_a_gated_container_is_snapshotted() {
    let p = slot_dir::SlotPaths::new(Path::new("/var/lib/np"), 3);
    for ok in [
        Phase::Ready,
        Phase::Running,
        Phase::Snapshotting,
        Phase::SnapshotFailed,
    ] {
        assert!(container_gated(ok, &p).is_ok(), "{ok:?}");
    }
    let e = container_gated(Phase::Restoring, &p).unwrap_err();
    assert!(e.starts_with("phase restoring: the running container comes from a restore or reset that did not pass its gates"), "{e}");
    assert!(
        e.contains("`netprobe slot reset --slot 3 --state-dir /var/lib/np`"),
        "{e}"
    );
    assert!(container_gated(Phase::RestoreFailed, &p).is_err());
    for no in [
        Phase::Provisioning,
        Phase::ProvisionFailed,
        Phase::Checkpointed,
        Phase::Cleaning,
        Phase::Clean,
    ] {
        let e = container_gated(no, &p).unwrap_err();
        assert!(e.contains("gives the next step"), "{no:?}: {e}");
    }
}
