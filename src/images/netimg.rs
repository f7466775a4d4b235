//! What one CRIU images folder holds about the network, decoded: per network namespace id,
//! the `netns-` entry, every `netdev-` device, and the `ifaddr-`, `route-`, `route6-`,
//! `rule-`, `iptables-`, `ip6tables-` and `nftables-` images.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::devsysctl::DevSysctls;
use super::format::{self, INVENTORY_MAGIC, ImageError, NETDEV_MAGIC, NETNS_MAGIC};
use super::ipdump;
use super::pb::{NdType, NetDeviceEntry, NetnsEntry, SysctlEntry};
use crate::netlink::sysctl::{DEVCONFS4, DEVCONFS6, IPV4_SYSCTL, UNIX_CONF, conf_key};
use crate::netlink::{AddrState, RouteState, RuleState};

/// The `netns-<id>.img` entry: external key or the saved namespace-wide sysctls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetnsInfo {
    /// `ext_key`: set when the namespace was dumped as external (`--external net[...]`).
    pub ext_key: Option<String>,
    /// `nsids`: `(target_ns_id, netnsid_value)` pairs.
    pub nsids: Vec<(u32, i32)>,
    /// Dotted sysctl name → value (`all`/`default` conf4/conf6, `net.unix.*`,
    /// `net.ipv4.ping_group_range`); entries CRIU could not read (no value) are left out.
    pub sysctls: BTreeMap<String, String>,
}

/// One `net_device_entry` of `netdev-<id>.img`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// `name`.
    pub name: String,
    /// `ifindex`.
    pub ifindex: u32,
    /// `type` (`nd_type`) in lower case: `loopback`, `veth`, `tun`, `extlink`, `venet`,
    /// `bridge`, `macvlan`, `sit`, or the number.
    #[serde(rename = "type")]
    pub dev_type: String,
    /// `mtu` in bytes.
    pub mtu: u32,
    /// `address` as lowercase `aa:bb:..`.
    pub address: Option<String>,
    /// `flags` (`IFF_*` bits).
    pub flags: u32,
    /// `IFF_UP` bit of `flags`.
    pub up: bool,
    /// `peer_ifindex` (veth).
    pub peer_ifindex: Option<u32>,
    /// `peer_nsid` (veth).
    pub peer_nsid: Option<u32>,
    /// `master` ifindex.
    pub master: Option<u32>,
    /// Dotted sysctl name → value (`net.ipv4.conf.<name>.*`, `net.ipv6.conf.<name>.*`,
    /// `legacy.ipv4.conf.<name>.#<i>`), named through one shared table
    /// ([`super::devsysctl`]); serialized as that map.
    pub sysctls: DevSysctls,
}

/// The network images of one namespace id (`<id>` of `netns-<id>.img` etc.).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NsImages {
    /// CRIU's namespace id (the file-name suffix).
    pub id: u32,
    /// Image files read, sorted.
    pub files: Vec<String>,
    /// `netns-<id>.img`, when present.
    pub netns: Option<NetnsInfo>,
    /// `netdev-<id>.img` entries, in file order.
    pub devices: Vec<DeviceInfo>,
    /// `ifaddr-<id>.img`.
    pub addresses: Vec<AddrState>,
    /// `route-<id>.img` then `route6-<id>.img`.
    pub routes: Vec<RouteState>,
    /// `rule-<id>.img`.
    pub rules: Vec<RuleState>,
    /// `iptables-<id>.img` text (`iptables-save` output), when present.
    pub iptables: Option<String>,
    /// `ip6tables-<id>.img` text, when present.
    pub ip6tables: Option<String>,
    /// `nftables-<id>.img` text (`nft list ruleset`), when present.
    pub nftables: Option<String>,
}

/// Everything a CRIU images folder holds about the network.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NetImages {
    /// The images folder read.
    pub dir: PathBuf,
    /// `inventory.img` present with a valid `INVENTORY_MAGIC`.
    pub inventory: bool,
    /// One element per namespace id, sorted by id. Empty when CRIU wrote no network image
    /// (e.g. a runtime that declares the netns external or empty).
    pub namespaces: Vec<NsImages>,
}

/// The network image kinds, by file-name prefix.
const KINDS: &[&str] = &[
    "netns",
    "netdev",
    "ifaddr",
    "route",
    "route6",
    "rule",
    "iptables",
    "ip6tables",
    "nftables",
];

/// If `dir/images` is a folder (a rung folder of an evidence folder), that folder, else `dir`.
pub fn images_dir(dir: &Path) -> PathBuf {
    let sub = dir.join("images");
    if sub.is_dir() { sub } else { dir.to_path_buf() }
}

/// Reads every network image of the CRIU images folder `dir` (see [`images_dir`] for a rung
/// folder). Files are matched by name (`<kind>-<id>.img`); other files are ignored.
///
/// Errors: [`ImageError`] naming the file, offset and reason for the first malformed image,
/// or the folder when it cannot be listed or its network images together exceed
/// [`format::IMAGE_READ_CAP`].
pub fn read_dir(dir: &Path) -> Result<NetImages, ImageError> {
    let list = std::fs::read_dir(dir)
        .map_err(|e| ImageError::new(dir, 0, format!("cannot list the folder: {e}")))?;
    let mut names: Vec<String> = Vec::new();
    for e in list {
        let e = e.map_err(|e| ImageError::new(dir, 0, format!("cannot list the folder: {e}")))?;
        names.push(e.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    // All of the folder's network images together are held to the one-file cap: a real dump's
    // take a few KiB to a few MiB in all; thousands of capped files would fill memory.
    let mut total: u64 = 0;
    let mut counted = 0usize;
    for name in names
        .iter()
        .filter(|n| *n == "inventory.img" || split_name(n).is_some())
    {
        // A file over the cap alone is refused as that file, at the cap's offset.
        if let Ok(m) = std::fs::symlink_metadata(dir.join(name))
            && m.len() <= format::IMAGE_READ_CAP
        {
            total = total.saturating_add(m.len());
            counted += 1;
        }
    }
    if total > format::IMAGE_READ_CAP {
        return Err(ImageError::new(
            dir,
            0,
            format!(
                "its {counted} network image files hold {total} bytes together, more than the {} MiB all the network images of a CRIU dump take (a few KiB to a few MiB): not a folder CRIU wrote; give the folder of an unmodified dump",
                format::IMAGE_READ_CAP >> 20
            ),
        ));
    }
    let mut out = NetImages {
        dir: dir.to_path_buf(),
        ..NetImages::default()
    };
    let mut by_id: BTreeMap<u32, NsImages> = BTreeMap::new();
    for name in &names {
        let path = dir.join(name);
        if name == "inventory.img" {
            format::check_magic(&path, &format::read_file(&path)?, INVENTORY_MAGIC)?;
            out.inventory = true;
            continue;
        }
        let Some((kind, id)) = split_name(name) else {
            continue;
        };
        let ns = by_id.entry(id).or_insert_with(|| NsImages {
            id,
            ..NsImages::default()
        });
        ns.files.push(name.clone());
        read_one(&path, kind, ns)?;
    }
    out.namespaces = by_id.into_values().collect();
    Ok(out)
}

/// The proto2 `required` fields of `net_device_entry` (`proto/criu/netdev.proto`): every entry
/// CRIU writes has them. (`netns_entry` has none: its single entry is checked by count.)
const NETDEV_REQUIRED: &[(u32, &str)] = &[
    (1, "type"),
    (2, "ifindex"),
    (3, "mtu"),
    (4, "flags"),
    (5, "name"),
];

/// `("route6", 9)` for `route6-9.img`; `None` for other names.
fn split_name(name: &str) -> Option<(&'static str, u32)> {
    let stem = name.strip_suffix(".img")?;
    let (kind, id) = stem.rsplit_once('-')?;
    let kind = KINDS.iter().find(|k| **k == kind)?;
    Some((kind, id.parse().ok()?))
}

fn read_one(path: &Path, kind: &str, ns: &mut NsImages) -> Result<(), ImageError> {
    let bytes = format::read_file(path)?;
    decode_one(path, kind, bytes, ns)
}

/// Decodes the network images already read into memory (an archive's entries, each at most
/// [`format::IMAGE_READ_CAP`] bytes, together at most that too): `files` holds `(name, bytes)`
/// with `name` as CRIU wrote it (`netns-10.img`, `inventory.img`; other names are ignored);
/// `label` names the images folder in errors and in [`NetImages::dir`] (an archive's
/// `ck.tar.zst:checkpoint`, so a malformed image is named `ck.tar.zst:checkpoint/netns-10.img`).
///
/// Errors: [`ImageError`] naming the file, offset and reason for the first malformed image.
pub fn decode_images(label: &Path, files: Vec<(String, Vec<u8>)>) -> Result<NetImages, ImageError> {
    let mut files = files;
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = NetImages {
        dir: label.to_path_buf(),
        ..NetImages::default()
    };
    let mut by_id: BTreeMap<u32, NsImages> = BTreeMap::new();
    for (name, bytes) in files {
        let path = label.join(&name);
        if name == "inventory.img" {
            format::check_magic(&path, &bytes, INVENTORY_MAGIC)?;
            out.inventory = true;
            continue;
        }
        let Some((kind, id)) = split_name(&name) else {
            continue;
        };
        let ns = by_id.entry(id).or_insert_with(|| NsImages {
            id,
            ..NsImages::default()
        });
        ns.files.push(name.clone());
        decode_one(&path, kind, bytes, ns)?;
    }
    out.namespaces = by_id.into_values().collect();
    Ok(out)
}

/// Whether `name` is one of the files [`read_dir`] and [`decode_images`] read: `inventory.img`
/// or a network image (`<kind>-<id>.img`, kind one of netns, netdev, ifaddr, route, route6,
/// rule, iptables, ip6tables, nftables).
pub fn is_network_image(name: &str) -> bool {
    name == "inventory.img" || split_name(name).is_some()
}

fn decode_one(
    path: &Path,
    kind: &str,
    bytes: Vec<u8>,
    ns: &mut NsImages,
) -> Result<(), ImageError> {
    let text = || {
        String::from_utf8(bytes.clone())
            .map_err(|e| ImageError::new(path, e.utf8_error().valid_up_to(), "not UTF-8 text"))
    };
    match kind {
        "netns" => {
            // One entry; a second is refused as it is met (zero padding would give millions).
            let mut e: Vec<NetnsEntry> = format::decode_entries(path, &bytes, NETNS_MAGIC, &[], 1)?;
            if e.len() != 1 {
                return Err(ImageError::new(
                    path,
                    8,
                    format!("{} netns entries, expected 1", e.len()),
                ));
            }
            ns.netns = Some(netns_info(e.remove(0)));
        }
        "netdev" => {
            let e: Vec<NetDeviceEntry> =
                format::decode_all_required(path, &bytes, NETDEV_MAGIC, NETDEV_REQUIRED)?;
            ns.devices = e.into_iter().map(device_info).collect();
        }
        "ifaddr" => ns.addresses = ipdump::decode_addrs(path, &bytes)?,
        "route" | "route6" => ns.routes.extend(ipdump::decode_routes(path, &bytes)?),
        "rule" => ns.rules = ipdump::decode_rules(path, &bytes)?,
        "iptables" => ns.iptables = Some(text()?),
        "ip6tables" => ns.ip6tables = Some(text()?),
        "nftables" => ns.nftables = Some(text()?),
        _ => {}
    }
    Ok(())
}

fn sysctl_value(e: &SysctlEntry) -> Option<String> {
    e.sarg.clone().or_else(|| e.iarg.map(|i| i.to_string()))
}

/// Adds `names[i]` = value of `entries[i]` (keyed by `key(name)`); extra entries get
/// `key("#<i>")`.
fn add_named(
    out: &mut BTreeMap<String, String>,
    entries: &[SysctlEntry],
    names: &[&str],
    key: impl Fn(&str) -> String,
) {
    for (i, e) in entries.iter().enumerate() {
        let Some(v) = sysctl_value(e) else { continue };
        let k = names
            .get(i)
            .map_or_else(|| key(&format!("#{i}")), |n| key(n));
        out.insert(k, v);
    }
}

fn netns_info(e: NetnsEntry) -> NetnsInfo {
    let mut s = BTreeMap::new();
    for (target, c4, c6) in [
        ("all", &e.all_conf4, &e.all_conf6),
        ("default", &e.def_conf4, &e.def_conf6),
    ] {
        add_named(&mut s, c4, DEVCONFS4, |n| conf_key("ipv4", target, n));
        add_named(&mut s, c6, DEVCONFS6, |n| conf_key("ipv6", target, n));
    }
    add_named(&mut s, &e.unix_conf, UNIX_CONF, |n| format!("net.unix.{n}"));
    add_named(&mut s, &e.ipv4_sysctl, IPV4_SYSCTL, |n| {
        format!("net.ipv4.{n}")
    });
    for (target, legacy) in [("all", &e.all_conf), ("default", &e.def_conf)] {
        for (i, v) in legacy.iter().enumerate() {
            s.insert(format!("legacy.ipv4.conf.{target}.#{i}"), v.to_string());
        }
    }
    NetnsInfo {
        ext_key: e.ext_key,
        nsids: e
            .nsids
            .iter()
            .map(|n| (n.target_ns_id, n.netnsid_value))
            .collect(),
        sysctls: s,
    }
}

fn type_name(t: i32) -> String {
    match NdType::try_from(t) {
        Ok(k) => k.as_str_name().to_ascii_lowercase(),
        Err(_) => t.to_string(),
    }
}

fn device_info(d: NetDeviceEntry) -> DeviceInfo {
    let s = DevSysctls::from_entries(&d.name, &d.conf4, &d.conf6, &d.conf);
    DeviceInfo {
        up: d.flags & libc::IFF_UP as u32 != 0,
        dev_type: type_name(d.r#type),
        address: d.address.as_ref().map(|a| {
            a.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":")
        }),
        name: d.name,
        ifindex: d.ifindex,
        mtu: d.mtu,
        flags: d.flags,
        peer_ifindex: d.peer_ifindex,
        peer_nsid: d.peer_nsid,
        master: d.master,
        sysctls: s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn img(magic: u32, entries: &[Vec<u8>]) -> Vec<u8> {
        let mut v = format::IMG_COMMON_MAGIC.to_ne_bytes().to_vec();
        v.extend_from_slice(&magic.to_ne_bytes());
        for e in entries {
            v.extend_from_slice(&(e.len() as u32).to_ne_bytes());
            v.extend_from_slice(e);
        }
        v
    }

    #[test]
    fn names_split() {
        assert_eq!(split_name("route6-9.img"), Some(("route6", 9)));
        assert_eq!(split_name("netdev-12.img"), Some(("netdev", 12)));
        assert_eq!(split_name("pages-1.img"), None);
        assert_eq!(split_name("netns-x.img"), None);
    }

    #[test]
    fn reads_a_folder_and_names_the_bad_file() {
        let d = tempfile::tempdir().unwrap();
        let dev = NetDeviceEntry {
            r#type: NdType::Veth as i32,
            ifindex: 2,
            mtu: 1789,
            flags: 0x1003,
            name: "veth0".into(),
            address: Some(vec![2, 0, 0, 0, 0, 1]),
            conf4: vec![SysctlEntry {
                r#type: 6,
                iarg: Some(1),
                sarg: None,
            }],
            peer_ifindex: Some(3),
            ..Default::default()
        };
        std::fs::write(
            d.path().join("netdev-9.img"),
            img(NETDEV_MAGIC, &[dev.encode_to_vec()]),
        )
        .unwrap();
        let ns = NetnsEntry {
            ext_key: Some("extRootNetNS".into()),
            ..Default::default()
        };
        std::fs::write(
            d.path().join("netns-9.img"),
            img(NETNS_MAGIC, &[ns.encode_to_vec()]),
        )
        .unwrap();
        std::fs::write(d.path().join("iptables-9.img"), "*filter\nCOMMIT\n").unwrap();
        let n = read_dir(d.path()).unwrap();
        assert_eq!(n.namespaces.len(), 1);
        let ns = &n.namespaces[0];
        assert_eq!(ns.devices[0].address.as_deref(), Some("02:00:00:00:00:01"));
        assert_eq!(ns.devices[0].dev_type, "veth");
        assert!(ns.devices[0].up);
        assert_eq!(
            ns.devices[0]
                .sysctls
                .get("net.ipv4.conf.veth0.accept_local"),
            Some("1".to_string())
        );
        assert_eq!(
            ns.netns.as_ref().unwrap().ext_key.as_deref(),
            Some("extRootNetNS")
        );
        assert!(ns.iptables.as_deref().unwrap().starts_with("*filter"));

        std::fs::write(d.path().join("netns-9.img"), img(NETDEV_MAGIC, &[])).unwrap();
        let e = read_dir(d.path()).unwrap_err();
        assert!(e.file.ends_with("netns-9.img") && e.offset == 4, "{e}");
    }

    #[test]
    fn zero_padding_and_a_device_in_place_of_an_image_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let dev = NetDeviceEntry {
            r#type: NdType::Loopback as i32,
            ifindex: 1,
            mtu: 65536,
            name: "lo".into(),
            ..Default::default()
        };
        let good = img(NETDEV_MAGIC, &[dev.encode_to_vec()]);
        let f = d.path().join("netdev-9.img");
        let mut padded = good.clone();
        padded.resize(4 << 20, 0);
        std::fs::write(&f, &padded).unwrap();
        let e = read_dir(d.path()).unwrap_err();
        assert!(
            e.file.ends_with("netdev-9.img")
                && e.offset == good.len() as u64
                && e.reason
                    .contains("entry of 0 bytes lacks the required field `type`"),
            "{e}"
        );
        std::fs::write(&f, &good).unwrap();
        assert_eq!(read_dir(d.path()).unwrap().namespaces[0].devices.len(), 1);
        let ns = img(NETNS_MAGIC, &[NetnsEntry::default().encode_to_vec()]);
        let mut padded = ns.clone();
        padded.resize(1 << 20, 0);
        std::fs::write(d.path().join("netns-9.img"), &padded).unwrap();
        let e = read_dir(d.path()).unwrap_err();
        assert!(
            e.offset == ns.len() as u64 && e.reason.starts_with("a second entry"),
            "{e}"
        );
        std::fs::remove_file(d.path().join("netns-9.img")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", d.path().join("netns-9.img")).unwrap();
        let e = read_dir(d.path()).unwrap_err();
        assert!(
            e.file.ends_with("netns-9.img") && e.reason.contains("not a regular file"),
            "{e}"
        );
    }
}
