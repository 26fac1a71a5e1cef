"""`PaneKeys`: keys typed into a rank's pane reach a readline prompt, not a plain one.

The ranks ddptui starts read the commands it sends as plain lines (a lighter step: see
`ddptui.rank.line_input`). A person typing wants readline's history, completion and editing
keys, so the first key typed at a prompt asks the rank for readline (`edit`) and is held, with
any that follow, until the rank answers: the terminal is then readline's, and the keys land in
its line instead of being echoed by the terminal's line discipline.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from ddptui.core.model.text import terminal_lines
from ddptui.core.session.rank import Rank
from ddptui.core.transport.interface import RequestError
from ddptui.rank.asks import Edit

EDIT_TIMEOUT = 1.5
"""Seconds held keys wait for the rank's answer before they are typed anyway."""

CLEAR_LINE = b"\x05\x15"
"""End of line, then kill the line: empties a half-typed line for readline and for a terminal's
own line editing alike (to the latter ^E is a character, which the ^U erases with the rest)."""

_LINE_ENDS = (b"\r", b"\n", b"\x15", b"\x03")
"""Keys after which nothing typed before them is left in the line: Enter, ^U, ^C."""


class PaneKeys:
    """Types a pane's keys into its rank's terminal, asking for readline first where it pays."""

    def __init__(self, ask: bool, spawn: Callable[[Coroutine[Any, Any, None]], None]) -> None:
        """`ask`: the ranks read plain lines until asked (ddptui started them); `spawn` runs a task."""
        self._ask = ask
        self._spawn = spawn
        self._held: dict[int, list[bytes]] = {}
        """Keys per rank waiting for its answer to `edit`."""
        self._granted: dict[int, int] = {}
        """Ranks whose open prompt reads through readline: the `paused` count it was granted at."""
        self._typed: dict[int, bytes] = {}
        """Keys typed into each rank's pane since its last Enter: a line a broadcast would run into."""

    def send(self, rank: Rank, data: bytes) -> None:
        """Type `data` into the rank's terminal, after asking for readline if its prompt reads plainly."""
        self._record(rank.index, data)  # held or typed: either is in the line a broadcast would join
        held = self._held.get(rank.index)
        if held is not None:
            held.append(data)
        elif self._needs_edit(rank):
            self._held[rank.index] = [data]
            self._spawn(self._edit_then_type(rank))
        else:
            self._type(rank, data)

    def abandon(self, index: int) -> str | None:
        """Forget the keys typed into a rank's pane since its last Enter (held ones are not typed);
        what they read as, or None when there were none."""
        self._held.pop(index, None)
        typed = self._typed.pop(index, None)
        if typed is None:
            return None
        return " ".join(terminal_lines(typed.replace(b"\x7f", b"\b")))

    @property
    def typing(self) -> bool:
        """True when some pane holds keys typed since its last Enter."""
        return bool(self._typed)

    def _needs_edit(self, rank: Rank) -> bool:
        """True at a prompt that reads plain lines and was not yet asked for readline."""
        return self._ask and rank.state.at_prompt and self._granted.get(rank.index) != rank.paused_count

    async def _edit_then_type(self, rank: Rank) -> None:
        """Ask the rank for readline, then type the held keys (typed anyway if it cannot answer)."""
        count = rank.paused_count
        try:
            await rank.transport.request(Edit(), EDIT_TIMEOUT)
            self._granted[rank.index] = count
        except RequestError as exc:
            if exc.by_rank:  # it answered: asking again at the next key would not change that
                self._granted[rank.index] = count
        finally:
            for data in self._held.pop(rank.index, []):
                self._type(rank, data)

    def _type(self, rank: Rank, data: bytes) -> None:
        """Write keys; Enter at the rank's pdb prompt runs a command, and the rank is running.

        (Ranks send no `running` event; a command that leaves the prompt open says `paused` again,
        and reads plainly again unless asked.)
        """
        enter = b"\r" in data or b"\n" in data
        if enter:
            rank.transport.catch_up()  # the `paused` that came before the prompt on screen, first
            self._granted.pop(rank.index, None)
        entered = enter and rank.state.at_prompt and rank.typing_at_prompt()
        rank.write(data)
        if entered:
            rank.resumed()

    def _record(self, index: int, data: bytes) -> None:
        """Keep what is typed since the line last ended (see `abandon`)."""
        line = line_left(self._typed.get(index, b""), data)
        if line:
            self._typed[index] = line
        else:
            self._typed.pop(index, None)


def line_left(typed: bytes, data: bytes) -> bytes:
    """The keys of a line left unfinished once `data` is typed after `typed` (empty after Enter)."""
    line = typed + data
    end = max(line.rfind(key) for key in _LINE_ENDS)
    return line[end + 1 :] if end >= 0 else line
