//! `host/vm/run.sh` when its qemu is killed mid-boot: a real qemu (`-machine none`, started by
//! run.sh through a `qemu-system-x86_64` first in its PATH that keeps run.sh's own arguments out
//! of it: no guest image is needed to be killed) ended by SIGKILL or SIGTERM from outside is
//! reported as killed by that signal, with the sender when qemu names it — never as a guest
//! that powered off. Nothing is left.
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs run.sh with the stand-in qemu, sends `sig` to qemu once it runs; exit code and stderr.
fn killed_with(sig: nix::sys::signal::Signal) -> (Option<i32>, String, i32) {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    let img = tmp.path().join("image");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&img).unwrap();
    std::fs::write(img.join("done"), "").unwrap();
    std::fs::write(img.join("root.img"), "").unwrap();
    let pidfile = tmp.path().join("qemu.pid");
    let q = bin.join("qemu-system-x86_64");
    std::fs::write(
        &q,
        format!(
            "#!/bin/sh\necho $$ > {}\nexec /usr/bin/qemu-system-x86_64 -machine none -display none -nodefaults -monitor none -serial none\n",
            pidfile.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&q, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let child = Command::new("bash")
        .arg(repo().join("host/vm/run.sh"))
        .args([
            "--image",
            img.to_str().unwrap(),
            "--timeout",
            "60",
            "--accel",
            "tcg",
        ])
        .arg("--out")
        .arg(tmp.path().join("out"))
        .args(["--", "true"])
        .env("PATH", path)
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let pid = loop {
        if let Some(p) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
            && std::fs::read_link(format!("/proc/{p}/exe"))
                .is_ok_and(|e| e.to_string_lossy().contains("qemu-system"))
        {
            break p;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "qemu did not start");
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(300));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "qemu pid {pid} left"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("netprobe-vm."))
        .collect();
    assert!(left.is_empty(), "run.sh's work folder left: {left:?}");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        std::process::id() as i32,
    )
}

#[test]
fn qemu_killed_by_sigkill_is_reported_as_killed() {
    let _baton = crate::common::baton(module_path!());
    let (code, err, _) = killed_with(nix::sys::signal::Signal::SIGKILL);
    assert_eq!(code, Some(4), "{err}");
    assert!(
        err.contains("qemu was killed by signal 9 (SIGKILL) by a process run.sh does not know (qemu cannot say who sends SIGKILL) after "),
        "{err}"
    );
    assert!(err.contains("(qemu exit 137; console tail above)"), "{err}");
    assert!(!err.contains("powered off without"), "{err}");
}

#[test]
fn qemu_killed_by_sigterm_names_the_sender() {
    let _baton = crate::common::baton(module_path!());
    let (code, err, me) = killed_with(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(code, Some(4), "{err}");
    assert!(
        err.contains(&format!(
            "qemu was killed by signal 15 (SIGTERM) by pid {me}"
        )),
        "{err}"
    );
}
