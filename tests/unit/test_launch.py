"""Launch helpers that read the machine: ports."""

import socket

from ddptui.core.launch import free_port, listening


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
