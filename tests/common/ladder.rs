//! Shared by the ladder tests (tests/ladder/ladder.rs, root, real runc and CRIU): the root check, the
//! schema-checked load of a run's result, the checks that a run left nothing behind
//! (processes, work areas, mounts, container cgroups), and the facts each rung of a full ladder
//! on runc rests on (`*_rung_facts`, on its evidence folder `ev`).

use netprobe::evidence::result::{RunResult, RungName};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub use super::require_root;

/// `dir/netprobe-result.json`, validated against the result schema (panics otherwise).
pub fn read_result(dir: &Path) -> RunResult {
    let v: Value =
        serde_json::from_slice(&std::fs::read(dir.join("netprobe-result.json")).unwrap()).unwrap();
    netprobe::evidence::validate_result(&v).expect("result validates against the schema");
    serde_json::from_value(v).unwrap()
}

/// Every pid the run recorded (holders, dumped/restored processes, containers) is gone: no
/// process, no zombie.
pub fn assert_nothing_left(result: &RunResult) {
    for r in &result.rungs {
        for (k, v) in &r.facts {
            if k.ends_with("pid") || k.contains("_pid_") {
                let pid = v.as_i64().unwrap_or(0);
                if pid > 0 {
                    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
                    // A reused pid would be a different process; ours ran netprobe or sleep.
                    if let Ok(s) = stat {
                        assert!(
                            !(s.contains("(netprobe)") || s.contains("(sleep)")),
                            "{}: {k} = {pid} is still there: {s}",
                            r.name
                        );
                    }
                }
            }
        }
    }
    // The work areas this run used are gone, with nothing mounted below them (other tests run
    // their own at the same time, so only this run's are checked).
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    for r in &result.rungs {
        if let Some(work) = r.facts.get("work_area").and_then(|v| v.as_str()) {
            assert!(!mounts.contains(work), "{work} is still mounted:\n{mounts}");
            assert!(
                !Path::new(work).exists(),
                "{}: work area {work} was not removed",
                r.name
            );
        }
    }
}

/// `name` inside the temporary folder `tmp` (not created).
pub fn evidence_dir(tmp: &tempfile::TempDir, name: &str) -> PathBuf {
    tmp.path().join(name)
}

/// Processes whose environment carries `tag` (netprobe's children inherit it: holders, runc,
/// CRIU, and the processes CRIU restores from a holder's image).
pub fn tagged_processes(tag: &str) -> Vec<String> {
    let needle = format!("NETPROBE_TEST_TAG={tag}");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if env.split(|&b| b == 0).any(|v| v == needle.as_bytes()) {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            // A zombie is reaped by pid 1 on this machine; only live processes count.
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next();
            if state != Some('Z') {
                out.push(format!("{name}: {}", stat.trim()));
            }
        }
    }
    out
}

/// Cgroups of containers netprobe `pid` created (`netprobe-<rung>-<pid>-<nanos>`).
pub fn container_cgroups(pid: u32) -> Vec<String> {
    let mark = format!("-{pid}-");
    let mut out = Vec::new();
    for sub in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        if let Ok(rd) = std::fs::read_dir(sub.path()) {
            for c in rd.flatten() {
                let n = c.file_name().to_string_lossy().into_owned();
                if n.starts_with("netprobe-") && n.contains(&mark) {
                    out.push(c.path().display().to_string());
                }
            }
        }
    }
    out
}

/// kernel: the exact 20-byte CRIU request, lo type 772 in CRIU's log format.
pub fn kernel_rung_facts(ev: &Path) {
    let req = std::fs::read(ev.join("kernel/request.bin")).unwrap();
    assert_eq!(req.len(), 20);
    assert_eq!(&req[4..6], &18u16.to_ne_bytes(), "RTM_GETLINK");
    assert_eq!(
        &req[6..8],
        &0x301u16.to_ne_bytes(),
        "NLM_F_ROOT|NLM_F_MATCH|NLM_F_REQUEST"
    );
    assert_eq!(&req[8..12], &24680u32.to_ne_bytes(), "seq");
    assert_eq!(req[16], 17, "AF_PACKET");
    let klog = std::fs::read_to_string(ev.join("kernel/kernel.log")).unwrap();
    assert!(klog.contains("\tLD: Got link 1, type 772"), "{klog}");
}

/// The files of `ev/<rung>/images` with their sizes.
pub fn images(ev: &Path, rung: &str) -> Vec<(String, u64)> {
    std::fs::read_dir(ev.join(rung).join("images"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect()
}

/// criu: netns images and a link dumped after the anchor.
pub fn criu_rung_facts(ev: &Path) {
    let criu_imgs = images(ev, "criu");
    for p in ["netns-", "netdev-", "ifaddr-"] {
        assert!(
            criu_imgs.iter().any(|(n, _)| n.starts_with(p)),
            "{p} in {criu_imgs:?}"
        );
    }
    let dump = std::fs::read_to_string(ev.join("criu/dump.log")).unwrap();
    let after = &dump[dump.find("Dump NET namespace info").unwrap()..];
    assert!(after.contains("LD: Got link"));
    assert_eq!(
        std::fs::read(ev.join("criu/netstate-before.json")).unwrap(),
        std::fs::read(ev.join("criu/netstate-after.json")).unwrap()
    );
}

/// oci: runc's empty_ns signature. Returns its restore.log.
pub fn oci_rung_facts(ev: &Path) -> String {
    assert!(
        !images(ev, "oci")
            .iter()
            .any(|(n, _)| n.starts_with("netns-")),
        "no netns image under runc"
    );
    let restore = std::fs::read_to_string(ev.join("oci/restore.log")).unwrap();
    assert!(
        restore.lines().any(|l| {
            l.split("No netns-")
                .nth(1)
                .is_some_and(|t| t.chars().next().is_some_and(|c| c.is_ascii_digit()))
        }),
        "No netns-<id>.img image in restore.log"
    );
    let dump = std::fs::read_to_string(ev.join("oci/dump.log")).unwrap();
    let after = &dump[dump.find("Dump NET namespace info").unwrap()..];
    assert!(!after.contains("LD: Got link"));
    let after: Value =
        serde_json::from_slice(&std::fs::read(ev.join("oci/netstate-after.json")).unwrap())
            .unwrap();
    let lo = after["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "lo")
        .unwrap();
    assert_eq!(lo["up"], false);
    assert!(after["addresses"].as_array().unwrap().is_empty());
    restore
}

/// external-netns: only the key in the netns image, holder.json valid, state byte-equal.
pub fn external_netns_rung_facts(ev: &Path, r: &RunResult) {
    let ext = images(ev, "external-netns");
    let netns: Vec<_> = ext
        .iter()
        .filter(|(n, _)| n.starts_with("netns-"))
        .collect();
    assert_eq!(netns.len(), 1, "{ext:?}");
    assert!(netns[0].1 <= 64, "{netns:?}");
    let img = std::fs::read(ev.join("external-netns/images").join(&netns[0].0)).unwrap();
    assert!(img.windows(12).any(|w| w == b"extRootNetNS"));
    let holder: Value =
        serde_json::from_slice(&std::fs::read(ev.join("external-netns/holder.json")).unwrap())
            .unwrap();
    netprobe::evidence::validate_holder(&holder).unwrap();
    // Inodes side by side: the restored init's netns inode and the holder's, both recorded,
    // equal, and asserted so by the rung.
    let ext_rung = r.rung(RungName::ExternalNetns).unwrap();
    let restored_inode = ext_rung.facts["container_netns_inode_after"]
        .as_u64()
        .unwrap();
    assert_eq!(
        Some(restored_inode),
        ext_rung.facts["holder_netns_inode"].as_u64()
    );
    assert_eq!(holder["netns_inode"].as_u64(), Some(restored_inode));
    assert_eq!(
        std::fs::read_to_string(ev.join("external-netns/netns-inode-restored.txt")).unwrap(),
        format!("{restored_inode}\n")
    );
    let eq = ext_rung
        .assertions
        .iter()
        .find(|a| a.id == "netns-inode-equal")
        .expect("netns-inode-equal assertion");
    assert!(eq.passed, "{eq:?}");
    assert_eq!(
        std::fs::read(ev.join("external-netns/netstate-before.json")).unwrap(),
        std::fs::read(ev.join("external-netns/netstate-after.json")).unwrap()
    );
    let config: Value =
        serde_json::from_slice(&std::fs::read(ev.join("external-netns/config.json")).unwrap())
            .unwrap();
    let ns = config["linux"]["namespaces"].as_array().unwrap();
    let net = ns.iter().find(|n| n["type"] == "network").unwrap();
    assert_eq!(
        net["path"].as_str().unwrap(),
        format!("/proc/{}/ns/net", holder["pid"])
    );
}
