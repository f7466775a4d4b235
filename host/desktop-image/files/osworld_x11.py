"""The guest display as the OSWorld-compatible server reads it (python3-xlib, Pillow).

Each call opens its own connection to $DISPLAY and closes it, so no X connection outlives a
request (nothing to hold across a checkpoint, no state shared between request threads).

screenshot_png() -> bytes: the root window (ZPixmap, 24-bit TrueColor) as a PNG with the cursor
  drawn in: XFixes GetCursorImage gives the cursor's ARGB (premultiplied) pixels, its hotspot and
  the pointer position; the image is pasted with its hotspot on the pointer.
screen_size() -> (width, height) of screen 0, in pixels.
pointer() -> (x, y) of the pointer on the root window.
window_size(cls) -> (width, height) of the first _NET_CLIENT_LIST window whose WM_CLASS
  (instance or class, case-insensitive) equals cls, or None.
Errors: Xlib's (Xlib.error.DisplayConnectionError when the display is not there, XError).
"""
import array
import io
import os

from PIL import Image
from Xlib import X, display
from Xlib.ext import xfixes  # noqa: F401  (registers the XFixes methods on Display)

DISPLAY = os.environ.get("DISPLAY", ":0")


def _open():
    return display.Display(DISPLAY)


def _cursor(d):
    """The cursor as (RGBA image, pointer x, pointer y, hot x, hot y), or None."""
    if not d.has_extension("XFIXES"):
        return None
    d.xfixes_query_version()
    c = d.xfixes_get_cursor_image(d.screen().root)
    if c.width == 0 or c.height == 0:
        return None
    rgba = bytearray(c.width * c.height * 4)
    for i, argb in enumerate(c.cursor_image):
        a = (argb >> 24) & 0xFF
        r, g, b = (argb >> 16) & 0xFF, (argb >> 8) & 0xFF, argb & 0xFF
        if a:  # premultiplied -> straight alpha
            r, g, b = min(255, r * 255 // a), min(255, g * 255 // a), min(255, b * 255 // a)
        rgba[4 * i:4 * i + 4] = bytes((r, g, b, a))
    img = Image.frombytes("RGBA", (c.width, c.height), bytes(rgba))
    return img, c.x, c.y, c.xhot, c.yhot


def screenshot_png():
    d = _open()
    try:
        s = d.screen()
        w, h = s.width_in_pixels, s.height_in_pixels
        raw = s.root.get_image(0, 0, w, h, X.ZPixmap, 0xFFFFFFFF)
        img = Image.frombytes("RGB", (w, h), raw.data, "raw", "BGRX")
        cur = _cursor(d)
    finally:
        d.close()
    if cur is not None:
        cimg, x, y, xhot, yhot = cur
        img.paste(cimg, (x - xhot, y - yhot), cimg)
    out = io.BytesIO()
    img.save(out, format="PNG", compress_level=1)
    return out.getvalue()


def screen_size():
    d = _open()
    try:
        s = d.screen()
        return s.width_in_pixels, s.height_in_pixels
    finally:
        d.close()


def pointer():
    d = _open()
    try:
        p = d.screen().root.query_pointer()
        return p.root_x, p.root_y
    finally:
        d.close()


def window_size(cls):
    d = _open()
    try:
        root = d.screen().root
        prop = root.get_full_property(d.intern_atom("_NET_CLIENT_LIST"), X.AnyPropertyType)
        for wid in (prop.value if prop else array.array("I")):
            w = d.create_resource_object("window", wid)
            try:
                names = w.get_wm_class() or ()
                if cls.lower() in (n.lower() for n in names):
                    g = w.get_geometry()
                    return g.width, g.height
            except Exception:  # a window that went away between the list and the query
                continue
        return None
    finally:
        d.close()
