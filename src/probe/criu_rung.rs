//! The `criu` rung: does CRIU itself dump and restore a network namespace faithfully?
//!
//! A holder child (own netns, `lo` up, session leader, stdio on /dev/null) is dumped with
//! `criu dump -t PID --leave-running -v4`, killed, restored with `criu restore -d -v4`, and its
//! network state (links, addresses, routes; no counters) captured in-process before and after.
//! Files: `images/` (the CRIU image), `images.json` (inventory with sha256), `dump.log`,
//! `restore.log`, `netstate-before.json`, `netstate-after.json`, `ip-before.txt`,
//! `ip-after.txt`, and with `--strace` `strace-dump.txt` / `strace-restore.txt`.

use crate::criu::{self, Criu, DumpOpts, RestoreOpts};
use crate::evidence::result::RungName;
use crate::netlink::NetState;
use crate::ns::{ProcessGuard, ProcessIdentity};
use crate::probe::capture::capture_and_write;
use crate::probe::netns_content;
use crate::probe::rung::{RungCtx, RungError, RungOutput, at};
use crate::probe::util;
use std::path::Path;

/// Runs the rung. Errors (phase): `holder`, `state capture`, `criu dump`, `criu restore`
/// (naming the log to read), `criu identity` (the `Version:` line of dump.log or restore.log is
/// not what `criu --version` reported), `evidence`.
pub fn run(ctx: &RungCtx) -> Result<RungOutput, RungError> {
    let ev = ctx.evidence;
    let name = RungName::Criu.as_str();
    let dir = ev.rung_dir(RungName::Criu).map_err(at("evidence"))?;
    let rel = |f: &str| format!("{name}/{f}");
    let images = dir.join("images");
    std::fs::create_dir_all(&images).map_err(at("evidence"))?;
    let mut out = RungOutput::default();
    let criu = Criu {
        path: ctx.criu.clone(),
    };

    let holder = ctx.holder(RungName::Criu).map_err(at("holder"))?;
    let id = *holder.identity();
    out.fact("dumped_pid", id.pid);
    out.fact("netns_inode_before", id.netns_inode);
    if let Err(e) = netns_content::apply(&holder.netns_path(), ctx.netns) {
        return Err(RungError::new("netns content", e).with(out));
    }
    out.fact("netns_content", ctx.netns.as_str());
    // The `ip` side view runs beside the capture (both only read the netns).
    let view_pid = id.pid;
    let (captured, view) = std::thread::scope(|s| {
        let view = s.spawn(move || util::ip_view(view_pid));
        let captured = capture_and_write(ev, name, &holder.netns_path(), "before");
        (captured, view.join())
    });
    let before = match captured {
        Ok((s, retries)) => {
            out.fact("settle_retries_before", retries);
            s
        }
        Err(e) => return Err(RungError::new("state capture", e).with(out)),
    };
    if let Ok(Ok(t)) = view {
        let _ = ev.write(&rel("ip-before.txt"), t.as_bytes());
    }

    crate::ns::cleanup::checkpoint();
    let dump = out.timed("dump", || {
        criu.dump(&DumpOpts {
            work_dir: Some(dir.clone()),
            leave_running: true,
            strace: ctx.strace.then(|| dir.join("strace-dump.txt")),
            ..DumpOpts::new(id.pid, images.clone())
        })
    });
    if let Err(e) = dump {
        // A CRIU that is not the one `--version` named is said first: its failure is that
        // other CRIU's.
        if let Err(id) = prove(ctx, &dir.join("dump.log"))
            && id.reason.contains("in its own log")
        {
            return Err(RungError::new(
                "criu identity",
                format!("{}; its dump failed: {e}", id.reason),
            )
            .with(out));
        }
        return Err(RungError::new(
            "criu dump",
            format!(
                "{e}{}",
                util::read_log_hint(&e.to_string(), &dir.join("dump.log"))
            ),
        )
        .with(out));
    }
    // The CRIU that ran is the one `--version` named: proven from its own log, not its word.
    match prove(ctx, &dir.join("dump.log")) {
        Ok(v) => out.fact("criu_version_dump_log", v),
        Err(e) => return Err(e.with(out)),
    }
    out.fact(
        "criu_network_lock_method",
        crate::images::inventory::lock_method_fact(&images),
    );
    holder.stop().map_err(at("holder stop"))?;

    // CRIU restores the holder under its dumped pid; a CRIU killed once it has made that task
    // (an interruption, the step's bound) leaves it running, not yet adopted.
    let restored_on_signal = crate::ns::cleanup::register_reporting(
        format!("restored holder pid {}", id.pid),
        move || Some(release_restored_holder(id.pid)),
    );
    let after = restore_and_capture(ctx, &criu, &dir, &images, &rel, &mut out);
    drop(restored_on_signal);
    if after.is_err() {
        release_restored_holder(id.pid);
    }
    let after = after?;

    let inv = criu::inventory(&images).map_err(at("image inventory"))?;
    out.fact("image_files", inv.len());
    ev.write_json(&rel("images.json"), &inv)
        .map_err(at("evidence"))?;
    crate::probe::attribution::record(&dir, &mut out);
    let equal = before.to_canonical_json() == after.to_canonical_json();
    out.fact("state_byte_equal", equal);
    out.summary = summary(inv.len(), after.lo_up_with_127(), equal);
    Ok(out)
}

/// The rung's deciding fact from the number of image files (`images.json`), whether `lo` is UP
/// with 127.0.0.1/8 after restore and whether the states are byte-equal (`netstate-*.json`).
/// Pure: `verify` rebuilds it from the files.
pub fn summary(image_files: usize, lo_up_after: bool, state_byte_equal: bool) -> String {
    format!(
        "CRIU dumped and restored the netns: {image_files} image files, lo UP with 127.0.0.1/8 after restore: {lo_up_after}, state byte-equal: {state_byte_equal}"
    )
}

/// [`crate::probe::runtime_cycle::prove_criu_version`] of `log`, CRIU run by netprobe.
fn prove(ctx: &RungCtx, log: &Path) -> Result<String, RungError> {
    use crate::probe::runtime_cycle::{CriuRunBy, prove_criu_version};
    prove_criu_version(log, &ctx.criu_version, &ctx.criu, CriuRunBy::Netprobe)
}

/// Kills (SIGKILL, through a pidfd: never a reused pid) the process CRIU restored at `pid` —
/// only if it is this run's holder (`netprobe __holder … --run-pid <this pid>` on its command
/// line) — with [`crate::ns::ProcessGuard::stop`]: waited for up to 2 s, reaped if it is our
/// child, proven gone from `/proc`. Returns what was done: `killed`, `none left` or why it was
/// left alone.
fn release_restored_holder(pid: i32) -> String {
    use crate::ns::{NsError, ProcessGuard, ProcessIdentity};
    // The identity (pid + start time) first: `adopt` proves the process it kills is the one
    // whose command line is read here.
    let id = match ProcessIdentity::read(pid) {
        Ok(id) => id,
        Err(NsError::Gone { .. }) => return "none left".into(),
        Err(e) => return format!("pid {pid}: {e}"),
    };
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if crate::probe::stale::holder_run_pid(&cmd) != Some(std::process::id() as i32) {
        return format!("pid {pid} is not this run's holder: left alone");
    }
    let stopped = ProcessGuard::adopt(id).and_then(|g| g.stop(std::time::Duration::from_secs(2)));
    match stopped {
        Ok(()) => format!("killed pid {pid}"),
        Err(NsError::Gone { .. }) => "none left".into(),
        Err(e) => format!("pid {pid}: {e}"),
    }
}

/// `criu restore -d` of the dumped images, the restored process adopted (killed on drop) and
/// its network state captured and written (`netstate-after.json`, `ip-after.txt`).
fn restore_and_capture(
    ctx: &RungCtx,
    criu: &Criu,
    dir: &Path,
    images: &Path,
    rel: &dyn Fn(&str) -> String,
    out: &mut RungOutput,
) -> Result<NetState, RungError> {
    let ev = ctx.evidence;
    crate::ns::cleanup::checkpoint();
    let pidfile = dir.join("restore.pid");
    let restore = out.timed("restore", || {
        criu.restore(&RestoreOpts {
            work_dir: Some(dir.to_path_buf()),
            strace: ctx.strace.then(|| dir.join("strace-restore.txt")),
            ..RestoreOpts::new(images.to_path_buf(), pidfile.clone())
        })
    });
    if let Err(e) = restore {
        return Err(RungError::new(
            "criu restore",
            format!(
                "{e}{}",
                util::read_log_hint(&e.to_string(), &dir.join("restore.log"))
            ),
        )
        .with(std::mem::take(out)));
    }
    match prove(ctx, &dir.join("restore.log")) {
        Ok(v) => out.fact("criu_version_restore_log", v),
        Err(e) => return Err(e.with(std::mem::take(out))),
    }
    let pid: i32 = match criu::read_pidfile(&pidfile) {
        Ok(p) => p,
        Err(e) => return Err(RungError::new("criu restore", e).with(std::mem::take(out))),
    };
    let restored = match ProcessIdentity::read(pid).and_then(ProcessGuard::adopt) {
        Ok(g) => g,
        Err(e) => return Err(RungError::new("criu restore", e).with(std::mem::take(out))),
    };
    out.fact("restored_pid", pid);
    out.fact("netns_inode_after", restored.identity().netns_inode);
    let name = RungName::Criu.as_str();
    let netns = format!("/proc/{pid}/ns/net");
    let (after, view) = std::thread::scope(|s| {
        let view = s.spawn(move || util::ip_view(pid));
        let after = capture_and_write(ev, name, Path::new(&netns), "after");
        (after, view.join())
    });
    if let Ok(Ok(t)) = view {
        let _ = ev.write(&rel("ip-after.txt"), t.as_bytes());
    }
    drop(restored);
    let (after, retries) = after.map_err(|e| RungError::new("state capture", e))?;
    out.fact("settle_retries_after", retries);

    Ok(after)
}

#[cfg(test)]
mod tests {
    use super::release_restored_holder;
    use std::process::{Command, Stdio};

    /// A process whose command line is `sh __holder --run-pid <run>` (what
    /// [`crate::probe::stale::holder_run_pid`] reads), blocked on its stdin.
    fn fake_holder(dir: &std::path::Path, run: u32) -> std::process::Child {
        std::fs::write(dir.join("__holder"), "read x\n").unwrap();
        let child = Command::new("sh")
            .current_dir(dir)
            .args(["__holder", "--run-pid", &run.to_string()])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        // Until its exec, the child shows this test's command line.
        let cmdline = format!("/proc/{}/cmdline", child.id());
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !std::fs::read(&cmdline).is_ok_and(|c| c.windows(8).any(|w| w == b"__holder")) {
            assert!(std::time::Instant::now() < until, "sh never ran");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        child
    }

    #[test]
    fn kills_only_this_runs_restored_holder_and_proves_it_gone() {
        let tmp = tempfile::tempdir().unwrap();
        let mut ours = fake_holder(tmp.path(), std::process::id());
        let pid = ours.id() as i32;
        assert_eq!(release_restored_holder(pid), format!("killed pid {pid}"));
        // Reaped by the release (our child): /proc no longer shows it.
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
        let _ = ours.wait();
        assert_eq!(release_restored_holder(pid), "none left");

        let mut other = fake_holder(tmp.path(), 1);
        let pid = other.id() as i32;
        assert_eq!(
            release_restored_holder(pid),
            format!("pid {pid} is not this run's holder: left alone")
        );
        assert_eq!(other.try_wait().unwrap(), None, "left running");
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
