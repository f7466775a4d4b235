use super::*;
use crate::slot::gate::pure_checks::tests::fixture;

fn slot_with_dir_image(d: &Path, st: &mut SlotState) -> (SlotPaths, std::path::PathBuf) {
    let p = SlotPaths::new(&d.join("state"), 61);
    std::fs::create_dir_all(&p.root).unwrap();
    let img = d.join("img");
    std::fs::create_dir_all(img.join("var/www")).unwrap();
    std::fs::write(img.join("var/www/index.html"), b"hello\n").unwrap();
    let mut s = ImageState::plain_directory(ImageKind::Directory, img.clone());
    s.manifest = Some(record_manifest(&img, &p.image_manifest()).unwrap());
    st.image = Some(s);
    (p, img)
}

#[test]
fn a_directory_image_edited_after_provision_is_refused_naming_the_file() {
    let (d, mut st) = fixture();
    let (p, img) = slot_with_dir_image(d.path(), &mut st);
    let ok = image_unchanged(&st, &p).unwrap();
    assert!(ok.contains("4 entries"), "{ok}");
    assert!(ok.contains("as recorded at provision"), "{ok}");
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(img.join("var/www/index.html"), b"CHANGED\n").unwrap();
    let e = image_unchanged(&st, &p).unwrap_err();
    assert!(
        e.contains("changed since provision")
            && e.contains("changed ./var/www/index.html (size 6 → 8, mtime, ctime)")
            && e.contains("ctime cannot be set back")
            && e.contains("`netprobe slot cleanup --slot 61 --state-dir"),
        "{e}"
    );
    // The same bytes put back: still refused (its ctime moved on).
    std::fs::write(img.join("var/www/index.html"), b"hello\n").unwrap();
    let e = image_unchanged(&st, &p).unwrap_err();
    assert!(
        e.contains("changed ./var/www/index.html (mtime, ctime)"),
        "{e}"
    );
    // An edited listing is not trusted to name paths; the refusal stands.
    let l = p.image_manifest();
    let text = std::fs::read_to_string(&l)
        .unwrap()
        .replace("index.html", "other.html");
    std::fs::write(&l, text).unwrap();
    let e = image_unchanged(&st, &p).unwrap_err();
    assert!(
        e.contains("the paths that differ cannot be named") && e.contains("the listing was edited"),
        "{e}"
    );
}

#[test]
fn an_image_made_unreachable_is_proven_again_once_reachable_where_it_was() {
    let (d, mut st) = fixture();
    let (p, _) = slot_with_dir_image(d.path(), &mut st);
    // The image's own folder renamed away: the walk fails, the way back is named; renamed
    // back, its ctime moved on and it stays refused.
    let away = d.path().join("away");
    std::fs::rename(d.path().join("img"), &away).unwrap();
    let e = image_unchanged(&st, &p).unwrap_err();
    assert!(
        e.contains("cannot be walked") && e.contains("make it reachable at"),
        "{e}"
    );
    std::fs::rename(&away, d.path().join("img")).unwrap();
    let e = image_unchanged(&st, &p).unwrap_err();
    assert!(e.contains("changed . (ctime)"), "{e}");
    // A folder above the image renamed away and back: the image's entries are untouched.
    let parent = d.path().join("parent");
    std::fs::create_dir(&parent).unwrap();
    let (p2, _) = slot_with_dir_image(&parent, &mut st);
    std::fs::rename(&parent, d.path().join("parent-away")).unwrap();
    assert!(image_unchanged(&st, &p2).is_err());
    std::fs::rename(d.path().join("parent-away"), &parent).unwrap();
    image_unchanged(&st, &p2).unwrap();
}

#[test]
fn an_older_state_without_a_manifest_fails_closed_with_the_way_out() {
    let (d, mut st) = fixture();
    let (p, _) = slot_with_dir_image(d.path(), &mut st);
    st.image.as_mut().unwrap().manifest = None;
    st.image.as_mut().unwrap().kind = ImageKind::Embedded;
    let e = image_unchanged(&st, &p).unwrap_err();
    assert!(
        e.contains("records no manifest of the embedded image")
            && e.contains("before image manifests")
            && e.contains("then provision a new slot"),
        "{e}"
    );
    st.image = None;
    assert!(
        image_unchanged(&st, &p)
            .unwrap_err()
            .contains("records no image")
    );
}

#[test]
fn a_qcow2_is_proven_by_stat_and_an_older_state_by_its_pin() {
    let (d, mut st) = fixture();
    let p = SlotPaths::new(&d.path().join("state"), 62);
    let q = d.path().join("disk.qcow2");
    std::fs::write(&q, b"qcow2 bytes").unwrap();
    let pin = crate::evidence::sha256_file(&q).unwrap().0;
    let before = source_stat(&q).unwrap();
    let held = qcow2_stat_held(&q, Some(before)).unwrap();
    let mut img = ImageState::plain_directory(ImageKind::Qcow2, d.path().join("lower"));
    img.source = q.clone();
    img.sha256 = Some(pin.clone());
    img.file_stat = Some(held);
    st.image = Some(img);
    let ok = image_unchanged(&st, &p).unwrap();
    assert!(ok.contains("not re-hashed") && ok.contains(&pin), "{ok}");
    // No stat recorded (an older state): hashed whole against the pin.
    let mut old = st.clone();
    old.image.as_mut().unwrap().file_stat = None;
    let ok = image_unchanged(&old, &p).unwrap();
    assert!(
        ok.contains("hashed whole") && ok.contains("older netprobe"),
        "{ok}"
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&q, b"qcow2 bytes, grown").unwrap();
    let e = image_unchanged(&st, &p).unwrap_err();
    assert!(
        e.contains("changed since it was hashed to the pin")
            && e.contains("size 11 → 18")
            && e.contains("ctime"),
        "{e}"
    );
    let e = image_unchanged(&old, &p).unwrap_err();
    assert!(e.contains(&format!("not the pin {pin}")), "{e}");
    // A file written between its hash and its export: provision refuses it.
    let e = qcow2_stat_held(&q, Some(before)).unwrap_err().to_string();
    assert!(
        e.contains("changed between its sha256 check and its FUSE export"),
        "{e}"
    );
    assert!(qcow2_stat_held(&q, None).is_err());
}
