//! The sealed copies of the runtime and CRIU (`src/slot/resources/sealed_binaries.rs`): made at provision, held by
//! the holder, run by every later verb and proven by inode and seals instead of a re-hash; the
//! files on disk compared by `stat` and re-hashed when that differs.
use crate::common::slot_support;
use netprobe::slot::Verb;
use slot_support::*;
use std::os::fd::AsRawFd;

/// Every seal a sealed copy must carry (runc's `RUNC_MEMFD_SEALS`).
const SEALS: i32 = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;

#[test]
fn later_verbs_run_the_holders_sealed_copies() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![15]);
    let img = sleep_image(tmp.path());
    // A private copy of runc, so the test can change its stat without touching the host's.
    let rt = private_copy(&tmp.path().join("bins"), "runc", "/usr/bin/runc".as_ref());
    let mut a = args(Verb::Provision, "15", &sd);
    a.image = Some(img);
    a.runtime = Some(rt.clone());
    let p = netprobe::slot::run_verb(&a).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        p.facts["sealed_binaries"]["runtime"]["holder_fd"].is_i64(),
        "{:?}",
        p.facts["sealed_binaries"]
    );

    let st = state(&sd, 15);
    let holder = st.holder.expect("holder").pid;
    for (name, pin) in [("runtime", &st.runtime), ("criu", &st.criu)] {
        let rec = pin
            .sealed
            .as_ref()
            .unwrap_or_else(|| panic!("no sealed {name} in state.json"));
        let fd = format!("/proc/{holder}/fd/{}", rec.holder_fd);
        let link = std::fs::read_link(&fd).unwrap();
        assert!(
            link.to_string_lossy()
                .starts_with(&format!("/memfd:netprobe-{name}")),
            "{fd} -> {}",
            link.display()
        );
        let f = std::fs::File::open(&fd).unwrap();
        // SAFETY: fcntl(2) F_GET_SEALS on an open descriptor.
        let seals = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GET_SEALS) };
        assert_eq!(seals & SEALS, SEALS, "{fd}: seals {seals:#x}");
        // Root cannot change it either.
        let w = std::fs::OpenOptions::new().write(true).open(&fd);
        assert!(
            w.and_then(|mut w| std::io::Write::write_all(&mut w, b"x"))
                .is_err(),
            "{fd} accepted a write"
        );
        assert_eq!(
            std::fs::metadata(&fd).unwrap().len(),
            std::fs::metadata(&pin.path).unwrap().len()
        );
    }

    // Snapshot runs the copies and proves them without re-hashing the unchanged files.
    let s = ok(Verb::Snapshot, "15", &sd);
    let rt_fd = st.runtime.sealed.as_ref().unwrap().holder_fd;
    let g = gate(&s, "runtime-binary");
    assert!(
        g.detail
            .contains(&format!("runs /proc/{holder}/fd/{rt_fd}"))
            && g.detail.contains("not re-hashed"),
        "{}",
        g.detail
    );
    assert!(
        gate(&s, "criu-binary").detail.contains("sealed"),
        "{:?}",
        s.gates
    );
    let log = std::fs::read_to_string(s.evidence.as_ref().unwrap().join("runtime.log")).unwrap();
    assert!(
        log.contains(&format!("/proc/{holder}/fd/{rt_fd}")),
        "the runtime ran from the sealed copy: {log}"
    );

    // The file on disk touched (same bytes, new mtime/ctime): re-hashed, still the pin.
    let f = std::fs::File::options().write(true).open(&rt).unwrap();
    f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60))
        .unwrap();
    drop(f);
    let r = ok(Verb::Reset, "15", &sd);
    let g = gate(&r, "runtime-binary");
    assert!(
        g.detail
            .contains("changed by stat since it was recorded, re-hashed")
            && g.detail.contains(&st.runtime.sha256),
        "{}",
        g.detail
    );
    // Its new stat is recorded (same bytes: the pin's), so the next verb compares by stat again
    // instead of re-hashing it every time.
    let now = std::fs::metadata(&rt).unwrap();
    let after = state(&sd, 15);
    let src = &after.runtime.sealed.as_ref().unwrap().source;
    assert_eq!(
        (src.ino, src.mtime, src.ctime),
        (
            std::os::unix::fs::MetadataExt::ino(&now),
            [
                std::os::unix::fs::MetadataExt::mtime(&now),
                std::os::unix::fs::MetadataExt::mtime_nsec(&now)
            ],
            [
                std::os::unix::fs::MetadataExt::ctime(&now),
                std::os::unix::fs::MetadataExt::ctime_nsec(&now)
            ]
        )
    );
    let journal = std::fs::read_to_string(sd.join("slot-15/journal.jsonl")).unwrap();
    assert!(
        journal.contains("re-hashed to the pin; its new stat is recorded"),
        "{journal}"
    );
    let r = ok(Verb::Reset, "15", &sd);
    let g = gate(&r, "runtime-binary");
    assert!(g.detail.contains("not re-hashed"), "{}", g.detail);
    // The running container was released by the sealed copy, and the log line says so.
    let log = std::fs::read_to_string(r.evidence.as_ref().unwrap().join("runtime.log")).unwrap();
    assert!(
        log.contains(&format!(
            "/proc/{holder}/fd/{rt_fd} kill + delete --force + state"
        )),
        "{log}"
    );

    // state.json edited: each refusal comes before anything is touched and names the way out.
    let sp = sd.join("slot-15/state.json");
    let original = std::fs::read_to_string(&sp).unwrap();
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_str(&original).unwrap();
        f(&mut v);
        std::fs::write(&sp, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    };
    let refused = |want: &[&str]| {
        let e = run(Verb::Reset, "15", &sd).unwrap_err();
        assert_eq!(e.gate.as_deref(), Some("runtime-binary"), "{e}");
        for w in want {
            assert!(e.message.contains(w), "{w:?} not in: {e}");
        }
    };
    // Another of the holder's descriptors (fd 0, /dev/null).
    edit(&|v| v["runtime"]["sealed"]["holder_fd"] = 0.into());
    refused(&["not a memfd", "--runtime"]);
    // CRIU's copy recorded as the runtime's.
    edit(&|v| v["runtime"]["sealed"] = v["criu"]["sealed"].clone());
    refused(&["not netprobe-runtime"]);
    std::fs::write(&sp, &original).unwrap();
    // The file on disk swapped: refused, naming the intact sealed copy to run instead.
    let way_out = format!("--runtime /proc/{holder}/fd/{rt_fd}");
    std::fs::copy("/bin/true", &rt).unwrap();
    refused(&[
        "swapped",
        "the sealed copy the holder keeps is intact",
        &way_out,
    ]);
    // `slot status` proves both copies as the gates do, and asks the intact runtime copy for
    // the container's state (the swapped file on disk is not run).
    let status = ok(Verb::Status, "15", &sd).to_json();
    let live = &status["live"];
    for b in ["runtime", "criu"] {
        let c = &live["sealed_copies"][b];
        assert!(
            c["proven"] == true
                && c["detail"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("/memfd:netprobe-{b}")),
            "{c}"
        );
    }
    assert_eq!(live["container"]["status"], "running", "{live}");
    // Named with --runtime, that copy is hashed whole and run.
    let mut a = args(Verb::Reset, "15", &sd);
    a.runtime = Some(format!("/proc/{holder}/fd/{rt_fd}").into());
    let r = netprobe::slot::run_verb(&a).unwrap_or_else(|e| panic!("{e}"));
    let g = gate(&r, "runtime-binary");
    assert!(
        g.detail.contains(&st.runtime.sha256) && g.detail.contains("hashed whole: --runtime"),
        "{}",
        g.detail
    );

    let holders = holder_pids(&sd);
    let mut c = args(Verb::Cleanup, "15", &sd);
    c.runtime = Some(format!("/proc/{holder}/fd/{rt_fd}").into());
    netprobe::slot::run_verb(&c).unwrap_or_else(|e| panic!("{e}"));
    assert_released(&sd, &holders);
}
