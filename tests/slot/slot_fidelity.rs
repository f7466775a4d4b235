//! The slot's closing gates say only what they checked (issues 11 and 14, slot side), real
//! root, runc and CRIU, the holder started from the netprobe binary:
//! - the net-fidelity gate compares the FULL state (netfilter, address flags): a `CRIU` chain
//!   planted in the holder's netns before a restore fails it naming the chain; an IPv6 address
//!   that became deprecated between snapshot and restore fails it naming the flag; the diff is
//!   printed as field paths;
//! - the outcome names what each gate recorded ("not applicable" as such) and both netns inodes;
//! - a runtime checkpoint that CRIU refuses (an established TCP connection in the guest) carries
//!   CRIU's reason in the error's `criu_reason` field (library and `--json`).
use crate::common::slot_support;
use netprobe::slot::{Phase, Verb};
use slot_support::*;
use std::process::Command;

/// Runs `args` inside the holder's netns (`nsenter --net=/proc/<pid>/ns/net`), asserting success.
fn in_holder(pid: i32, args: &[&str]) {
    let o = Command::new("nsenter")
        .arg(format!("--net=/proc/{pid}/ns/net"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn restore_err(slot: &str, sd: &std::path::Path) -> netprobe::slot::SlotError {
    match run(Verb::Restore, slot, sd) {
        Ok(o) => panic!("restore unexpectedly succeeded: {}", o.summary),
        Err(e) => e,
    }
}

#[test]
fn planted_criu_chain_and_deprecated_address_fail_the_gate_by_name() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![41]);
    ok(Verb::Provision, "41", &sd);
    let pid = state(&sd, 41).holder.unwrap().pid;
    // An IPv6 address with lifetimes, DAD off, present at snapshot.
    in_holder(
        pid,
        &[
            "ip",
            "addr",
            "add",
            "fd41::1/64",
            "dev",
            "lo",
            "nodad",
            "valid_lft",
            "3600",
            "preferred_lft",
            "3600",
        ],
    );
    let snap = ok(Verb::Snapshot, "41", &sd);
    let rec = std::fs::read_to_string(snap.evidence.as_ref().unwrap().join("netstate-before.json"))
        .unwrap();
    assert!(
        rec.contains("\"netfilter\"") && rec.contains("\"sysctls\""),
        "the slot records the full state: {rec}"
    );

    // (a) A CRIU chain planted in the holder's netns (table mangle: CRIU's own lock of the
    // external netns, a CRIU chain in table filter from the dump on, is removed by the
    // restore's unlock; this one survives it): the restore fails the gate naming it.
    in_holder(pid, &["iptables", "-w", "-t", "mangle", "-N", "CRIU"]);
    in_holder(
        pid,
        &["iptables", "-w", "-t", "mangle", "-A", "CRIU", "-j", "DROP"],
    );
    let e = restore_err("41", &sd);
    assert_eq!(e.exit_code(), 1, "{e}");
    assert_eq!(e.gate.as_deref(), Some("net-fidelity"), "{e}");
    assert!(
        e.message.contains(
            "CRIU's network lock left in the namespace: iptables: chain CRIU in table mangle"
        ),
        "{e}"
    );
    let diff = e.diff.clone().unwrap();
    assert!(diff.contains("/netfilter/iptables"), "{diff}");
    assert!(
        !diff
            .lines()
            .any(|l| l.starts_with("+ ") || l.starts_with("- ")),
        "{diff}"
    );
    assert_eq!(state(&sd, 41).phase, Phase::RestoreFailed);
    in_holder(pid, &["iptables", "-w", "-t", "mangle", "-F", "CRIU"]);
    in_holder(pid, &["iptables", "-w", "-t", "mangle", "-X", "CRIU"]);

    // (b) The address became deprecated (preferred lifetime 0): the gate names the flag.
    in_holder(
        pid,
        &[
            "ip",
            "addr",
            "change",
            "fd41::1/64",
            "dev",
            "lo",
            "valid_lft",
            "3600",
            "preferred_lft",
            "0",
        ],
    );
    let e = restore_err("41", &sd);
    assert_eq!(e.gate.as_deref(), Some("net-fidelity"), "{e}");
    assert!(
        e.message
            .contains("address fd41::1/64 on ifindex 1: flag deprecated appeared"),
        "{e}"
    );
    let diff = e.diff.clone().unwrap();
    assert!(
        diff.contains("/addresses/") && diff.contains("deprecated"),
        "{diff}"
    );

    // Put back: the restore passes; its outcome says what each gate recorded, inodes side by side.
    in_holder(
        pid,
        &[
            "ip",
            "addr",
            "change",
            "fd41::1/64",
            "dev",
            "lo",
            "valid_lft",
            "3600",
            "preferred_lft",
            "3600",
        ],
    );
    let r = ok(Verb::Restore, "41", &sd);
    let c = r.facts["restore_container_netns_inode"].as_u64().unwrap();
    let h = r.facts["restore_holder_netns_inode"].as_u64().unwrap();
    assert_eq!(c, h, "{:?}", r.facts);
    let d = &gate(&r, "container-in-holder-netns").detail;
    assert!(
        d.contains(&format!(
            "netns inode {c} (container init's) == {h} (holder's)"
        )),
        "{d}"
    );
    assert!(r.summary.contains("net-fidelity: "), "{}", r.summary);
    assert!(
        r.summary
            .contains("guest-http: 127.0.0.1:5000 GET /: HTTP/1."),
        "{}",
        r.summary
    );
    assert!(r.summary.contains(d.as_str()), "{}", r.summary);
    let holders = holder_pids(&sd);
    ok(Verb::Cleanup, "41", &sd);
    assert_released(&sd, &holders);
}

#[test]
fn no_guest_server_is_printed_as_not_applicable() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![42]);
    let img = sleep_image(tmp.path());
    provision_dir("42", &sd, &img).unwrap_or_else(|e| panic!("{e}"));
    ok(Verb::Snapshot, "42", &sd);
    for verb in [Verb::Restore, Verb::Reset] {
        let r = ok(verb, "42", &sd);
        assert!(
            r.summary
                .contains("guest-http: not applicable: the image declares no guest server"),
            "{}",
            r.summary
        );
        assert!(!r.summary.contains("guest answers"), "{}", r.summary);
        let when = verb.as_str();
        assert_eq!(
            r.facts[&format!("{when}_container_netns_inode")],
            r.facts[&format!("{when}_holder_netns_inode")]
        );
        let journal = std::fs::read_to_string(sd.join("slot-42/journal.jsonl")).unwrap();
        assert!(
            journal.contains("guest-http: not applicable"),
            "journal: {journal}"
        );
    }
    let holders = holder_pids(&sd);
    ok(Verb::Cleanup, "42", &sd);
    assert_released(&sd, &holders);
}

#[test]
fn criu_reason_of_a_refused_checkpoint_is_a_field() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![43]);
    ok(Verb::Provision, "43", &sd);
    let pid = state(&sd, 43).holder.unwrap().pid;
    // An established TCP connection to the guest's server, held open by a thread of this test
    // that entered the holder's netns (the server side is in the container).
    let netns = format!("/proc/{pid}/ns/net");
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        netprobe::ns::run_in_netns(std::path::Path::new(&netns), move || {
            let s =
                std::net::TcpStream::connect(("127.0.0.1", netprobe::oci::INIT_HTTP_PORT)).unwrap();
            ready_tx.send(()).unwrap();
            let _ = rx.recv();
            drop(s);
        })
        .unwrap();
    });
    ready_rx.recv().unwrap();
    // Until the server has accepted it (a socket still in the listener's queue belongs to no
    // process, so CRIU would not see it): the server's end of the connection has an inode in
    // the namespace's /proc/net/tcp only once a process holds it.
    let port = format!(":{:04X}", netprobe::oci::INIT_HTTP_PORT);
    let accepted = || {
        std::fs::read_to_string(format!("/proc/{pid}/net/tcp"))
            .unwrap_or_default()
            .lines()
            .skip(1)
            .any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 9 && f[1].ends_with(&port) && f[3] == "01" && f[9] != "0"
            })
    };
    let t0 = std::time::Instant::now();
    while !accepted() {
        assert!(
            t0.elapsed().as_secs() < 20,
            "the guest's server never accepted"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (code, out, _err) = cli_slot("snapshot", "43", &sd, &["--json"]);
    tx.send(()).unwrap();
    t.join().unwrap();
    assert_eq!(code, Some(4), "{out}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let why = j["criu_reason"].as_str().unwrap_or_else(|| panic!("{j:#}"));
    assert!(
        why.contains("Connected TCP socket, consider using --tcp-established option"),
        "{why}"
    );
    assert!(j["message"].as_str().unwrap().contains(why), "{j:#}");
    let verb: serde_json::Value = serde_json::from_slice(
        &std::fs::read(std::path::Path::new(j["evidence"].as_str().unwrap()).join("verb.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(verb["error"]["criu_reason"].as_str(), Some(why), "{verb:#}");
    let holders = holder_pids(&sd);
    ok(Verb::Cleanup, "43", &sd);
    assert_released(&sd, &holders);
}
