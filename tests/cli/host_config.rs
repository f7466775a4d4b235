//! CRIU config-file refusal. This module holds one test only, because it sets
//! `$CRIU_CONFIG_FILE` in the test process's environment (the baton keeps every other test of
//! the `cli` binary from running meanwhile; the test removes the variable before it ends).

use netprobe::host::config::criu_config_files_in;
use netprobe::host::{HostError, criu_config_files, refuse_criu_config};

use std::ffi::OsStr;

#[test]
fn config_files_are_refused() {
    let _baton = crate::common::baton(module_path!());
    // Explicit inputs: a fake root with /etc/criu/runc.conf, a home with .criu/default.conf.
    let root = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    assert!(criu_config_files_in(root.path(), Some(home.path().as_os_str()), None).is_empty());
    std::fs::create_dir_all(root.path().join("etc/criu")).unwrap();
    std::fs::write(root.path().join("etc/criu/runc.conf"), "tcp-established\n").unwrap();
    std::fs::create_dir_all(home.path().join(".criu")).unwrap();
    std::fs::write(home.path().join(".criu/default.conf"), "\n").unwrap();
    let found = criu_config_files_in(
        root.path(),
        Some(home.path().as_os_str()),
        Some(OsStr::new("")),
    );
    assert_eq!(
        found,
        vec![
            home.path().join(".criu/default.conf"),
            root.path().join("etc/criu/runc.conf")
        ]
    );

    // The real process environment: a temp $CRIU_CONFIG_FILE that exists, then one that does not.
    // Either way the fix is to unset the variable (the file is not in a place CRIU reads by
    // itself).
    let before = criu_config_files();
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("netprobe-test.conf");
    std::fs::write(&conf, "empty-ns net\n").unwrap();
    // SAFETY: this test binary has a single test, so no other thread reads the environment.
    unsafe { std::env::set_var("CRIU_CONFIG_FILE", &conf) };
    let e = refuse_criu_config().unwrap_err();
    let HostError::CriuConfigFile { files } = &e else {
        panic!("wrong error {e:?}")
    };
    assert_eq!(files.last(), Some(&conf));
    let msg = e.to_string();
    let c = conf.display();
    assert!(
        msg.contains(&format!("CRIU_CONFIG_FILE={c} is set in the environment: unset it (env -u CRIU_CONFIG_FILE), CRIU config files silently change checkpoint behaviour")),
        "{msg}"
    );

    // The CRIU gate refuses too (as root; not root is refused first).
    let gate = netprobe::host::refuse_unless_ready(&netprobe::host::default_criu()).unwrap_err();
    if crate::common::is_root() {
        assert!(matches!(gate, HostError::CriuConfigFile { .. }), "{gate:?}");
    } else {
        assert!(matches!(gate, HostError::NotRoot), "{gate:?}");
    }

    let missing = dir.path().join("missing.conf");
    // SAFETY: as above.
    unsafe { std::env::set_var("CRIU_CONFIG_FILE", &missing) };
    let e = refuse_criu_config().unwrap_err();
    assert!(e.to_string().contains("unset it"), "{e}");
    assert!(
        e.to_string().contains(&missing.display().to_string()),
        "{e}"
    );

    // Empty means unset.
    // SAFETY: as above.
    unsafe { std::env::set_var("CRIU_CONFIG_FILE", "") };
    assert_eq!(criu_config_files(), before);
    // SAFETY: as above.
    unsafe { std::env::remove_var("CRIU_CONFIG_FILE") };
    assert_eq!(criu_config_files(), before);
    if before.is_empty() {
        refuse_criu_config().unwrap();
        if crate::common::is_root() && netprobe::host::default_criu().is_absolute() {
            let f = netprobe::host::refuse_unless_ready(&netprobe::host::default_criu()).unwrap();
            assert!(!f.version.is_empty());
        }
    }
}
