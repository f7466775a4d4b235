//! The finding of one checkpoint: what network it carries and what a restore will bring back,
//! derived from CRIU's network images and the engine's metadata, citing the files it rests on.
//!
//! Three findings (ARCHITECTURE.md section 2 holds the facts):
//! - `namespace-dumped`: `netns-<id>.img` holds the namespace (no external key): plain CRIU,
//!   crun. The restore brings back what the images hold.
//! - `external-key`: `netns-<id>.img` holds only an external key (Podman's and CRI-O's
//!   namespaces, runc or crun given a namespace path). The restore joins a namespace the engine
//!   provides; the address is the recorded one or a new one, as an engine option decides.
//! - `no-network-image`: no network image at all: the runtime created the namespace and told
//!   CRIU it is empty (runc's `empty_ns = CLONE_NEWNET`). The restore brings back `lo` DOWN and
//!   nothing else: the empty-ns signature.
//!
//! A fourth, `inconsistent`, names network images without a `netns-<id>.img`.

use serde::{Deserialize, Serialize};

use super::engine::{Engine, EngineMeta};
use super::netimg::{NetImages, NsImages};

/// Which of the findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// The namespace was dumped: the restore brings back what the images hold.
    NamespaceDumped,
    /// An external key only: the restore joins a namespace the engine provides.
    ExternalKey,
    /// No network image: the restore brings back `lo` DOWN and nothing else.
    NoNetworkImage,
    /// Network images without a `netns-<id>.img`: not a dump CRIU finished.
    Inconsistent,
}

impl FindingKind {
    /// The kebab-case code (`namespace-dumped`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::NamespaceDumped => "namespace-dumped",
            FindingKind::ExternalKey => "external-key",
            FindingKind::NoNetworkImage => "no-network-image",
            FindingKind::Inconsistent => "inconsistent",
        }
    }
}

/// One link the restored namespace will hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedLink {
    /// Link name.
    pub name: String,
    /// UP or DOWN, when the finding knows.
    pub up: Option<bool>,
    /// MTU in bytes, when the images hold it.
    pub mtu: Option<u32>,
    /// MAC address (`aa:bb:…`), when recorded.
    pub mac: Option<String>,
    /// Addresses as `address/prefix`.
    pub addresses: Vec<String>,
}

/// What the restored namespace will hold, when the checkpoint decides it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expected {
    /// `true`: these are all the links; `false`: at least these (the engine adds others).
    pub exact: bool,
    /// The links.
    pub links: Vec<ExpectedLink>,
}

/// The finding of one checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Which finding.
    pub kind: FindingKind,
    /// CRIU's namespace id the finding is about, when there is one.
    pub netns_id: Option<u32>,
    /// One line: what the restore brings back.
    pub restore: String,
    /// The engine option or input that decides the address, when one does.
    pub decided_by: Option<String>,
    /// Why, from the files.
    pub reason: String,
    /// The files the finding rests on, relative to the archive (or images folder).
    pub rests_on: Vec<String>,
    /// The restored namespace's links under the engine's defaults, when the checkpoint decides
    /// them (`None`: they depend on what the restore is given).
    pub expect: Option<Expected>,
}

/// Derives the finding of a checkpoint: `imgs` its network images, `meta` the engine's
/// metadata (`None` for an images folder), `prefix` what names the images' folder in
/// `rests_on` (`checkpoint/` in an archive, empty for a folder).
pub fn derive(imgs: &NetImages, meta: Option<&EngineMeta>, prefix: &str) -> Finding {
    let file = |n: &str| format!("{prefix}{n}");
    let mut meta_files: Vec<String> = meta.map(|m| m.files.clone()).unwrap_or_default();
    meta_files.sort();
    let dumped = imgs
        .namespaces
        .iter()
        .find(|n| n.netns.as_ref().is_some_and(|e| e.ext_key.is_none()));
    let external = imgs
        .namespaces
        .iter()
        .find(|n| n.netns.as_ref().is_some_and(|e| e.ext_key.is_some()));
    if let Some(ns) = dumped {
        return namespace_dumped(ns, meta, file);
    }
    if let Some(ns) = external {
        return external_key(ns, meta, &meta_files, file);
    }
    if let Some(ns) = imgs.namespaces.first() {
        return Finding {
            kind: FindingKind::Inconsistent,
            netns_id: Some(ns.id),
            restore: "unknown: CRIU restores no network from images without netns-<id>.img".into(),
            decided_by: None,
            reason: format!(
                "network images for namespace id {} without netns-{}.img: not a dump CRIU finished (every dumped namespace has one)",
                ns.id, ns.id
            ),
            rests_on: ns.files.iter().map(|f| file(f)).collect(),
            expect: None,
        };
    }
    no_network_image(imgs, meta, &meta_files, file)
}

fn addr_strings(ns: &NsImages, ifindex: u32) -> Vec<String> {
    ns.addresses
        .iter()
        .filter(|a| a.ifindex == ifindex)
        .map(|a| format!("{}/{}", a.address, a.prefix_len))
        .collect()
}

fn namespace_dumped(
    ns: &NsImages,
    meta: Option<&EngineMeta>,
    file: impl Fn(&str) -> String,
) -> Finding {
    let links: Vec<ExpectedLink> = ns
        .devices
        .iter()
        .map(|d| ExpectedLink {
            name: d.name.clone(),
            up: Some(d.up),
            mtu: Some(d.mtu),
            mac: d.address.clone(),
            addresses: addr_strings(ns, d.ifindex),
        })
        .collect();
    let shown: Vec<String> = links
        .iter()
        .map(|l| {
            let state = if l.up == Some(true) { "UP" } else { "DOWN" };
            match l.addresses.is_empty() {
                true => format!("{} {state} (no address)", l.name),
                false => format!("{} {state} {}", l.name, l.addresses.join(" ")),
            }
        })
        .collect();
    let runtime = meta.and_then(|m| m.runtime.as_deref());
    Finding {
        kind: FindingKind::NamespaceDumped,
        netns_id: Some(ns.id),
        restore: format!(
            "what the images hold: {}; {} routes, {} rules",
            if shown.is_empty() {
                "no device".into()
            } else {
                shown.join(", ")
            },
            ns.routes.len(),
            ns.rules.len()
        ),
        decided_by: None,
        reason: format!(
            "netns-{id}.img holds the namespace itself (no external key) and netdev-{id}.img {} device(s): CRIU dumped the namespace{}, and its restore creates it again from these images",
            ns.devices.len(),
            runtime.map_or(String::new(), |r| format!(
                " (runtime {r}, which does not declare it empty)"
            )),
            id = ns.id
        ),
        rests_on: ns.files.iter().map(|f| file(f)).collect(),
        expect: Some(Expected { exact: true, links }),
    }
}

fn external_key(
    ns: &NsImages,
    meta: Option<&EngineMeta>,
    meta_files: &[String],
    file: impl Fn(&str) -> String,
) -> Finding {
    let key = ns
        .netns
        .as_ref()
        .and_then(|n| n.ext_key.clone())
        .unwrap_or_default();
    let mut rests_on = vec![file(&format!("netns-{}.img", ns.id))];
    rests_on.extend(meta_files.iter().cloned());
    let engine = meta.map_or(Engine::Unknown, |m| m.engine);
    let path = meta
        .and_then(|m| m.netns_path.as_deref())
        .map_or(String::new(), |p| {
            format!(" (spec.dump: network namespace {p})")
        });
    let base = format!(
        "netns-{}.img holds only the external key {key:?}: the namespace belonged to the engine, not to the container{path}, so CRIU saved none of its links or addresses",
        ns.id
    );
    let (restore, decided_by, reason, expect) = match (engine, meta) {
        (Engine::Podman, Some(m)) => {
            let recorded: Vec<String> = m
                .interfaces
                .iter()
                .map(|i| {
                    format!(
                        "{} {}{}",
                        i.interface.as_deref().unwrap_or("?"),
                        i.addresses.join(" "),
                        i.mac.as_deref().map_or(String::new(), |m| format!(" mac {m}"))
                    )
                })
                .collect();
            let links = m
                .interfaces
                .iter()
                .filter_map(|i| {
                    Some(ExpectedLink {
                        name: i.interface.clone()?,
                        up: Some(true),
                        mtu: None,
                        mac: i.mac.clone(),
                        addresses: i.addresses.clone(),
                    })
                })
                .collect();
            (
                match recorded.is_empty() {
                    true => "a namespace Podman creates at restore; network.status records no interface".into(),
                    false => format!(
                        "a namespace Podman creates and connects at restore, with the recorded {} (network.status)",
                        recorded.join("; ")
                    ),
                },
                Some("podman container restore --ignore-static-ip (a new address from the network's range instead of the recorded one) and --ignore-static-mac (a new MAC)".into()),
                base,
                Some(Expected { exact: false, links }),
            )
        }
        (Engine::CriO, Some(m)) => (
            format!(
                "the namespace of the pod sandbox it is restored into, with that pod's address from its CNI plugin: a new one (recorded: {})",
                m.ip_annotations
                    .iter()
                    .map(|(k, v)| format!("{k} = {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Some("the pod the kubelet restores the checkpoint into (CRI-O keeps no static address)".into()),
            base,
            None,
        ),
        _ => (
            "the namespace the restoring runtime's config.json names by path, as it is at restore: its links and addresses, not the checkpoint's".into(),
            Some(format!(
                "the network namespace path in the restore's config.json (runc and crun pass it to CRIU as --inherit-fd with key {key:?})"
            )),
            base,
            None,
        ),
    };
    Finding {
        kind: FindingKind::ExternalKey,
        netns_id: Some(ns.id),
        restore,
        decided_by,
        reason,
        rests_on,
        expect,
    }
}

fn no_network_image(
    imgs: &NetImages,
    meta: Option<&EngineMeta>,
    meta_files: &[String],
    file: impl Fn(&str) -> String,
) -> Finding {
    let runtime = meta.and_then(|m| m.runtime.clone());
    let created = match meta {
        Some(m) if m.netns_in_spec && m.netns_path.is_none() => {
            " spec.dump names the network namespace without a path, so the runtime created it;"
        }
        _ => "",
    };
    let who = match runtime.as_deref() {
        Some(r) if r.ends_with("runc") => format!(
            "the runtime {r} (config.dump) tells CRIU the namespace it created is empty (empty_ns = CLONE_NEWNET, every runc release)"
        ),
        Some(r) => format!(
            "the runtime {r} (config.dump) declared the namespace empty or external without a key"
        ),
        None => {
            "the runtime told CRIU the namespace is empty (as runc does: empty_ns = CLONE_NEWNET)"
                .into()
        }
    };
    let mut rests_on = Vec::new();
    if imgs.inventory {
        rests_on.push(file("inventory.img"));
    }
    rests_on.push(format!(
        "{} (no netns-/netdev-/ifaddr-/route- image)",
        file("")
    ));
    rests_on.extend(meta_files.iter().cloned());
    Finding {
        kind: FindingKind::NoNetworkImage,
        netns_id: None,
        restore: "lo DOWN and nothing else: no address, no route (the empty-ns signature)".into(),
        decided_by: None,
        reason: format!(
            "no network image:{created} {who}, so CRIU wrote none and the restore creates a new namespace holding only a DOWN lo"
        ),
        rests_on,
        expect: Some(Expected {
            exact: true,
            links: vec![ExpectedLink {
                name: "lo".into(),
                up: Some(false),
                mtu: None,
                mac: None,
                addresses: Vec::new(),
            }],
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::netimg::{DeviceInfo, NetnsInfo};

    fn ns(ext: Option<&str>) -> NsImages {
        NsImages {
            id: 10,
            files: vec!["netdev-10.img".into(), "netns-10.img".into()],
            netns: Some(NetnsInfo {
                ext_key: ext.map(str::to_string),
                nsids: vec![],
                sysctls: Default::default(),
            }),
            devices: vec![DeviceInfo {
                name: "lo".into(),
                ifindex: 1,
                dev_type: "loopback".into(),
                mtu: 65536,
                address: None,
                flags: 9,
                up: true,
                peer_ifindex: None,
                peer_nsid: None,
                master: None,
                sysctls: Default::default(),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn three_findings() {
        let mut imgs = NetImages {
            inventory: true,
            ..Default::default()
        };
        let f = derive(&imgs, None, "checkpoint/");
        assert_eq!(f.kind, FindingKind::NoNetworkImage);
        assert_eq!(f.expect.unwrap().links[0].up, Some(false));
        imgs.namespaces = vec![ns(None)];
        let f = derive(&imgs, None, "checkpoint/");
        assert_eq!(f.kind, FindingKind::NamespaceDumped);
        assert!(f.restore.contains("lo UP (no address)"), "{}", f.restore);
        assert_eq!(f.rests_on[0], "checkpoint/netdev-10.img");
        imgs.namespaces = vec![ns(Some("extRootNetNS"))];
        let f = derive(&imgs, None, "");
        assert_eq!(f.kind, FindingKind::ExternalKey);
        assert!(f.decided_by.unwrap().contains("config.json"));
        imgs.namespaces[0].netns = None;
        assert_eq!(derive(&imgs, None, "").kind, FindingKind::Inconsistent);
    }
}
