"""Reading faulthandler dumps."""

import sysconfig

from ddptui.core.model.stacks import Frame, blocked_at, joining_store, main_thread, parse_threads

SITE = "/venv/lib/python3.11/site-packages"
DUMP = f'''Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "{SITE}/torch/utils/data/_utils/pin_memory.py", line 50 in _pin_memory_loop

Current thread 0x00007f0000000002 (most recent call first):
  File "{SITE}/torch/distributed/distributed_c10d.py", line 3252 in all_reduce
  File "{SITE}/torch/distributed/c10d_logger.py", line 83 in wrapper
  File "/home/me/train.py", line 30 in step
  File "/home/me/train.py", line 41 in <module>
  File "<frozen runpy>", line 88 in _run_code
'''


def waiting_point(dump: str) -> tuple[Frame | None, str | None]:
    """Where a dump's main thread waits, as the stall watch reads it."""
    return blocked_at(main_thread(parse_threads(dump)))


def test_names_the_user_line_and_the_collective() -> None:
    location, callee = waiting_point(DUMP)
    assert location is not None
    assert (location.file, location.line, location.func) == ("/home/me/train.py", 30, "step")
    assert callee == "all_reduce"


def test_outermost_library_call_when_not_a_collective() -> None:
    dump = f'''Current thread 0x1 (most recent call first):
  File "{SITE}/torch/autograd/graph.py", line 829 in _engine_run_backward
  File "{SITE}/torch/autograd/__init__.py", line 353 in backward
  File "{SITE}/torch/_tensor.py", line 630 in backward
  File "/home/me/train.py", line 12 in <module>
  File "<frozen runpy>", line 88 in _run_code
'''
    location, callee = waiting_point(dump)
    assert location is not None and location.line == 12
    assert callee == "backward"


def test_user_code_itself_running() -> None:
    location, callee = waiting_point(
        'Current thread 0x1 (most recent call first):\n  File "/a/b.py", line 3 in <module>\n'
    )
    assert location is not None and (location.line, callee) == (3, None)


def test_empty_or_garbage_dump() -> None:
    assert waiting_point("") == (None, None)
    assert waiting_point("garbage\n  File nothing\n") == (None, None)


def test_a_rank_busy_in_a_debugger_command_waits_in_the_users_call_not_in_pdb() -> None:
    stdlib = sysconfig.get_paths()["stdlib"]
    dump = f'''Current thread 0x00007f0000000002 (most recent call first):
  File "{stdlib}/threading.py", line 320 in wait
  File "{stdlib}/bdb.py", line 90 in trace_dispatch
  File "/home/me/train.py", line 30 in step
  File "<frozen runpy>", line 88 in _run_code
'''
    location, callee = waiting_point(dump)
    assert str(location) == "train.py:30" and callee == "wait"


def test_joining_store_is_a_stack_standing_in_the_store_creation() -> None:
    joining = f'''Current thread 0x1 (most recent call first):
  File "{SITE}/torch/distributed/rendezvous.py", line 198 in _create_c10d_store
  File "{SITE}/torch/distributed/rendezvous.py", line 270 in _env_rendezvous_handler
  File "{SITE}/torch/distributed/distributed_c10d.py", line 1700 in init_process_group
  File "/home/me/train.py", line 10 in <module>
  File "<frozen runpy>", line 88 in _run_code
'''
    assert joining_store(main_thread(parse_threads(joining)))
    assert not joining_store(main_thread(parse_threads(DUMP)))
    assert not joining_store([])
    # a user function of the same name is not torch's
    assert not joining_store([Frame("/home/me/rendezvous.py", 3, "_create_c10d_store")])
