//! Checkpoint archives from Debian 12's podman (rootful, netavark), for real: a busybox
//! `sleep` is exported with `podman container checkpoint --export`, `netprobe images` gives
//! the archive's finding, the container is removed and `podman container restore --import`
//! brings it back, and netprobe's own capture inside the restored container's network
//! namespace must be what the finding said (`images::restored::mismatches`).
//!
//! - runc, the default bridge: `external-key`, the recorded address and MAC come back.
//! - runc, `--network none`: `no-network-image`, `lo` DOWN and nothing else.
//! - crun 1.28 + CRIU 4.3, `--network none`: `namespace-dumped`, what the images hold. crun
//!   refuses this hybrid cgroup host, so that case runs in a private mount namespace
//!   (`unshare -m --propagation private`) with `/sys/fs/cgroup/unified` lazily unmounted there
//!   only; run, checkpoint, restore and rm all happen in that one namespace.
//! - A CRI-O/kubelet archive cannot be produced here (no CRI-O, no kubelet): one is built from
//!   CRI-O's documented layout (KEP-2008: `checkpoint/`, `config.dump`, `spec.dump` with the
//!   `io.kubernetes.cri-o.IP.0` annotation, `bind.mounts`, `rootfs-diff.tar`, `stats-dump`,
//!   `dump.log`) around the `checkpoint/` of the real Podman bridge export; it is read, not
//!   restored.
//!
//! Containers are named `netprobe-archive-*`; each is removed (`podman rm -f`) on success,
//! failure and panic, the imported image too, and netavark's firewall chains and
//! `net.ipv4.ip_forward` are put back as they were when the test found them. Root, podman and
//! the /opt CRIU and crun builds are prerequisites: missing, the test fails.

use netprobe::images::checkpoint::{Checkpoint, read_checkpoint};
use netprobe::images::finding::FindingKind;
use netprobe::images::restored::mismatches;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const CRIU_42: &str = "/opt/criu-4.2.1/sbin";
const CRIU_43: &str = "/opt/criu-4.3/sbin";
const CRUN: &str = "/opt/crun-1.28/bin/crun";
const ULIMITS: [&str; 4] = [
    "--ulimit",
    "nofile=4096:4096",
    "--ulimit",
    "nproc=4096:4096",
];

fn path_with(criu: &str) -> String {
    format!("{criu}:{}", std::env::var("PATH").unwrap_or_default())
}

fn podman(criu: &str, args: &[&str]) -> Output {
    Command::new("podman")
        .args(args)
        .env("PATH", path_with(criu))
        .stdin(Stdio::null())
        .output()
        .expect("run podman")
}

fn ok(o: Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: {}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn prerequisites() {
    crate::common::require_root();
    for p in [
        "/usr/bin/podman",
        &format!("{CRIU_42}/criu"),
        &format!("{CRIU_43}/criu"),
        CRUN,
    ] {
        assert!(
            Path::new(p).exists(),
            "{p} is missing: run `bash host/setup.sh --test-deps` (podman: host/install-test-deps.sh)"
        );
    }
}

/// The host state podman's bridge may change, put back on drop: netavark's iptables chains
/// (removed when the test found none) and `net.ipv4.ip_forward`.
struct HostNet {
    had_netavark: bool,
    ip_forward: String,
}

impl HostNet {
    fn save() -> HostNet {
        HostNet {
            had_netavark: iptables_save().contains("NETAVARK"),
            ip_forward: std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward")
                .unwrap_or_default(),
        }
    }
}

fn iptables_save() -> String {
    let o = Command::new("iptables-save")
        .output()
        .expect("iptables-save");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

impl Drop for HostNet {
    fn drop(&mut self) {
        if !self.had_netavark {
            let ipt = |args: &[&str]| {
                let _ = Command::new("iptables")
                    .args(args)
                    .stderr(Stdio::null())
                    .status();
            };
            ipt(&[
                "-D",
                "FORWARD",
                "-m",
                "comment",
                "--comment",
                "netavark firewall plugin rules",
                "-j",
                "NETAVARK_FORWARD",
            ]);
            ipt(&["-F", "NETAVARK_FORWARD"]);
            ipt(&["-X", "NETAVARK_FORWARD"]);
            for chain in ["PREROUTING", "OUTPUT"] {
                ipt(&[
                    "-t",
                    "nat",
                    "-D",
                    chain,
                    "-m",
                    "addrtype",
                    "--dst-type",
                    "LOCAL",
                    "-j",
                    "NETAVARK-HOSTPORT-DNAT",
                ]);
            }
            ipt(&[
                "-t",
                "nat",
                "-D",
                "POSTROUTING",
                "-j",
                "NETAVARK-HOSTPORT-MASQ",
            ]);
            for c in [
                "NETAVARK-HOSTPORT-DNAT",
                "NETAVARK-HOSTPORT-MASQ",
                "NETAVARK-HOSTPORT-SETMARK",
            ] {
                ipt(&["-t", "nat", "-F", c]);
                ipt(&["-t", "nat", "-X", c]);
            }
        }
        if !self.ip_forward.is_empty() {
            let _ = std::fs::write("/proc/sys/net/ipv4/ip_forward", &self.ip_forward);
        }
    }
}

/// A container name and the image the test imported, removed on drop.
struct Ctr {
    name: String,
    image: String,
}

impl Drop for Ctr {
    fn drop(&mut self) {
        let _ = podman(CRIU_42, &["rm", "-f", "-t", "0", &self.name]);
        let _ = podman(CRIU_42, &["rmi", "-f", &self.image]);
    }
}

/// Imports a busybox rootfs (`/bin/busybox` and `sleep`) as `localhost/<name>:test`.
fn import_busybox(dir: &Path, name: &str) -> String {
    let root = dir.join("rootfs");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", root.join("bin/sleep")).unwrap();
    let tar = dir.join("rootfs.tar");
    let o = Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .output()
        .unwrap();
    ok(o, "tar the rootfs");
    let image = format!("localhost/{name}:test");
    ok(
        podman(CRIU_42, &["import", tar.to_str().unwrap(), &image]),
        "podman import",
    );
    image
}

/// `c`'s JSON against evidence-schema/checkpoint-archive.schema.json.
fn schema_valid(c: &Checkpoint) {
    use netprobe::evidence::schema::{compile, validate_with};
    let text = include_str!("../../evidence-schema/checkpoint-archive.schema.json");
    let v = serde_json::to_value(c).unwrap();
    if let Err(e) = validate_with(&compile("checkpoint-archive.schema.json", text), &v) {
        panic!("not valid against checkpoint-archive.schema.json: {e:#?}");
    }
}

/// netprobe's capture in `/proc/<pid>/ns/net`, held against the finding.
fn check_restored(c: &Checkpoint, pid: &str) {
    schema_valid(c);
    let ns = PathBuf::from(format!("/proc/{pid}/ns/net"));
    let (state, _) = netprobe::ns::capture_netstate(&ns).expect("capture the restored netns");
    let expect = c
        .finding
        .expect
        .as_ref()
        .expect("the finding states the restored links");
    let m = mismatches(expect, &state);
    assert!(
        m.is_empty(),
        "the restore differs from the finding: {m:#?}\nstate: {:#?}",
        state.links
    );
}

fn netprobe_images(archive: &Path) -> String {
    let o = Command::new(crate::common::EXE)
        .arg("images")
        .arg(archive)
        .output()
        .unwrap();
    ok(o, "netprobe images")
}

/// run → export → `netprobe images` → rm → restore --import → capture, under runc.
fn runc_case(network: &str, case: &str) -> (Checkpoint, tempfile::TempDir) {
    let d = tempfile::tempdir().unwrap();
    let name = format!("netprobe-archive-{case}");
    let image = import_busybox(d.path(), &name);
    let _c = Ctr {
        name: name.clone(),
        image: image.clone(),
    };
    let mut args = vec!["run", "-d", "--name", &name, "--network", network];
    args.extend(ULIMITS);
    args.extend([image.as_str(), "/bin/sleep", "1000"]);
    ok(podman(CRIU_42, &args), "podman run");
    // The name says gzip; podman writes zstd: netprobe goes by content.
    let archive = d.path().join("ck.tar.gz");
    ok(
        podman(
            CRIU_42,
            &[
                "container",
                "checkpoint",
                "--export",
                archive.to_str().unwrap(),
                &name,
            ],
        ),
        "podman checkpoint --export",
    );
    let c = read_checkpoint(&archive).expect("read the export");
    let text = netprobe_images(&archive);
    assert!(
        text.contains(&format!("finding: {}", c.finding.kind.as_str())),
        "{text}"
    );
    ok(
        podman(CRIU_42, &["rm", "-f", "-t", "0", &name]),
        "podman rm",
    );
    ok(
        podman(
            CRIU_42,
            &[
                "container",
                "restore",
                "--import",
                archive.to_str().unwrap(),
            ],
        ),
        "podman restore --import",
    );
    let pid = ok(
        podman(CRIU_42, &["inspect", "-f", "{{.State.Pid}}", &name]),
        "podman inspect",
    );
    check_restored(&c, &pid);
    (c, d)
}

#[test]
fn podman_runc_bridge_export_is_external_key_and_restores_the_recorded_address() {
    let _baton = crate::common::baton(module_path!());
    prerequisites();
    let _net = HostNet::save();
    let (c, d) = runc_case("bridge", "bridge");
    assert_eq!(c.finding.kind, FindingKind::ExternalKey, "{:#?}", c.finding);
    assert_eq!(c.compression.as_str(), "zstd");
    let eth0 = &c.engine.interfaces[0];
    assert_eq!(eth0.interface.as_deref(), Some("eth0"));
    assert!(
        c.finding.restore.contains(&eth0.addresses[0]),
        "{}",
        c.finding.restore
    );
    assert!(
        c.finding
            .decided_by
            .as_deref()
            .unwrap()
            .contains("--ignore-static-ip")
    );
    assert!(
        c.engine
            .netns_path
            .as_deref()
            .unwrap()
            .starts_with("/run/netns/")
    );
    assert!(
        c.finding
            .rests_on
            .contains(&"checkpoint/netns-10.img".to_string())
            || c.finding.rests_on[0].starts_with("checkpoint/netns-")
    );
    crio_from(&d.path().join("ck.tar.gz"), &c);
}

#[test]
fn podman_runc_network_none_export_has_no_network_image_and_restores_lo_down() {
    let _baton = crate::common::baton(module_path!());
    prerequisites();
    let (c, _d) = runc_case("none", "none");
    assert_eq!(
        c.finding.kind,
        FindingKind::NoNetworkImage,
        "{:#?}",
        c.finding
    );
    assert!(c.images.namespaces.is_empty());
    assert!(
        c.finding.reason.contains("runc") && c.finding.reason.contains("empty_ns"),
        "{}",
        c.finding.reason
    );
}

/// The crun case's script, run in a private mount namespace: the restored container's pid
/// goes to `pid`, then it waits for `done` (the test's capture) and removes the container.
const CRUN_SCRIPT: &str = r#"set -eu
name=$1 image=$2 archive=$3 dir=$4
P="podman --runtime $CRUN --cgroup-manager=cgroupfs"
trap '$P rm -f -t 0 "$name" >/dev/null 2>&1 || true' EXIT INT TERM
umount -l /sys/fs/cgroup/unified
$P run -d --name "$name" --network none --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 "$image" /bin/sleep 1000 >/dev/null
$P container checkpoint --export "$archive" "$name" >/dev/null
$P rm -f -t 0 "$name" >/dev/null
$P container restore --import "$archive" >/dev/null
$P inspect -f '{{.State.Pid}}' "$name" > "$dir/pid.tmp" && mv "$dir/pid.tmp" "$dir/pid"
i=0; while [ ! -e "$dir/done" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done
"#;

/// Kills the crun script's process group on drop (its trap removes the container).
struct Script(std::process::Child);

impl Drop for Script {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.0.wait();
    }
}

#[test]
fn podman_crun_network_none_export_holds_the_namespace_and_restores_it() {
    let _baton = crate::common::baton(module_path!());
    prerequisites();
    use std::os::unix::process::CommandExt;
    let d = tempfile::tempdir().unwrap();
    let name = "netprobe-archive-crun";
    let image = import_busybox(d.path(), name);
    let _img = Ctr {
        name: name.into(),
        image: image.clone(),
    };
    let archive = d.path().join("crun.tar.zst");
    let child = Command::new("unshare")
        .args([
            "-m",
            "--propagation",
            "private",
            "bash",
            "-c",
            CRUN_SCRIPT,
            "crun-case",
            name,
            &image,
        ])
        .arg(&archive)
        .arg(d.path())
        .env("PATH", path_with(CRIU_43))
        .env("CRUN", CRUN)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let mut script = Script(child);
    let t0 = Instant::now();
    while !d.path().join("pid").exists() {
        if let Ok(Some(st)) = script.0.try_wait() {
            let mut err = String::new();
            let _ = script.0.stderr.take().unwrap().read_to_string(&mut err);
            panic!("the crun script ended before the restore: {st}: {err}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(180),
            "crun case: no restore after 180 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = std::fs::read_to_string(d.path().join("pid"))
        .unwrap()
        .trim()
        .to_string();
    let c = read_checkpoint(&archive).expect("read the crun export");
    assert_eq!(
        c.finding.kind,
        FindingKind::NamespaceDumped,
        "{:#?}",
        c.finding
    );
    assert!(c.engine.runtime.as_deref().unwrap().ends_with("crun"));
    let files = &c.images.namespaces[0].files;
    for k in ["netns-", "netdev-", "ifaddr-", "route-", "route6-"] {
        assert!(
            files.iter().any(|f| f.starts_with(k)),
            "{k}* missing: {files:?}"
        );
    }
    check_restored(&c, &pid);
    std::fs::write(d.path().join("done"), b"").unwrap();
    let st = script.0.wait().unwrap();
    assert!(st.success(), "crun script: {st}");
}

/// Builds a CRI-O/kubelet archive (KEP-2008 layout) around the real export's `checkpoint/`
/// and checks its finding: the IP annotation and the namespace path read from `spec.dump`,
/// `external-key` with the pod deciding the address. Not restorable here (no CRI-O).
fn crio_from(podman_archive: &Path, podman: &Checkpoint) {
    let f = std::fs::File::open(podman_archive).unwrap();
    let mut ar = tar::Archive::new(zstd::stream::read::Decoder::new(f).unwrap());
    let out = podman_archive.with_file_name("checkpoint-web_default-app-2026-12-07T00:00:00Z.tar");
    let mut b = tar::Builder::new(std::fs::File::create(&out).unwrap());
    let ip = podman.engine.interfaces[0].addresses[0]
        .split('/')
        .next()
        .unwrap()
        .to_string();
    for e in ar.entries().unwrap() {
        let mut e = e.unwrap();
        let path = e.path().unwrap().into_owned();
        let p = path.to_string_lossy().into_owned();
        let mut data = Vec::new();
        e.read_to_end(&mut data).unwrap();
        let keep =
            p.starts_with("checkpoint") || ["rootfs-diff.tar", "stats-dump"].contains(&p.as_str());
        if p == "spec.dump" {
            let mut spec: serde_json::Value = serde_json::from_slice(&data).unwrap();
            spec["annotations"] = serde_json::json!({
                "io.kubernetes.cri-o.IP.0": ip,
                "io.kubernetes.container.name": "app",
                "io.kubernetes.pod.name": "web",
            });
            for n in spec["linux"]["namespaces"].as_array_mut().unwrap() {
                if n["type"] == "network" {
                    n["path"] = "/var/run/netns/7c3f9a1e-0000-4000-8000-000000000001".into();
                }
            }
            append(&mut b, "spec.dump", &serde_json::to_vec(&spec).unwrap());
        } else if keep {
            let mut h = e.header().clone();
            h.set_cksum();
            b.append(&h, &data[..]).unwrap();
        }
    }
    let config = serde_json::json!({"id": "4f1c", "name": "k8s_app_web_default", "rootfsImageName": "localhost/app:1", "runtime": "runc", "createdTime": "2026-12-07T00:00:00Z", "checkpointedTime": "2026-12-07T00:01:00Z", "restoredTime": "0001-01-01T00:00:00Z", "restored": false});
    append(&mut b, "config.dump", &serde_json::to_vec(&config).unwrap());
    append(&mut b, "bind.mounts", b"[]");
    append(
        &mut b,
        "dump.log",
        b"(built by the test: CRI-O's layout around a Podman export's checkpoint/)\n",
    );
    b.finish().unwrap();
    drop(b);
    let c = read_checkpoint(&out).expect("read the CRI-O-layout archive");
    assert_eq!(c.compression.as_str(), "tar");
    assert_eq!(
        c.engine.engine,
        netprobe::images::engine::Engine::CriO,
        "{:#?}",
        c.engine
    );
    assert_eq!(c.engine.runtime.as_deref(), Some("runc"));
    assert_eq!(
        c.engine.container_name.as_deref(),
        Some("k8s_app_web_default")
    );
    assert_eq!(
        c.engine.ip_annotations.get("io.kubernetes.cri-o.IP.0"),
        Some(&ip)
    );
    assert_eq!(c.finding.kind, FindingKind::ExternalKey);
    assert!(
        c.finding.restore.contains(&ip) && c.finding.decided_by.as_deref().unwrap().contains("pod"),
        "{:#?}",
        c.finding
    );
    assert!(c.finding.rests_on.contains(&"spec.dump".to_string()));
    assert!(
        c.finding.expect.is_none(),
        "a CRI-O restore's address is the pod's: not predicted"
    );
    let text = netprobe_images(&out);
    assert!(
        text.contains("annotation io.kubernetes.cri-o.IP.0"),
        "{text}"
    );
}

fn append(b: &mut tar::Builder<std::fs::File>, name: &str, data: &[u8]) {
    let mut h = tar::Header::new_gnu();
    h.set_path(name).unwrap();
    h.set_size(data.len() as u64);
    h.set_mode(0o600);
    h.set_cksum();
    b.append(&h, data).unwrap();
}
