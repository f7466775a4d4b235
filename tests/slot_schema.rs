//! `status` output validates against evidence-schema/slot-state.schema.json; the probe-verdict
//! gate proves the verdict from a real probe run's evidence (as `netprobe verify` does) and
//! refuses the same evidence once edited.
mod slot_support;
use netprobe::evidence::result::RESULT_FILE;
use netprobe::slot::{Verb, run_verb};
use serde_json::Value;
use slot_support::*;
use std::path::{Path, PathBuf};

/// A copy of the evidence folder `src` at `dst`, then `edit` applied to it.
fn variant(src: &Path, dst: &Path, edit: impl FnOnce(&Path)) -> PathBuf {
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(src)
        .arg(dst)
        .status()
        .unwrap();
    assert!(st.success());
    edit(dst);
    dst.to_path_buf()
}

/// Edits `netprobe-result.json` of `dir` (still schema-valid unless `edit` makes it not).
fn edit_result(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let p = dir.join(RESULT_FILE);
    let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

#[test]
fn status_validates_and_probe_gate() {
    require_root();
    let _s = serial();
    let v = slot_state_validator();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![41, 50, 51, 52, 53, 54, 55, 56]);
    let img = sleep_image(tmp.path());
    // A real probe run with the slot driver's default runtime and CRIU (the ones provision
    // uses; `netprobe run`'s own defaults follow the pins, see host::pinned_default_*).
    let ev = tmp.path().join("probe");
    let (rt, cr) = (
        netprobe::host::default_runtime(),
        netprobe::host::default_criu(),
    );
    let (code, out, err) = cli(
        &[
            "run",
            "--evidence",
            ev.to_str().unwrap(),
            "--quiet",
            "--runtime",
            rt.to_str().unwrap(),
            "--criu",
            cr.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, Some(0), "netprobe run: {out}{err}");
    assert!(
        out.contains("runtime-empty-ns") || out.contains("runtime-preserves-netns"),
        "{out}"
    );
    let prov = |slot: &str, ev: Option<PathBuf>| {
        let mut a = netprobe::slot::SlotArgs::new(Verb::Provision, slot, &sd);
        a.holder_exe = Some(EXE.into());
        a.image = Some(img.clone());
        a.probe_evidence = ev;
        run_verb(&a)
    };
    let zeros = "0".repeat(64);
    // Evidence that does not prove the verdict: refused before anything is started, naming the
    // first mismatch. `netprobe verify` is the reference for the first two edits.
    let cases: Vec<(PathBuf, &str)> = vec![
        (
            variant(&ev, &tmp.path().join("log-edited"), |d| {
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(d.join("criu/restore.log"))
                    .unwrap();
                std::io::Write::write_all(&mut f, b"(edited)\n").unwrap();
            }),
            "artifact criu/restore.log changed",
        ),
        (
            variant(&ev, &tmp.path().join("artifacts-emptied"), |d| {
                edit_result(d, |r| r["artifacts"] = Value::Array(vec![]))
            }),
            "not among the recorded artifacts",
        ),
        (
            variant(&ev, &tmp.path().join("verdict-edited"), |d| {
                edit_result(d, |r| r["verdict"]["code"] = "criu-netns".into())
            }),
            "does not reproduce",
        ),
        (
            variant(&ev, &tmp.path().join("runtime-sha"), |d| {
                edit_result(d, |r| r["host"]["runtime"]["sha256"] = zeros.clone().into())
            }),
            "probe ran runtime sha256",
        ),
        (
            variant(&ev, &tmp.path().join("criu-sha"), |d| {
                edit_result(d, |r| r["host"]["criu"]["sha256"] = zeros.clone().into())
            }),
            "probe ran CRIU sha256",
        ),
        (
            // Not valid against netprobe-result.schema.json: never trusted.
            variant(&ev, &tmp.path().join("invalid"), |d| {
                edit_result(d, |r| r["started_at"] = "yesterday".into())
            }),
            "schema",
        ),
    ];
    for (i, (dir, want)) in cases.iter().enumerate() {
        let slot = format!("{}", 50 + i);
        let e = prov(&slot, Some(dir.clone())).unwrap_err();
        assert_eq!(
            (e.exit_code(), e.gate.as_deref()),
            (1, Some("probe-verdict")),
            "{}: {e}",
            dir.display()
        );
        assert!(
            e.message.contains(want),
            "{}: want {want:?}: {e}",
            dir.display()
        );
        assert!(
            !sd.join(format!("slot-{slot}")).exists(),
            "a refused provision creates no slot"
        );
    }
    // The reference agrees on the edited log: `netprobe verify` rejects it (exit 1).
    let (code, _, _) = cli(&["verify", cases[0].0.to_str().unwrap()], &[]);
    assert_eq!(code, Some(1));
    let e = prov("56", None).unwrap_err();
    assert_eq!(e.gate.as_deref(), Some("probe-verdict"));
    assert_released(&sd, &[]);

    // Not provisioned: valid document with exists=false.
    assert_valid(&v, &ok(Verb::Status, "41", &sd).to_json());
    // The real evidence, unedited: proven from the files.
    let p = prov("41", Some(ev.clone())).unwrap_or_else(|e| panic!("{e}"));
    let g = gate(&p, "probe-verdict");
    assert!(g.proven && g.detail.contains("verified"), "{g:?}");
    let rec = state(&sd, 41).probe_gate;
    assert_eq!(rec.mode, "evidence");
    assert!(
        matches!(
            rec.verdict.as_deref(),
            Some("runtime-empty-ns" | "runtime-preserves-netns")
        ),
        "{rec:?}"
    );
    assert_valid(&v, &ok(Verb::Status, "41", &sd).to_json());
    ok(Verb::Snapshot, "41", &sd);
    assert_valid(&v, &ok(Verb::Status, "41", &sd).to_json());
    let holders = holder_pids(&sd);
    ok(Verb::Cleanup, "41", &sd);
    let doc = ok(Verb::Status, "41", &sd).to_json();
    assert_valid(&v, &doc);
    assert_eq!(doc["state"]["phase"], "clean");
    assert_released(&sd, &holders);
}
