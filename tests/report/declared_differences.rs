//! Declared differences describe what actually ran (issue 11, point 3): a `--rootfs` run is not
//! described as netprobe's busybox rootfs; the "no TCP connection" sentence names the check
//! that backs it.

use netprobe::evidence::result::RungName;
use netprobe::probe::netns_content::NetnsContent;
use netprobe::probe::runner::standing_differences;
use std::path::Path;

#[test]
fn a_given_rootfs_is_named_not_the_busybox_one() {
    let _baton = crate::common::baton(module_path!());
    let phases = [RungName::Oci, RungName::ExternalNetns];
    let own = standing_differences(
        &phases,
        Some(Path::new("/srv/images/app-rootfs")),
        NetnsContent::Lo,
    );
    let line = own
        .iter()
        .find(|d| d.starts_with("runtime rungs run"))
        .expect("a runtime-rung sentence");
    assert!(
        line.contains("/srv/images/app-rootfs given with --rootfs"),
        "{line}"
    );
    assert!(!line.contains("busybox"), "{line}");
    assert!(line.contains("without --tcp-established"), "{line}");

    let built = standing_differences(&phases, None, NetnsContent::Lo);
    let line = built
        .iter()
        .find(|d| d.starts_with("runtime rungs run"))
        .unwrap();
    assert!(line.contains("busybox rootfs built by netprobe"), "{line}");
    // No runtime rung, no runtime sentence.
    assert!(
        standing_differences(&[RungName::Kernel], Some(Path::new("/x")), NetnsContent::Lo)
            .iter()
            .all(|d| !d.starts_with("runtime rungs"))
    );
}

#[test]
fn a_rich_netns_is_not_described_as_lo_only() {
    let _baton = crate::common::baton(module_path!());
    let phases = [RungName::Kernel, RungName::Criu];
    let lo = standing_differences(&phases, None, NetnsContent::Lo);
    assert!(
        lo.iter()
            .any(|d| d.contains("holding only lo (--netns lo)")),
        "{lo:?}"
    );
    let rich = standing_differences(&phases, None, NetnsContent::Rich);
    assert!(
        rich.iter()
            .all(|d| !d.contains("criu rungs probe a netns holding only lo")),
        "{rich:?}"
    );
    assert!(
        rich.iter().any(|d| d.contains("--netns rich content")),
        "{rich:?}"
    );
}
