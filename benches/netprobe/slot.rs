//! Section `slot`: the slot driver's `restore` and `reset` against a bare `runc restore` of the
//! same images (gates included on netprobe's side).
//!
//! Driven only through the built binary's CLI (`netprobe slot provision|snapshot|restore|
//! reset|cleanup --slot 0 --state-dir <temp>`): one slot is provisioned (`--no-probe-gate
//! --reason bench`) and snapshotted, untimed. Then, alternating:
//! - netprobe: the slot's container is stopped (untimed: `runc kill KILL` + `delete --force`
//!   on the slot's runc root), then `netprobe slot restore` (or `reset`) is timed end to end:
//!   process start, holder verify, snapshot verify, overlay upper reset (reset only), runtime
//!   restore, state capture and byte comparison, guest HTTP check, evidence.
//! - peer: `runc --root <own root> --criu C restore --image-path <the slot's checkpoint>
//!   --work-path <temp> --bundle <the slot's bundle> -d <id>` is timed; the container is then
//!   killed and deleted (untimed). Same images, same bundle, same holder netns.
//!
//! The per-step times of each netprobe run come from its evidence (`timings.json`) and are
//! printed as medians, so a missed ratio shows where the slot's time goes. Everything is
//! removed afterwards: peer containers, the slot (`slot cleanup`: container, overlay, holder),
//! the state dir.

use crate::Config;
use crate::stats::{Comparison, alternate, note, timed, verdict};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The slot number used inside the bench's private state dir.
const SLOT: &str = "0";

/// Key under which a run's CRIU time (its `restore.log`, [`criu_log_ms`]) travels with its
/// timings; printed beside the peer's, never summed into the verb's steps.
const CRIU_KEY: &str = "criu-restore-log";

/// Runs `cmd` with null stdin/stdout, returning stderr's tail on failure.
fn run_ok(cmd: &mut Command, what: &str) -> Result<(), String> {
    let o = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&o.stderr);
        let tail: Vec<&str> = err.lines().rev().take(8).collect();
        Err(format!(
            "{what}: exit {}: {}",
            o.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ))
    }
}

/// The slot under test and its cleanup.
pub(crate) struct Slot {
    exe: PathBuf,
    state_dir: tempfile::TempDir,
    /// `<state dir>/slot-0`.
    pub slot_dir: PathBuf,
    pub(crate) container_id: String,
    pub(crate) criu: Option<PathBuf>,
    /// The runtime: `runc` in PATH unless a section names one (then passed to provision).
    runtime: Option<PathBuf>,
}

impl Slot {
    pub(crate) fn verb(&self, verb: &str) -> Command {
        let mut c = Command::new(&self.exe);
        c.args(["slot", verb, "--slot", SLOT, "--state-dir"])
            .arg(self.state_dir.path());
        c
    }

    /// The netprobe binary the slot's verbs run.
    pub(crate) fn exe(&self) -> &Path {
        &self.exe
    }

    /// The slot's private state directory.
    pub(crate) fn state_dir_path(&self) -> PathBuf {
        self.state_dir.path().to_path_buf()
    }

    /// `runc --root <slot's runc root> …`.
    pub(crate) fn runc(&self) -> Command {
        let mut c = Command::new(self.runtime.as_deref().unwrap_or(Path::new("runc")));
        c.arg("--root").arg(self.slot_dir.join("runc-root"));
        c
    }

    /// Stops the slot's container if it runs (kill + force delete; errors ignored: absent).
    pub(crate) fn stop_container(&self) {
        let _ = run_ok(
            self.runc().args(["kill", &self.container_id, "KILL"]),
            "kill",
        );
        let _ = run_ok(
            self.runc().args(["delete", "--force", &self.container_id]),
            "delete",
        );
    }

    /// The per-step times (ms) of the newest evidence folder of `verb`.
    pub(crate) fn last_timings(&self, verb: &str) -> BTreeMap<String, f64> {
        let dir = self.slot_dir.join("evidence");
        let newest = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().ends_with(&format!("-{verb}")))
            })
            .max();
        let mut t = newest
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p.join("timings.json")).ok())
            .and_then(|t| serde_json::from_str::<BTreeMap<String, f64>>(&t).ok())
            .unwrap_or_default();
        // CRIU's own share of the `restore` step (not a step of the verb: kept apart below).
        if let Some(ms) = newest.and_then(|p| criu_log_ms(&p.join("criu-work/restore.log"))) {
            t.insert(CRIU_KEY.into(), ms);
        }
        t
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Err(e) = run_ok(&mut self.verb("cleanup"), "slot cleanup") {
            eprintln!("[slot] cleanup: {e}");
        }
    }
}

/// Both sides start from the same quiet state: a container killed just before (the slot's,
/// before each netprobe run; the peer's own, after each peer run) is torn down by the kernel
/// asynchronously (cgroup, memory, namespaces), which would otherwise overlap only the side
/// that runs right after the kill.
fn settle() {
    std::thread::sleep(std::time::Duration::from_millis(100));
}

/// CRIU's own time for a restore, milliseconds: the stamp `(SS.UUUUUU)` of the last stamped
/// line of its `restore.log` (CRIU stamps each line with the time since it started), `None`
/// when the log is missing or has no stamp. A log stored compressed (`restore.log.zst`) is read
/// as it decodes.
fn criu_log_ms(log: &Path) -> Option<f64> {
    let text = netprobe::evidence::read_recorded_text(log).ok()?;
    text.lines().rev().find_map(|l| {
        let rest = l.trim_start().strip_prefix('(')?;
        let (stamp, _) = rest.split_once(')')?;
        stamp.trim().parse::<f64>().ok().map(|s| s * 1e3)
    })
}

/// The newest `snapshot-*/checkpoint` folder of the slot.
fn checkpoint_dir(slot_dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(slot_dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("snapshot-"))
                && p.join("checkpoint").is_dir()
        })
        .max()
        .map(|p| p.join("checkpoint"))
}

/// A fresh private state dir and the slot in it (nothing provisioned yet).
pub(crate) fn new_slot() -> Result<Slot, String> {
    new_slot_with(None, crate::criu_path())
}

/// As [`new_slot`], with the runtime and CRIU named.
pub(crate) fn new_slot_with(
    runtime: Option<PathBuf>,
    criu: Option<PathBuf>,
) -> Result<Slot, String> {
    let state_dir = tempfile::Builder::new()
        .prefix("netprobe-bench-slot-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    Ok(Slot {
        exe: crate::netprobe_exe(),
        slot_dir: state_dir.path().join(format!("slot-{SLOT}")),
        state_dir,
        container_id: format!("netprobe-slot-{SLOT}"),
        criu,
        runtime,
    })
}

/// `provision` with `extra` flags (after `--no-probe-gate --reason bench` and `--criu`); its
/// `--json` outcome and wall time.
pub(crate) fn provision(
    slot: &Slot,
    extra: &[&str],
) -> Result<(serde_json::Value, std::time::Duration), String> {
    let mut prov = slot.verb("provision");
    prov.args(["--no-probe-gate", "--reason", "bench", "--json"]);
    if let Some(c) = &slot.criu {
        prov.arg("--criu").arg(c);
    }
    if let Some(r) = &slot.runtime {
        prov.arg("--runtime").arg(r);
    }
    prov.args(extra);
    let (o, d) = timed(|| prov.stdin(Stdio::null()).output());
    let o = o.map_err(|e| format!("slot provision: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "slot provision: exit {}: {}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    let v = serde_json::from_slice(&o.stdout).map_err(|e| format!("provision --json: {e}"))?;
    Ok((v, d))
}

/// `snapshot` (timed), then the container id from `status`; returns the snapshot's
/// `checkpoint` folder and the wall time.
pub(crate) fn snapshot(slot: &mut Slot) -> Result<(PathBuf, std::time::Duration), String> {
    let (r, d) = timed(|| run_ok(&mut slot.verb("snapshot"), "slot snapshot"));
    r?;
    // The container id from the slot state (the CLI's `status` JSON), in case it differs.
    if let Ok(o) = slot.verb("status").output()
        && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&o.stdout)
        && let Some(id) = v.pointer("/state/container_id").and_then(|v| v.as_str())
    {
        slot.container_id = id.to_string();
    }
    let ck = checkpoint_dir(&slot.slot_dir).ok_or("no snapshot-*/checkpoint in the slot")?;
    Ok((ck, d))
}

/// Runs the section.
pub fn run(cfg: &Config) -> Result<(), String> {
    let mut slot = new_slot()?;
    let (_, d) = provision(&slot, &[])?;
    let (ck, d2) = snapshot(&mut slot)?;
    let bundle = slot.slot_dir.join("bundle");
    note(
        "slot",
        format!(
            "slot provisioned in {:.0} ms, snapshot in {:.0} ms (untimed setup); peer restores \
             {} with bundle {}",
            d.as_secs_f64() * 1e3,
            d2.as_secs_f64() * 1e3,
            ck.display(),
            bundle.display()
        ),
    );
    // Issue 10's targets: restore <= 1.15x, reset <= 1.1x of the bare restore.
    let bench = Bench {
        section: "slot",
        targets: (1.15, 1.1),
        stop_slot_before_peer: false,
    };
    compare(cfg, &slot, &ck, &bundle, &bench)?;
    slot.stop_container();
    drop(slot);
    Ok(())
}

/// How [`compare`] runs and reports.
pub(crate) struct Bench {
    /// Section name on every line.
    pub section: &'static str,
    /// Target ratios netprobe/peer for `restore` and `reset` (printed as met or missed).
    pub targets: (f64, f64),
    /// Stop the slot's container before each peer restore (untimed): a guest that binds
    /// something per netns (the X server's abstract socket, a TCP port) cannot be restored a
    /// second time beside itself in the holder's netns.
    pub stop_slot_before_peer: bool,
}

impl Bench {
    /// The target ratio of `verb` (`restore` or `reset`).
    fn target(&self, verb: &str) -> f64 {
        if verb == "restore" {
            self.targets.0
        } else {
            self.targets.1
        }
    }
}

/// The timed part: `netprobe slot restore` and `reset` (gates included) against bare `runc
/// restore -d` of the slot's checkpoint `ck` with its bundle, alternating, then each verb's
/// per-step medians from its `timings.json`.
pub(crate) fn compare(
    cfg: &Config,
    slot: &Slot,
    ck: &Path,
    bundle: &Path,
    b: &Bench,
) -> Result<(), String> {
    let peer_root = tempfile::Builder::new()
        .prefix("netprobe-bench-peer-runc-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let mut peer_n = 0u32;
    let peer_err: std::cell::RefCell<Option<String>> = std::cell::RefCell::new(None);
    let peer_criu: std::cell::RefCell<Vec<f64>> = std::cell::RefCell::new(Vec::new());
    let mut peer = || {
        peer_n += 1;
        if b.stop_slot_before_peer {
            slot.stop_container();
        }
        let id = format!("netprobe-bench-peer-{}-{peer_n}", std::process::id());
        let work = tempfile::Builder::new()
            .prefix("netprobe-bench-peer-work-")
            .tempdir()
            .expect("temp dir");
        let mut c = Command::new("runc");
        c.arg("--root").arg(peer_root.path());
        if let Some(criu) = &slot.criu {
            c.arg("--criu").arg(criu);
        }
        c.args(["restore", "--image-path"])
            .arg(ck)
            .arg("--work-path")
            .arg(work.path())
            .arg("--bundle")
            .arg(bundle)
            .args(["-d", &id]);
        settle();
        let (r, d) = timed(|| run_ok(&mut c, "runc restore"));
        if let Err(e) = r {
            peer_err.borrow_mut().get_or_insert(e);
        }
        if let Some(ms) = criu_log_ms(&work.path().join("restore.log")) {
            peer_criu.borrow_mut().push(ms);
        }
        for args in [vec!["kill", &id, "KILL"], vec!["delete", "--force", &id]] {
            let _ = run_ok(
                Command::new("runc")
                    .arg("--root")
                    .arg(peer_root.path())
                    .args(args),
                "peer cleanup",
            );
        }
        d
    };
    for verb in ["restore", "reset"] {
        let mut np_err: Option<String> = None;
        let mut steps: Vec<BTreeMap<String, f64>> = Vec::new();
        let (np, pr) = alternate(
            1,
            cfg.runs,
            || {
                slot.stop_container();
                settle();
                let (r, d) = timed(|| run_ok(&mut slot.verb(verb), verb));
                if let Err(e) = r {
                    np_err.get_or_insert(e);
                }
                steps.push(slot.last_timings(verb));
                d
            },
            &mut peer,
        );
        if let Some(e) = np_err {
            return Err(format!("netprobe slot {verb}: {e}"));
        }
        if let Some(e) = peer_err.borrow_mut().take() {
            return Err(format!("peer: {e}"));
        }
        let c = Comparison {
            section: b.section,
            what: format!(
                "`netprobe slot {verb}` (gates included) vs bare runc restore of the same images"
            ),
            netprobe: &np,
            peer_name: "runc restore -d",
            peer: &pr,
            notes: String::new(),
        };
        let target = b.target(verb);
        let ok = c.ratio() <= target;
        Comparison {
            notes: format!("target ratio <= {target}: {}", verdict(ok)),
            ..c
        }
        .print();
        crate::stats::note(
            b.section,
            format!("{verb}: {}", crate::stats::pair_spread(&np, &pr)),
        );
        let peer_criu_ms = {
            let mut v = std::mem::take(&mut *peer_criu.borrow_mut());
            let n = v.len();
            let v = v.split_off(n.saturating_sub(cfg.runs));
            crate::stats::median_f64(&v)
        };
        breakdown(b.section, verb, &steps, cfg.runs, (&np, &pr), peer_criu_ms);
    }
    drop(peer_root);
    Ok(())
}

/// Prints CRIU's own share of the runtime step on each side, then the median per step over the
/// timed runs (the warm-up is `steps[0]`). `sides` are netprobe's and the peer's wall times,
/// `peer_criu_ms` the peer's median CRIU time.
fn breakdown(
    section: &str,
    verb: &str,
    steps: &[BTreeMap<String, f64>],
    runs: usize,
    sides: (&[std::time::Duration], &[std::time::Duration]),
    peer_criu_ms: f64,
) {
    let (np, pr) = sides;
    let timed_steps = &steps[steps.len().saturating_sub(runs)..];
    let (keys, medians) = step_medians(steps, runs);
    let med = |k: &str| medians.get(k).copied().unwrap_or(f64::NAN);
    let total = med("total");
    // Where the runtime step's time goes: CRIU's own restore time on each side (the
    // rest of a `restore` step is the runtime around CRIU: spawn, cgroups, hooks, state).
    note(
        section,
        format!(
            "{verb}: CRIU's own restore time (last stamp of restore.log, medians): slot {:.0} ms \
             of its `restore` step {:.0} ms | peer {:.0} ms of its bare restore {:.0} ms",
            med(CRIU_KEY),
            med("restore"),
            peer_criu_ms,
            crate::stats::median(pr).as_secs_f64() * 1e3,
        ),
    );
    // netprobe's own time per run: its process wall minus its runtime `restore` step (the
    // step runs the same runtime restore of the same images as the peer), so without that
    // step's run-to-run noise, which both sides share and which dominates the ratios above.
    let own: Vec<f64> = np
        .iter()
        .zip(timed_steps)
        .filter_map(|(d, m)| Some(d.as_secs_f64() * 1e3 - m.get("restore")?))
        .collect();
    if !own.is_empty() {
        let (o1, o2, o3) = crate::stats::quartiles_f64(&own);
        let peer_ms = crate::stats::median(pr).as_secs_f64() * 1e3;
        note(
            section,
            format!(
                "{verb}: netprobe's own time per run (process wall minus its `restore` step, n={}):                  median {o2:.1} ms, quartiles {o1:.1}–{o3:.1} ms; with the peer's median bare                  restore {peer_ms:.0} ms: (bare + own) / bare = {:.3} (informational; the target                  line above is the verdict)",
                own.len(),
                (peer_ms + o2) / peer_ms
            ),
        );
    }
    // `*-runtime-state-query` steps run on a second thread beside others (their waits are
    // named `*-runtime-state` / `runtime-state-wait`): not part of the sequential sum.
    let named: f64 = keys
        .iter()
        .filter(|k| k.as_str() != "total" && !k.ends_with("-query") && k.as_str() != CRIU_KEY)
        .map(|k| med(k))
        .sum();
    note(
        section,
        format!(
            "{verb} breakdown (medians from each run's timings.json, ms; *-query ran beside \
             the others on a second thread): {} | unnamed (holder verify, snapshot verify, \
             evidence, journal; sums of medians, so ±2) {:.0} | process wall {:.0}",
            keys.iter()
                .map(|k| format!("{k} {:.0}", med(k)))
                .collect::<Vec<_>>()
                .join(", "),
            total - named,
            crate::stats::median(np).as_secs_f64() * 1e3,
        ),
    );
}

/// Prints the median of each step over the timed runs (the warm-up is `steps[0]`), from each
/// run's `timings.json`, ms.
pub(crate) fn print_step_medians(
    section: &str,
    verb: &str,
    steps: &[BTreeMap<String, f64>],
    runs: usize,
) {
    let (keys, medians) = step_medians(steps, runs);
    let med = |k: &str| medians.get(k).copied().unwrap_or(f64::NAN);
    note(
        section,
        format!(
            "{verb} steps (medians from each run's timings.json, ms): {}",
            keys.iter()
                .map(|k| format!("{k} {:.0}", med(k)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
}

/// The step names of the timed runs (the warm-up is `steps[0]`), sorted, and each step's median
/// over those runs, ms.
fn step_medians(
    steps: &[BTreeMap<String, f64>],
    runs: usize,
) -> (Vec<String>, BTreeMap<String, f64>) {
    let timed_steps = &steps[steps.len().saturating_sub(runs)..];
    let mut keys: Vec<String> = timed_steps.iter().flat_map(|m| m.keys().cloned()).collect();
    keys.sort();
    keys.dedup();
    let medians = keys
        .iter()
        .map(|k| {
            let v: Vec<f64> = timed_steps
                .iter()
                .filter_map(|m| m.get(k).copied())
                .collect();
            (k.clone(), crate::stats::median_f64(&v))
        })
        .collect();
    (keys, medians)
}
