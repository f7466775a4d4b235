//! host/install-runc.sh and host/install-pins.sh for real (root): an operator-brought runc
//! release is installed only when its detached signature verifies against runc.keyring and its
//! sha256 matches runc.sha256sum (a key and a "release" made here with gpg); a pin the archive no
//! longer serves is said so, the suite's newest version is installed, verified the same way, and
//! netprobe declares the mismatch.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn gpg(home: &Path, args: &[&str]) -> Output {
    let o = Command::new("gpg")
        .env("GNUPGHOME", home)
        .args([
            "--batch",
            "--quiet",
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
        ])
        .args(args)
        .output()
        .expect("gpg");
    assert!(o.status.success(), "gpg {args:?}: {}", text(&o));
    o
}

/// A signing key in a fresh GNUPGHOME; returns the armored public key.
fn make_key(home: &Path, uid: &str) -> Vec<u8> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(home).unwrap();
    std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700)).unwrap();
    gpg(home, &["--quick-gen-key", uid, "ed25519", "sign", "never"]);
    gpg(home, &["--armor", "--export", uid]).stdout
}

/// A release folder: runc.amd64 (a copy of the runc in PATH), runc.sha256sum, the detached
/// signature made with `home`'s key, and `keyring` as runc.keyring.
fn make_release(dir: &Path, home: &Path, keyring: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    let runc = netprobe::host::find_in_path(Path::new("runc")).expect("runc in PATH");
    let bin = dir.join("runc.amd64");
    std::fs::copy(&runc, &bin).unwrap();
    let (sum, _) = netprobe::criu::sha256_file(&bin).unwrap();
    std::fs::write(dir.join("runc.sha256sum"), format!("{sum}  runc.amd64\n")).unwrap();
    gpg(
        home,
        &[
            "--armor",
            "--detach-sign",
            "-o",
            dir.join("runc.amd64.asc").to_str().unwrap(),
            bin.to_str().unwrap(),
        ],
    );
    std::fs::write(dir.join("runc.keyring"), keyring).unwrap();
}

fn install_runc(release: &Path, prefix_root: &Path) -> Output {
    Command::new("bash")
        .arg(root_dir().join("host/install-runc.sh"))
        .args(["--release-dir", release.to_str().unwrap()])
        .args(["--prefix-root", prefix_root.to_str().unwrap()])
        .output()
        .expect("bash")
}

#[test]
fn install_runc_verifies_the_release_before_running_it() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let good_home = tmp.path().join("gnupg-maintainer");
    let other_home = tmp.path().join("gnupg-other");
    let maintainer = make_key(
        &good_home,
        "runc maintainer (netprobe test) <m@example.invalid>",
    );
    let _ = make_key(
        &other_home,
        "someone else (netprobe test) <o@example.invalid>",
    );
    let opt = tmp.path().join("opt");
    std::fs::create_dir_all(&opt).unwrap();

    // A release signed by the maintainer installs, and again is a no-op.
    let rel = tmp.path().join("release");
    make_release(&rel, &good_home, &maintainer);
    let o = install_runc(&rel, &opt);
    assert!(o.status.success(), "{}", text(&o));
    let installed: Vec<_> = std::fs::read_dir(&opt)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(installed.len(), 1, "{installed:?}");
    let prefix = &installed[0];
    assert!(prefix.join("sbin/runc").is_file());
    let rec = netprobe::host::install_record(&prefix.join("sbin/runc")).expect("install record");
    assert_eq!(rec.suite, "release");
    // The installed binary's own sha256: what matches it to a pin (never --version).
    let bin = prefix.join("sbin/runc");
    let (sha, _) = netprobe::criu::sha256_file(&bin).unwrap();
    assert_eq!(rec.binary_sha256.as_deref(), Some(sha.as_str()));
    assert_eq!(netprobe::host::installed_sha256(&bin), Some(sha));
    let o = install_runc(&rel, &opt);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothing to do"));

    // Signed by a key that is not in runc.keyring: refused, nothing installed.
    let opt2 = tmp.path().join("opt2");
    std::fs::create_dir_all(&opt2).unwrap();
    let bad = tmp.path().join("release-other-key");
    make_release(&bad, &other_home, &maintainer);
    let o = install_runc(&bad, &opt2);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("does not verify against runc.keyring"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read_dir(&opt2).unwrap().count(), 0);

    // A binary changed after signing: the signature fails first.
    let tampered = tmp.path().join("release-tampered");
    make_release(&tampered, &good_home, &maintainer);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(tampered.join("runc.amd64"))
        .unwrap();
    std::io::Write::write_all(&mut f, b"\0").unwrap();
    let o = install_runc(&tampered, &opt2);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(std::fs::read_dir(&opt2).unwrap().count(), 0);

    // A checksum file that disagrees with the (correctly signed) binary.
    let badsum = tmp.path().join("release-badsum");
    make_release(&badsum, &good_home, &maintainer);
    std::fs::write(
        badsum.join("runc.sha256sum"),
        format!("{}  runc.amd64\n", "0".repeat(64)),
    )
    .unwrap();
    let o = install_runc(&badsum, &opt2);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("runc.sha256sum lists"));
    assert_eq!(std::fs::read_dir(&opt2).unwrap().count(), 0);

    // A missing piece is named.
    std::fs::remove_file(badsum.join("runc.amd64.asc")).unwrap();
    let o = install_runc(&badsum, &opt2);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("lacks runc.amd64.asc"));
}

#[test]
fn a_pin_the_archive_no_longer_serves_installs_the_newest_and_is_declared() {
    let _baton = crate::common::baton(module_path!());
    crate::common::require_root();
    let tmp = tempfile::tempdir().unwrap();
    let pins = tmp.path().join("pins.toml");
    std::fs::write(
        &pins,
        "[debian.runc-old]\npackage = \"runc\"\nversion = \"1.3.0+ds1-1\"\nsuite = \"sid\"\n\
         prefix = \"runc\"\nbinary = \"usr/sbin/runc\"\ndest = \"sbin/runc\"\n",
    )
    .unwrap();
    let opt = tmp.path().join("opt");
    std::fs::create_dir_all(&opt).unwrap();
    let o = Command::new("bash")
        .arg(root_dir().join("host/install-pins.sh"))
        .env("NETPROBE_PINS_TOML", &pins)
        .env("NETPROBE_OPT_ROOT", &opt)
        .env("NETPROBE_APT_DIR", tmp.path().join("apt"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("PIN MISMATCH: sid no longer serves runc 1.3.0+ds1-1"),
        "{err}"
    );
    assert!(err.contains("InRelease signature good"), "{err}");
    let prefix = std::fs::read_dir(&opt)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("runc-")
        })
        .expect("a runc prefix");
    let bin = prefix.join("sbin/runc");
    let rec = netprobe::host::install_record(&bin).expect("record");
    assert_eq!(rec.pinned_version, "1.3.0+ds1-1");
    assert_ne!(rec.installed_version, rec.pinned_version);
    // The installed binary runs from its own prefix (its suite's libc, patchelf'd).
    let facts =
        netprobe::host::binary_facts(&bin, netprobe::host::BinaryKind::Runtime).expect("runs");
    let host = netprobe::host::host_facts(None, Some(facts));
    let d = netprobe::host::install_record_differences(&host);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].contains("not the pinned 1.3.0+ds1-1"), "{}", d[0]);
    assert!(d[0].contains(&rec.installed_version), "{}", d[0]);
}
