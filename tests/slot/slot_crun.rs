//! crun 1.28 as the slot's runtime (issue 12 part 3), CRIU 4.3, the default image (real, root):
//! provision → snapshot → restore → (a restore CRIU refuses) → restore → reset → cleanup. The
//! kind comes from `crun --version`, crun's quirks are declared, the failed restore's
//! half-written state folder and `.proxy-crun` cgroups are released so the next restore works,
//! and cleanup leaves nothing: no container, no cgroup in any hierarchy (incl.
//! /sys/fs/cgroup/unified), no mount, no holder.
use crate::common::slot_support;
use netprobe::slot::{Phase, SlotOutcome, Verb, run_verb};
use slot_support::*;
use std::path::{Path, PathBuf};

const CRUN: &str = "/opt/crun-1.28/bin/crun";
const CRIU_4_3: &str = "/opt/criu-4.3/sbin/criu";
const SLOT: &str = "43";

fn crun_ok(verb: Verb, sd: &Path) -> SlotOutcome {
    let mut a = args(verb, SLOT, sd);
    a.runtime = Some(CRUN.into());
    a.criu = Some(CRIU_4_3.into());
    match run_verb(&a) {
        Ok(o) => o,
        Err(e) => panic!("{} failed (exit {}): {e}", verb.as_str(), e.exit_code()),
    }
}

/// The slot's cgroup folder in every cgroup hierarchy mounted here (v1 and v2).
fn cgroup_dirs(cgroups_path: &str) -> Vec<PathBuf> {
    netprobe::slot::resources::crun_leftovers::cgroup_dirs(cgroups_path)
}

fn existing(dirs: &[PathBuf]) -> Vec<&PathBuf> {
    dirs.iter().filter(|d| d.exists()).collect()
}

fn last_evidence(sd: &Path, verb: &str) -> serde_json::Value {
    let ev = sd.join(format!("slot-{SLOT}/evidence"));
    let mut dirs: Vec<_> = std::fs::read_dir(&ev)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(verb))
        .collect();
    dirs.sort();
    let d = dirs.last().expect("an evidence folder");
    serde_json::from_slice(&std::fs::read(d.join("verb.json")).unwrap()).unwrap()
}

#[test]
fn crun_full_cycle_releases_a_failed_restore_and_leaves_nothing() {
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
    let _c = CleanupOnDrop(sd.clone(), vec![43]);

    let p = crun_ok(Verb::Provision, &sd);
    assert_eq!(p.facts["runtime_kind"], "crun", "{:?}", p.facts);
    assert!(
        p.facts["runtime_kind_from"]
            .as_str()
            .unwrap()
            .contains("crun version 1.28"),
        "{:?}",
        p.facts
    );
    for d in [
        "crun runs in a private mount namespace",
        "--manage-cgroups-mode=ignore",
        "/sys/fs/cgroup/unified detached",
        ".proxy-crun",
    ] {
        assert!(
            p.declared_differences.iter().any(|x| x.contains(d)),
            "declared difference {d}: {:?}",
            p.declared_differences
        );
    }
    assert!(
        gate(&p, "guest-http").proven,
        "{:?}",
        gate(&p, "guest-http")
    );
    let st = state(&sd, 43);
    let cg = cgroup_dirs(&st.cgroups_path);
    assert!(
        cg.iter().any(|d| d.starts_with("/sys/fs/cgroup/unified")),
        "the unified hierarchy is checked too: {cg:?}"
    );
    assert!(!existing(&cg).is_empty(), "the container's cgroups exist");

    let s = crun_ok(Verb::Snapshot, &sd);
    assert!(gate(&s, "container-stopped").proven);
    let r = crun_ok(Verb::Restore, &sd);
    assert!(
        gate(&r, "net-fidelity").proven,
        "{:?}",
        gate(&r, "net-fidelity")
    );
    assert!(gate(&r, "guest-http").proven);
    let s = crun_ok(Verb::Snapshot, &sd);
    assert!(gate(&s, "container-stopped").proven);

    // A restore CRIU refuses: pstree.img overwritten (and the manifest told so, its sha256 and
    // blake3, with the manifest's new sha256 in state.json, so the snapshot gate lets it
    // through to crun).
    let snap = sd
        .join(format!("slot-{SLOT}"))
        .join(state(&sd, 43).snapshot.unwrap().dir);
    let img = snap.join("checkpoint/pstree.img");
    let good = std::fs::read(&img).unwrap();
    let mut bad = good.clone();
    for b in bad.iter_mut().skip(8) {
        *b = 0xff;
    }
    let sha = |b: &[u8]| netprobe::evidence::sha256_hex(b);
    let manifest = snap.join("manifest.json");
    let m_good = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&img, &bad).unwrap();
    let b3 = |b: &[u8]| blake3::hash(b).to_hex().to_string();
    let m_bad = m_good
        .replace(&sha(&good), &sha(&bad))
        .replace(&b3(&good), &b3(&bad));
    std::fs::write(&manifest, &m_bad).unwrap();
    let record_manifest = |text: &str| {
        let mut st = state(&sd, 43);
        st.snapshot.as_mut().unwrap().manifest_sha256 = Some(sha(text.as_bytes()));
        st.save(&sd.join(format!("slot-{SLOT}/state.json")))
            .unwrap();
    };
    record_manifest(&m_bad);
    let e = run_verb(&{
        let mut a = args(Verb::Restore, SLOT, &sd);
        a.runtime = Some(CRUN.into());
        a.criu = Some(CRIU_4_3.into());
        a
    })
    .expect_err("CRIU refuses the broken image");
    assert!(e.to_string().contains("restore"), "{e}");
    let v = last_evidence(&sd, "restore");
    assert!(
        v["facts"]["runtime_half_state"]
            .as_str()
            .unwrap_or("")
            .contains("removed crun's half-written state folder"),
        "{v}"
    );
    let released: Vec<&str> = v["facts"]["cgroups_released"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    assert!(
        released.iter().any(|p| p.ends_with("/.proxy-crun")),
        "the .proxy-crun cgroups were released: {v}"
    );
    for d in &cg {
        assert!(!d.join(".proxy-crun").exists(), "{} left", d.display());
    }

    // The image repaired, the next restore works — also over what crun leaves when it and
    // netprobe are killed mid-restore: a state folder with only config.json (`crun state`
    // fails on it) and an empty `<bundle>/criu-root` ("File exists" on the retry).
    std::fs::write(&img, &good).unwrap();
    std::fs::write(&manifest, &m_good).unwrap();
    record_manifest(&m_good);
    let s = state(&sd, 43);
    let half = s.runtime_root.join(&s.container_id);
    std::fs::create_dir_all(&half).unwrap();
    std::fs::write(half.join("config.json"), b"{}").unwrap();
    let criu_root = sd.join(format!("slot-{SLOT}/bundle/criu-root"));
    std::fs::create_dir_all(&criu_root).unwrap();
    let r = crun_ok(Verb::Restore, &sd);
    let done = r.facts["runtime_half_state"].as_str().unwrap_or_default();
    assert!(
        done.contains("crun's half-written state") && done.contains("criu-root"),
        "{:?}",
        r.facts
    );
    // The restored container's own state is there now (with its status), not the half one.
    assert!(half.join("status").exists() && !criu_root.exists());
    assert!(
        gate(&r, "net-fidelity").proven,
        "{:?}",
        gate(&r, "net-fidelity")
    );
    assert!(gate(&r, "guest-http").proven);
    let r = crun_ok(Verb::Reset, &sd);
    assert!(gate(&r, "net-fidelity").proven);
    assert!(
        gate(&r, "cgroup-limits").proven,
        "{:?}",
        gate(&r, "cgroup-limits")
    );

    let holders = holder_pids(&sd);
    let c = crun_ok(Verb::Cleanup, &sd);
    assert!(gate(&c, "released").proven, "{:?}", gate(&c, "released"));
    assert_eq!(state(&sd, 43).phase, Phase::Clean);
    assert_released(&sd, &holders);
    assert_eq!(existing(&cg), Vec::<&PathBuf>::new(), "cgroups left");
    let root = sd.join(format!("slot-{SLOT}/runc-root"));
    let left: Vec<_> = std::fs::read_dir(&root)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "crun state left: {left:?}");
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        assert!(
            !(cmd.contains("crun") && cmd.contains(&*sd.to_string_lossy())),
            "crun process left: {cmd}"
        );
    }
}
