"""Make docs/images/browser.png: the demo's 4 ranks in headless Chromium, served by `ddptui serve`.

A detached session of the demo, `ddptui serve` on a free port, and Chromium (Debian's `chromium`
and `chromium-driver`, driven by selenium) at 1280x800: two F10 and a broadcast `p loss` typed in
the page, then the screenshot. Everything started is ended after. Takes a few seconds.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from ddptui.cli.options import DEMO_SCRIPT

OUT = Path(__file__).resolve().parent / "browser.png"
DDPTUI = [sys.executable, "-m", "ddptui"]
FLAGS = "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-sync"
QUIET = "--disable-background-networking --disable-component-update --window-size=1280,800"
# textual-serve's page keeps its terminal in a closure: catch it as its owner sets `fitAddon`.
HOOK = """Object.defineProperty(Object.prototype, "fitAddon", {configurable: true, set(value) {
  window.ddptuiView = this;
  Object.defineProperty(this, "fitAddon", {value, writable: true, configurable: true});
}});"""
READ = """const view = window.ddptuiView; if (!view) return "";
const buffer = view.terminal.buffer.active, lines = [];
for (let y = 0; y < view.terminal.rows; y++) lines.push(buffer.getLine(y).translateToString(true));
return lines.join("\\n");"""


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def until(condition: object, what: str, timeout: float = 60) -> None:
    """Wait until `condition()` holds."""
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"shoot_browser: {what} did not happen in {timeout:g} s")
        time.sleep(0.1)


def settled(driver: webdriver.Chrome, before: str) -> bool:
    """The page changed since `before` and shows every rank at its prompt, paused in one place."""
    text = str(driver.execute_script(READ))
    return text != before and "(Pdb r3)" in text and re.search(r"r0-3 +paused at", text) is not None


def shoot(url: str, profile: str) -> None:
    """Open the page, step twice, print the loss, save the screenshot."""
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in [*FLAGS.split(), *QUIET.split(), f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    try:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HOOK})
        driver.get(url)
        until(lambda: settled(driver, ""), "the demo's first prompt")
        keys = driver.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea")
        for typed in (Keys.F10, Keys.F10, Keys.F2 + "p loss" + Keys.ENTER):
            before = str(driver.execute_script(READ))
            keys.send_keys(typed)
            until(lambda before=before: settled(driver, before), "a step")  # type: ignore[misc]
        time.sleep(0.5)  # the last frame drawn
        driver.save_screenshot(str(OUT))
    finally:
        driver.quit()


def main() -> None:
    """A detached demo served to Chromium; its screenshot; everything ended."""
    home, profile = tempfile.mkdtemp(prefix="xdg-"), tempfile.mkdtemp(prefix="chromium-")
    env = dict(os.environ, XDG_RUNTIME_DIR=home)
    started = subprocess.run(
        [*DDPTUI, "--nproc-per-node", "4", "--detach", DEMO_SCRIPT],
        env=env, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    session = started.stdout.split()[2]
    server = subprocess.Popen(
        [*DDPTUI, "serve", session, "--port", str(free_port())], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        shoot(server.stdout.readline().split()[6], profile)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(60)
        subprocess.run([*DDPTUI, "kill", session], env=env, capture_output=True, timeout=120)
        for made in (home, profile):
            shutil.rmtree(made, ignore_errors=True)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
