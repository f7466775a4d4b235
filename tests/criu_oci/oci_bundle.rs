//! config.json content checks (no runtime needed): write_bundle → parse back with oci-spec.

use std::path::PathBuf;

use netprobe::oci::{
    BundleSpec, NetnsSpec, OciError, Resources, build_busybox_rootfs, config_sha256,
    read_bundle_spec, write_bundle,
};
use oci_spec::runtime::{LinuxNamespaceType, Spec};
use sha2::{Digest, Sha256};

fn spec(rootfs: PathBuf, netns: NetnsSpec, resources: Option<Resources>) -> BundleSpec {
    BundleSpec {
        rootfs,
        readonly_root: true,
        args: vec!["sleep".into(), "1000".into()],
        netns,
        resources,
        hostname: "np-test".into(),
        cgroups_path: Some("/netprobe/test".into()),
    }
}

#[test]
fn config_json_round_trips_with_path_netns_and_resources() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let rootfs = tmp.path().join("rootfs");
    build_busybox_rootfs(&rootfs).unwrap();
    let bundle = tmp.path().join("bundle");
    let res = Resources {
        cpu_quota: 400_000,
        cpu_period: 100_000,
        memory_limit: 4 << 30,
        memory_swap: 4 << 30,
    };
    let info = write_bundle(
        &bundle,
        &spec(
            rootfs.clone(),
            NetnsSpec::Path("/proc/1/ns/net".into()),
            Some(res),
        ),
    )
    .unwrap();
    assert_eq!(info.config_path, bundle.join("config.json"));

    // Hash: returned == recomputed == sha256 of the bytes on disk.
    let bytes = std::fs::read(&info.config_path).unwrap();
    let want = hex::encode(Sha256::digest(&bytes));
    assert_eq!(info.sha256, want);
    assert_eq!(config_sha256(&bundle).unwrap(), want);
    // Atomic write leaves no temporary file behind.
    let names: Vec<_> = std::fs::read_dir(&bundle)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["config.json".to_string()]);

    let s: Spec = Spec::load(&info.config_path).unwrap();
    assert_eq!(s, read_bundle_spec(&bundle).unwrap());
    let root = s.root().as_ref().unwrap();
    assert_eq!(root.readonly(), Some(true));
    assert_eq!(root.path(), &std::fs::canonicalize(&rootfs).unwrap());
    assert_eq!(s.hostname().as_deref(), Some("np-test"));

    let p = s.process().as_ref().unwrap();
    assert_eq!(p.args().as_ref().unwrap(), &vec!["sleep", "1000"]);
    assert_eq!(p.terminal(), Some(false));
    assert_eq!(p.cwd(), &PathBuf::from("/"));
    assert_eq!(p.user().uid(), 0);
    assert_eq!(p.user().gid(), 0);
    assert!(
        p.env()
            .as_ref()
            .unwrap()
            .iter()
            .any(|e| e.starts_with("PATH="))
    );
    assert!(p.capabilities().is_some());

    let linux = s.linux().as_ref().unwrap();
    assert!(linux.seccomp().is_none());
    assert_eq!(
        linux.cgroups_path().as_deref(),
        Some(std::path::Path::new("/netprobe/test"))
    );
    let ns = linux.namespaces().as_ref().unwrap();
    let types: Vec<_> = ns.iter().map(|n| n.typ()).collect();
    for t in [
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Ipc,
        LinuxNamespaceType::Uts,
        LinuxNamespaceType::Mount,
        LinuxNamespaceType::Network,
    ] {
        assert!(types.contains(&t), "missing namespace {t:?}");
    }
    assert!(!types.contains(&LinuxNamespaceType::User));
    assert!(!types.contains(&LinuxNamespaceType::Cgroup));
    let net = ns
        .iter()
        .find(|n| n.typ() == LinuxNamespaceType::Network)
        .unwrap();
    assert_eq!(
        net.path().as_deref(),
        Some(std::path::Path::new("/proc/1/ns/net"))
    );

    let r = linux.resources().as_ref().unwrap();
    let cpu = r.cpu().as_ref().unwrap();
    assert_eq!(cpu.quota(), Some(400_000));
    assert_eq!(cpu.period(), Some(100_000));
    let mem = r.memory().as_ref().unwrap();
    assert_eq!(mem.limit(), Some(4 << 30));
    assert_eq!(mem.swap(), Some(4 << 30));

    // The raw JSON uses the OCI names.
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["root"]["readonly"], true);
    assert_eq!(v["linux"]["resources"]["cpu"]["quota"], 400_000);
    assert_eq!(v["linux"]["resources"]["memory"]["swap"], 4_i64 << 30);
    assert!(v["linux"].get("seccomp").is_none());
}

#[test]
fn private_netns_has_no_path_and_no_resources() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let rootfs = tmp.path().join("rootfs");
    build_busybox_rootfs(&rootfs).unwrap();
    let mut sp = spec(rootfs, NetnsSpec::Private, None);
    sp.readonly_root = false;
    sp.cgroups_path = None;
    let info = write_bundle(tmp.path(), &sp).unwrap();
    let s = Spec::load(&info.config_path).unwrap();
    assert_eq!(s.root().as_ref().unwrap().readonly(), Some(false));
    let linux = s.linux().as_ref().unwrap();
    assert!(linux.cgroups_path().is_none());
    let net = linux
        .namespaces()
        .as_ref()
        .unwrap()
        .iter()
        .find(|n| n.typ() == LinuxNamespaceType::Network)
        .unwrap()
        .clone();
    assert!(net.path().is_none());
    let r = linux.resources().as_ref().unwrap();
    assert!(r.cpu().is_none());
    assert!(r.memory().is_none());

    // Rewriting is deterministic (capability sets are sorted): same spec, same hash.
    for _ in 0..8 {
        let again = write_bundle(tmp.path(), &sp).unwrap();
        assert_eq!(again.sha256, info.sha256);
    }
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&info.config_path).unwrap()).unwrap();
    let bounding: Vec<&str> = v["process"]["capabilities"]["bounding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(
        bounding,
        vec!["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]
    );
}

#[test]
fn bad_bundle_specs_are_refused_with_the_fix() {
    let _baton = crate::common::baton(module_path!());
    let tmp = tempfile::tempdir().unwrap();
    let rootfs = tmp.path().join("rootfs");
    build_busybox_rootfs(&rootfs).unwrap();

    let mut sp = spec(rootfs.clone(), NetnsSpec::Private, None);
    sp.args.clear();
    let e = write_bundle(&tmp.path().join("b1"), &sp).unwrap_err();
    assert!(matches!(e, OciError::BadSpec { .. }), "{e}");
    assert!(e.to_string().contains("args is empty"), "{e}");

    let sp = spec(tmp.path().join("nope"), NetnsSpec::Private, None);
    let e = write_bundle(&tmp.path().join("b2"), &sp).unwrap_err();
    assert!(e.to_string().contains("cannot be resolved"), "{e}");

    let sp = spec(rootfs, NetnsSpec::Path("proc/1/ns/net".into()), None);
    let e = write_bundle(&tmp.path().join("b3"), &sp).unwrap_err();
    assert!(e.to_string().contains("is relative"), "{e}");
    // Nothing was written for refused specs.
    assert!(!tmp.path().join("b1").exists());
    assert!(!tmp.path().join("b3").exists());
}
