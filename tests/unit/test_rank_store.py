"""The rank's `store` answer: which rendezvous store its main thread is creating, read from torch's frame."""

from typing import Any

from ddptui.rank import requests
from ddptui.rank.asks import Store, StoreAddress

RENDEZVOUS = "/venv/lib/python3.11/site-packages/torch/distributed/rendezvous.py"
SOURCE = """
def _create_c10d_store(hostname, port, rank, world_size, timeout, use_libuv=True):
    return ask()
"""


def creating_store(*args: Any) -> Any:
    """Call a `_create_c10d_store` compiled as torch's file, which asks `store` from inside it."""
    scope: dict[str, Any] = {"ask": lambda: requests.store(Store())}
    exec(compile(SOURCE, RENDEZVOUS, "exec"), scope)
    return scope["_create_c10d_store"](*args)


def test_store_names_the_store_being_created_and_whether_this_rank_is_its_client() -> None:
    assert creating_store("localhost", 29500, 1, 2, None) == StoreAddress("localhost", 29500, True)
    assert creating_store("10.0.0.1", 29501, 0, 2, None) == StoreAddress("10.0.0.1", 29501, False)


def test_store_is_none_outside_the_store_creation() -> None:
    assert requests.store(Store()) is None
    scope: dict[str, Any] = {"ask": lambda: requests.store(Store())}
    exec(compile(SOURCE, "/home/me/rendezvous.py", "exec"), scope)  # the user's own function of that name
    assert scope["_create_c10d_store"]("localhost", 1, 1, 2, None) is None
