//! Evidence folders on hostile disks (issue 11, point 5), through the netprobe binary:
//! - a read-only mount: an existing empty folder and a new one are refused with the same exit
//!   class (2), before anything runs;
//! - a full disk: the run ends without a result, exit 2 ("cannot write into the evidence folder",
//!   as a folder refused at the start), and the folder says so (`incomplete.txt`, with the
//!   reason), which `verify` and `report` name — also when only the final write of
//!   `netprobe-result.json` finds the disk full.

use std::path::Path;
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_netprobe");

/// A tmpfs mounted at a fresh directory; unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn new(opts: &str) -> Tmpfs {
        assert!(
            nix::unistd::geteuid().is_root(),
            "needs root (mount); CI runs it as root"
        );
        let dir = tempfile::tempdir().unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "netprobe-test"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs {opts}");
        Tmpfs { dir }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(self.dir.path(), nix::mount::MntFlags::MNT_DETACH);
    }
}

fn netprobe(args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(EXE)
        .args(args)
        .env_remove("CRIU_CONFIG_FILE")
        .output()
        .unwrap();
    (
        o.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

#[test]
fn read_only_evidence_folder_same_class_existing_or_new() {
    let fs = Tmpfs::new("size=1m,mode=0755");
    std::fs::create_dir(fs.path().join("empty")).unwrap();
    let st = Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(fs.path())
        .status()
        .unwrap();
    assert!(st.success());
    let existing = fs.path().join("empty");
    let new = fs.path().join("new");
    let (c1, o1) = netprobe(&[
        "run",
        "--quiet",
        "--phases",
        "kernel",
        "--evidence",
        &existing.to_string_lossy(),
    ]);
    let (c2, o2) = netprobe(&[
        "run",
        "--quiet",
        "--phases",
        "kernel",
        "--evidence",
        &new.to_string_lossy(),
    ]);
    assert_eq!(c1, Some(2), "existing empty folder: {o1}");
    assert_eq!(c2, Some(2), "new folder: {o2}");
    assert!(o1.contains("Read-only file system"), "{o1}");
    assert!(o2.contains("Read-only file system"), "{o2}");
}

#[test]
fn a_run_that_fills_the_disk_leaves_incomplete_txt_named_by_verify_and_report() {
    // Big enough for the first files, too small for the criu rung's images.
    let fs = Tmpfs::new("size=64k,mode=0755");
    let ev = fs.path().join("ev");
    let evs = ev.to_string_lossy().to_string();
    let (code, out) = netprobe(&[
        "run",
        "--quiet",
        "--phases",
        "kernel,criu",
        "--evidence",
        &evs,
    ]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("No space left on device"), "{out}");
    assert!(
        out.contains(&format!("cannot write into the evidence folder {evs}")),
        "{out}"
    );
    assert!(!ev.join("netprobe-result.json").exists(), "{out}");
    let note = std::fs::read_to_string(ev.join("incomplete.txt")).unwrap();
    assert!(note.contains("has not finished"), "{note}");
    let (code, out) = netprobe(&["verify", &evs]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("incomplete.txt"), "{out}");
    assert!(out.contains("did not finish"), "{out}");
    let (code, out) = netprobe(&["report", &evs]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("incomplete.txt"), "{out}");
}

/// Pages of 4 KiB the files under `dir` take on a tmpfs, `netprobe-result.json` left out.
fn pages_without_result(dir: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let md = e.metadata().unwrap();
        if md.is_dir() {
            n += pages_without_result(&e.path());
        } else if e.file_name() != "netprobe-result.json" {
            n += md.len().div_ceil(4096);
        }
    }
    n
}

#[test]
fn a_full_disk_at_the_final_write_of_the_result_exits_2_and_names_the_file() {
    // A kernel run measured on a roomy tmpfs; then one on a tmpfs that holds its files and
    // `incomplete.txt` with a page to spare, where the result (two pages) no longer fits.
    let roomy = Tmpfs::new("size=1m,mode=0755");
    let probe = roomy.path().join("probe");
    let (code, out) = netprobe(&[
        "run",
        "--quiet",
        "--phases",
        "kernel",
        "--evidence",
        &probe.to_string_lossy(),
    ]);
    assert_eq!(code, Some(0), "{out}");
    let result_bytes = std::fs::metadata(probe.join("netprobe-result.json"))
        .unwrap()
        .len();
    assert!(result_bytes > 4096, "the result must need two pages");
    let pages = pages_without_result(&probe) + 1 + 1;
    let fs = Tmpfs::new(&format!("size={}k,mode=0755", pages * 4));
    let ev = fs.path().join("ev");
    let evs = ev.to_string_lossy().to_string();
    let (code, out) = netprobe(&["run", "--quiet", "--phases", "kernel", "--evidence", &evs]);
    assert_eq!(code, Some(2), "{out}");
    for needle in [
        format!("cannot write into the evidence folder {evs}"),
        format!("could not write {evs}/netprobe-result.json: No space left on device"),
        "free space on its filesystem".to_string(),
        "new --evidence folder".to_string(),
    ] {
        assert!(out.contains(&needle), "{needle:?} not in {out}");
    }
    assert!(!ev.join("netprobe-result.json").exists(), "{out}");
    let note = std::fs::read_to_string(ev.join("incomplete.txt")).unwrap();
    assert!(note.contains("has not finished"), "{note}");
    assert!(
        note.contains("reason: cannot write into the evidence folder")
            && note.contains("No space left on device"),
        "{note}"
    );
    let (code, out) = netprobe(&["verify", &evs]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("did not finish"), "{out}");
}

/// The slot journal on a full disk (the user trial's finding): an entry whose write fails part
/// way is undone — the journal keeps its length, no half entry is left for the next verb's
/// entry to be glued to — and once there is room again the next entry is a whole line; no line
/// is reported as edited. A line cut by a crash (its JSON ends early) gets the next entry on a
/// line of its own and is not flagged; a line that is not an entry is.
#[test]
fn a_journal_entry_that_finds_the_disk_full_is_undone_not_left_half() {
    use netprobe::slot::layout::{journal_append, journal_bad_lines, journal_read};
    let fs = Tmpfs::new("size=64k");
    let j = fs.path().join("journal.jsonl");
    // Entries up to a few bytes short of a page: the next one needs a second page.
    while std::fs::metadata(&j).map(|m| m.len()).unwrap_or(0) < 4096 - 300 {
        journal_append(&j, "reset", "step", true, "x").unwrap();
    }
    let pad = 4096 - 150 - std::fs::metadata(&j).unwrap().len() as usize;
    journal_append(
        &j,
        "reset",
        "step",
        true,
        &"p".repeat(pad.saturating_sub(90)),
    )
    .unwrap();
    let before = std::fs::read(&j).unwrap();
    // Fill every other page.
    let filler = fs.path().join("filler");
    let _ = Command::new("dd")
        .args(["if=/dev/zero", "bs=4k"])
        .arg(format!("of={}", filler.display()))
        .status();
    let long = "d".repeat(600);
    let r = journal_append(&j, "reset", "end", true, &long);
    assert!(r.is_err(), "the disk is full");
    assert_eq!(
        std::fs::read(&j).unwrap(),
        before,
        "the half entry is undone"
    );
    std::fs::remove_file(&filler).unwrap();
    journal_append(&j, "reset", "end", true, &long).unwrap();
    assert_eq!(journal_bad_lines(&j), Vec::<usize>::new());
    assert_eq!(journal_read(&j).last().unwrap().detail, long);

    // A crash-cut line, then an entry: the entry starts its own line; nothing is flagged.
    let text = std::fs::read_to_string(&j).unwrap();
    std::fs::write(&j, format!("{text}{{\"at\":\"2026-12-05T0")).unwrap();
    journal_append(&j, "snapshot", "start", true, "").unwrap();
    let text = std::fs::read_to_string(&j).unwrap();
    assert!(text.contains("{\"at\":\"2026-12-05T0\n{"), "{text}");
    assert_eq!(journal_bad_lines(&j), Vec::<usize>::new());
    assert_eq!(journal_read(&j).last().unwrap().verb, "snapshot");
    // A line that is no entry at all is flagged.
    std::fs::write(&j, format!("{text}edited\n")).unwrap();
    let n = std::fs::read_to_string(&j).unwrap().lines().count();
    assert_eq!(journal_bad_lines(&j), vec![n]);
}
