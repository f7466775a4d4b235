//! `netprobe images ARCHIVE` on bad input: every archive here is built by the test (tar
//! headers written by hand where a real writer refuses to make them), and each refusal must
//! exit 2 naming the archive, the entry (with its offset) and the fix, and write nothing.
//! The good shapes (tar, tar.gz, tar.zst told by content, whatever the name says) are read.
//! Real Podman archives are tests/criu_oci/archive_podman.rs.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

/// `inventory.img`: INVENTORY_MAGIC and one empty entry.
fn inventory() -> Vec<u8> {
    let mut v = 0x5831_3116u32.to_ne_bytes().to_vec();
    v.extend_from_slice(&0u32.to_ne_bytes());
    v
}

/// A header for `name` (written raw: no path check), type `kind`, `size` bytes declared.
fn header(name: &[u8], kind: tar::EntryType, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.as_old_mut().name[..name.len()].copy_from_slice(name);
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(0o644);
    h.set_cksum();
    h
}

/// A tar of `(name, bytes)` regular files, end-of-archive blocks included.
fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (n, d) in files {
        b.append(
            &header(n.as_bytes(), tar::EntryType::Regular, d.len() as u64),
            *d,
        )
        .unwrap();
    }
    b.into_inner().unwrap()
}

fn good_tar() -> Vec<u8> {
    tar_of(&[
        ("config.dump", br#"{"name":"c","runtime":"runc"}"#),
        (
            "spec.dump",
            br#"{"linux":{"namespaces":[{"type":"network"}]}}"#,
        ),
        ("checkpoint/inventory.img", &inventory()),
        ("checkpoint/pages-1.img", &[7u8; 70_000]),
    ])
}

/// `v` against evidence-schema/checkpoint-archive.schema.json.
fn schema_valid(v: &serde_json::Value) {
    use netprobe::evidence::schema::{compile, validate_with};
    let text = include_str!("../../evidence-schema/checkpoint-archive.schema.json");
    let validator = compile("checkpoint-archive.schema.json", text);
    if let Err(e) = validate_with(&validator, v) {
        panic!("not valid against checkpoint-archive.schema.json: {e:#?}\n{v:#}");
    }
}

fn zstd_of(b: &[u8]) -> Vec<u8> {
    zstd::encode_all(b, 3).unwrap()
}

/// Writes `bytes` as `name` in a fresh folder, runs `netprobe images` on it, and checks that
/// the folder still holds that one file (nothing written). Returns (exit code, stdout, stderr).
fn run(name: &str, bytes: &[u8], json: bool) -> (i32, String, String) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    let mut c = Command::new(crate::common::EXE);
    c.arg("images").arg(&p).current_dir(d.path());
    if json {
        c.arg("--json");
    }
    let o = c.output().unwrap();
    let left: Vec<PathBuf> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        left,
        std::slice::from_ref(&p),
        "netprobe images wrote beside the archive"
    );
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn refused(name: &str, bytes: &[u8], wants: &[&str]) {
    let (code, out, err) = run(name, bytes, false);
    assert_eq!(code, 2, "{name}: exit {code}\nstdout {out}\nstderr {err}");
    assert!(out.is_empty(), "{name}: printed {out}");
    assert!(
        err.contains(name),
        "{name}: the archive is not named: {err}"
    );
    for w in wants {
        assert!(err.contains(w), "{name}: {w:?} missing from: {err}");
    }
}

#[test]
fn good_archives_are_read_by_content_whatever_their_name() {
    let _baton = crate::common::baton(module_path!());
    let t = good_tar();
    let gz = {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&t).unwrap();
        e.finish().unwrap()
    };
    for (name, bytes, compression) in [
        ("ck.tar.gz", zstd_of(&t), "zstd"),
        ("ck.tar", gz, "gzip"),
        ("ck.bin", t.clone(), "tar"),
    ] {
        let (code, out, err) = run(name, &bytes, true);
        assert_eq!(code, 0, "{name}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        schema_valid(&v);
        assert_eq!(v["compression"], compression);
        assert_eq!(v["finding"]["kind"], "no-network-image");
        assert_eq!(v["engine"]["runtime"], "runc");
        assert_eq!(v["checkpoint_files"], 2);
    }
}

#[test]
fn truncated_and_corrupt_archives_are_refused() {
    let _baton = crate::common::baton(module_path!());
    let t = good_tar();
    // Mid-entry (pages-1.img's data) and at an entry's end (no end-of-archive blocks).
    let cut = &t[..t.len() - 1024 - 512 * 20];
    refused(
        "mid.tar",
        cut,
        &["truncated", "pages-1.img", "copy the whole archive again"],
    );
    let no_end = &t[..t.len() - 1024];
    refused(
        "end.tar",
        no_end,
        &[
            "truncated",
            "the end-of-archive blocks after checkpoint/pages-1.img",
        ],
    );
    let z = zstd_of(&t);
    refused("cut.tar.zst", &z[..z.len() / 2], &["truncated"]);
    let mut bad = z.clone();
    let mid = bad.len() / 2;
    for b in &mut bad[mid..mid + 16] {
        *b ^= 0x5a;
    }
    refused(
        "bad.tar.zst",
        &bad,
        &["corrupt zstd stream", "export the checkpoint again"],
    );
    refused(
        "x.tar",
        b"PK\x03\x04 not a tar",
        &["not a tar, gzip or zstd archive", "504b0304"],
    );
}

#[test]
fn tar_bombs_links_devices_and_escapes_are_refused_with_entry_and_offset() {
    let _baton = crate::common::baton(module_path!());
    let inv = inventory();
    // A huge declared size (1 TiB) on the second entry, at offset 1024.
    let mut b = tar::Builder::new(Vec::new());
    b.append(
        &header(
            b"checkpoint/inventory.img",
            tar::EntryType::Regular,
            inv.len() as u64,
        ),
        &inv[..],
    )
    .unwrap();
    b.append(
        &header(b"checkpoint/pages-1.img", tar::EntryType::Regular, 1 << 40),
        &[][..],
    )
    .unwrap();
    refused(
        "huge.tar",
        &b.into_inner().unwrap(),
        &[
            "entry checkpoint/pages-1.img (offset 1024)",
            "declares 1099511627776 bytes",
        ],
    );
    // Many entries: 65,537 empty files, zstd-compressed (a few KiB).
    let mut b = tar::Builder::new(Vec::new());
    for i in 0..65_537u32 {
        b.append(
            &header(
                format!("checkpoint/f{i}").as_bytes(),
                tar::EntryType::Regular,
                0,
            ),
            &[][..],
        )
        .unwrap();
    }
    refused(
        "many.tar.zst",
        &zstd_of(&b.into_inner().unwrap()),
        &["more than 65536 entries", "offset 33554432"],
    );
    // A network image over 16 MiB.
    let big = vec![0u8; (16 << 20) + 1];
    refused(
        "bigimg.tar.zst",
        &zstd_of(&tar_of(&[("checkpoint/netdev-10.img", &big)])),
        &["netdev-10.img (offset 0)", "a CRIU network image may hold"],
    );
    for (name, kind, what) in [
        (
            &b"checkpoint/netns-10.img"[..],
            tar::EntryType::Symlink,
            "symbolic link",
        ),
        (b"checkpoint/x", tar::EntryType::Link, "hard link"),
        (b"checkpoint/dev", tar::EntryType::Char, "character device"),
        (b"checkpoint/fifo", tar::EntryType::Fifo, "FIFO"),
        (b"../escape", tar::EntryType::Regular, "leaves the archive"),
        (
            b"/etc/cron.d/x",
            tar::EntryType::Regular,
            "leaves the archive",
        ),
    ] {
        let mut b = tar::Builder::new(Vec::new());
        b.append(
            &header(
                b"checkpoint/inventory.img",
                tar::EntryType::Regular,
                inv.len() as u64,
            ),
            &inv[..],
        )
        .unwrap();
        b.append(&header(name, kind, 0), &[][..]).unwrap();
        let entry = String::from_utf8_lossy(name).into_owned();
        refused(
            "e.tar",
            &b.into_inner().unwrap(),
            &[&format!("entry {entry} (offset 1024)"), what],
        );
    }
}

#[test]
fn an_archive_without_checkpoint_or_images_is_refused() {
    let _baton = crate::common::baton(module_path!());
    let t = tar_of(&[("config.dump", b"{}"), ("rootfs-diff.tar", &[0u8; 1024])]);
    refused(
        "nock.tar",
        &t,
        &[
            "no checkpoint/ among its 2 entries",
            "podman container checkpoint --export",
        ],
    );
    let t = tar_of(&[("checkpoint/pages-1.img", &[1u8; 10])]);
    refused("noimg.tar", &t, &["checkpoint/ holds no CRIU image"]);
    let t = tar_of(&[
        ("checkpoint/inventory.img", &inventory()),
        ("network.status", b"[1,"),
    ]);
    refused("meta.tar", &t, &["meta.tar:network.status: not the JSON"]);
    let bad = tar_of(&[
        ("checkpoint/inventory.img", &inventory()),
        ("checkpoint/netns-10.img", &[1, 2, 3, 4, 5, 6, 7, 8]),
    ]);
    refused(
        "img.tar",
        &bad,
        &["img.tar:checkpoint/netns-10.img: offset 0: wrong IMG_COMMON_MAGIC"],
    );
}

#[test]
fn diff_of_two_archives_names_the_finding_and_exits_1_when_the_network_differs() {
    let _baton = crate::common::baton(module_path!());
    use prost::Message;
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a.tar");
    let b = d.path().join("b.tar.zst");
    std::fs::write(&a, good_tar()).unwrap();
    let mut netns = 0x5456_4319u32.to_ne_bytes().to_vec();
    netns.extend_from_slice(&0x5593_3752u32.to_ne_bytes());
    let e = netprobe::images::pb::NetnsEntry {
        ext_key: Some("extRootNetNS".into()),
        ..Default::default()
    }
    .encode_to_vec();
    netns.extend_from_slice(&(e.len() as u32).to_ne_bytes());
    netns.extend_from_slice(&e);
    let t = tar_of(&[
        ("config.dump", br#"{"name":"c","runtime":"runc"}"#),
        ("checkpoint/inventory.img", &inventory()),
        ("checkpoint/netns-10.img", &netns),
    ]);
    std::fs::write(&b, zstd_of(&t)).unwrap();
    let diff = |x: &std::path::Path, y: &std::path::Path| {
        let o = Command::new(crate::common::EXE)
            .arg("diff")
            .arg(x)
            .arg(y)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    let (code, out) = diff(&a, &b);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("finding no-network-image") && out.contains("finding external-key"),
        "{out}"
    );
    assert!(
        out.contains("finding.kind: \"no-network-image\" -> \"external-key\""),
        "{out}"
    );
    let (code, out) = diff(&a, &a);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("no difference"), "{out}");
}
