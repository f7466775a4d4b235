//! The runtime and CRIU a slot verb runs from the holder's sealed copies
//! (`/proc/<holder>/fd/<n>`, `src/slot/resources/sealed_binaries.rs`) show in `ps` as what they are: the kernel
//! names a process after the last component of the path it was executed by, so both are run
//! through symlinks named `runc`/`crun` and `criu` in the verb's private folder
//! (`src/oci/runtime_env.rs`, `CriuPathDir`) — their command name (`/proc/<pid>/comm`) and
//! `argv[0]` are `runc`/`crun` and `criu`, never the descriptor number. Real slots (runc 1.4.3
//! and crun 1.28, CRIU 4.3, the busybox sleep image); the processes are observed by polling
//! `/proc` while a snapshot and a restore run, each picked by its executable: the sealed memfd.
use crate::common::slot_support;
use netprobe::slot::Verb;
use slot_support::*;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const CRIU_4_3: &str = "/opt/criu-4.3/sbin/criu";

/// One process seen running a sealed copy: which copy (`netprobe-runtime`, `netprobe-criu`),
/// its command name and its argv.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Seen {
    copy: String,
    comm: String,
    argv: Vec<String>,
}

/// Every process whose executable is a sealed copy (`/memfd:netprobe-… (deleted)`) now.
fn scan(out: &mut BTreeSet<Seen>) {
    let me = std::process::id().to_string();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) || name == me {
            continue;
        }
        let Ok(exe) = std::fs::read_link(e.path().join("exe")) else {
            continue;
        };
        let exe = exe.to_string_lossy().into_owned();
        let Some(copy) = exe
            .strip_prefix("/memfd:")
            .and_then(|r| r.strip_suffix(" (deleted)"))
            .filter(|c| c.starts_with("netprobe-"))
        else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let argv = cmd
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect::<Vec<_>>();
        // A process exiting (its memory gone) reads an empty cmdline: nothing to judge.
        if argv.is_empty() {
            continue;
        }
        out.insert(Seen {
            copy: copy.to_string(),
            comm: comm.trim_end().to_string(),
            argv,
        });
    }
}

/// Runs `f` while a thread polls `/proc` ([`scan`]) every millisecond; returns what it saw.
fn observed<T>(f: impl FnOnce() -> T) -> (T, BTreeSet<Seen>) {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let poller = std::thread::spawn(move || {
        let mut seen = BTreeSet::new();
        while !s.load(Ordering::Relaxed) {
            scan(&mut seen);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        seen
    });
    let r = f();
    stop.store(true, Ordering::Relaxed);
    (r, poller.join().unwrap())
}

/// Provision slot `slot` with `runtime` and CRIU 4.3, then snapshot and restore it while
/// watching `/proc`: the runtime's processes (but `runc init`, which the runtime re-executes
/// itself) are named `kind` by comm and argv[0], CRIU's `criu`, none by a number.
fn names_during_verbs(slot: &str, runtime: &str, kind: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let n: u32 = slot.parse().unwrap();
    let _c = CleanupOnDrop(sd.clone(), vec![n]);
    let mut a = args(Verb::Provision, slot, &sd);
    a.image = Some(sleep_image(tmp.path()));
    a.runtime = Some(runtime.into());
    a.criu = Some(CRIU_4_3.into());
    netprobe::slot::run_verb(&a).unwrap_or_else(|e| panic!("provision: {e}"));
    let st = state(&sd, n);
    assert!(
        st.runtime.sealed.is_some() && st.criu.sealed.is_some(),
        "the slot runs sealed copies"
    );
    let (_, mut seen) = observed(|| ok(Verb::Snapshot, slot, &sd));
    let (_, more) = observed(|| ok(Verb::Restore, slot, &sd));
    seen.extend(more);

    let runtime_seen: Vec<&Seen> = seen
        .iter()
        .filter(|s| {
            s.copy == "netprobe-runtime" && s.argv.get(1).map(String::as_str) != Some("init")
        })
        .collect();
    assert!(
        !runtime_seen.is_empty(),
        "no {kind} process of the sealed copy seen during snapshot and restore: {seen:?}"
    );
    for s in &runtime_seen {
        assert_eq!(s.comm, kind, "{s:?}");
        assert_eq!(s.argv.first().map(String::as_str), Some(kind), "{s:?}");
    }
    assert!(
        seen.iter().any(|s| s.copy == "netprobe-criu"
            && s.comm == "criu"
            && s.argv.first().map(String::as_str) == Some("criu")),
        "no criu process named criu seen: {seen:?}"
    );
    for s in &seen {
        assert!(
            !s.comm.bytes().all(|b| b.is_ascii_digit()),
            "a process of a sealed copy is named by a number: {s:?}"
        );
        assert!(
            !s.argv.first().is_some_and(|a| a.starts_with("/proc/")),
            "argv[0] is a descriptor path: {s:?}"
        );
    }
    let holders = holder_pids(&sd);
    ok(Verb::Cleanup, slot, &sd);
    assert_released(&sd, &holders);
    // Nothing of the verbs' private folders is left.
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("netprobe-criu-path-{}-", std::process::id())))
        .collect();
    assert!(left.is_empty(), "private PATH folders left: {left:?}");
}

#[test]
fn sealed_runtime_and_criu_show_by_name_runc() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let rt = "/opt/runc-1.4.3/sbin/runc";
    for b in [rt, CRIU_4_3] {
        assert!(
            Path::new(b).is_file(),
            "{b} missing: run sudo bash host/setup.sh"
        );
    }
    let _s = serial();
    names_during_verbs("91", rt, "runc");
}

#[test]
fn sealed_runtime_and_criu_show_by_name_crun() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let rt = "/opt/crun-1.28/bin/crun";
    for b in [rt, CRIU_4_3] {
        assert!(
            Path::new(b).is_file(),
            "{b} missing: run sudo bash host/setup.sh"
        );
    }
    let _s = serial();
    names_during_verbs("92", rt, "crun");
}
