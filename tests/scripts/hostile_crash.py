"""Prints and raises text full of escape sequences: OSC 52 (clipboard), OSC 0 (title), SGR, C1."""

EVIL = "\x1b]52;c;ZXZpbA==\x07 \x1b]0;owned\x07 \x1b[31mred \x9b2J \x9d0;c1title\x9c [/] [bold]x[@click=quit]"
print("output:", EVIL)
breakpoint()
raise RuntimeError(EVIL)
