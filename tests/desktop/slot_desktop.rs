//! The desktop guest (host/build-desktop-image.sh, partitioned GPT qcow2) through the slot driver
//! with `--profile profiles/desktop.toml`, every verb through the netprobe binary with real runc
//! and CRIU: provision (display-geometry) → snapshot (screen-quiescent, screen.png recorded) →
//! restore (pixels-equal, input-reaches-app) → reset (the snapshot's pixels back after that
//! input) → a tampered reference screen is refused by snapshot-complete (its sha256), and once
//! recorded as the reference fails the pixel gate with a diff PNG → `netprobe report` of the slot
//! shows that reset's before, after and diff pictures → cleanup, nothing left.
//! Bad profiles (unknown key, missing image, sha256 mismatch, a display that never comes up)
//! fail with their exit class and leave nothing behind.

use crate::common;
use crate::common::slot_support;

use netprobe::x11::Screenshot;
use serde_json::Value;
use slot_support::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn json_of(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The named gate of an outcome document.
fn gate<'a>(o: &'a Value, name: &str) -> &'a Value {
    o["gates"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("no gate {name} in {o:#}"))
}

fn verb(v: &str, sd: &Path, extra: &[&str]) -> Value {
    let mut a = extra.to_vec();
    a.push("--json");
    let (code, out, err) = cli_slot(v, "0", sd, &a);
    assert_eq!(code, Some(0), "{v}: {out}\n{err}");
    json_of(&out)
}

/// `slot provision` of slot 0 with `profile` (the probe gate overridden for `reason`); its
/// outcome document.
fn provision(sd: &Path, profile: &Path, reason: &str) -> Value {
    let p = profile.to_string_lossy().to_string();
    verb(
        "provision",
        sd,
        &["--profile", &p, "--no-probe-gate", "--reason", reason],
    )
}

fn assert_png(ev: &Path, o: &Value, file: &str) {
    let p = ev.join(file);
    let (sha, _) = netprobe::evidence::sha256_file(&p).unwrap_or_else(|e| panic!("{file}: {e}"));
    let doc = o.to_string();
    assert!(doc.contains(file), "the outcome does not name {file}");
    assert!(
        doc.contains(&sha),
        "the outcome does not carry {file}'s sha256"
    );
}

#[test]
fn desktop_profile_provision_snapshot_restore_input_reset_cleanup() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let img = common::desktop_image();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let prof = common::shipped_profile("desktop", &img, tmp.path());
    let p = provision(&sd, &prof, "desktop test");
    let holders = holder_pids(&sd);
    let result = std::panic::catch_unwind(|| {
        assert_eq!(gate(&p, "display-geometry")["proven"], true, "{p:#}");
        assert_eq!(gate(&p, "image-sha256")["proven"], true);
        assert_eq!(gate(&p, "cgroup-limits")["proven"], true);
        let g = gate(&p, "guest-http")["detail"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(g.contains("GET /health"), "{g}");
        let st = state(&sd, 0);
        let pr = st.profile.as_ref().expect("profile recorded");
        assert_eq!(pr.name, "desktop");
        assert_eq!(pr.sha256, netprobe::evidence::sha256_file(&prof).unwrap().0);
        let part = st
            .image
            .as_ref()
            .unwrap()
            .partition
            .clone()
            .expect("partition");
        assert_eq!(part.name, "root");
        let cfg: Value =
            serde_json::from_slice(&std::fs::read(sd.join("slot-0/bundle/config.json")).unwrap())
                .unwrap();
        assert_eq!(cfg["process"]["args"][1], "/opt/netprobe/supervisor.py");
        // Provision waited for the app's focus, its window and a still screen.
        for g in ["active-window", "app-shown", "screen-settled"] {
            assert_eq!(gate(&p, g)["proven"], true, "{g}: {p:#}");
        }

        let s = verb("snapshot", &sd, &[]);
        assert_eq!(gate(&s, "screen-quiescent")["proven"], true, "{s:#}");
        // The typing app's window is drawn in the profile's input region of the reference.
        let drawn = gate(&s, "app-drawn");
        assert_eq!(drawn["proven"], true, "{s:#}");
        assert!(
            drawn["detail"]
                .as_str()
                .is_some_and(|d| d.contains("pixels differ from its first pixel's colour")),
            "{drawn}"
        );
        assert_eq!(gate(&s, "profile-hash")["proven"], true);
        let st = state(&sd, 0);
        let snap = st.snapshot.clone().unwrap();
        let screen = snap.screen.clone().expect("screen recorded");
        let snap_png = sd.join("slot-0").join(&snap.dir).join("screen.png");
        assert_eq!(
            netprobe::evidence::sha256_file(&snap_png).unwrap().0,
            screen.sha256
        );

        let r = verb("restore", &sd, &[]);
        assert_eq!(gate(&r, "pixels-equal")["proven"], true, "{r:#}");
        assert_eq!(gate(&r, "input-reaches-app")["proven"], true, "{r:#}");
        // The guest's Xvfb has MIT-SHM: the restored screen came through shared memory, into
        // the segment prepared while CRIU restored the server.
        assert!(
            r["facts"]["display_images"].as_str().is_some_and(|t| {
                t.starts_with("MIT-SHM") && t.ends_with("prepared before the connection)")
            }),
            "{:#}",
            r["facts"]["display_images"]
        );
        let ev = PathBuf::from(r["evidence"].as_str().unwrap());
        for f in [
            "screen-snapshot.png",
            "screen-after.png",
            "screen-input.png",
        ] {
            assert_png(&ev, &r, f);
        }

        // Reset after that input: the snapshot's pixels are back (and input works again).
        let z = verb("reset", &sd, &[]);
        assert_eq!(gate(&z, "pixels-equal")["proven"], true, "{z:#}");
        assert_eq!(gate(&z, "input-reaches-app")["proven"], true, "{z:#}");

        // Tamper: the snapshot's reference screen with a 100x50 block at (10,10) inverted
        // (a window that was not there) must fail the pixel gate, with a diff PNG.
        let mut t = Screenshot::read_png(&snap_png).unwrap();
        for y in 10..60u32 {
            for x in 10..110u32 {
                let i = ((y * t.width + x) * 3) as usize;
                for c in &mut t.rgb[i..i + 3] {
                    *c = !*c;
                }
            }
        }
        std::fs::remove_file(&snap_png).unwrap();
        t.write_png(&snap_png).unwrap();
        // A reference screen that no longer has its recorded sha256 is refused before anything
        // is touched (snapshot-complete hashes it like the checkpoint files).
        let (code, out, err) = cli_slot("reset", "0", &sd, &["--json"]);
        assert_eq!(code, Some(1), "{out}\n{err}");
        let doc = json_of(&out).to_string();
        assert!(
            doc.contains("snapshot-complete") && doc.contains("reference screen changed"),
            "{doc}"
        );
        // Recorded as the reference (state.json and manifest.json), the moved window must
        // fail the pixel gate with a diff.
        let tampered = netprobe::evidence::sha256_file(&snap_png).unwrap().0;
        let mut st = state(&sd, 0);
        st.snapshot
            .as_mut()
            .unwrap()
            .screen
            .as_mut()
            .unwrap()
            .sha256 = tampered.clone();
        let mpath = snap_png.with_file_name("manifest.json");
        let mut m = json_of(&std::fs::read_to_string(&mpath).unwrap());
        m["screen"]["sha256"] = tampered.into();
        std::fs::write(&mpath, m.to_string()).unwrap();
        // The manifest's own sha256 is recorded too.
        st.snapshot.as_mut().unwrap().manifest_sha256 =
            Some(netprobe::evidence::sha256_hex(m.to_string().as_bytes()));
        st.save(&sd.join("slot-0/state.json")).unwrap();
        let (code, out, err) = cli_slot("reset", "0", &sd, &["--json"]);
        assert_eq!(code, Some(1), "{out}\n{err}");
        let fail = json_of(&out);
        let doc = fail.to_string();
        assert!(doc.contains("pixels-equal"), "{doc}");
        assert!(doc.contains("pixels differ"), "{doc}");
        assert!(doc.contains("screen-after-diff.png"), "{doc}");
        assert!(doc.contains("5000 of 2073600 pixels differ"), "{doc}");
        assert!(doc.contains("bounding box"), "{doc}");

        // The slot's report shows that failed reset's before, after and diff pictures (by
        // relative path, each file present, sha256 re-checked), the count and bounding box.
        let slot_dir = sd.join("slot-0");
        let fail_ev = PathBuf::from(fail["evidence"].as_str().expect("evidence folder"));
        let rel = fail_ev
            .strip_prefix(&slot_dir)
            .unwrap()
            .to_string_lossy()
            .to_string();
        let sd0 = slot_dir.to_string_lossy().to_string();
        for (fmt, img) in [("html", "<img src=\"./"), ("md", "](./")] {
            let (code, out, err) = cli(&["report", &sd0, "--format", fmt], &[]);
            assert_eq!(code, Some(0), "report {fmt}: {out}\n{err}");
            let page = std::fs::read_to_string(slot_dir.join(format!("report.{fmt}"))).unwrap();
            for f in [
                "screen-snapshot.png",
                "screen-after.png",
                "screen-after-diff.png",
            ] {
                let p = format!("{rel}/{f}");
                assert!(page.contains(&format!("{img}{p}")), "{fmt}: {p} not shown");
                assert!(slot_dir.join(&p).is_file(), "{p} does not exist");
                let sha = netprobe::evidence::sha256_file(&slot_dir.join(&p))
                    .unwrap()
                    .0;
                assert!(page.contains(&sha), "{fmt}: {p}'s sha256 not shown");
            }
            assert!(
                !page.contains("DIFFERS") && !page.contains("<script"),
                "{fmt}"
            );
            assert!(page.contains("2073600 pixels differ"), "{fmt}");
            assert!(page.contains("bounding box x 10 y 10, 100x50"), "{fmt}");
        }
    });
    let (code, out, err) = cli_slot("cleanup", "0", &sd, &[]);
    assert_eq!(code, Some(0), "cleanup: {out}\n{err}");
    assert_released(&sd, &holders);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

/// A copy of profiles/desktop.toml (pointed at `img`) with `edit` applied, written to
/// `dir/name`.
fn edited(
    img: &common::DesktopImage,
    dir: &Path,
    name: &str,
    edit: impl Fn(String) -> String,
) -> PathBuf {
    let base = common::shipped_profile("desktop", img, dir);
    let text = std::fs::read_to_string(base).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, edit(text)).unwrap();
    p
}

#[test]
fn bad_desktop_profiles_fail_with_their_exit_class_and_leave_nothing() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let img = common::desktop_image();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let d = tmp.path();
    let go = |p: &Path| {
        let ps = p.to_string_lossy().to_string();
        cli_slot(
            "provision",
            "0",
            &sd,
            &[
                "--profile",
                &ps,
                "--no-probe-gate",
                "--reason",
                "bad profile test",
            ],
        )
    };
    let unknown = edited(&img, d, "unknown.toml", |t| {
        t.replace("[network]", "[network]\ncolour = 1")
    });
    let (code, _, err) = go(&unknown);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("colour"), "{err}");
    assert!(
        !sd.join("slot-0").exists(),
        "a bad profile created the slot"
    );

    let missing = edited(&img, d, "missing.toml", |t| {
        t.replace(
            &img.qcow2.to_string_lossy().to_string(),
            "/nonexistent/np.qcow2",
        )
    });
    let (code, _, err) = go(&missing);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("image.path") && err.contains("/nonexistent/np.qcow2"),
        "{err}"
    );
    assert!(!sd.join("slot-0").exists());

    let pin = edited(&img, d, "pin.toml", |t| {
        t.lines()
            .map(|l| {
                if l.starts_with("sha256_file") {
                    format!("sha256 = \"{}\"", "0".repeat(64))
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    let (code, _, err) = go(&pin);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("image-sha256") && err.contains(&img.sha256),
        "{err}"
    );
    assert!(!sd.join("slot-0").exists());

    // A display that never comes up (the guest's X server is on :0, the profile says :7):
    // bounded wait, clear message, everything released.
    let nodisp = edited(&img, d, "nodisplay.toml", |t| {
        t.replace("number = 0", "number = 7").replace(
            "readiness_timeout_ms = 120000",
            "readiness_timeout_ms = 5000",
        )
    });
    let t = Instant::now();
    let (code, _, err) = go(&nodisp);
    let holders = holder_pids(&sd);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("display-geometry") && err.contains("X7"),
        "{err}"
    );
    assert!(t.elapsed() < Duration::from_secs(120), "{:?}", t.elapsed());
    assert_released(&sd, &holders);
    let (code, out, err) = cli_slot("cleanup", "0", &sd, &[]);
    assert_eq!(code, Some(0), "cleanup: {out}\n{err}");
    assert_released(&sd, &holders);
}

/// A snapshot whose reference screen has nothing drawn in the profile's input region (here the
/// region is moved onto the bare root window, away from the typing app) is refused by
/// `app-drawn` before the checkpoint, naming the way out for a stalled app; the refusal leaves
/// no `snapshot.tmp-*` folder behind and the container running; cleanup releases everything.
#[test]
fn a_reference_without_the_app_is_refused_before_the_checkpoint_leaving_no_tmp_folder() {
    let _baton = crate::common::baton(module_path!());
    require_root();
    let _s = serial();
    let img = common::desktop_image();
    let tmp = tempfile::tempdir().unwrap();
    let sd = state_dir(&tmp);
    let prof = edited(&img, tmp.path(), "elsewhere.toml", |t| {
        t.replace(
            "x = 201\ny = 170\nwidth = 900\nheight = 240",
            "x = 1500\ny = 900\nwidth = 100\nheight = 50",
        )
        // Without provision's app-drawn wait, which would refuse this region before the
        // snapshot: the snapshot's own gate is what this test proves.
        .replace("[[readiness]]\nkind = \"app-drawn\"\n", "")
    });
    assert!(
        std::fs::read_to_string(&prof).unwrap().contains("x = 1500"),
        "the profile's input region was not moved"
    );
    let p = provision(&sd, &prof, "app-drawn test");
    let holders = holder_pids(&sd);
    let result = std::panic::catch_unwind(|| {
        let pid = p["facts"]["provision_container_pid"].as_i64().unwrap();
        let before = state(&sd, 0).phase;
        let (code, out, err) = cli_slot("snapshot", "0", &sd, &[]);
        assert_eq!(code, Some(1), "{out}\n{err}");
        assert!(
            err.contains("app-drawn") && err.contains("is one colour"),
            "{err}"
        );
        let sock = netprobe::slot::gate::display_gates::socket_of(pid as i32, 0);
        assert!(
            err.contains(&format!("ln -s {} /tmp/.X11-unix/X99", sock.display())),
            "the refusal names the way out for a stalled app: {err}"
        );
        let tmps: Vec<_> = std::fs::read_dir(sd.join("slot-0"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("snapshot.tmp-") || n.starts_with("snapshot-"))
            .collect();
        assert!(tmps.is_empty(), "a refused snapshot left {tmps:?}");
        let (_, out, _) = cli_slot("status", "0", &sd, &["--json"]);
        let s = json_of(&out);
        assert_eq!(s["stale_snapshot_tmp"], serde_json::json!([]), "{s:#}");
        assert_eq!(
            s["state"]["phase"],
            serde_json::to_value(before).unwrap(),
            "a refused snapshot leaves the phase it found: {s:#}"
        );
    });
    let (code, out, err) = cli_slot("cleanup", "0", &sd, &[]);
    assert_eq!(code, Some(0), "cleanup: {out}\n{err}");
    assert_released(&sd, &holders);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
