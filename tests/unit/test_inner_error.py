"""`innermost`: the error a wrapper carries as text, made the way torch makes it."""

from __future__ import annotations

import sys

import pytest
from torch._utils import ExceptionWrapper

from ddptui.core.model.inner_error import innermost
from ddptui.core.model.state import Frame

OUTER = (Frame("train.py", 30, "main"), Frame("/site-packages/torch/_utils.py", 700, "reraise"))


def sample(index: int) -> None:
    {}[f"sample {index}"]


def wrapped(where: str, chained: bool = False) -> BaseException:
    """The exception torch raises in the rank for one raised `where` (a worker, a thread)."""
    try:
        try:
            sample(5)
        except KeyError:
            if not chained:
                raise
            raise ValueError("could not load\nsecond line")  # noqa: B904 (chained: "During handling ...")
    except Exception:
        wrapper = ExceptionWrapper(sys.exc_info(), where=where)
    with pytest.raises(Exception) as raised:
        wrapper.reraise()
    return raised.value


def test_a_dataloader_workers_error_is_found_with_its_frames() -> None:
    exc = wrapped("in DataLoader worker process 3")
    assert type(exc).__name__ == "KeyError"
    kind, message, frames = innermost("KeyError", str(exc), OUTER)
    assert (kind, message) == ("KeyError", "'sample 5' (in DataLoader worker process 3)")
    assert frames[:2] == OUTER
    assert [f.func for f in frames[2:]] == ["wrapped", "sample"]
    assert frames[-1] == Frame(__file__, sample.__code__.co_firstlineno + 1, "sample")


def test_of_chained_errors_the_one_raised_is_named_with_every_line_kept() -> None:
    exc = wrapped("in pin memory thread for device 0", chained=True)
    kind, message, frames = innermost("ValueError", str(exc), OUTER)
    assert kind == "ValueError"
    assert message == "could not load (in pin memory thread for device 0)\nsecond line"
    assert frames[-1].func == "wrapped"


@pytest.mark.parametrize(
    "message",
    [
        "plain message",
        "Traceback (most recent call last):\n but no frame",
        'Traceback (most recent call last):\n  File "x.py", line 3, in f\n    f()\n\n  not an error line',
    ],
)
def test_a_message_without_a_whole_traceback_is_left_as_it_is(message: str) -> None:
    assert innermost("RuntimeError", message, OUTER) == ("RuntimeError", message, OUTER)
