"""`Relay`: a detached session's transcript goes to clients as `Output` lines that each fit the
protocol's line limit, however long the text kept while no client was joined."""

from __future__ import annotations

from ddptui.core.detach import wire
from ddptui.core.detach.relay import DROPPED, KEPT, Joined, Relay


def received(lines: list[bytes]) -> str:
    """The text of the `Output`s sent, each line checked against the limit."""
    text = []
    for line in lines:
        assert len(line) <= wire.MAX_LINE, len(line)
        message = wire.decode(line)
        assert isinstance(message, wire.Output)
        text.append(message.text)
    return "".join(text)


def test_text_kept_while_no_client_was_joined_is_sent_in_lines_under_the_limit() -> None:
    relay, sent = Relay(), []
    flood = "\x1b[31m\u2500" * (KEPT // 6) + "\U0001f600" * 1000  # escaped 6 and 12 bytes a character
    relay.write(flood)
    relay.flush()  # no client: kept
    relay.to(Joined(sent.append))
    assert len(sent) > 1
    assert received(sent) == flood


def test_the_oldest_text_past_what_is_kept_is_dropped_and_said() -> None:
    relay, sent = Relay(), []
    for _ in range(3):
        relay.write("x" * KEPT)
        relay.flush()
    relay.to(Joined(sent.append))
    assert received(sent) == DROPPED + "x" * KEPT


def test_a_running_lines_long_text_goes_to_its_client_in_lines_under_the_limit() -> None:
    relay, sent = Relay(), []
    relay.to(Joined(sent.append))
    relay.write("\x00" * (wire.MAX_LINE // 2))
    relay.flush()
    assert received(sent) == "\x00" * (wire.MAX_LINE // 2)
