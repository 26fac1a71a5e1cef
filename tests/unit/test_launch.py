"""Launch helpers: ports, and what the ranks' environment says."""

import socket

import pytest

from ddptui.core.session import wrap
from ddptui.core.transport.launch import LaunchSpec, Link, free_port, listening, rank_env
from ddptui.rank.protocol import PLAIN_INPUT_ENV, PLAIN_UNTIL_EDITED


def test_listening_is_true_only_while_a_socket_listens_on_the_port() -> None:
    port = free_port("127.0.0.1")
    assert not listening("127.0.0.1", port)
    with socket.socket() as bound:
        bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torch's store does
        bound.bind(("127.0.0.1", port))
        assert not listening("127.0.0.1", port)  # bound, not yet a server
        bound.listen()
        assert listening("127.0.0.1", port)
    assert not listening("127.0.0.1", port)


@pytest.mark.parametrize("line_editing", [True, False])
def test_plain_input_is_said_only_by_this_session(
    monkeypatch: pytest.MonkeyPatch, line_editing: bool
) -> None:
    """Batch ranks read plain lines, others until a user types; a ddptui run inside a batch rank
    does not inherit that."""
    monkeypatch.setenv(PLAIN_INPUT_ENV, "1")
    spec, link = LaunchSpec("train.py", line_editing=line_editing), Link("/s", "/d", "t")
    for env in (rank_env(spec, 0, 29500, "run", link), wrap.launcher_env(spec, link)):
        assert env.get(PLAIN_INPUT_ENV) == (PLAIN_UNTIL_EDITED if line_editing else "1")
