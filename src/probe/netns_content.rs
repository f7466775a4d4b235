//! What the probe's network namespace holds before the checkpoint: `lo` only (the default)
//! or `rich` — devices, addresses, routes, rules, sysctls and firewall rules like a real
//! container's (`netprobe run --netns rich`).

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The content put into the probe's netns before the checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum NetnsContent {
    /// `lo` up with 127.0.0.1/8 only (the ladder's historic probe; cheapest, and what the
    /// verdict table of docs/ARCHITECTURE.md was established with).
    #[default]
    Lo,
    /// A veth pair, IPv4/IPv6 addresses, routes in `main` and table 100, a policy rule,
    /// non-default sysctls, an iptables rule and an nftables table (the script `RICH_SCRIPT`).
    Rich,
}

impl NetnsContent {
    /// `"lo"` or `"rich"`.
    pub fn as_str(self) -> &'static str {
        match self {
            NetnsContent::Lo => "lo",
            NetnsContent::Rich => "rich",
        }
    }
}

/// The `rich` namespace content: a shell script for `/bin/sh -e`, run inside the netns (it
/// assumes nothing but `lo`). Needs `ip` (iproute2), `sysctl`, `iptables` and `nft`.
///
/// Sysctls set, CRIU v4.2 saves them (`criu/net.c` `devconfs4`/`devconfs6`, all/default
/// conf): `net.ipv4.conf.np0.forwarding=1`, `net.ipv6.conf.np0.hop_limit=33`,
/// `net.ipv4.conf.all.log_martians=1`, `net.ipv4.conf.default.arp_ignore=2`,
/// `net.ipv6.conf.default.hop_limit=55`. Sysctls set that CRIU does **not** save:
/// [`RICH_UNCOVERED_SYSCTLS`].
pub const RICH_SCRIPT: &str = "\
ip link set lo up
ip link add np0 address 02:00:00:00:0e:01 mtu 1789 type veth peer name np1 address 02:00:00:00:0e:02 mtu 1789
ip link set np0 up
ip link set np1 up
ip addr add 10.214.0.1/24 dev np0
ip -6 addr add fd14:214::1/64 dev np0 nodad
ip route add 10.215.0.0/24 dev np0
ip route add 10.216.0.0/24 dev np0 table 100
ip rule add from 10.214.0.0/24 table 100 pref 1000
sysctl -qw net.ipv4.conf.np0.forwarding=1 net.ipv6.conf.np0.hop_limit=33
sysctl -qw net.ipv4.conf.all.log_martians=1 net.ipv4.conf.default.arp_ignore=2 net.ipv6.conf.default.hop_limit=55
sysctl -qw net.ipv4.ip_default_ttl=77 net.ipv4.tcp_syncookies=0
iptables -A INPUT -s 10.217.0.0/24 -j ACCEPT
nft add table inet np14
nft add chain inet np14 in14 '{ type filter hook input priority 0; policy accept; }'
nft add rule inet np14 in14 tcp dport 4242 accept
";

/// Sysctls [`RICH_SCRIPT`] sets to a non-default value that CRIU v4.2 does not save (not in
/// its `devconfs4`/`devconfs6`/`unix_conf_entries`/`ipv4_sysctl_entries`).
pub const RICH_UNCOVERED_SYSCTLS: &[&str] = &["net.ipv4.ip_default_ttl", "net.ipv4.tcp_syncookies"];

/// Runs `program args` inside the netns at `netns` (the child `setns`es between fork and
/// exec, like `nsenter -n`), feeding `stdin`, and returns its output.
///
/// Errors: the netns cannot be opened, or the program cannot be spawned.
pub fn run_in(netns: &Path, program: &str, args: &[&str], stdin: &[u8]) -> std::io::Result<Output> {
    let ns = std::fs::File::open(netns)?;
    let fd = ns.as_raw_fd();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec the closure only calls setns(2) (async-signal-safe) on a
    // descriptor this process keeps open until the spawn returns.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    drop(ns);
    if let Some(mut s) = child.stdin.take() {
        let _ = s.write_all(stdin);
    }
    child.wait_with_output()
}

/// Why `--netns rich` content could not be put into a netns ([`apply`]).
#[derive(Debug, thiserror::Error)]
pub enum NetnsContentError {
    /// `/bin/sh` could not be started in the netns.
    #[error("netns content rich: cannot run /bin/sh: {0}")]
    Spawn(#[source] std::io::Error),
    /// The script exited unsuccessfully.
    #[error("netns content rich: the script failed ({status}): {stderr}")]
    Script {
        /// Its exit status.
        status: std::process::ExitStatus,
        /// Its stderr, trimmed.
        stderr: String,
    },
}

/// Puts `content` into the netns at `netns` (nothing for [`NetnsContent::Lo`]).
///
/// Errors: [`NetnsContentError`], naming the step when the script fails (its stderr) or cannot
/// start.
pub fn apply(netns: &Path, content: NetnsContent) -> Result<(), NetnsContentError> {
    if content == NetnsContent::Lo {
        return Ok(());
    }
    let o = run_in(netns, "/bin/sh", &["-e", "-s"], RICH_SCRIPT.as_bytes())
        .map_err(NetnsContentError::Spawn)?;
    if !o.status.success() {
        return Err(NetnsContentError::Script {
            status: o.status,
            stderr: String::from_utf8_lossy(&o.stderr).trim().to_string(),
        });
    }
    Ok(())
}
