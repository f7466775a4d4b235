//! Section `retention`: what a GNOME reset keeps, and what keeping less costs it.
//!
//! One GNOME slot (`profiles/gnome.toml`, runc 1.4.3 + CRIU 4.3 as in `osworld`) is
//! provisioned, snapshotted and restored (untimed). Then resets alternate between the old
//! behaviour (every file as written: `NETPROBE_EVIDENCE_PLAIN=1`) and the new (CRIU's log and
//! large logs stored zstd, the files equal to a stored file of the snapshot's folder or of the
//! first restore after it kept as `.ref`), each timed end to end as the CLI runs it. Printed: the reset's
//! wall time new vs old (ratio; "unchanged within noise" is a ratio inside the pair spread),
//! the evidence bytes per reset for each (the sum of the folder's file sizes, as `verb.json`
//! lists them, and the disk blocks `du` would count), and whether the new side is within the
//! 150 KB target. Then `slot prune --keep 5` and `report` of the slot: every kept folder must
//! match what the journal and its `verb.json` recorded, and each pruned verb is listed with
//! its hash.

use crate::Config;
use crate::slot::{new_slot_with, provision, snapshot};

use crate::stats::{Comparison, alternate, note, timed, verdict};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// A folder's (file sizes, allocated bytes).
type Bytes = (u64, u64);

/// The target: evidence bytes per GNOME reset (issue 37).
const TARGET_BYTES: u64 = 150_000;

/// Sum of the file sizes and of the allocated bytes (`st_blocks` × 512) under `dir`.
fn folder_bytes(dir: &Path) -> (u64, u64) {
    let (mut size, mut alloc) = (0, 0);
    let Ok(rd) = std::fs::read_dir(dir) else {
        return (0, 0);
    };
    for e in rd.flatten() {
        let Ok(m) = e.metadata() else { continue };
        if m.is_dir() {
            let (s, a) = folder_bytes(&e.path());
            size += s;
            alloc += a;
        } else {
            size += m.len();
            alloc += m.blocks() * 512;
        }
    }
    (size, alloc)
}

/// The newest `NNNN-reset` folder of the slot's evidence.
fn newest_reset(slot_dir: &Path) -> Option<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(slot_dir.join("evidence"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with("-reset"))
        .collect();
    v.sort();
    v.pop()
}

fn env_path(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default))
}

/// Runs the section.
pub fn run(cfg: &Config) -> Result<(), String> {
    let runtime = env_path("NETPROBE_BENCH_OSWORLD_RUNC", "/opt/runc-1.4.3/sbin/runc");
    let criu = env_path("NETPROBE_BENCH_OSWORLD_CRIU", "/opt/criu-4.3/sbin/criu");
    let prof = concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/gnome.toml");
    let mut slot = new_slot_with(Some(runtime), Some(criu))?;
    provision(&slot, &["--profile", prof])?;
    snapshot(&mut slot)?;
    let ok = |o: std::io::Result<std::process::Output>, what: &str| -> Result<(), String> {
        let o = o.map_err(|e| format!("{what}: {e}"))?;
        match o.status.success() {
            true => Ok(()),
            false => Err(format!("{what}: {}", String::from_utf8_lossy(&o.stderr))),
        }
    };
    ok(
        slot.verb("restore").stdin(Stdio::null()).output(),
        "slot restore",
    )?;
    // Bytes per reset (file sizes, allocated), old and new; the first failure.
    let bytes: std::cell::RefCell<(Vec<Bytes>, Vec<Bytes>)> = Default::default();
    let failure: std::cell::RefCell<Option<String>> = Default::default();
    let reset = |plain: bool| -> Duration {
        let mut c = slot.verb("reset");
        if plain {
            c.env("NETPROBE_EVIDENCE_PLAIN", "1");
        }
        let (o, d) = timed(|| c.stdin(Stdio::null()).output());
        if let Err(e) = ok(o, "slot reset") {
            failure.borrow_mut().get_or_insert(e);
        }
        let b = newest_reset(&slot.slot_dir).map(|d| folder_bytes(&d));
        let mut all = bytes.borrow_mut();
        match plain {
            true => all.0.extend(b),
            false => all.1.extend(b),
        }
        d
    };
    let (new, old) = alternate(1, cfg.runs, || reset(false), || reset(true));
    if let Some(e) = failure.take() {
        return Err(e);
    }
    let (old_bytes, new_bytes) = bytes.take();
    Comparison {
        section: "retention",
        what: "GNOME `slot reset`, large evidence compressed (new) vs stored as written (old)"
            .into(),
        netprobe: &new,
        peer_name: "old",
        peer: &old,
        notes: crate::stats::pair_spread(&new, &old),
    }
    .print();
    let med = |v: &[Bytes], alloc: bool| {
        let mut x: Vec<u64> = v.iter().map(|(s, a)| if alloc { *a } else { *s }).collect();
        x.sort();
        x.get(x.len() / 2).copied().unwrap_or(0)
    };
    let (n, o) = (med(&new_bytes, false), med(&old_bytes, false));
    note(
        "retention",
        format!(
            "evidence bytes per GNOME reset (median file sizes): new {} B ({} B on disk) vs old {} B ({} B on disk), {:.1}x smaller; target <= {TARGET_BYTES} B: {}",
            n,
            med(&new_bytes, true),
            o,
            med(&old_bytes, true),
            o as f64 / n.max(1) as f64,
            verdict(n <= TARGET_BYTES)
        ),
    );
    prune_and_report(slot.exe(), &slot.state_dir_path(), &slot.slot_dir)
}

/// `slot prune --keep 5` then the slot's report: kept folders verified, pruned ones listed.
fn prune_and_report(exe: &Path, state_dir: &Path, slot_dir: &Path) -> Result<(), String> {
    let o = std::process::Command::new(exe)
        .args(["slot", "prune", "--slot", "0", "--keep", "5", "--state-dir"])
        .arg(state_dir)
        .output()
        .map_err(|e| format!("slot prune: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "slot prune: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    let first = String::from_utf8_lossy(&o.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let r = std::process::Command::new(exe)
        .arg("report")
        .arg(slot_dir)
        .output()
        .map_err(|e| format!("report: {e}"))?;
    let md = std::fs::read_to_string(slot_dir.join("report.md")).unwrap_or_default();
    let pruned = md.matches("pruned (hash recorded)").count();
    note(
        "retention",
        format!(
            "{first}; report of the slot: exit {} ({}), {pruned} verb(s) listed as pruned (hash recorded)",
            r.status.code().unwrap_or(-1),
            if md.contains("NOT VERIFIED") {
                "NOT VERIFIED"
            } else {
                "every kept folder verified"
            }
        ),
    );
    Ok(())
}
