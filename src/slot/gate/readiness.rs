//! provision's readiness checks, run in the order the profile lists them (`[[readiness]]`):
//! `x-display` → the `display-geometry` gate, `tcp` → `guest-tcp`, `http` → `guest-http`, and the
//! waits for what the snapshot's display gates need ([`super::readiness_screen`]):
//! `active-window` → `active-window`, `app-drawn` → `app-shown`, `screen-quiescent` →
//! `screen-settled`. Then
//! what every slot checked before profiles listed anything, if the profile did not list it: the
//! display's geometry (a profile with `[display]`) and the guest server's `GET /` → 200 on
//! `network.guest_port` (or `guest-http` recorded as not applicable when there is no server).
//! All checks share one deadline: the profile's `readiness_timeout_ms`, at least 20 s (the
//! built-in default's 10 s was too short for the guest server under load; see
//! [`crate::slot::profile_record::guest_check`]).
//!
//! [`plan`] is pure (unit-tested on order); [`run_checks`] runs the plan after the container is
//! proven in the holder's netns.

use super::guest_net;
use super::readiness_screen::ScreenCheck;
use crate::ns::ProcessIdentity;
use crate::profile::Readiness;
use crate::slot::error::SlotError;
use crate::slot::gate::GateId;
use crate::slot::record::verb_run::VerbRun;
use crate::slot::state::SlotState;
use crate::x11::Rect;
use std::time::{Duration, Instant};

/// One readiness check as provision runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadyCheck {
    /// `display-geometry`: the profile's display answers with its geometry and depth.
    Display,
    /// `guest-tcp`: a TCP connection to `127.0.0.1:port` inside the netns is accepted.
    Tcp(u16),
    /// `guest-http`: `GET path` on `127.0.0.1:port` inside the netns answers `status`.
    Http {
        /// The port.
        port: u16,
        /// The request path.
        path: String,
        /// The expected status.
        status: u16,
    },
    /// `guest-http` recorded as not applicable: the slot declares no guest server.
    NoGuestServer,
    /// A wait on the display (`active-window`, `app-shown`, `screen-settled`).
    Screen(ScreenCheck),
}

impl ReadyCheck {
    /// The check as the `readiness_order` fact names it: `x-display`, `tcp 5000`,
    /// `http 5000 GET /health -> 200`, `no guest server`.
    pub(crate) fn describe(&self) -> String {
        match self {
            ReadyCheck::Display => "x-display".into(),
            ReadyCheck::Tcp(p) => format!("tcp {p}"),
            ReadyCheck::Http { port, path, status } => {
                format!("http {port} GET {path} -> {status}")
            }
            ReadyCheck::NoGuestServer => "no guest server".into(),
            ReadyCheck::Screen(c) => c.describe(),
        }
    }
}

/// The checks provision runs, in order (see the module docs), and their shared time budget.
pub(crate) fn plan(st: &SlotState) -> (Vec<ReadyCheck>, Duration) {
    let mut v = Vec::new();
    let budget = match &st.profile {
        Some(p) => Duration::from_millis(
            p.profile
                .readiness_timeout_ms
                .max(crate::profile::READINESS_TIMEOUT_FLOOR_MS),
        ),
        None => Duration::from_secs(20),
    };
    if let Some(p) = &st.profile {
        for r in &p.profile.readiness {
            v.push(match r {
                Readiness::XDisplay => ReadyCheck::Display,
                Readiness::ActiveWindow { name } => {
                    ReadyCheck::Screen(ScreenCheck::ActiveWindow(name.clone()))
                }
                Readiness::AppDrawn => match p.profile.display.and_then(|d| d.input) {
                    Some(i) => ReadyCheck::Screen(ScreenCheck::AppDrawn(Rect {
                        x: i.x,
                        y: i.y,
                        width: i.width,
                        height: i.height,
                    })),
                    // The profile's validation refuses app-drawn without [display.input].
                    None => continue,
                },
                Readiness::ScreenQuiescent { still_ms } => {
                    ReadyCheck::Screen(ScreenCheck::Settled(Duration::from_millis(*still_ms)))
                }
                Readiness::Tcp { port } => ReadyCheck::Tcp(*port),
                Readiness::Http { port, path, status } => ReadyCheck::Http {
                    port: *port,
                    path: path.clone(),
                    status: *status,
                },
            });
        }
        if p.profile.display.is_some() && !v.contains(&ReadyCheck::Display) {
            v.push(ReadyCheck::Display);
        }
    }
    if !v.iter().any(|c| matches!(c, ReadyCheck::Http { .. })) {
        v.push(match crate::slot::profile_record::guest_check(st) {
            Some((port, path, status, _)) => ReadyCheck::Http { port, path, status },
            None => ReadyCheck::NoGuestServer,
        });
    }
    (v, budget)
}

/// Runs [`plan`]'s checks in order against the container whose init is `pid`, in holder `h`'s
/// netns; the first that fails ends provision (its gate names what was seen). Timings are
/// recorded as `provision-ready-<n>-<gate>`, the order as the fact `readiness_order`
/// ([`ReadyCheck::describe`]).
///
/// Errors: the failed gate ([`SlotError`], exit 1) or a display step that could not run.
pub(crate) fn run_checks(
    run: &mut VerbRun,
    st: &SlotState,
    h: &ProcessIdentity,
    pid: i32,
) -> Result<(), SlotError> {
    let (checks, budget) = plan(st);
    let deadline = Instant::now() + budget;
    run.fact(
        "readiness_order",
        checks.iter().map(ReadyCheck::describe).collect::<Vec<_>>(),
    );
    for (i, c) in checks.iter().enumerate() {
        let left = deadline.saturating_duration_since(Instant::now());
        let t = Instant::now();
        let name = match c {
            ReadyCheck::Display => {
                super::display_gates::provision_gate(run, st, pid, left)?;
                GateId::DisplayGeometry
            }
            ReadyCheck::Tcp(port) => {
                let r = guest_net::tcp_connect_in_netns(&h.netns_path(), *port, left).map(|d| {
                    format!(
                        "{d} (new connection from a thread in netns {})",
                        h.netns_inode
                    )
                });
                run.gate(GateId::GuestTcp, r)?;
                GateId::GuestTcp
            }
            ReadyCheck::Http { port, path, status } => {
                super::shared_gates::guest_http_gate(run, h, *port, path, *status, left)?;
                GateId::GuestHttp
            }
            ReadyCheck::Screen(c) => {
                let n = super::readiness_screen::display_number(st).unwrap_or(0);
                super::readiness_screen::wait(run, c, pid, n, left)?;
                c.gate()
            }
            ReadyCheck::NoGuestServer => {
                run.record(
                    GateId::GuestHttp,
                    Err(format!(
                        "not applicable: the image declares no guest server (/{} or the profile's network.guest_port)",
                        guest_net::GUEST_PORT_FILE
                    )),
                );
                GateId::GuestHttp
            }
        };
        run.took(&format!("provision-ready-{}-{}", i + 1, name.name()), t);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile;
    use crate::slot::gate::pure_checks::tests::state_with_self_holder;
    use std::path::Path;

    fn with(text: &str) -> SlotState {
        let d = tempfile::tempdir().unwrap();
        let sh = Path::new("/bin/sh");
        let mut st = state_with_self_holder(d.path(), sh, sh);
        let lp = profile::parse(text, Path::new("/p.toml"), Path::new("/")).unwrap();
        st.profile = Some(crate::slot::profile_record::record(&lp));
        st
    }

    const BASE: &str = "schema_version = 1\nname = \"t\"\nreadiness_timeout_ms = 30000\n\
        [image]\nkind = \"embedded\"\n[process]\nargs = [\"/bin/sh\"]\n[network]\nguest_port = 8080\n";
    const DISPLAY: &str = "[display]\nnumber = 0\nwidth = 10\nheight = 10\ndepth = 24\n";
    const X: &str = "[[readiness]]\nkind = \"x-display\"\n";
    const TCP: &str = "[[readiness]]\nkind = \"tcp\"\nport = 9000\n";
    const HTTP: &str =
        "[[readiness]]\nkind = \"http\"\nport = 8080\npath = \"/health\"\nstatus = 204\n";

    fn http(port: u16, path: &str, status: u16) -> ReadyCheck {
        ReadyCheck::Http {
            port,
            path: path.into(),
            status,
        }
    }

    #[test]
    fn checks_run_in_the_profiles_order() {
        let (p, budget) = plan(&with(&format!("{BASE}{DISPLAY}{X}{TCP}{HTTP}")));
        assert_eq!(
            p,
            [
                ReadyCheck::Display,
                ReadyCheck::Tcp(9000),
                http(8080, "/health", 204)
            ]
        );
        assert_eq!(budget, Duration::from_secs(30));
        let (p, _) = plan(&with(&format!("{BASE}{DISPLAY}{HTTP}{TCP}{X}")));
        assert_eq!(
            p,
            [
                http(8080, "/health", 204),
                ReadyCheck::Tcp(9000),
                ReadyCheck::Display
            ]
        );
    }

    #[test]
    fn unlisted_display_and_guest_server_are_still_checked_after_the_listed_ones() {
        let (p, _) = plan(&with(&format!("{BASE}{DISPLAY}{TCP}")));
        assert_eq!(
            p,
            [
                ReadyCheck::Tcp(9000),
                ReadyCheck::Display,
                http(8080, "/", 200)
            ]
        );
        let (p, _) = plan(&with(&BASE.replace("[network]\nguest_port = 8080\n", "")));
        assert_eq!(p, [ReadyCheck::NoGuestServer]);
    }

    #[test]
    fn builtin_default_is_tcp_then_get_slash_within_at_least_20_s() {
        let d = tempfile::tempdir().unwrap();
        let sh = Path::new("/bin/sh");
        let mut st = state_with_self_holder(d.path(), sh, sh);
        st.profile = Some(crate::slot::profile_record::record(
            &profile::builtin_default(),
        ));
        let (p, budget) = plan(&st);
        assert_eq!(p, [ReadyCheck::Tcp(5000), http(5000, "/", 200)]);
        assert_eq!(budget, Duration::from_secs(20));
        let named: Vec<String> = p.iter().map(ReadyCheck::describe).collect();
        assert_eq!(named, ["tcp 5000", "http 5000 GET / -> 200"]);
    }

    #[test]
    fn display_waits_follow_the_profiles_order_with_the_input_region() {
        const INPUT: &str = "[display.input]\nkey = \"q\"\nx = 1\ny = 2\nwidth = 3\nheight = 4\n";
        const WAITS: &str = "[[readiness]]\nkind = \"active-window\"\nname = \"app\"\n\
            [[readiness]]\nkind = \"app-drawn\"\n\
            [[readiness]]\nkind = \"screen-quiescent\"\nstill_ms = 1500\n";
        let (p, _) = plan(&with(&format!("{BASE}{DISPLAY}{INPUT}{X}{HTTP}{WAITS}")));
        let region = Rect {
            x: 1,
            y: 2,
            width: 3,
            height: 4,
        };
        assert_eq!(
            p,
            [
                ReadyCheck::Display,
                http(8080, "/health", 204),
                ReadyCheck::Screen(ScreenCheck::ActiveWindow("app".into())),
                ReadyCheck::Screen(ScreenCheck::AppDrawn(region)),
                ReadyCheck::Screen(ScreenCheck::Settled(Duration::from_millis(1500))),
            ]
        );
        let named: Vec<String> = p.iter().map(ReadyCheck::describe).collect();
        assert_eq!(
            named[2..],
            [
                "active-window app",
                "app-drawn x 1 y 2, 3x4",
                "screen-quiescent 1500 ms"
            ]
        );
    }
}
