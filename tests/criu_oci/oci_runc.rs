//! Real runc 1.1.5 + real CRIU 4.1.1 (root): checkpoint/restore of a busybox `sleep` container
//! with a private netns (a) and with a holder-owned netns named by path (b), plus bad inputs (c).
//!
//! Every container is guarded (kill + delete --force on drop), every holder process is killed
//! and reaped on drop, every directory is a tempdir. Tests in this file run one at a time (a
//! mutex): CRIU and runc are heavy on this 2-core machine.

use crate::common::oci_runc as oci_support;
use oci_support::*;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use netprobe::oci::{
    BundleSpec, ContainerGuard, NetnsSpec, OciError, Resources, Runtime, read_pid_file,
    refuse_existing, unique_container_id, write_bundle,
};

/// (a) private netns: runc passes empty_ns=CLONE_NEWNET, so no netns image, restore logs
/// "No netns-…img image" and lo comes back DOWN without an address.
#[test]
fn private_netns_is_lost_across_runc_checkpoint_restore() {
    let _baton = crate::common::baton(module_path!());
    if !can_run() {
        return;
    }
    let _s = serial();
    let fx = Fixture::new();
    let id = unique_container_id("np-oci-a");
    refuse_existing(&fx.runtime, &id).unwrap();
    let mut guard = ContainerGuard::new(&fx.runtime, &id);
    let bundle = fx.bundle(NetnsSpec::Private);

    let pid = create_and_start(&fx, &id, &bundle);
    let lo_before = lo_of(pid);
    eprintln!("[a] lo before: {lo_before}");

    let (rpid, dump_log, restore_log, inv) = checkpoint_restore(&fx, &id, &bundle);
    report("a", &dump_log, &restore_log, &inv);
    let lo_after = lo_of(rpid);
    eprintln!("[a] lo after restore: {lo_after}");

    assert!(
        !inv.iter().any(|(n, _)| n.starts_with("netns-")),
        "runc dumped a netns image: {inv:?}"
    );
    assert!(restore_log.contains("No netns-"));
    let lines = no_netns_image_lines(&restore_log);
    assert_eq!(
        lines.len(),
        1,
        "restore.log lacks 'No netns-<id>.img image'"
    );
    assert!(!grep(&dump_log, "Dump NET namespace info").is_empty());
    assert!(!lo_is_up(&lo_after), "lo came back UP: {lo_after}");
    assert!(!lo_has_127(&lo_after));

    fx.runtime.kill(&id, "KILL").unwrap();
    guard.release().unwrap();
    fx.runtime.prove_gone(&id).unwrap();
    fx.assert_nothing_listed();
}

/// (b) netns named by path, owned by a holder: runc passes it as external (extRootNetNS), CRIU
/// writes a key-only netns image, and lo is UP with 127.0.0.1/8 after restore.
#[test]
fn path_netns_survives_runc_checkpoint_restore() {
    let _baton = crate::common::baton(module_path!());
    if !can_run() {
        return;
    }
    let _s = serial();
    let fx = Fixture::new();
    let holder = Holder::spawn();
    let id = unique_container_id("np-oci-b");
    refuse_existing(&fx.runtime, &id).unwrap();
    let mut guard = ContainerGuard::new(&fx.runtime, &id);
    let bundle = fx.bundle(NetnsSpec::Path(holder.netns_path()));

    let pid = create_and_start(&fx, &id, &bundle);
    assert_eq!(netns_inode(pid), netns_inode(holder.pid()));
    let lo_before = lo_of(pid);
    assert!(
        lo_is_up(&lo_before) && lo_has_127(&lo_before),
        "{lo_before}"
    );

    let (rpid, dump_log, restore_log, inv) = checkpoint_restore(&fx, &id, &bundle);
    report("b", &dump_log, &restore_log, &inv);
    let lo_after = lo_of(rpid);
    eprintln!("[b] lo after restore: {lo_after}");

    let netns_imgs: Vec<_> = inv
        .iter()
        .filter(|(n, _)| n.starts_with("netns-"))
        .collect();
    assert_eq!(netns_imgs.len(), 1, "{inv:?}");
    assert!(
        netns_imgs[0].1 < 64,
        "netns image should hold only the key: {netns_imgs:?}"
    );
    // CRIU logs the external netns by inode in dump.log ("The net[<ino>] netns is external");
    // the key itself is in the image (the only payload of the 26-byte netns image).
    let ino = netns_inode(holder.pid());
    let ino = ino.trim_start_matches("net:[").trim_end_matches(']');
    assert!(
        dump_log.contains(&format!("The net[{ino}] netns is external")),
        "dump.log lacks 'The net[{ino}] netns is external'"
    );
    let img = std::fs::read(fx.p("images").join(&netns_imgs[0].0)).unwrap();
    assert!(
        img.windows(12).any(|w| w == b"extRootNetNS"),
        "netns image lacks the extRootNetNS key: {img:?}"
    );
    eprintln!("[b] {} bytes: {:02x?}", netns_imgs[0].0, img);
    assert!(
        restore_log.contains("extRootNetNS"),
        "restore.log lacks extRootNetNS"
    );
    // "No netns-ct-<id>.img" / "No netns-exp-<id>.img" (conntrack) appear in both modes; only
    // "No netns-<id>.img image" means the namespace itself was not in the image.
    assert!(
        no_netns_image_lines(&restore_log).is_empty(),
        "{:?}",
        no_netns_image_lines(&restore_log)
    );
    assert_eq!(netns_inode(rpid), netns_inode(holder.pid()));
    assert!(lo_is_up(&lo_after), "{lo_after}");
    assert!(lo_has_127(&lo_after), "{lo_after}");

    guard.release().unwrap();
    fx.assert_nothing_listed();
    drop(holder);
}

/// (c) bad inputs against the real runtime: missing binary, existing container refused.
#[test]
fn missing_runtime_and_existing_container_are_refused() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let missing = Runtime::new("/nonexistent/runc", tmp.path().join("root"), None);
    let e = missing.version().unwrap_err();
    assert!(matches!(e, OciError::Spawn { .. }), "{e}");
    assert!(e.to_string().contains("/nonexistent/runc"), "{e}");
    assert!(e.to_string().contains("install runc"), "{e}");
    let e = missing.state("x").unwrap_err();
    assert!(matches!(e, OciError::Spawn { .. }), "{e}");

    let e = missing.state("bad id/with slash").unwrap_err();
    assert!(matches!(e, OciError::InvalidId { .. }), "{e}");

    if !can_run() {
        return;
    }
    let _s = serial();
    let fx = Fixture::new();
    let v = fx.runtime.version().unwrap();
    assert!(v.stdout.contains("runc version"), "{}", v.stdout);

    // Unknown container: state None, prove_gone Ok, refuse_existing Ok.
    let id = unique_container_id("np-oci-c");
    assert!(fx.runtime.state(&id).unwrap().is_none());
    fx.runtime.prove_gone(&id).unwrap();
    refuse_existing(&fx.runtime, &id).unwrap();

    // A created container: refused by name, prove_gone fails naming its status.
    let guard = ContainerGuard::new(&fx.runtime, &id);
    let bundle = fx.bundle(NetnsSpec::Private);
    fx.runtime
        .create(&id, &bundle, &fx.p("c.pid"))
        .unwrap_or_else(|e| panic!("create: {e}"));
    let e = refuse_existing(&fx.runtime, &id).unwrap_err();
    let root = fx.runtime.root.display();
    assert_eq!(
        e.to_string(),
        format!(
            "a container named {id} already exists under runc root {root}; netprobe never deletes what it did not create: if it is yours, run runc --root {root} delete -f {id}"
        )
    );
    let e = fx.runtime.prove_gone(&id).unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("container {id} still exists (status created)")),
        "{e}"
    );
    // A failing runtime call carries argv, code and stderr.
    let e = fx.runtime.start("np-oci-no-such-container").unwrap_err();
    match &e {
        OciError::Failed {
            argv,
            code,
            signal,
            stderr_tail,
            log,
            criu_reason,
        } => {
            assert_eq!(*signal, None);
            assert!(criu_reason.is_none());
            assert!(argv.iter().any(|a| a == "start"));
            assert_eq!(*code, Some(1));
            assert!(stderr_tail.contains("does not exist"), "{stderr_tail}");
            assert!(log.is_none());
        }
        other => panic!("unexpected {other}"),
    }
    // Checkpoint of an unknown container names dump.log in the work path.
    let e = fx
        .runtime
        .checkpoint("np-oci-no-such-container", &fx.p("img"), &fx.p("wk"), &[])
        .unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("{}", fx.p("wk/dump.log").display())),
        "{e}"
    );

    // Dropping the guard removes the created container.
    drop(guard);
    fx.runtime.prove_gone(&id).unwrap();
    fx.assert_nothing_listed();
}

/// strace wraps checkpoint and restore (`-f -b execve`: runc and its forks traced up to the
/// exec of criu, which runs untraced), and both succeed with the default CRIU.
#[test]
fn strace_wraps_checkpoint_and_restore() {
    let _baton = crate::common::baton(module_path!());
    assert!(can_run());
    assert!(
        Path::new("/usr/bin/strace").exists(),
        "strace missing: run `bash host/setup.sh`"
    );
    let _s = serial();
    let mut fx = Fixture::new();
    fx.runtime = fx.runtime.clone().with_strace("/usr/bin/strace");
    let id = unique_container_id("np-oci-strace");
    refuse_existing(&fx.runtime, &id).unwrap();
    let mut guard = ContainerGuard::new(&fx.runtime, &id);
    let bundle = fx.bundle(NetnsSpec::Private);
    create_and_start(&fx, &id, &bundle);
    let out = fx
        .runtime
        .checkpoint(&id, &fx.p("images"), &fx.p("work"), &[])
        .unwrap_or_else(|e| panic!("checkpoint under strace: {e}"));
    assert_eq!(out.argv[0], "/usr/bin/strace");
    let trace = out.strace_path.clone().expect("strace path");
    assert_eq!(trace, fx.p("work/strace-checkpoint.txt"));
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.contains("execve(\"/usr/bin/runc\""), "no runc execve");
    assert!(
        text.contains("netprobe-criu-path-") && text.contains("/criu\""),
        "the exec of the criu of the runtime's private PATH folder is in the trace"
    );
    assert!(
        out.argv.iter().any(|a| a == "execve"),
        "-b execve: {:?}",
        out.argv
    );
    fx.runtime.prove_gone(&id).unwrap();
    let out = fx
        .runtime
        .restore(
            &id,
            &bundle,
            &fx.p("images"),
            &fx.p("work"),
            &fx.p("r.pid"),
            &[],
        )
        .unwrap_or_else(|e| panic!("restore: {e}"));
    assert_eq!(out.argv[0], "/usr/bin/strace");
    assert_eq!(
        out.strace_path.as_deref(),
        Some(fx.p("work/strace-restore.txt").as_path())
    );
    let text = std::fs::read_to_string(fx.p("work/strace-restore.txt")).unwrap();
    assert!(text.contains("restore"), "runc restore in the trace");
    assert_eq!(fx.runtime.state(&id).unwrap().unwrap().status, "running");
    guard.release().unwrap();
    fx.assert_nothing_listed();
}

/// Resources reach the cgroup (v1, cgroupfs) at create and are still there after restore.
#[test]
fn resources_are_applied_and_survive_restore() {
    let _baton = crate::common::baton(module_path!());
    if !can_run() {
        return;
    }
    let _s = serial();
    let fx = Fixture::new();
    let id = unique_container_id("np-oci-res");
    refuse_existing(&fx.runtime, &id).unwrap();
    let mut guard = ContainerGuard::new(&fx.runtime, &id);
    let bundle = fx.p("bundle");
    write_bundle(
        &bundle,
        &BundleSpec {
            rootfs: fx.p("rootfs"),
            readonly_root: true,
            args: vec!["sleep".into(), "1000".into()],
            netns: NetnsSpec::Private,
            resources: Some(Resources {
                cpu_quota: 400_000,
                cpu_period: 100_000,
                memory_limit: 4 << 30,
                memory_swap: 4 << 30,
            }),
            hostname: "np-oci".into(),
            cgroups_path: Some(format!("/{id}")),
        },
    )
    .unwrap();
    let read = |ctl: &str, file: &str| {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{ctl}/{id}/{file}"))
            .unwrap_or_else(|e| panic!("{ctl}/{id}/{file}: {e}"))
            .trim()
            .to_string()
    };
    let check = |when: &str| {
        assert_eq!(read("cpu", "cpu.cfs_quota_us"), "400000", "{when}");
        assert_eq!(read("cpu", "cpu.cfs_period_us"), "100000", "{when}");
        assert_eq!(
            read("memory", "memory.limit_in_bytes"),
            "4294967296",
            "{when}"
        );
        assert_eq!(
            read("memory", "memory.memsw.limit_in_bytes"),
            "4294967296",
            "{when}"
        );
    };
    create_and_start(&fx, &id, &bundle);
    check("after start");
    checkpoint_restore(&fx, &id, &bundle);
    check("after restore");
    guard.release().unwrap();
    assert!(
        !Path::new(&format!("/sys/fs/cgroup/cpu/{id}")).exists(),
        "cgroup left behind"
    );
    fx.assert_nothing_listed();
}

/// The guard cleans up even when the test body panics.
#[test]
fn guard_cleans_up_on_panic() {
    let _baton = crate::common::baton(module_path!());
    if !can_run() {
        return;
    }
    let _s = serial();
    let fx = Fixture::new();
    let id = unique_container_id("np-oci-panic");
    let bundle = fx.bundle(NetnsSpec::Private);
    let rt = fx.runtime.clone();
    let id2 = id.clone();
    let pid_file = fx.p("p.pid");
    let r = std::panic::catch_unwind(move || {
        let _guard = ContainerGuard::new(&rt, &id2);
        rt.create(&id2, &bundle, &pid_file).unwrap();
        rt.start(&id2).unwrap();
        panic!("boom");
    });
    assert!(r.is_err());
    fx.runtime.prove_gone(&id).unwrap();
    fx.assert_nothing_listed();
}

/// The in-process `runc state` (`oci::runc_state`, used by the slot's ready gates) gives the
/// answer `runc state` gives — status, pid, bundle — for created, running, paused and stopped
/// containers, with runc 1.1.5 (Debian) and each pinned runc installed under /opt.
#[test]
fn in_process_state_agrees_with_runc_state() {
    let _baton = crate::common::baton(module_path!());
    use netprobe::oci::RuntimeOps;
    if !can_run() {
        return;
    }
    let _s = serial();
    let mut runcs = vec![PathBuf::from(RUNC)];
    for v in ["1.4.3", "1.3.6"] {
        let p = PathBuf::from(format!("/opt/runc-{v}/sbin/runc"));
        assert!(
            p.exists(),
            "missing {}: run `bash host/setup.sh --test-deps`",
            p.display()
        );
        runcs.push(p);
    }
    for runc in runcs {
        let mut fx = Fixture::new();
        fx.runtime = Runtime::new(&runc, fx.p("runc-root"), Some(CRIU.into()));
        let id = unique_container_id("np-oci-st");
        let _guard = ContainerGuard::new(&fx.runtime, &id);
        let bundle = fx.bundle(NetnsSpec::Private);
        let agree = |want: &str| {
            let cli = fx.runtime.state(&id).unwrap().expect("container");
            let (quick, how) = fx.runtime.state_quick(&id);
            let quick = quick.unwrap().expect("container");
            assert_eq!(quick, cli, "{}: {want}: {how}", runc.display());
            assert_eq!(cli.status, want, "{}", runc.display());
            assert!(how.starts_with("read "), "{}: {how}", runc.display());
        };
        fx.runtime
            .create(&id, &bundle, &fx.p("c.pid"))
            .unwrap_or_else(|e| panic!("create: {e}"));
        agree("created");
        fx.runtime.start(&id).unwrap();
        agree("running");
        let pause = |verb: &str| {
            let o = Command::new(&runc)
                .arg("--root")
                .arg(&fx.runtime.root)
                .args([verb, id.as_str()])
                .output()
                .unwrap();
            assert!(o.status.success(), "{verb}: {o:?}");
        };
        pause("pause");
        agree("paused");
        pause("resume");
        agree("running");
        let pid = read_pid_file(&fx.p("c.pid")).unwrap();
        // Killed but not reaped (a zombie of ours, the subreaper), then reaped: stopped, pid 0.
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while fx.runtime.state(&id).unwrap().unwrap().status != "stopped" {
            assert!(Instant::now() < deadline, "init {pid} still not stopped");
            std::thread::sleep(Duration::from_millis(20));
        }
        agree("stopped");
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        agree("stopped");
        fx.runtime.delete(&id, true).unwrap();
        let (gone, how) = fx.runtime.state_quick(&id);
        assert!(gone.unwrap().is_none(), "{how}");
        assert!(how.contains("not decided in-process"), "{how}");
    }
}
