//! A device's saved sysctls as `netdev-<id>.img` holds them, named through one shared table.
//!
//! CRIU writes a device's `conf4`/`conf6` values positionally: entry `i` is the sysctl
//! `DEVCONFS4[i]` / `DEVCONFS6[i]` ([`crate::netlink::sysctl`]). [`DevSysctls`] keeps the
//! values in that order (an integer is not formatted, a name is not built) and forms the
//! dotted names (`net.ipv4.conf.<dev>.<name>`) only when they are read or serialized, in the
//! order of the names sorted once for every device (the order a map keyed by those names
//! has). Its JSON is that map's: `{"net.ipv4.conf.veth0.forwarding": "1", …}`.

use serde::de::Deserializer;
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::OnceLock;

use super::pb::SysctlEntry;
use crate::netlink::sysctl::{DEVCONFS4, DEVCONFS6};

/// One saved value: CRIU's `iarg` or `sarg` (a `sarg` wins when both are set).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Val {
    Int(i32),
    Str(Box<str>),
}

impl Val {
    fn of(e: &SysctlEntry) -> Option<Val> {
        match (&e.sarg, e.iarg) {
            (Some(s), _) => Some(Val::Str(s.as_str().into())),
            (None, Some(i)) => Some(Val::Int(i)),
            (None, None) => None,
        }
    }

    fn write(&self, out: &mut String) {
        out.clear();
        match self {
            Val::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Val::Str(s) => out.push_str(s),
        }
    }
}

/// The decoded form: the device's name and its values in CRIU's order.
#[derive(Debug, Clone)]
struct Decoded {
    dev: String,
    /// `conf` (CRIU's legacy IPv4 array): `legacy.ipv4.conf.<dev>.#<i>`.
    legacy: Vec<i32>,
    /// `conf4[i]`: `net.ipv4.conf.<dev>.<DEVCONFS4[i]>` (`#<i>` past the table); `None`: CRIU
    /// saved no value (left out).
    conf4: Vec<Option<Val>>,
    /// `conf6[i]`, as `conf4` with `net.ipv6` and `DEVCONFS6`.
    conf6: Vec<Option<Val>>,
}

#[derive(Debug, Clone)]
enum Repr {
    Decoded(Decoded),
    /// Read back from JSON, or built by hand: the names as given.
    Map(BTreeMap<String, String>),
}

/// A device's saved sysctls: dotted name → value, in name order (see the module doc).
#[derive(Debug, Clone)]
pub struct DevSysctls(Repr);

impl Default for DevSysctls {
    fn default() -> Self {
        DevSysctls(Repr::Map(BTreeMap::new()))
    }
}

/// The groups of a device's names, in name order (`legacy.` < `net.ipv4.` < `net.ipv6.`).
const GROUPS: [(&str, &[&str]); 3] = [
    ("legacy.ipv4.conf.", &[]),
    ("net.ipv4.conf.", DEVCONFS4),
    ("net.ipv6.conf.", DEVCONFS6),
];

/// The shared table: per group, the indices of its names sorted by name (once per process).
fn sorted_names(group: usize) -> &'static [usize] {
    static ORDER: OnceLock<[Vec<usize>; 3]> = OnceLock::new();
    &ORDER.get_or_init(|| {
        GROUPS.map(|(_, names)| {
            let mut v: Vec<usize> = (0..names.len()).collect();
            v.sort_by_key(|&i| names[i]);
            v
        })
    })[group]
}

/// The last part of a name: a table name, or `#<index>` for an entry past the table.
#[derive(Clone, Copy)]
enum Suffix {
    Name(&'static str),
    Index(usize),
}

impl Suffix {
    fn write(self, out: &mut String) {
        match self {
            Suffix::Name(n) => out.push_str(n),
            Suffix::Index(i) => {
                let _ = write!(out, "#{i}");
            }
        }
    }

    fn text(self) -> std::borrow::Cow<'static, str> {
        match self {
            Suffix::Name(n) => n.into(),
            Suffix::Index(i) => format!("#{i}").into(),
        }
    }
}

impl Decoded {
    /// Visits every (group, suffix, value) in name order.
    fn visit<E>(&self, mut f: impl FnMut(usize, Suffix, &Val) -> Result<(), E>) -> Result<(), E> {
        let legacy: Vec<Val> = self.legacy.iter().map(|&i| Val::Int(i)).collect();
        let lists: [&[Option<Val>]; 3] = [&[], &self.conf4, &self.conf6];
        for (g, (_, names)) in GROUPS.iter().enumerate() {
            // Entries past the table are named `#<i>`: sorted by that text, merged with the
            // table's sorted names.
            let mut extra: Vec<(usize, &Val)> = if g == 0 {
                legacy.iter().enumerate().collect()
            } else {
                lists[g]
                    .iter()
                    .enumerate()
                    .skip(names.len())
                    .filter_map(|(i, v)| v.as_ref().map(|v| (i, v)))
                    .collect()
            };
            if extra.len() > 1 {
                extra.sort_by_cached_key(|(i, _)| format!("#{i}"));
            }
            let mut extra = extra.into_iter().peekable();
            for &i in sorted_names(g) {
                let Some(Some(v)) = lists[g].get(i) else {
                    continue;
                };
                while let Some(&(x, xv)) = extra.peek() {
                    if Suffix::Index(x).text().as_ref() >= names[i] {
                        break;
                    }
                    f(g, Suffix::Index(x), xv)?;
                    extra.next();
                }
                f(g, Suffix::Name(names[i]), v)?;
            }
            for (x, xv) in extra {
                f(g, Suffix::Index(x), xv)?;
            }
        }
        Ok(())
    }

    fn key(&self, g: usize, s: Suffix, out: &mut String) {
        out.clear();
        out.push_str(GROUPS[g].0);
        out.push_str(&self.dev);
        out.push('.');
        s.write(out);
    }
}

impl DevSysctls {
    /// The sysctls of the `netdev-` entry of device `dev`: `conf4`, `conf6` (positional, see
    /// the module doc) and the legacy `conf` array; entries with no value are left out.
    pub fn from_entries(
        dev: &str,
        conf4: &[SysctlEntry],
        conf6: &[SysctlEntry],
        legacy: &[i32],
    ) -> Self {
        DevSysctls(Repr::Decoded(Decoded {
            dev: dev.to_string(),
            legacy: legacy.to_vec(),
            conf4: conf4.iter().map(Val::of).collect(),
            conf6: conf6.iter().map(Val::of).collect(),
        }))
    }

    /// Number of sysctls (entries with a value).
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Decoded(d) => {
                let some = |v: &[Option<Val>]| v.iter().filter(|x| x.is_some()).count();
                d.legacy.len() + some(&d.conf4) + some(&d.conf6)
            }
            Repr::Map(m) => m.len(),
        }
    }

    /// No sysctl saved.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `f(name, value)` for every sysctl, in name order; `f`'s arguments are reused
    /// buffers (copy what you keep).
    pub fn for_each(&self, mut f: impl FnMut(&str, &str)) {
        match &self.0 {
            Repr::Decoded(d) => {
                let (mut k, mut v) = (String::new(), String::new());
                let _ = d.visit(|g, s, val| -> Result<(), ()> {
                    d.key(g, s, &mut k);
                    val.write(&mut v);
                    f(&k, &v);
                    Ok(())
                });
            }
            Repr::Map(m) => m.iter().for_each(|(k, v)| f(k, v)),
        }
    }

    /// Every `(name, value)`, in name order.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each(|k, v| out.push((k.to_string(), v.to_string())));
        out
    }

    /// The value of the sysctl named `key` (`net.ipv4.conf.veth0.forwarding`).
    pub fn get(&self, key: &str) -> Option<String> {
        let mut hit = None;
        self.for_each(|k, v| {
            if hit.is_none() && k == key {
                hit = Some(v.to_string());
            }
        });
        hit
    }

    /// The sysctls as a map, name → value.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.pairs().into_iter().collect()
    }
}

impl From<BTreeMap<String, String>> for DevSysctls {
    fn from(m: BTreeMap<String, String>) -> Self {
        DevSysctls(Repr::Map(m))
    }
}

impl PartialEq for DevSysctls {
    fn eq(&self, other: &Self) -> bool {
        self.pairs() == other.pairs()
    }
}

impl Eq for DevSysctls {}

impl Serialize for DevSysctls {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut map = ser.serialize_map(Some(self.len()))?;
        match &self.0 {
            Repr::Decoded(d) => {
                let (mut k, mut v) = (String::new(), String::new());
                d.visit(|g, s, val| {
                    d.key(g, s, &mut k);
                    val.write(&mut v);
                    map.serialize_entry(k.as_str(), v.as_str())
                })?;
            }
            Repr::Map(m) => {
                for (k, v) in m {
                    map.serialize_entry(k, v)?;
                }
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for DevSysctls {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        BTreeMap::<String, String>::deserialize(de).map(DevSysctls::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(i: i32) -> SysctlEntry {
        SysctlEntry {
            r#type: 6,
            iarg: Some(i),
            sarg: None,
        }
    }

    /// The map the decoder built before: one `insert` per entry, keys formatted in full.
    fn reference(
        dev: &str,
        c4: &[SysctlEntry],
        c6: &[SysctlEntry],
        legacy: &[i32],
    ) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        for (p, list, names) in [("ipv4", c4, DEVCONFS4), ("ipv6", c6, DEVCONFS6)] {
            for (i, e) in list.iter().enumerate() {
                let Some(v) = e.sarg.clone().or_else(|| e.iarg.map(|i| i.to_string())) else {
                    continue;
                };
                let n = names
                    .get(i)
                    .map_or_else(|| format!("#{i}"), |n| n.to_string());
                m.insert(format!("net.{p}.conf.{dev}.{n}"), v);
            }
        }
        for (i, v) in legacy.iter().enumerate() {
            m.insert(format!("legacy.ipv4.conf.{dev}.#{i}"), v.to_string());
        }
        m
    }

    #[test]
    fn the_tables_hold_no_name_twice() {
        for names in [DEVCONFS4, DEVCONFS6] {
            let mut v = names.to_vec();
            v.sort();
            v.dedup();
            assert_eq!(v.len(), names.len());
        }
    }

    #[test]
    fn names_order_and_json_are_the_maps() {
        let mut c4: Vec<SysctlEntry> = (0..DEVCONFS4.len() as i32 + 13).map(int).collect();
        c4[3].iarg = None;
        c4[DEVCONFS4.len() + 2].iarg = None;
        let mut c6: Vec<SysctlEntry> = (0..DEVCONFS6.len() as i32 - 5).map(|i| int(-i)).collect();
        c6[1] = SysctlEntry {
            r#type: 7,
            iarg: Some(4),
            sarg: Some("::1 x".into()),
        };
        let legacy: Vec<i32> = (0..12).collect();
        for (dev, c4, c6, legacy) in [
            ("veth0", &c4[..], &c6[..], &legacy[..]),
            ("eth0.100", &c4[..5], &[][..], &[][..]),
            ("lo", &[][..], &[][..], &[][..]),
        ] {
            let s = DevSysctls::from_entries(dev, c4, c6, legacy);
            let want = reference(dev, c4, c6, legacy);
            assert_eq!(s.len(), want.len(), "{dev}");
            assert_eq!(s.to_map(), want, "{dev}");
            let pairs: Vec<(String, String)> = want.clone().into_iter().collect();
            assert_eq!(s.pairs(), pairs, "{dev}: name order");
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                serde_json::to_string(&want).unwrap(),
                "{dev}: JSON"
            );
            let back: DevSysctls =
                serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
            assert_eq!(back, s);
            if let Some((k, v)) = want.iter().next() {
                assert_eq!(s.get(k).as_ref(), Some(v));
            }
            assert_eq!(s.get("net.ipv4.conf.none.x"), None);
        }
    }
}
