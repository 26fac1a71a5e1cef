"""Checks of the script a `ddptui` command line names, before any rank starts."""

from __future__ import annotations

import os


class ScriptError(Exception):
    """A script that cannot run; the message is one line."""


def check_script(path: str) -> None:
    """Fail early, in one line, on a script that does not exist or does not compile."""
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, "__main__.py")):
            raise ScriptError(f"{path} is a directory without __main__.py")
        return
    try:
        with open(path, "rb") as script:
            source = script.read()
    except FileNotFoundError:
        raise ScriptError(f"no such script: {path}") from None
    except OSError as exc:
        raise ScriptError(f"cannot read {path}: {exc.strerror}") from None
    try:
        compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        raise ScriptError(
            f"cannot run {path}: {type(exc).__name__}: {exc.args[0] if exc.args else exc}{where}"
        ) from None
