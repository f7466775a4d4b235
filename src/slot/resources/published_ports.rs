//! A slot's published guest ports, before anything is created: `slot provision --publish
//! [HOST_ADDR:]HOST_PORT:GUEST_PORT` parsed ([`parse_publish`]), merged with the profile's
//! `[[network.publish]]` and checked ([`effective`]: each host port once, each guest port one
//! the profile serves), then every listening socket bound in the host's namespace
//! ([`bind_all`]; a taken port is refused naming the process that holds it). The holder owns
//! the sockets from then on ([`crate::ns::forward`]); the gates around them are in
//! [`crate::slot::gate::publish_gates`].

use crate::profile::{Profile, Publish, default_publish_addr, ports_list, served_ports};
use crate::slot::gate::guest_net;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::Path;

/// The form `--publish` takes, as its error messages name it.
pub const PUBLISH_FORM: &str = "[HOST_ADDR:]HOST_PORT:GUEST_PORT";

/// A bad `--publish` (exit 2, nothing created) or a host port that cannot be bound (exit 3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublishError {
    /// Not `[HOST_ADDR:]HOST_PORT:GUEST_PORT`.
    #[error(
        "--publish {given:?}: expected {PUBLISH_FORM}, e.g. --publish 127.0.0.1:8080:5000 or --publish 8080:5000"
    )]
    Malformed {
        /// The argument as given.
        given: String,
    },
    /// A port that is not 1-65535.
    #[error(
        "--publish {given:?}: {which} port {value:?} is not a port from 1 to 65535; give e.g. --publish 127.0.0.1:8080:5000"
    )]
    Port {
        /// The argument as given.
        given: String,
        /// `host` or `guest`.
        which: &'static str,
        /// The text where the port was.
        value: String,
    },
    /// A host address that is not an IP address.
    #[error(
        "--publish {given:?}: {addr:?} is not an IP address; give an IPv4 or IPv6 address (e.g. 127.0.0.1 or [::1]) or leave it out for 127.0.0.1"
    )]
    Addr {
        /// The argument as given.
        given: String,
        /// The address part.
        addr: String,
    },
    /// The same host port twice (flags, or a flag and the profile).
    #[error(
        "--publish: host port {port} is published twice ({first} and {second}); publish each host port once"
    )]
    Duplicate {
        /// The host port.
        port: u16,
        /// The first entry (`--publish A:H:G` or `profile network.publish`).
        first: String,
        /// The second.
        second: String,
    },
    /// A guest port the profile does not serve.
    #[error(
        "--publish {given}: guest port {guest_port} is not served by {what} (it serves {served}); publish a port it serves, or give a --profile whose network.guest_port or tcp/http readiness check is that port"
    )]
    NotServed {
        /// The entry as `HOST_ADDR:HOST_PORT:GUEST_PORT`.
        given: String,
        /// Its guest port.
        guest_port: u16,
        /// `profile NAME` or `the --image flags`.
        what: String,
        /// The ports it serves ([`ports_list`]).
        served: String,
    },
    /// The host port could not be bound (exit 3: the host refused).
    #[error("host port {addr} is not free: {why}; free it or publish another host port")]
    Taken {
        /// The address and port.
        addr: SocketAddr,
        /// The OS error and, for a port in use, the process that listens on it.
        why: String,
    },
}

impl PublishError {
    /// The exit class: [`crate::exit::ExitClass::HostRefused`] for [`PublishError::Taken`],
    /// usage for every other.
    pub fn exit_class(&self) -> crate::exit::ExitClass {
        match self {
            PublishError::Taken { .. } => crate::exit::ExitClass::HostRefused,
            _ => crate::exit::ExitClass::Usage,
        }
    }
}

/// A published port as `state.json` records it (`published_ports`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedPort {
    /// The host address the holder listens on.
    pub host_addr: IpAddr,
    /// The host port.
    pub host_port: u16,
    /// The guest port on 127.0.0.1 in the slot's namespace.
    pub guest_port: u16,
    /// Whether `host_addr` is a loopback address (else the guest is reachable beyond this
    /// host: a declared difference).
    pub loopback: bool,
}

impl PublishedPort {
    /// The record of `p`.
    pub fn of(p: &Publish) -> PublishedPort {
        PublishedPort {
            host_addr: p.host_addr,
            host_port: p.host_port,
            guest_port: p.guest_port,
            loopback: p.host_addr.is_loopback(),
        }
    }

    /// `HOST_ADDR:HOST_PORT` as a socket address.
    pub fn host(&self) -> SocketAddr {
        SocketAddr::new(self.host_addr, self.host_port)
    }
}

impl std::fmt::Display for PublishedPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} -> guest {}", self.host(), self.guest_port)
    }
}

fn show(p: &Publish) -> String {
    format!(
        "{}:{}",
        SocketAddr::new(p.host_addr, p.host_port),
        p.guest_port
    )
}

/// Parses `--publish [HOST_ADDR:]HOST_PORT:GUEST_PORT` (an IPv6 address in brackets, e.g.
/// `[::1]:8080:5000`). Errors: [`PublishError::Malformed`], `Port`, `Addr`.
pub fn parse_publish(s: &str) -> Result<Publish, PublishError> {
    let malformed = || PublishError::Malformed { given: s.into() };
    let (rest, guest) = s.rsplit_once(':').ok_or_else(malformed)?;
    let (addr, host) = match rest.rsplit_once(':') {
        Some((a, h)) if !rest.ends_with(']') => (Some(a), h),
        _ => (None, rest),
    };
    let port = |which: &'static str, v: &str| {
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(malformed());
        }
        v.parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| PublishError::Port {
                given: s.into(),
                which,
                value: v.into(),
            })
    };
    let host_port = port("host", host)?;
    let guest_port = port("guest", guest)?;
    let host_addr = match addr {
        None => default_publish_addr(),
        Some("") => return Err(malformed()),
        Some(a) => {
            let bare = a
                .strip_prefix('[')
                .and_then(|a| a.strip_suffix(']'))
                .unwrap_or(a);
            bare.parse().map_err(|_| PublishError::Addr {
                given: s.into(),
                addr: a.into(),
            })?
        }
    };
    Ok(Publish {
        host_addr,
        host_port,
        guest_port,
    })
}

/// The ports a slot publishes: the profile's `[[network.publish]]` (already checked when it was
/// loaded) and then each `--publish`, every host port once, every guest port one the profile
/// serves ([`served_ports`]; `what` names the profile in the error). With the `--image` flags
/// (`profile` None) the served port is the directory image's `/etc/netprobe-guest-port`
/// (`image_dir`), and a qcow2 serves none known before provision.
///
/// Errors: [`PublishError::Duplicate`], [`PublishError::NotServed`].
pub fn effective(
    profile: Option<&Profile>,
    image_dir: Option<&Path>,
    what: &str,
    cli: &[Publish],
) -> Result<Vec<PublishedPort>, PublishError> {
    let served = match profile {
        Some(p) => served_ports(p),
        None => image_dir
            .and_then(|d| std::fs::read_to_string(d.join(guest_net::GUEST_PORT_FILE)).ok())
            .and_then(|t| t.trim().parse::<u16>().ok())
            .into_iter()
            .collect(),
    };
    let from_profile = profile
        .map(|p| p.network.publish.clone())
        .unwrap_or_default();
    let mut all: Vec<(String, Publish)> = from_profile
        .iter()
        .map(|p| (format!("profile network.publish {}", show(p)), *p))
        .collect();
    for p in cli {
        if !served.contains(&p.guest_port) {
            return Err(PublishError::NotServed {
                given: show(p),
                guest_port: p.guest_port,
                what: what.into(),
                served: ports_list(&served),
            });
        }
        all.push((format!("--publish {}", show(p)), *p));
    }
    for (i, (name, p)) in all.iter().enumerate() {
        if let Some((first, _)) = all[..i].iter().find(|(_, o)| o.host_port == p.host_port) {
            return Err(PublishError::Duplicate {
                port: p.host_port,
                first: first.clone(),
                second: name.clone(),
            });
        }
    }
    Ok(all.iter().map(|(_, p)| PublishedPort::of(p)).collect())
}

/// Binds and listens on every published host port, in order (`SO_REUSEADDR`, backlog 128: the
/// standard library's). Returns the listeners (the caller hands them to the holder, then
/// closes its copies).
///
/// Errors: [`PublishError::Taken`] for the first port that cannot be bound, naming the OS error
/// and, for a port in use, the process listening on it ([`port_holders`]); the listeners bound
/// before it are closed on return.
pub fn bind_all(ports: &[PublishedPort]) -> Result<Vec<TcpListener>, PublishError> {
    ports
        .iter()
        .map(|p| {
            TcpListener::bind(p.host()).map_err(|e| {
                let who = match e.kind() {
                    std::io::ErrorKind::AddrInUse => format!(": {}", port_holders(p.host())),
                    _ => String::new(),
                };
                PublishError::Taken {
                    addr: p.host(),
                    why: format!("{e}{who}"),
                }
            })
        })
        .collect()
}

/// Who listens on `addr`'s port in netprobe's network namespace (`/proc/net/tcp{,6}`: the
/// listening sockets on that port whose address is `addr`'s or a wildcard, then the processes
/// holding each one's inode): `pid 812 (nc) listens on 127.0.0.1:25000`, or why none can be
/// named.
pub fn port_holders(addr: SocketAddr) -> String {
    use crate::proc::tcp::{TcpState, read_tables, socket_holders};
    let rows = match read_tables(Path::new("/proc/net")) {
        Ok(r) => r,
        Err(e) => return format!("no process named (/proc/net/tcp unreadable: {e})"),
    };
    let listening: Vec<_> = rows
        .iter()
        .filter(|r| r.state == TcpState::Listen && r.local.port() == addr.port())
        .filter(|r| r.local.ip() == addr.ip() || r.local.ip().is_unspecified())
        .collect();
    let mut named = Vec::new();
    for r in &listening {
        let holders = socket_holders(r.inode);
        if holders.is_empty() {
            named.push(format!(
                "socket inode {} listens on {} (no process with it open could be read)",
                r.inode, r.local
            ));
        }
        for (pid, comm) in holders {
            named.push(format!("pid {pid} ({comm}) listens on {}", r.local));
        }
    }
    match named.is_empty() {
        true => format!(
            "no listening socket on port {} is in this namespace's /proc/net/tcp or tcp6, so no process can be named",
            addr.port()
        ),
        false => named.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(a: &str, h: u16, g: u16) -> Publish {
        Publish {
            host_addr: a.parse().unwrap(),
            host_port: h,
            guest_port: g,
        }
    }

    #[test]
    fn forms_with_and_without_an_address() {
        assert_eq!(
            parse_publish("8080:5000").unwrap(),
            p("127.0.0.1", 8080, 5000)
        );
        assert_eq!(
            parse_publish("0.0.0.0:8080:5000").unwrap(),
            p("0.0.0.0", 8080, 5000)
        );
        assert_eq!(
            parse_publish("[::1]:8080:5000").unwrap(),
            p("::1", 8080, 5000)
        );
        assert_eq!(
            parse_publish("::1:8080:5000").unwrap(),
            p("::1", 8080, 5000)
        );
    }

    #[test]
    fn malformed_ports_and_addresses_are_named() {
        for bad in [
            "",
            "5000",
            ":5000",
            "8080:",
            "a:b",
            "1:2:3:x",
            "8080:5000x",
            ":8080:5000",
        ] {
            assert!(
                matches!(parse_publish(bad), Err(PublishError::Malformed { .. })),
                "{bad:?}: {:?}",
                parse_publish(bad)
            );
        }
        let e = parse_publish("0:5000").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--publish \"0:5000\": host port \"0\" is not a port from 1 to 65535; give e.g. --publish 127.0.0.1:8080:5000"
        );
        assert!(matches!(
            parse_publish("8080:65536"),
            Err(PublishError::Port { which: "guest", .. })
        ));
        assert!(matches!(
            parse_publish("localhost:8080:5000"),
            Err(PublishError::Addr { .. })
        ));
        assert_eq!(e.exit_class(), crate::exit::ExitClass::Usage);
    }

    #[test]
    fn served_ports_and_duplicates_decide() {
        let lp = crate::profile::builtin_default();
        let ok = effective(Some(&lp.profile), None, "x", &[p("127.0.0.1", 25000, 5000)]).unwrap();
        assert_eq!(ok.len(), 1);
        assert!(ok[0].loopback);
        let e = effective(
            Some(&lp.profile),
            None,
            "profile embedded-busybox",
            &[p("127.0.0.1", 25000, 6000)],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--publish 127.0.0.1:25000:6000: guest port 6000 is not served by profile embedded-busybox (it serves 5000); publish a port it serves, or give a --profile whose network.guest_port or tcp/http readiness check is that port"
        );
        let e = effective(
            Some(&lp.profile),
            None,
            "x",
            &[p("127.0.0.1", 25000, 5000), p("0.0.0.0", 25000, 5000)],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--publish: host port 25000 is published twice (--publish 127.0.0.1:25000:5000 and --publish 0.0.0.0:25000:5000); publish each host port once"
        );
        let mut prof = lp.profile.clone();
        prof.network.publish.push(p("127.0.0.1", 25000, 5000));
        assert!(matches!(
            effective(Some(&prof), None, "x", &[p("127.0.0.1", 25000, 5000)]),
            Err(PublishError::Duplicate { .. })
        ));
        assert!(matches!(
            effective(
                None,
                None,
                "the --image flags",
                &[p("127.0.0.1", 25000, 5000)]
            ),
            Err(PublishError::NotServed { .. })
        ));
    }

    #[test]
    fn a_taken_port_names_its_listener() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let e = bind_all(&[PublishedPort::of(&p("127.0.0.1", port, 5000))]).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains(&format!("pid {} (", std::process::id())) && s.contains("listens on"),
            "{s}"
        );
        assert_eq!(e.exit_class(), crate::exit::ExitClass::HostRefused);
    }
}
