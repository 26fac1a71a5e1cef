"""Where a rank died of a fatal signal: real faulthandler dumps of real crashes, and captured ones."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import SCRIPTS

from ddptui.core.model.fatal import FatalDeath, fatal_site, qualified_name, read_death
from ddptui.core.model.stacks import Frame
from ddptui.core.model.state import short_path

SITE = "/venv/lib/python3.11/site-packages"
STDLIB = sysconfig.get_paths()["stdlib"]
LAUNCH = (
    "import sys; from ddptui.rank import fatal; fatal.install(sys.argv[1]); "
    "import runpy; runpy.run_path(sys.argv[2], run_name='__main__')"
)


def line_of(script: Path, text: str) -> int:
    """The number of the first line of `script` containing `text`."""
    lines = script.read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_rank(script: Path, dump: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `script` as rank 0 of 1 with the fatal-signal dump installed, as the rank bootstrap would."""
    rank_env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}
    return subprocess.run(
        [sys.executable, "-c", LAUNCH, str(dump), str(script)],
        env={**os.environ, **rank_env, "MASTER_PORT": str(free_port()), **env},
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_segfault_in_a_library_call_names_the_script_line_and_the_call(tmp_path: Path) -> None:
    script, dump = SCRIPTS / "segfault.py", tmp_path / "fatal-0.txt"
    result = run_rank(script, dump)
    assert result.returncode == -signal.SIGSEGV
    text = dump.read_text()
    assert text.startswith("Fatal Python error: Segmentation fault")
    assert "\nThread 0x" in text  # every thread is dumped; the idle one must not be taken
    line = line_of(script, "ctypes.string_at(0)")
    assert fatal_site(text) == f"at {short_path(str(script))}:{line} (in string_at)"


def test_abort_names_the_script_line_alone(tmp_path: Path) -> None:
    script, dump = SCRIPTS / "segfault_abort.py", tmp_path / "fatal-0.txt"
    result = run_rank(script, dump)
    assert result.returncode == -signal.SIGABRT
    assert dump.read_text().startswith("Fatal Python error: Aborted")
    assert fatal_site(dump.read_text()) == f"at {short_path(str(script))}:{line_of(script, 'os.abort()  #')}"


def test_ddp_with_debug_detail_segfaults_in_ddp_init(tmp_path: Path) -> None:
    script, dump = SCRIPTS / "segfault_ddp.py", tmp_path / "fatal-0.txt"
    result = run_rank(script, dump, TORCH_DISTRIBUTED_DEBUG="DETAIL", OMP_NUM_THREADS="1")
    if result.returncode == 0 and "DDP built" in result.stdout:
        pytest.skip("this torch build does not segfault building DDP under TORCH_DISTRIBUTED_DEBUG=DETAIL")
    assert result.returncode == -signal.SIGSEGV, result.stderr[-2000:]
    line = line_of(script, "DistributedDataParallel(torch")
    expected = f"at {short_path(str(script))}:{line} (in DistributedDataParallel.__init__)"
    assert fatal_site(dump.read_text()) == expected


def test_install_with_no_path_does_nothing() -> None:
    code = "import faulthandler; from ddptui.rank import fatal; fatal.install(''); "
    code += "print(faulthandler.is_enabled())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30)
    assert out.stdout.strip() == "False"


def test_a_second_install_moves_the_dump(tmp_path: Path) -> None:
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    code = (
        "import sys, os; from ddptui.rank import fatal; "
        "fatal.install(sys.argv[1]); fatal.install(sys.argv[2]); os.abort()"
    )
    result = subprocess.run([sys.executable, "-c", code, str(first), str(second)], timeout=30)
    assert result.returncode == -signal.SIGABRT
    assert first.read_text() == ""
    assert second.read_text().startswith("Fatal Python error: Aborted")


def dump_of(*threads: str, error: str = "Segmentation fault") -> str:
    """A fatal-error dump with the given thread blocks."""
    return f"Fatal Python error: {error}\n\n" + "\n".join(threads)


def thread(header: str, *frames: tuple[str, int, str]) -> str:
    """One thread block of a faulthandler dump, frames innermost first."""
    lines = [f"{header} (most recent call first):"]
    lines += [f'  File "{file}", line {line} in {func}' for file, line, func in frames]
    return "\n".join(lines) + "\n"


def test_the_current_thread_is_read_wherever_it_is_listed() -> None:
    idle = thread("Thread 0x01", (f"{STDLIB}/threading.py", 320, "wait"), ("/home/me/train.py", 9, "loader"))
    dying = thread(
        "Current thread 0x02",
        (f"{SITE}/torch/_tensor.py", 630, "backward"),
        ("/home/me/train.py", 30, "step"),
        ("/home/me/train.py", 41, "<module>"),
    )
    assert fatal_site(dump_of(idle, dying)) == "at train.py:30 (in backward)"
    assert fatal_site(dump_of(dying, idle)) == "at train.py:30 (in backward)"


def test_the_last_fatal_error_wins() -> None:
    worker = dump_of(thread("Current thread 0x01", ("/home/me/data.py", 5, "__getitem__")))
    rank = dump_of(thread("Current thread 0x02", ("/home/me/train.py", 7, "<module>")), error="Aborted")
    assert fatal_site(worker + "\n" + rank) == "at train.py:7"


def test_collectives_are_named_not_their_wrappers() -> None:
    dying = thread(
        "Current thread 0x02",
        (f"{SITE}/torch/distributed/distributed_c10d.py", 3252, "all_reduce"),
        (f"{SITE}/torch/distributed/c10d_logger.py", 83, "wrapper"),
        ("/home/me/train.py", 30, "step"),
    )
    assert fatal_site(dump_of(dying)) == "at train.py:30 (in all_reduce)"


def test_no_user_frame_names_the_innermost_library_frame() -> None:
    dying = thread(
        "Current thread 0x02",
        (f"{SITE}/torch/nn/parallel/distributed.py", 1473, "_ddp_init_helper"),
        ("<frozen runpy>", 88, "_run_code"),
    )
    expected = "in _ddp_init_helper (torch/nn/parallel/distributed.py:1473)"
    assert fatal_site(dump_of(dying)) == expected


def test_nothing_to_say_without_python_frames() -> None:
    assert fatal_site("") is None
    assert fatal_site(dump_of("Current thread 0x02 (most recent call first):\n  <no Python frame>\n")) is None
    no_current = thread("Thread 0x01", ("/home/me/train.py", 9, "<module>"))
    assert fatal_site(dump_of(no_current)) is None  # a C++ thread died: not the main thread's line


def test_a_gloo_abort_says_what_gloo_threw_and_where_the_main_thread_was() -> None:
    # rank 2 of tests/scripts/tp_mismatch.py as the core holds its terminal: gloo's C++ thread
    # aborts it (no `Current thread`), the main thread waits in the all_reduce it serves
    terminal = (Path(__file__).parent / "fixtures" / "gloo_abort_rank2.log").read_bytes()
    assert fatal_site(terminal.decode()) is None
    death = read_death(terminal)
    assert death is not None
    assert (death.error, death.thrown, death.call) == (
        "Fatal Python error: Aborted",
        "gloo::EnforceNotMet",
        "all_reduce",
    )
    assert death.where == Frame("/job/tp_mismatch.py", 13, "<module>")
    assert death.site == "at tp_mismatch.py:13 (in all_reduce)"
    assert death.reason.startswith("gloo::EnforceNotMet: [enforce fail at ")
    assert death.reason.endswith(
        "Received data size doesn't match expected size. "
        "Is there a distributed collective mismatch in your code?"
    )


def test_a_death_without_a_cpp_exception_says_the_fatal_error() -> None:
    dying = thread("Current thread 0x02", ("/home/me/train.py", 7, "<module>"))
    death = read_death(("noise\r\n" + dump_of(dying)).replace("\n", "\r\n").encode())
    assert death == FatalDeath(
        "Fatal Python error: Segmentation fault",
        where=Frame("/home/me/train.py", 7, "<module>"),
        site="at train.py:7",
    )
    assert death.reason == "Fatal Python error: Segmentation fault"
    assert read_death(b"Traceback (most recent call last):\r\n") is None
    started = thread("Thread 0x01", (f"{STDLIB}/threading.py", 1002, "_bootstrap"))
    assert read_death(dump_of(started).encode()) == FatalDeath("Fatal Python error: Segmentation fault")


SOURCE = """\
class Model:
    @staticmethod
    def forward():
        def inner():
            return 1

        return inner()


def top():
    return [x for x in range(3)]
"""


@pytest.mark.parametrize(
    ("line", "func", "expected"),
    [
        (7, "forward", "Model.forward"),
        (5, "inner", "Model.forward.<locals>.inner"),
        (11, "top", "top"),
        (11, "<listcomp>", "<listcomp>"),  # not a def: the bare name
        (2, "Model", "Model"),  # a decorator runs in the enclosing scope: here the class body
        (7, "backward", "backward"),  # the file changed since the dump: never a wrong name
    ],
)
def test_qualified_name_from_the_source(tmp_path: Path, line: int, func: str, expected: str) -> None:
    source = tmp_path / "model.py"
    source.write_text(SOURCE)
    assert qualified_name(Frame(str(source), line, func)) == expected


def test_qualified_name_without_source_is_the_bare_name(tmp_path: Path) -> None:
    assert qualified_name(Frame(str(tmp_path / "gone.py"), 3, "__init__")) == "__init__"
    assert qualified_name(Frame("<frozen runpy>", 88, "_run_code")) == "_run_code"
    broken = tmp_path / "broken.py"
    broken.write_bytes(b"def f(:\n\xff\n")
    assert qualified_name(Frame(str(broken), 1, "f")) == "f"


def test_rank_side_is_standard_library_only() -> None:
    code = (
        "import sys; before = set(sys.modules); import ddptui.rank.fatal; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "print(','.join(sorted(new - set(sys.stdlib_module_names) - {'ddptui'})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30)
    assert out.stdout.strip() == ""
