//! The whole cycle: provision → snapshot → restore → reset ×3 → cleanup, gates asserted.
mod slot_support;
use netprobe::slot::{Phase, Verb};
use slot_support::*;

#[test]
fn full_cycle_with_gates() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let _s = serial();
    let mut tmp = tempfile::tempdir().unwrap();
    tmp.disable_cleanup(std::env::var_os("NETPROBE_KEEP").is_some());
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![7]);

    let img = sleep_image(tmp.path());
    let p = provision_dir("7", &sd, &img).unwrap_or_else(|e| panic!("provision: {e}"));
    for g in [
        "state-dir",
        "slot-fresh",
        "ownership-marker",
        "slot-lock",
        "criu-config-absent",
        "holder-identity",
        "config-hash",
        "lo-up-127",
        "cgroup-limits",
        "container-in-holder-netns",
    ] {
        assert!(gate(&p, g).proven, "provision gate {g}: {:?}", gate(&p, g));
    }
    assert!(
        gate(&p, "cgroup-limits")
            .detail
            .contains("cfs_quota_us 400000")
    );
    assert!(
        gate(&p, "cgroup-limits")
            .detail
            .contains("limit_in_bytes 4294967296")
    );
    assert!(!gate(&p, "probe-verdict").proven && !gate(&p, "probe-verdict").blocking);
    assert!(
        p.declared_differences
            .iter()
            .any(|d| d.contains("HARNESS-OWNED"))
    );
    assert!(
        p.declared_differences
            .iter()
            .any(|d| d.contains("outside the container's cgroup"))
    );
    assert_eq!(state(&sd, 7).phase, Phase::Ready);
    let ev = p.evidence.clone().unwrap();
    for f in [
        "gates.json",
        "timings.json",
        "verb.json",
        "holder.json",
        "netstate-provision.json",
    ] {
        assert!(ev.join(f).exists(), "{f} in evidence");
    }

    let s = ok(Verb::Snapshot, "7", &sd);
    assert!(gate(&s, "container-stopped").proven);
    assert_eq!(state(&sd, 7).phase, Phase::Checkpointed);

    let r = ok(Verb::Restore, "7", &sd);
    assert!(
        gate(&r, "net-fidelity").proven,
        "{:?}",
        gate(&r, "net-fidelity")
    );
    assert!(gate(&r, "snapshot-complete").proven);
    assert_eq!(state(&sd, 7).phase, Phase::Running);

    for i in 0..3 {
        let r = ok(Verb::Reset, "7", &sd);
        assert!(gate(&r, "container-stopped").proven, "reset {i}");
        assert!(gate(&r, "net-fidelity").proven, "reset {i}");
        assert!(gate(&r, "cgroup-limits").proven, "reset {i}");
    }
    assert_eq!(state(&sd, 7).restores, 4);

    let st = ok(Verb::Status, "7", &sd);
    let doc = st.to_json();
    assert_eq!(doc["live"]["container"]["status"], "running");
    assert_eq!(doc["live"]["holder"]["alive"], true);

    let holders = holder_pids(&sd);
    let c = ok(Verb::Cleanup, "7", &sd);
    assert!(gate(&c, "released").proven);
    assert_eq!(state(&sd, 7).phase, Phase::Clean);
    assert_released(&sd, &holders);
    // Evidence kept: one folder per verb.
    let n = std::fs::read_dir(sd.join("slot-7/evidence"))
        .unwrap()
        .count();
    assert_eq!(
        n, 7,
        "one evidence folder per verb run (status writes none)"
    );
}

/// The embedded default image: the guest server answers at provision; the snapshot either works
/// or fails (exit 4) with the diagnosed CRIU/kernel socket incompatibility; cleanup releases all.
#[test]
fn default_image_guest_server() {
    if !is_root() {
        return;
    }
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![8]);
    let p = ok(Verb::Provision, "8", &sd);
    assert!(
        gate(&p, "guest-http").proven,
        "{:?}",
        gate(&p, "guest-http")
    );
    assert!(gate(&p, "guest-http").detail.contains("200"));
    match run(Verb::Snapshot, "8", &sd) {
        Ok(_) => {
            let r = ok(Verb::Restore, "8", &sd);
            assert!(gate(&r, "guest-http").proven);
        }
        Err(e) => {
            assert_eq!(e.exit_code(), 4, "{e}");
            assert!(e.to_string().contains("SO_PASSCRED"), "{e}");
            // Nothing lost: the container still runs and answers.
            let st = ok(Verb::Status, "8", &sd).to_json();
            assert_eq!(st["live"]["container"]["status"], "running", "{st}");
        }
    }
    let holders = holder_pids(&sd);
    ok(Verb::Cleanup, "8", &sd);
    assert_released(&sd, &holders);
}
