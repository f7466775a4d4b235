//! `status` output validates against evidence-schema/slot-state.schema.json; the probe-verdict
//! gate proves the verdict from a real probe run's evidence (as `netprobe verify` does) and
//! refuses the same evidence once edited.
use crate::common::slot_support;
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
    let _baton = crate::common::baton(module_path!());
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
            // verify re-derives the host facts from host.json (hashed): the edit is caught there.
            "host.runtime.sha256: recorded ",
        ),
        (
            variant(&ev, &tmp.path().join("criu-sha"), |d| {
                edit_result(d, |r| r["host"]["criu"]["sha256"] = zeros.clone().into())
            }),
            "host.criu.sha256: recorded ",
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

/// The README's order through the binary: `netprobe run` with its own defaults (the pinned pair),
/// then `slot provision --probe-evidence` without `--runtime`/`--criu`: the slot takes the pair
/// the probe ran (fact `binaries_from`), so the probe gate proves it by sha256. A different
/// `--runtime` is refused naming both paths and the fix.
#[test]
fn provision_takes_the_probed_pair_by_default() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![57, 58]);
    let ev = tmp.path().join("probe");
    let (code, out, err) = cli(&["run", "--evidence", ev.to_str().unwrap(), "--quiet"], &[]);
    assert_eq!(code, Some(0), "netprobe run: {out}{err}");
    let res: Value =
        serde_json::from_slice(&std::fs::read(ev.join("netprobe-result.json")).unwrap()).unwrap();
    let (rt, cr) = (
        res["host"]["runtime"]["path"].as_str().unwrap().to_string(),
        res["host"]["criu"]["path"].as_str().unwrap().to_string(),
    );
    let sds = sd.to_string_lossy().to_string();
    let evs = ev.to_string_lossy().to_string();
    let (code, out, err) = cli(
        &[
            "slot",
            "provision",
            "--slot",
            "57",
            "--state-dir",
            &sds,
            "--probe-evidence",
            &evs,
            "--json",
        ],
        &[],
    );
    assert_eq!(code, Some(0), "provision: {out}{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc["facts"]["binaries_from"]["runtime"], "probe evidence",
        "{doc}"
    );
    assert_eq!(
        doc["facts"]["binaries_from"]["criu"], "probe evidence",
        "{doc}"
    );
    let st = state(&sd, 57);
    assert_eq!(st.runtime.path.to_string_lossy(), rt);
    assert_eq!(st.criu.path.to_string_lossy(), cr);
    let holders = holder_pids(&sd);
    let (code, out, err) = cli(
        &["slot", "cleanup", "--slot", "57", "--state-dir", &sds],
        &[],
    );
    assert_eq!(code, Some(0), "cleanup: {out}{err}");
    assert_released(&sd, &holders);

    // Another runtime than the probe's: refused, both paths and the fix named.
    let other = netprobe::host::default_runtime();
    if other.to_string_lossy() != rt {
        let (code, out, err) = cli(
            &[
                "slot",
                "provision",
                "--slot",
                "58",
                "--state-dir",
                &sds,
                "--probe-evidence",
                &evs,
                "--runtime",
                other.to_str().unwrap(),
            ],
            &[],
        );
        assert_eq!(code, Some(1), "{out}{err}");
        assert!(
            err.contains(&format!("probe ran runtime {rt}"))
                && err.contains(&format!("fix: provision with `--runtime {rt}`")),
            "{err}"
        );
    }
}
