"""Events a rank says in its terminal, taken out of its output before anything reads it.

A rank whose stdout is its terminal says `paused` there, as an OSC sequence just before its
prompt (`protocol.MARK_INTRO`): the event then arrives with the prompt, in order, on the one
channel the core reads anyway. Only a mark with the session's key, and whose JSON is a `Paused`,
is an event; anything else that looks like one is output, passed on as the rank printed it.
"""

from __future__ import annotations

from ddptui.rank.protocol import MARK_END, MARK_INTRO, MAX_MARK, Message, Paused, ProtocolError, decode

_DECODED: dict[bytes, Paused | None] = {}
"""Marks' bodies already decoded (ranks in lockstep say the same `paused` each step: the JSON
is read once a step, not once a rank); emptied when it holds `_DECODED_MAX`."""
_DECODED_MAX = 1024


class MarkReader:
    """Splits one rank's output into output and events, in order; a mark cut by a read is held."""

    def __init__(self, key: bytes) -> None:
        self._key = key + b";" if key else b""
        """What a mark's body starts with; empty (no key yet): no mark is an event."""
        self._held = b""

    def feed(self, data: bytes) -> tuple[bytes, list[Message]]:
        """The output in `data` (after what was held) without its marks, and the events they carry.

        Each event is what the rank said just before the prompt that follows it: handling the
        events of a read after its output changes nothing a view or a waiter can tell.
        """
        if self._held:
            data, self._held = self._held + data, b""
        at = data.find(MARK_INTRO)
        if at < 0:  # nearly always: one find in C
            cut = _cut_intro(data)
            if cut < len(data):
                data, self._held = data[:cut], data[cut:]
            return data, []
        end = data.find(MARK_END, at, at + MAX_MARK)
        if end >= 0 and data.find(b"\x1b", end) < 0:  # one whole mark, then plain text (a prompt): every step
            message = self._event(data[at + len(MARK_INTRO) : end])
            if message is not None:
                return data[:at] + data[end + 1 :], [message]
        kept: list[bytes] = []
        events: list[Message] = []
        out = search = 0  # output not yet kept starts at `out`; the next mark is looked for from `search`
        while (at := data.find(MARK_INTRO, search)) >= 0:
            end = data.find(MARK_END, at, at + MAX_MARK)
            if end < 0:
                if len(data) - at < MAX_MARK:  # the rest of the mark is still on its way
                    data, self._held = data[:at], data[at:]
                    break
                search = at + 1  # never ended: output
                continue
            message = self._event(data[at + len(MARK_INTRO) : end])
            if message is None:
                search = at + 1
                continue
            kept.append(data[out:at])
            events.append(message)
            out = search = end + 1
        else:
            cut = max(_cut_intro(data), out)
            data, self._held = data[:cut], data[cut:]
        kept.append(data[out:])
        return b"".join(kept), events

    def flush(self) -> bytes:
        """What is held (the rank's output ended inside something that looked like a mark)."""
        held, self._held = self._held, b""
        return held

    def _event(self, body: bytes) -> Message | None:
        """The `Paused` a mark's body carries under this session's key, else None."""
        if not self._key or not body.startswith(self._key):
            return None
        if body in _DECODED:
            return _DECODED[body]
        try:
            message = decode(body[len(self._key) :])
        except ProtocolError:
            message = None
        if len(_DECODED) >= _DECODED_MAX:
            _DECODED.clear()
        _DECODED[body] = paused = message if isinstance(message, Paused) else None
        return paused


def _cut_intro(data: bytes) -> int:
    """Where a beginning of `MARK_INTRO` ends `data` (len(data) when none does)."""
    at = data.rfind(b"\x1b", max(len(data) - len(MARK_INTRO) + 1, 0))
    if at >= 0 and MARK_INTRO.startswith(data[at:]):
        return at
    return len(data)
