"""The wire form of messages: the hand-formatted `Paused` line is the generic one; frames always decode."""

from __future__ import annotations

import json
import sys
import types

import pytest

from ddptui.rank.frames import location
from ddptui.rank.protocol import Frame, Message, Paused, ProtocolError, decode


@pytest.mark.parametrize(
    "paused",
    [
        Paused(Frame("/tmp/train.py", 12, "<module>")),
        Paused(Frame('/tmp/a "quoted"\\ path\n/é ☃.py', 0, "f\x00g"), post_mortem=True, depth=7),
        Paused(Frame("", 10**9, ""), depth=0),
        Paused(Frame("/tmp/train.py", 19, "<module>"), why="breakpoint"),
    ],
)
def test_paused_line_is_the_generic_line(paused: Paused) -> None:
    """Same bytes as `Message.encode`, and it decodes back to the same message."""
    line = paused.encode()
    assert line == Message.encode(paused)
    assert decode(line.rstrip(b"\n")) == paused


@pytest.mark.parametrize(
    "line",
    [
        b'{"k":"paused"}',
        b'{"k":"paused","frame":"train.py:12"}',
        b'{"k":"paused","frame":["train.py","12","f"]}',
        b'{"k":"paused","frame":["train.py",12,"f"],"post_mortem":1}',
        b'{"k":"paused","frame":["train.py",12,"f"],"depth":true}',
        b'{"k":"paused","frame":["train.py",12,"f"],"depth":"1"}',
        b'{"k":"paused","frame":["train.py",12,"f"],"why":1}',
        b'["paused"]',
        b"\xff",
    ],
)
def test_a_malformed_paused_is_refused(line: bytes) -> None:
    """`paused` has a decoder of its own (it comes every step): it refuses what the generic one does."""
    with pytest.raises(ProtocolError):
        decode(line)


def test_a_frame_without_a_line_number_is_sent_as_line_0() -> None:
    """Python has no line at some instructions (f_lineno None, seen inside torch's import): a
    `stack` answer taken there must still decode in the core."""

    def here() -> types.FrameType:
        return sys._getframe()

    here.__code__ = here.__code__.replace(co_linetable=b"")
    frame = here()
    assert frame.f_lineno is None
    sent = json.loads(json.dumps(location(frame).to_json()))
    assert Frame.from_json(sent) == Frame(__file__, 0, "here")
