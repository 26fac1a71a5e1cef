"""`RankTransport`: the one interface through which the core reaches a rank.

A rank is a terminal (bytes both ways, a size), a link (events in, requests out) and a life (it
exits; it can be interrupted, sampled and ended). Ranks ddptui spawns on this machine implement it
with a pty and a unix socket (`ddptui.core.transport.local`); ranks that dial in from elsewhere implement it
over their own connection. Nothing outside an implementation knows about pids, ptys or `/proc`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from typing import TypeVar

from ddptui.core.transport.channel import Connection
from ddptui.rank.asks import Ask
from ddptui.rank.protocol import Identity, Message, ProtocolError

R = TypeVar("R")


class RequestError(Exception):
    """A request the rank gave no value for: no link, a timeout, a malformed reply, or the rank's
    own error (`by_rank`); its text says which."""

    def __init__(self, why: str, by_rank: bool = False) -> None:
        super().__init__(why)
        self.by_rank = by_rank
        """The rank answered with an error of its own (the expression it evaluated raised, say)."""


def answered(answers: Mapping[int, R | RequestError]) -> dict[int, R]:
    """The values of the ranks that gave one (`Session.ask`'s answers without the failures)."""
    return {index: answer for index, answer in answers.items() if not isinstance(answer, RequestError)}


class RankTransport(abc.ABC):
    """How the core talks to one rank; callbacks are set by the `Rank` that owns it."""

    dials_in = False
    """True for a rank whose process connects to ddptui on its own (a wrapped job's, one of
    `ddptui listen`): until it does, ddptui cannot reach it."""

    def __init__(self) -> None:
        self.on_output: Callable[[bytes], None] = lambda data: None
        """Called with every chunk the rank's terminal printed."""
        self.on_message: Callable[[Message], None] = lambda message: None
        """Called with every event the rank sent (never a `Hello` or `Reply`)."""
        self.on_exit: Callable[[int], None] = lambda code: None
        """Called once with the exit status (negative: killed by that signal)."""
        self.identity: Identity | None = None
        """Who the rank said it is, once its link said hello."""
        self.connection: Connection | None = None
        """The rank's authenticated link, once it said hello."""

    @abc.abstractmethod
    def write(self, data: bytes) -> None:
        """Type bytes into the rank's terminal (queued if it does not take them now)."""

    @abc.abstractmethod
    def resize(self, columns: int, lines: int) -> None:
        """Set the rank's terminal size."""

    UNLINKED = "the rank has no ddptui link (not started yet, or not a ddptui rank)"
    """Why a request fails before the rank's link said hello."""

    async def request(self, ask: Ask[R], timeout: float) -> R:
        """Ask the rank something over its link: its reply, of the type `ask` declares; raise
        RequestError when there is none."""
        if self.connection is None:
            raise RequestError(self.UNLINKED)
        try:
            reply = await self.connection.request(ask, timeout)
        except (TimeoutError, ConnectionError) as exc:
            raise RequestError(str(exc) or "no reply in time") from None
        if not reply.ok:
            raise RequestError(reply.error, by_rank=True)
        try:
            return ask.read_reply(reply.value)
        except ProtocolError as exc:
            raise RequestError(f"a malformed reply ({exc})") from None

    @abc.abstractmethod
    async def stack_dump(self) -> str:
        """Every thread's stack as a faulthandler dump, even while the rank holds the GIL."""

    @abc.abstractmethod
    def activity(self) -> tuple[float, bool] | None:
        """CPU seconds used by the rank and its children, and whether any is runnable now.

        None when unknown (a remote rank): the caller then trusts the rank's own reports.
        """

    def catch_up(self) -> None:
        """Take in what the rank's link already delivered, before the event loop gets to it.

        Call it before acting on what the rank's terminal shows: the `paused` the rank sent just
        before the prompt must not be handled after a command typed at that prompt.
        """
        if self.connection is not None:
            self.connection.read_now()

    @property
    def linked(self) -> bool:
        """True once the rank's link said hello (requests and dumps can be served)."""
        return self.connection is not None

    @property
    @abc.abstractmethod
    def closed(self) -> bool:
        """True once the terminal is closed (the rank is gone or its output is fully read)."""
