"""Messages for the app as a whole, posted by the pieces that are not widgets of their own."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class CrashTakesKeys(Message):
    """A rank crashed while no line was being typed elsewhere: the app gives the keys to its
    post-mortem (the first crash of a burst; the others are said in one line)."""

    rank: int
    """The rank whose post-mortem gets the keys."""


@dataclass
class CrashesSaid(Message):
    """Ranks crashed while the keys were in use (or went to another crash): the command log says
    so, one line for each way they crashed."""

    lines: tuple[str, ...]
    """The lines to show, each naming its ranks and what happened to them."""
