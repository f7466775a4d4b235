//! Which netfilter tables the calling thread's netns holds and whether they filter anything,
//! without running a tool: `NFT_MSG_GETTABLE`, `GETCHAIN`, `GETRULE`, `GETSET`, `GETOBJ` and
//! `GETFLOWTABLE` dumps over `NETLINK_NETFILTER` (`NFNL_SUBSYS_NFTABLES`, family
//! `NFPROTO_UNSPEC`, so every family; messages built and parsed by netlink-packet-netfilter)
//! between two `NFT_MSG_GETGEN` answers (same ruleset generation: one consistent view), and the
//! legacy x_tables' `ip_tables_names` / `ip6_tables_names` read from `/proc/thread-self/net`
//! (the thread's netns; `/proc/net` follows the process's).
//!
//! [`super::netfilter::capture`] uses it to skip `iptables-save`, `ip6tables-save` and
//! `nft list ruleset` (~10 ms of processes) when [`TablesSeen::filters_nothing`] proves that
//! their canonical form is empty: no legacy table; no rule, set, object or flowtable; every
//! table without flags or comment, every chain a base chain with policy accept (what CRIU's
//! network lock and iptables-nft leave behind after a restore, which the canonical form drops).
//! `tests/net/netfilter_empty.rs` runs the tools on such netns and compares. Anything else, or any
//! answer that cannot be read, leaves the decision to the tools.

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_netfilter::nftables::{
    ChainAttribute, ChainFlags, ChainMessage, GenAttribute, GenMessage, NfTablesMessage,
    RuleMessage, SetMessage, TableAttribute, TableFlags, TableMessage,
};
use netlink_packet_netfilter::{
    NetfilterHeader, NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily,
};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_NETFILTER};

use super::NftDumpError;
use super::netfilter::is_criu_lock_name;

/// `NF_ACCEPT`, the verdict of a chain's `NFTA_CHAIN_POLICY` (`linux/netfilter.h`).
const NF_ACCEPT: u32 = 1;

/// The tables iptables-nft keeps in families `ip` (2) and `ip6` (10), and their built-in
/// chains: only these are taken as "filters nothing" there (another name may be one
/// `iptables-save` shows differently).
const IPT_TABLES: [&str; 5] = ["filter", "nat", "mangle", "raw", "security"];
const IPT_CHAINS: [&str; 5] = ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"];

/// One nf_tables table of the dump.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NftTable {
    /// `nfgenmsg.nfgen_family`: 1 inet, 2 ip, 3 arp, 5 netdev, 7 bridge, 10 ip6.
    pub family: u8,
    pub name: String,
    /// `NFTA_TABLE_FLAGS` (dormant, owner, persist) is set, or the table has a comment
    /// (`NFTA_TABLE_USERDATA`): both show in `nft list ruleset`.
    pub flagged: bool,
    /// Its chains, in dump order.
    pub chains: Vec<NftChain>,
}

/// One chain of an [`NftTable`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NftChain {
    pub name: String,
    /// A base chain (`NFTA_CHAIN_HOOK` present).
    pub base: bool,
    /// `NFTA_CHAIN_POLICY` (`None` for a regular chain).
    pub policy: Option<u32>,
    /// Flags beyond `NFT_CHAIN_BASE` (offload, binding) or a comment (`NFTA_CHAIN_USERDATA`).
    pub flagged: bool,
}

impl NftChain {
    fn accepts_all(&self) -> bool {
        self.base && self.policy == Some(NF_ACCEPT) && !self.flagged
    }
}

/// What one look found (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TablesSeen {
    /// nf_tables tables with their chains, in dump order.
    pub nftables: Vec<NftTable>,
    /// Chains the dump named in a table the table dump did not list (counted against
    /// [`Self::filters_nothing`]).
    pub orphan_chains: usize,
    /// Rules, sets, stateful objects and flowtables, over every table.
    pub rules: usize,
    pub sets: usize,
    pub objects: usize,
    pub flowtables: usize,
    /// The ruleset generation (`NFTA_GEN_ID`) before and after the dumps.
    pub generation: (u32, u32),
    /// Legacy IPv4 x_tables (`ip_tables_names`); `None` when the file is absent (`ip_tables`
    /// not loaded, so no legacy IPv4 table in any netns).
    pub ip_tables: Option<Vec<String>>,
    /// Legacy IPv6 x_tables (`ip6_tables_names`); `None` when the file is absent.
    pub ip6_tables: Option<Vec<String>>,
}

impl TablesSeen {
    /// True when no table of any kind was found.
    pub fn is_empty(&self) -> bool {
        self.nftables.is_empty() && self.orphan_chains == 0 && self.legacy_empty()
    }

    fn legacy_empty(&self) -> bool {
        self.ip_tables.as_ref().is_none_or(Vec::is_empty)
            && self.ip6_tables.as_ref().is_none_or(Vec::is_empty)
    }

    /// True when the canonical ruleset is provably empty (see the module documentation): one
    /// generation throughout, no legacy table, no rule, set, object or flowtable, every table
    /// unflagged (in `ip`/`ip6` one of iptables' names) and every chain a base chain with policy
    /// accept (in `ip`/`ip6` one of iptables' built-in names), and no table or chain named like
    /// CRIU's lock ([`super::netfilter::is_criu_lock_name`]: the canonical form keeps those).
    pub fn filters_nothing(&self) -> bool {
        let ipt = |t: &NftTable| matches!(t.family, 2 | 10);
        self.generation.0 == self.generation.1
            && self.legacy_empty()
            && self.orphan_chains == 0
            && self.rules + self.sets + self.objects + self.flowtables == 0
            && self.nftables.iter().all(|t| {
                !t.flagged
                    && !is_criu_lock_name(&t.name)
                    && !t.chains.iter().any(|c| is_criu_lock_name(&c.name))
                    && (!ipt(t) || IPT_TABLES.contains(&t.name.as_str()))
                    && t.chains.iter().all(|c| {
                        c.accepts_all() && (!ipt(t) || IPT_CHAINS.contains(&c.name.as_str()))
                    })
            })
    }

    /// The evidence lines of this look, one per source, each starting with `# `.
    pub fn proof_lines(&self) -> String {
        let names = |v: &Option<Vec<String>>, file: &str| match v {
            None => format!("# {PROC_NET}/{file}: absent (no legacy table in any netns)"),
            Some(v) if v.is_empty() => format!("# {PROC_NET}/{file}: empty"),
            Some(v) => format!("# {PROC_NET}/{file}: {}", v.join(", ")),
        };
        let mut out = format!(
            "# NETLINK_NETFILTER dumps, NFPROTO_UNSPEC (every family), ruleset generation {} before and {} after: {} table(s), {} rule(s), {} set(s), {} object(s), {} flowtable(s), {} chain(s) outside a listed table\n",
            self.generation.0,
            self.generation.1,
            self.nftables.len(),
            self.rules,
            self.sets,
            self.objects,
            self.flowtables,
            self.orphan_chains,
        );
        for t in &self.nftables {
            let chains: Vec<String> = t
                .chains
                .iter()
                .map(|c| {
                    format!(
                        "{} ({}{}{})",
                        c.name,
                        if c.base { "base" } else { "regular" },
                        match c.policy {
                            Some(NF_ACCEPT) => ", policy accept".to_string(),
                            Some(p) => format!(", policy {p}"),
                            None => String::new(),
                        },
                        if c.flagged { ", flags or comment" } else { "" }
                    )
                })
                .collect();
            out.push_str(&format!(
                "#   table {} {}{}: {}\n",
                family_name(t.family),
                t.name,
                if t.flagged { " (flags or comment)" } else { "" },
                if chains.is_empty() {
                    "no chain".to_string()
                } else {
                    chains.join(", ")
                }
            ));
        }
        out.push_str(&names(&self.ip_tables, "ip_tables_names"));
        out.push('\n');
        out.push_str(&names(&self.ip6_tables, "ip6_tables_names"));
        out.push('\n');
        out
    }
}

/// `nft`'s word for a family number.
fn family_name(f: u8) -> String {
    match f {
        1 => "inet".into(),
        2 => "ip".into(),
        3 => "arp".into(),
        5 => "netdev".into(),
        7 => "bridge".into(),
        10 => "ip6".into(),
        o => format!("family-{o}"),
    }
}

/// Where the legacy x_tables names are read: the calling thread's netns.
const PROC_NET: &str = "/proc/thread-self/net";

/// Looks at the calling thread's netns (see the module documentation).
///
/// Errors: a text naming the step (`socket`, `send`, `recv`, `decode`, the kernel's error
/// code, or the `/proc` file that could not be read) when an answer is not complete.
pub fn tables() -> Result<TablesSeen, NftDumpError> {
    let mut nl = Nl::open()?;
    let gen_before =
        generation(&nl.dump(NfTablesMessage::GetGen(GenMessage { attributes: vec![] }))?)?;
    let mut seen = TablesSeen::default();
    for m in nl.dump(NfTablesMessage::GetTable(TableMessage {
        attributes: vec![],
    }))? {
        if let (f, NetfilterMessageInner::NfTables(NfTablesMessage::NewTable(t))) =
            (u8::from(m.header.family), &m.inner)
        {
            seen.nftables.push(table(f, t));
        } else {
            return Err(NftDumpError::OtherMessage { what: "table" });
        }
    }
    for m in nl.dump(NfTablesMessage::GetChain(ChainMessage {
        attributes: vec![],
    }))? {
        let f = u8::from(m.header.family);
        let NetfilterMessageInner::NfTables(NfTablesMessage::NewChain(c)) = &m.inner else {
            return Err(NftDumpError::OtherMessage { what: "chain" });
        };
        let (tname, ch) = chain(c);
        match seen
            .nftables
            .iter_mut()
            .find(|t| t.family == f && t.name == tname)
        {
            Some(t) => t.chains.push(ch),
            None => seen.orphan_chains += 1,
        }
    }
    seen.rules = nl
        .dump(NfTablesMessage::GetRule(RuleMessage { attributes: vec![] }))?
        .len();
    seen.sets = nl
        .dump(NfTablesMessage::GetSet(SetMessage { attributes: vec![] }))?
        .len();
    seen.objects = nl.dump(NfTablesMessage::GetObject(vec![]))?.len();
    seen.flowtables = nl.dump(NfTablesMessage::GetFlowTable(vec![]))?.len();
    let gen_after =
        generation(&nl.dump(NfTablesMessage::GetGen(GenMessage { attributes: vec![] }))?)?;
    seen.generation = (gen_before, gen_after);
    seen.ip_tables = legacy_names("ip_tables_names")?;
    seen.ip6_tables = legacy_names("ip6_tables_names")?;
    Ok(seen)
}

fn table(family: u8, t: &TableMessage) -> NftTable {
    let mut out = NftTable {
        family,
        ..Default::default()
    };
    for a in &t.attributes {
        match a {
            TableAttribute::Name(n) => out.name = n.clone(),
            TableAttribute::Flags(f) if *f != TableFlags::empty() => out.flagged = true,
            TableAttribute::UserData(_) => out.flagged = true,
            _ => {}
        }
    }
    out
}

/// The table's name and the chain of one `NFT_MSG_NEWCHAIN` answer.
fn chain(c: &ChainMessage) -> (String, NftChain) {
    let (mut table, mut out) = (String::new(), NftChain::default());
    for a in &c.attributes {
        match a {
            ChainAttribute::Table(t) => table = t.clone(),
            ChainAttribute::Name(n) => out.name = n.clone(),
            ChainAttribute::Hook(_) => out.base = true,
            ChainAttribute::Policy(p) => out.policy = Some(*p),
            ChainAttribute::Flags(f) if !(*f - ChainFlags::Base).is_empty() => out.flagged = true,
            ChainAttribute::UserData(_) => out.flagged = true,
            _ => {}
        }
    }
    (table, out)
}

/// `NFTA_GEN_ID` of a `GETGEN` answer.
fn generation(msgs: &[NetfilterMessage]) -> Result<u32, NftDumpError> {
    msgs.iter()
        .find_map(|m| match &m.inner {
            NetfilterMessageInner::NfTables(NfTablesMessage::NewGen(g)) => {
                g.attributes.iter().find_map(|a| match a {
                    GenAttribute::Id(id) => Some(*id),
                    _ => None,
                })
            }
            _ => None,
        })
        .ok_or(NftDumpError::NoGeneration)
}

/// `<PROC_NET>/<file>`, one table name per line; `None` when the file does not exist.
fn legacy_names(file: &str) -> Result<Option<Vec<String>>, NftDumpError> {
    let path = format!("{PROC_NET}/{file}");
    match std::fs::read_to_string(&path) {
        Ok(t) => Ok(Some(
            t.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect(),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(NftDumpError::Proc { path, source }),
    }
}

/// The request for `msg`: `NLM_F_REQUEST`, plus `NLM_F_DUMP` except for `GETGEN` (a single
/// answer), family `NFPROTO_UNSPEC`, sequence number `seq`.
fn request(msg: NfTablesMessage, seq: u32) -> Vec<u8> {
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_REQUEST;
    if !matches!(msg, NfTablesMessage::GetGen(_)) {
        hdr.flags |= NLM_F_DUMP;
    }
    hdr.sequence_number = seq;
    let mut m = NetlinkMessage::new(
        hdr,
        NetlinkPayload::from(NetfilterMessage::new(
            NetfilterHeader::new(NetfilterProtoFamily::Unspec, 0, 0),
            msg,
        )),
    );
    m.finalize();
    let mut buf = vec![0; m.buffer_len()];
    m.serialize(&mut buf);
    buf
}

/// The error of socket call `step`.
fn sock_err(step: &'static str) -> impl FnOnce(std::io::Error) -> NftDumpError {
    move |source| NftDumpError::Socket { step, source }
}

/// One `NETLINK_NETFILTER` socket in the calling thread's netns, its receive buffer and the
/// next sequence number.
struct Nl {
    sock: Socket,
    buf: Vec<u8>,
    seq: u32,
}

impl Nl {
    fn open() -> Result<Nl, NftDumpError> {
        let mut sock = Socket::new(NETLINK_NETFILTER).map_err(sock_err("socket"))?;
        sock.bind_auto().map_err(sock_err("bind"))?;
        sock.connect(&SocketAddr::new(0, 0))
            .map_err(sock_err("connect"))?;
        Ok(Nl {
            sock,
            buf: vec![0u8; super::wire::RECV_BUF_LEN],
            seq: 0,
        })
    }

    /// Sends the request for `msg` and reads its answers (until `NLMSG_DONE` for a dump, the
    /// one answer for `GETGEN`).
    fn dump(&mut self, msg: NfTablesMessage) -> Result<Vec<NetfilterMessage>, NftDumpError> {
        let single = matches!(msg, NfTablesMessage::GetGen(_));
        self.seq += 1;
        let seq = self.seq;
        self.sock
            .send(&request(msg, seq), 0)
            .map_err(sock_err("send"))?;
        let mut out = Vec::new();
        loop {
            let n = self
                .sock
                .recv(&mut &mut self.buf[..], 0)
                .map_err(sock_err("recv"))?;
            if n == 0 {
                return Err(NftDumpError::EndOfStream);
            }
            let mut off = 0;
            while off < n {
                let m = NetlinkMessage::<NetfilterMessage>::deserialize(&self.buf[off..n])
                    .map_err(|source| NftDumpError::Decode {
                        offset: off,
                        source,
                    })?;
                let len = m.header.length as usize;
                if m.header.sequence_number != seq {
                    return Err(NftDumpError::Sequence {
                        got: m.header.sequence_number,
                        want: seq,
                    });
                }
                match m.payload {
                    NetlinkPayload::Done(_) => return Ok(out),
                    NetlinkPayload::Error(e) => return Err(NftDumpError::Kernel(e)),
                    NetlinkPayload::InnerMessage(f) => {
                        out.push(f);
                        if single {
                            return Ok(out);
                        }
                    }
                    _ => {}
                }
                if len == 0 {
                    return Err(NftDumpError::ZeroLength { offset: off });
                }
                off += super::wire::nlmsg_align(len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_the_ones_nft_sends() {
        // `nft list ruleset`'s own GETTABLE, as netlink-packet-netfilter's tests captured it
        // with nlmon, with our flags (REQUEST|DUMP = 0x0301) and sequence number 1.
        assert_eq!(
            request(
                NfTablesMessage::GetTable(TableMessage { attributes: vec![] }),
                1
            ),
            vec![
                0x14, 0, 0, 0, 0x01, 0x0a, 0x01, 0x03, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
            ]
        );
        // GETGEN (type 0x0a10) is a single answer: REQUEST only.
        assert_eq!(
            request(
                NfTablesMessage::GetGen(GenMessage { attributes: vec![] }),
                2
            ),
            vec![
                0x14, 0, 0, 0, 0x10, 0x0a, 0x01, 0x00, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
            ]
        );
    }

    fn base(name: &str, policy: u32) -> NftChain {
        NftChain {
            name: name.into(),
            base: true,
            policy: Some(policy),
            flagged: false,
        }
    }

    /// What CRIU's network lock leaves through iptables-nft after a restore.
    fn lock_leftover() -> TablesSeen {
        let t = |family| NftTable {
            family,
            name: "filter".into(),
            flagged: false,
            chains: vec![base("INPUT", NF_ACCEPT), base("OUTPUT", NF_ACCEPT)],
        };
        TablesSeen {
            nftables: vec![t(2), t(10)],
            generation: (7, 7),
            ip_tables: Some(vec![]),
            ..Default::default()
        }
    }

    #[test]
    fn only_unflagged_accepting_base_chains_filter_nothing() {
        let empty = TablesSeen::default();
        assert!(empty.is_empty() && empty.filters_nothing());
        let s = lock_leftover();
        assert!(!s.is_empty() && s.filters_nothing(), "{}", s.proof_lines());
        assert!(
            s.proof_lines().contains(
                "#   table ip filter: INPUT (base, policy accept), OUTPUT (base, policy accept)"
            ),
            "{}",
            s.proof_lines()
        );
        let changed: [fn(&mut TablesSeen); 13] = [
            |s| {
                s.nftables[0].family = 1;
                s.nftables[0].name = "CRIU-x".into();
                s.nftables[0].chains[0].name = "input".into();
            },
            |s| {
                s.nftables[0].family = 1;
                s.nftables[0].name = "t".into();
                s.nftables[0].chains[0].name = "CRIU".into();
            },
            |s| s.rules = 1,
            |s| s.sets = 1,
            |s| s.objects = 1,
            |s| s.flowtables = 1,
            |s| s.orphan_chains = 1,
            |s| s.generation.1 = 8,
            |s| s.ip6_tables = Some(vec!["mangle".into()]),
            |s| s.nftables[0].flagged = true,
            |s| s.nftables[0].name = "np".into(),
            |s| s.nftables[1].chains[0].policy = Some(0),
            |s| {
                s.nftables[1].chains.push(NftChain {
                    name: "NP".into(),
                    ..Default::default()
                })
            },
        ];
        for (i, f) in changed.iter().enumerate() {
            let mut s = lock_leftover();
            f(&mut s);
            assert!(!s.filters_nothing(), "case {i}: {}", s.proof_lines());
        }
        // Outside ip/ip6, any table name and base-chain name is fine.
        let mut s = lock_leftover();
        s.nftables[0].family = 1;
        s.nftables[0].name = "np".into();
        s.nftables[0].chains[0].name = "in".into();
        assert!(s.filters_nothing(), "{}", s.proof_lines());
        assert!(s.proof_lines().contains("table inet np: in (base"));
    }
}
