//! CRIU's reason reaches the user (issue 11, point 2): real runc + CRIU failures whose error
//! quotes the deciding lines of dump.log / restore.log with their line numbers.
//!
//! (a) An established TCP connection inside the container, checkpointed without
//!     `--tcp-established`: "Connected TCP socket, consider using --tcp-established option".
//! (b) A container checkpointed in an external netns (a holder's) and restored from a bundle
//!     that no longer names it (no `--inherit-fd` for CRIU's external key): "Unable to find an
//!     external netns".

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use netprobe::oci::{
    BundleSpec, ContainerGuard, NetnsSpec, OciError, Runtime, build_busybox_rootfs, read_pid_file,
    unique_container_id, write_bundle,
};

static SERIAL: Mutex<()> = Mutex::new(());

struct Fx {
    tmp: tempfile::TempDir,
    runtime: Runtime,
}

impl Fx {
    fn new() -> Fx {
        crate::common::require_root();
        nix::sys::prctl::set_child_subreaper(true).unwrap();
        let tmp = tempfile::Builder::new()
            .prefix("netprobe-reason-")
            .tempdir()
            .unwrap();
        build_busybox_rootfs(&tmp.path().join("rootfs")).unwrap();
        let runc = netprobe::host::find_in_path(Path::new("runc")).expect("runc in PATH");
        let runtime = Runtime::new(
            runc,
            tmp.path().join("runc-root"),
            Some(netprobe::host::PRIVATE_CRIU.into()),
        );
        Fx { tmp, runtime }
    }
    fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }
    fn bundle(&self, args: &[&str], netns: NetnsSpec) -> PathBuf {
        let b = self.p("bundle");
        write_bundle(
            &b,
            &BundleSpec {
                rootfs: self.p("rootfs"),
                readonly_root: true,
                args: args.iter().map(|s| s.to_string()).collect(),
                netns,
                resources: None,
                hostname: "np-reason".into(),
                cgroups_path: None,
            },
        )
        .unwrap();
        b
    }
}

/// The quoted reason of a failed checkpoint/restore: `criu_reason` set, naming the log, holding
/// `needle` on a numbered line; the Display carries it too.
fn assert_reason(e: &OciError, log: &str, needle: &str) {
    let OciError::Failed { criu_reason, .. } = e else {
        panic!("expected a runtime failure, got {e}")
    };
    let r = criu_reason
        .as_deref()
        .unwrap_or_else(|| panic!("no CRIU reason in {e}"));
    assert!(r.contains(log), "{r}");
    let line = r
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not quoted: {r}"));
    let num = line.trim().split(':').next().unwrap();
    assert!(num.parse::<usize>().is_ok(), "no line number: {line}");
    assert!(e.to_string().contains(needle), "{e}");
}

#[test]
fn established_tcp_without_the_option_is_quoted() {
    let _baton = crate::common::baton(module_path!());
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let fx = Fx::new();
    // Both ends read a pipe that never ends (busybox nc closes on end of stdin).
    let script =
        "sleep 1000 | nc -l -p 7000 >/dev/null & sleep 0.5; sleep 1000 | nc 127.0.0.1 7000";
    // In a holder's netns with lo up (runc 1.1.5 leaves lo down in a private one).
    let holder = Holder::spawn();
    let bundle = fx.bundle(&["sh", "-c", script], NetnsSpec::Path(holder.nspath()));
    let id = unique_container_id("np-reason-tcp");
    let mut guard = ContainerGuard::new(&fx.runtime, &id);
    fx.runtime.create(&id, &bundle, &fx.p("c.pid")).unwrap();
    guard.set_pid(read_pid_file(&fx.p("c.pid")).unwrap());
    fx.runtime.start(&id).unwrap();
    // Wait for an ESTABLISHED (state 01) socket in the container's netns.
    let pid = read_pid_file(&fx.p("c.pid")).unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let established = || {
        ["tcp", "tcp6"].iter().any(|f| {
            std::fs::read_to_string(format!("/proc/{pid}/net/{f}"))
                .unwrap_or_default()
                .lines()
                .skip(1)
                .any(|l| l.split_whitespace().nth(3) == Some("01"))
        })
    };
    while !established() {
        assert!(
            Instant::now() < until,
            "no established connection: {} {} children {:?}",
            std::fs::read_to_string(format!("/proc/{pid}/net/tcp6")).unwrap_or_default(),
            std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default(),
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let e = fx
        .runtime
        .checkpoint(
            &id,
            &fx.p("images"),
            &fx.p("work"),
            &["--leave-running".into()],
        )
        .unwrap_err();
    assert_reason(
        &e,
        "dump.log",
        "Connected TCP socket, consider using --tcp-established option",
    );
    guard.release().unwrap();
    drop(holder);
}

/// A holder owning a fresh netns with lo up (`unshare --net sh -c 'ip link set lo up; exec
/// sleep'`); killed and reaped on drop.
struct Holder(Child);
impl Holder {
    fn spawn() -> Holder {
        let h = Holder(
            Command::new("unshare")
                .args([
                    "--net",
                    "--",
                    "sh",
                    "-c",
                    "ip link set lo up; exec sleep 1000",
                ])
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let pid = h.0.id();
        let until = Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap_or_default()
            .trim()
            != "sleep"
        {
            assert!(Instant::now() < until, "holder never ready");
            std::thread::sleep(Duration::from_millis(20));
        }
        h
    }
    fn nspath(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/ns/net", self.0.id()))
    }
}
impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn missing_external_netns_at_restore_is_quoted() {
    let _baton = crate::common::baton(module_path!());
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let fx = Fx::new();
    let holder = Holder::spawn();
    let bundle = fx.bundle(&["sleep", "1000"], NetnsSpec::Path(holder.nspath()));
    let id = unique_container_id("np-reason-extns");
    let mut guard = ContainerGuard::new(&fx.runtime, &id);
    fx.runtime.create(&id, &bundle, &fx.p("c.pid")).unwrap();
    fx.runtime.start(&id).unwrap();
    fx.runtime
        .checkpoint(&id, &fx.p("images"), &fx.p("work"), &[])
        .unwrap();
    drop(holder);
    // The bundle no longer names the (gone) netns: runc passes CRIU no external netns.
    let bundle = fx.bundle(&["sleep", "1000"], NetnsSpec::Private);
    let e = fx
        .runtime
        .restore(
            &id,
            &bundle,
            &fx.p("images"),
            &fx.p("work-restore"),
            &fx.p("r.pid"),
            &[],
        )
        .unwrap_err();
    assert_reason(&e, "restore.log", "Unable to find an external netns");
    let _ = guard.release();
}

/// Through `netprobe run`: a runtime checkpoint that fails the way runc does (stderr "criu
/// failed: type NOTIFY errno 0", CRIU's reason only in dump.log) records the quoted, numbered
/// reason in the rung's `error`; the rung stays `error` and the exit class 4.
#[test]
fn the_rung_error_quotes_the_reason() {
    let _baton = crate::common::baton(module_path!());
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    crate::common::require_root();
    let tmp = tempfile::tempdir().unwrap();
    let runc = netprobe::host::find_in_path(Path::new("runc")).expect("runc in PATH");
    let w = tmp.path().join("runc");
    netprobe::evidence::fsio::write_executable(&w,
        format!(
            "#!/bin/sh\n\
             case \" $* \" in *\" checkpoint \"*)\n\
               while [ $# -gt 0 ]; do [ \"$1\" = --work-path ] && wp=$2; shift; done\n\
               printf '(00.1) a\\n(00.2) b\\n(00.3) c\\n(00.4) d\\n(00.5) Error (criu/sk-inet.c:188): inet: Connected TCP socket, consider using --tcp-established option.\\n(00.6) Error (criu/cr-dump.c:2100): Dumping FAILED.\\n' > \"$wp/dump.log\"\n\
               echo 'criu failed: type NOTIFY errno 0' >&2; exit 1;;\n\
             esac\n\
             exec {} \"$@\"\n",
            runc.display()
        ), 0o755).unwrap();
    let ev = tmp.path().join("ev");
    let o = Command::new(crate::common::EXE)
        .args(["run", "--quiet", "--phases", "oci", "--runtime"])
        .arg(&w)
        .arg("--evidence")
        .arg(&ev)
        .env_remove("CRIU_CONFIG_FILE")
        .output()
        .unwrap();
    let text = format!("{o:?}");
    assert_eq!(o.status.code(), Some(4), "{text}");
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ev.join("netprobe-result.json")).unwrap()).unwrap();
    let oci = r["rungs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "oci")
        .unwrap();
    assert_eq!(oci["status"], "error");
    let err = oci["error"].as_str().unwrap();
    assert!(err.contains("criu failed: type NOTIFY errno 0"), "{err}");
    assert!(err.contains("CRIU's reason ("), "{err}");
    assert!(
        err.contains("5: (00.5) Error (criu/sk-inet.c:188): inet: Connected TCP socket, consider using --tcp-established option."),
        "{err}"
    );
    assert!(err.contains("2: (00.2) b"), "{err}");
    assert!(!err.contains("1: (00.1) a"), "{err}");
}
