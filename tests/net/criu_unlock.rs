//! Removing CRIU's network lock (`netprobe::netlink::criu_unlock::unlock_here`) from a fresh
//! network namespace where CRIU's exact lock was planted twice (a dump's and a killed restore's:
//! two jumps per chain) by iptables and ip6tables, and once by the nftables method, next to rules
//! that are not CRIU's: every part of the lock goes, the other rules stay, and a namespace
//! without a lock is left alone (nothing is run). Root, real iptables-nft and nft.
use netprobe::netlink::criu_unlock::{IPTABLES_LOCK, unlock_here};
use netprobe::netlink::netfilter::{capture_with_tools_here, criu_lock};
use std::io::Write;
use std::process::{Command, Stdio};

fn feed(program: &str, args: &[&str], input: &str) {
    let mut c = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    assert!(
        c.wait().unwrap().success(),
        "{program} {args:?} <<< {input}"
    );
}

/// CRIU's nftables lock (`nftables_lock_network_internal`, `SOCCR_MARK` 0xC114) as table `t`.
fn nft_lock(t: &str) -> String {
    format!(
        "create table {t}\n\
         add chain {t} output {{ type filter hook output priority 0; policy drop; }}\n\
         add rule {t} output meta mark 0xC114 accept\n\
         add chain {t} input {{ type filter hook input priority 0; policy drop; }}\n\
         add rule {t} input meta mark 0xC114 accept\n"
    )
}

#[test]
fn criu_lock_planted_twice_is_removed_and_other_rules_stay() {
    let _baton = crate::common::baton(module_path!());
    crate::common::require_root();
    netprobe::ns::run_in_fresh_netns(|| {
        // Not CRIU's: must survive.
        feed(
            "iptables-restore",
            &["-w", "--noflush"],
            "*filter\n-A INPUT -s 10.9.8.7/32 -j ACCEPT\nCOMMIT\n",
        );
        feed(
            "nft",
            &["-f", "-"],
            "add table inet keep\nadd chain inet keep c\n",
        );
        for _ in 0..2 {
            feed("iptables-restore", &["-w", "--noflush"], IPTABLES_LOCK);
            feed("ip6tables-restore", &["-w", "--noflush"], IPTABLES_LOCK);
        }
        feed("nft", &["-f", "-"], &nft_lock("inet CRIU-4242"));
        let (before, raw) = capture_with_tools_here().unwrap();
        assert_eq!(
            raw.iptables.matches("-j CRIU").count(),
            4,
            "{}",
            raw.iptables
        );
        let lock = criu_lock(&before);
        for part in [
            "iptables: chain CRIU in table filter",
            "ip6tables: chain CRIU in table filter",
            "nftables: table inet CRIU-4242",
        ] {
            assert!(
                lock.iter().any(|l| l == part),
                "{part} not planted: {lock:?}"
            );
        }

        let u = unlock_here().unwrap_or_else(|e| panic!("unlock: {e}"));
        assert_eq!(u.found, lock);
        assert!(
            u.commands.iter().any(|c| c.contains("-X CRIU")),
            "{:?}",
            u.commands
        );
        assert!(u.summary().starts_with("removed "), "{}", u.summary());
        let (after, raw) = capture_with_tools_here().unwrap();
        assert!(criu_lock(&after).is_empty(), "{after:?}");
        assert!(!raw.iptables.contains("CRIU") && !raw.ip6tables.contains("CRIU"));
        assert!(!raw.nftables.contains("CRIU"), "{}", raw.nftables);
        assert!(raw.iptables.contains("-A INPUT -s 10.9.8.7/32 -j ACCEPT"));
        assert!(raw.nftables.contains("table inet keep"), "{}", raw.nftables);

        // Nothing found: nothing run.
        let again = unlock_here().unwrap();
        assert!(
            again.found.is_empty() && again.commands.is_empty(),
            "{again:?}"
        );
        assert!(again.summary().starts_with("none found"));
    })
    .unwrap();
}
