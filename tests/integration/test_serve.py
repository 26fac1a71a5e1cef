"""`ddptui serve`: a detached session in headless Chromium, through textual-serve, on real ranks.

The page's terminal (xterm.js) draws on a canvas; the test reads what it shows from xterm's own
buffer, reached by a hook the page is given before its script runs.
"""

from __future__ import annotations

import contextlib
import http.client
import select
import shutil
import signal
import socket
import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from conftest import SCRIPTS, Runner, wait_for
from detaching import DETACHED, Sessions, gone, one_line, sessions_fixture  # noqa: F401  (the fixture)
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

STEPS = str(SCRIPTS / "steps.py")
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="headless Chromium is not installed (apt-get install chromium chromium-driver; .ci/run does)",
)
# textual-serve's page keeps its xterm.js terminal in a closure: catch the object that owns it as
# its constructor sets `fitAddon`, just after `terminal`.
HOOK = """
Object.defineProperty(Object.prototype, "fitAddon", {configurable: true, set(value) {
  window.ddptuiView = this;
  Object.defineProperty(this, "fitAddon", {value, writable: true, configurable: true, enumerable: true});
}});
"""
READ = """
const view = window.ddptuiView;
if (!view) return [];
const buffer = view.terminal.buffer.active, lines = [];
for (let y = 0; y < view.terminal.rows; y++) lines.push(buffer.getLine(y).translateToString(true));
return lines;
"""


class Page:
    """Headless Chromium showing one page."""

    def __init__(self, profile: Path) -> None:
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in (
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", "--window-size=1280,800",
        ):  # fmt: skip
            options.add_argument(flag)
        self.driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
        self.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HOOK})

    def lines(self) -> list[str]:
        """The rows the page's terminal shows."""
        return [str(line) for line in self.driver.execute_script(READ)]

    def shows(self, *texts: str, timeout: float = 30) -> bool:
        """Wait until the terminal shows every one of `texts`."""
        return wait_for(lambda: all(text in "\n".join(self.lines()) for text in texts), timeout, 0.1)

    def press(self, key: str) -> None:
        """Type into the terminal, as a user whose keyboard is on the page."""
        self.driver.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea").send_keys(key)

    def fills(self) -> bool:
        """True when the app is drawn at the terminal's size: its footer on the last row, a pane's
        border in the last column."""
        lines, columns = (
            self.lines(),
            int(self.driver.execute_script("return window.ddptuiView.terminal.cols")),
        )
        return "Quit" in lines[-1] and max(len(line) for line in lines) == columns

    def closed(self) -> bool:
        """True once the page says its connection closed."""
        return "-closed" in str(self.driver.execute_script("return document.body.className"))


class Served:
    """A running `ddptui serve` and the URL it printed."""

    def __init__(self, runner: Runner, session: str, port: int) -> None:
        self.port = port
        self.process = runner.popen("serve", session, "--port", str(port))
        assert self.process.stdout is not None
        ready = select.select([self.process.stdout], [], [], 60)[0]
        self.line = self.process.stdout.readline() if ready else ""
        prefix = f"ddptui: session {session} in the browser: http://127.0.0.1:{port}/?token="
        assert self.line.startswith(prefix), self.line + self.stderr()
        self.url = self.line.split()[6]
        self.token = self.url.partition("token=")[2]

    def relays(self) -> list[psutil.Process]:
        """The processes serve started (one relay per open tab)."""
        return psutil.Process(self.process.pid).children(recursive=True)

    def stop(self) -> tuple[int, str]:
        """Ctrl+C: its exit status and what else it printed."""
        self.process.send_signal(signal.SIGINT)
        out, _ = self.process.communicate(timeout=60)
        return self.process.returncode, out

    def stderr(self) -> str:
        """What it said on stderr, once it has ended."""
        if self.process.poll() is None or self.process.stderr is None:
            return ""
        return self.process.stderr.read()


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def painted(png: bytes) -> bool:
    """True for a screenshot with more than a few colours (a blank page compresses to a few bytes
    values; text on it to many)."""
    data, at = b"", 8
    while at < len(png):
        size, kind = int.from_bytes(png[at : at + 4], "big"), png[at + 4 : at + 8]
        data += png[at + 8 : at + 8 + size] if kind == b"IDAT" else b""
        at += 12 + size
    return len(set(zlib.decompress(data))) > 32


@pytest.fixture(name="page")
def page_fixture(tmp_path: Path) -> Iterator[Page]:
    """A headless Chromium; it and every process it started are gone afterwards."""
    page = Page(tmp_path / "chromium")
    driver = psutil.Process(page.driver.service.process.pid)
    started = [driver, *driver.children(recursive=True)]
    yield page
    page.driver.quit()
    assert gone(started), [p for p in started if p.is_running()]


@pytest.fixture(name="served")
def served_fixture(sessions: Sessions, ddptui: Runner) -> Iterator[tuple[str, Served]]:
    """A detached session of steps.py (2 ranks) and `ddptui serve` on it, stopped afterwards."""
    session = sessions.detach("--stall-timeout", "3", STEPS)
    served = Served(ddptui, session, free_port())
    yield session, served
    if served.process.poll() is None:
        served.stop()


def opened(page: Page, server: Served) -> list[psutil.Process]:
    """Open the page until it shows both ranks' prompts; the one relay serve started for it."""
    page.driver.get(server.url)
    assert page.shows("(Pdb r0)", "(Pdb r1)"), page.lines()
    relays = server.relays()
    assert len(relays) == 1, relays
    return relays


def state(ddptui: Runner) -> str:
    """`ddptui sessions`' line."""
    return ddptui.run("sessions", timeout=30).stdout


@needs_chromium
def test_the_page_shows_the_app_f10_steps_the_ranks_and_ctrl_d_leaves(
    served: tuple[str, Served], page: Page, ddptui: Runner
) -> None:
    session, server = served
    page.driver.get(server.url)
    assert page.shows("rank 0 · paused at tests/scripts/steps.py:8", "(Pdb r0)", "(Pdb r1)"), page.lines()
    assert painted(page.driver.get_screenshot_as_png())
    assert len(server.relays()) == 1
    page.press(Keys.F10)
    assert page.shows("rank 1 · paused at tests/scripts/steps.py:9", "(Pdb r1) n"), page.lines()
    assert "0-1: paused at tests/scripts/steps.py:9 " in state(ddptui)
    assert wait_for(page.fills, 30), page.lines()
    page.driver.set_window_size(1500, 1000)  # the tab's terminal grows: the app follows it
    assert wait_for(page.fills, 30), page.lines()
    page.press(Keys.CONTROL + "d")
    assert page.shows(f"ddptui: detached from session {session}: reload the page to open it again")
    assert wait_for(page.closed, 30)
    assert gone(server.relays())
    assert "0-1: paused at tests/scripts/steps.py:9 " in state(ddptui)  # the session runs on


@needs_chromium
def test_a_session_that_ends_shows_its_summary_and_ends_serving(
    served: tuple[str, Served], page: Page, ddptui: Runner
) -> None:
    session, server = served
    relays = opened(page, server)
    killed = ddptui.run("kill", session, timeout=60)
    assert killed.returncode == 0, killed.stderr
    assert page.shows("rank 0: paused at tests/scripts/steps.py:8 (ended by ddptui)"), page.lines()
    assert wait_for(page.closed, 30)
    out, _ = server.process.communicate(timeout=30)
    assert server.process.returncode == 0
    assert out == f"ddptui: session {session} has ended: no longer serving it\n"
    assert gone(relays)


UPGRADE = {
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version": "13",
}


def fetch(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """GET: the status and body (no body read for a websocket's 101; the connection then closed)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    with contextlib.closing(connection):
        connection.request("GET", path, headers=headers or {})
        answer = connection.getresponse()
        return answer.status, answer.read() if answer.status != 101 else b""


def handshake(port: int, path: str, origin: str | None = None) -> int:
    """A websocket upgrade request's status."""
    return fetch(port, path, UPGRADE if origin is None else {**UPGRADE, "Origin": origin})[0]


def test_without_the_token_nothing_is_served_and_no_relay_starts(
    served: tuple[str, Served], ddptui: Runner
) -> None:
    _, server = served
    port, token = server.port, server.token
    for path in ("/", "/?token=", f"/?token={token[:-1]}", f"/?token={token}x", "/?tok=" + token):
        assert fetch(port, path) == (403, b""), path
    for path in ("/ws/", "/ws/wrong", f"/ws/{token[:-1]}", f"/ws?token={token}"):
        assert handshake(port, path) in (403, 404), path
    assert handshake(port, f"/ws/{token}", origin="http://evil.example") == 403
    assert server.relays() == []
    status, page = fetch(port, f"/?token={token}")
    assert status == 200 and f'data-session-websocket-url="ws://127.0.0.1:{port}/ws/{token}"'.encode() in page
    assert handshake(port, f"/ws/{token}", origin=f"http://127.0.0.1:{port}") == 101
    assert wait_for(lambda: len(server.relays()) == 1, 30)  # the right token starts one


@needs_chromium
def test_ctrl_c_stops_serving_and_every_relay_and_the_session_runs_on(
    served: tuple[str, Served], page: Page, ddptui: Runner
) -> None:
    session, server = served
    relays = opened(page, server)
    status, out = server.stop()
    assert (status, out) == (0, "")
    assert gone(relays)
    assert wait_for(page.closed, 30)
    assert state(ddptui).startswith(f"{session}  {STEPS}  2 ranks: 0-1: paused at tests/scripts/steps.py:8 ")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("serve",), "no session runs (start one with ddptui --detach SCRIPT)"),
        (("serve", "abcdef"), "no session abcdef (ddptui sessions lists them)"),
        (("serve", "zz"), "'zz' is not a session id"),
        (("serve", "--port", "0"), "argument --port: '0' is not a port (1 to 65535)"),
        (("serve", "--port", "http"), "argument --port: 'http' is not a port (1 to 65535)"),
        (("serve", "--port", "65536"), "argument --port: '65536' is not a port (1 to 65535)"),
    ],
)
def test_bad_input_is_one_line(sessions: Sessions, ddptui: Runner, args: tuple[str, ...], said: str) -> None:
    assert one_line(ddptui, *args).startswith(said)


def test_a_busy_port_and_an_ended_session_are_one_line(sessions: Sessions, ddptui: Runner) -> None:
    session = sessions.detach(STEPS)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        said = one_line(ddptui, "serve", session, "--port", str(port))
    assert said == (
        f"cannot serve on 127.0.0.1:{port}: Address already in use (another port: --port, "
        "another address: --host)"
    )
    said = one_line(ddptui, "serve", session, "--host", "no.such.host.invalid", "--port", str(free_port()))
    assert said.startswith("cannot serve on no.such.host.invalid:"), said
    process, ranks = sessions.process(session), sessions.ranks(session)
    process.kill()  # the session's watchdog ends its ranks
    assert gone([process, *ranks])
    assert one_line(ddptui, "serve", session) == f"session {session} has ended (its process is gone)"


def test_a_tab_whose_session_is_gone_is_told_so_and_closed(sessions: Sessions, ddptui: Runner) -> None:
    relay = subprocess.run(
        ddptui.argv("join", "--web", "abcdef"), input=b"", capture_output=True, env=ddptui.env, timeout=60
    )
    said = b"ddptui: error: no session abcdef (ddptui sessions lists them)\r\n"
    exit_meta = b'{"type": "exit"}'
    assert relay.stdout == (
        b"__GANGLION__\n"
        + b"D" + len(said).to_bytes(4, "big") + said
        + b"M" + len(exit_meta).to_bytes(4, "big") + exit_meta
    )  # fmt: skip
    assert (relay.returncode, relay.stderr) == (2, b"")


@needs_chromium
def test_web_starts_a_detached_session_and_serves_it(sessions: Sessions, page: Page, ddptui: Runner) -> None:
    port = free_port()
    process = ddptui.popen("--web", f"127.0.0.1:{port}", "--stall-timeout", "3", STEPS)
    assert process.stdout is not None
    lines = [process.stdout.readline() for _ in range(2)]  # the session's line, then the URL
    found = DETACHED.match(lines[0].strip())
    assert found, lines
    session = found.group(1)
    prefix = f"ddptui: session {session} in the browser: http://127.0.0.1:{port}/?token="
    assert lines[1].startswith(prefix), lines
    page.driver.get(lines[1].split()[6])
    assert page.shows("(Pdb r0)", "(Pdb r1)"), page.lines()
    page.press(Keys.F10)
    assert page.shows("rank 1 · paused at tests/scripts/steps.py:9"), page.lines()
    process.send_signal(signal.SIGINT)  # serving stops; the session runs on
    assert process.wait(timeout=60) == 0
    assert "0-1: paused at tests/scripts/steps.py:9 " in state(ddptui)


def test_web_with_a_busy_port_or_a_bad_address_starts_nothing(sessions: Sessions, ddptui: Runner) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        said = one_line(ddptui, "--web", f"127.0.0.1:{port}", STEPS)
        assert said == f"--web {port} is busy on 127.0.0.1: Address already in use"
    assert (
        one_line(ddptui, "--web", "127.0.0.1:http", STEPS)
        == "--web 127.0.0.1:http: 'http' is not a port (1 to 65535)"
    )
    assert one_line(ddptui, "--web", "0", STEPS) == "--web 0: '0' is not a port (1 to 65535)"
    assert sessions.files() == []
