//! The whole ladder on real runc and real CRIU (root): the `runtime-empty-ns` verdict and every
//! fact it rests on, `--expect`, `verify` (without root, and on tampered evidence), bad input
//! with its exit codes, and that nothing is left behind — also after a rung fails.

mod common;
use common::cli::{EXE, netprobe, text};
use netprobe::evidence::result::{RunResult, RungName, Status, VerdictCode};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "the ladder tests need root (namespaces, CRIU, runc); CI runs them as root"
    );
}

fn read_result(dir: &Path) -> RunResult {
    let v: Value =
        serde_json::from_slice(&std::fs::read(dir.join("netprobe-result.json")).unwrap()).unwrap();
    netprobe::evidence::validate_result(&v).expect("result validates against the schema");
    serde_json::from_value(v).unwrap()
}

/// Every pid the run recorded (holders, dumped/restored processes, containers) is gone: no
/// process, no zombie.
fn assert_nothing_left(result: &RunResult) {
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

fn evidence_dir(tmp: &tempfile::TempDir, name: &str) -> PathBuf {
    tmp.path().join(name)
}

#[test]
fn full_ladder_on_runc_is_runtime_empty_ns_with_every_fact() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let ev = evidence_dir(&tmp, "ev");
    let o = netprobe(&[
        "run",
        "--evidence",
        ev.to_str().unwrap(),
        "--expect",
        "runtime-empty-ns",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("verdict: runtime-empty-ns"), "{}", text(&o));
    let r = read_result(&ev);
    assert_eq!(r.verdict.code, VerdictCode::RuntimeEmptyNs);
    let st = |n: RungName| r.rung(n).unwrap().status;
    assert_eq!(st(RungName::Kernel), Status::Pass);
    assert_eq!(st(RungName::Criu), Status::Pass);
    assert_eq!(st(RungName::Oci), Status::Fail);
    assert_eq!(st(RungName::ExternalNetns), Status::Pass);

    // kernel: the exact 20-byte CRIU request, lo type 772 in CRIU's log format.
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

    // criu: netns images and a link dumped after the anchor.
    let images = |rung: &str| -> Vec<(String, u64)> {
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
    };
    let criu_imgs = images("criu");
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

    // oci: runc's empty_ns signature.
    assert!(
        !images("oci").iter().any(|(n, _)| n.starts_with("netns-")),
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

    // external-netns: only the key in the netns image, holder.json valid, state byte-equal.
    let ext = images("external-netns");
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

    // Binaries, pins and declared differences.
    assert!(r.host.runtime.as_ref().unwrap().sha256.len() == 64);
    assert!(r.pins.iter().any(|p| p.name == "runtime" && !p.matches));
    assert!(
        r.declared_differences
            .iter()
            .any(|d| d.contains("not the pinned runc 1.5.2"))
    );
    assert!(
        r.declared_differences
            .iter()
            .any(|d| d.contains("HARNESS-OWNED"))
    );
    assert!(
        r.declared_differences
            .iter()
            .any(|d| d.contains("NOT inside the container's cgroup"))
    );
    assert!(
        r.rung(RungName::Oci)
            .unwrap()
            .timings_ms
            .contains_key("checkpoint")
    );
    assert!(
        r.rung(RungName::Oci)
            .unwrap()
            .timings_ms
            .contains_key("restore")
    );

    assert_nothing_left(&r);

    // The evidence alone reaches the same verdict, without root.
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            EXE,
            "verify",
        ])
        .arg(&ev)
        .arg("--expect")
        .arg("runtime-empty-ns")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "verify as nobody: {}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("verdict from the evidence: runtime-empty-ns")
    );

    // A report written into the folder is derived, not evidence: verify still reproduces.
    let o = netprobe(&["report", ev.to_str().unwrap(), "--format", "html"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = netprobe(&["verify", ev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // An emptied artifact list cannot hide files: every file must be listed.
    let result_path = ev.join("netprobe-result.json");
    let original = std::fs::read(&result_path).unwrap();
    let mut v: Value = serde_json::from_slice(&original).unwrap();
    v["artifacts"] = Value::Array(vec![]);
    std::fs::write(&result_path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let o = netprobe(&["verify", ev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("not among the recorded artifacts"),
        "{}",
        text(&o)
    );
    std::fs::write(&result_path, &original).unwrap();

    // Tampered evidence: a log edited after the fact is caught, naming the artifact.
    let log = ev.join("oci/restore.log");
    let edited = restore.replace("No netns-", "No xxxxx-");
    std::fs::write(&log, edited).unwrap();
    let o = netprobe(&["verify", ev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("artifact oci/restore.log changed"), "{out}");
    assert!(out.contains("oci/restore-no-netns-image"), "{out}");
}

#[test]
fn expect_mismatch_exits_1_and_cheap_phases_are_inconclusive() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let ev = evidence_dir(&tmp, "ev");
    let o = netprobe(&[
        "run",
        "--phases",
        "kernel,criu",
        "--strace",
        "--evidence",
        ev.to_str().unwrap(),
        "--expect",
        "runtime-preserves-netns",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "inconclusive");
    let r = read_result(&ev);
    assert_eq!(r.verdict.code, VerdictCode::Inconclusive);
    assert!(
        r.verdict
            .reason
            .as_deref()
            .unwrap()
            .contains("external-netns was not run")
    );
    assert_eq!(r.rung(RungName::Oci).unwrap().status, Status::Skipped);
    assert_eq!(r.rung(RungName::Criu).unwrap().status, Status::Pass);
    assert!(ev.join("criu/strace-dump.txt").metadata().unwrap().len() > 0);
    assert_nothing_left(&r);
}

#[test]
fn json_prints_only_the_result() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let ev = evidence_dir(&tmp, "ev");
    let o = netprobe(&[
        "run",
        "--phases",
        "kernel",
        "--json",
        "--evidence",
        ev.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("stdout is the result JSON");
    assert_eq!(v["rungs"][0]["status"], "pass");
}

#[test]
fn bad_input_is_refused_with_the_right_exit_code_and_nothing_lost() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    // An existing, non-empty evidence folder: refused (2), its content untouched.
    let ev = evidence_dir(&tmp, "used");
    std::fs::create_dir_all(&ev).unwrap();
    std::fs::write(ev.join("keep.txt"), b"precious").unwrap();
    let o = netprobe(&[
        "run",
        "--phases",
        "kernel",
        "--evidence",
        ev.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("already exists and is not empty"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read(ev.join("keep.txt")).unwrap(), b"precious");
    assert_eq!(std::fs::read_dir(&ev).unwrap().count(), 1);

    let fresh = |n: &str| evidence_dir(&tmp, n).to_str().unwrap().to_string();
    // Unknown phase, wrong order: usage (2).
    let o = netprobe(&["run", "--phases", "kernel,crui", "--evidence", &fresh("a")]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("unknown phase \"crui\""));
    let o = netprobe(&["run", "--phases", "oci,kernel", "--evidence", &fresh("b")]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("kernel comes before oci"));
    // A missing runtime binary: host refused (3), naming it.
    let o = netprobe(&[
        "run",
        "--phases",
        "oci",
        "--runtime",
        "/nonexistent/runc",
        "--evidence",
        &fresh("c"),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("/nonexistent/runc"));
    // Not an OCI runtime.
    let o = netprobe(&[
        "run",
        "--phases",
        "oci",
        "--runtime",
        "/bin/true",
        "--evidence",
        &fresh("d"),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    // A rootfs without sleep: usage (2).
    let empty = tmp.path().join("emptyroot");
    std::fs::create_dir_all(&empty).unwrap();
    let o = netprobe(&[
        "run",
        "--phases",
        "oci",
        "--rootfs",
        empty.to_str().unwrap(),
        "--evidence",
        &fresh("e"),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("has no sleep"), "{}", text(&o));
    // A rootfs that does not exist: usage (2), naming it.
    let o = netprobe(&[
        "run",
        "--phases",
        "oci",
        "--rootfs",
        "/nonexistent/rootfs",
        "--evidence",
        &fresh("e2"),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("/nonexistent/rootfs"), "{}", text(&o));
    // A CRIU config file requested through $CRIU_CONFIG_FILE: refused (3), naming it.
    let conf = tmp.path().join("criu.conf");
    std::fs::write(&conf, b"tcp-established\n").unwrap();
    let o = Command::new(EXE)
        .args(["run", "--phases", "kernel", "--evidence", &fresh("f")])
        .env("CRIU_CONFIG_FILE", &conf)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains(conf.to_str().unwrap()), "{}", text(&o));
    // A missing CRIU: host refused (3), naming it.
    let o = netprobe(&[
        "run",
        "--phases",
        "kernel",
        "--criu",
        "/nonexistent/criu",
        "--evidence",
        &fresh("g"),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("/nonexistent/criu"), "{}", text(&o));
    // Not root: host refused (3) before anything is written.
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            EXE,
            "run",
            "--phases",
            "kernel",
            "--evidence",
        ])
        .arg(tmp.path().join("h"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("root"), "{}", text(&o));
    assert!(
        !tmp.path().join("h").exists(),
        "nothing written when refused"
    );
    // An unknown --expect verdict: usage (2).
    let o = netprobe(&["run", "--expect", "maybe"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // verify on a folder without a result: usage (2), naming it.
    let o = netprobe(&["verify", tmp.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// A runtime whose checkpoint fails: the oci rung errors (exit 4), the evidence gathered so far
/// is kept, and the container and holder are gone.
#[test]
fn a_failing_rung_keeps_evidence_and_leaves_nothing_behind() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let wrapper = tmp.path().join("runc");
    let real = netprobe::host::find_in_path(Path::new("runc")).expect("runc in PATH");
    netprobe::evidence::fsio::write_executable(&wrapper,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = checkpoint ] && {{ echo 'checkpoint refused by test wrapper' >&2; exit 1; }}; done\nexec {} \"$@\"\n",
            real.display()
        ), 0o755).unwrap();
    let ev = evidence_dir(&tmp, "ev");
    let o = netprobe(&[
        "run",
        "--phases",
        "oci,external-netns",
        "--runtime",
        wrapper.to_str().unwrap(),
        "--evidence",
        ev.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let r = read_result(&ev);
    for n in [RungName::Oci, RungName::ExternalNetns] {
        let rung = r.rung(n).unwrap();
        assert_eq!(rung.status, Status::Error, "{n}");
        assert!(
            rung.error
                .as_deref()
                .unwrap()
                .contains("runtime checkpoint"),
            "{:?}",
            rung.error
        );
        assert!(
            ev.join(n.as_str()).join("netstate-before.json").exists(),
            "kept"
        );
    }
    assert_eq!(r.verdict.code, VerdictCode::Inconclusive);
    assert!(ev.join("external-netns/holder.json").exists());
    assert_nothing_left(&r);
}

/// `netprobe run` with no options at all, from a fresh working folder: the default evidence
/// folder is relative (`./evidence/<time>-<pid>`), and the verdict is `runtime-empty-ns`.
#[test]
fn run_with_no_options_uses_a_relative_default_folder() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(EXE)
        .arg("run")
        .current_dir(tmp.path())
        .env_remove("CRIU_CONFIG_FILE")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let dirs: Vec<_> = std::fs::read_dir(tmp.path().join("evidence"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let r = read_result(&dirs[0]);
    assert_eq!(r.verdict.code, VerdictCode::RuntimeEmptyNs);
    assert_nothing_left(&r);
    // A relative --evidence path too (runc changes directory before it opens paths).
    let o = Command::new(EXE)
        .args(["run", "--phases", "oci", "--evidence", "rel/ev"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        read_result(&tmp.path().join("rel/ev"))
            .rung(RungName::Oci)
            .unwrap()
            .status,
        Status::Fail
    );
}

/// Two runs given the same new folder at the same time: exactly one writes it, the other is
/// refused as usage (exit 2) without touching it.
#[test]
fn two_runs_never_share_an_evidence_folder() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let ev = evidence_dir(&tmp, "same");
    let spawn = || {
        Command::new(EXE)
            .args(["run", "--phases", "kernel,criu", "--quiet", "--evidence"])
            .arg(&ev)
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (spawn(), spawn());
    let (ca, cb) = (a.wait().unwrap().code(), b.wait().unwrap().code());
    let mut codes = [ca, cb];
    codes.sort();
    assert_eq!(
        codes,
        [Some(0), Some(2)],
        "one run wins, the other is refused"
    );
    let r = read_result(&ev);
    assert_eq!(r.rung(RungName::Criu).unwrap().status, Status::Pass);
    let o = netprobe(&["verify", ev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// Processes whose environment carries `tag` (netprobe's children inherit it: holders, runc,
/// CRIU, and the processes CRIU restores from a holder's image).
fn tagged_processes(tag: &str) -> Vec<String> {
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
fn container_cgroups(pid: u32) -> Vec<String> {
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

/// SIGINT / SIGTERM in the middle of a run (in different rungs): netprobe releases every holder,
/// restored process, container and work area it started, leaves a note beside the evidence so
/// far, and exits 128 + signal.
#[test]
fn an_interrupted_run_releases_everything_it_started() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    for (i, (sig, after_ms)) in [
        (nix::sys::signal::Signal::SIGINT, 150u64),
        (nix::sys::signal::Signal::SIGTERM, 700),
        (nix::sys::signal::Signal::SIGINT, 1200),
        (nix::sys::signal::Signal::SIGTERM, 1500),
        (nix::sys::signal::Signal::SIGINT, 1800),
        (nix::sys::signal::Signal::SIGTERM, 2100),
    ]
    .into_iter()
    .enumerate()
    {
        let tag = format!("{}-{i}", std::process::id());
        let ev = tmp.path().join(format!("ev{i}"));
        let child = Command::new(EXE)
            .args(["run", "--evidence"])
            .arg(&ev)
            .env("NETPROBE_TEST_TAG", &tag)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        std::thread::sleep(std::time::Duration::from_millis(after_ms));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        if code == Some(0) {
            // The run finished before the signal landed: nothing to release.
            continue;
        }
        assert_eq!(
            code,
            Some(128 + sig as i32),
            "{sig} after {after_ms} ms:\n{stderr}"
        );
        assert!(stderr.contains("interrupted by"), "{stderr}");
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            tagged_processes(&tag).is_empty(),
            "{sig} after {after_ms} ms left: {:?}\n{stderr}",
            tagged_processes(&tag)
        );
        assert!(
            container_cgroups(pid).is_empty(),
            "{sig} after {after_ms} ms left containers: {:?}\n{stderr}",
            container_cgroups(pid)
        );
        // No mount below the evidence or below a work area this run released (other tests
        // run their own work areas at the same time, so only ours are checked).
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(
            !mounts.contains(ev.to_str().unwrap()),
            "{sig} after {after_ms} ms left mounts:\n{mounts}"
        );
        for work in stderr
            .lines()
            .filter_map(|l| l.trim().strip_prefix("netprobe:   released work area "))
        {
            assert!(!mounts.contains(work), "{work} still has mounts:\n{mounts}");
            assert!(!Path::new(work).exists(), "{work} was not removed");
        }
        if ev.exists() {
            assert!(ev.join("interrupted.txt").exists(), "{stderr}");
            assert!(!ev.join("netprobe-result.json").exists());
        }
    }
}

/// `--strace` on a runtime rung: the runtime and its forks at checkpoint and restore, and the
/// runtime's `criu swrk` at checkpoint, each in its own trace in the rung's folder.
#[test]
fn strace_covers_the_runtime_and_its_criu() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let ev = evidence_dir(&tmp, "ev");
    let o = netprobe(&[
        "run",
        "--phases",
        "oci",
        "--strace",
        "--quiet",
        "--evidence",
        ev.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let read = |f: &str| std::fs::read_to_string(ev.join("oci").join(f)).unwrap_or_default();
    assert!(
        read("strace-checkpoint.txt").contains("checkpoint"),
        "runc checkpoint traced"
    );
    assert!(
        read("strace-restore.txt").contains("restore"),
        "runc restore traced"
    );
    let swrk = read("strace-criu-checkpoint.txt");
    assert!(
        swrk.contains("\"swrk\""),
        "criu swrk traced: {}",
        &swrk[..swrk.len().min(300)]
    );
    assert!(read("criu-strace-wrapper.sh").starts_with("#!/bin/sh"));
    assert_nothing_left(&read_result(&ev));
}
