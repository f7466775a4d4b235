#!/usr/bin/python3
"""The AT-SPI accessibility tree of the guest desktop as OSWorld's XML (pyatspi, lxml).

Run by osworld_server.py in a child process per request (bounded by its timeout, so a hung
AT-SPI call cannot hold a server thread, and the server keeps no a11y connection of its own):
  osworld_a11y.py tree      -> stdout: <desktop-frame ...> with one element per application
  osworld_a11y.py terminal  -> stdout: JSON string or null: the text of the focused terminal of an
                               active gnome-terminal-server frame (OSWorld's /terminal)
Element shape (OSWorld's Ubuntu map): the tag is the role name with spaces as '-', attribute
`name`, `st:<state>`="true" per state, `attr:<name>` per object attribute, `cp:screencoord` and
`cp:size` ("(x, y)", "(w, h)") when visible and showing, `val:value|min|max|step`,
`act:<action>_desc|_kb`, `image`/`selection`="true", the text as element text; depth at most
50, at most 1024 children per node. The a11y bus is found as libatspi finds it
(AT_SPI_BUS_ADDRESS, the AT_SPI_BUS property on the root window of $DISPLAY, the session bus).
Exit 1 with the reason on stderr when the registry cannot be read.
"""
import json
import sys

import lxml.etree
import pyatspi

BASE = "https://accessibility.ubuntu.example.org/ns/"
NS = {k: BASE + v for k, v in (
    ("st", "state"), ("attr", "attributes"), ("cp", "component"), ("doc", "document"),
    ("docattr", "document/attributes"), ("txt", "text"), ("val", "value"), ("act", "action"))}
MAX_DEPTH = 50
MAX_WIDTH = 1024


def q(ns, name):
    return "{%s}%s" % (NS[ns], name)


def _states(node, attrs):
    for st in node.getState().get_states():
        name = pyatspi.StateType._enum_lookup[st].split("_", 1)[1].lower()
        if name:
            attrs[q("st", name)] = "true"


def _interfaces(node, attrs):
    """Component extents, image, selection, value and actions; the node's text."""
    if attrs.get(q("st", "visible")) == "true" and attrs.get(q("st", "showing")) == "true":
        try:
            x, y, w, h = node.queryComponent().getExtents(pyatspi.XY_SCREEN)
            attrs[q("cp", "screencoord")] = str((x, y))
            attrs[q("cp", "size")] = str((w, h))
        except NotImplementedError:
            pass
    for flag, probe in (("image", node.queryImage), ("selection", node.querySelection)):
        try:
            probe()
            attrs[flag] = "true"
        except NotImplementedError:
            pass
    try:
        v = node.queryValue()
        for key, get in (("value", lambda: v.currentValue), ("min", lambda: v.minimumValue),
                         ("max", lambda: v.maximumValue), ("step", lambda: v.minimumIncrement)):
            try:
                attrs[q("val", key)] = str(get())
            except Exception:
                pass
    except NotImplementedError:
        pass
    try:
        a = node.queryAction()
        for i in range(a.nActions):
            n = a.getName(i).replace(" ", "-")
            attrs[q("act", n + "_desc")] = a.getDescription(i)
            attrs[q("act", n + "_kb")] = a.getKeyBinding(i)
    except NotImplementedError:
        pass
    try:
        t = node.queryText()
        return t.getText(0, t.characterCount).replace("\ufffc", "").replace("\ufffd", "")
    except NotImplementedError:
        return ""


def element(node, depth):
    attrs = {"name": node.name or ""}
    _states(node, attrs)
    for k, v in (node.get_attributes() or {}).items():
        if k:
            attrs[q("attr", k)] = v
    text = _interfaces(node, attrs)
    tag = (node.getRoleName().strip() or "unknown").replace(" ", "-")
    el = lxml.etree.Element(tag, attrib=attrs, nsmap=NS)
    if text:
        el.text = text
    if depth < MAX_DEPTH:
        try:
            for i, child in enumerate(node):
                if i == MAX_WIDTH:
                    break
                el.append(element(child, depth + 1))
        except Exception as e:  # a child that went away while walking: keep what was read
            print("osworld_a11y: children of %r: %s" % (attrs["name"], e), file=sys.stderr)
    return el


def tree():
    root = lxml.etree.Element("desktop-frame", nsmap=NS)
    for app in pyatspi.Registry.getDesktop(0):
        if app is not None:
            root.append(element(app, 1))
    return lxml.etree.tostring(root, encoding="unicode")


def terminal():
    """The focused terminal's text of an active gnome-terminal-server frame, or None."""
    desktop = pyatspi.Registry.getDesktop(0)
    for app in desktop:
        if app is None or app.getRoleName() != "application" or app.name != "gnome-terminal-server":
            continue
        for frame in app:
            if frame.getRoleName() == "frame" and frame.getState().contains(pyatspi.STATE_ACTIVE):
                xml = element(frame, 1)
                found = xml.xpath('.//terminal[@st:focused="true"]', namespaces=NS)
                return found[0].text.rstrip() if len(found) == 1 and found[0].text else None
    return None


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "tree"
    if mode == "tree":
        sys.stdout.write(tree())
    elif mode == "terminal":
        sys.stdout.write(json.dumps(terminal()))
    else:
        print("usage: osworld_a11y.py tree|terminal", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
