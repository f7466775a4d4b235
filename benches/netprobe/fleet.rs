//! Section `fleet`: `netprobe fleet DIR` over 1,000 hosts against `netprobe verify` run host by
//! host in a shell loop (`for d in DIR/*/; do netprobe verify "$d"; done`), alternating. Target:
//! ≤ 0.2× the loop; peak memory (the fleet process's maximum RSS) independent of the number of
//! hosts (100 vs 1,000: ≤ 1.1×). Printed beside the time ratio: the floors of the proofs on this
//! machine's cores — `sha256sum` of every file of the fleet on all cores (the hashes `verify`
//! must redo), and the fleet's own verification work (its CPU time) divided by the cores.
//!
//! The fleet folder is built from one real `netprobe run` on this machine by
//! [`bench_only_generate`] — a generator written for this bench alone, never used by netprobe:
//! each copy is given its own host facts (`host.json`'s `kernel_version` names the copy) and
//! re-hashed (`host.json`'s sha256 and bytes in the result's artifact list), so every copy is a
//! distinct evidence folder that `netprobe verify` proves. Every other file is a hard link to the
//! original (one page-cache copy, the same for both sides).

use crate::Config;
use crate::stats::{Comparison, alternate, median, note, verdict};
use sha2::Digest;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// BENCH ONLY: makes `n` host folders `dir/host-NNNN` from the evidence folder `ev`, each with
/// its own host facts and re-hashed. Not netprobe code: nothing in netprobe writes evidence this
/// way.
fn bench_only_generate(ev: &Path, dir: &Path, n: usize) -> Result<(), String> {
    let host: serde_json::Value =
        serde_json::from_slice(&fs::read(ev.join("host.json")).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let result: serde_json::Value = serde_json::from_slice(
        &fs::read(ev.join("netprobe-result.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    for i in 0..n {
        let to = dir.join(format!("host-{i:04}"));
        let o = Command::new("cp")
            .arg("-al")
            .arg(ev)
            .arg(&to)
            .output()
            .map_err(|e| e.to_string())?;
        if !o.status.success() {
            return Err(format!("cp -al: {}", String::from_utf8_lossy(&o.stderr)));
        }
        let kv = format!(
            "{} (bench copy {i})",
            host["kernel_version"].as_str().unwrap_or("")
        );
        let mut h = host.clone();
        h["kernel_version"] = kv.clone().into();
        let hb = serde_json::to_vec_pretty(&h).map_err(|e| e.to_string())?;
        let mut r = result.clone();
        r["host"]["kernel_version"] = kv.into();
        for a in r["artifacts"].as_array_mut().into_iter().flatten() {
            if a["path"] == "host.json" {
                a["sha256"] = hex::encode(sha2::Sha256::digest(&hb)).into();
                a["bytes"] = hb.len().into();
            }
        }
        // New files in place of the hard links (the original stays untouched).
        for (name, bytes) in [
            ("host.json", hb),
            (
                "netprobe-result.json",
                serde_json::to_vec_pretty(&r).map_err(|e| e.to_string())?,
            ),
        ] {
            fs::remove_file(to.join(name)).map_err(|e| e.to_string())?;
            fs::write(to.join(name), bytes).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// One measured child: wall time, exit code, maximum RSS (KiB) and CPU time (user + system, of
/// the child and the children it waited for), from `wait4`.
struct Measured {
    wall: Duration,
    code: i32,
    max_rss_kib: i64,
    cpu: Duration,
}

/// Runs `cmd` (stdout and stderr discarded) and measures it.
// The child is reaped by `wait4` (which also gives its rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run_measured(cmd: &mut Command) -> Measured {
    let t = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut status = 0;
    // SAFETY: rusage is plain data; all zeroes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, writing only into `status` and `ru`, which we own.
    unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Measured {
        wall: t.elapsed(),
        code,
        max_rss_kib: ru.ru_maxrss,
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
    }
}

/// The floor of the proofs over `dir`, on `cores` cores: the wall time of `sha256sum` of every
/// file of every host (what `verify` must re-hash: every artifact), spread over all cores
/// (`xargs -P`), median of `runs`.
fn hash_floor(dir: &Path, cores: usize, runs: usize) -> Duration {
    let cmd = format!(
        "find {} -type f -path '*/host-*' -print0 | xargs -0 -P {cores} -n 256 sha256sum >/dev/null",
        dir.display()
    );
    let v: Vec<Duration> = (0..runs)
        .map(|_| run_measured(Command::new("sh").args(["-c", &cmd])).wall)
        .collect();
    median(&v)
}

pub fn run(cfg: &Config) -> Result<(), String> {
    let exe = crate::netprobe_exe();
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ev = tmp.path().join("ev");
    let o = Command::new(&exe)
        .args(["run", "--expect", "runtime-empty-ns", "--evidence"])
        .arg(&ev)
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(format!(
            "netprobe run: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    let n = if cfg.quick { 100 } else { 1000 };
    let small = tmp.path().join("fleet-100");
    let big = tmp.path().join(format!("fleet-{n}"));
    bench_only_generate(&ev, &small, 100)?;
    if n != 100 {
        bench_only_generate(&ev, &big, n)?;
    }
    // Every copy verifies (the generator is right), once, before timing.
    let m = run_measured(Command::new(&exe).arg("fleet").arg(&big));
    if m.code != 0 {
        return Err(format!(
            "netprobe fleet over the generated {n} hosts exited {}",
            m.code
        ));
    }
    let loop_cmd = format!(
        "for d in {}/host-*/; do {} verify \"$d\" >/dev/null || exit 1; done",
        big.display(),
        exe.display()
    );
    let runs = cfg.runs.clamp(3, 5);
    let mut fleet_cpu = Vec::new();
    let (fleet, peer) = alternate(
        1,
        runs,
        || {
            let m = run_measured(Command::new(&exe).arg("fleet").arg(&big));
            fleet_cpu.push(m.cpu);
            m.wall
        },
        || run_measured(Command::new("sh").args(["-c", &loop_cmd])).wall,
    );
    let c = Comparison {
        section: "fleet",
        what: format!("netprobe fleet over {n} hosts (each verified, fleet.json + tables)"),
        netprobe: &fleet,
        peer_name: "netprobe verify per host in a shell loop",
        peer: &peer,
        notes: String::new(),
    };
    let r = c.ratio();
    c.print();
    let cores = std::thread::available_parallelism().map_or(1, |p| p.get());
    let loop_s = median(&peer).as_secs_f64();
    note(
        "fleet",
        format!(
            "per host: fleet {:.2} ms, loop {:.2} ms | target <= 0.2x the loop: {} ({r:.3}) on {cores} cores",
            median(&fleet).as_secs_f64() * 1e3 / n as f64,
            loop_s * 1e3 / n as f64,
            verdict(r <= 0.2),
        ),
    );
    // The floors: what no fan-out removes. The hashes alone (sha256sum of every file on all
    // cores), and the fleet's own verification work (its CPU time) spread over all cores.
    let hash = hash_floor(&big, cores, runs);
    let cpu = median(&fleet_cpu);
    let work = cpu.as_secs_f64() / cores as f64;
    note(
        "fleet",
        format!(
            "floor of the proofs on {cores} cores: sha256sum of every file {:.2} s ({:.3}x the loop); the fleet's verification work {:.2} s of CPU / {cores} cores = {work:.2} s ({:.3}x the loop) | target 0.2x {} the verification floor",
            hash.as_secs_f64(),
            hash.as_secs_f64() / loop_s,
            cpu.as_secs_f64(),
            work / loop_s,
            if work / loop_s > 0.2 {
                "below"
            } else {
                "above"
            }
        ),
    );
    let rss = |d: &Path| {
        (0..3)
            .map(|_| run_measured(Command::new(&exe).arg("fleet").arg(d)).max_rss_kib)
            .max()
            .unwrap_or(0)
    };
    let (r_small, r_big) = (rss(&small), rss(&big));
    let grow = r_big as f64 / r_small.max(1) as f64;
    note(
        "fleet",
        format!(
            "peak memory (max RSS of 3 runs): 100 hosts {} KiB, {n} hosts {} KiB ({grow:.2}x) | target independent of the host count (<= 1.1x): {}",
            r_small,
            r_big,
            verdict(grow <= 1.1)
        ),
    );
    note(
        "fleet",
        format!(
            "summary: time {r:.3}x the loop (target 0.2x; verification floor {:.3}x), memory {grow:.2}x at {n} vs 100 hosts (target <= 1.1x)",
            work / loop_s
        ),
    );
    Ok(())
}
