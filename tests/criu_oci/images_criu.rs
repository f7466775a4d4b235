//! `netprobe images` on images that real CRIU (from `default_criu()`) writes during the test:
//! a child in its own netns gets the `rich` content, is dumped with `--leave-running`, and
//! every network image is decoded — tree and `--json` — then a truncated copy of one image is
//! refused with the file, the offset and the reason. Root only; every process is killed on
//! success, failure and panic.

use netprobe::criu::{Criu, DumpOpts};
use netprobe::host::{default_criu, refuse_unless_ready};
use netprobe::probe::netns_content::{self, NetnsContent};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills (SIGKILL) and reaps the child on drop.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn netns_of(pid: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/net"))
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// A `sleep` in its own netns (session leader, stdio on /dev/null), with `content` applied.
fn child_with(content: NetnsContent) -> ChildGuard {
    let mut cmd = Command::new("/usr/bin/unshare");
    cmd.args(["--net", "--", "sleep", "1000"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid(2) is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
    let child = ChildGuard(cmd.spawn().expect("spawn unshare"));
    let pid = child.0.id().to_string();
    let ours = netns_of("self");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let ns = netns_of(&pid);
        if comm.trim() == "sleep" && !ns.is_empty() && ns != ours {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the child never got its own netns"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    netns_content::apply(Path::new(&format!("/proc/{pid}/ns/net")), content)
        .expect("apply the rich content");
    child
}

/// The first file in `dir` whose name starts with `prefix` (e.g. `netdev-`).
fn image_starting(dir: &std::path::Path, prefix: &str) -> std::path::PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix}* in {}", dir.display()))
}

fn netprobe(args: &[&str]) -> std::process::Output {
    Command::new(crate::common::EXE)
        .args(args)
        .output()
        .expect("run netprobe")
}

#[test]
fn images_decodes_every_network_image_of_a_real_rich_dump() {
    let _baton = crate::common::baton(module_path!());
    crate::common::require_root();
    let facts = refuse_unless_ready(&default_criu()).expect("host ready for CRIU");
    let child = child_with(NetnsContent::Rich);
    let tmp = tempfile::tempdir().unwrap();
    let images = tmp.path().join("images");
    let mut dump = DumpOpts::new(child.0.id() as i32, &images);
    dump.leave_running = true;
    let out = Criu::new(&facts.path).dump(&dump).expect("criu dump");
    assert!(
        out.success(),
        "criu dump failed: see {}",
        dump.log_path().display()
    );
    drop(child);

    // The rung-folder form: DIR/images is read.
    let o = netprobe(&["images", tmp.path().to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["inventory"], true);
    let nss = v["namespaces"].as_array().unwrap();
    assert_eq!(nss.len(), 1, "{v}");
    let ns = &nss[0];
    let files: Vec<String> = ns["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().split('-').next().unwrap().to_string())
        .collect();
    for kind in [
        "ifaddr",
        "ip6tables",
        "iptables",
        "netdev",
        "netns",
        "nftables",
        "route",
        "route6",
        "rule",
    ] {
        assert!(
            files.iter().any(|f| f == kind),
            "no {kind} image: {files:?}"
        );
    }
    let netns = &ns["netns"];
    assert!(netns["ext_key"].is_null());
    assert_eq!(netns["sysctls"]["net.ipv4.conf.all.log_martians"], "1");
    assert_eq!(netns["sysctls"]["net.ipv4.conf.default.arp_ignore"], "2");
    assert_eq!(netns["sysctls"]["net.ipv6.conf.default.hop_limit"], "55");
    let devs = ns["devices"].as_array().unwrap();
    let np0 = devs.iter().find(|d| d["name"] == "np0").expect("np0");
    let np1 = devs.iter().find(|d| d["name"] == "np1").expect("np1");
    assert_eq!(np0["type"], "veth");
    assert_eq!(np0["mtu"], 1789);
    assert_eq!(np0["address"], "02:00:00:00:0e:01");
    assert_eq!(np0["up"], true);
    assert_eq!(np0["peer_ifindex"], np1["ifindex"]);
    assert_eq!(np0["sysctls"]["net.ipv4.conf.np0.forwarding"], "1");
    assert_eq!(np0["sysctls"]["net.ipv6.conf.np0.hop_limit"], "33");
    let lo = devs.iter().find(|d| d["name"] == "lo").expect("lo");
    assert_eq!(lo["type"], "loopback");
    let addrs = ns["addresses"].as_array().unwrap();
    for a in ["10.214.0.1", "fd14:214::1", "127.0.0.1"] {
        assert!(
            addrs.iter().any(|x| x["address"] == a),
            "{a} not in {addrs:?}"
        );
    }
    let routes = ns["routes"].as_array().unwrap();
    assert!(
        routes
            .iter()
            .any(|r| r["dst"] == "10.215.0.0/24" && r["table"] == 254)
    );
    let rules = ns["rules"].as_array().unwrap();
    assert!(
        rules
            .iter()
            .any(|r| r["priority"] == 1000 && r["table"] == 100 && r["src"] == "10.214.0.0/24"),
        "{rules:?}"
    );
    let nft = ns["nftables"].as_str().unwrap();
    assert!(
        nft.contains("table inet np14") && nft.contains("tcp dport 4242 accept"),
        "{nft}"
    );
    // iptables here is the nf_tables variant: CRIU built with libnftables skips the non-legacy
    // iptables-save (criu/net.c dump_iptables()), so the rule is in the nftables image.
    assert!(nft.contains("ip saddr 10.217.0.0/24"), "{nft}");

    let o = netprobe(&["images", images.to_str().unwrap()]);
    assert!(o.status.success());
    let tree = String::from_utf8_lossy(&o.stdout);
    assert!(
        tree.contains("np0 ifindex") && tree.contains("type veth mtu 1789 mac 02:00:00:00:0e:01"),
        "{tree}"
    );
    assert!(tree.contains("netns entry: full,"), "{tree}");
    // CRIU dumped the tables under its own network lock (iptables-nft here): said once, named.
    let lock = tree
        .lines()
        .find(|l| {
            l.trim_start()
                .starts_with("CRIU's network lock in these tables: ")
        })
        .unwrap_or_else(|| panic!("no CRIU lock line: {tree}"));
    assert!(
        lock.contains("nftables: chain CRIU in table ip filter")
            && lock.ends_with("CRIU's unlock at the end of a successful restore removes it)"),
        "{lock}"
    );

    // A truncated copy of the netdev image: exit 2, file + offset + reason on stderr.
    let bad = tmp.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    let netdev = image_starting(&images, "netdev-");
    let bytes = std::fs::read(&netdev).unwrap();
    let name = netdev.file_name().unwrap();
    std::fs::write(bad.join(name), &bytes[..bytes.len() - 3]).unwrap();
    let o = netprobe(&["images", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&*name.to_string_lossy())
            && err.contains("offset")
            && err.contains("larger than"),
        "{err}"
    );
    // The real ifaddr image with the family byte of its first entry flipped (2 → 87): refused
    // naming the entry, not decoded without it (the user trial's reproduction).
    let ifaddr = image_starting(&images, "ifaddr-");
    let mut bytes = std::fs::read(&ifaddr).unwrap();
    assert_eq!(bytes[20], 2, "the first address is 127.0.0.1 (AF_INET)");
    bytes[20] ^= 0x55;
    let name = ifaddr.file_name().unwrap();
    std::fs::write(bad.join(name), &bytes).unwrap();
    std::fs::remove_file(bad.join(netdev.file_name().unwrap())).unwrap();
    let o = netprobe(&["images", bad.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}: offset 20: entry 1 (RTM_NEWADDR at offset 4): family 87 is neither",
            name.to_string_lossy()
        )),
        "{err}"
    );
    // Every truncation of every real network image: an error or fewer entries, never a panic.
    for e in std::fs::read_dir(&images).unwrap() {
        let p = e.unwrap().path();
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if !["netns-", "netdev-", "ifaddr-", "route", "rule-"]
            .iter()
            .any(|k| n.starts_with(k))
        {
            continue;
        }
        let b = std::fs::read(&p).unwrap();
        let one = tmp.path().join("one");
        for cut in (0..b.len()).step_by(3) {
            let _ = std::fs::remove_dir_all(&one);
            std::fs::create_dir(&one).unwrap();
            std::fs::write(one.join(p.file_name().unwrap()), &b[..cut]).unwrap();
            let _ = netprobe::images::read_dir(&one);
        }
    }
}

#[test]
fn a_folder_without_any_criu_image_is_a_usage_error() {
    let _baton = crate::common::baton(module_path!());
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("readme.txt"), b"not an image").unwrap();
    let o = netprobe(&["images", d.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&d.path().display().to_string())
            && err.contains("holds no CRIU image")
            && err.contains("--image-path"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
    // An inventory alone (a dump without network images) is still decoded: exit 0.
    std::fs::write(d.path().join("inventory.img"), [0x16u8, 0x31, 0x31, 0x58]).unwrap();
    let o = netprobe(&["images", d.path().to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("inventory.img: present"));
    // A path that is not a folder: named, no byte offset, the same fix.
    let o = netprobe(&["images", "/nonexistent/np-images"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("/nonexistent/np-images: cannot list it as a folder")
            && !err.contains("offset")
            && err.contains("--image-path"),
        "{err}"
    );
}

/// A zero-padded image (`truncate -s 4M` of a real one), a netns image that is a symlink to
/// `/dev/zero` and an image over the 16 MiB cap are refused with exit 2, the file, the byte
/// offset and the reason, in bounded memory (before: 1048452 devices of zeros, or GBs read).
#[test]
fn padded_device_and_oversized_images_are_refused_with_file_and_offset() {
    let _baton = crate::common::baton(module_path!());
    use netprobe::images::format::{IMAGE_READ_CAP, IMG_COMMON_MAGIC, NETDEV_MAGIC};
    use netprobe::images::pb::{NdType, NetDeviceEntry};
    use prost::Message;
    let d = tempfile::tempdir().unwrap();
    let dev = NetDeviceEntry {
        r#type: NdType::Loopback as i32,
        ifindex: 1,
        mtu: 65536,
        flags: 0x49,
        name: "lo".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut img = IMG_COMMON_MAGIC.to_ne_bytes().to_vec();
    img.extend_from_slice(&NETDEV_MAGIC.to_ne_bytes());
    img.extend_from_slice(&(dev.len() as u32).to_ne_bytes());
    img.extend_from_slice(&dev);
    let f = d.path().join("netdev-9.img");
    std::fs::write(&f, &img).unwrap();
    let dir = d.path().to_str().unwrap();
    let o = netprobe(&["images", dir]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("devices: 1\n"));

    let refused = |what: &str, file: &str, offset: u64, reason: &str| {
        let o = netprobe(&["images", dir]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{what}: {err}");
        assert!(o.stdout.is_empty(), "{what}");
        assert!(
            err.contains(&format!("{file}: offset {offset}: ")) && err.contains(reason),
            "{what}: {err}"
        );
    };
    std::fs::File::options()
        .write(true)
        .open(&f)
        .unwrap()
        .set_len(4 << 20)
        .unwrap();
    refused(
        "zero padding",
        "netdev-9.img",
        img.len() as u64,
        "entry of 0 bytes lacks the required field `type`",
    );
    std::fs::write(&f, &img).unwrap();
    std::os::unix::fs::symlink("/dev/zero", d.path().join("netns-9.img")).unwrap();
    refused(
        "/dev/zero",
        "netns-9.img",
        0,
        "it is a symbolic link, not a regular file",
    );
    std::fs::remove_file(d.path().join("netns-9.img")).unwrap();
    std::fs::File::create(d.path().join("route-9.img"))
        .unwrap()
        .set_len(IMAGE_READ_CAP + 1)
        .unwrap();
    refused(
        "over the cap",
        "route-9.img",
        IMAGE_READ_CAP,
        "more than the cap of 16777216 bytes (16 MiB",
    );
    // Files each under the cap, over it together (thousands of capped copies would fill
    // memory): the folder is refused before any is read.
    std::fs::remove_file(d.path().join("route-9.img")).unwrap();
    for id in [10, 11] {
        std::fs::File::create(d.path().join(format!("route-{id}.img")))
            .unwrap()
            .set_len(IMAGE_READ_CAP / 2 + 1)
            .unwrap();
    }
    let o = netprobe(&["images", dir]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("offset 0: its 3 network image files hold")
            && err.contains("more than the 16 MiB"),
        "{err}"
    );
}

/// An `ip addr save` image (127.0.0.1/8 then ::1/128, as CRIU's `ifaddr-<id>.img` of a fresh
/// netns) whose first entry's family byte is flipped to 87: exit 2 naming the file, the byte
/// offset, the entry and the reason; before, exit 0 with `addresses: 1` and 127.0.0.1 gone.
#[test]
fn an_address_of_an_unknown_family_is_refused_not_dropped() {
    let _baton = crate::common::baton(module_path!());
    let entry = |family: u8, plen: u8, ip: &[u8]| {
        let mut p = vec![family, plen, 0x80, 254, 1, 0, 0, 0];
        for ty in [2u16, 1u16] {
            p.extend_from_slice(&((4 + ip.len()) as u16).to_ne_bytes());
            p.extend_from_slice(&ty.to_ne_bytes());
            p.extend_from_slice(ip);
        }
        let mut m = ((16 + p.len()) as u32).to_ne_bytes().to_vec();
        m.extend_from_slice(&20u16.to_ne_bytes()); // RTM_NEWADDR
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(&p);
        m
    };
    let mut img = netprobe::images::ipdump::IFADDR_DUMP_MAGIC
        .to_ne_bytes()
        .to_vec();
    img.extend(entry(2, 8, &[127, 0, 0, 1]));
    let mut v6 = [0u8; 16];
    v6[15] = 1;
    img.extend(entry(10, 128, &v6));
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("ifaddr-9.img");
    std::fs::write(&f, &img).unwrap();
    let dir = d.path().to_str().unwrap();
    let o = netprobe(&["images", dir]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("addresses: 2\n"));
    img[20] ^= 0x55;
    std::fs::write(&f, &img).unwrap();
    let o = netprobe(&["images", dir]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(o.stdout.is_empty());
    assert!(
        err.contains(&format!(
            "{}: offset 20: entry 1 (RTM_NEWADDR at offset 4): family 87 is neither AF_INET (2) \
             nor AF_INET6 (10)",
            f.display()
        )) && err.contains("give the folder of an unmodified dump"),
        "{err}"
    );
}
