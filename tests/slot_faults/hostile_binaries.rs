//! Binaries that lie about what they are (issue 35, item 1), set up for real:
//! - a `criu` wrapper script that prints CRIU 4.3's `--version` and runs CRIU 4.1.1: the criu
//!   rung proves the version from CRIU's own `dump.log` and stops there, naming both versions;
//!   the pin is not matched (a pin is matched by the sha256 set-up recorded, never by
//!   `--version`); `host.json` names the script and its interpreter, and so do the declared
//!   differences;
//! - a `runc` wrapper script that prints runc 1.4.3's `--version` and runs /usr/sbin/runc:
//!   `host.json` and the declared differences name the script; `slot provision --runtime
//!   <script>` is refused (exit 3, gate `runtime-binary`) and accepted with
//!   `--allow-script-binaries REASON`, recorded in `state.json` and the verb's facts.
//!
//! Nothing is left: no container, holder, mount or private folder.
use crate::common::slot_support;
use slot_support::*;
use std::path::{Path, PathBuf};

const CRIU_4_3: &str = "/opt/criu-4.3/sbin/criu";
const CRIU_4_1: &str = "/opt/criu-4.1.1/sbin/criu";
const RUNC_1_4: &str = "/opt/runc-1.4.3/sbin/runc";
const RUNC_HOST: &str = "/usr/sbin/runc";

fn prerequisites() {
    require_root();
    for b in [CRIU_4_3, CRIU_4_1, RUNC_1_4, RUNC_HOST] {
        assert!(
            Path::new(b).is_file(),
            "{b} missing: run sudo bash host/setup.sh"
        );
    }
}

fn script(dir: &Path, name: &str, body: String) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(name);
    netprobe::evidence::fsio::write_executable(&p, body, 0o755).unwrap();
    p
}

/// `criu`: `--version` answered by CRIU 4.3, everything else run by CRIU 4.1.1.
fn lying_criu(dir: &Path) -> PathBuf {
    script(
        dir,
        "criu",
        format!(
            "#!/bin/sh\ncase \"$1\" in --version) exec {CRIU_4_3} --version;; esac\nexec {CRIU_4_1} \"$@\"\n"
        ),
    )
}

/// `runc`: `--version` answered by runc 1.4.3, everything else run by the host's runc 1.1.5.
fn lying_runc(dir: &Path) -> PathBuf {
    script(
        dir,
        "runc",
        format!(
            "#!/bin/sh\ncase \"$1\" in --version) exec {RUNC_1_4} --version;; esac\nexec {RUNC_HOST} \"$@\"\n"
        ),
    )
}

fn result(ev: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(ev.join("netprobe-result.json")).unwrap()).unwrap()
}

fn rung<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["rungs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == name)
        .unwrap()
}

fn declared(r: &serde_json::Value) -> Vec<String> {
    r["declared_differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_string())
        .collect()
}

/// No private folder or runc log of `pid` left in the temporary folder.
fn no_tmp_leftovers(pid: u32) {
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.starts_with(&format!("netprobe-criu-path-{pid}-"))
                || n.starts_with(&format!("netprobe-runc-{pid}-"))
        })
        .collect();
    assert!(left.is_empty(), "left in the temporary folder: {left:?}");
}

#[test]
fn a_criu_script_claiming_4_3_that_runs_4_1_1_stops_the_criu_rung() {
    let _baton = crate::common::baton(module_path!());
    prerequisites();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let criu = lying_criu(&tmp.path().join("bin"));
    let ev = tmp.path().join("ev");
    let (code, out, err) = cli(
        &[
            "run",
            "--phases",
            "kernel,criu",
            "--criu",
            criu.to_str().unwrap(),
            "--evidence",
            ev.to_str().unwrap(),
        ],
        &[],
    );
    let r = result(&ev);
    let c = rung(&r, "criu");
    assert_ne!(c["status"], "pass", "{out}{err}");
    assert_eq!(
        c["error"].as_str().unwrap(),
        format!(
            "criu identity: {} reports CRIU 4.3 (--version), but the CRIU that ran says 4.1.1 in its own log {}: a binary whose --version names another CRIU than the one it runs (a wrapper script?) is not the CRIU 4.3 requested",
            criu.display(),
            ev.join("criu/dump.log").display()
        ),
        "{out}{err}"
    );
    assert_eq!(code, Some(4), "{out}{err}");
    assert_ne!(r["verdict"]["code"], "runtime-preserves-netns");
    // The pin is not matched: a 4.3 `--version` is not CRIU 4.3's bytes.
    let pin = r["pins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "criu")
        .unwrap();
    assert_eq!(pin["matches"], false, "{pin}");
    assert_eq!(pin["observed_version"], "4.3");
    // host.json names the script and its interpreter; so do the declared differences.
    let host: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ev.join("host.json")).unwrap()).unwrap();
    assert_eq!(host["criu"]["script_interpreter"], "/bin/sh", "{host}");
    let d = declared(&r);
    let want = format!(
        "criu {} is not an ELF executable but a script run by /bin/sh: the version and sha256 recorded are the script's, not those of the program it runs",
        criu.display()
    );
    assert!(d.contains(&want), "{d:#?}");
    let bytes = std::fs::metadata(&criu).unwrap().len();
    let pin_sentence = d
        .iter()
        .find(|s| s.starts_with(&format!("criu {} is CRIU 4.3", criu.display())))
        .unwrap_or_else(|| panic!("{d:#?}"));
    assert!(
        pin_sentence.ends_with(&format!(
            "{bytes} bytes), not the pinned CRIU 4.3: only its --version says so; the pin names no sha256 and no netprobe-install.json of set-up records this binary's"
        )),
        "{pin_sentence}"
    );
    // The folder verifies: the facts and sentences are re-derived from host.json.
    let (vcode, vout, verr) = cli(&["verify", ev.to_str().unwrap()], &[]);
    assert_eq!(vcode, Some(0), "{vout}{verr}");
    no_tmp_leftovers(std::process::id());
}

#[test]
fn a_runc_script_is_named_in_the_facts_and_refused_by_provision_unless_allowed() {
    let _baton = crate::common::baton(module_path!());
    prerequisites();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let runc = lying_runc(&tmp.path().join("bin"));
    // The ladder: host.json names the script; the declared differences say so.
    let ev = tmp.path().join("ev");
    let (_, out, err) = cli(
        &[
            "run",
            "--phases",
            "kernel,oci",
            "--runtime",
            runc.to_str().unwrap(),
            "--criu",
            CRIU_4_3,
            "--evidence",
            ev.to_str().unwrap(),
        ],
        &[],
    );
    let host: serde_json::Value = serde_json::from_slice(
        &std::fs::read(ev.join("host.json")).unwrap_or_else(|e| panic!("{e}: {out}{err}")),
    )
    .unwrap();
    assert_eq!(host["runtime"]["script_interpreter"], "/bin/sh", "{host}");
    assert_eq!(host["runtime"]["version"], "1.4.3+ds1");
    let r = result(&ev);
    let d = declared(&r);
    let want = format!(
        "runtime {} is not an ELF executable but a script run by /bin/sh: the version and sha256 recorded are the script's, not those of the program it runs",
        runc.display()
    );
    assert!(d.contains(&want), "{d:#?}");

    // The slot: refused with exit 3, nothing made.
    let sd = state_dir(&tmp);
    let (code, out, err) = cli_slot(
        "provision",
        "93",
        &sd,
        &[
            "--runtime",
            runc.to_str().unwrap(),
            "--criu",
            CRIU_4_3,
            "--no-probe-gate",
            "--reason",
            "test",
        ],
    );
    assert_eq!(code, Some(3), "{out}{err}");
    let sentence = format!(
        "{} is not an ELF executable but a script run by /bin/sh: a slot seals and proves the file it is given, so it would prove the script, not the OCI runtime the script runs; name that OCI runtime itself with --runtime, or pass --allow-script-binaries REASON to run the script all the same (recorded in state.json)",
        runc.display()
    );
    assert!(err.contains(&sentence), "{err}");
    assert!(err.contains("runtime-binary"), "{err}");
    assert!(!sd.join("slot-93/state.json").exists());

    // Accepted with the explicit flag, recorded.
    let _c = CleanupOnDrop(sd.clone(), vec![93]);
    let (code, out, err) = cli_slot(
        "provision",
        "93",
        &sd,
        &[
            "--runtime",
            runc.to_str().unwrap(),
            "--criu",
            CRIU_4_3,
            "--no-probe-gate",
            "--reason",
            "test",
            "--allow-script-binaries",
            "a wrapper under test",
            "--json",
        ],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let st: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sd.join("slot-93/state.json")).unwrap()).unwrap();
    assert_eq!(
        st["runtime"]["script"],
        serde_json::json!({"interpreter": "/bin/sh", "reason": "a wrapper under test"})
    );
    assert!(st["criu"].get("script").is_none(), "{}", st["criu"]);
    let o: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        o["facts"]["runtime"]["script_allowed"], "a wrapper under test",
        "{o}"
    );
    assert_eq!(o["facts"]["runtime"]["script_interpreter"], "/bin/sh");
    let holders = holder_pids(&sd);
    let (code, out, err) = cli_slot("cleanup", "93", &sd, &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_released(&sd, &holders);
    no_tmp_leftovers(std::process::id());
}
