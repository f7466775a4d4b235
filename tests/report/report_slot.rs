//! `netprobe report SLOT_DIR` (and a verb's evidence folder) on a slot folder the test makes
//! itself, with real PNGs written by netprobe's own display gates (`x11::pixel_gate`): the
//! report shows per verb the gates with their facts and outcome, and for the failed restore the
//! before, after and diff pictures by relative path with their sha256 (checked again: a PNG
//! changed after its gate wrote it shows as DIFFERS), the differing-pixel count and bounding
//! box; hostile text is escaped in both formats; no evidence file is touched (only
//! `report.{html,md}` appear); a state directory is refused. The same report on a real desktop
//! slot run is asserted in tests/desktop/slot_desktop.rs.

use netprobe::report::{Format, write_report};
use netprobe::x11::{GateRecord, Screenshot, pixel_gate, write_artifact};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const HOSTILE: &str = "<script>alert(1)</script>|`x`";

fn screen(w: u32, h: u32, f: impl Fn(u32, u32) -> [u8; 3]) -> Screenshot {
    let mut rgb = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h {
        for x in 0..w {
            rgb.extend_from_slice(&f(x, y));
        }
    }
    Screenshot::new(w, h, rgb).unwrap()
}

fn gate(name: &str, proven: bool, detail: &str) -> Value {
    json!({"name": name, "fact": format!("the fact of {name}"), "proven": proven,
           "detail": detail, "blocking": true, "class": "gate"})
}

fn verb_doc(verb: &str, ok: bool, gates: Vec<Value>, display: &[&GateRecord]) -> Value {
    let error = (!ok).then(|| {
        json!({"kind": "gate", "slot": "4", "gate": "pixels-equal",
               "message": format!("slot 4: gate `pixels-equal` failed: {HOSTILE}"),
               "exit_code": 1})
    });
    json!({
        "tool": "netprobe", "tool_version": "test", "verb": verb, "slot": 4, "ok": ok,
        "summary": ok.then(|| format!("{verb} done")), "error": error,
        "started_at": "2026-12-01T05:00:00Z", "finished_at": "2026-12-01T05:00:01Z",
        "timings_ms": {"total": 321, "restore": 200, "pixels-equal": 40},
        "gates": gates, "facts": {"display_gates": display}, "phase": "running",
        "declared_differences": [format!("declared {HOSTILE}")],
    })
}

fn write_json(p: &Path, v: &Value) {
    std::fs::write(p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

/// Every file under `dir` with its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut m = BTreeMap::new();
    for e in walk(dir) {
        m.insert(e.clone(), std::fs::read(&e).unwrap());
    }
    m
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            v.extend(walk(&p));
        } else {
            v.push(p);
        }
    }
    v
}

/// A slot folder: provision (ok), snapshot (ok, the reference screen), restore (FAILED: a
/// 20x10 block differs at (30,5)), and a verb folder without `verb.json` (interrupted).
fn make_slot(root: &Path) -> PathBuf {
    std::fs::write(root.join(".netprobe-state-dir"), "marker\n").unwrap();
    let slot = root.join("slot-4");
    let ev = slot.join("evidence");
    for d in [
        "0001-provision",
        "0002-snapshot",
        "0003-restore",
        "0004-reset",
    ] {
        std::fs::create_dir_all(ev.join(d)).unwrap();
    }
    write_json(
        &slot.join("owner.json"),
        &json!({"tool": "netprobe", "slot": 4}),
    );
    write_json(
        &slot.join("state.json"),
        &json!({"phase": "restore-failed", "profile": {"name": "desk<top>"}}),
    );
    write_json(
        &ev.join("0001-provision/verb.json"),
        &verb_doc(
            "provision",
            true,
            vec![gate("display-geometry", true, "1920x1080")],
            &[],
        ),
    );
    let before = screen(64, 32, |x, y| [x as u8, y as u8, 7]);
    let snap = write_artifact(&ev.join("0002-snapshot"), "screen.png", &before).unwrap();
    let q = GateRecord {
        gate: "screen-quiescent".into(),
        passed: true,
        detail: "two screenshots 250 ms apart are pixel-equal".into(),
        diff: None,
        pngs: vec![snap],
        elapsed_ms: 260,
    };
    write_json(
        &ev.join("0002-snapshot/verb.json"),
        &verb_doc(
            "snapshot",
            true,
            vec![gate("screen-quiescent", true, "still")],
            &[&q],
        ),
    );
    let after = screen(64, 32, |x, y| {
        if (30..50).contains(&x) && (5..15).contains(&y) {
            [255, 255, 255]
        } else {
            [x as u8, y as u8, 7]
        }
    });
    let rd = ev.join("0003-restore");
    let b = write_artifact(&rd, "screen-snapshot.png", &before).unwrap();
    let mut px = pixel_gate(&before, &after, &rd, "screen-after").unwrap();
    px.pngs.insert(0, b);
    assert!(!px.passed);
    let gates = vec![
        gate("net-fidelity", true, "byte-equal"),
        gate("pixels-equal", false, &px.detail),
        gate("config-hash", true, HOSTILE),
    ];
    write_json(
        &rd.join("verb.json"),
        &verb_doc("restore", false, gates, &[&px]),
    );
    std::fs::write(rd.join("runtime.log"), "restore ok\n").unwrap();
    journal_every_verb(&slot);
    slot
}

/// The slot's `journal.jsonl` as the verbs write it: a start and an end (with `verb.json`'s
/// sha256) for every verb folder holding a `verb.json`.
fn journal_every_verb(slot: &Path) {
    let ev = slot.join("evidence");
    let mut names: Vec<String> = std::fs::read_dir(&ev)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| ev.join(n).join("verb.json").is_file())
        .collect();
    names.sort();
    let mut lines = Vec::new();
    for n in names {
        let verb = n.split_once('-').unwrap().1;
        let sha = netprobe::evidence::sha256_file(&ev.join(&n).join("verb.json"))
            .unwrap()
            .0;
        lines.push(
            json!({"at": "2026-12-01T05:00:00Z", "pid": 1, "verb": verb, "event": "start",
                   "ok": true, "detail": format!("evidence {}", ev.join(&n).display())})
            .to_string(),
        );
        lines.push(
            json!({"at": "2026-12-01T05:00:01Z", "pid": 1, "verb": verb, "event": "end",
                   "ok": true, "detail": "d", "evidence": n, "verb_sha256": sha})
            .to_string(),
        );
    }
    std::fs::write(slot.join("journal.jsonl"), lines.join("\n") + "\n").unwrap();
}

#[test]
fn slot_report_shows_before_after_diff_gates_and_escapes() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let slot = make_slot(tmp.path());
    let evidence_before = files(&slot.join("evidence"));
    let html_path = write_report(&slot, Format::Html).unwrap();
    assert_eq!(html_path, slot.join("report.html"));
    let html = std::fs::read_to_string(&html_path).unwrap();
    for f in [
        "screen-snapshot.png",
        "screen-after.png",
        "screen-after-diff.png",
    ] {
        let rel = format!("evidence/0003-restore/{f}");
        assert!(
            html.contains(&format!("<img src=\"./{rel}\"")),
            "{f} not shown: {html}"
        );
        assert!(slot.join(&rel).is_file(), "{rel} does not exist");
        let sha = netprobe::evidence::sha256_file(&slot.join(&rel)).unwrap().0;
        assert!(html.contains(&sha), "{f}'s sha256 not shown");
    }
    assert!(html.contains("<img src=\"./evidence/0002-snapshot/screen.png\""));
    assert!(
        html.contains("<strong>200</strong> of 2048 pixels differ"),
        "{html}"
    );
    assert!(html.contains("bounding box x 30 y 5, 20x10"), "{html}");
    assert!(html.contains("the fact of pixels-equal") && html.contains("NOT PROVEN"));
    assert!(html.contains("(matches)") && !html.contains("DIFFERS"));
    assert!(html.contains("0004-reset") && html.contains("incomplete"));
    assert!(html.contains("restore-failed") && html.contains("desk&lt;top&gt;"));
    // Escaping: no markup from the evidence reaches the page.
    assert!(!html.contains("<script>"), "unescaped script");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));

    let md = std::fs::read_to_string(write_report(&slot, Format::Markdown).unwrap()).unwrap();
    for f in [
        "screen-snapshot.png",
        "screen-after.png",
        "screen-after-diff.png",
    ] {
        assert!(
            md.contains(&format!("](./evidence/0003-restore/{f})")),
            "{f} not in the Markdown"
        );
    }
    assert!(
        !md.contains("<script>") && md.contains("&lt;script&gt;"),
        "{md}"
    );
    assert!(
        md.contains(r"\|"),
        "a table-breaking | must be escaped: {md}"
    );

    // No evidence file was touched; only the two reports appeared beside it.
    assert_eq!(files(&slot.join("evidence")), evidence_before);
    let mut top: Vec<String> = std::fs::read_dir(&slot)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(
        top,
        [
            "evidence",
            "journal.jsonl",
            "owner.json",
            "report.html",
            "report.md",
            "state.json"
        ]
    );

    // A PNG changed after its gate recorded it is flagged on the next report.
    let diff_png = slot.join("evidence/0003-restore/screen-after-diff.png");
    std::fs::write(&diff_png, b"not the recorded bytes").unwrap();
    let html = std::fs::read_to_string(write_report(&slot, Format::Html).unwrap()).unwrap();
    assert!(html.contains("DIFFERS"), "a changed PNG was not flagged");
}

#[test]
fn verb_folder_report_and_state_dir_refusal() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let slot = make_slot(tmp.path());
    let rd = slot.join("evidence/0003-restore");
    let html = std::fs::read_to_string(write_report(&rd, Format::Html).unwrap()).unwrap();
    for f in [
        "screen-snapshot.png",
        "screen-after.png",
        "screen-after-diff.png",
    ] {
        assert!(html.contains(&format!("<img src=\"./{f}\"")), "{f}: {html}");
    }
    assert!(html.contains("./runtime.log"));
    assert!(rd.join("report.html").is_file());

    let e = write_report(tmp.path(), Format::Html)
        .unwrap_err()
        .to_string();
    assert!(e.contains("state directory") && e.contains("slot-N"), "{e}");
    // The state directory's own slot folders are named, not only the pattern.
    assert!(e.contains(&slot.display().to_string()), "{e}");
    assert!(!tmp.path().join("report.html").exists());
}

#[test]
fn a_png_name_leaving_the_folder_is_neither_opened_nor_linked() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let slot = make_slot(tmp.path());
    let rd = slot.join("evidence/0004-reset");
    let rec = GateRecord {
        gate: "pixels-equal".into(),
        passed: false,
        detail: "x".into(),
        diff: None,
        pngs: vec![netprobe::x11::PngArtifact {
            file: "../../../owner.json".into(),
            sha256: "0".repeat(64),
        }],
        elapsed_ms: 1,
    };
    write_json(
        &rd.join("verb.json"),
        &verb_doc("reset", false, vec![], &[&rec]),
    );
    let html = std::fs::read_to_string(write_report(&slot, Format::Html).unwrap()).unwrap();
    assert!(html.contains("not a file name inside the verb"), "{html}");
    assert!(!html.contains("src=\"./evidence/0004-reset/../"), "{html}");
}

/// A verb folder holding `interrupted.txt` and no `verb.json` (the verb was stopped by a signal)
/// is shown as interrupted, quoting the note's first line (escaped), in both formats; a folder
/// with neither stays incomplete.
#[test]
fn an_interrupted_verb_is_shown_as_interrupted_with_its_note() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let slot = make_slot(tmp.path());
    let d = slot.join("evidence/0005-restore");
    std::fs::create_dir_all(&d).unwrap();
    let first =
        "netprobe slot restore was interrupted by SIGINT at 2026-12-01T10:00:00Z; <b>x</b> | y";
    std::fs::write(d.join("interrupted.txt"), format!("{first}\nsecond line\n")).unwrap();
    let html = std::fs::read_to_string(write_report(&slot, Format::Html).unwrap()).unwrap();
    assert!(
        html.contains("<span class=\"badge warn\">interrupted</span>"),
        "{html}"
    );
    assert!(
        html.contains("interrupted by SIGINT at 2026-12-01T10:00:00Z; &lt;b&gt;x&lt;/b&gt;"),
        "{html}"
    );
    assert!(!html.contains("second line"), "{html}");
    assert!(
        html.contains("./evidence/0005-restore/interrupted.txt"),
        "{html}"
    );
    // Only the folder without a note says its verb.json is missing.
    assert_eq!(
        html.matches("verb.json: No such file").count(),
        2,
        "0004-reset (row and section) only: {html}"
    );
    let md = std::fs::read_to_string(write_report(&slot, Format::Markdown).unwrap()).unwrap();
    let row = md
        .lines()
        .find(|l| l.starts_with("| 0005-restore"))
        .unwrap_or_else(|| panic!("no row for 0005-restore: {md}"));
    assert!(
        row.contains("**interrupted**")
            && row.contains("interrupted.txt: “netprobe slot restore was interrupted by SIGINT"),
        "{row}"
    );
    assert!(!row.contains("verb.json"), "{row}");
    assert!(
        md.contains("| 0004-reset | reset | ❌ **incomplete**"),
        "{md}"
    );
}

/// A verb folder whose `verb.json` says the verb was interrupted (the note writes it with the
/// timings and gates so far) is shown as interrupted, not FAILED, with the note's first line,
/// its total time and gates; without `interrupted.txt` the text is the signal `verb.json` names
/// (not quoted as the note).
#[test]
fn a_verb_json_that_says_interrupted_is_shown_as_interrupted() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let slot = make_slot(tmp.path());
    let mut doc = verb_doc(
        "restore",
        false,
        vec![gate("net-fidelity", true, "eq")],
        &[],
    );
    doc["error"] = Value::Null;
    doc["interrupted"] = json!({"signal": "SIGTERM", "exit_code": 143,
                                "released": ["container x"], "evidence_in_flight": []});
    for (n, note) in [("0005-restore", true), ("0006-restore", false)] {
        let d = slot.join("evidence").join(n);
        std::fs::create_dir_all(&d).unwrap();
        write_json(&d.join("verb.json"), &doc);
        if note {
            let first = "netprobe slot restore was interrupted by SIGTERM at 2026-12-01T10:00:00Z";
            std::fs::write(d.join("interrupted.txt"), format!("{first}\nreleased\n")).unwrap();
        }
    }
    let md = std::fs::read_to_string(write_report(&slot, Format::Markdown).unwrap()).unwrap();
    let row = |name: &str| {
        md.lines()
            .find(|l| l.starts_with(&format!("| {name}")))
            .unwrap_or_else(|| panic!("no row for {name}: {md}"))
            .to_string()
    };
    let r5 = row("0005-restore");
    assert!(
        r5.contains("**interrupted**")
            && r5.contains("| 321 |")
            && r5.contains("interrupted.txt: “netprobe slot restore was interrupted by SIGTERM"),
        "{r5}"
    );
    let r6 = row("0006-restore");
    assert!(
        r6.contains("**interrupted**")
            && r6.contains(
                "verb.json: interrupted by SIGTERM (exit 143); no readable interrupted.txt"
            )
            && !r6.contains("interrupted.txt: “"),
        "{r6}"
    );
    assert!(
        !r5.contains("FAILED") && !r6.contains("FAILED"),
        "{r5}\n{r6}"
    );
    assert!(
        md.contains("### 0005-restore: restore ⏹ **interrupted**"),
        "{md}"
    );
}

/// Each verb's `verb.json` is checked against the sha256 the slot's journal recorded at the
/// verb's end: matches, DIFFERS (edited after the verb wrote it: the page says NOT VERIFIED,
/// `write_report_verified` says not reproduced), or unchecked (no end with a hash).
#[test]
fn an_edited_verb_json_is_named_against_the_journal() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let slot = make_slot(tmp.path());
    let ev = slot.join("evidence");
    let sha = |p: &Path| netprobe::evidence::sha256_file(p).unwrap().0;
    let end = |name: &str, ok: bool| {
        json!({"at": "2026-12-01T05:00:01Z", "pid": 1, "verb": name.split_once('-').unwrap().1,
               "event": "end", "ok": ok, "detail": "d", "evidence": name,
               "verb_sha256": sha(&ev.join(name).join("verb.json"))})
        .to_string()
    };
    // The snapshot's end recorded without a hash (as before netprobe kept them): unchecked.
    let legacy = json!({"at": "2026-12-01T05:00:01Z", "pid": 1, "verb": "snapshot",
                        "event": "end", "ok": true, "detail": "d", "evidence": "0002-snapshot"})
    .to_string();
    let journal = [
        end("0001-provision", true),
        legacy.clone(),
        end("0003-restore", false),
    ]
    .join("\n")
        + "\n";
    std::fs::write(slot.join("journal.jsonl"), &journal).unwrap();
    let md = std::fs::read_to_string(write_report(&slot, Format::Markdown).unwrap()).unwrap();
    assert!(!md.contains("NOT VERIFIED"), "{md}");
    assert!(
        md.contains("verb.json has the sha256 journal.jsonl recorded"),
        "{md}"
    );
    assert!(
        md.contains("journal.jsonl records no end of this folder"),
        "{md}"
    );

    // The failed restore's verb.json made to say it succeeded.
    let p = ev.join("0003-restore/verb.json");
    let unforged = std::fs::read(&p).unwrap();
    let mut v: Value = serde_json::from_slice(&unforged).unwrap();
    v["ok"] = json!(true);
    v["summary"] = json!("restored fine, all gates proven");
    write_json(&p, &v);
    let (path, reproduced) =
        netprobe::report::write_report_verified(&slot, Format::Markdown, |_, _| None).unwrap();
    assert_eq!(reproduced, Some(false));
    let md = std::fs::read_to_string(path).unwrap();
    assert!(
        md.contains("**NOT VERIFIED**: this evidence differs from what the slot recorded when each verb ended"),
        "{md}"
    );
    assert!(
        md.contains("MISMATCH: 0003-restore: verb.json sha256")
            && md.contains("failed at 2026-12-01T05:00:01Z"),
        "{md}"
    );
    let html = std::fs::read_to_string(write_report(&slot, Format::Html).unwrap()).unwrap();
    assert!(html.contains("NOT VERIFIED"), "{html}");

    // The same forgery with the journal's end made to match (the new sha256, ok): the verb's
    // success is re-derived from its gates (`pixels-equal` blocking, NOT PROVEN), never shown
    // as ok; the MISMATCH names the folder, the gate and the recorded ok.
    v["error"] = Value::Null;
    write_json(&p, &v);
    journal_every_verb(&slot);
    let (path, reproduced) =
        netprobe::report::write_report_verified(&slot, Format::Markdown, |_, _| None).unwrap();
    assert_eq!(reproduced, Some(false));
    let md = std::fs::read_to_string(path).unwrap();
    assert!(
        md.contains("MISMATCH: 0003-restore/verb.json records ok: true, but its blocking gate \\`pixels-equal\\`"),
        "{md}"
    );
    assert!(
        md.contains("### 0003-restore: restore ❌ **MISMATCH**"),
        "{md}"
    );
    assert!(!md.contains("restore ✅ ok"), "{md}");
    assert_eq!(
        netprobe::report::slot_mismatches(&slot).len(),
        1,
        "only the contradiction: the journal matches"
    );
    std::fs::write(&p, &unforged).unwrap();

    // The journal's end line deleted (its start kept): NOT VERIFIED too, not unchecked.
    let start = |name: &str| {
        json!({"at": "2026-12-01T05:00:00Z", "pid": 1, "verb": name.split_once('-').unwrap().1,
               "event": "start", "ok": true,
               "detail": format!("evidence {}", ev.join(name).display())})
        .to_string()
    };
    let journal = [
        start("0001-provision"),
        end("0001-provision", true),
        start("0003-restore"),
    ]
    .join("\n")
        + "\n";
    std::fs::write(slot.join("journal.jsonl"), journal).unwrap();
    let (_, reproduced) =
        netprobe::report::write_report_verified(&slot, Format::Markdown, |_, _| None).unwrap();
    assert_eq!(reproduced, Some(false));
    let md = std::fs::read_to_string(slot.join("report.md")).unwrap();
    assert!(
        md.contains("MISMATCH: 0003-restore: journal.jsonl records this verb's start but no end"),
        "{md}"
    );

    // A line that is no journal entry added to the journal: NOT VERIFIED, naming the line; a
    // last line cut without its newline (a crash while it was written) is not flagged.
    journal_every_verb(&slot);
    let good = std::fs::read_to_string(slot.join("journal.jsonl")).unwrap();
    std::fs::write(slot.join("journal.jsonl"), format!("{good}not json\n")).unwrap();
    let (_, reproduced) =
        netprobe::report::write_report_verified(&slot, Format::Markdown, |_, _| None).unwrap();
    assert_eq!(reproduced, Some(false));
    let md = std::fs::read_to_string(slot.join("report.md")).unwrap();
    let n = good.lines().count() + 1;
    assert!(
        md.contains(&format!(
            "MISMATCH: journal.jsonl: line(s) {n} are not journal entries"
        )),
        "{md}"
    );
    std::fs::write(slot.join("journal.jsonl"), format!("{good}{{\"at\": \"20")).unwrap();
    let (_, reproduced) =
        netprobe::report::write_report_verified(&slot, Format::Markdown, |_, _| None).unwrap();
    assert_ne!(
        reproduced,
        Some(false),
        "a crash-cut last line is not an edit"
    );

    // The journal emptied, or gone: no verb.json can be shown to be the one its verb wrote.
    for cut in [Some(""), None] {
        match cut {
            Some(text) => std::fs::write(slot.join("journal.jsonl"), text).unwrap(),
            None => std::fs::remove_file(slot.join("journal.jsonl")).unwrap(),
        }
        let (_, reproduced) =
            netprobe::report::write_report_verified(&slot, Format::Markdown, |_, _| None).unwrap();
        assert_eq!(reproduced, Some(false), "{cut:?}");
        let md = std::fs::read_to_string(slot.join("report.md")).unwrap();
        assert!(
            md.contains("MISMATCH: 0001-provision: journal.jsonl has no record of this verb"),
            "{md}"
        );
    }
}

/// A finished verb's `verb.json` lists its other files (path, bytes, sha256, as the slot driver
/// writes it); `netprobe report` hashes them again. An edited `netstate-after.json`,
/// `gates.json` or `cgroup-limits-restore.json`, a line appended to `criu-work/restore.log`, a
/// listed file removed, a file added: each is a MISMATCH naming the file and the page says NOT
/// VERIFIED (the binary exits 1) while `verb.json` itself still matches the journal.
#[test]
fn a_listed_file_edited_after_its_verb_is_named() {
    let _baton = crate::common::baton(module_path!());
    use netprobe::evidence::EvidenceDir;
    use netprobe::evidence::enclosing::SLOT_VERB_UNLISTED;
    let tmp = tempfile::tempdir().unwrap();
    let slot = make_slot(tmp.path());
    let rd = slot.join("evidence/0003-restore");
    std::fs::write(rd.join("netstate-after.json"), "{\"links\": []}\n").unwrap();
    std::fs::write(rd.join("gates.json"), "[]").unwrap();
    std::fs::write(rd.join("cgroup-limits-restore.json"), "{\"cpu\": 1}").unwrap();
    std::fs::create_dir(rd.join("criu-work")).unwrap();
    std::fs::write(rd.join("criu-work/restore.log"), "(00.000001) restored\n").unwrap();
    let listed = EvidenceDir::open(&rd)
        .unwrap()
        .inventory_except(&SLOT_VERB_UNLISTED)
        .unwrap();
    let p = rd.join("verb.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    v["artifacts"] = json!(listed);
    write_json(&p, &v);
    journal_every_verb(&slot);
    let report = || {
        let (path, reproduced) =
            netprobe::report::write_report_verified(&slot, Format::Markdown, |_, _| None).unwrap();
        (std::fs::read_to_string(path).unwrap(), reproduced)
    };
    let (md, reproduced) = report();
    assert_ne!(reproduced, Some(false), "{md}");
    assert!(
        md.contains(&format!(
            "Files against verb.json: the folder's {} other file(s) have the sha256 and size verb.json lists",
            listed.len()
        )),
        "{md}"
    );
    assert!(
        md.contains("Files against verb.json: verb.json lists no artifacts"),
        "the older verbs (no list) are unchecked: {md}"
    );

    type Edit = fn(&Path);
    let edits: [(&str, Edit); 4] = [
        ("netstate-after.json", |f| {
            std::fs::write(f, "{\"links\": [1]}\n").unwrap()
        }),
        ("gates.json", |f| std::fs::write(f, "[{}]").unwrap()),
        ("cgroup-limits-restore.json", |f| {
            std::fs::write(f, "{\"cpu\": 2}").unwrap()
        }),
        ("criu-work/restore.log", |f| {
            let mut l = std::fs::OpenOptions::new().append(true).open(f).unwrap();
            std::io::Write::write_all(&mut l, b"(00.000002) edited\n").unwrap();
        }),
    ];
    for (file, edit) in edits {
        let f = rd.join(file);
        let orig = std::fs::read(&f).unwrap();
        edit(&f);
        let (md, reproduced) = report();
        assert_eq!(reproduced, Some(false), "{file}: {md}");
        assert!(
            md.contains(&format!("- MISMATCH: 0003-restore: {file}: sha256 "))
                && md.contains("the file was changed after the verb wrote it"),
            "{file}: {md}"
        );
        assert!(
            md.contains("verb.json has the sha256 journal.jsonl recorded"),
            "{md}"
        );
        if file == "netstate-after.json" {
            // The binary exits 1 and names the file on stderr.
            let o = std::process::Command::new(crate::common::EXE)
                .arg("report")
                .arg(&slot)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{err}");
            assert!(
                err.contains("MISMATCH: 0003-restore: netstate-after.json: sha256 "),
                "{err}"
            );
        }
        std::fs::write(&f, orig).unwrap();
    }
    assert_ne!(report().1, Some(false), "all put back");

    // A listed file removed, a file added.
    let limits = rd.join("cgroup-limits-restore.json");
    let orig = std::fs::read(&limits).unwrap();
    std::fs::remove_file(&limits).unwrap();
    std::fs::write(rd.join("added.txt"), "x").unwrap();
    let (md, reproduced) = report();
    assert_eq!(reproduced, Some(false));
    assert!(
        md.contains("- MISMATCH: 0003-restore: cgroup-limits-restore.json: listed in verb.json"),
        "{md}"
    );
    assert!(
        md.contains("- MISMATCH: 0003-restore: added.txt: in the folder but not among the artifacts verb.json lists"),
        "{md}"
    );
    std::fs::write(&limits, orig).unwrap();
    std::fs::remove_file(rd.join("added.txt")).unwrap();
    // A report written into the verb folder itself is not an added file.
    let (path, reproduced) =
        netprobe::report::write_report_verified(&rd, Format::Markdown, |_, _| None).unwrap();
    assert_eq!(path, rd.join("report.md"));
    assert_ne!(reproduced, Some(false));
    assert_ne!(report().1, Some(false));
}
