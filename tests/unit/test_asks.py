"""Typed requests: each kind declared once, refused when built wrong, answered by the rank's table."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ddptui.core.transport.interface import RankTransport, RequestError
from ddptui.rank import requests
from ddptui.rank.asks import (
    KINDS,
    Ask,
    Collectives,
    Eval,
    Skip,
    Stack,
    Store,
    StoreAddress,
    Timeouts,
    UntilArm,
    UntilHold,
    UntilPending,
)
from ddptui.rank.protocol import Frame, ProtocolError, Reply, Request, decode


def test_every_declared_kind_has_a_handler_on_the_rank() -> None:
    assert set(requests.HANDLERS) == set(KINDS.values())


def test_a_request_built_with_a_wrong_field_is_refused_at_construction() -> None:
    with pytest.raises(TypeError, match="exr"):
        Eval(exr="x")  # type: ignore[call-arg]
    with pytest.raises(ProtocolError, match=r"eval\.expr: expected str"):
        Eval(1)  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match=r"skip\.sites"):
        Skip(sites=(("a.py", "3"),))  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match=r"until_collective\.why"):
        UntilHold(None)  # type: ignore[arg-type]
    assert Skip(sites=[["a.py", 3]]).sites == (("a.py", 3),)  # type: ignore[arg-type]  # as JSON gives it


def answer(kind: str, args: dict[str, Any]) -> Reply:
    """The rank's reply to one request, through the JSON the link carries."""
    reply = decode(requests.handle(Request(1, kind, args, 2.0)).encode())
    assert isinstance(reply, Reply)
    return reply


def test_the_rank_refuses_a_kind_or_an_argument_no_one_declared() -> None:
    assert answer("format_disk", {}).error == "unknown request 'format_disk'"
    assert answer("until_collective", {"do": "explode"}).error == "unknown request 'until_collective'"
    refused = answer("eval", {"exr": "1"})
    assert not refused.ok and "Eval has no exr" in refused.error
    refused = answer("collectives", {"last": "all"})
    assert not refused.ok and "collectives.last: expected int" in refused.error
    assert answer("eval", {"expr": "6 * 7"}).value["repr"] == "42"


@pytest.mark.parametrize(
    ("ask", "wire"),
    [
        (Eval("x"), {"expr": "x"}),
        (Eval("x", frame=0), {"expr": "x", "frame": 0}),
        (Skip(), {}),
        (Skip(all=True), {"all": True}),
        (Skip(all=False), {"all": False}),
        (Skip(none=True), {"none": True}),
        (Skip(sites=(("a.py", 3),)), {"sites": [["a.py", 3]]}),
        (Collectives(), {}),
        (Collectives(last=1), {"last": 1}),
        (Stack(), {}),
        (UntilArm(), {"do": "arm"}),
        (UntilHold("it differs"), {"do": "hold", "why": "it differs"}),
    ],
)
def test_requests_keep_their_wire_form(ask: Ask[Any], wire: dict[str, Any]) -> None:
    assert ask.args() == wire
    request = decode(Request(7, ask.KIND, ask.args(), 1.0).encode())
    assert isinstance(request, Request) and KINDS[(ask.KIND, ask.ACTION)].from_args(request.args) == ask


def test_replies_keep_their_wire_form_and_come_back_typed() -> None:
    reply = answer("stack", {})
    main = [thread for thread in reply.value if thread["main"]]
    assert [sorted(thread) for thread in main] == [["ddptui", "frames", "main", "name"]]
    assert all(isinstance(frame, list) for frame in main[0]["frames"])
    threads = Stack().read_reply(reply.value)
    (typed,) = [thread for thread in threads if thread.main]
    assert typed.frames and all(isinstance(frame, Frame) for frame in typed.frames)
    assert answer("skip", {}).value == {"here": None, "sites": [], "all": False}
    assert Store().read_reply({"host": "h", "port": 1, "client": True}) == StoreAddress("h", 1, True)
    assert Store().read_reply(None) is None and UntilPending().read_reply(None) is None


def test_a_reply_of_another_shape_is_refused() -> None:
    with pytest.raises(ProtocolError, match="not a frame"):
        Stack().read_reply([{"name": "M", "main": True, "ddptui": False, "frames": [[1]]}])
    with pytest.raises(ProtocolError, match=r"store reply\.port: expected int"):
        Store().read_reply({"host": "h", "port": "x", "client": True})
    with pytest.raises(ProtocolError, match="timeouts reply: expected float"):
        Timeouts().read_reply({"0": "soon"})
    with pytest.raises(ProtocolError, match="ThreadStack without frames"):
        Stack().read_reply([{"name": "M", "main": True, "ddptui": False}])


class Canned(RankTransport):
    """A transport whose link replies with one canned `Reply`."""

    def __init__(self, reply: Reply) -> None:
        super().__init__()

        class Link:
            async def request(self, ask: Ask[Any], timeout: float) -> Reply:
                return reply

        self.connection = Link()  # type: ignore[assignment]

    def write(self, data: bytes) -> None: ...
    def resize(self, columns: int, lines: int) -> None: ...
    async def stack_dump(self) -> str:
        return ""

    def activity(self) -> None:
        return None

    @property
    def closed(self) -> bool:
        return False


def test_the_transport_gives_a_typed_value_or_says_why_there_is_none() -> None:
    assert asyncio.run(Canned(Reply(1, True, {"0": 1800})).request(Timeouts(), 1.0)) == {"0": 1800}
    with pytest.raises(RequestError, match="ZeroDivisionError") as raised:
        asyncio.run(Canned(Reply(1, False, error="ZeroDivisionError")).request(Eval("1/0"), 1.0))
    assert raised.value.by_rank
    with pytest.raises(RequestError, match="a malformed reply") as raised:
        asyncio.run(Canned(Reply(1, True, ["not", "a", "summary"])).request(Eval("x"), 1.0))
    assert not raised.value.by_rank
