//! `archive`: `netprobe images` of a checkpoint archive (tar.zst, read as a stream) vs
//! `tar --zstd -xf` of the same archive into a tmpfs (`/dev/shm`): the floor of merely reading
//! it. Target: ratio ≤ 1.2. Peak memory (ru_maxrss = VmHWM at exit) of `netprobe images` is
//! printed for the archive and for one twice its size: it must not grow with the archive.
//!
//! The archive is a real checkpoint made here: CRIU (`criu_path()`) dumps, `--leave-running`,
//! a `python3` in its own network namespace holding ~50 MiB (14 MiB random, 36 MiB of a 1 MiB
//! random block repeated), so `checkpoint/` holds ~55 MiB of images (network images
//! included); `tar --zstd -cf` packs it (zstd's default level, as podman writes it).

use crate::Config;
use crate::stats::{Comparison, alternate, note, verdict};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SECTION: &str = "archive";

/// Kills and reaps the dumped child on drop.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sh(cmd: &mut Command) -> Result<(), String> {
    let o = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "{cmd:?}: {}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(())
}

/// Dumps a python3 holding `mib_random` + `mib_repeated` MiB into `dir/checkpoint`.
fn make_checkpoint(dir: &Path, mib_random: u32, mib_repeated: u32) -> Result<(), String> {
    let criu = crate::criu_path().ok_or("no CRIU: install /opt/criu-4.2.1 (host/setup.sh)")?;
    let script = format!(
        "import os,sys,time\nr=os.urandom({mib_random}<<20)\nt=bytearray(os.urandom(1<<20))*{mib_repeated}\nprint('ready',flush=True)\ntime.sleep(1000)\n"
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["--net", "--", "python3", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: setsid(2) is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
    let mut child = Guard(cmd.spawn().map_err(|e| format!("python3: {e}"))?);
    let mut line = String::new();
    let out = child.0.stdout.take().ok_or("no stdout")?;
    std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line)
        .map_err(|e| e.to_string())?;
    if line.trim() != "ready" {
        return Err(format!("python3 child did not start: {line:?}"));
    }
    let images = dir.join("checkpoint");
    std::fs::create_dir_all(&images).map_err(|e| e.to_string())?;
    sh(Command::new(&criu)
        .args([
            "dump",
            "--leave-running",
            "-t",
            &child.0.id().to_string(),
            "-D",
        ])
        .arg(&images)
        .args(["-o", "dump.log", "-v2"]))?;
    let _ = std::fs::remove_file(images.join("dump.log"));
    Ok(())
}

fn run_measured(cmd: &mut Command) -> Result<(Duration, i64), String> {
    let t = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    let pid = child.id() as i32;
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, writing only into `status` and `ru`, which we own.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let d = t.elapsed();
    if r != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("{cmd:?}: exit status {status}"));
    }
    Ok((d, ru.ru_maxrss))
}

fn du(path: &Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(path) {
        for e in rd.flatten() {
            n += e.metadata().map(|m| m.len()).unwrap_or(0);
        }
    }
    n
}

pub fn run(cfg: &Config) -> Result<(), String> {
    let (random, repeated) = if cfg.quick { (4, 8) } else { (14, 36) };
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    make_checkpoint(dir.path(), random, repeated)?;
    let ck = dir.path().join("checkpoint");
    let archive = dir.path().join("ck.tar.zst");
    sh(Command::new("tar")
        .arg("--zstd")
        .arg("-cf")
        .arg(&archive)
        .arg("-C")
        .arg(dir.path())
        .arg("checkpoint"))?;
    // Twice the images: a copy of the pages image beside them (read through, not decoded).
    let pages = std::fs::read_dir(&ck)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("pages-"))
        })
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .ok_or("the dump holds no pages- image")?;
    let big = dir.path().join("ck2.tar.zst");
    let extra = dir.path().join("extra");
    std::fs::create_dir_all(extra.join("checkpoint")).map_err(|e| e.to_string())?;
    std::fs::copy(&pages, extra.join("checkpoint/pages-copy.img")).map_err(|e| e.to_string())?;
    sh(Command::new("tar")
        .arg("--zstd")
        .arg("-cf")
        .arg(&big)
        .arg("-C")
        .arg(dir.path())
        .arg("checkpoint")
        .arg("-C")
        .arg(&extra)
        .arg("checkpoint/pages-copy.img"))?;
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    note(
        SECTION,
        format!(
            "a CRIU dump of python3 in its own netns: checkpoint/ {:.1} MiB, ck.tar.zst {:.1} MiB; twice the images: ck2.tar.zst {:.1} MiB",
            du(&ck) as f64 / 1048576.0,
            size(&archive) as f64 / 1048576.0,
            size(&big) as f64 / 1048576.0
        ),
    );
    let exe = crate::netprobe_exe();
    let shm = Path::new("/dev/shm").join(format!("netprobe-bench-archive-{}", std::process::id()));
    let mut rss = 0;
    let err = std::cell::RefCell::new(None::<String>);
    let (rn, rt) = alternate(
        1,
        cfg.runs,
        || match run_measured(Command::new(&exe).arg("images").arg(&archive)) {
            Ok((d, r)) => {
                rss = rss.max(r);
                d
            }
            Err(e) => {
                *err.borrow_mut() = Some(e);
                Duration::ZERO
            }
        },
        || {
            let _ = std::fs::create_dir_all(&shm);
            let r = run_measured(
                Command::new("tar")
                    .arg("--zstd")
                    .arg("-xf")
                    .arg(&archive)
                    .arg("-C")
                    .arg(&shm),
            );
            let _ = std::fs::remove_dir_all(&shm);
            match r {
                Ok((d, _)) => d,
                Err(e) => {
                    *err.borrow_mut() = Some(e);
                    Duration::ZERO
                }
            }
        },
    );
    if let Some(e) = err.into_inner() {
        return Err(e);
    }
    let c = Comparison {
        section: SECTION,
        what: format!(
            "netprobe images ck.tar.zst ({:.1} MiB of images, streamed) vs the floor of reading it",
            du(&ck) as f64 / 1048576.0
        ),
        netprobe: &rn,
        peer_name: "tar --zstd -xf into /dev/shm",
        peer: &rt,
        notes: String::new(),
    };
    c.print();
    let (_, rss2) = run_measured(Command::new(&exe).arg("images").arg(&big))?;
    note(
        SECTION,
        format!(
            "peak memory (VmHWM, ru_maxrss) of netprobe images: {rss} KiB for ck.tar.zst, {rss2} KiB for ck2.tar.zst (twice the images) | target ratio <= 1.2: {} | memory independent of size (within 10%): {}",
            verdict(c.ratio() <= 1.2),
            verdict((rss2 as f64) <= rss as f64 * 1.1)
        ),
    );
    Ok(())
}
