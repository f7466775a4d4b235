//! What the window manager says about the guest's windows (EWMH, read from the root window's
//! properties): its name (`_NET_SUPPORTING_WM_CHECK` → `_NET_WM_NAME`, e.g. `GNOME Shell`) and
//! the window it gave the focus (`_NET_ACTIVE_WINDOW` → `WM_NAME`, e.g. `netprobe-typing`).
//! Source: the Extended Window Manager Hints 1.5, "Root Window Properties".
//!
//! Each answer is an `Option`: a property that is absent, of the wrong type, or a request the
//! server refused reads as `None` ("not known"), which a gate treats as not proven.

use super::Display;
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{Atom, AtomEnum, ConnectionExt as _, Window};

/// The longest property value read, in 32-bit units (256 bytes of a name).
const NAME_LONGS: u32 = 64;

fn atom(c: &impl Connection, name: &str) -> Option<Atom> {
    c.intern_atom(false, name.as_bytes())
        .ok()?
        .reply()
        .ok()
        .map(|r| r.atom)
}

fn window_prop(d: &Display, w: Window, prop: Atom) -> Option<Window> {
    d.connection()
        .get_property(false, w, prop, AtomEnum::WINDOW, 0, 1)
        .ok()?
        .reply()
        .ok()?
        .value32()?
        .next()
        .filter(|w| *w != 0)
}

fn text_prop(d: &Display, w: Window, prop: Atom, ty: Atom) -> Option<String> {
    let v = d
        .connection()
        .get_property(false, w, prop, ty, 0, NAME_LONGS)
        .ok()?
        .reply()
        .ok()?;
    Some(String::from_utf8_lossy(&v.value).into_owned())
}

/// The window manager's name (`_NET_WM_NAME` of the `_NET_SUPPORTING_WM_CHECK` window, UTF-8),
/// e.g. `GNOME Shell`; `None` when no EWMH window manager runs or the name cannot be read.
pub fn wm_name(d: &Display) -> Option<String> {
    let c = d.connection();
    let check = atom(c, "_NET_SUPPORTING_WM_CHECK")?;
    let name = atom(c, "_NET_WM_NAME")?;
    let utf8 = atom(c, "UTF8_STRING")?;
    let w = window_prop(d, d.root(), check)?;
    text_prop(d, w, name, utf8)
}

/// The `WM_NAME` of the window the window manager says has the focus (`_NET_ACTIVE_WINDOW` on
/// the root), e.g. `netprobe-typing`; `None` when there is none or it cannot be read.
pub fn active_window_name(d: &Display) -> Option<String> {
    let active = atom(d.connection(), "_NET_ACTIVE_WINDOW")?;
    let w = window_prop(d, d.root(), active)?;
    text_prop(d, w, AtomEnum::WM_NAME.into(), AtomEnum::ANY.into())
}

/// Every window named `name` (`WM_NAME`, searched through the whole window tree) with its map
/// state, e.g. `["0x1a00003 VIEWABLE"]`: what a failed focus wait names.
pub fn windows_named(d: &Display, name: &str) -> Vec<String> {
    let c = d.connection();
    let mut found = Vec::new();
    let mut todo = vec![d.root()];
    while let Some(w) = todo.pop() {
        if let Ok(Ok(t)) = c.query_tree(w).map(|r| r.reply()) {
            todo.extend(t.children);
        }
        if text_prop(d, w, AtomEnum::WM_NAME.into(), AtomEnum::ANY.into()).as_deref() == Some(name)
        {
            let state = c
                .get_window_attributes(w)
                .ok()
                .and_then(|r| r.reply().ok())
                .map(|a| format!("{:?}", a.map_state));
            found.push(format!("{w:#x} {}", state.unwrap_or_else(|| "gone".into())));
        }
    }
    found
}
