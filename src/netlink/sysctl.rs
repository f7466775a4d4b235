//! Sysctls of a network namespace: which ones CRIU saves (by name, in image order), and the
//! capture of `/proc/sys/net` of the calling thread's netns.
//!
//! A `sysctl_entry` list in `netdev-`/`netns-<id>.img` has no names: entry *i* is the *i*-th
//! name of the matching table in CRIU's `criu/net.c` (CRIU v4.2): `devconfs4` for `conf4`,
//! `def_conf4`, `all_conf4` (under `net/ipv4/conf/<dev|default|all>/`), `devconfs6` for the
//! `conf6` lists (`net/ipv6/conf/...`), `unix_conf_entries` for `unix_conf` (`net/unix/`) and
//! `ipv4_sysctl_entries` for `ipv4_sysctl` (`net/ipv4/`). Everything else under
//! `/proc/sys/net` is not saved by CRIU.

use std::collections::BTreeMap;

/// Sysctl values by name, as read under `/proc/sys/net`.
pub type Sysctls = BTreeMap<String, String>;

/// `devconfs4` of `criu/net.c`: per-device IPv4 `conf` sysctls CRIU saves.
pub const DEVCONFS4: &[&str] = &[
    "accept_local",
    "accept_redirects",
    "accept_source_route",
    "arp_accept",
    "arp_announce",
    "arp_filter",
    "arp_ignore",
    "arp_notify",
    "bootp_relay",
    "disable_policy",
    "disable_xfrm",
    "force_igmp_version",
    "forwarding",
    "igmpv2_unsolicited_report_interval",
    "igmpv3_unsolicited_report_interval",
    "log_martians",
    "medium_id",
    "promote_secondaries",
    "proxy_arp",
    "proxy_arp_pvlan",
    "route_localnet",
    "rp_filter",
    "secure_redirects",
    "send_redirects",
    "shared_media",
    "src_valid_mark",
    "tag",
    "ignore_routes_with_linkdown",
    "drop_gratuitous_arp",
    "drop_unicast_in_l2_multicast",
];

/// `devconfs6` of `criu/net.c`: per-device IPv6 `conf` sysctls CRIU saves.
pub const DEVCONFS6: &[&str] = &[
    "accept_dad",
    "accept_ra",
    "accept_ra_defrtr",
    "accept_ra_from_local",
    "accept_ra_min_hop_limit",
    "accept_ra_mtu",
    "accept_ra_pinfo",
    "accept_ra_rt_info_max_plen",
    "accept_ra_rtr_pref",
    "accept_redirects",
    "accept_source_route",
    "autoconf",
    "dad_transmits",
    "disable_ipv6",
    "drop_unicast_in_l2_multicast",
    "drop_unsolicited_na",
    "force_mld_version",
    "force_tllao",
    "forwarding",
    "hop_limit",
    "ignore_routes_with_linkdown",
    "keep_addr_on_down",
    "max_addresses",
    "max_desync_factor",
    "mldv1_unsolicited_report_interval",
    "mldv2_unsolicited_report_interval",
    "mtu",
    "ndisc_notify",
    "optimistic_dad",
    "proxy_ndp",
    "regen_max_retry",
    "router_probe_interval",
    "router_solicitation_delay",
    "router_solicitation_interval",
    "router_solicitations",
    "stable_secret",
    "suppress_frag_ndisc",
    "temp_prefered_lft",
    "temp_valid_lft",
    "use_oif_addrs_only",
    "use_optimistic",
    "use_tempaddr",
];

/// `unix_conf_entries` of `criu/net.c` (under `net/unix/`).
pub const UNIX_CONF: &[&str] = &["max_dgram_qlen"];

/// `ipv4_sysctl_entries` of `criu/net.c` (under `net/ipv4/`).
pub const IPV4_SYSCTL: &[&str] = &["ping_group_range"];

/// The dotted sysctl name of a `conf` value: `net.ipv4.conf.<target>.<name>` (`proto` is
/// `"ipv4"` or `"ipv6"`, `target` a device name, `"all"` or `"default"`).
pub fn conf_key(proto: &str, target: &str, name: &str) -> String {
    format!("net.{proto}.conf.{target}.{name}")
}

/// True when CRIU (v4.2) saves the sysctl with dotted name `key` (e.g.
/// `net.ipv4.conf.veth0.forwarding`, `net.unix.max_dgram_qlen`). The key is split at every
/// `.`, so the key of a device whose name holds one (`net.ipv4.conf.eth0.100.forwarding`) is
/// not classified as saved: the captures classify by path ([`criu_saves_path`]).
pub fn criu_saves(key: &str) -> bool {
    let parts: Vec<&str> = key.split('.').collect();
    criu_saves_path(&parts)
}

/// [`criu_saves`] of a sysctl named by its path under `/proc/sys` as components (`["net",
/// "ipv4", "conf", "eth0.100", "forwarding"]`): a device whose name holds a `.` (a VLAN such
/// as `eth0.100`) is one component here, where its dotted key is ambiguous. The captures
/// classify by path.
pub fn criu_saves_path(parts: &[&str]) -> bool {
    match parts {
        ["net", "ipv4", "conf", _, name] => DEVCONFS4.contains(name),
        ["net", "ipv6", "conf", _, name] => DEVCONFS6.contains(name),
        ["net", "unix", name] => UNIX_CONF.contains(name),
        ["net", "ipv4", name] => IPV4_SYSCTL.contains(name),
        _ => false,
    }
}

/// The sysctls under `/proc/sys/net` of the calling thread's netns (`/proc/sys/net` is
/// resolved per opening task, so a thread that `setns`ed sees its netns), as dotted name →
/// value (trailing newline removed), split into `(saved by CRIU, not saved by CRIU)` by
/// [`criu_saves`]. Unreadable files (write-only ones like `route.flush`, `stable_secret`
/// when unset) are left out.
///
/// The ~600 files are opened relative to their folder's descriptor (`openat`, no path walk from
/// `/`) and read into one buffer; `net/ipv4` and `net/ipv6` are read on two more threads
/// (created here, so in this thread's netns) while this thread reads the rest.
///
/// Errors: the I/O error when `/proc/sys/net` itself cannot be opened or listed.
pub fn capture_sysctls() -> std::io::Result<(Sysctls, Sysctls)> {
    let mut covered = BTreeMap::new();
    let mut other = BTreeMap::new();
    for (key, v, saved) in walk_where(|_| true)? {
        if saved {
            covered.insert(key, v);
        } else {
            other.insert(key, v);
        }
    }
    Ok((covered, other))
}

/// The second half of [`capture_sysctls`] alone: the sysctls CRIU does not save, found by the
/// same walk, which opens no file [`criu_saves_path`] names (evidence beside a compared capture
/// that read the saved ones with [`capture_saved_sysctls`]).
///
/// Errors: as [`capture_sysctls`].
pub fn capture_unsaved_sysctls() -> std::io::Result<Sysctls> {
    Ok(walk_where(|saved| !saved)?
        .into_iter()
        .map(|(k, v, _)| (k, v))
        .collect())
}

/// The first half of [`capture_sysctls`] — the sysctls CRIU saves, the same keys and values —
/// read by name instead of by a walk: for every folder under `net/ipv4/conf` and
/// `net/ipv6/conf` (`all`, `default`, each device) the names of [`DEVCONFS4`] / [`DEVCONFS6`],
/// then [`UNIX_CONF`] under `net/unix` and [`IPV4_SYSCTL`] under `net/ipv4`; a name this kernel
/// lacks, or one that cannot be read, is left out as the walk leaves it out. About 220 files
/// in a namespace with `lo` only, where the walk opens ~580; `net/ipv6/conf` is read on a
/// second thread (created here, so in this thread's netns).
///
/// Errors: the I/O error when `/proc/sys/net` cannot be opened.
pub fn capture_saved_sysctls() -> std::io::Result<Sysctls> {
    let net = nix::fcntl::open("/proc/sys/net", DIR_FLAGS, nix::sys::stat::Mode::empty())?;
    let sub =
        |path: &str| nix::fcntl::openat(&net, path, DIR_FLAGS, nix::sys::stat::Mode::empty()).ok();
    let (conf4, conf6) = (sub("ipv4/conf"), sub("ipv6/conf"));
    let (unix, ipv4) = (sub("unix"), sub("ipv4"));
    let (mut out, v6) = std::thread::scope(|s| {
        let v6 = s.spawn(move || {
            let mut out = Vec::new();
            if let Some(fd) = conf6 {
                read_conf(fd, "net.ipv6.conf", DEVCONFS6, &mut out);
            }
            out
        });
        let mut out = Vec::new();
        if let Some(fd) = conf4 {
            read_conf(fd, "net.ipv4.conf", DEVCONFS4, &mut out);
        }
        if let Some(fd) = &unix {
            read_named(fd, "net.unix", UNIX_CONF, &mut out);
        }
        if let Some(fd) = &ipv4 {
            read_named(fd, "net.ipv4", IPV4_SYSCTL, &mut out);
        }
        (
            out,
            v6.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
        )
    });
    out.extend(v6);
    Ok(out.into_iter().collect())
}

/// Flags of every folder descriptor of the capture.
const DIR_FLAGS: nix::fcntl::OFlag = nix::fcntl::OFlag::O_RDONLY
    .union(nix::fcntl::OFlag::O_DIRECTORY)
    .union(nix::fcntl::OFlag::O_CLOEXEC);

/// Every file under `/proc/sys/net` that `keep` accepts given whether CRIU saves it
/// ([`criu_saves_path`] of its path; the others are not opened), as (dotted name, value,
/// saved); `net/ipv4` and `net/ipv6` on two more threads.
///
/// Errors: `/proc/sys/net` itself cannot be opened or listed.
fn walk_where(keep: fn(bool) -> bool) -> std::io::Result<Vec<Read>> {
    use nix::fcntl::openat;
    use nix::sys::stat::Mode;
    let net = nix::fcntl::open("/proc/sys/net", DIR_FLAGS, Mode::empty())?;
    // net/ipv4 and net/ipv6 (~250 files each) on two threads, created here so in this
    // thread's netns; this thread reads the rest (~90).
    let split: Vec<(&str, std::os::fd::OwnedFd)> = ["ipv4", "ipv6"]
        .into_iter()
        .filter_map(|n| {
            openat(&net, n, DIR_FLAGS, Mode::empty())
                .ok()
                .map(|fd| (n, fd))
        })
        .collect();
    let skip: Vec<&str> = split.iter().map(|(n, _)| *n).collect();
    let (all, parts) = std::thread::scope(|s| {
        let handles: Vec<_> = split
            .into_iter()
            .map(|(n, fd)| {
                s.spawn(move || {
                    let mut out = Vec::new();
                    let at = Folder {
                        prefix: &format!("net.{n}"),
                        path: &["net", n],
                    };
                    let _ = read_tree_skipping(fd, &at, &[], keep, &mut out);
                    out
                })
            })
            .collect();
        let mut out = Vec::new();
        let at = Folder {
            prefix: "net",
            path: &["net"],
        };
        let listed = read_tree_skipping(net, &at, &skip, keep, &mut out);
        let parts: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        (listed.map(|()| out), parts)
    });
    let mut all = all.map_err(std::io::Error::from)?;
    all.extend(parts.into_iter().flatten());
    Ok(all)
}

/// Reads the files `names` of the folder `dir` (dotted name `prefix`) into `out` as (dotted
/// name, value without the trailing newline); a file that cannot be opened or read, or is not
/// UTF-8, is left out.
fn read_named<S: AsRef<str>>(
    dir: &impl std::os::fd::AsFd,
    prefix: &str,
    names: &[S],
    out: &mut Vec<(String, String)>,
) {
    use nix::fcntl::{OFlag, openat};
    let mut buf = Vec::with_capacity(256);
    for name in names {
        let name = name.as_ref();
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
        let Ok(fd) = openat(dir, name, flags, nix::sys::stat::Mode::empty()) else {
            continue;
        };
        buf.clear();
        if read_all(&fd, &mut buf).is_err() {
            continue;
        }
        let Ok(v) = std::str::from_utf8(&buf) else {
            continue;
        };
        out.push((
            format!("{prefix}.{name}"),
            v.trim_end_matches('\n').to_string(),
        ));
    }
}

/// [`read_named`] with `names` in every sub-folder of the `conf` folder `conf` (`all`,
/// `default`, one per device); sub-folders that cannot be opened are left out.
fn read_conf(
    conf: std::os::fd::OwnedFd,
    prefix: &str,
    names: &[&str],
    out: &mut Vec<(String, String)>,
) {
    let Ok(mut d) = nix::dir::Dir::from_fd(conf) else {
        return;
    };
    let targets: Vec<String> = d
        .iter()
        .flatten()
        .filter(|e| e.file_type() == Some(nix::dir::Type::Directory))
        .filter_map(|e| e.file_name().to_str().ok().map(str::to_string))
        .filter(|n| n != "." && n != "..")
        .collect();
    for t in targets {
        if let Ok(fd) = nix::fcntl::openat(&d, t.as_str(), DIR_FLAGS, nix::sys::stat::Mode::empty())
        {
            read_named(&fd, &format!("{prefix}.{t}"), names, out);
        }
    }
}

/// Appends the whole value of the sysctl file `fd` to `buf`: `read(2)` into a 4 KiB block until
/// it returns 0 or fewer bytes than the block holds (no `statx`/`lseek` for a size hint, as
/// `File::read_to_end` makes). A short read is the whole value: `proc_sys_call_handler()` in
/// fs/proc/proc_sysctl.c formats the value in one call into a buffer of the size asked for, so
/// a sysctl is one `read(2)`, not two.
///
/// Errors: the failed `read(2)` (EINTR retried).
fn read_all(fd: &std::os::fd::OwnedFd, buf: &mut Vec<u8>) -> nix::Result<()> {
    let mut block = [0u8; 4096];
    loop {
        match nix::unistd::read(fd, &mut block) {
            Ok(0) => return Ok(()),
            Ok(n) if n < block.len() => {
                buf.extend_from_slice(&block[..n]);
                return Ok(());
            }
            Ok(n) => buf.extend_from_slice(&block[..n]),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// One sysctl read by a walk: (dotted name, value, saved by CRIU).
type Read = (String, String, bool);

/// A folder of the walk: its dotted name and its path components under `/proc/sys`.
struct Folder<'a> {
    prefix: &'a str,
    path: &'a [&'a str],
}

/// Reads every file under the folder `dir` (`at`) that `keep` accepts given whether CRIU saves
/// it ([`criu_saves_path`] of its path) into `out` as (dotted name, value without the trailing
/// newline, saved), recursing into sub-folders; the entries named in `skip` of this folder are
/// left out. Unreadable files and folders are left out.
///
/// Errors: `dir` itself cannot be listed.
fn read_tree_skipping(
    dir: std::os::fd::OwnedFd,
    at: &Folder,
    skip: &[&str],
    keep: fn(bool) -> bool,
    out: &mut Vec<Read>,
) -> nix::Result<()> {
    use nix::dir::{Dir, Type};
    use nix::fcntl::openat;
    use nix::sys::stat::Mode;
    let mut d = Dir::from_fd(dir)?;
    let mut subdirs = Vec::new();
    let mut files: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    for e in d.iter().flatten() {
        let Ok(name) = e.file_name().to_str() else {
            continue;
        };
        if name == "." || name == ".." || skip.contains(&name) {
            continue;
        }
        match e.file_type() {
            Some(Type::Directory) => subdirs.push(name.to_string()),
            Some(Type::File) => {
                let mut path = at.path.to_vec();
                path.push(name);
                let saved = criu_saves_path(&path);
                if keep(saved) {
                    files[usize::from(saved)].push(name.to_string());
                }
            }
            _ => {}
        }
    }
    for (saved, names) in [false, true].into_iter().zip(files) {
        let mut read = Vec::new();
        read_named(&d, at.prefix, &names, &mut read);
        out.extend(read.into_iter().map(|(k, v)| (k, v, saved)));
    }
    for name in subdirs {
        if let Ok(fd) = openat(&d, name.as_str(), DIR_FLAGS, Mode::empty()) {
            let mut path = at.path.to_vec();
            path.push(&name);
            let sub = Folder {
                prefix: &format!("{}.{name}", at.prefix),
                path: &path,
            };
            let _ = read_tree_skipping(fd, &sub, &[], keep, out);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain walk (`read_dir` + `read_to_string` by full path) the descriptor-relative one
    /// replaced: both must see the same names and values.
    fn reference_walk() -> BTreeMap<String, String> {
        let root = std::path::Path::new("/proc/sys");
        let mut out = BTreeMap::new();
        let mut stack = vec![root.join("net")];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = e.path();
                if e.file_type().unwrap().is_dir() {
                    stack.push(path);
                } else if let Ok(v) = std::fs::read_to_string(&path) {
                    let key = path
                        .strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .replace('/', ".");
                    out.insert(key, v.trim_end_matches('\n').to_string());
                }
            }
        }
        out
    }

    #[test]
    fn capture_sees_what_the_plain_walk_sees() {
        let (covered, other) = capture_sysctls().unwrap();
        assert!(
            covered.contains_key("net.ipv4.conf.lo.forwarding"),
            "{covered:?}"
        );
        assert!(other.contains_key("net.core.somaxconn"), "{other:?}");
        assert!(covered.keys().all(|k| criu_saves(k)));
        assert!(!other.keys().any(|k| criu_saves(k)));
        let mut both = covered;
        both.extend(other);
        assert_eq!(both, reference_walk());
    }

    #[test]
    fn saved_by_name_and_unsaved_by_walk_are_the_two_halves_of_the_capture() {
        let (covered, other) = capture_sysctls().unwrap();
        assert!(covered.len() > 100, "{covered:?}");
        assert_eq!(capture_saved_sysctls().unwrap(), covered);
        assert_eq!(capture_unsaved_sysctls().unwrap(), other);
    }

    #[test]
    fn a_device_whose_name_holds_a_dot_is_one_path_component() {
        assert!(criu_saves_path(&[
            "net",
            "ipv4",
            "conf",
            "eth0.100",
            "forwarding"
        ]));
        assert!(criu_saves_path(&[
            "net",
            "ipv6",
            "conf",
            "x.veth",
            "hop_limit"
        ]));
        assert!(!criu_saves_path(&[
            "net",
            "ipv4",
            "conf",
            "eth0.100",
            "not_a_devconf"
        ]));
        // The dotted key of such a device cannot be classified.
        assert!(!criu_saves("net.ipv4.conf.eth0.100.forwarding"));
    }

    #[test]
    fn saved_and_not_saved() {
        assert!(criu_saves("net.ipv4.conf.all.forwarding"));
        assert!(criu_saves("net.ipv6.conf.veth0.hop_limit"));
        assert!(criu_saves("net.unix.max_dgram_qlen"));
        assert!(criu_saves("net.ipv4.ping_group_range"));
        assert!(!criu_saves("net.ipv4.ip_default_ttl"));
        assert!(!criu_saves("net.ipv4.tcp_syncookies"));
        assert!(!criu_saves("net.core.somaxconn"));
        assert_eq!(DEVCONFS4.len(), 30);
        assert_eq!(DEVCONFS6.len(), 42);
    }
}
