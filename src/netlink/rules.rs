//! Policy routing rules (`RTM_NEWRULE`, `ip rule`): one [`RuleState`] per rule, `inet` and
//! `inet6`. Shared by the live capture ([`super::state`]) and the decoder of CRIU's
//! `rule-<id>.img` (`ip rule save` output).

use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};
use serde::{Deserialize, Serialize};

use super::state::family_name;

/// One policy rule, as `ip rule` shows it, without counters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RuleState {
    /// `"inet"` or `"inet6"`.
    pub family: String,
    /// `FRA_PRIORITY` (the rule's preference); 0 when absent.
    pub priority: u32,
    /// `FRA_SRC` as `"addr/len"`, or `"all"`.
    pub src: String,
    /// `FRA_DST` as `"addr/len"`, or `"all"`.
    pub dst: String,
    /// `FRA_IIFNAME`.
    pub iif: Option<String>,
    /// `FRA_OIFNAME`.
    pub oif: Option<String>,
    /// `FRA_FWMARK`.
    pub fwmark: Option<u32>,
    /// `FRA_TABLE` when present, else the header's table (254 main, 255 local, 253 default).
    pub table: u32,
    /// The action by iproute2 name: `"lookup"`, `"goto"`, `"nop"`, `"blackhole"`,
    /// `"unreachable"`, `"prohibit"`, or the number.
    pub action: String,
}

fn action_name(a: RuleAction) -> String {
    match a {
        RuleAction::ToTable => "lookup".into(),
        RuleAction::Goto => "goto".into(),
        RuleAction::Nop => "nop".into(),
        RuleAction::Blackhole => "blackhole".into(),
        RuleAction::Unreachable => "unreachable".into(),
        RuleAction::Prohibit => "prohibit".into(),
        other => u8::from(other).to_string(),
    }
}

/// The [`RuleState`] of one parsed `RTM_NEWRULE` payload; `None` for a family other than
/// `inet`/`inet6` (the live capture skips it, e.g. an ipmr rule of its `AF_UNSPEC` dump; the
/// decoder of `rule-<id>.img` refuses it).
pub fn rule_state_from(msg: &RuleMessage) -> Option<RuleState> {
    let h = &msg.header;
    let family = family_name(u8::from(h.family))?;
    let mut r = RuleState {
        family: family.to_string(),
        priority: 0,
        src: "all".into(),
        dst: "all".into(),
        iif: None,
        oif: None,
        fwmark: None,
        table: u32::from(h.table),
        action: action_name(h.action),
    };
    for a in &msg.attributes {
        match a {
            RuleAttribute::Priority(p) => r.priority = *p,
            RuleAttribute::Source(ip) => r.src = format!("{ip}/{}", h.src_len),
            RuleAttribute::Destination(ip) => r.dst = format!("{ip}/{}", h.dst_len),
            RuleAttribute::Iifname(n) => r.iif = Some(n.clone()),
            RuleAttribute::Oifname(n) => r.oif = Some(n.clone()),
            RuleAttribute::FwMark(m) => r.fwmark = Some(*m),
            RuleAttribute::Table(t) => r.table = *t,
            _ => {}
        }
    }
    Some(r)
}
