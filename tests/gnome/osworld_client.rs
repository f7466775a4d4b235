//! OSWorld's own client, unchanged, acting on restored GNOME slots through a published port
//! (issue: the arm a benchmark can drive). For each runtime/CRIU pair — runc 1.4.3 + CRIU 4.3
//! (the pins' closest) and runc 1.1.5 + CRIU 4.2.1 (Debian 12's runc, the slot's default) —
//! netprobe's OSWorld provider (integrations/osworld, run from the private venv of
//! host/install-osworld-client.sh with the pinned desktop-env 1.0.2 wheel) starts a slot the
//! way OSWorld's DesktopEnv does (provision with `--publish 127.0.0.1:PORT:5000`, the
//! `init_state` snapshot, restore), then OSWorld's `PythonController` on the host, through the
//! published port only:
//! - sees a 1920x1080 screen whose pixels equal the restore's last recorded screen
//!   (`screen-input.png`, after the input gate's key) outside the pointer's rectangle (the
//!   server draws the pointer in, netprobe's gates do not), and the snapshot's `screen.png`
//!   outside the typing app's region and that rectangle;
//! - acts with a computer_13 sequence (click into the typing app, type a word, a hotkey) that
//!   changes the app's region;
//! - reads the accessibility tree, which names the typing app's window;
//! - runs a bash script and gets its output;
//!
//! and again after each of three `revert_to_snapshot` calls (`slot reset`). `stop_emulator`
//! (`slot cleanup`) then leaves nothing: no holder, container, mount or listening port.
//! The client rounds' files stay in `$CARGO_TARGET_TMPDIR/osworld-client/<pair>/`.

use crate::common;
use crate::common::slot_support;

use netprobe::x11::{Rect, Screenshot};
use serde_json::Value;
use slot_support::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// (name, runtime, CRIU, host port published for the guest server).
const PAIRS: [(&str, &str, &str, u16); 2] = [
    (
        "runc-1.4.3+criu-4.3",
        "/opt/runc-1.4.3/sbin/runc",
        "/opt/criu-4.3/sbin/criu",
        25431,
    ),
    (
        "runc-1.1.5+criu-4.2.1",
        "/usr/sbin/runc",
        "/opt/criu-4.2.1/sbin/criu",
        25432,
    ),
];

/// The typing app's client area in the GNOME profile's `[display.input]`.
const APP: Rect = Rect {
    x: 200,
    y: 187,
    width: 900,
    height: 240,
};

/// Half the side of the square around the pointer where the server's drawn cursor may differ
/// from netprobe's cursor-less screens, pixels (cursor images are at most 64x64 here).
const CURSOR_HALF: u32 = 64;

/// The private venv with OSWorld's client (host/install-osworld-client.sh; cached).
fn venv() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv =
        PathBuf::from(std::env::var("NETPROBE_CACHE").unwrap_or("/var/cache/netprobe".into()))
            .join("osworld-client/venv");
    let st = Command::new("bash")
        .arg(root.join("host/install-osworld-client.sh"))
        .arg(&venv)
        .status()
        .expect("run host/install-osworld-client.sh");
    assert!(st.success(), "host/install-osworld-client.sh failed: {st}");
    venv
}

/// Runs `tests/osworld/<script>` with the venv's python, the provider package on PYTHONPATH
/// and `env`; returns (exit code, stdout, stderr).
fn py(venv: &Path, script: &str, args: &[&str], env: &[(&str, String)]) -> (i32, String, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(venv.join("bin/python"))
        .arg(root.join("tests/osworld").join(script))
        .args(args)
        .env("PYTHONPATH", root.join("integrations/osworld"))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("run the venv's python");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn provider(venv: &Path, verb: &str, slot: &Path, env: &[(&str, String)]) -> Value {
    let t = Instant::now();
    let (code, out, err) = py(
        venv,
        "provider_verb.py",
        &[verb, &slot.to_string_lossy()],
        env,
    );
    assert_eq!(code, 0, "provider {verb}: {out}\n{err}");
    eprintln!("osworld: provider {verb} in {:?}", t.elapsed());
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("provider {verb}: {e}: {out}"))
}

/// The PNG at `p`, read as recorded evidence: a reset keeps a screen equal to one its base
/// folders store as `<name>.ref` (`netprobe::evidence::reference`), read through its name.
fn png(p: &Path) -> Screenshot {
    let bytes = netprobe::evidence::read_recorded(p)
        .or_else(|_| std::fs::read(p))
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    Screenshot::png_from_bytes(&bytes, p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn inside(r: &Rect, x: u32, y: u32) -> bool {
    x >= r.x && y >= r.y && x < r.x + r.width && y < r.y + r.height
}

/// Pixels of `a` and `b` that differ outside every rectangle of `skip`, and the first one.
fn differ_outside(a: &Screenshot, b: &Screenshot, skip: &[Rect]) -> (u64, Option<(u32, u32)>) {
    assert_eq!((a.width, a.height), (b.width, b.height));
    let (mut n, mut first) = (0, None);
    for y in 0..a.height {
        for x in 0..a.width {
            if a.pixel(x, y) != b.pixel(x, y) && !skip.iter().any(|r| inside(r, x, y)) {
                n += 1;
                first.get_or_insert((x, y));
            }
        }
    }
    (n, first)
}

fn cursor_rect(pos: &Value) -> Rect {
    let c = |i: usize| pos[i].as_u64().unwrap_or_else(|| panic!("cursor {pos}")) as u32;
    Rect {
        x: c(0).saturating_sub(CURSOR_HALF),
        y: c(1).saturating_sub(CURSOR_HALF),
        width: 2 * CURSOR_HALF,
        height: 2 * CURSOR_HALF,
    }
}

/// One client round after a restore or reset whose evidence folder is `ev`.
fn round(venv: &Path, port: u16, out: &Path, word: &str, ev: &Path, snapshot_screen: &Path) {
    let t = Instant::now();
    let (code, so, se) = py(
        venv,
        "client_round.py",
        &[
            "--port",
            &port.to_string(),
            "--out",
            &out.to_string_lossy(),
            "--word",
            word,
            "--click",
            "650,300",
        ],
        &[],
    );
    assert_eq!(code, 0, "client round {word}: {so}\n{se}");
    eprintln!("osworld: client round {word} in {:?}", t.elapsed());
    let r: Value = serde_json::from_slice(&std::fs::read(out.join("round.json")).unwrap()).unwrap();
    assert_eq!(
        r["screen_size"],
        serde_json::json!({"width": 1920, "height": 1080}),
        "{r}"
    );
    assert_eq!(r["platform"], "Linux", "{r}");
    assert!(
        r["bash"]["output"]
            .as_str()
            .unwrap_or("")
            .contains("netprobe-42"),
        "run_bash_script: {r}"
    );
    let before = png(&out.join("before.png"));
    assert_eq!((before.width, before.height), (1920, 1080));
    let cur = cursor_rect(&r["cursor_before"]);
    // The restored screen as netprobe last recorded it (after the input gate's key).
    let recorded = png(&ev.join("screen-input.png"));
    let (n, first) = differ_outside(&before, &recorded, &[cur]);
    assert_eq!(
        n,
        0,
        "{word}: client screenshot vs {}/screen-input.png outside the pointer {cur}: first at {first:?}",
        ev.display()
    );
    // The snapshot's screen, but for the app's region (the input gate's key) and the pointer.
    let (n, first) = differ_outside(&before, &png(snapshot_screen), &[cur, APP]);
    assert_eq!(
        n, 0,
        "{word}: client screenshot vs the snapshot's screen.png outside the app and the pointer: first at {first:?}"
    );
    // The agent's actions changed the typing app's region.
    let after = png(&out.join("after.png"));
    let in_app = |a: &Screenshot, b: &Screenshot| {
        differ_outside(a, b, &[]).0 - differ_outside(a, b, &[APP]).0
    };
    assert!(
        in_app(&before, &after) > 0,
        "{word}: the actions did not change the app's region"
    );
    let tree = std::fs::read_to_string(out.join("a11y.xml")).unwrap();
    assert!(
        tree.contains("netprobe-typing"),
        "{word}: the accessibility tree does not name the typing app: {}",
        &tree[..tree.len().min(2000)]
    );
}

fn evidence_of(outcome: &Value) -> PathBuf {
    PathBuf::from(
        outcome["evidence"]
            .as_str()
            .unwrap_or_else(|| panic!("no evidence in {outcome}")),
    )
}

fn cycle(img: &common::DesktopImage, venv: &Path, pair: &(&str, &str, &str, u16)) {
    let (name, runtime, criu, port) = *pair;
    let t0 = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let slot = sd.join("slot-0");
    let prof = common::shipped_profile("gnome", img, tmp.path());
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("osworld-client")
        .join(name);
    let _ = std::fs::remove_dir_all(&keep);
    let env = [
        ("NETPROBE_BIN", EXE.to_string()),
        ("NETPROBE_PROFILE", prof.to_string_lossy().into_owned()),
        ("NETPROBE_PUBLISH", format!("127.0.0.1:{port}:5000")),
        (
            "NETPROBE_PROVISION_ARGS",
            format!(
                "--no-probe-gate --reason osworld-client-test --runtime {runtime} --criu {criu}"
            ),
        ),
    ];
    let _guard = CleanupOnDrop(sd.clone(), vec![0]);
    let started = provider(venv, "start", &slot, &env);
    let holders = holder_pids(&sd);
    let verbs: Vec<&str> = started
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["verb"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(verbs, ["provision", "snapshot", "restore"], "{started}");
    eprintln!(
        "osworld {name}: started (provision, init_state, restore) in {:?}",
        t0.elapsed()
    );
    let ip = provider(venv, "ip", &slot, &env);
    assert_eq!(ip["ip"], format!("127.0.0.1:{port}:0:0:0"), "{ip}");
    let st = state(&sd, 0);
    let snap_png = slot
        .join(&st.snapshot.as_ref().unwrap().dir)
        .join("screen.png");
    let ev = evidence_of(&started[2]);
    round(venv, port, &keep.join("restore"), "hello", &ev, &snap_png);
    for k in 1..=3 {
        let r = provider(venv, "revert", &slot, &env);
        assert_eq!(r["path_to_vm"], slot.to_string_lossy().as_ref(), "{r}");
        assert_eq!(r["outcome"]["verb"], "reset", "{r}");
        let ev = evidence_of(&r["outcome"]);
        round(
            venv,
            port,
            &keep.join(format!("reset-{k}")),
            &format!("again{k}"),
            &ev,
            &snap_png,
        );
    }
    let _ = Command::new("cp")
        .arg("-a")
        .arg(slot.join("evidence"))
        .arg(&keep)
        .status();
    provider(venv, "stop", &slot, &env);
    assert_released(&sd, &holders);
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "port {port} still accepts after stop_emulator"
    );
    eprintln!("osworld {name}: whole cycle in {:?}", t0.elapsed());
}

#[test]
fn osworld_client_acts_on_a_restored_gnome_slot_and_after_three_resets_with_both_pairs() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    for (_, rt, cr, _) in PAIRS {
        assert!(
            Path::new(rt).exists() && Path::new(cr).exists(),
            "{rt} or {cr} missing: run bash host/setup.sh"
        );
    }
    let img = common::gnome_image();
    let venv = venv();
    for pair in &PAIRS {
        cycle(&img, &venv, pair);
    }
}

/// The provider's decision logic (slot paths, which verb `start_emulator` runs per phase, the
/// ports `get_ip_address` reports, errors carrying netprobe's words, the VM manager's slot
/// registry) as Python unit tests with a fake netprobe binary, in the client's venv:
/// integrations/osworld/tests/test_provider.py.
#[test]
fn provider_decision_logic_passes_its_unit_tests() {
    let _baton = crate::common::baton(module_path!());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(venv().join("bin/python"))
        .args(["-m", "unittest", "discover", "-s"])
        .arg(root.join("integrations/osworld/tests"))
        .env("PYTHONPATH", root.join("integrations/osworld"))
        .output()
        .expect("run the venv's python");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("Ran 8 tests") && err.trim_end().ends_with("OK"),
        "{err}"
    );
}
