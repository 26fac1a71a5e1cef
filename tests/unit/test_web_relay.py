"""The packets of textual-serve's protocol, as `ddptui join --web` reads and writes them."""

from __future__ import annotations

import pytest

from ddptui.core.detach.web_relay import DATA, META, Packets, packet, size_from


def test_packets_come_whole_however_the_bytes_are_split() -> None:
    stream = packet(DATA, b"\x1b[21~") + packet(META, b'{"type": "resize", "width": 90, "height": 30}')
    packets = Packets()
    found = [found for at in range(len(stream)) for found in packets.feed(stream[at : at + 1])]
    assert found == [(DATA, b"\x1b[21~"), (META, b'{"type": "resize", "width": 90, "height": 30}')]
    assert list(Packets().feed(packet(DATA, b""))) == [(DATA, b"")]


def test_an_overlong_packet_is_refused_before_it_is_read() -> None:
    with pytest.raises(ValueError, match="a packet of"):
        list(Packets().feed(b"D" + (1 << 30).to_bytes(4, "big")))


def test_the_size_textual_serve_gives() -> None:
    assert size_from({"COLUMNS": "132", "ROWS": "41"}) == (132, 41)
    assert size_from({"COLUMNS": "wide", "ROWS": "41"}) == (80, 24)
    assert size_from({}) == (80, 24)
