#!/usr/bin/python3
"""netprobe's typing app: one fixed-size window that shows every key typed into it.

Deterministic by construction: no cursor blink, no clock, no animation; the label text is
"typed: " followed by the keysym names received (KeyPress), so the same keys give the same
pixels. Placed at a fixed position; asks for the input focus once its window is mapped (and
again on each tick until it has had it once).

A tick every 250 ms that draws nothing keeps Tcl's event loop from waiting without a bound: at
start-up under load the app was seen stalled with its window unmapped (the main thread waiting
on a futex, Tcl's notifier thread in pselect on the X socket) until some X event reached it.
Each tick returns to the loop, which flushes the X connection and reads what is queued.
"""
import tkinter as tk

TICK_MS = 250

root = tk.Tk(className="netprobe-typing")
root.title("netprobe-typing")
root.geometry("900x240+200+150")
root.configure(background="#ffffff")
label = tk.Label(root, text="typed: ", font=("DejaVu Sans Mono", 28), anchor="w",
                 justify="left", wraplength=860, background="#ffffff", foreground="#000000")
label.pack(fill="both", expand=True, padx=20, pady=20)
typed = []
focused_once = False


def on_key(event):
    typed.append(event.char if event.char and event.char.isprintable() else "<%s>" % event.keysym)
    label.configure(text="typed: " + "".join(typed)[-60:])


def on_focus(_event):
    global focused_once
    focused_once = True


def ask_focus():
    if not focused_once and root.winfo_viewable():
        root.focus_force()


def tick():
    ask_focus()
    root.after(TICK_MS, tick)


root.bind("<KeyPress>", on_key)
root.bind("<FocusIn>", on_focus)
root.bind("<Map>", lambda _e: ask_focus())
root.after(300, root.focus_force)
root.after(TICK_MS, tick)
root.mainloop()
