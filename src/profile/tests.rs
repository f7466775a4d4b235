//! Unit tests of profile parsing, validation, image checks and application to a Spec.

use super::*;
use std::path::Path;

const MINIMAL: &str = r#"
schema_version = 1
name = "t"
[image]
kind = "directory"
path = "root"
[process]
args = ["/bin/sh"]
"#;

fn p(text: &str) -> Result<LoadedProfile> {
    parse(text, Path::new("/etc/p.toml"), Path::new("/base"))
}

#[test]
fn builtin_default_is_valid_and_the_embedded_image() {
    let d = builtin_default();
    assert_eq!(d.profile.image, Image::Embedded);
    assert_eq!(d.profile.process.args, ["/bin/sh", "/init.sh"]);
    assert_eq!(
        d.profile.network.guest_port,
        Some(crate::oci::INIT_HTTP_PORT)
    );
    assert_eq!(d.sha256.len(), 64);
    assert_eq!(d.profile.resources, ResourceLimits::default());
}

#[test]
fn defaults_are_docker_caps_4_cpus_4_gib_no_swap_root_user() {
    let l = p(MINIMAL).unwrap();
    let pr = &l.profile;
    assert_eq!(pr.security.capabilities.len(), 14);
    assert!(
        pr.security
            .capabilities
            .contains(&"CAP_NET_RAW".to_string())
    );
    assert_eq!(pr.security.seccomp, Confinement::None);
    assert_eq!(
        (pr.resources.cpu_quota, pr.resources.cpu_period),
        (400_000, 100_000)
    );
    assert_eq!(
        (pr.resources.memory_bytes, pr.resources.swap_bytes),
        (4 << 30, 0)
    );
    assert_eq!((pr.process.user.uid, pr.process.cwd.as_str()), (0, "/"));
    assert_eq!(pr.display, None);
    assert_eq!(pr.cgroup_driver, None);
    assert_eq!(
        pr.image,
        Image::Directory {
            path: "/base/root".into()
        },
        "relative image paths resolve against the profile's directory"
    );
}

#[test]
fn unknown_key_names_the_key_and_the_fix() {
    for (text, key) in [
        (format!("{MINIMAL}colour = 1\n"), "colour"),
        (MINIMAL.replace("[process]", "[process]\nargz = 1"), "argz"),
        (
            format!("{MINIMAL}[display]\nnumber=0\nwidth=1\nheight=1\ndepth=24\nhz=60\n"),
            "hz",
        ),
        (
            format!("{MINIMAL}[[readiness]]\nkind=\"tcp\"\nport=1\nhost=\"x\"\n"),
            "host",
        ),
    ] {
        let e = p(&text).unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, ProfileError::Parse { .. }), "{m}");
        assert!(
            m.contains(key) && m.contains("/etc/p.toml") && m.contains("fix:"),
            "{m}"
        );
        assert_eq!(e.exit_code(), 2);
    }
}

#[test]
fn bad_fields_name_the_field() {
    let cases = [
        (MINIMAL.replace("[\"/bin/sh\"]", "[]"), "process.args"),
        (
            MINIMAL.replace("schema_version = 1", "schema_version = 2"),
            "schema_version",
        ),
        (
            MINIMAL.replace("[process]", "[process]\ncwd = \"rel\""),
            "process.cwd",
        ),
        (
            format!("{MINIMAL}[security]\ncapabilities = [\"CAP_NOPE\"]\n"),
            "security.capabilities",
        ),
        (
            MINIMAL.replace("kind = \"directory\"", "kind = \"qcow2\""),
            "image.sha256",
        ),
        (
            MINIMAL.replace("kind = \"directory\"", "kind = \"qcow2\"\nsha256 = \"abc\""),
            "image.sha256",
        ),
        (
            format!("{MINIMAL}[[readiness]]\nkind = \"x-display\"\n"),
            "readiness",
        ),
        (
            format!("{MINIMAL}[[mounts.tmpfs]]\npath = \"tmp\"\n"),
            "mounts.tmpfs.path",
        ),
    ];
    for (text, f) in cases {
        let e = p(&text).unwrap_err();
        match &e {
            ProfileError::Field { field, .. } => assert_eq!(field, f, "{e}"),
            other => panic!("{f}: {other}"),
        }
        assert!(e.to_string().contains("fix:"), "{e}");
    }
}

#[test]
fn partition_accepts_number_name_and_auto() {
    let q = |part: &str| {
        let t = MINIMAL.replace(
            "kind = \"directory\"",
            &format!("kind = \"qcow2\"\nsha256 = \"{}\"\n{part}", "a".repeat(64)),
        );
        match p(&t).unwrap().profile.image {
            Image::Qcow2 { partition, .. } => partition,
            other => panic!("{other:?}"),
        }
    };
    assert!(q("").is_auto());
    assert_eq!(q("partition = 2"), PartitionSel::Number(2));
    assert_eq!(q("partition = \"root\""), PartitionSel::Name("root".into()));
    assert!(q("partition = \"auto\"").is_auto());
}

#[test]
fn verify_image_checks_existence_and_the_pin() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("d.qcow2");
    std::fs::write(&img, b"disk").unwrap();
    let good = crate::evidence::sha256_hex(b"disk");
    std::fs::write(
        dir.path().join("d.qcow2.sha256"),
        format!("{good}  d.qcow2\n"),
    )
    .unwrap();
    let write = |name: &str, image: &str| {
        let f = dir.path().join(name);
        std::fs::write(
            &f,
            format!(
                "schema_version = 1\nname = \"x\"\n[image]\n{image}\n[process]\nargs = [\"/x\"]\n"
            ),
        )
        .unwrap();
        load(&f).unwrap()
    };
    let ok = write(
        "a.toml",
        "kind = \"qcow2\"\npath = \"d.qcow2\"\nsha256_file = \"d.qcow2.sha256\"",
    );
    assert_eq!(
        verify_image(&ok).unwrap().sha256.as_deref(),
        Some(good.as_str())
    );
    let pinned = write(
        "b.toml",
        &format!("kind = \"qcow2\"\npath = \"d.qcow2\"\nsha256 = \"{good}\""),
    );
    verify_image(&pinned).unwrap();

    std::fs::write(&img, b"tampered").unwrap();
    let e = verify_image(&ok).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, ProfileError::Sha256Mismatch { .. }), "{m}");
    assert!(
        m.contains("image.sha256_file") && m.contains(&good) && m.contains("sha256sum"),
        "{m}"
    );
    assert_eq!(e.exit_code(), 1);

    let missing = write("c.toml", "kind = \"directory\"\npath = \"nope\"");
    let e = verify_image(&missing).unwrap_err();
    assert!(
        e.to_string().contains("image.path") && e.to_string().contains("nope"),
        "{e}"
    );
    let nopin = write(
        "e.toml",
        "kind = \"qcow2\"\npath = \"d.qcow2\"\nsha256_file = \"gone.sha256\"",
    );
    let e = verify_image(&nopin).unwrap_err();
    assert!(e.to_string().contains("image.sha256_file"), "{e}");
}

#[test]
fn apply_sets_process_caps_resources_and_mounts() {
    let text = format!(
        "{}\n[process.user]\nuid = 1000\ngid = 1000\n[resources]\nmemory_bytes = 1073741824\nswap_bytes = 1024\n[mounts]\ndev_shm_bytes = 268435456\n[[mounts.tmpfs]]\npath = \"/tmp\"\nsize_bytes = 1048576\n",
        MINIMAL.replace(
            "args = [\"/bin/sh\"]",
            "args = [\"/bin/sh\"]\nenv = [\"DISPLAY=:0\"]\ncwd = \"/root\""
        )
    );
    let l = p(&text).unwrap();
    let mut spec = oci_spec::runtime::Spec::default();
    apply_profile(&mut spec, &l.profile).unwrap();
    let pr = spec.process().as_ref().unwrap();
    assert_eq!(pr.args().as_ref().unwrap(), &["/bin/sh"]);
    assert_eq!(
        pr.env().as_ref().unwrap(),
        &[DEFAULT_PATH_ENV_FOR_TEST.to_string(), "DISPLAY=:0".into()]
    );
    assert_eq!(pr.cwd(), Path::new("/root"));
    assert_eq!((pr.user().uid(), pr.user().gid()), (1000, 1000));
    let caps = pr.capabilities().as_ref().unwrap();
    assert_eq!(caps.bounding().as_ref().unwrap().len(), 14);
    assert_eq!(caps.effective(), caps.bounding());
    assert!(caps.ambient().as_ref().unwrap().is_empty());
    let linux = spec.linux().as_ref().unwrap();
    assert!(linux.seccomp().is_none());
    let mem = linux
        .resources()
        .as_ref()
        .unwrap()
        .memory()
        .as_ref()
        .unwrap();
    assert_eq!(
        (mem.limit(), mem.swap()),
        (Some(1 << 30), Some((1 << 30) + 1024))
    );
    let cpu = linux.resources().as_ref().unwrap().cpu().as_ref().unwrap();
    assert_eq!((cpu.quota(), cpu.period()), (Some(400_000), Some(100_000)));
    let mounts = spec.mounts().as_ref().unwrap();
    let tmp = mounts
        .iter()
        .find(|m| m.destination() == Path::new("/tmp"))
        .unwrap();
    assert_eq!(tmp.typ().as_deref(), Some("tmpfs"));
    assert!(
        tmp.options()
            .as_ref()
            .unwrap()
            .contains(&"size=1048576".to_string())
    );
    let shm = mounts
        .iter()
        .find(|m| m.destination() == Path::new("/dev/shm"))
        .unwrap();
    let o = shm.options().as_ref().unwrap();
    assert!(o.contains(&"size=268435456".to_string()));
    assert_eq!(o.iter().filter(|x| x.starts_with("size=")).count(), 1);
}

const DEFAULT_PATH_ENV_FOR_TEST: &str = apply::DEFAULT_PATH_ENV;

#[test]
fn shipped_profiles_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    for name in ["desktop.toml", "gnome.toml"] {
        let l = load(&dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let d = l.profile.display.expect("a display");
        assert_eq!((d.width, d.height, d.depth), (1920, 1080, 24), "{name}");
        assert!(l.profile.readiness.contains(&Readiness::XDisplay), "{name}");
    }
}

fn schema() -> jsonschema::Validator {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("evidence-schema/slot-profile.schema.json"),
    )
    .unwrap();
    jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
}

fn as_json(toml_text: &str) -> serde_json::Value {
    let v: toml::Value = toml::from_str(toml_text).unwrap();
    serde_json::to_value(v).unwrap()
}

#[test]
fn schema_accepts_shipped_and_builtin_profiles_and_rejects_unknown_keys() {
    let v = schema();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    let mut texts = vec![BUILTIN_DEFAULT_TOML.to_string(), MINIMAL.to_string()];
    for name in ["desktop.toml", "gnome.toml"] {
        texts.push(std::fs::read_to_string(dir.join(name)).unwrap());
    }
    for t in &texts {
        let j = as_json(t);
        let errs: Vec<String> = v.iter_errors(&j).map(|e| e.to_string()).collect();
        assert!(errs.is_empty(), "{errs:?}\n{t}");
    }
    for bad in [
        format!("{MINIMAL}colour = 1\n"),
        MINIMAL.replace("[process]", "[process]\nargz = [\"x\"]"),
        MINIMAL.replace("kind = \"directory\"", "kind = \"qcow2\""),
    ] {
        assert!(!v.is_valid(&as_json(&bad)), "schema accepted:\n{bad}");
    }
}

#[test]
fn display_input_probe_is_checked() {
    let base = format!("{MINIMAL}[display]\nnumber = 0\nwidth = 100\nheight = 100\ndepth = 24\n");
    let ok = p(&format!(
        "{base}[display.input]\nkey = \"q\"\nx = 10\ny = 10\nwidth = 50\nheight = 50\n"
    ))
    .unwrap();
    let i = ok.profile.display.unwrap().input.unwrap();
    assert_eq!((i.key, i.x, i.width), ('q', 10, 50));
    for bad in [
        "key = \"q\"\nx = 90\ny = 0\nwidth = 50\nheight = 5\n",
        "key = \"\\n\"\nx = 0\ny = 0\nwidth = 5\nheight = 5\n",
        "key = \"q\"\nx = 0\ny = 0\nwidth = 0\nheight = 5\n",
    ] {
        let e = p(&format!("{base}[display.input]\n{bad}")).unwrap_err();
        assert!(e.to_string().contains("display.input"), "{e}");
    }
    let e = p(&format!(
        "{base}[display.input]\nkey = \"qq\"\nx = 0\ny = 0\nwidth = 5\nheight = 5\n"
    ))
    .unwrap_err();
    assert!(matches!(e, ProfileError::Parse { .. }), "{e}");
}

#[test]
fn overlay_options_default_to_index_off_and_are_checked_at_load() {
    assert_eq!(p(MINIMAL).unwrap().profile.overlay, OverlaySpec::default());
    let l = p(&format!(
        "{MINIMAL}[overlay]\noptions = [\"index=on\", \"nfs_export=on\"]\n"
    ))
    .unwrap();
    assert_eq!(l.profile.overlay.effective(), ["index=on", "nfs_export=on"]);
    let e = p(&format!(
        "{MINIMAL}[overlay]\noptions = [\"nfs_export=on\"]\n"
    ))
    .unwrap_err();
    assert!(matches!(e, ProfileError::Field { ref field, .. } if field == "overlay.options"));
    assert_eq!(e.exit_code(), 2);
    let e = p(&format!("{MINIMAL}[overlay]\nopts = []\n")).unwrap_err();
    assert!(matches!(e, ProfileError::Parse { .. }), "{e}");
    let v = schema();
    for (text, valid) in [
        ("options = [\"index=on\", \"nfs_export=on\"]", true),
        ("options = [\"index=maybe\"]", false),
        ("options = [\"upperdir=/x\"]", false),
        ("opts = []", false),
    ] {
        let j = as_json(&format!("{MINIMAL}[overlay]\n{text}\n"));
        assert_eq!(v.is_valid(&j), valid, "{text}");
    }
}

#[test]
fn gnome_profile_mounts_its_overlay_with_file_handles_and_hides_the_clock() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    let g = load(&dir.join("gnome.toml")).unwrap().profile;
    assert_eq!(g.overlay.effective(), ["index=on", "nfs_export=on"]);
    assert!(
        g.process
            .env
            .contains(&"GNOME_SHELL_SESSION_MODE=netprobe".to_string())
    );
    // The desktop guest's session and AT-SPI D-Bus daemons watch their folders too.
    let d = load(&dir.join("desktop.toml")).unwrap().profile;
    assert_eq!(d.overlay.effective(), ["index=on", "nfs_export=on"]);
    assert_eq!(
        super::builtin_default().profile.overlay.effective(),
        ["index=off"]
    );
}

#[test]
fn readiness_timeout_is_raised_to_the_floor_and_capped_at_one_hour() {
    let t = |v: &str| p(&format!("readiness_timeout_ms = {v}\n{MINIMAL}"));
    // Below the floor: recorded as the 20 s the gate waits, not as given.
    assert_eq!(t("10").unwrap().profile.readiness_timeout_ms, 20_000);
    assert_eq!(builtin_default().profile.readiness_timeout_ms, 20_000);
    assert_eq!(
        t("3600000").unwrap().profile.readiness_timeout_ms,
        3_600_000
    );
    for v in ["3600001", "18446744073709551615"] {
        let e = t(v).unwrap_err();
        match &e {
            ProfileError::Field { field, .. } => assert_eq!(field, "readiness_timeout_ms", "{e}"),
            other => panic!("{v}: {other}"),
        }
        assert!(e.to_string().contains("at most 3600000"), "{e}");
        assert_eq!(e.exit_code(), 2);
    }
}

#[test]
fn memory_and_swap_beyond_one_tib_are_refused_and_the_sum_never_wraps() {
    let max = i64::MAX;
    for (res, f) in [
        (format!("memory_bytes = {max}"), "resources.memory_bytes"),
        (format!("swap_bytes = {max}"), "resources.swap_bytes"),
        (
            format!("memory_bytes = {max}\nswap_bytes = {max}"),
            "resources.memory_bytes",
        ),
        (
            "memory_bytes = 1099511627777".into(),
            "resources.memory_bytes",
        ),
        ("swap_bytes = -1".into(), "resources.swap_bytes"),
    ] {
        let e = p(&format!("{MINIMAL}[resources]\n{res}\n")).unwrap_err();
        match &e {
            ProfileError::Field { field, .. } => assert_eq!(field, f, "{e}"),
            other => panic!("{res}: {other}"),
        }
        assert!(e.to_string().contains("1 TiB"), "{e}");
    }
    let ok = p(&format!(
        "{MINIMAL}[resources]\nmemory_bytes = 1099511627776\nswap_bytes = 1099511627776\n"
    ))
    .unwrap();
    assert_eq!(ok.profile.resources.memory_swap(), 2 << 40);
    let huge = ResourceLimits {
        memory_bytes: max,
        swap_bytes: max,
        ..ResourceLimits::default()
    };
    assert_eq!(huge.memory_swap(), max, "saturates, never -2");
    let none = ResourceLimits {
        memory_bytes: -1,
        ..ResourceLimits::default()
    };
    assert_eq!(none.memory_swap(), -1);
}

#[test]
fn tmpfs_on_root_proc_sys_dev_or_with_dotdot_is_refused() {
    for path in [
        "/",
        "/dev",
        "/proc",
        "/sys",
        "/sys/fs",
        "/proc/1",
        "/tmp/../",
        "/tmp/../etc",
        "//",
        "/dev/",
    ] {
        let e = p(&format!("{MINIMAL}[[mounts.tmpfs]]\npath = \"{path}\"\n")).unwrap_err();
        match &e {
            ProfileError::Field { field, .. } => assert_eq!(field, "mounts.tmpfs.path", "{e}"),
            other => panic!("{path}: {other}"),
        }
        assert!(e.to_string().contains("fix:"), "{e}");
    }
    let e = p(&format!(
        "{MINIMAL}[[mounts.tmpfs]]\npath = \"/tmp\"\n[[mounts.tmpfs]]\npath = \"/tmp/\"\n"
    ))
    .unwrap_err();
    assert!(e.to_string().contains("given twice"), "{e}");
    for path in ["/tmp", "/run", "/dev/shm2", "/var/tmp"] {
        p(&format!("{MINIMAL}[[mounts.tmpfs]]\npath = \"{path}\"\n")).unwrap();
    }
    // size 0 is no limit at all for tmpfs: refused, not taken as "none" or "small".
    let e = p(&format!(
        "{MINIMAL}[[mounts.tmpfs]]\npath = \"/tmp\"\nsize_bytes = 0\n"
    ))
    .unwrap_err();
    match &e {
        ProfileError::Field { field, .. } => assert_eq!(field, "mounts.tmpfs.size_bytes", "{e}"),
        other => panic!("{other}"),
    }
    p(&format!(
        "{MINIMAL}[[mounts.tmpfs]]\npath = \"/tmp\"\nsize_bytes = 4096\n"
    ))
    .unwrap();
}

#[test]
fn a_missing_key_or_table_says_to_add_it() {
    let no_image = MINIMAL.replace("[image]\nkind = \"directory\"\npath = \"root\"\n", "");
    let e = p(&no_image).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, ProfileError::Parse { .. }), "{m}");
    assert!(
        m.contains("missing field `image`") && m.contains("fix: add the missing key"),
        "{m}"
    );
    assert!(!m.contains("correct or remove"), "{m}");
    let e = p(&MINIMAL.replace("name = \"t\"\n", "")).unwrap_err();
    assert!(e.to_string().contains("fix: add the missing key"), "{e}");
    let e = p(&format!("{MINIMAL}colour = 1\n")).unwrap_err();
    assert!(
        e.to_string().contains("fix: correct or remove that key"),
        "{e}"
    );
}

#[test]
fn load_refuses_a_device_a_fifo_and_a_file_over_one_mib() {
    let e = load(Path::new("/dev/zero")).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, ProfileError::Read { .. }), "{m}");
    assert!(
        m.starts_with(
            "profile /dev/zero: it is a character device, not a regular file; fix: give --profile"
        ),
        "{m}"
    );
    assert_eq!(e.exit_code(), 2);
    let d = tempfile::tempdir().unwrap();
    let big = d.path().join("big.toml");
    let mut text = MINIMAL.to_string();
    text.push_str(&"#".repeat(1 << 20));
    std::fs::write(&big, text).unwrap();
    let e = load(&big).unwrap_err();
    assert!(e.to_string().contains("cap of 1048576 bytes"), "{e}");
    let fifo = d.path().join("p.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let e = load(&fifo).unwrap_err();
    assert!(e.to_string().contains("a FIFO"), "{e}");
    let good = d.path().join("good.toml");
    std::fs::write(&good, MINIMAL).unwrap();
    let link = d.path().join("link.toml");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    assert_eq!(load(&link).unwrap().profile.name, "t");
}

#[test]
fn a_binary_profile_is_quoted_escaped_and_cut() {
    let junk = format!("A=1\u{0}\u{1b}[31mred\n{}", "x".repeat(10_000));
    let e = p(&junk).unwrap_err().to_string();
    assert!(!e.contains('\u{0}') && !e.contains('\u{1b}'), "{e:?}");
    assert!(e.contains("\\u{1b}") || e.contains("\\u{0}"), "{e}");
    assert!(e.len() < 6000, "{}", e.len());
}

#[test]
fn display_readiness_waits_need_a_display_an_input_region_and_a_sane_still_time() {
    const DISPLAY: &str = "[display]\nnumber = 0\nwidth = 64\nheight = 48\ndepth = 24\n";
    const INPUT: &str = "[display.input]\nkey = \"q\"\nx = 0\ny = 0\nwidth = 8\nheight = 8\n";
    let with = |tables: &str, checks: &str| p(&format!("{MINIMAL}{tables}{checks}"));
    let aw = "[[readiness]]\nkind = \"active-window\"\nname = \"netprobe-typing\"\n";
    let ad = "[[readiness]]\nkind = \"app-drawn\"\n";
    let sq = |ms: &str| format!("[[readiness]]\nkind = \"screen-quiescent\"\n{ms}");
    let ok = with(&format!("{DISPLAY}{INPUT}"), &format!("{aw}{ad}{}", sq(""))).unwrap();
    assert_eq!(
        ok.profile.readiness,
        [
            Readiness::ActiveWindow {
                name: "netprobe-typing".into()
            },
            Readiness::AppDrawn,
            Readiness::ScreenQuiescent { still_ms: 2000 }
        ]
    );
    let refused = |tables: &str, checks: &str, words: &str| {
        let e = with(tables, checks).unwrap_err();
        assert!(
            matches!(&e, ProfileError::Field { field, .. } if field == "readiness"),
            "{e}"
        );
        assert!(e.to_string().contains(words), "{e}");
        assert_eq!(e.exit_code(), 2);
    };
    refused(
        "",
        aw,
        "an active-window check without a [display] table; fix: add [display]",
    );
    refused(
        "",
        &sq(""),
        "a screen-quiescent check without a [display] table",
    );
    refused(
        DISPLAY,
        ad,
        "an app-drawn check without a [display.input] region; fix: add [display.input]",
    );
    refused(
        DISPLAY,
        &sq("still_ms = 100\n"),
        "screen-quiescent still_ms 100 is outside 250..=60000",
    );
    refused(
        DISPLAY,
        &sq("still_ms = 60001\n"),
        "give still_ms from 250 to 60000 milliseconds",
    );
    refused(
        DISPLAY,
        "[[readiness]]\nkind = \"active-window\"\nname = \" \"\n",
        "an active-window check with an empty name",
    );
}

#[test]
fn published_ports_are_checked_at_load_and_pass_the_schema() {
    let base = format!(
        "{MINIMAL}[network]\nguest_port = 5000\n[[readiness]]\nkind = \"tcp\"\nport = 6000\n"
    );
    let ok = format!(
        "{base}[[network.publish]]\nhost_port = 25000\nguest_port = 5000\n[[network.publish]]\nhost_addr = \"::1\"\nhost_port = 25001\nguest_port = 6000\n"
    );
    let lp = p(&ok).unwrap();
    let pubs = &lp.profile.network.publish;
    assert_eq!(pubs[0].host_addr.to_string(), "127.0.0.1");
    assert_eq!(
        (pubs[1].host_addr.to_string(), pubs[1].guest_port),
        ("::1".into(), 6000)
    );
    assert_eq!(served_ports(&lp.profile), [5000, 6000]);
    assert!(schema().is_valid(&as_json(&ok)));
    for (bad, want) in [
        ("host_port = 0\nguest_port = 5000\n", "0 is not a port"),
        (
            "host_port = 25000\nguest_port = 7000\n",
            "guest port 7000 is not served by this profile (it serves 5000, 6000)",
        ),
        (
            "host_port = 25000\nguest_port = 5000\n[[network.publish]]\nhost_port = 25000\nguest_port = 6000\n",
            "host port 25000 is published twice",
        ),
    ] {
        let e = p(&format!("{base}[[network.publish]]\n{bad}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("network.publish[") && e.contains(want), "{e}");
    }
    let e = p(&format!(
        "{base}[[network.publish]]\nhost_port = 70000\nguest_port = 5000\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("70000"), "{e}");
    assert!(!schema().is_valid(&as_json(&format!(
        "{base}[[network.publish]]\nhost_port = 1\nguest_port = 5000\nhost = \"x\"\n"
    ))));
}

#[test]
fn evidence_keep_is_a_whole_number_of_at_least_one() {
    let lp = p(&format!("{MINIMAL}[evidence]\nkeep = 20\n")).unwrap();
    assert_eq!(lp.profile.evidence.keep.map(|k| k.get()), Some(20));
    assert!(schema().is_valid(&as_json(&format!("{MINIMAL}[evidence]\nkeep = 20\n"))));
    // Absent: nothing recorded (a profile without it records the same bytes as before).
    let none = p(MINIMAL).unwrap();
    assert_eq!(none.profile.evidence.keep, None);
    assert!(
        !serde_json::to_string(&none.profile)
            .unwrap()
            .contains("evidence")
    );
    for (bad, want) in [
        ("0", "0 would remove every verb folder"),
        ("-3", "a negative number"),
        ("\"ten\"", "expected evidence.keep: give the number"),
        ("2.5", "expected evidence.keep: give the number"),
        ("99999999999", "too large"),
    ] {
        let e = p(&format!("{MINIMAL}[evidence]\nkeep = {bad}\n")).unwrap_err();
        let text = e.to_string();
        assert_eq!(e.exit_code(), 2, "{text}");
        assert!(
            text.contains(want) && text.contains("evidence.keep") && text.contains("keep = 20"),
            "{bad}: {text}"
        );
    }
    assert!(!schema().is_valid(&as_json(&format!("{MINIMAL}[evidence]\nkeep = 0\n"))));
    let e = p(&format!("{MINIMAL}[evidence]\nkept = 2\n")).unwrap_err();
    assert!(e.to_string().contains("kept"), "{e}");
}
