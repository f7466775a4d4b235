//! What the container engine recorded beside CRIU's images in a checkpoint archive: Podman's
//! `network.status`, the OCI spec's (`spec.dump`) IP annotations and network namespace path,
//! and the runtime and container name of `config.dump`.
//!
//! Layouts read (facts, verified on Podman 4.3.1 exports here; CRI-O's from KEP-2008 and
//! checkpointctl's `lib/metadata.go`):
//! - Podman: `config.dump` is libpod's container config (`name`, `id`, `runtime`,
//!   `networkMode`, `createNetNS`), `spec.dump` the OCI spec (annotation
//!   `io.container.manager` = `libpod`), `network.status` a map network name →
//!   `{interfaces: {<name>: {subnets: [{ipnet, gateway}], mac_address}}}` (`null` without a
//!   network).
//! - CRI-O/kubelet: `config.dump` is `{id, name, rootfsImageName, runtime, …}`, `spec.dump`
//!   the OCI spec with `io.kubernetes.cri-o.IP.<n>` annotations, no `network.status`, a
//!   top-level `bind.mounts`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The engine that wrote the archive, as its metadata says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// Podman (`io.container.manager` = `libpod`, or a `network.status`).
    Podman,
    /// CRI-O / the kubelet (`io.kubernetes.cri-o.*` annotations or `bind.mounts`, no
    /// `network.status`).
    CriO,
    /// Neither could be told.
    Unknown,
}

/// One interface address the engine recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedInterface {
    /// The engine's network (`podman`), or `annotation` for a CRI-O IP annotation.
    pub network: String,
    /// Interface name in the container (`eth0`), when recorded.
    pub interface: Option<String>,
    /// Addresses with prefix (`10.88.0.5/16`), or bare for an annotation.
    pub addresses: Vec<String>,
    /// Gateways, when recorded.
    pub gateways: Vec<String>,
    /// MAC address, when recorded.
    pub mac: Option<String>,
}

/// The engine metadata of one archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineMeta {
    /// Which engine.
    pub engine: Engine,
    /// Metadata files present (`config.dump`, `spec.dump`, `network.status`).
    pub files: Vec<String>,
    /// `config.dump` `name`.
    pub container_name: Option<String>,
    /// `config.dump` `id`.
    pub container_id: Option<String>,
    /// `config.dump` `runtime` (`runc`, `crun`, or a path).
    pub runtime: Option<String>,
    /// Podman's `config.dump` `networkMode` (`bridge`, `none`, `host`, …).
    pub network_mode: Option<String>,
    /// `spec.dump` has a `network` namespace entry.
    pub netns_in_spec: bool,
    /// Its `path`, when the namespace was given to the runtime (not created by it).
    pub netns_path: Option<String>,
    /// `spec.dump` annotations `io.kubernetes.cri-o.IP.<n>`, by name.
    pub ip_annotations: BTreeMap<String, String>,
    /// Podman's `network.status`, one element per network and interface; then the IP
    /// annotations as `network: annotation`.
    pub interfaces: Vec<RecordedInterface>,
}

/// A metadata file that is not what its engine writes.
#[derive(Debug, thiserror::Error)]
#[error("{}: {reason}; give an unmodified checkpoint archive as podman or the kubelet wrote it", file.display())]
pub struct MetadataError {
    /// `<archive>:<file>`.
    pub file: PathBuf,
    /// What is wrong.
    pub reason: String,
}

#[derive(Deserialize)]
struct Config {
    name: Option<String>,
    id: Option<String>,
    runtime: Option<String>,
    #[serde(rename = "networkMode")]
    network_mode: Option<String>,
}

#[derive(Deserialize)]
struct Spec {
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    linux: Option<SpecLinux>,
}

#[derive(Deserialize)]
struct SpecLinux {
    #[serde(default)]
    namespaces: Vec<SpecNs>,
}

#[derive(Deserialize)]
struct SpecNs {
    #[serde(rename = "type")]
    kind: String,
    path: Option<String>,
}

#[derive(Deserialize)]
struct StatusBlock {
    #[serde(default)]
    interfaces: BTreeMap<String, StatusIface>,
}

#[derive(Deserialize)]
struct StatusIface {
    #[serde(default)]
    subnets: Vec<StatusSubnet>,
    mac_address: Option<String>,
}

#[derive(Deserialize)]
struct StatusSubnet {
    ipnet: String,
    gateway: Option<String>,
}

/// The prefix of CRI-O's IP annotations.
pub const CRIO_IP_ANNOTATION: &str = "io.kubernetes.cri-o.IP.";

fn parse<T: for<'de> Deserialize<'de>>(
    archive: &Path,
    name: &str,
    bytes: &[u8],
) -> Result<T, MetadataError> {
    serde_json::from_slice(bytes).map_err(|e| MetadataError {
        file: PathBuf::from(format!("{}:{name}", archive.display())),
        reason: format!("not the JSON its engine writes: {e}"),
    })
}

/// Reads the metadata files (`name` → bytes) of the archive `archive`; `top_level` are the
/// archive's other top-level names (`bind.mounts` tells CRI-O).
///
/// Errors: [`MetadataError`] naming `<archive>:<file>` when a file present is not JSON of the
/// expected shape.
pub fn read_meta(
    archive: &Path,
    files: &BTreeMap<String, Vec<u8>>,
    top_level: &[String],
) -> Result<EngineMeta, MetadataError> {
    let mut m = EngineMeta {
        engine: Engine::Unknown,
        files: files.keys().cloned().collect(),
        container_name: None,
        container_id: None,
        runtime: None,
        network_mode: None,
        netns_in_spec: false,
        netns_path: None,
        ip_annotations: BTreeMap::new(),
        interfaces: Vec::new(),
    };
    if let Some(b) = files.get("config.dump") {
        let c: Config = parse(archive, "config.dump", b)?;
        (m.container_name, m.container_id) = (c.name, c.id);
        (m.runtime, m.network_mode) = (c.runtime, c.network_mode);
    }
    let mut libpod = false;
    if let Some(b) = files.get("spec.dump") {
        let s: Spec = parse(archive, "spec.dump", b)?;
        libpod = s
            .annotations
            .get("io.container.manager")
            .map(String::as_str)
            == Some("libpod");
        m.ip_annotations = s
            .annotations
            .iter()
            .filter(|(k, _)| k.starts_with(CRIO_IP_ANNOTATION))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(ns) = s
            .linux
            .iter()
            .flat_map(|l| &l.namespaces)
            .find(|n| n.kind == "network")
        {
            m.netns_in_spec = true;
            m.netns_path = ns.path.clone().filter(|p| !p.is_empty());
        }
        if !libpod
            && (!m.ip_annotations.is_empty()
                || s.annotations
                    .keys()
                    .any(|k| k.starts_with("io.kubernetes.cri-o.")))
        {
            m.engine = Engine::CriO;
        }
    }
    if let Some(b) = files.get("network.status") {
        let st: Option<BTreeMap<String, StatusBlock>> = parse(archive, "network.status", b)?;
        for (network, block) in st.unwrap_or_default() {
            for (iface, i) in block.interfaces {
                m.interfaces.push(RecordedInterface {
                    network: network.clone(),
                    interface: Some(iface),
                    addresses: i.subnets.iter().map(|s| s.ipnet.clone()).collect(),
                    gateways: i.subnets.iter().filter_map(|s| s.gateway.clone()).collect(),
                    mac: i.mac_address,
                });
            }
        }
        libpod = true;
    }
    if libpod {
        m.engine = Engine::Podman;
    } else if m.engine == Engine::Unknown && top_level.iter().any(|n| n == "bind.mounts") {
        m.engine = Engine::CriO;
    }
    if !m.ip_annotations.is_empty() && m.engine != Engine::Podman {
        m.interfaces.push(RecordedInterface {
            network: "annotation".into(),
            interface: None,
            addresses: m.ip_annotations.values().cloned().collect(),
            gateways: Vec::new(),
            mac: None,
        });
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn podman_and_crio_metadata() {
        let mut f = BTreeMap::new();
        f.insert(
            "config.dump".into(),
            br#"{"name":"web","id":"ab","runtime":"runc","networkMode":"bridge"}"#.to_vec(),
        );
        f.insert("spec.dump".into(), br#"{"annotations":{"io.container.manager":"libpod"},"linux":{"namespaces":[{"type":"network","path":"/run/netns/netns-1"}]}}"#.to_vec());
        f.insert("network.status".into(), br#"{"podman":{"interfaces":{"eth0":{"subnets":[{"ipnet":"10.88.0.5/16","gateway":"10.88.0.1"}],"mac_address":"42:ea:00:00:00:01"}}}}"#.to_vec());
        let m = read_meta(Path::new("ck.tar"), &f, &[]).unwrap();
        assert_eq!(m.engine, Engine::Podman);
        assert_eq!(m.netns_path.as_deref(), Some("/run/netns/netns-1"));
        assert_eq!(m.interfaces[0].addresses, ["10.88.0.5/16"]);
        assert_eq!(m.interfaces[0].mac.as_deref(), Some("42:ea:00:00:00:01"));

        let mut f = BTreeMap::new();
        f.insert(
            "config.dump".into(),
            br#"{"id":"cd","name":"k8s_app","runtime":"runc"}"#.to_vec(),
        );
        f.insert("spec.dump".into(), br#"{"annotations":{"io.kubernetes.cri-o.IP.0":"10.85.0.7"},"linux":{"namespaces":[{"type":"network","path":"/var/run/netns/x"}]}}"#.to_vec());
        let m = read_meta(Path::new("ck.tar"), &f, &["bind.mounts".into()]).unwrap();
        assert_eq!(m.engine, Engine::CriO);
        assert_eq!(m.interfaces[0].addresses, ["10.85.0.7"]);

        f.insert("network.status".into(), b"[1,".to_vec());
        let e = read_meta(Path::new("ck.tar"), &f, &[]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("ck.tar:network.status: not the JSON"),
            "{e}"
        );
    }
}
