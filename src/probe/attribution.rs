//! Which step lost it: the live state before the dump, what the images hold, and the live
//! state after the restore, side by side; every fact that differs between before and after is
//! attributed to the **dump** (the image lacks it or holds another value), the **restore**
//! (the image holds the value from before, the namespace after does not), or the **runtime's
//! choice** (no network image at all, or the netns declared external: CRIU was told not to
//! save it). Sysctls CRIU does not save are attributed to **not covered by CRIU**.
//!
//! Data in: a rung folder (`netstate-before.json`, `netstate-after.json`, `images/`,
//! `sysctls-other-{before,after}.json`); data out: [`Attribution`]. `verify` recomputes it
//! from the same files.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::images::{NetImages, NsImages, read_dir};
use crate::netlink::netfilter::{canonical_nft, canonical_save};
use crate::netlink::{AddrState, NetState, RouteState, RuleState};

/// Where a fact was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LostAt {
    /// The image lacks the fact (or holds another value): `criu dump` did not save it.
    Dump,
    /// The image holds the value from before; the namespace after restore does not.
    Restore,
    /// No network image at all, or the netns was declared external: the runtime chose that
    /// CRIU saves nothing of it (runc's empty_ns).
    RuntimeChoice,
    /// A sysctl CRIU does not save (not in `criu/net.c`'s tables).
    NotCoveredByCriu,
}

/// One fact in the three columns. `None` = absent there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    /// `link`, `address`, `route`, `rule`, `sysctl`, `sysctl-not-saved`, `iptables`,
    /// `ip6tables`, `nftables`.
    pub kind: String,
    /// The fact's identity (e.g. `inet 10.214.0.1/24 if3`, `net.ipv4.conf.np0.forwarding`).
    pub key: String,
    /// Live state before the dump.
    pub before: Option<String>,
    /// What the images hold (`None` also when the image kind cannot hold it).
    pub image: Option<String>,
    /// Live state after the restore.
    pub after: Option<String>,
    /// For a fact that differs between before and after and was present before.
    pub lost_at: Option<LostAt>,
}

impl Row {
    /// True when the three columns do not all agree.
    pub fn differs(&self) -> bool {
        self.before != self.after || self.before != self.image
    }
}

/// The three-way comparison of one rung.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attribution {
    /// CRIU wrote at least one network image (`netns-`, `netdev-`, …).
    pub network_images: bool,
    /// The netns entry carries an external key (`ext_key`).
    pub external_netns: bool,
    /// Facts that differ between before and after (lost, changed or appeared), sorted.
    pub changed: Vec<Row>,
    /// Number of changed facts per [`LostAt`] (kebab-case name → count).
    pub counts: BTreeMap<String, usize>,
}

type Facts = BTreeMap<(String, String), String>;

fn put(m: &mut Facts, kind: &str, key: String, value: String) {
    m.insert((kind.to_string(), key), value);
}

fn link_value(mtu: Option<u32>, mac: Option<&str>, up: bool, loopback: bool) -> String {
    let mac = if loopback { "-" } else { mac.unwrap_or("-") };
    let mtu = mtu.map_or("-".to_string(), |m| m.to_string());
    format!("mtu {mtu} mac {mac} {}", if up { "UP" } else { "DOWN" })
}

fn addr_fact(m: &mut Facts, a: &AddrState) {
    let key = format!(
        "{} {}/{} if{}",
        a.family, a.address, a.prefix_len, a.ifindex
    );
    put(m, "address", key, format!("scope {}", a.scope));
}

fn route_fact(m: &mut Facts, r: &RouteState) {
    let key = format!(
        "{} table {} {} oif {}",
        r.family,
        r.table,
        r.dst,
        r.oif.map_or("-".into(), |o| o.to_string())
    );
    let opt = |name: &str, v: &Option<String>| {
        v.as_ref()
            .map(|v| format!(" {name} {v}"))
            .unwrap_or_default()
    };
    let value = format!(
        "{} proto {} scope {}{}{}",
        r.route_type,
        r.protocol,
        r.scope,
        opt("via", &r.gateway),
        opt("src", &r.prefsrc)
    );
    put(m, "route", key, value);
}

fn rule_fact(m: &mut Facts, r: &RuleState) {
    let key = format!(
        "{} pref {} from {} to {}{}{}",
        r.family,
        r.priority,
        r.src,
        r.dst,
        r.iif
            .as_ref()
            .map(|i| format!(" iif {i}"))
            .unwrap_or_default(),
        r.fwmark.map(|f| format!(" fwmark {f}")).unwrap_or_default()
    );
    put(m, "rule", key, format!("{} {}", r.action, r.table));
}

/// Canonical netfilter lines → one fact per table (`*filter`, `table ip filter {`).
fn table_facts(m: &mut Facts, kind: &str, lines: &[String]) {
    let mut cur: Option<(String, Vec<String>)> = None;
    for l in lines {
        let starts = if kind == "nftables" {
            l.starts_with("table ")
        } else {
            l.starts_with('*')
        };
        if starts {
            if let Some((k, v)) = cur.take() {
                put(m, kind, k, v.join("; "));
            }
            cur = Some((l.trim_end_matches(" {").to_string(), Vec::new()));
        } else if let Some((_, v)) = cur.as_mut() {
            v.push(l.clone());
        }
    }
    if let Some((k, v)) = cur {
        put(m, kind, k, v.join("; "));
    }
}

fn state_facts(s: &NetState) -> Facts {
    let mut m = Facts::new();
    for l in &s.links {
        let v = link_value(l.mtu, l.address.as_deref(), l.up, l.link_type == 772);
        put(&mut m, "link", format!("{} if{}", l.name, l.ifindex), v);
    }
    s.addresses.iter().for_each(|a| addr_fact(&mut m, a));
    s.routes.iter().for_each(|r| route_fact(&mut m, r));
    s.rules.iter().for_each(|r| rule_fact(&mut m, r));
    for (k, v) in &s.sysctls {
        put(&mut m, "sysctl", k.clone(), v.clone());
    }
    table_facts(&mut m, "iptables", &s.netfilter.iptables);
    table_facts(&mut m, "ip6tables", &s.netfilter.ip6tables);
    table_facts(&mut m, "nftables", &s.netfilter.nftables);
    m
}

fn image_facts(ns: &NsImages) -> Facts {
    let mut m = Facts::new();
    for d in &ns.devices {
        let v = link_value(
            Some(d.mtu),
            d.address.as_deref(),
            d.up,
            d.dev_type == "loopback",
        );
        put(&mut m, "link", format!("{} if{}", d.name, d.ifindex), v);
        d.sysctls
            .for_each(|k, v| put(&mut m, "sysctl", k.to_string(), v.to_string()));
    }
    ns.addresses.iter().for_each(|a| addr_fact(&mut m, a));
    ns.routes.iter().for_each(|r| route_fact(&mut m, r));
    ns.rules.iter().for_each(|r| rule_fact(&mut m, r));
    if let Some(n) = &ns.netns {
        for (k, v) in &n.sysctls {
            put(&mut m, "sysctl", k.clone(), v.clone());
        }
    }
    let text = |t: &Option<String>| t.clone().unwrap_or_default();
    table_facts(&mut m, "iptables", &canonical_save(&text(&ns.iptables)));
    table_facts(&mut m, "ip6tables", &canonical_save(&text(&ns.ip6tables)));
    table_facts(&mut m, "nftables", &canonical_nft(&text(&ns.nftables)));
    m
}

/// The namespace of the images that holds content (not external), else the first one.
fn main_ns(imgs: &NetImages) -> Option<&NsImages> {
    imgs.namespaces
        .iter()
        .find(|n| n.netns.as_ref().is_some_and(|e| e.ext_key.is_none()))
        .or(imgs.namespaces.first())
}

/// Computes the attribution from the three states (`images` `None` = no images folder) and
/// the not-compared sysctls before/after (dotted name → value).
pub fn compute(
    before: &NetState,
    images: Option<&NetImages>,
    after: &NetState,
    other_before: &BTreeMap<String, String>,
    other_after: &BTreeMap<String, String>,
) -> Attribution {
    let ns = images.and_then(main_ns);
    let external = ns.is_some_and(|n| n.netns.as_ref().is_some_and(|e| e.ext_key.is_some()));
    let (b, a) = (state_facts(before), state_facts(after));
    let i = ns.map(image_facts).unwrap_or_default();
    let keys: BTreeSet<&(String, String)> = b.keys().chain(a.keys()).collect();
    let mut changed = Vec::new();
    for k in keys {
        let (bv, av) = (b.get(k), a.get(k));
        if bv == av {
            continue;
        }
        let iv = i.get(k);
        let lost_at = bv.map(|bv| {
            if ns.is_none() || external {
                LostAt::RuntimeChoice
            } else if iv == Some(bv) {
                LostAt::Restore
            } else {
                LostAt::Dump
            }
        });
        changed.push(Row {
            kind: k.0.clone(),
            key: k.1.clone(),
            before: bv.cloned(),
            image: iv.cloned(),
            after: av.cloned(),
            lost_at,
        });
    }
    let names: BTreeSet<&String> = other_before.keys().chain(other_after.keys()).collect();
    for n in names {
        let (bv, av) = (other_before.get(n), other_after.get(n));
        if bv != av {
            let why = if ns.is_none() || external {
                LostAt::RuntimeChoice
            } else {
                LostAt::NotCoveredByCriu
            };
            changed.push(Row {
                kind: "sysctl-not-saved".into(),
                key: n.clone(),
                before: bv.cloned(),
                image: None,
                after: av.cloned(),
                lost_at: bv.map(|_| why),
            });
        }
    }
    let mut counts = BTreeMap::new();
    for r in &changed {
        if let Some(l) = r.lost_at {
            let name = serde_json::to_value(l).expect("enum serialises");
            *counts
                .entry(name.as_str().unwrap_or_default().to_string())
                .or_insert(0) += 1;
        }
    }
    Attribution {
        network_images: ns.is_some(),
        external_netns: external,
        changed,
        counts,
    }
}

/// Why a rung folder's [`Attribution`] could not be computed ([`from_rung_dir`]): the file
/// that is missing or malformed.
#[derive(Debug, thiserror::Error)]
pub enum AttributionError {
    /// A recorded file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A `sysctls-other-*.json` is not the JSON object it should be.
    #[error("{}: {source}", path.display())]
    Json {
        /// The file.
        path: std::path::PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A `netstate-*.json` is not a network state.
    #[error("{}: {source}", path.display())]
    NetState {
        /// The file.
        path: std::path::PathBuf,
        /// The decoder's error.
        #[source]
        source: crate::netlink::NetlinkError,
    },
    /// An image in `images/` is malformed or unreadable.
    #[error(transparent)]
    Image(#[from] crate::images::ImageError),
}

fn read_json<T: serde::de::DeserializeOwned + Default>(p: &Path) -> Result<T, AttributionError> {
    match crate::evidence::read_recorded_text(p) {
        Ok(t) => serde_json::from_str(&t).map_err(|source| AttributionError::Json {
            path: p.to_path_buf(),
            source,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(source) => Err(AttributionError::Read {
            path: p.to_path_buf(),
            source,
        }),
    }
}

/// Reads a rung folder and computes its [`Attribution`]. `sysctls-other-*.json` missing
/// (older evidence) count as empty; `images/` missing counts as no images.
///
/// Errors: [`AttributionError`], naming the file that is missing or malformed
/// (`netstate-*.json`, an image).
pub fn from_rung_dir(dir: &Path) -> Result<Attribution, AttributionError> {
    let state = |f: &str| -> Result<NetState, AttributionError> {
        let path = dir.join(f);
        let t = crate::evidence::read_recorded_text(&path).map_err(|source| {
            AttributionError::Read {
                path: path.clone(),
                source,
            }
        })?;
        NetState::from_json(&t).map_err(|source| AttributionError::NetState { path, source })
    };
    let (before, after) = (
        state("netstate-before.json")?,
        state("netstate-after.json")?,
    );
    let images_dir = dir.join("images");
    let images = if images_dir.is_dir() {
        Some(read_dir(&images_dir)?)
    } else {
        None
    };
    let ob: BTreeMap<String, String> = read_json(&dir.join("sysctls-other-before.json"))?;
    let oa: BTreeMap<String, String> = read_json(&dir.join("sysctls-other-after.json"))?;
    Ok(compute(&before, images.as_ref(), &after, &ob, &oa))
}

/// Computes the rung's attribution from its folder `dir` and records it as the rung fact
/// `attribution` (or `attribution_error` with the reason), which `verify` recomputes.
pub fn record(dir: &Path, out: &mut crate::probe::rung::RungOutput) {
    match from_rung_dir(dir) {
        Ok(a) => out.fact("attribution", &a),
        Err(e) => out.fact("attribution_error", e.to_string()),
    }
}

/// `verify`'s check that an attribution was not deleted: a criu or runtime rung that ran to its
/// end (pass or fail) and whose folder `dir` holds `sysctls-other-before.json` — written since
/// the same change that made these rungs record an attribution, so older evidence is not held
/// to it — records `attribution` (or `attribution_error`, why it could not be computed).
/// Returns the mismatch sentence when neither is recorded, `None` otherwise.
pub fn missing(rung: &crate::evidence::result::RungResult, dir: &Path) -> Option<String> {
    use crate::evidence::result::{RungName, Status};
    let computed_here = matches!(
        rung.name,
        RungName::Criu | RungName::Oci | RungName::ExternalNetns
    );
    let ran = matches!(rung.status, Status::Pass | Status::Fail);
    let recorded =
        rung.facts.contains_key("attribution") || rung.facts.contains_key("attribution_error");
    (computed_here && ran && !recorded && dir.join("sysctls-other-before.json").is_file()).then(|| {
        format!(
            "rungs[{}].facts.attribution: not recorded, although the rung ran to its end and its folder holds what the attribution is computed from (netstate-before.json, images/, netstate-after.json, sysctls-other-*.json): such a rung records `attribution` or `attribution_error`; the attribution is recomputed from the folder",
            rung.name
        )
    })
}

/// `verify`'s check: recomputes the attribution of rung folder `dir` and compares it with the
/// recorded fact `recorded` (the JSON value of the `attribution` fact). Returns the attribution
/// the evidence gives (`None` when it cannot be recomputed: `verify` then derives the verdict
/// without one) and a mismatch sentence, or `None` when they agree.
pub fn verify_recorded(
    rung: &str,
    dir: &Path,
    recorded: &serde_json::Value,
) -> (Option<serde_json::Value>, Option<String>) {
    match from_rung_dir(dir) {
        Err(e) => (
            None,
            Some(format!("{rung}: attribution cannot be recomputed: {e}")),
        ),
        Ok(a) => {
            let fresh = serde_json::to_value(&a).unwrap_or_default();
            let mismatch = (fresh != *recorded).then(|| {
                let d = super::attribution_diff::differences(recorded, &a);
                format!(
                    "{rung}: recorded attribution differs from the one the evidence gives: {}",
                    match d.is_empty() {
                        // Equal once parsed: a field the type does not know, or its order.
                        true => "the same entries, written differently".to_string(),
                        false => d.join("; "),
                    }
                )
            });
            (Some(fresh), mismatch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::NsImages;

    fn route(dst: &str, table: u32) -> RouteState {
        RouteState {
            family: "inet".into(),
            table,
            dst: dst.into(),
            gateway: None,
            oif: Some(3),
            protocol: "boot".into(),
            scope: "link".into(),
            route_type: "unicast".into(),
            prefsrc: None,
            priority: None,
        }
    }

    #[test]
    fn dump_restore_runtime_and_not_covered() {
        let mut before = NetState {
            routes: vec![route("10.1.0.0/24", 254), route("10.2.0.0/24", 100)],
            ..NetState::default()
        };
        before
            .sysctls
            .insert("net.ipv4.conf.all.forwarding".into(), "1".into());
        let mut after = NetState::default();
        after
            .sysctls
            .insert("net.ipv4.conf.all.forwarding".into(), "0".into());
        let ns = NsImages {
            id: 9,
            routes: vec![route("10.1.0.0/24", 254)],
            ..NsImages::default()
        };
        let imgs = NetImages {
            namespaces: vec![ns],
            ..NetImages::default()
        };
        let ob = BTreeMap::from([("net.ipv4.ip_default_ttl".to_string(), "77".to_string())]);
        let oa = BTreeMap::from([("net.ipv4.ip_default_ttl".to_string(), "64".to_string())]);
        let a = compute(&before, Some(&imgs), &after, &ob, &oa);
        let at = |key: &str| {
            a.changed
                .iter()
                .find(|r| r.key.contains(key))
                .unwrap()
                .lost_at
        };
        assert_eq!(at("table 254 10.1.0.0/24"), Some(LostAt::Restore));
        assert_eq!(at("table 100 10.2.0.0/24"), Some(LostAt::Dump));
        assert_eq!(at("all.forwarding"), Some(LostAt::Dump));
        assert_eq!(at("ip_default_ttl"), Some(LostAt::NotCoveredByCriu));
        assert_eq!(a.counts["dump"], 2);
        let none = compute(&before, None, &after, &ob, &oa);
        assert!(
            none.changed
                .iter()
                .all(|r| r.lost_at == Some(LostAt::RuntimeChoice))
        );
        assert!(!none.network_images);
        let same = compute(&before, Some(&imgs), &before, &ob, &ob);
        assert!(same.changed.is_empty() && same.counts.is_empty());
    }
}
