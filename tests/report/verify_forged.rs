//! `netprobe verify` on a real evidence folder (one full ladder run on runc and CRIU, root)
//! whose `netprobe-result.json` is edited in fields no artifact hash covers: a pin's `matches`
//! with its declared difference deleted, the verdict's summary, a rung's summary, a rung's
//! facts, the durations against their bounds. Each edit must make verify exit 1 naming the
//! field; the unedited folder verifies (exit 0) and says what it did not re-derive. Also: an
//! edited log with its hashes fixed (the assertion listed under its recorded status), and empty
//! directories added to the folder.

use crate::common;
use common::cli::{netprobe, text};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

/// Writes `edit(result)` as the folder's result, runs verify, restores the original bytes.
fn verify_edited(ev: &Path, original: &[u8], edit: impl FnOnce(&mut Value)) -> Output {
    let path = ev.join("netprobe-result.json");
    let mut v: Value = serde_json::from_slice(original).unwrap();
    edit(&mut v);
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let o = netprobe(&["verify", ev.to_str().unwrap()]);
    std::fs::write(&path, original).unwrap();
    o
}

fn rung<'a>(v: &'a mut Value, name: &str) -> &'a mut Value {
    v["rungs"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["name"] == name)
        .unwrap()
}

/// Asserts verify failed (exit 1) with a mismatch line naming `field`.
fn assert_caught(o: &Output, field: &str) {
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{field}: {}", text(o));
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with(&format!("MISMATCH: {field}"))),
        "no mismatch naming {field}: {}",
        text(o)
    );
}

/// A fresh `netprobe run` (root: namespaces, CRIU, runc) into `<tmp>/ev`: the folder every
/// test here edits copies of.
fn fresh_run() -> (tempfile::TempDir, std::path::PathBuf) {
    crate::common::require_root();
    let tmp = tempfile::tempdir().unwrap();
    let ev = tmp.path().join("ev");
    let o = netprobe(&["run", "--quiet", "--evidence", ev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    (tmp, ev)
}

#[test]
fn edits_of_unhashed_result_fields_are_caught() {
    let _baton = crate::common::baton(module_path!());
    let (_tmp, ev) = fresh_run();
    let original = std::fs::read(ev.join("netprobe-result.json")).unwrap();

    // Unedited: reproduced, and it says what it did not re-derive.
    let o = netprobe(&["verify", ev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let not_rederived = out
        .lines()
        .find(|l| l.starts_with("recorded, not re-derived: "))
        .unwrap_or_else(|| panic!("a not-re-derived line: {out}"));
    assert!(
        not_rederived.contains("rungs[oci].facts.container_pid_after"),
        "{not_rederived}"
    );
    let checked = out
        .lines()
        .find(|l| l.starts_with("re-derived from the files and compared: "))
        .unwrap_or_else(|| panic!("a re-derived line: {out}"));
    for f in [
        "rungs[criu].facts.image_files",
        "rungs[criu].facts.dumped_pid",
        "rungs[oci].facts.work_area",
        "rungs[oci].facts.container_id",
        "rungs[oci].facts.container_pid_before",
        "rungs[criu].facts.attribution",
        "rungs[oci].facts.attribution",
    ] {
        assert!(checked.contains(f), "{f} re-derived: {checked}");
        assert!(!not_rederived.contains(f), "{f}: {not_rederived}");
    }

    // A pin made to match, and the declared difference that said otherwise deleted (host.json
    // still records the real runtime).
    let o = verify_edited(&ev, &original, |v| {
        let pin = v["pins"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|p| p["name"] == "runtime")
            .unwrap();
        let was = pin["matches"].as_bool().unwrap();
        pin["matches"] = Value::Bool(!was);
        if !was {
            v["declared_differences"]
                .as_array_mut()
                .unwrap()
                .retain(|d| !d.as_str().unwrap().starts_with("runtime "));
        }
    });
    assert_caught(&o, "pins[runtime].matches");

    // The declared difference alone deleted.
    let o = verify_edited(&ev, &original, |v| {
        v["declared_differences"].as_array_mut().unwrap().remove(0);
    });
    assert_caught(&o, "declared_differences");

    // The verdict's sentence.
    let o = verify_edited(&ev, &original, |v| {
        v["verdict"]["summary"] = Value::from("all fine");
    });
    assert_caught(&o, "verdict.summary");

    // A rung's summary: the holder's netns inode changed.
    let o = verify_edited(&ev, &original, |v| {
        let r = rung(v, "external-netns");
        let inode = r["facts"]["holder_netns_inode"].as_u64().unwrap();
        let s = r["summary"].as_str().unwrap().replace(
            &format!("holder's {inode}"),
            &format!("holder's {}", inode + 1),
        );
        assert_ne!(r["summary"].as_str().unwrap(), s);
        r["summary"] = Value::from(s);
    });
    assert_caught(&o, "rungs[external-netns].summary");

    // Rung facts.
    let o = verify_edited(&ev, &original, |v| {
        let f = &mut rung(v, "criu")["facts"];
        f["image_files"] = Value::from(f["image_files"].as_u64().unwrap() + 1);
    });
    assert_caught(&o, "rungs[criu].facts.image_files");
    let o = verify_edited(&ev, &original, |v| {
        let f = &mut rung(v, "criu")["facts"];
        f["state_byte_equal"] = Value::Bool(!f["state_byte_equal"].as_bool().unwrap());
    });
    assert_caught(&o, "rungs[criu].facts.state_byte_equal");
    // Facts from dump.log and runtime-restore.json.
    let o = verify_edited(&ev, &original, |v| {
        let f = &mut rung(v, "criu")["facts"];
        f["dumped_pid"] = Value::from(f["dumped_pid"].as_u64().unwrap() + 1);
    });
    assert_caught(&o, "rungs[criu].facts.dumped_pid");
    let o = verify_edited(&ev, &original, |v| {
        let f = &mut rung(v, "external-netns")["facts"];
        f["container_pid_before"] = Value::from(f["container_pid_before"].as_u64().unwrap() + 1);
    });
    assert_caught(&o, "rungs[external-netns].facts.container_pid_before");
    let o = verify_edited(&ev, &original, |v| {
        rung(v, "oci")["facts"]["container_id"] = Value::from("netprobe-oci-forged");
    });
    assert_caught(&o, "rungs[oci].facts.container_id");
    let o = verify_edited(&ev, &original, |v| {
        rung(v, "oci")["facts"]["work_area"] = Value::from("/var/tmp/elsewhere");
    });
    assert_caught(&o, "rungs[oci].facts.work_area");

    // Text the probe spec gives: an assertion's description, expected text and role.
    let id = rung(&mut serde_json::from_slice(&original).unwrap(), "oci")["assertions"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    for field in ["description", "expected", "role"] {
        let o = verify_edited(&ev, &original, |v| {
            rung(v, "oci")["assertions"][0][field] = Value::from("CRIU was NOT involved");
        });
        assert_caught(&o, &format!("oci/{id}.{field}"));
    }
    // The attribution a rung recorded: the MISMATCH names the entry and both values.
    let o = verify_edited(&ev, &original, |v| {
        rung(v, "oci")["facts"]["attribution"]["external_netns"] = Value::Bool(true);
    });
    assert_caught(
        &o,
        "oci: recorded attribution differs from the one the evidence gives: external_netns recorded true, evidence gives false",
    );
    // The counts edited: the attribution MISMATCH gives both; the verdict's summary (which
    // counts the deciding rung's lost facts) is derived from the recomputed attribution, so it
    // is not called a mismatch with the forged count.
    let o = verify_edited(&ev, &original, |v| {
        rung(v, "oci")["facts"]["attribution"]["counts"] = serde_json::json!({"runtime-choice": 3});
    });
    assert_caught(
        &o,
        "oci: recorded attribution differs from the one the evidence gives: count runtime-choice recorded 3, evidence gives ",
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !out.contains("MISMATCH: verdict.summary") && !out.contains("runtime-choice 3\""),
        "{}",
        text(&o)
    );
    let o = verify_edited(&ev, &original, |v| {
        let row = &mut rung(v, "oci")["facts"]["attribution"]["changed"][0];
        assert!(row.is_object(), "the oci rung records a changed fact (lo)");
        row["after"] = Value::from("forged");
    });
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.lines()
            .any(|l| l.contains("recorded attribution differs")
                && l.contains(": after recorded `forged`, evidence gives ")),
        "{}",
        text(&o)
    );
    // The attribution deleted, with the counts clause it gave the verdict's summary: the rung
    // ran to its end and its folder holds the attribution's inputs, so its absence is named and
    // the attribution recomputed (the summary then differs too).
    let o = verify_edited(&ev, &original, |v| {
        let facts = rung(v, "oci")["facts"].as_object_mut().unwrap();
        assert!(facts.remove("attribution").is_some());
        let s = v["verdict"]["summary"].as_str().unwrap().to_string();
        let cut = s
            .find("; lost facts by step")
            .expect("the summary counts lost facts");
        v["verdict"]["summary"] = Value::from(&s[..cut]);
    });
    assert_caught(&o, "rungs[oci].facts.attribution: not recorded");
    // An error on a rung that ran to its end.
    let o = verify_edited(&ev, &original, |v| {
        rung(v, "oci")["error"] = Value::from("boom");
    });
    assert_caught(&o, "rungs[oci].error");

    // The ladder reordered, or a rung made to look skipped while keeping what it recorded.
    let o = verify_edited(&ev, &original, |v| {
        v["rungs"].as_array_mut().unwrap().swap(2, 3);
    });
    assert_caught(&o, "rungs: recorded");
    let o = verify_edited(&ev, &original, |v| {
        rung(v, "kernel")["status"] = Value::from("skipped");
    });
    assert_caught(&o, "rungs[kernel]: skipped, yet it records facts");

    // Another tool_version: the pins' pinned values are named as not re-derived (beside this
    // netprobe's), the rest of each pin check is still re-derived from host.json.
    let o = verify_edited(&ev, &original, |v| {
        v["tool_version"] = Value::from("0.0.9");
    });
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let nr = out
        .lines()
        .find(|l| l.starts_with("recorded, not re-derived: "))
        .unwrap();
    assert!(
        nr.contains(
            "pins[runtime].pinned_version, pinned_sha256, pinned_bytes (recorded by netprobe 0.0.9"
        ) && nr.contains("this netprobe 0.1.0 pins"),
        "{nr}"
    );
    assert!(
        nr.contains("the role, description, subject and expected text of the assertions"),
        "{nr}"
    );
    // An assertion another netprobe recorded that this one has no probe for is named as not
    // re-evaluated, never dropped in silence.
    let o = verify_edited(&ev, &original, |v| {
        v["tool_version"] = Value::from("0.0.9");
        let r = rung(v, "criu");
        let mut extra = r["assertions"][0].clone();
        extra["id"] = Value::from("gone-in-0-1");
        r["assertions"].as_array_mut().unwrap().push(extra);
    });
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("the recorded assertions criu/gone-in-0-1 (netprobe 0.0.9's probes; this netprobe has no probe of that id"),
        "{out}"
    );
    // … so a pin made to match with its own pinned values kept, or its declared difference
    // deleted, is still caught.
    let o = verify_edited(&ev, &original, |v| {
        v["tool_version"] = Value::from("0.0.9");
        for p in v["pins"].as_array_mut().unwrap() {
            p["matches"] = Value::Bool(true);
        }
    });
    assert_caught(&o, "pins[runtime].matches");
    let o = verify_edited(&ev, &original, |v| {
        v["tool_version"] = Value::from("0.0.9");
        v["declared_differences"]
            .as_array_mut()
            .unwrap()
            .retain(|d| !d.as_str().unwrap().starts_with("runtime "));
    });
    assert_caught(&o, "declared_differences: pins[runtime] does not match");

    // Durations no file holds, bounded by how the run measures them (trial 20, finding 6):
    // the run's duration below the sum of its rungs', a rung's timings above its duration.
    let o = verify_edited(&ev, &original, |v| {
        v["duration_ms"] = Value::from(5);
        let r = rung(v, "oci");
        r["duration_ms"] = Value::from(99999);
        r["timings_ms"] = serde_json::json!({"checkpoint": 1, "restore": 99998});
    });
    assert_caught(
        &o,
        "duration_ms: recorded 5 ms for the run, yet its rungs' duration_ms add up to ",
    );
    let o = verify_edited(&ev, &original, |v| {
        let r = rung(v, "criu");
        r["timings_ms"]["restore"] = Value::from(r["duration_ms"].as_u64().unwrap());
    });
    assert_caught(&o, "rungs[criu].timings_ms: ");

    // Restored: reproduced again.
    let o = netprobe(&["verify", ev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("duration_ms bounds ("), "{out}");
}

/// Trial 20, finding 4: `dump.log` without its `LD: Got link` lines and the hashes made to
/// match, so only the re-evaluation differs: the assertion recorded as passing is listed as
/// failing now, recorded as passing — never as failing "as recorded". Finding 14: an empty
/// directory added is a MISMATCH like an added file; CRIU's cgroup yard in a rung's folder (a
/// killed CRIU leaves it) is not.
#[test]
fn a_recorded_pass_failing_now_and_an_added_empty_directory_are_told_as_such() {
    let _baton = crate::common::baton(module_path!());
    let (_tmp, ev) = fresh_run();
    let original = std::fs::read(ev.join("netprobe-result.json")).unwrap();

    let yard = ev.join("criu/.criu.cgyard.Ab12Cd");
    std::fs::create_dir(&yard).unwrap();
    let o = netprobe(&["verify", ev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for added in ["added", "kernel/images", "criu/images/added"] {
        std::fs::create_dir(ev.join(added)).unwrap();
        let o = netprobe(&["verify", ev.to_str().unwrap()]);
        assert_caught(
            &o,
            &format!("directory {added}/ is in the folder but holds no file"),
        );
        std::fs::remove_dir(ev.join(added)).unwrap();
    }
    std::fs::remove_dir(&yard).unwrap();

    let log = ev.join("criu/dump.log");
    let text_before = std::fs::read_to_string(&log).unwrap();
    let cut: String = text_before
        .lines()
        .filter(|l| !l.contains("LD: Got link"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(
        cut, text_before,
        "the criu rung's dump.log names dumped links"
    );
    // The log itself is read-only like every artifact: replaced, not written through.
    std::fs::remove_file(&log).unwrap();
    std::fs::write(&log, &cut).unwrap();
    let sha = netprobe::evidence::sha256_hex(cut.as_bytes());
    let o = verify_edited(&ev, &original, |v| {
        let fix = |a: &mut Value| {
            for a in a.as_array_mut().unwrap() {
                if a["path"] == "criu/dump.log" {
                    a["sha256"] = Value::from(sha.clone());
                    a["bytes"] = Value::from(cut.len());
                }
            }
        };
        fix(&mut v["artifacts"]);
        fix(&mut rung(v, "criu")["artifacts"]);
    });
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        out.contains(
            "  failing as recomputed now, recorded as passing: criu/link-dumped-after-netns: "
        ),
        "{}",
        text(&o)
    );
    assert!(
        !out.contains("failing as recorded and as recomputed now: criu/")
            && !out.contains("failing (as recorded)"),
        "{}",
        text(&o)
    );
    assert_caught(&o, "criu/link-dumped-after-netns: recorded pass");
}

/// `netprobe ARGS`, killed (and the test failed) when it has not ended within 60 s.
fn netprobe_bounded(args: &[&str]) -> Output {
    let mut child = std::process::Command::new(common::cli::EXE)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn netprobe");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("netprobe {args:?} did not end within 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// A recorded file replaced by a FIFO (no writer) or by a symlink to /dev/zero: verify, report
/// and diff end at once, with a MISMATCH naming the file and what it is (exit 1), instead of
/// waiting for a writer or reading forever.
#[test]
fn a_recorded_file_replaced_by_a_fifo_or_a_device_link_is_a_mismatch_not_a_hang() {
    let _baton = crate::common::baton(module_path!());
    let (tmp, ev) = fresh_run();
    let copy = |name: &str| {
        let to = tmp.path().join(name);
        let st = std::process::Command::new("cp")
            .args(["-a", ev.to_str().unwrap(), to.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(st.success());
        to
    };
    let fifo = copy("fifo");
    std::fs::remove_file(fifo.join("criu/dump.log")).unwrap();
    nix::unistd::mkfifo(
        &fifo.join("criu/dump.log"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let zero = copy("zero");
    std::fs::remove_file(zero.join("kernel/kernel.log")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero.join("kernel/kernel.log")).unwrap();
    for (dir, rel, kind) in [
        (&fifo, "criu/dump.log", "a FIFO"),
        (&zero, "kernel/kernel.log", "a symbolic link"),
    ] {
        let o = netprobe_bounded(&["verify", dir.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.lines().any(|l| l.contains(&format!(
                "MISMATCH: artifact {rel} cannot be read: {kind}, not a regular file"
            ))),
            "{}",
            text(&o)
        );
        let o = netprobe_bounded(&["report", dir.to_str().unwrap(), "--format", "md"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let o = netprobe_bounded(&["diff", ev.to_str().unwrap(), dir.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("NOT VERIFIED"),
            "{}",
            text(&o)
        );
    }
}
