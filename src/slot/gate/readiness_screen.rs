//! provision's readiness checks that wait for what the snapshot's display gates need, so that
//! `provision` then `snapshot` passes the first time (a harness runs `save_state` right after
//! `start_emulator`): `active-window` (gate `active-window`: the input gate's key reaches the
//! app), `app-drawn` (gate `app-shown`: the snapshot's `app-drawn`), `screen-quiescent` (gate
//! `screen-settled`: the snapshot's `screen-quiescent`). Each polls the guest's display every
//! [`SCREEN_SAMPLE_MS`] until its fact holds or the readiness budget is spent; a check that runs
//! out of time fails closed with the last observation (and, for the screen checks, the last
//! screen as a PNG in the verb's evidence).
//!
//! The connection reads pixels through the X socket only (no MIT-SHM): the X server is about to
//! be checkpointed by the snapshot that follows, and must never map a segment of netprobe's.

use super::display_gates::{self, socket_of};
use crate::profile::SCREEN_SAMPLE_MS;
use crate::slot::error::SlotError;
use crate::slot::gate::{GateId, Observed};
use crate::slot::record::verb_run::VerbRun;
use crate::x11::{self, Display, Rect, Screenshot, ewmh};
use std::path::Path;
use std::time::{Duration, Instant};

/// One display readiness check, as provision runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScreenCheck {
    /// The focused window's `WM_NAME` is this.
    ActiveWindow(String),
    /// The region (the profile's `display.input`) holds more than one colour.
    AppDrawn(Rect),
    /// No pixel changed for this long.
    Settled(Duration),
}

impl ScreenCheck {
    /// The gate this check records.
    pub(crate) fn gate(&self) -> GateId {
        match self {
            ScreenCheck::ActiveWindow(_) => GateId::ActiveWindow,
            ScreenCheck::AppDrawn(_) => GateId::AppShown,
            ScreenCheck::Settled(_) => GateId::ScreenSettled,
        }
    }

    /// The check as the `readiness_order` fact names it, e.g. `active-window netprobe-typing`,
    /// `app-drawn x 200 y 187, 900x240`, `screen-quiescent 2000 ms`.
    pub(crate) fn describe(&self) -> String {
        match self {
            ScreenCheck::ActiveWindow(n) => format!("active-window {n}"),
            ScreenCheck::AppDrawn(r) => format!("app-drawn {r}"),
            ScreenCheck::Settled(d) => format!("screen-quiescent {} ms", d.as_millis()),
        }
    }
}

/// What one sample saw: the fact holds (`Ok`) or not yet (`Err`), in words for the gate.
type Sample = Observed;

/// Runs `check` against display `number` of the container whose init is `pid`, polling until
/// it holds or `left` is spent; records its gate (blocking).
///
/// Errors: the failed gate (exit 1) naming the last observation, how long it waited, and the
/// last screen's PNG (screen checks) in the verb's evidence folder; a display that does not
/// answer within `left`.
pub(crate) fn wait(
    run: &mut VerbRun,
    check: &ScreenCheck,
    pid: i32,
    number: u32,
    left: Duration,
) -> Result<(), SlotError> {
    let id = check.gate();
    let t = Instant::now();
    let deadline = t + left;
    let d = Display::connect(&socket_of(pid, number), left)
        .map_err(|e| run.fail(id, format!("display :{number}: {e}")))?;
    d.disable_shm();
    let mut watch = Watch::default();
    loop {
        let (sample, shot) = watch.sample(&d, check);
        match sample {
            Ok(seen) => {
                let waited = t.elapsed().as_millis();
                return run.gate(id, Ok(format!("{seen} (waited {waited} ms)")));
            }
            Err(seen) if Instant::now() >= deadline => {
                let png = shot.map(|s| keep_png(run, id, &s)).unwrap_or_default();
                let fix = fix_of(check);
                let detail = format!(
                    "not within the readiness budget ({} ms): {seen}{png}; fix: {fix}",
                    left.as_millis()
                );
                return Err(run.fail(id, detail));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(SCREEN_SAMPLE_MS)),
        }
    }
}

/// The state a polling check keeps between samples: the screen last seen and since when.
#[derive(Default)]
struct Watch {
    last: Option<(Screenshot, Instant)>,
}

impl Watch {
    fn sample(&mut self, d: &Display, check: &ScreenCheck) -> (Sample, Option<Screenshot>) {
        match check {
            ScreenCheck::ActiveWindow(want) => (focus(d, want), None),
            ScreenCheck::AppDrawn(region) => match d.screenshot() {
                Ok(s) => (drawn(&s, *region), Some(s)),
                Err(e) => (Err(format!("screenshot failed: {e}")), None),
            },
            ScreenCheck::Settled(still) => match d.screenshot() {
                Ok(s) => (self.settled(s.clone(), *still), Some(s)),
                Err(e) => (Err(format!("screenshot failed: {e}")), None),
            },
        }
    }

    fn settled(&mut self, now: Screenshot, still: Duration) -> Sample {
        let since = match self.last.take() {
            Some((prev, since)) => match x11::diff(&prev, &now) {
                Ok(d) if d.is_equal() => since,
                Ok(d) => {
                    let changed = format!(
                        "{} pixels changed since the last screenshot (bounding box {})",
                        d.differing,
                        x11::rect_text(d.bbox)
                    );
                    self.last = Some((now, Instant::now()));
                    return Err(changed);
                }
                Err(e) => return Err(format!("screens not comparable: {e}")),
            },
            None => Instant::now(),
        };
        let for_ms = since.elapsed().as_millis();
        self.last = Some((now, since));
        if since.elapsed() >= still {
            Ok(format!(
                "no pixel changed for {for_ms} ms (at least {} ms asked, screenshots {SCREEN_SAMPLE_MS} ms apart)",
                still.as_millis()
            ))
        } else {
            Err(format!(
                "still for {for_ms} ms of the {} ms asked",
                still.as_millis()
            ))
        }
    }
}

fn focus(d: &Display, want: &str) -> Sample {
    match ewmh::active_window_name(d) {
        Some(n) if n == want => Ok(format!(
            "the window manager ({}) gives the focus to {n:?}",
            ewmh::wm_name(d).unwrap_or_else(|| "unnamed".into())
        )),
        got => Err(format!(
            "the focused window is {} (window manager: {}; windows named {want:?}: {:?})",
            got.map_or_else(|| "none or unnamed".into(), |n| format!("{n:?}")),
            ewmh::wm_name(d).unwrap_or_else(|| "none".into()),
            ewmh::windows_named(d, want)
        )),
    }
}

fn drawn(s: &Screenshot, region: Rect) -> Sample {
    match x11::region_other_pixels(s, region) {
        None => Err(format!(
            "display.input region {region} lies outside the {}x{} screen",
            s.width, s.height
        )),
        Some((0, [r, g, b])) => Err(format!(
            "display.input region {region} is one colour (#{r:02x}{g:02x}{b:02x})"
        )),
        Some((n, _)) => Ok(format!(
            "display.input region {region}: {n} pixels differ from its first pixel's colour"
        )),
    }
}

fn fix_of(check: &ScreenCheck) -> &'static str {
    match check {
        ScreenCheck::ActiveWindow(_) => {
            "check that the application starts and asks for the focus (the guest's logs), that the profile's active-window name is its WM_NAME, or raise readiness_timeout_ms"
        }
        ScreenCheck::AppDrawn(_) => {
            "check that the application's window is mapped where the profile's [display.input] region says (the PNG shows the screen), or raise readiness_timeout_ms"
        }
        ScreenCheck::Settled(_) => {
            "find what keeps changing the screen (a clock, a blinking cursor, an animation: the PNG and the bounding box show where) and stop it in the image, or raise readiness_timeout_ms"
        }
    }
}

/// Writes the last screen a failed check saw as `readiness-<gate>.png` in the verb's evidence
/// folder; returns `"; screen: FILE (sha256 …)"` or, when it could not be written, why.
fn keep_png(run: &VerbRun, id: GateId, s: &Screenshot) -> String {
    let name = format!("readiness-{}.png", id.name());
    let dir = run.ev_path(&name);
    let dir = dir.parent().unwrap_or(Path::new("."));
    match x11::write_artifact(dir, &name, s) {
        Ok(a) => format!("; last screen: {} (sha256 {})", a.file, a.sha256),
        Err(e) => format!("; last screen not written: {e}"),
    }
}

/// The display number of the slot's profile, when it has a `[display]`.
pub(crate) fn display_number(st: &crate::slot::state::SlotState) -> Option<u32> {
    display_gates::spec(st).map(|d| d.number)
}
