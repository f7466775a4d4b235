//! The whole cycle on the DEFAULT image (the embedded busybox rootfs whose init serves HTTP on
//! 0.0.0.0:5000), real runc and CRIU 4.2.1: provision → snapshot → restore → reset ×3 → cleanup,
//! with the gates' facts asserted — the guest server answers 200 from inside the namespace after
//! provision, restore and each reset.
use crate::common::slot_support;
use netprobe::slot::{Phase, SlotOutcome, Verb};
use slot_support::*;

fn assert_guest(o: &SlotOutcome, when: &str) {
    let g = gate(o, "guest-http");
    assert!(g.proven && g.blocking, "{when}: {g:?}");
    assert!(
        g.detail.contains("127.0.0.1:5000") && g.detail.contains(" 200"),
        "{when}: {g:?}"
    );
}

/// The names of the run folders (`upper-*`, `work-*`) in the slot's `overlay/`, sorted.
fn run_folders(odir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(odir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("upper-") || n.starts_with("work-"))
        .collect();
    v.sort();
    v
}

/// `upper-<run>` and `work-<run>` of the run `state.json` records.
fn current_run_folders(sd: &std::path::Path) -> Vec<String> {
    let run = state(sd, 7).overlay.unwrap().run;
    vec![format!("upper-{run}"), format!("work-{run}")]
}

/// The slot's overlay is mounted `volatile` (no sync of the upper's filesystem at unmount): in
/// `state.json` and in the mount table's super options.
fn assert_volatile_overlay(st: &netprobe::slot::SlotState, when: &str) {
    let ov = st.overlay.clone().expect("an overlay in the state");
    assert!(ov.volatile, "{when}: {ov:?}");
    let mi = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let line = mi
        .lines()
        .find(|l| l.split(' ').nth(4) == Some(ov.merged.to_str().unwrap()))
        .expect("the overlay is mounted");
    assert!(line.contains("volatile"), "{when}: {line}");
}

#[test]
fn full_cycle_default_image_with_gates() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let mut tmp = tempfile::tempdir().unwrap();
    tmp.disable_cleanup(std::env::var_os("NETPROBE_KEEP").is_some());
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![7]);

    let p = ok(Verb::Provision, "7", &sd);
    for g in [
        "state-dir",
        "slot-fresh",
        "ownership-marker",
        "slot-lock",
        "criu-config-absent",
        "runtime-binary",
        "criu-binary",
        "holder-identity",
        "holder-private-netns",
        "config-hash",
        "container-absent",
        "lo-up-127",
        "cgroup-limits",
        "container-in-holder-netns",
    ] {
        assert!(gate(&p, g).proven, "provision gate {g}: {:?}", gate(&p, g));
    }
    assert_guest(&p, "provision");
    // The built-in default profile's readiness: its tcp check (a real connect inside the
    // holder's netns), then GET / (not listed in the profile, still checked) — in that order.
    let tcp = gate(&p, "guest-tcp");
    assert!(
        tcp.proven && tcp.detail.contains("connected to 127.0.0.1:5000"),
        "{tcp:?}"
    );
    let order: Vec<&str> = p.gates.iter().map(|g| g.name.as_str()).collect();
    let at = |n: &str| order.iter().position(|g| *g == n).unwrap();
    assert!(at("guest-tcp") < at("guest-http"), "{order:?}");
    assert_eq!(
        p.facts["readiness_order"],
        serde_json::json!(["tcp 5000", "http 5000 GET / -> 200"])
    );
    let limits = &gate(&p, "cgroup-limits").detail;
    assert!(limits.contains("cfs_quota_us 400000"), "{limits}");
    assert!(limits.contains("cfs_period_us 100000"), "{limits}");
    assert!(limits.contains("limit_in_bytes 4294967296"), "{limits}");
    // This host: hybrid v1, no systemd → the cgroupfs driver by default, v1 files named.
    let host = &gate(&p, "cgroup-host").detail;
    assert!(
        gate(&p, "cgroup-host").proven
            && host.contains("cgroup hybrid host")
            && host.contains("driver cgroupfs (default"),
        "{host}"
    );
    assert!(
        limits.contains("/cpu.cfs_quota_us = \"400000\"")
            && limits.contains("/memory.limit_in_bytes = \"4294967296\""),
        "{limits}"
    );
    assert!(
        p.gates.iter().all(|g| g.name != "cgroup-unit-limits"),
        "no unit gate with cgroupfs"
    );
    assert!(
        gate(&p, "lo-up-127").detail.contains("UP")
            && gate(&p, "lo-up-127").detail.contains("127.0.0.1/8"),
        "{:?}",
        gate(&p, "lo-up-127")
    );
    assert!(!gate(&p, "probe-verdict").proven && !gate(&p, "probe-verdict").blocking);
    // The default CRIU (4.2.1) was recorded, and runc is pointed at it.
    let st = state(&sd, 7);
    assert_volatile_overlay(&st, "provision");
    let cg = st.cgroup.clone().expect("cgroup facts in the state");
    assert_eq!(cg.driver.driver, netprobe::cgroup::CgroupDriver::Cgroupfs);
    assert_eq!(cg.mode, netprobe::cgroup::CgroupMode::Hybrid);
    assert!(
        st.cgroups_path.starts_with("/netprobe/slot-7-"),
        "{}",
        st.cgroups_path
    );
    let rb = cg.last_readback.expect("the read-back kept for cleanup");
    assert!(rb.files.len() >= 4, "{rb:?}");
    assert!(
        p.evidence
            .clone()
            .unwrap()
            .join("cgroup-limits-provision.json")
            .exists()
    );
    assert_eq!(st.criu.version.as_deref(), Some("4.2.1"));
    assert_eq!(st.image.as_ref().unwrap().kind, "embedded");
    assert_eq!(st.phase, Phase::Ready);
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
    let ev = p.evidence.clone().unwrap();
    for f in [
        "gates.json",
        "timings.json",
        "verb.json",
        "holder.json",
        "config.json",
        "runtime.log",
        "netstate-provision.json",
        "netfilter-provision.txt",
        "sysctls-other-provision.json",
    ] {
        assert!(ev.join(f).exists(), "{f} in evidence");
    }
    // holder.json follows the shared holder schema; the netstate is the shared canonical JSON.
    let hj: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sd.join("slot-7/holder.json")).unwrap()).unwrap();
    netprobe::evidence::validate_holder(&hj).unwrap();
    assert!(hj["exe"].as_str().unwrap().ends_with("netprobe"), "{hj}");
    let ns_text = std::fs::read_to_string(ev.join("netstate-provision.json")).unwrap();
    let ns = netprobe::netlink::NetState::from_json(&ns_text).unwrap();
    assert!(ns.lo_up_with_127());
    assert_eq!(ns.to_canonical_json(), ns_text);
    let cfg = netprobe::oci::read_bundle_spec(&sd.join("slot-7/bundle")).unwrap();
    assert_eq!(
        netprobe::oci::config_sha256(&sd.join("slot-7/bundle")).unwrap(),
        st.config_sha256.clone().unwrap()
    );
    let cfg = serde_json::to_string(&cfg).unwrap();
    assert!(
        cfg.contains(&format!("/proc/{}/ns/net", st.holder.unwrap().pid)),
        "{cfg}"
    );

    let s = ok(Verb::Snapshot, "7", &sd);
    assert!(gate(&s, "container-stopped").proven);
    assert_eq!(s.facts["manage_cgroups_mode"], "soft", "{:?}", s.facts);
    assert!(gate(&s, "lo-up-127").proven);
    assert_eq!(state(&sd, 7).phase, Phase::Checkpointed);

    let r = ok(Verb::Restore, "7", &sd);
    assert!(
        gate(&r, "net-fidelity").proven,
        "{:?}",
        gate(&r, "net-fidelity")
    );
    // The images are proven by the stat recorded when they were hashed, not re-hashed.
    let g = gate(&r, "snapshot-complete");
    assert!(
        g.proven
            && g.detail
                .contains("(blake3 as recorded; unchanged since hashed"),
        "{g:?}"
    );
    assert!(state(&sd, 7).snapshot.unwrap().checkpoint_stats.is_some());
    assert_guest(&r, "restore");
    // runc's state decided in-process from its state.json (no runc process), and said so.
    let how = r.facts["restore_runtime_state_source"].as_str().unwrap();
    assert!(
        how.starts_with("read ") && how.contains("state.json as runc's refreshState does"),
        "{how}"
    );
    let g = gate(&r, "container-in-holder-netns");
    assert!(g.proven && g.detail.contains(how), "{g:?}");
    // The capture's side evidence is kept beside netstate-after.json, as the rungs keep it.
    let rev = r.evidence.clone().unwrap();
    let nf = std::fs::read_to_string(rev.join("netfilter.txt")).unwrap();
    // Either the three tools' output, or (the netns filters nothing) why they were not run,
    // with the netfilter dumps that prove it.
    let ran = ["$ iptables-save", "$ ip6tables-save", "$ nft list ruleset"]
        .iter()
        .all(|t| nf.contains(t));
    let proven = nf.starts_with("# not run: iptables-save, ip6tables-save, nft list ruleset")
        && nf.contains("# NETLINK_NETFILTER dumps")
        && nf.contains("ip_tables_names");
    assert!(ran || proven, "netfilter.txt: {nf}");
    let other: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rev.join("sysctls-other.json")).unwrap()).unwrap();
    assert!(
        other.is_object() && !other.as_object().unwrap().is_empty(),
        "{other}"
    );
    assert_eq!(state(&sd, 7).phase, Phase::Running);

    // What an interrupted reset leaves (another run's upper and work, a prepared copy) is
    // removed by the next reset; only the mounted run's folders stay.
    let odir = sd.join("slot-7").join("overlay");
    for stale in ["upper-90", "work-90", "upper-91"] {
        std::fs::create_dir_all(odir.join(stale).join("var")).unwrap();
        std::fs::write(
            odir.join(stale).join("var/big"),
            b"left by an interrupted reset",
        )
        .unwrap();
    }
    for i in 0..3 {
        let r = ok(Verb::Reset, "7", &sd);
        assert_eq!(run_folders(&odir), current_run_folders(&sd), "reset {i}");
        assert!(gate(&r, "container-stopped").proven, "reset {i}");
        assert!(gate(&r, "net-fidelity").proven, "reset {i}");
        assert!(gate(&r, "cgroup-limits").proven, "reset {i}");
        assert!(gate(&r, "container-in-holder-netns").proven, "reset {i}");
        assert_guest(&r, &format!("reset {i}"));
        assert_eq!(r.facts["overlay_volatile"], true, "reset {i}");
        assert_volatile_overlay(&state(&sd, 7), &format!("reset {i}"));
    }
    assert_eq!(state(&sd, 7).restores, 4);

    let st = ok(Verb::Status, "7", &sd);
    let doc = st.to_json();
    assert_eq!(doc["live"]["container"]["status"], "running");
    assert_eq!(doc["live"]["holder"]["alive"], true);
    assert_eq!(
        doc["live"]["overlay_volatile"],
        serde_json::json!({"recorded": true, "mounted": true, "agrees": true}),
        "{doc:#}"
    );
    assert_valid(&slot_state_validator(), &doc);

    let holders = holder_pids(&sd);
    std::fs::create_dir_all(odir.join("upper-92")).unwrap();
    let kept = current_run_folders(&sd);
    let c = ok(Verb::Cleanup, "7", &sd);
    // The last run's upper and work are kept with the evidence; nothing else.
    assert_eq!(run_folders(&odir), kept, "after cleanup");
    // Every part of the `released` detail is something cleanup checked, nothing it did not do.
    let rel = gate(&c, "released");
    assert!(
        rel.proven
            && rel.detail.contains("proven gone (runtime state)")
            && rel.detail.contains("nothing mounted under")
            && rel
                .detail
                .contains("no FUSE export (the image is not a qcow2 disk)")
            && rel.detail.contains("stopped through its pidfd"),
        "{rel:?}"
    );
    let cr = gate(&c, "cgroup-released");
    assert!(
        cr.proven
            && cr.detail.contains("cgroup directories gone: ")
            && cr.detail.contains("/netprobe/slot-7-"),
        "{cr:?}"
    );
    assert!(
        c.declared_differences
            .iter()
            .any(|d| d.contains("parent cgroup directories")),
        "{:?}",
        c.declared_differences
    );
    assert_eq!(state(&sd, 7).phase, Phase::Clean);
    assert_released(&sd, &holders);
    // Status of the clean slot: no lost-container check of a namespace and cgroup that cleanup
    // released (it said "none: false" about an unknown namespace, and listed gone directories).
    let doc = ok(Verb::Status, "7", &sd).to_json();
    assert_eq!(doc["live"]["container"]["status"], "absent", "{doc:#}");
    assert!(doc["live"]["left_processes"].is_null(), "{doc:#}");
    assert_valid(&slot_state_validator(), &doc);
    // A second cleanup finds nothing to stop, and says which cleanup released the holder.
    let c2 = ok(Verb::Cleanup, "7", &sd);
    let rel = gate(&c2, "released");
    assert!(
        rel.proven
            && rel
                .detail
                .contains("no holder to stop: the earlier cleanup that ended at ")
            && rel.detail.contains("released it (holder pid ")
            && !rel.detail.contains("no holder recorded"),
        "{rel:?}"
    );
    // Evidence kept: one folder per verb.
    let n = std::fs::read_dir(sd.join("slot-7/evidence"))
        .unwrap()
        .count();
    assert_eq!(
        n, 8,
        "one evidence folder per verb run (status writes none)"
    );
}
