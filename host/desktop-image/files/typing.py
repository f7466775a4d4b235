#!/usr/bin/python3
"""netprobe's typing app: one fixed-size window that shows every key typed into it.

Deterministic by construction: no cursor blink, no clock, no animation; the label text is
"typed: " followed by the keysym names received (KeyPress), so the same keys give the same
pixels. Placed at a fixed position; asks the window manager for focus at start.
"""
import tkinter as tk

root = tk.Tk(className="netprobe-typing")
root.title("netprobe-typing")
root.geometry("900x240+200+150")
root.configure(background="#ffffff")
label = tk.Label(root, text="typed: ", font=("DejaVu Sans Mono", 28), anchor="w",
                 justify="left", wraplength=860, background="#ffffff", foreground="#000000")
label.pack(fill="both", expand=True, padx=20, pady=20)
typed = []


def on_key(event):
    typed.append(event.char if event.char and event.char.isprintable() else "<%s>" % event.keysym)
    label.configure(text="typed: " + "".join(typed)[-60:])


root.bind("<KeyPress>", on_key)
root.after(300, root.focus_force)
root.mainloop()
