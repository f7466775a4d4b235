//! `netprobe slot …` through the real binary: the exit codes of the README's table (1 a gate
//! failed, 2 usage, 3 host refused, 4 could not run), `--json` output (errors and `status`, the
//! latter validated against `evidence-schema/slot-state.schema.json`), and nothing left behind.
use crate::common::slot_support;
use slot_support::*;

/// Exit 2: malformed slot numbers and bad option combinations; nothing is created.
#[test]
fn usage_errors_exit_2() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let sd = tmp.path().join("state");
    for bad in ["01", "-1", "1000", "../1", "a", "1/2"] {
        let (code, _, err) = cli_slot("status", bad, &sd, &[]);
        assert_eq!(code, Some(2), "slot {bad:?}: {err}");
        assert!(err.contains("slot") && err.contains("usage"), "{err}");
    }
    let (code, _, err) = cli(
        &["slot", "frobnicate", "--slot", "1", "--state-dir", "x"],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = cli_slot(
        "provision",
        "1",
        &sd,
        &["--image", "/x.qcow2", "--no-probe-gate", "--reason", "r"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--image-sha256"), "{err}");
    let (code, out, err) = cli_slot("snapshot", "1", &sd, &["--image", "/x", "--json"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(json(&out)["kind"], "usage");
    assert_eq!(json(&out)["exit_code"], 2);
    assert!(!sd.exists(), "a usage error creates nothing");
}

/// Exit 2 at load for a profile that is not a regular file of at most 1 MiB (`/dev/zero` used
/// to fill memory), a missing `[image]` table (the fix says to add it), a readiness timeout
/// over 1 hour, memory beyond 1 TiB, a tmpfs on `/`; each names the file, the key and the fix,
/// and nothing is created, not even the missing state directory.
#[test]
fn bad_profiles_exit_2_at_load_and_create_nothing() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let sd = tmp.path().join("state");
    let fifo = tmp.path().join("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let good = "schema_version = 1\nname = \"t\"\n[image]\nkind = \"embedded\"\n\
                [process]\nargs = [\"/bin/sh\"]\n";
    let write = |name: &str, text: String| {
        let p = tmp.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().to_string()
    };
    let cases = [
        (
            "/dev/zero".to_string(),
            "it is a character device, not a regular file",
        ),
        (fifo.to_string_lossy().to_string(), "it is a FIFO"),
        (
            write("big.toml", format!("{good}{}", "#".repeat(2 << 20))),
            "cap of 1048576 bytes",
        ),
        (
            write(
                "noimage.toml",
                good.replace("[image]\nkind = \"embedded\"\n", ""),
            ),
            "fix: add the missing key",
        ),
        (
            write(
                "timeout.toml",
                format!("readiness_timeout_ms = 18446744073709551615\n{good}"),
            ),
            "readiness_timeout_ms",
        ),
        (
            write(
                "mem.toml",
                format!("{good}[resources]\nmemory_bytes = 9223372036854775807\n"),
            ),
            "resources.memory_bytes",
        ),
        (
            write(
                "root.toml",
                format!("{good}[[mounts.tmpfs]]\npath = \"/\"\n"),
            ),
            "mounts.tmpfs.path",
        ),
    ];
    for (profile, want) in cases {
        let (code, _, err) = cli_slot(
            "provision",
            "61",
            &sd,
            &["--profile", &profile, "--no-probe-gate", "--reason", "r"],
        );
        assert_eq!(code, Some(2), "{profile}: {err}");
        assert!(
            err.contains(&profile) && err.contains(want) && err.contains("fix"),
            "{profile}: {err}"
        );
        assert!(!sd.join("slot-61").exists(), "{profile} created the slot");
        assert!(!sd.exists(), "{profile} created the state directory");
    }
}

/// Exit 1: a gate failed (verb on a slot that was never provisioned); the message names the
/// slot and the gate; `--json` carries the same.
#[test]
fn gate_failure_exits_1() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let sd = tmp.path().join("state");
    let (code, _, err) = cli_slot("snapshot", "5", &sd, &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("slot 5") && err.contains("gate `state-dir`"),
        "{err}"
    );
    // The way on is named: provision creates the state directory.
    assert!(
        err.contains(&format!(
            "`netprobe slot provision --state-dir {}` creates it",
            sd.display()
        )),
        "{err}"
    );
    let (code, out, _) = cli_slot("restore", "5", &sd, &["--json"]);
    assert_eq!(code, Some(1));
    let e = json(&out);
    assert_eq!(
        (
            e["kind"].as_str(),
            e["gate"].as_str(),
            e["exit_code"].as_i64()
        ),
        (Some("gate"), Some("state-dir"), Some(1)),
        "{e}"
    );
    assert!(!sd.exists());
}

/// Exit 3: the host is refused while `CRIU_CONFIG_FILE` is set (a CRIU config silently changes
/// checkpoints); no slot is created.
#[test]
fn criu_config_file_refused_exit_3() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let sd = tmp.path().join("state");
    let conf = tmp.path().join("criu.conf");
    std::fs::write(&conf, "tcp-established\n").unwrap();
    let (code, out, err) = cli_slot_env(
        "provision",
        "6",
        &sd,
        &["--no-probe-gate", "--reason", "t", "--json"],
        &[("CRIU_CONFIG_FILE", conf.to_str().unwrap())],
    );
    assert_eq!(code, Some(3), "{err}{out}");
    assert!(
        err.contains("slot 6") && err.contains("criu-config-absent"),
        "{err}"
    );
    assert!(
        err.contains(conf.to_str().unwrap()),
        "names the file: {err}"
    );
    let e = json(&out);
    assert_eq!(
        (e["kind"].as_str(), e["exit_code"].as_i64()),
        (Some("host-refused"), Some(3))
    );
    assert!(
        !sd.join("slot-6").exists(),
        "a host refusal creates no slot"
    );
    assert_released(&sd, &[]);
}

/// `--cgroup-driver`: a bad name is a usage error (exit 2); systemd on this host (pid 1 is not
/// systemd) is a host refusal (exit 3, gate `cgroup-host`, naming pid 1 and the fix); neither
/// creates a slot.
#[test]
fn cgroup_driver_bad_name_exit_2_and_systemd_not_pid1_exit_3() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let sd = tmp.path().join("state");
    let (code, _, err) = cli_slot(
        "provision",
        "8",
        &sd,
        &["--no-probe-gate", "--reason", "t", "--cgroup-driver", "sd"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--cgroup-driver") && err.contains("\"sd\""),
        "{err}"
    );
    assert!(!sd.exists(), "a usage error creates nothing");
    assert!(
        std::fs::metadata("/run/systemd/system").is_err(),
        "this test needs a host whose pid 1 is not systemd"
    );
    let (code, out, err) = cli_slot(
        "provision",
        "8",
        &sd,
        &[
            "--no-probe-gate",
            "--reason",
            "t",
            "--cgroup-driver",
            "systemd",
            "--json",
        ],
    );
    assert_eq!(code, Some(3), "{err}{out}");
    assert!(
        err.contains("slot 8") && err.contains("cgroup-host"),
        "{err}"
    );
    assert!(err.contains("cgroupfs"), "names the fix: {err}");
    let e = json(&out);
    assert_eq!(
        (
            e["kind"].as_str(),
            e["gate"].as_str(),
            e["exit_code"].as_i64()
        ),
        (Some("host-refused"), Some("cgroup-host"), Some(3))
    );
    assert!(
        !sd.join("slot-8").exists(),
        "a host refusal creates no slot"
    );
    // The same driver asked for by a profile's `cgroup_driver` (no flag): refused the same way,
    // not silently replaced by the default.
    let prof = tmp.path().join("systemd.toml");
    let toml = netprobe::profile::BUILTIN_DEFAULT_TOML.replacen(
        "\nname = ",
        "\ncgroup_driver = \"systemd\"\nname = ",
        1,
    );
    assert!(toml.contains("cgroup_driver = \"systemd\""));
    std::fs::write(&prof, toml).unwrap();
    let prof_s = prof.to_string_lossy().to_string();
    let (code, out, err) = cli_slot(
        "provision",
        "8",
        &sd,
        &["--no-probe-gate", "--reason", "t", "--profile", &prof_s],
    );
    assert_eq!(code, Some(3), "{err}{out}");
    assert!(err.contains("cgroup-host"), "{err}");
    // Named: the profile, its key, and a fix that is spelled as the key is.
    assert!(
        err.contains(&format!(
            "the profile {prof_s} sets cgroup_driver = \"systemd\""
        )) && err.contains("`cgroup_driver = \"cgroupfs\"` in a slot profile"),
        "{err}"
    );
    assert!(!sd.join("slot-8").exists(), "{err}");
    assert_released(&sd, &[]);
}

/// Exit 4: a step could not run (the holder executable is missing: `NETPROBE_EXE` names a file
/// that does not exist). Provision releases what it started; `status --json` validates before,
/// during and after; `cleanup` succeeds and nothing is left.
#[test]
fn could_not_run_exits_4_then_status_and_cleanup() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let _c = CleanupOnDrop(sd.clone(), vec![8]);
    let v = slot_state_validator();

    let (code, out, err) = cli_slot("status", "8", &sd, &["--json"]);
    assert_eq!(code, Some(0), "{err}");
    let doc = json(&out);
    assert_valid(&v, &doc);
    assert_eq!(doc["exists"], false);

    let missing = tmp.path().join("no-such-netprobe");
    let (code, out, err) = cli_slot_env(
        "provision",
        "8",
        &sd,
        &["--no-probe-gate", "--reason", "t", "--json"],
        &[("NETPROBE_EXE", missing.to_str().unwrap())],
    );
    assert_eq!(code, Some(4), "{err}{out}");
    assert!(
        err.contains("slot 8") && err.contains("step `holder`"),
        "{err}"
    );
    let e = json(&out);
    assert_eq!(
        (e["kind"].as_str(), e["gate"].as_str()),
        (Some("could-not-run"), Some("holder")),
        "{e}"
    );
    assert!(
        e["evidence"]
            .as_str()
            .is_some_and(|p| std::path::Path::new(p).join("verb.json").exists()),
        "{e}"
    );

    let (code, out, _) = cli_slot("status", "8", &sd, &["--json"]);
    assert_eq!(code, Some(0));
    let doc = json(&out);
    assert_valid(&v, &doc);
    assert_eq!(doc["state"]["phase"], "provision-failed", "{doc}");
    assert_eq!(doc["live"]["overlay_mounted"], false, "{doc}");
    assert_released(&sd, &[]);

    let (code, out, err) = cli_slot("cleanup", "8", &sd, &[]);
    assert_eq!(code, Some(0), "{err}{out}");
    assert!(out.contains("slot 8 cleanup"), "{out}");
    let (_, out, _) = cli_slot("status", "8", &sd, &["--json"]);
    let doc = json(&out);
    assert_valid(&v, &doc);
    assert_eq!(doc["state"]["phase"], "clean");
    assert_released(&sd, &[]);
}
