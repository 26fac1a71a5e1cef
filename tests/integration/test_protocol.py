"""The two-way rank protocol on real ranks: requests answered in every state, and its security."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import TypeVar

import pyte
import pytest
from conftest import SCRIPTS, running_session

from ddptui.core.model.answers import answer_lines
from ddptui.core.model.state import Phase
from ddptui.core.session.session import Session
from ddptui.core.transport.interface import RequestError
from ddptui.core.transport.local import LocalRank
from ddptui.rank import protocol
from ddptui.rank.asks import Ask, Eval, Stack, ThreadStack
from ddptui.rank.protocol import Frame, Hello, Identity, Paused, Welcome

TIMEOUT = 60
R = TypeVar("R")


async def ask(session: Session, request: Ask[R], timeout: float = 5.0) -> dict[int, R]:
    """Ask every rank; every one must answer with a value."""
    answers = await session.ask(request, range(len(session.ranks)), timeout)
    values = {index: answer for index, answer in answers.items() if not isinstance(answer, RequestError)}
    assert len(values) == len(answers), answers
    return values


async def refused(session: Session, request: Ask[object], timeout: float = 5.0) -> str:
    """Ask the one rank; it must answer with an error of its own, returned."""
    (answer,) = (await session.ask(request, range(len(session.ranks)), timeout)).values()
    assert isinstance(answer, RequestError) and answer.by_rank, answer
    return str(answer)


def main_frames(threads: tuple[ThreadStack, ...]) -> list[Frame]:
    """The main thread's frames of a `stack` reply, outermost first."""
    (main,) = [thread for thread in threads if thread.main]
    return list(main.frames)


async def reach(session: Session, mode: str) -> None:
    """Wait until the ranks are in the state `mode` names (a prompt, a collective, a busy loop)."""
    if mode in ("prompt", "crash"):
        ok = await session.wait_until(lambda: all(r.state.at_prompt for r in session.ranks), TIMEOUT)
        assert ok, [r.state for r in session.ranks]
        return
    inside = {"collective": "all_reduce", "busy": "spin"}[mode]
    for _ in range(TIMEOUT * 10):
        stacks = await ask(session, Stack())
        if inside in (frame.func for frame in main_frames(stacks[0])):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"rank 0 never got into {inside}")


@pytest.mark.parametrize("mode", ["prompt", "collective", "busy", "crash"])
async def test_eval_and_stack_answered_in_every_state(mode: str, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    async with running_session(SCRIPTS / "states.py", mode, str(flag)) as session:
        await reach(session, mode)
        answers = await ask(session, Eval("secret"))
        for index, value in answers.items():
            assert value["repr"] == repr(f"rank {index} secret"), value
        stacks = await ask(session, Stack())
        for reply in stacks.values():
            frames = main_frames(reply)
            assert frames[0].file.endswith("states.py"), frames
            assert not any("runpy" in f.file or "ddptui" in f.file for f in frames)
        if mode == "collective":  # rank 0 answers from inside the C++ wait for rank 1
            assert main_frames(stacks[0])[-1].func == "all_reduce", main_frames(stacks[0])
        if mode == "crash":  # post-mortem evaluates in the frame that raised
            frame = (await ask(session, Eval("mode")))[0]
            assert frame["repr"] == "'crash'"
        flag.touch()


async def test_an_expression_that_raises_or_hangs_gets_an_error_reply(tmp_path: Path) -> None:
    async with running_session(SCRIPTS / "states.py", "prompt", str(tmp_path / "go"), nproc=1) as session:
        await reach(session, "prompt")
        assert await refused(session, Eval("1 / 0")) == "ZeroDivisionError: division by zero"
        assert await refused(session, Eval("__import__('time').sleep(30)"), 0.5) == "stopped after 0.5 s"
        assert "no frame 99" in await refused(session, Eval("rank", frame=99))
        # the rank is still at its prompt and answers
        assert (await ask(session, Eval("rank")))[0]["repr"] == "0"
        assert session.ranks[0].state.phase is Phase.PAUSED


def ddptui_threads(threads: tuple[ThreadStack, ...]) -> int:
    """How many of a `stack` reply's threads are ddptui's own."""
    return sum(thread.ddptui for thread in threads)


async def test_an_evaluation_on_a_running_rank_is_answered_now_and_said_to_run_on(tmp_path: Path) -> None:
    flag = tmp_path / "go"
    async with running_session(SCRIPTS / "states.py", "busy", str(flag), nproc=1) as session:
        await reach(session, "busy")
        start = asyncio.get_running_loop().time()  # the program never comes to a prompt: not queued for one
        assert (await ask(session, Eval("secret")))[0]["repr"] == "'rank 0 secret'"
        assert asyncio.get_running_loop().time() - start < 2
        threads = ddptui_threads((await ask(session, Stack()))[0])
        hangs = Eval("__import__('time').sleep(30)")
        said = "still running after 0.5 s (on a ddptui thread: no plain prompt waited)"
        assert await refused(session, hangs, 0.5) == said
        for _ in range(3):  # one evaluation at a time: no thread more for each
            assert (await refused(session, hangs, 0.5)).startswith("still running: the one asked")
        assert (await refused(session, Eval("secret"))).startswith("still running: the one asked")
        assert ddptui_threads((await ask(session, Stack()))[0]) <= threads + 1  # the one still running
        flag.touch()


async def test_huge_values_come_back_summarised_and_cut() -> None:
    async with running_session(SCRIPTS / "big_values.py", nproc=1) as session:
        await reach(session, "prompt")
        tensor = (await ask(session, Eval("big"), timeout=10))[0]
        assert len(json.dumps(tensor)) < 10_000
        text = (await ask(session, Eval("text"), timeout=10))[0]
        assert len(json.dumps(text)) < 10_000
        assert text["repr"].startswith("'xxxx")


def _connect(path: str) -> socket.socket:
    """A raw client of the session's socket."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    return sock


async def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server closed the connection (recv returns b'')."""
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        data = await asyncio.wait_for(loop.sock_recv(sock, 4096), 5)
    except (TimeoutError, ConnectionResetError):
        return False
    return data == b""


async def test_links_without_the_token_get_nothing_and_are_logged(tmp_path: Path) -> None:
    async with running_session(SCRIPTS / "states.py", "prompt", str(tmp_path / "go"), nproc=1) as session:
        await reach(session, "prompt")
        directory = session.state_dir
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
        path = os.path.join(directory, "channel.sock")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        identity = Identity(0, 0, 1, "host", os.getpid())
        forged = Paused(Frame("/evil.py", 1, "evil"))
        for first in (
            Hello(protocol.VERSION, "wrong-token", identity).encode(),
            forged.encode(),
            b"garbage\n",
        ):
            sock = _connect(path)
            sock.sendall(first + forged.encode())
            assert await _closed_by_server(sock)
            sock.close()
        assert str(session.ranks[0].state.location) != "/evil.py:1"
        refused = [n for n in session.notices if n.startswith("refused a connection")]
        assert len(refused) == 3, session.notices
        assert "wrong token" in refused[0] and "paused before hello" in refused[1]


async def _read_to_end(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (at most 5 s)."""
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    data = b""
    async with asyncio.timeout(5):
        while chunk := await loop.sock_recv(sock, 4096):
            data += chunk
    return data


async def test_right_token_but_not_a_rank_is_told_why_and_closed(tmp_path: Path) -> None:
    async with running_session(SCRIPTS / "states.py", "prompt", str(tmp_path / "go"), nproc=1) as session:
        await reach(session, "prompt")
        token = session.resources.server.token  # type: ignore[union-attr]
        sock = _connect(os.path.join(session.state_dir, "channel.sock"))
        sock.sendall(Hello(protocol.VERSION, token, Identity(0, 0, 1, "host", 1)).encode())
        said = await _read_to_end(sock)
        assert [protocol.decode(line) for line in said.splitlines()] == [
            Welcome(refused="not a rank of this session")
        ]
        assert session.notices[-1] == (
            f"rank 0 (pid {os.getpid()}) refused: not a rank of this session; it runs undebugged"
        )


async def test_a_protocol_version_mismatch_is_one_clear_line(tmp_path: Path) -> None:
    async with running_session(SCRIPTS / "states.py", "prompt", str(tmp_path / "go"), nproc=1) as session:
        await reach(session, "prompt")
        token = session.resources.server.token  # type: ignore[union-attr]
        sock = _connect(os.path.join(session.state_dir, "channel.sock"))
        sock.sendall(Hello(99, token, Identity(3, 3, 4, "node7", 1)).encode())
        assert await _closed_by_server(sock)
        assert session.notices[-1] == (
            f"refused a connection from pid {os.getpid()}: rank 3 speaks ddptui protocol v99, this ddptui "
            f"speaks v{protocol.VERSION}: run the ranks with the same ddptui as the front end"
        )


async def test_a_command_typed_in_a_pane_moves_the_rank_as_its_prompt_says(tmp_path: Path) -> None:
    """Ranks send no `running` event: Enter at the pdb prompt marks the rank running, and a
    command that leaves the prompt open (`p`, `interact`) says `paused` again."""
    flag = tmp_path / "go"
    async with running_session(SCRIPTS / "typed.py", str(flag), nproc=1) as session:
        (rank,) = session.ranks
        await reach(session, "prompt")
        assert await session.wait_until(rank.prompt_shown, TIMEOUT)
        before = rank.paused_count
        session.send_input(0, b"p 6 * 7\r")
        assert await session.wait_until(lambda: rank.paused_count > before and rank.prompt_shown(), TIMEOUT)
        assert rank.state.phase is Phase.PAUSED and b"42" in rank.output.tail(64)
        session.send_input(0, b"interact\r")  # Python's prompt: typing there runs no pdb command
        assert await session.wait_until(lambda: rank.output.tail(8).endswith(b">>> "), TIMEOUT)
        session.send_input(0, b"y = 1\r")
        assert await session.wait_until(lambda: rank.output.tail(16).endswith(b">>> "), TIMEOUT)
        assert rank.state.phase is Phase.PAUSED
        session.send_input(0, b"\x04")  # Ctrl-D leaves interact, back at pdb's prompt
        assert await session.wait_until(rank.prompt_shown, TIMEOUT)
        session.send_input(0, b"n\r")  # steps over wait(flag): the rank runs until the flag exists
        assert await session.wait_until(lambda: rank.state.phase is Phase.WAITING, TIMEOUT)  # 2 s idle
        assert "wait" in rank.state.describe()
        flag.touch()
        assert await session.wait_until(lambda: rank.state.at_prompt and rank.prompt_shown(), TIMEOUT)
        assert rank.state.location is not None and rank.state.location.line == 18


async def test_paused_comes_in_the_terminal_and_forged_marks_are_output(tmp_path: Path) -> None:
    """A rank says `paused` in its terminal, under the session's key; the mark never reaches the
    output. The same sequence under another key, printed by the program, is output and no event."""
    async with running_session(SCRIPTS / "hostile.py", nproc=1) as session:
        (rank,) = session.ranks
        await reach(session, "prompt")
        assert await session.wait_until(rank.prompt_shown, TIMEOUT)
        assert rank.state.location is not None and rank.state.location.file.endswith("hostile.py")
        output = rank.output.since(0)
        assert output.count(b"/forged.py") == 2 and protocol.MARK_INTRO + b"0" * 24 in output
        assert session.mark_key not in output
        transport = rank.transport
        assert isinstance(transport, LocalRank) and transport.connection is not None
        on_link: list[object] = []
        transport.connection.bind(lambda message: (on_link.append(message), transport.on_message(message)))
        before = rank.paused_count
        await session.broadcast("p marker")
        assert rank.paused_count == before + 1 and not on_link  # it came in the terminal
        assert session.mark_key not in rank.output.since(0)


C_STDOUT_LINE_BUFFERED = (
    "__import__('ctypes').CDLL(None).__flbf("
    "__import__('ctypes').c_void_p.in_dll(__import__('ctypes').CDLL(None), 'stdout'))"
)


async def test_an_unbuffered_rank_writes_its_prompt_in_one_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under PYTHONUNBUFFERED readline wrote `(Pdb r0) ` a byte a system call: once a prompt
    opened, C's stdout is line-buffered (as on a terminal without -u); Python's stream is not."""
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")
    async with running_session(SCRIPTS / "steps.py", nproc=1) as session:
        await reach(session, "prompt")
        (value,) = (await ask(session, Eval(C_STDOUT_LINE_BUFFERED))).values()
        assert value["repr"] != "0", value
        python_stdout = "__import__('sys').__stdout__.write_through"
        (value,) = (await ask(session, Eval(python_stdout))).values()
        assert value["repr"] == "True", value
        rank, before = session.ranks[0], session.ranks[0].paused_count
        session.send_input(0, b"n\r")
        assert await session.wait_until(lambda: rank.paused_count > before and rank.prompt_shown(), TIMEOUT)
        assert rank.output.tail(9) == b"(Pdb r0) "


TERMINAL_CANONICAL = "__import__('termios').tcgetattr(0)[3] & __import__('termios').ICANON != 0"


@pytest.mark.parametrize("line_editing", [True, False])
async def test_commands_ddptui_sends_are_read_as_plain_lines(line_editing: bool) -> None:
    """readline puts the terminal in raw mode while a prompt waits (and back after each line: 40 %
    of a rank's CPU a step): a command ddptui sends is read as the line discipline's line, the
    terminal staying canonical at the prompt, with line editing for panes or without (`--batch`)."""
    async with running_session(SCRIPTS / "steps.py", nproc=1, line_editing=line_editing) as session:
        await reach(session, "prompt")
        (value,) = (await ask(session, Eval(TERMINAL_CANONICAL))).values()
        assert value["repr"] == "True", value
        rank, mark = session.ranks[0], session.ranks[0].output.end
        await session.broadcast("p 6 * 7")
        assert await session.wait_until(rank.prompt_shown, TIMEOUT)
        assert rank.output.since(mark) == b"p 6 * 7\r\n42\r\n(Pdb r0) "


async def test_broadcasts_sent_together_take_turns() -> None:
    """A broadcast asked for while one is in flight goes once that one is back: each finds every
    rank at its prompt, and each gets its own answers."""
    async with running_session(SCRIPTS / "steps.py", nproc=2) as session:
        await reach(session, "prompt")
        both = asyncio.gather(session.broadcast("p 6 * 7"), session.broadcast("p 'second'"))
        first, second = await asyncio.wait_for(both, TIMEOUT)
        for result, said in ((first, b"42\r\n"), (second, b"'second'\r\n")):
            assert not result.skipped
            assert [answer.rank for answer in result.replies] == [0, 1]
            for answer in result.replies:
                assert said in answer.output and answer.state.phase is Phase.PAUSED, answer
        assert not [answer for answer in first.replies if b"second" in answer.output]


def screen_lines(output: bytes) -> list[str]:
    """The lines a terminal shows for `output`, trailing blanks cut."""
    screen = pyte.Screen(80, 24)
    pyte.ByteStream(screen).feed(output)
    return [line.rstrip() for line in screen.display if line.strip()]


async def test_keys_typed_in_a_pane_get_readline_at_a_plain_prompt() -> None:
    """The first key typed at a prompt that reads plain lines turns it into a readline prompt,
    drawn over the one on screen: completion and history work (history holds the commands ddptui
    sent too), the prompt shows once, and the next command is read plainly again."""
    async with running_session(SCRIPTS / "steps.py", nproc=1) as session:
        await reach(session, "prompt")
        rank = session.ranks[0]
        await session.broadcast("p 6 * 7")
        assert await session.wait_until(rank.prompt_shown, TIMEOUT)
        mark, before = rank.output.end, rank.paused_count
        session.send_input(0, b"p valu")
        assert await session.wait_until(lambda: rank.output.since(mark).endswith(b"valu"), TIMEOUT)
        (value,) = (await ask(session, Eval(TERMINAL_CANONICAL))).values()
        assert value["repr"] == "False", value  # readline has the terminal
        session.send_input(0, b"\t\r")
        assert await session.wait_until(lambda: rank.paused_count > before and rank.prompt_shown(), TIMEOUT)
        assert screen_lines(rank.output.since(0))[-3:] == ["(Pdb r0) p value", "0", "(Pdb r0)"]
        (value,) = (await ask(session, Eval(TERMINAL_CANONICAL))).values()
        assert value["repr"] == "True", value  # plain again, until a key is typed
        before = rank.paused_count
        session.send_input(0, b"\x1b[A\x1b[A\r")  # Up twice: the command ddptui sent
        assert await session.wait_until(lambda: rank.paused_count > before and rank.prompt_shown(), TIMEOUT)
        assert screen_lines(rank.output.since(0))[-3:] == ["(Pdb r0) p 6 * 7", "42", "(Pdb r0)"]


@pytest.mark.parametrize("line_editing", [True, False])
async def test_a_broadcast_clears_a_line_half_typed_in_a_pane_and_says_so(line_editing: bool) -> None:
    """Keys typed in a pane without Enter sit in the rank's line (readline's, or the terminal's):
    a broadcast typed after them would run `p valup 6 * 7`. It empties the line first, on that
    rank only, and says what it cleared; the next broadcast has nothing to clear."""
    async with running_session(SCRIPTS / "steps.py", nproc=2, line_editing=line_editing) as session:
        await reach(session, "prompt")
        assert await session.wait_until(lambda: all(r.prompt_shown() for r in session.ranks), TIMEOUT)
        rank = session.ranks[0]
        mark = rank.output.end
        session.send_input(0, b"p vall\x7fu")  # a typo, rubbed out
        assert await session.wait_until(lambda: rank.output.since(mark).endswith(b"u"), TIMEOUT)
        result = await session.broadcast("p 6 * 7")
        assert result.cleared == {0: "p valu"}
        for answer in result.replies:
            assert answer_lines(answer.output, session.ranks[answer.rank].prompt, "p 6 * 7") == ["42"]
        session.send_input(1, b"p value\r")  # a line typed whole is not a half-typed one
        assert await session.wait_until(lambda: b"10\r\n" in session.ranks[1].output.tail(64), TIMEOUT)
        assert await session.wait_until(lambda: session.ranks[1].prompt_shown(), TIMEOUT)
        result = await session.broadcast("p value")
        assert result.cleared == {}
        prompts = [rank.prompt for rank in session.ranks]
        assert [answer_lines(a.output, prompts[a.rank], "p value") for a in result.replies] == [["0"], ["10"]]
        mark = rank.output.end
        session.send_input(0, b"\x1b[A")  # Up: readline recalls `p value` (or the terminal echoes ^[[A)
        assert await session.wait_until(lambda: rank.output.end > mark, TIMEOUT)
        result = await session.broadcast("p value + 1")
        assert result.cleared == {0: ""}  # keys that read as nothing, a line all the same
        answers = [answer_lines(a.output, prompts[a.rank], "p value + 1") for a in result.replies]
        assert answers == [["1"], ["11"]]


STOPS = """\
import pdb

calls = []


def noisy():
    calls.append(1)
    print("noisy ran")
    return len(calls)


pdb.Pdb().set_trace()
x = 1
y = 2
z = 3
"""


def test_a_stop_reaches_the_terminal_in_one_write(tmp_path: Path) -> None:
    """Where pdb stopped and its prompt go out in one write (on a terminal the `paused` mark goes
    with them): three wake-ups of the core per rank and step were one. Read from a socket that
    keeps writes apart; a `display` expression's own output still comes after the location."""
    script = tmp_path / "stops.py"
    script.write_text(STOPS)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", protocol.PLAIN_INPUT_ENV: "1", protocol.RANK_ENV: "0"}
    for name in (protocol.SOCKET_ENV, "PYTHONBREAKPOINT"):
        env.pop(name, None)
    commands = b"n\ndisplay noisy()\nn\nc\n"
    with ours, theirs:
        rank = subprocess.run(
            [sys.executable, "-m", "ddptui.rank", str(script)],
            input=commands, stdout=theirs, stderr=subprocess.PIPE, env=env, timeout=TIMEOUT, check=False,
        )  # fmt: skip
        theirs.close()
        writes = []
        while packet := ours.recv(65536):
            writes.append(packet.decode())
    assert rank.returncode == 0, rank.stderr
    prompt = "(Pdb r0) "
    assert writes[0] == f"> {script}(13)<module>()\n-> x = 1\n{prompt}"
    assert writes[1] == f"> {script}(14)<module>()\n-> y = 2\n{prompt}"
    noisy = ["noisy ran", "\n"]  # print() writes the text and its end apart
    assert writes[2:6] == [*noisy, "display noisy(): 1\n", prompt]  # the command's own output
    assert writes[6:] == [
        f"> {script}(15)<module>()\n-> z = 3\n",  # before the display runs the program's code
        *noisy,
        "display noisy(): 2  [old: 1]\n",
        prompt,
    ]
