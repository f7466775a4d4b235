//! Evidence folders on hostile disks (issue 11, point 5), through the netprobe binary:
//! - a read-only mount: an existing empty folder and a new one are refused with the same exit
//!   class (2), before anything runs;
//! - a full disk: the run ends without a result, exit 2 ("cannot write into the evidence folder",
//!   as a folder refused at the start), and the folder says so (`incomplete.txt`, with the
//!   reason), which `verify` and `report` name — also when only the final write of
//!   `netprobe-result.json` finds the disk full;
//! - a slot on a full disk (slots 61 and 62, real runc and CRIU): a verb whose evidence cannot
//!   be written fails with exit 2 naming each file, the filesystem and the fix, claims no
//!   `verb.json` it did not write (no sha256 of it in the journal, so `netprobe report` raises
//!   no false alarm), keeps the phase its work left; and a finished verb's files, listed with
//!   their sha256 in its `verb.json`, are each checked by `netprobe report`.

use crate::common::slot_support;

use slot_support::{assert_released, cli, cli_slot, holder_pids, serial};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::EXE;

/// A tmpfs mounted at a fresh directory; unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn new(opts: &str) -> Tmpfs {
        crate::common::require_root();
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
    let _baton = crate::common::baton(module_path!());
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
    let _baton = crate::common::baton(module_path!());
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
    let _baton = crate::common::baton(module_path!());
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
    let _baton = crate::common::baton(module_path!());
    use netprobe::slot::record::journal::{journal_append, journal_bad_lines, journal_read};
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

/// A tmpfs mounted on an existing folder; unmounted on drop.
struct TmpfsAt(PathBuf);

impl TmpfsAt {
    fn new(dir: &Path, opts: &str) -> TmpfsAt {
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "netprobe-test-ev"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs {opts} on {}", dir.display());
        TmpfsAt(dir.to_path_buf())
    }
}

impl Drop for TmpfsAt {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// Frees the space `fill` took and cleans up slot `slot` of `sd` (also when the test failed
/// half-way), so no holder, container or mount is left.
struct FreedAndCleaned {
    sd: PathBuf,
    slot: &'static str,
    fill: PathBuf,
}

impl Drop for FreedAndCleaned {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.fill);
        if self.sd.join(format!("slot-{}", self.slot)).is_dir() {
            let _ = cli_slot("cleanup", self.slot, &self.sd, &[]);
        }
    }
}

/// Fills the filesystem holding `path` with a file of zeros at `path`, to its last byte.
fn fill_up(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    for block in [64 * 1024, 4096, 1] {
        let buf = vec![0u8; block];
        while f.write(&buf).is_ok_and(|n| n > 0) {}
    }
    assert_eq!(
        f.write(&[0]).unwrap_err().raw_os_error(),
        Some(libc::ENOSPC)
    );
}

/// `netprobe report SLOT` names a file of verb folder `folder` changed after its verb listed it
/// in `verb.json` (exit 1, a MISMATCH line naming the file); with the file put back, exit 0.
fn report_names_an_edited_artifact(slot: &Path, folder: &str, file: &str) {
    let slot_s = slot.to_string_lossy().to_string();
    let (code, out, err) = cli(&["report", &slot_s], &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    let p = slot.join("evidence").join(folder).join(file);
    let orig = std::fs::read(&p).unwrap();
    std::fs::write(&p, [orig.as_slice(), b" "].concat()).unwrap();
    let (code, out, err) = cli(&["report", &slot_s], &[]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains(&format!("MISMATCH: {folder}: {file}: sha256 ")),
        "{err}"
    );
    let md = std::fs::read_to_string(slot.join("report.md")).unwrap();
    assert!(md.contains("**NOT VERIFIED**"), "{md}");
    std::fs::write(&p, &orig).unwrap();
    let (code, out, err) = cli(&["report", &slot_s], &[]);
    assert_eq!(code, Some(0), "{out}{err}");
}

/// The journal's entries about verb folder `name` of `slot`.
fn journal_of(slot: &Path, name: &str) -> Vec<netprobe::slot::record::journal::JournalEntry> {
    netprobe::slot::record::journal::journal_read(&slot.join("journal.jsonl"))
        .into_iter()
        .filter(|e| e.evidence.as_deref() == Some(name))
        .collect()
}

/// The user trial's finding: a slot verb on a full state directory dropped its evidence
/// silently, and the journal recorded the sha256 of a `verb.json` never written (a false
/// tamper alarm in `netprobe report`). Now it exits 2 naming each file not written, the
/// filesystem and the fix; the journal records no sha256 for it; the report says the verb is
/// incomplete, without a MISMATCH; the slot is cleaned up once space is free. Before that, a
/// finished verb's listed file edited is named by `netprobe report` (exit 1).
#[test]
fn a_slot_verb_on_a_full_state_directory_claims_no_evidence_it_did_not_write() {
    let _baton = crate::common::baton(module_path!());
    let _serial = serial();
    let fs = Tmpfs::new("size=24m,mode=0755");
    let sd = fs.path().join("state");
    let fill = fs.path().join("fill");
    let _cleanup = FreedAndCleaned {
        sd: sd.clone(),
        slot: "61",
        fill: fill.clone(),
    };
    let (code, out, err) = cli_slot(
        "provision",
        "61",
        &sd,
        &["--no-probe-gate", "--reason", "test"],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let holders = holder_pids(&sd);
    let slot = sd.join("slot-61");
    report_names_an_edited_artifact(&slot, "0001-provision", "cgroup-limits-provision.json");

    fill_up(&fill);
    let (code, out, err) = cli_slot("snapshot", "61", &sd, &[]);
    assert_eq!(code, Some(2), "{out}{err}");
    for needle in [
        // The snapshot's own failure first, then its unwritten evidence.
        "slot 61: the snapshot failed: ".to_string(),
        "; its evidence is incomplete too: ".into(),
        "gates.json (write: No space left on device (os error 28))".into(),
        "verb.json (write: No space left on device (os error 28))".into(),
        format!(
            "the state directory {} is on the tmpfs filesystem netprobe-test mounted at {} (0 bytes free now)",
            sd.display(),
            fs.path().display()
        ),
        format!("fix: free space in {} ", fs.path().display()),
        format!(
            "then run `netprobe slot snapshot --slot 61 --state-dir {}` again",
            sd.display()
        ),
    ] {
        assert!(err.contains(&needle), "{needle:?} not in {err}");
    }
    let ev = slot.join("evidence/0002-snapshot");
    assert!(!ev.join("verb.json").exists());
    assert!(
        ev.join("incomplete.txt").is_file(),
        "the marker, even empty"
    );
    // The journal (when the disk took its lines at all) records no sha256 of that verb.json.
    for e in journal_of(&slot, "0002-snapshot") {
        assert_eq!(e.verb_sha256, None, "{e:?}");
        assert!(
            !e.ok && e.detail.contains("verb.json could not be written ("),
            "{e:?}"
        );
    }

    std::fs::remove_file(&fill).unwrap();
    let (code, out, err) = cli(&["report", &slot.to_string_lossy()], &[]);
    assert_eq!(code, Some(0), "no false alarm: {out}{err}");
    let md = std::fs::read_to_string(slot.join("report.md")).unwrap();
    assert!(
        !md.contains("NOT VERIFIED") && !md.contains("MISMATCH"),
        "{md}"
    );
    assert!(
        md.contains("| 0002-snapshot | snapshot | ❌ **incomplete** |")
            && md.contains("the verb could not write its verb.json (its incomplete.txt: "),
        "{md}"
    );
    let (code, out, err) = cli_slot("cleanup", "61", &sd, &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_released(&sd, &holders);
}

/// A verb whose work succeeded but whose evidence folder is full (a full tmpfs mounted on the
/// slot's `evidence/`): the snapshot is taken and `state.json` says checkpointed, and the verb
/// still fails (exit 2) — saying its work succeeded and stands, naming the evidence folder's
/// filesystem and pointing to `slot status` — with no `verb.json` sha256 in the journal.
#[test]
fn a_verb_whose_work_succeeded_into_a_full_evidence_folder_fails_and_keeps_its_phase() {
    let _baton = crate::common::baton(module_path!());
    let _serial = serial();
    let fs = Tmpfs::new("size=32m,mode=0755");
    let sd = fs.path().join("state");
    let (code, out, err) = cli_slot(
        "provision",
        "62",
        &sd,
        &["--no-probe-gate", "--reason", "test"],
    );
    let slot = sd.join("slot-62");
    let evd = slot.join("evidence");
    let _cleanup = FreedAndCleaned {
        sd: sd.clone(),
        slot: "62",
        fill: evd.join("fill"),
    };
    assert_eq!(code, Some(0), "{out}{err}");
    let holders = holder_pids(&sd);
    let keep = fs.path().join("evidence-before");
    let cp = |from: &Path, to: &Path| {
        let st = Command::new("cp").arg("-a").arg(from).arg(to).status();
        assert!(
            st.unwrap().success(),
            "cp -a {} {}",
            from.display(),
            to.display()
        );
    };
    cp(&evd, &keep);
    let evfs = TmpfsAt::new(&evd, "size=1m,mode=0755");
    cp(&keep.join("0001-provision"), &evd);
    fill_up(&evd.join("fill"));

    let (code, out, err) = cli_slot("snapshot", "62", &sd, &[]);
    assert_eq!(code, Some(2), "{out}{err}");
    let name = std::fs::read_dir(&evd)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with("-snapshot"))
        .unwrap();
    for needle in [
        "slot 62: the evidence of this snapshot is incomplete: ".to_string(),
        "verb.json (write: No space left on device (os error 28))".into(),
        format!(
            "the evidence folder {} is on the tmpfs filesystem netprobe-test-ev mounted at {} (0 bytes free now)",
            evd.join(&name).display(),
            evd.display()
        ),
        "the snapshot itself succeeded (snapshot snapshot-".into(),
        "the slot's phase is checkpointed as state.json records: that stands, only its evidence is incomplete".into(),
        format!("fix: free space in {} ", evd.display()),
        format!(
            "then see `netprobe slot status --slot 62 --state-dir {}`",
            sd.display()
        ),
    ] {
        assert!(err.contains(&needle), "{needle:?} not in {err}");
    }
    assert_eq!(
        slot_support::state(&sd, 62).phase,
        netprobe::slot::Phase::Checkpointed
    );
    let ends: Vec<_> = journal_of(&slot, &name)
        .into_iter()
        .filter(|e| e.event == "end")
        .collect();
    assert_eq!(
        ends.len(),
        1,
        "the journal is on the roomy filesystem: {ends:?}"
    );
    assert_eq!(ends[0].verb_sha256, None);
    assert!(
        !ends[0].ok && ends[0].detail.contains("the snapshot itself succeeded"),
        "{:?}",
        ends[0]
    );
    drop(evfs);
    let (code, out, err) = cli_slot("cleanup", "62", &sd, &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_released(&sd, &holders);
}
