#!/usr/bin/python3
"""netprobe's typing app: one fixed-size GTK 3 window that shows every key typed into it.
(typing_app.py, not typing.py: a typing.py beside supervisor.py would shadow the standard
library's typing module for every script in /opt/netprobe.)

Title and WM_CLASS "netprobe-typing", 900x240 asked at +200+150 (the window manager adds its
frame), white, one label "typed: " + the keys received (the character, or "<keysym name>" for a
key without a printable one; the last 60 shown) in DejaVu Sans Mono 28, left-aligned, 20 px
from the edges, wrapped at 860 px. Deterministic by construction: a label has no cursor, nothing
blinks or animates, no clock; the same keys give the same pixels.

It asks for the input focus when its window is mapped, and again every 250 ms until it has had
it once (a window manager may map it before it accepts focus requests).

GTK 3 rather than Tk: GTK 3 registers with the AT-SPI accessibility bus (atk-bridge), so an agent
reading the desktop's accessibility tree (the guest server's /accessibility) finds the window,
its label and the label's text; Tk 8.6 has no AT-SPI support and never appears there.
"""
import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
from gi.repository import Gdk, GLib, Gtk  # noqa: E402

TICK_MS = 250
NAME = "netprobe-typing"
CSS = b"""
window, label { background-color: #ffffff; color: #000000; }
label { font-family: "DejaVu Sans Mono"; font-size: 28pt; }
"""


class Typing:
    def __init__(self):
        GLib.set_prgname(NAME)
        Gdk.set_program_class(NAME)
        provider = Gtk.CssProvider()
        provider.load_from_data(CSS)
        Gtk.StyleContext.add_provider_for_screen(
            Gdk.Screen.get_default(), provider, Gtk.STYLE_PROVIDER_PRIORITY_USER)
        self.typed = []
        self.focused_once = False
        w = self.window = Gtk.Window(title=NAME)
        w.set_default_size(900, 240)
        w.set_size_request(900, 240)
        w.set_resizable(False)
        w.move(200, 150)
        self.label = Gtk.Label(label="typed: ", xalign=0.0, yalign=0.5)
        self.label.set_line_wrap(True)
        self.label.set_max_width_chars(1)  # the width comes from the window, not the text
        self.label.set_size_request(860, -1)
        box = Gtk.Box()
        box.set_border_width(20)
        box.pack_start(self.label, True, True, 0)
        w.add(box)
        w.connect("key-press-event", self.on_key)
        w.connect("focus-in-event", self.on_focus)
        w.connect("map-event", lambda *_: self.ask_focus())
        w.connect("destroy", Gtk.main_quit)
        GLib.timeout_add(TICK_MS, self.tick)
        w.show_all()

    def on_key(self, _w, event):
        ch = chr(Gdk.keyval_to_unicode(event.keyval) or 0)
        key = ch if ch != "\0" and ch.isprintable() else "<%s>" % Gdk.keyval_name(event.keyval)
        self.typed.append(key)
        self.label.set_text("typed: " + "".join(self.typed)[-60:])
        return True

    def on_focus(self, *_):
        self.focused_once = True
        return False

    def ask_focus(self):
        gw = self.window.get_window()
        if not self.focused_once and gw is not None and self.window.get_mapped():
            self.window.present_with_time(Gdk.CURRENT_TIME)
            gw.focus(Gdk.CURRENT_TIME)
        return False

    def tick(self):
        self.ask_focus()
        return not self.focused_once  # no timer left once it has had the focus


if __name__ == "__main__":
    Typing()
    Gtk.main()
